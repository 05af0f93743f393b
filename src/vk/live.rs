//! How many Vulkan buffers and images (each with its own memory allocation) the app holds, counted
//! where they are made and dropped, so that `soak` can tell a leak across re-allocations on Vulkan
//! as it does with GL's names. The count is the process's: every device's objects together.

use std::sync::atomic::{AtomicU64, Ordering};

static BUFFERS: AtomicU64 = AtomicU64::new(0);
static IMAGES: AtomicU64 = AtomicU64::new(0);

/// What is counted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A `VkBuffer` and its `VkDeviceMemory`.
    Buffer,
    /// A `VkImage`, its view and its `VkDeviceMemory`.
    Image,
}

fn counter(kind: Kind) -> &'static AtomicU64 {
    match kind {
        Kind::Buffer => &BUFFERS,
        Kind::Image => &IMAGES,
    }
}

/// One more object of `kind` is held (called once it exists, so its `Drop` will run).
pub(crate) fn made(kind: Kind) {
    counter(kind).fetch_add(1, Ordering::Relaxed);
}

/// An object of `kind` was destroyed (its `Drop`).
pub(crate) fn dropped(kind: Kind) {
    counter(kind).fetch_sub(1, Ordering::Relaxed);
}

/// The buffers and the images held now.
pub fn counts() -> [(&'static str, u64); 2] {
    [("buffers", BUFFERS.load(Ordering::Relaxed)), ("images", IMAGES.load(Ordering::Relaxed))]
}
