//! A request to stop, made from outside the frame loop (Ctrl-C, SIGTERM, a closed terminal) and
//! read between frames: the loop finishes the frame it is on, writes every output that was asked
//! for, and returns. The binary installs the signal handler; the library only reads the flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared stop flag; clones see the same flag.
#[derive(Debug, Clone, Default)]
pub struct StopRequest(Arc<AtomicBool>);

impl StopRequest {
    /// A flag nobody has set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop after its current unit of work. Returns whether it was already
    /// asked (a second Ctrl-C).
    pub fn request(&self) -> bool {
        self.0.swap(true, Ordering::SeqCst)
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
