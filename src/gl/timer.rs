//! GPU time of GL work (`GL_TIME_ELAPSED` queries), read back without stalling: a ring of queries,
//! each read only once GL says its result is available, a few frames later.
#![allow(unsafe_code)]

use std::time::Instant;

use glow::HasContext;

use crate::{Error, Result};

/// Queries kept in flight. In a window, results arrive one or two frames after they were issued;
/// headless, the host runs up to ~130 frames ahead of the GPU, and a frame finding every query in
/// flight goes untimed — so the ring is deep enough for nearly every frame to be timed.
const RING: usize = 256;

/// A ring of `GL_TIME_ELAPSED` queries.
pub struct TimerQueries {
    queries: Vec<glow::Query>,
    /// The tag (frame number) and start time of each query whose result has not been read yet.
    pending: [Option<(u64, Instant)>; RING],
    next: usize,
    active: bool,
    tag: u64,
    started: Instant,
}

impl TimerQueries {
    /// Creates the ring.
    pub fn new(gl: &glow::Context) -> Result<Self> {
        let mut queries = Vec::with_capacity(RING);
        for _ in 0..RING {
            // SAFETY: object creation on the current context (GL 3.3 has timer queries).
            queries.push(unsafe { gl.create_query() }.map_err(Error::Gl)?);
        }
        Ok(Self { queries, pending: [None; RING], next: 0, active: false, tag: 0, started: Instant::now() })
    }

    /// Starts timing work tagged `tag` (a frame number), unless every query is still waiting for
    /// its result (then this frame is not timed).
    pub fn begin(&mut self, gl: &glow::Context, tag: u64) {
        if self.active || self.queries.is_empty() || self.pending[self.next].is_some() {
            return;
        }
        self.tag = tag;
        self.started = Instant::now();
        // SAFETY: live query, not active; no other TIME_ELAPSED query is active (self.active).
        unsafe { gl.begin_query(glow::TIME_ELAPSED, self.queries[self.next]) };
        self.active = true;
    }

    /// Stops timing the work issued since [`Self::begin`].
    pub fn end(&mut self, gl: &glow::Context) {
        if !self.active {
            return;
        }
        // SAFETY: a TIME_ELAPSED query is active (begun above).
        unsafe { gl.end_query(glow::TIME_ELAPSED) };
        self.active = false;
        self.pending[self.next] = Some((self.tag, self.started));
        self.next = (self.next + 1) % RING;
    }

    /// The oldest finished measurement, `(tag, microseconds)`, if one is ready (never blocks).
    pub fn poll(&mut self, gl: &glow::Context) -> Option<(u64, f64)> {
        // The oldest pending query is the one issued longest ago: start after `next`.
        for step in 0..RING {
            let slot = (self.next + step) % RING;
            let Some((tag, started)) = self.pending[slot] else {
                continue;
            };
            let query = self.queries[slot];
            // SAFETY: live query that has ended.
            let available = unsafe { gl.get_query_parameter_u32(query, glow::QUERY_RESULT_AVAILABLE) } != 0;
            if !available {
                return None;
            }
            // SAFETY: the result is available, so this does not block.
            let nanoseconds = unsafe { gl.get_query_parameter_u64(query, glow::QUERY_RESULT) };
            self.pending[slot] = None;
            let microseconds = nanoseconds as f64 / 1e3;
            // GPU work can't take longer than the wall time since it was issued; some drivers
            // (Mesa's llvmpipe, seen here) occasionally return garbage, which is dropped.
            if microseconds > started.elapsed().as_secs_f64() * 1e6 {
                log::debug!("dropped an impossible GL timer result of {microseconds} µs");
                return None;
            }
            return Some((tag, microseconds));
        }
        None
    }

    /// Deletes the queries.
    pub fn destroy(&mut self, gl: &glow::Context) {
        if self.active {
            self.end(gl);
        }
        for query in self.queries.drain(..) {
            // SAFETY: live query of the current context, deleted once.
            unsafe { gl.delete_query(query) };
        }
    }
}

impl Drop for TimerQueries {
    fn drop(&mut self) {
        if !self.queries.is_empty() {
            log::warn!("TimerQueries dropped without destroy(): GL queries leak until the context is destroyed");
        }
    }
}
