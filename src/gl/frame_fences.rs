//! How far the host may run ahead of GL: a fence after each frame, and a frame that begins waits
//! for the fence of the frame [`GL_FRAMES_QUEUED_AT_MOST`] before it.
//!
//! GL queues what it is given and returns at once. NVIDIA's driver stops the host a few frames
//! ahead on its own; Mesa's llvmpipe does not, and offscreen nothing else does (no swap waits for
//! a display). With its rasterising threads slowed by a busy CPU, every frame the host issues
//! while they catch up waits in host memory to be drawn: ~2 GiB more over 10,000 headless frames
//! beside a build. Waiting on the fence of an older frame bounds that queue on every driver.

use std::time::{Duration, Instant};

use super::Fence;
use crate::error::{Error, Result};

/// Frames GL may hold queued, unfinished, when the next one begins: frame `k` begins once frame
/// `k − GL_FRAMES_QUEUED_AT_MOST` is finished. Two keep the GPU fed (one frame executing while
/// the host issues the next) without letting the host race ahead.
pub const GL_FRAMES_QUEUED_AT_MOST: usize = 2;

/// How long a frame waits for an older one before the wait ends in an error: far beyond any frame
/// the app draws, even on a software driver beside a build, so only a stuck driver reaches it.
pub const GL_FRAME_WAIT_LIMIT: Duration = Duration::from_secs(20);

/// The fences of the last [`GL_FRAMES_QUEUED_AT_MOST`] frames: GL objects, released by
/// [`Self::destroy`] while the context is current.
#[derive(Debug, Default)]
pub struct FrameFences {
    /// A ring: the slot of the frame begun holds the fence of the frame
    /// `GL_FRAMES_QUEUED_AT_MOST` frames ended before it, until it is waited for.
    fences: [Option<Fence>; GL_FRAMES_QUEUED_AT_MOST],
    /// The slot of the frame begun. It moves on as a frame ends, not by frame number, so a frame
    /// that was never ended (or numbers that skip) leave the ring in step.
    slot: usize,
}

impl FrameFences {
    /// No frame fenced yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts frame `frame`: waits (at most [`GL_FRAME_WAIT_LIMIT`]) until GL has finished the
    /// frame [`GL_FRAMES_QUEUED_AT_MOST`] before it. On a timeout that frame's fence is given up,
    /// so the next frame does not wait for it again, and the error says what happened.
    pub fn begin_frame(&mut self, gl: &glow::Context, frame: u64) -> Result<()> {
        let Some(fence) = self.fences[self.slot].take() else {
            return Ok(());
        };
        let started = Instant::now();
        if fence.wait_at_most(gl, GL_FRAME_WAIT_LIMIT)? {
            return Ok(());
        }
        Err(Error::Gl(format!(
            "frame {} was not finished after {:.0} s, and frame {frame} waits for it (at most \
             {GL_FRAMES_QUEUED_AT_MOST} frames are queued): the GL driver is stuck or far behind; on a software \
             driver, a smaller --size or a less busy machine draws faster",
            frame.saturating_sub(GL_FRAMES_QUEUED_AT_MOST as u64),
            started.elapsed().as_secs_f64()
        )))
    }

    /// Ends the frame begun: a fence after everything it issued, for the frame
    /// [`GL_FRAMES_QUEUED_AT_MOST`] later to wait for.
    pub fn end_frame(&mut self, gl: &glow::Context) -> Result<()> {
        let fence = Fence::place(gl)?;
        if let Some(older) = self.fences[self.slot].replace(fence) {
            older.delete(gl); // an end without a begin: nothing waits for the older one any more
        }
        self.slot = (self.slot + 1) % GL_FRAMES_QUEUED_AT_MOST;
        Ok(())
    }

    /// Deletes the fences still held.
    pub fn destroy(&mut self, gl: &glow::Context) {
        for fence in self.fences.iter_mut().filter_map(Option::take) {
            fence.delete(gl);
        }
    }
}

impl Drop for FrameFences {
    fn drop(&mut self) {
        if self.fences.iter().any(Option::is_some) {
            super::warn_leak("FrameFences");
        }
    }
}
