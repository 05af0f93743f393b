//! Vulkan without CUDA: the device, buffers, the command ring and timeline semaphores, on whatever
//! Vulkan driver is installed (CI: Mesa's lavapipe, which `.ci/run` installs and requires with
//! `INTEROP_LAB_REQUIRE_VULKAN=1`). Where no Vulkan is installed these tests say "skipped".

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::rc::Rc;
use std::time::Duration;

use ash::vk as raw;
use interop_lab::vk::commands::CommandRing;
use interop_lab::vk::device::{DeviceChoice, VulkanContext};
use interop_lab::vk::memory::{Buffer, MemoryKind};
use interop_lab::vk::sync::{ExportableBinarySemaphore, Signal, TimelineSemaphore, Wait};

/// A device on any driver, or `None` (skipped) when this machine has no Vulkan.
fn device() -> Option<Rc<VulkanContext>> {
    let opened = VulkanContext::new(&DeviceChoice::Any);
    if let Err(error) = &opened {
        eprintln!("Vulkan: {error}");
    }
    if !common::available(opened.is_ok(), "a Vulkan loader and driver", "INTEROP_LAB_REQUIRE_VULKAN") {
        return None;
    }
    opened.ok()
}

fn words(buffer: &Buffer) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(buffer.host_bytes().expect("host-visible"))
}

