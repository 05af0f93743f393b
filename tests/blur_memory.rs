//! The CPU blur's host memory on a machine with many cores: on a 32-thread pool every filter takes
//! its working plane and a few lines per thread, never a copy of the image per thread. The bytes
//! are counted by this test binary's allocator, so the bound holds on any machine and allocator.
//!
//! One test in its own binary: the allocator counts every thread of the process, and a test
//! running beside it would add its own allocations to the peak.

#![allow(unsafe_code)] // the counting allocator: `GlobalAlloc` is an unsafe trait
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use interop_lab::demos::blur::cpu::{self, Planes};
use interop_lab::demos::blur::kernels::Filter;
use interop_lab::demos::blur::{BlurSettings, image, run_cpu};
use interop_lab::pixel::PixelFormat;

/// The system allocator, keeping the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn allocated(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn freed(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every method hands its arguments unchanged to `System`, whose contract is the one
// `GlobalAlloc` states; the counters only add and subtract the sizes of what succeeded.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires it.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            allocated(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            allocated(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(pointer, layout) };
        freed(layout.size());
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `pointer` came from `System` with `layout`; `new_size` is the caller's.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            allocated(new_size);
            freed(layout.size());
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One RGBA32F copy of the image: the working plane every filter needs (a separable filter's
/// first pass, which the second reads across; the naive filter's source as floats).
const PLANE_BYTES_PER_PIXEL: usize = 16;

/// Lines of the image's longer side (with its clamped ends) one thread may hold while it filters:
/// the line, its result, and the filter's own (the recursive filter's f64 sums count twice, the
/// box cascade's two running lines once each).
const LINES_PER_THREAD: usize = 6;

#[test]
fn on_32_threads_every_cpu_filter_takes_its_plane_and_a_few_lines_per_thread() {
    let threads = 32;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a 32-thread pool");
    // Not square, and not a multiple of any block or strip, so that rows and columns differ.
    let (width, height) = (2003u32, 1500u32);
    let source = image::test_pattern(width, height);
    let rgba8 = source.rgba8.len() as f64;
    let mut out = vec![0u8; source.rgba8.len()];
    // σ 4 (the recursive filter's least), 2 for the naive filter's (2r + 1)² window.
    let runs = [(Filter::Naive, 2.0), (Filter::Separable, 4.0), (Filter::Box, 4.0), (Filter::Recursive, 4.0)];
    let mut over = Vec::new();
    for (filter, sigma) in runs {
        let settings = BlurSettings { sigma, filter, format: PixelFormat::Rgba8, ..BlurSettings::default() };
        settings.validate().expect("valid settings");
        let reach = match filter {
            Filter::Box => cpu::box_radii(sigma).0.iter().sum::<u32>() as usize,
            Filter::Recursive => 0,
            _ => settings.radius() as usize,
        };
        let line = (width.max(height) as usize + 2 * reach) * std::mem::size_of::<[f32; 4]>();
        let plane = (PLANE_BYTES_PER_PIXEL * width as usize * height as usize) as f64;
        let bound = plane + (threads * LINES_PER_THREAD * line) as f64;
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        // Two frames: the first makes the plane, the second reuses it.
        pool.install(|| {
            let mut planes = Planes::default();
            for _ in 0..2 {
                run_cpu(&source, &settings, &mut planes, &mut out);
            }
        });
        let peak = (PEAK.load(Ordering::Relaxed) - before) as f64;
        let name = filter.name();
        eprintln!(
            "{name}: peak {:.2} × the RGBA8 size on {threads} threads (bound {:.2}: the plane and {LINES_PER_THREAD} \
             lines a thread)",
            peak / rgba8,
            bound / rgba8
        );
        assert!(peak >= plane, "{name}: the measurement sees the plane ({:.2})", peak / rgba8);
        assert!(out.iter().any(|&byte| byte != 0), "{name}: the blur wrote its output");
        if peak > bound {
            over.push(format!("{name}: peak {:.2} × the RGBA8 size, bound {:.2}", peak / rgba8, bound / rgba8));
        }
    }
    assert!(over.is_empty(), "over the bound on {threads} threads: {}", over.join("; "));
}
