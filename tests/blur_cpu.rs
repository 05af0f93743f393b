//! The blur demo on the CPU backend, end to end (drawn with GL, and with Vulkan where it runs): a
//! headless run's --output equals the f64 reference of the same filter within the stated bounds,
//! bad input is named, large images take a few copies of themselves, and the split view's two
//! halves agree where the blur changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::process::Command;

use interop_lab::demos::blur::cpu::{self, Image};
use interop_lab::demos::blur::image::{self, SourceImage};
use interop_lab::pixel::PixelFormat;

fn binary() -> Command {
    match std::env::var_os("INTEROP_LAB_BIN") {
        Some(path) => Command::new(path),
        None => Command::new(env!("CARGO_BIN_EXE_interop-lab")),
    }
}

fn random_source(width: u32, height: u32, random: &mut common::Random) -> SourceImage {
    let mut pattern = image::test_pattern(width, height);
    // Fresh noise on top of the pattern's edges, so every run sees new input.
    for byte in pattern.rgba8.iter_mut() {
        *byte = (f64::from(*byte) + random.range(-40.0, 40.0)).clamp(0.0, 255.0) as u8;
    }
    pattern
}

fn as_f64(image: &Image<f32>) -> Image<f64> {
    Image { width: image.width, height: image.height, pixels: image.pixels.iter().map(|p| p.map(f64::from)).collect() }
}

