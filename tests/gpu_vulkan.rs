//! Tests that need an NVIDIA GPU with its Vulkan driver: Vulkan allocates, CUDA imports and
//! writes, a timeline semaphore orders the two, and Vulkan reads back what the CPU reference
//! computes; frames without host waits; the driver-call order of a frame; no leak across buffers.
//!
//! Run on the GPU machine with `--include-ignored --test-threads=1` (the leak check reads the
//! device's free memory).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::rc::Rc;
use std::time::Duration;

use ash::vk as raw;
use interop_lab::bench::fill::{KERNEL, launch_fill};
use interop_lab::cuda::{Context, DeviceLimits, Function, Module, Stream};
use interop_lab::runtime::{BackendRequest, CudaOptions};
use interop_lab::transfer::vulkan::{VulkanBuffer, VulkanShare};
use interop_lab::vk::commands::CommandRing;
use interop_lab::vk::device::{DeviceChoice, VulkanContext};
use interop_lab::vk::memory::{Buffer, MemoryKind};

struct Setup {
    // Drop order: Vulkan-side objects and the share before the contexts.
    share: VulkanShare,
    ring: CommandRing,
    vulkan: Rc<VulkanContext>,
    fill: (Function, DeviceLimits),
    _module: Rc<Module>,
    _stream: Rc<Stream>,
    context: Rc<Context>,
    _gl: interop_lab::gl::context::headless::HeadlessGl,
}

fn setup() -> Setup {
    let options = CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() };
    let (gl, selection) = common::gpu_setup(&options);
    let cuda = selection.cuda.clone().unwrap();
    let context = cuda.context.clone();
    let device = context.device();
    let vulkan =
        VulkanContext::new(&DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() }).unwrap();
    let stream = Rc::new(Stream::new(&context).unwrap());
    let share = VulkanShare::new(&vulkan, &context, &stream).unwrap();
    let ring = CommandRing::new(&vulkan, 3).unwrap();
    let module = Module::load(&context, &cuda.compiler.compile(&KERNEL, &[]).unwrap()).unwrap();
    let fill = (module.function("fill").unwrap(), DeviceLimits::from(context.device()));
    Setup { share, ring, vulkan, fill, _module: module, _stream: stream, context, _gl: gl }
}

impl Setup {
    /// CUDA fills `buffer` with `value ^ i`; returns the value Vulkan must wait for.
    fn fill(&mut self, frame: u64, buffer: &VulkanBuffer, value: u32) -> u64 {
        let (function, limits) = &mut self.fill;
        self.share
            .cuda_step(frame, &[buffer], |spans, stream| launch_fill(function, limits, stream, spans[0], value))
            .unwrap()
    }
}