#[test]
fn a_buffer_copied_on_the_queue_arrives_whole_after_the_timeline_says_so() {
    let Some(vulkan) = device() else { return };
    let mut random = common::Random::new();
    let count = 4096 + (random.next_u64() % 4096) as usize;
    let input: Vec<u32> = (0..count).map(|_| random.next_u64() as u32).collect();

    let mut source = Buffer::new(&vulkan, count * 4, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    source.host_bytes_mut().unwrap().copy_from_slice(bytemuck::cast_slice(&input));
    let middle =
        Buffer::new(&vulkan, count * 4, raw::BufferUsageFlags::STORAGE_BUFFER, MemoryKind::HostVisible).unwrap();
    let mut out = Buffer::new(&vulkan, count * 4, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    out.host_bytes_mut().unwrap().fill(0xA5); // poison

    // Two submissions ordered only by the timeline: the second waits for the first's signal,
    // which waits for a value the host sets last.
    let timeline = TimelineSemaphore::new(&vulkan, false).unwrap();
    let mut ring = CommandRing::new(&vulkan, 2).unwrap();
    let stage = raw::PipelineStageFlags::TRANSFER;
    ring.submit(&[Wait::timeline(&timeline, 1, stage)], &[Signal::timeline(&timeline, 2)], |r| {
        r.copy(&source, 0, &middle, 0, count * 4)
    })
    .unwrap();
    ring.submit(&[Wait::timeline(&timeline, 2, stage)], &[Signal::timeline(&timeline, 3)], |r| {
        r.copy(&middle, 0, &out, 0, count * 4)
    })
    .unwrap();
    assert!(!timeline.wait(3, Duration::from_millis(50)).unwrap(), "nothing may run before the host signals 1");
    assert_eq!(words(&out), vec![0xA5A5_A5A5; count], "the output was written before its wait was met");
    timeline.signal(1).unwrap();
    assert!(timeline.wait(3, Duration::from_secs(10)).unwrap(), "the submissions did not finish");
    assert_eq!(timeline.value().unwrap(), 3);
    assert_eq!(words(&out), input);
}

#[test]
fn a_ring_of_two_command_buffers_runs_many_submissions_in_order() {
    let Some(vulkan) = device() else { return };
    let frames = 40usize;
    let source = Buffer::new(&vulkan, 16, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    let mut out = Buffer::new(&vulkan, frames * 4, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    out.host_bytes_mut().unwrap().fill(0xFF);
    let scratch = Buffer::new(&vulkan, 4, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    let mut ring = CommandRing::new(&vulkan, 2).unwrap();
    for frame in 0..frames {
        // Each frame fills the scratch word with its number and copies it to its own slot; the
        // ring re-records a command buffer only once its last submission has finished.
        ring.submit(&[], &[], |r| {
            r.transfer_barrier()?; // the last frame's copy has read the word
            r.fill(&scratch, frame as u32)?;
            r.transfer_barrier()?; // the fill is done before the copy reads
            r.copy(&scratch, 0, &out, frame * 4, 4)
        })
        .unwrap();
    }
    assert!(ring.wait_all(Duration::from_secs(10)).unwrap());
    assert_eq!(words(&out), (0..frames as u32).collect::<Vec<_>>());
    drop(source);
}

#[test]
fn a_copy_that_does_not_fit_is_refused_before_it_reaches_the_driver() {
    let Some(vulkan) = device() else { return };
    let small = Buffer::new(&vulkan, 64, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    let large = Buffer::new(&vulkan, 256, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    let mut ring = CommandRing::new(&vulkan, 1).unwrap();
    let refused = ring.submit(&[], &[], |r| r.copy(&large, 0, &small, 0, 128)).err().map(|e| e.to_string());
    assert!(refused.as_deref().is_some_and(|m| m.contains("does not fit")), "{refused:?}");
    let refused = ring.submit(&[], &[], |r| r.copy(&large, 200, &small, 0, 64)).err().map(|e| e.to_string());
    assert!(refused.is_some(), "offset + size past the end");
    // The ring still works after a refused recording.
    ring.submit(&[], &[], |r| r.copy(&large, 0, &small, 0, 64)).unwrap();
    assert!(ring.wait_all(Duration::from_secs(10)).unwrap());
    assert!(Buffer::new(&vulkan, 0, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).is_err());
}

#[test]
fn exportable_memory_gives_a_file_descriptor_where_the_driver_can_export() {
    let Some(vulkan) = device() else { return };
    if !vulkan.description().external_memory_fd {
        eprintln!("skipped: {} has no VK_KHR_external_memory_fd", vulkan.description().name);
        return;
    }
    let buffer = Buffer::new(&vulkan, 1 << 20, raw::BufferUsageFlags::STORAGE_BUFFER, MemoryKind::Exportable).unwrap();
    assert!(buffer.allocation_size() >= 1 << 20);
    let fd = buffer.export_fd().unwrap();
    let file = std::fs::File::from(fd);
    assert!(file.metadata().is_ok(), "the descriptor is open");
    let host = Buffer::new(&vulkan, 64, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap();
    assert!(host.export_fd().is_err(), "host memory was not made exportable");
    let timeline = TimelineSemaphore::new(&vulkan, false).unwrap();
    assert!(timeline.export_fd().is_err(), "a semaphore not made exportable is refused");
}

#[test]
fn a_binary_semaphore_for_gl_and_cuda_exports_or_says_which_extension_is_missing() {
    // The external path's semaphores: Vulkan makes them, GL and CUDA each import a descriptor.
    let Some(vulkan) = device() else { return };
    let made = ExportableBinarySemaphore::new(&vulkan);
    if !vulkan.description().external_semaphore_fd {
        let error = made.err().expect("refused without VK_KHR_external_semaphore_fd").to_string();
        assert!(error.contains("VK_KHR_external_semaphore_fd"), "{error}");
        eprintln!(
            "export skipped: {} has no VK_KHR_external_semaphore_fd (refusal checked)",
            vulkan.description().name
        );
        return;
    }
    let semaphore = made.unwrap();
    let (first, second) = (semaphore.export_fd().unwrap(), semaphore.export_fd().unwrap());
    use std::os::fd::AsRawFd;
    assert_ne!(first.as_raw_fd(), second.as_raw_fd(), "one descriptor per importer");
    for fd in [first, second] {
        assert!(std::fs::File::from(fd).metadata().is_ok(), "the descriptor is open");
    }
}

#[test]
fn a_shared_texture_is_filled_and_exports_its_memory_for_cuda() {
    // Blur's image on the Vulkan path: exportable, uploaded once (then left in the GENERAL
    // layout), and exported for CUDA's import; an ordinary texture refuses to export.
    let Some(vulkan) = device() else { return };
    if !vulkan.description().external_memory_fd {
        eprintln!("skipped: {} has no VK_KHR_external_memory_fd", vulkan.description().name);
        return;
    }
    let graphics = interop_lab::vk::frame::VulkanGraphics::on(vulkan.clone(), [64, 64]).unwrap();
    let pixels: Vec<u8> = (0..40 * 24 * 4).map(|i| i as u8).collect();
    let format = interop_lab::pixel::PixelFormat::Rgba8;
    let shared = graphics.shared_texture([40, 24], format, &pixels).unwrap();
    let (fd, allocation_size) = shared.export().unwrap();
    assert!(allocation_size >= pixels.len() as u64, "{allocation_size} bytes hold the image");
    assert!(std::fs::File::from(fd).metadata().is_ok(), "the descriptor is open");
    let plain = graphics.texture([40, 24], format, &pixels).unwrap();
    assert!(plain.export().is_err(), "a texture not made to share is refused");
    assert!(graphics.shared_texture([40, 24], format, &pixels[..100]).is_err(), "a short upload is refused");
}