#[test]
fn headless_cpu_output_matches_the_f64_reference() {
    let dir = std::env::temp_dir().join(format!("interop-lab-blur-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut random = common::Random::new();
    // A prime width and an odd height: tiles never line up with the image.
    let source = random_source(251, 97, &mut random);
    let input = dir.join("input.png");
    image::save(&input, [251, 97], PixelFormat::Rgba8, &source.rgba8).expect("save input");
    // The Vulkan renderer writes the same output from the memory it draws (where Vulkan runs).
    let vulkan = interop_lab::vk::frame::VulkanGraphics::new(&interop_lab::vk::device::DeviceChoice::Any, [8, 8]);
    let renderers: &[&str] =
        if common::available(vulkan.is_ok(), "a Vulkan 1.3 loader and driver", "INTEROP_LAB_REQUIRE_VULKAN") {
            &["gl", "vulkan"]
        } else {
            &["gl"]
        };
    drop(vulkan);
    let runs = [("separable", 3.5), ("box", 6.0), ("naive", 1.5), ("recursive", 6.0)];
    for (renderer, (variant, sigma)) in renderers.iter().flat_map(|r| runs.iter().map(move |v| (r, v))) {
        let (variant, sigma) = (*variant, *sigma);
        let output = dir.join(format!("{variant}-{renderer}.png"));
        let status = binary()
            .args([
                "blur",
                "--renderer",
                renderer,
                "--headless",
                "--backend",
                "cpu",
                "--frames",
                "1",
                "--size",
                "200x120",
                "--variant",
                variant,
            ])
            .arg("--sigma")
            .arg(sigma.to_string())
            .arg("--image")
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .output()
            .expect("run");
        assert!(status.status.success(), "{variant} on {renderer}: {}", String::from_utf8_lossy(&status.stderr));
        let out = image::load(&output, 0).expect("output written");
        assert_eq!((out.width, out.height), (251, 97));
        let exact = source.to_float_image(PixelFormat::Rgba8);
        let reference = if variant == "box" {
            cpu::reference_boxes(&as_f64(&exact), cpu::box_radii(sigma).0)
        } else if variant == "recursive" {
            cpu::reference_recursive(&as_f64(&exact), &cpu::RecursiveGaussian::new(sigma))
        } else {
            cpu::reference_gaussian(&as_f64(&exact), &cpu::gaussian_weights(sigma, cpu::default_radius(sigma)))
        };
        let (mut max, mut sum) = (0.0f64, 0.0f64);
        for (o, r) in out.rgba8.chunks_exact(4).zip(&reference.pixels) {
            for c in 0..4 {
                let d = (f64::from(o[c]) - r[c]).abs();
                max = max.max(d);
                sum += d;
            }
        }
        let mean = sum / (reference.pixels.len() * 4) as f64;
        // RGBA8: f32 sums then rounding to the nearest level: at most one level off, rarely.
        assert!(max <= 1.0 && mean < 0.3, "{variant} on {renderer}: max {max}, mean {mean}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn blur_bad_input_is_named_and_nothing_panics() {
    let dir = std::env::temp_dir().join(format!("interop-lab-blur-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("corrupt.jpg"), b"\xff\xd8\xff garbage").expect("write");
    let corrupt = dir.join("corrupt.jpg").display().to_string();
    let missing = dir.join("missing.png").display().to_string();
    let base = ["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64"];
    let cases: [(&[&str], &str); 9] = [
        (&["--sigma", "0"], "0 is less than 0.3; the range is 0.3 to 2000 pixels"),
        (&["--sigma", "-2"], "-2 is less than 0.3; the range is 0.3 to 2000 pixels"),
        (&["--sigma", "NaN"], "NaN is not a number; the range is 0.3 to 2000 pixels"),
        (&["--radius", "100000"], "100000 is more than 4096; the range is 1 to 4096 pixels"),
        (&["--variant", "naive", "--sigma", "50"], "beyond its limit of 100"),
        (&["--variant", "box", "--sigma", "1"], "box cascade needs σ ≥ 2"),
        (&["--variant", "recursive", "--sigma", "3"], "recursive filter needs σ ≥ 4"),
        (&["--image", &corrupt], "not a readable PNG or JPEG image"),
        (&["--image", &missing], "missing.png"),
    ];
    for (extra, expected) in cases {
        let output = binary().args(base).args(extra).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?} must fail");
        assert_ne!(output.status.code(), Some(101), "{extra:?} panicked: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr:?} should say {expected:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Host memory a CPU blur may take per pixel beyond the process's own, as a multiple of the
/// image's RGBA8 size: the filters' RGBA32F plane, the source, the bytes uploaded, and the
/// textures and pixel buffer a software GL keeps in host memory (36 bytes a pixel: 9 × 4), and two
/// more for the allocators' and the GL driver's own and the threads' lines (measured at 2048²
/// with Mesa's llvmpipe: 9.0 on 2 threads, 9.2 on 32; NVIDIA's driver took 1.3 more than
/// llvmpipe). It was 13.0 with two planes, 28.6 before the filters ran line by line.
const PEAK_PER_RGBA8: f64 = 11.0;

/// Threads the CPU filters run on in the memory test, whatever the machine: memory that grows
/// with the core count shows on 2 cores too.
const THREADS: &str = "32";

#[test]
fn a_large_image_takes_a_few_copies_of_itself_in_host_memory_not_dozens() {
    let dir = std::env::temp_dir().join(format!("interop-lab-blur-peak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let peak = |size: u32, variant: &str| -> f64 {
        let path = dir.join(format!("{size}.png"));
        let pattern = image::test_pattern(size, size);
        image::save(&path, [size, size], PixelFormat::Rgba8, &pattern.rgba8).expect("save");
        let stats = dir.join(format!("{size}-{variant}.json"));
        let output = binary()
            .args([
                "blur",
                "--headless",
                "--backend",
                "cpu",
                "--frames",
                "2",
                "--size",
                "64x64",
                "--sigma",
                "5",
                "--variant",
            ])
            .arg(variant)
            .arg("--image")
            .arg(&path)
            .arg("--stats")
            .arg(&stats)
            .env_remove("DISPLAY")
            .env("RAYON_NUM_THREADS", THREADS)
            .output()
            .expect("run");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
        report["host_peak_rss_bytes"].as_f64().expect("the peak is reported")
    };
    for variant in ["recursive", "naive"] {
        let baseline = peak(64, variant);
        let size = 2048u32;
        let rgba8 = f64::from(size * size * 4);
        let factor = (peak(size, variant) - baseline) / rgba8;
        eprintln!(
            "{variant}: {size}² image on {THREADS} threads: peak host memory {factor:.1} × its RGBA8 size beyond the \
             baseline"
        );
        assert!(factor > 1.0, "{variant}: the measurement sees the image at all ({factor:.2})");
        assert!(factor <= PEAK_PER_RGBA8, "{variant}: {factor:.1} × the RGBA8 size (bound {PEAK_PER_RGBA8})");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The split view shows the original left of its line and the blur right of it: both halves of a
/// 16-bit grey PNG come from the same conversion, so where the blur changes nothing (inside flat
/// areas wider than its reach) the two are the same pixels, in both formats, and no seam shows.
#[test]
fn where_the_blur_changes_nothing_a_16_bit_grey_png_shows_the_same_pixels_on_both_sides_of_the_split() {
    use interop_lab::demos::blur::kernels::Filter;
    use interop_lab::demos::blur::{BlurSettings, run_cpu};

    let dir = std::env::temp_dir().join(format!("interop-lab-blur-grey16-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // Four flat 32 × 32 squares of 16-bit levels between 8-bit ones (not multiples of 257), so
    // that the conversion to 8 bits has to round.
    let (width, height) = (64u32, 64u32);
    let levels = [1_000u16, 20_100, 40_000, 65_000];
    let grey = ::image::ImageBuffer::from_fn(width, height, |x, y| {
        ::image::Luma([levels[(usize::from(y >= 32) << 1) | usize::from(x >= 32)]])
    });
    let path = dir.join("grey16.png");
    grey.save(&path).expect("save a 16-bit grey PNG");
    let source = image::load(&path, 0).expect("load");
    assert!(source.rgba16.is_some(), "a 16-bit source keeps its 16 bits");
    for format in [PixelFormat::Rgba8, PixelFormat::Rgba32f] {
        let original = source.bytes(format);
        let texel = format.bytes_per_pixel();
        for (filter, sigma) in [(Filter::Separable, 2.0), (Filter::Box, 2.0), (Filter::Naive, 1.0)] {
            let settings = BlurSettings { sigma, filter, format, ..BlurSettings::default() };
            let mut blurred = vec![0u8; original.len()];
            run_cpu(&source, &settings, &mut cpu::Planes::default(), &mut blurred);
            // 12 pixels from every edge between squares: beyond the reach of these filters.
            for (y, x) in (0..height as usize).flat_map(|y| (0..width as usize).map(move |x| (y, x))) {
                let inside = |v: usize| v % 32 >= 12 && v % 32 < 20;
                if !(inside(x) && inside(y)) {
                    continue;
                }
                let at = (y * width as usize + x) * texel;
                let (left, right) = (&original[at..at + texel], &blurred[at..at + texel]);
                let same = match format {
                    PixelFormat::Rgba8 => left == right,
                    PixelFormat::Rgba32f => {
                        let (l, r): (&[f32], &[f32]) = (bytemuck::cast_slice(left), bytemuck::cast_slice(right));
                        l.iter().zip(r).all(|(a, b)| (a - b).abs() <= 1e-6)
                    }
                };
                assert!(
                    same,
                    "{} {}: pixel ({x}, {y}): original {left:?}, blurred {right:?}",
                    format.name(),
                    filter.name()
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