fn host_buffer(vulkan: &Rc<VulkanContext>, bytes: usize) -> Buffer {
    Buffer::new(vulkan, bytes, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cuda_writes_vulkan_memory_and_vulkan_reads_what_the_reference_computes() {
    let mut s = setup();
    let mut random = common::Random::new();
    let words = (1 << 20) + (random.next_u64() % 65536) as usize;
    let value = random.next_u64() as u32;
    let buffer = s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    let mut out = host_buffer(&s.vulkan, words * 4);
    out.host_bytes_mut().unwrap().fill(0x5A);

    // Vulkan poisons the shared buffer first; CUDA's step waits for that submission.
    let poisoned = s.share.submit_read(&mut s.ring, 0, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
        r.fill(buffer.vulkan(), 0xFFFF_FFFF)
    });
    assert!(poisoned.is_ok());
    let ready = s.fill(0, &buffer, value);
    let read = s
        .share
        .submit_read(&mut s.ring, ready, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
            r.copy(buffer.vulkan(), 0, &out, 0, words * 4)
        })
        .unwrap();
    assert!(s.share.read_semaphore().wait(read, Duration::from_secs(10)).unwrap(), "Vulkan never saw CUDA's signal");
    let seen: Vec<u32> = bytemuck::pod_collect_to_vec(out.host_bytes().unwrap());
    let wrong = seen.iter().enumerate().filter(|&(i, &w)| w != value ^ i as u32).count();
    assert_eq!(wrong, 0, "{wrong} of {words} words differ from value ^ index (exact integers: the bound is 0)");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn frames_without_host_waits_each_see_their_own_fill() {
    let mut s = setup();
    let mut random = common::Random::new();
    let frames = 60usize;
    let words = 1 << 18;
    let base = random.next_u64() as u32;
    // Two buffers in turn: CUDA writes one while Vulkan may still read the other.
    let buffers = [
        s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap(),
        s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap(),
    ];
    let mut out = host_buffer(&s.vulkan, frames * 8);
    out.host_bytes_mut().unwrap().fill(0);
    for frame in 0..frames {
        let buffer = &buffers[frame % 2];
        let value = base.wrapping_add(frame as u32);
        let ready = s.fill(frame as u64, buffer, value);
        // Copy the first and the last word of this frame's fill to the frame's own slot.
        s.share
            .submit_read(&mut s.ring, ready, raw::PipelineStageFlags::TRANSFER, &[buffer], |r| {
                r.copy(buffer.vulkan(), 0, &out, frame * 8, 4)?;
                r.copy(buffer.vulkan(), (words - 1) * 4, &out, frame * 8 + 4, 4)
            })
            .unwrap();
    }
    // The only host wait: after the last frame.
    s.share.synchronize(Duration::from_secs(10)).unwrap();
    let seen: Vec<u32> = bytemuck::pod_collect_to_vec(out.host_bytes().unwrap());
    for frame in 0..frames {
        let value = base.wrapping_add(frame as u32);
        assert_eq!(
            [seen[frame * 2], seen[frame * 2 + 1]],
            [value, value ^ (words as u32 - 1)],
            "frame {frame} read another frame's data"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_frame_traces_wait_then_launch_then_signal_then_the_vulkan_submit() {
    let mut s = setup();
    let buffer = s.share.create_buffer(1 << 20, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    let out = host_buffer(&s.vulkan, 4);
    let frame = |s: &mut Setup, n: u64| {
        let ready = s.fill(n, &buffer, n as u32);
        let read = s
            .share
            .submit_read(&mut s.ring, ready, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
                r.copy(buffer.vulkan(), 0, &out, 0, 4)
            })
            .unwrap();
        (ready, read)
    };
    let context = s.context.clone();
    let trace = context.trace();
    trace.end_frame(); // closes the setup list
    let (_, first_read) = frame(&mut s, 0);
    trace.set_per_frame(true);
    let (ready, read) = frame(&mut s, 1);
    trace.end_frame();
    let calls: Vec<(&str, String)> = trace.last_frame().into_iter().map(|e| (e.call, e.detail)).collect();
    let position =
        |name: &str| calls.iter().position(|(c, _)| *c == name).unwrap_or_else(|| panic!("{name} missing: {calls:?}"));
    let (wait, launch, signal, submit) = (
        position("cuWaitExternalSemaphoresAsync"),
        position("cuLaunchKernel"),
        position("cuSignalExternalSemaphoresAsync"),
        position("vkQueueSubmit"),
    );
    assert!(wait < launch && launch < signal && signal < submit, "order: {calls:?}");
    // The values: CUDA waits for the last read of the buffer (frame 0's submit) and signals its
    // write; Vulkan's submit waits for exactly that write and signals the next read.
    assert_eq!((first_read, ready, read), (1, 2, 2), "one step and one submit per frame");
    assert_eq!(calls[wait].1, format!("read ≥ {first_read}"));
    assert_eq!(calls[signal].1, format!("written = {ready}"));
    assert_eq!(calls[submit].1, format!("waits written ≥ {ready}, signals read = {read}"));
    s.share.synchronize(Duration::from_secs(10)).unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn making_and_dropping_shared_buffers_leaks_no_device_memory() {
    let s = setup();
    let bytes = 64 << 20;
    let make_and_drop = |count: usize| {
        for _ in 0..count {
            let buffer = s.share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
            drop(buffer);
        }
    };
    make_and_drop(2); // the driver's first-use allocations
    let (free_before, _) = s.context.memory_info().unwrap();
    make_and_drop(20);
    let (free_after, _) = s.context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    eprintln!("free before {free_before}, after {free_after}: {lost} bytes lost over 20 × 64 MiB");
    assert!(lost < 16 << 20, "{lost} bytes of device memory lost over 20 buffers of 64 MiB");
}
