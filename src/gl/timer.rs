//! GPU time of GL work, read back without stalling: a ring of `GL_TIMESTAMP` query pairs
//! (`glQueryCounter` before and after the work), each read only once GL says its result is
//! available, a few frames later. The timestamps are put on the host clock by a calibration
//! (`glGetInteger64v(GL_TIMESTAMP)` between two host clock reads), repeated every few seconds.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use glow::HasContext;

use crate::error::{Error, Result};
use crate::stats::clock_us;

/// Query pairs kept in flight. Results arrive one to a few frames after they were issued (the
/// renderer keeps the host at most a few frames ahead of GL: `FrameFences`), and a frame finding
/// every pair in flight goes untimed, so the ring is deep enough for every frame to be timed.
const RING: usize = 256;

/// How often the GL clock is compared with the host's again (clocks drift apart slowly).
const RECALIBRATE: Duration = Duration::from_secs(2);

/// Where GL's timestamps sit on the host clock.
#[derive(Debug, Clone, Copy)]
pub struct GlClock {
    /// Host µs ([`clock_us`]) minus GL µs.
    pub offset_us: f64,
    /// Half the host time the GL clock read took: how far off the offset can be, µs.
    pub error_us: f64,
    at: Instant,
}

impl GlClock {
    /// Reads GL's clock between two host clock reads.
    pub fn read(gl: &glow::Context) -> Option<Self> {
        let before = Instant::now();
        // SAFETY: a plain state query on the current context (GL 3.3 has timer queries).
        let gl_ns = unsafe { gl.get_parameter_i64(glow::TIMESTAMP) };
        let after = Instant::now();
        if gl_ns <= 0 {
            return None;
        }
        let half = (after - before) / 2;
        Some(Self {
            offset_us: clock_us(before + half) - gl_ns as f64 / 1e3,
            error_us: half.as_secs_f64() * 1e6,
            at: after,
        })
    }
}

/// A ring of `GL_TIMESTAMP` query pairs.
pub struct TimerQueries {
    /// Two per slot: before and after the work.
    queries: Vec<glow::Query>,
    /// The tag (frame number) and start time of each pair whose result has not been read yet.
    pending: [Option<(u64, Instant)>; RING],
    next: usize,
    active: bool,
    tag: u64,
    started: Instant,
    clock: Option<GlClock>,
}

/// One finished measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlTime {
    /// What was timed (a frame number).
    pub tag: u64,
    /// Start on the host clock, µs (`None`: GL's clock could not be read).
    pub start_us: Option<f64>,
    /// GPU time, µs.
    pub microseconds: f64,
}

impl TimerQueries {
    /// Creates the ring.
    pub fn new(gl: &glow::Context) -> Result<Self> {
        let mut queries = Vec::with_capacity(2 * RING);
        for _ in 0..2 * RING {
            // SAFETY: object creation on the current context (GL 3.3 has timer queries).
            queries.push(unsafe { gl.create_query() }.map_err(Error::Gl)?);
        }
        let clock = GlClock::read(gl);
        Ok(Self { queries, pending: [None; RING], next: 0, active: false, tag: 0, started: Instant::now(), clock })
    }

    /// Where GL's timestamps sit on the host clock, as last calibrated.
    pub fn clock(&self) -> Option<GlClock> {
        self.clock
    }

    /// Starts timing work tagged `tag` (a frame number), unless every pair is still waiting for
    /// its result (then this frame is not timed).
    pub fn begin(&mut self, gl: &glow::Context, tag: u64) {
        if self.active || self.queries.is_empty() || self.pending[self.next].is_some() {
            return;
        }
        if self.clock.is_none_or(|clock| clock.at.elapsed() > RECALIBRATE) {
            self.clock = GlClock::read(gl);
        }
        self.tag = tag;
        self.started = Instant::now();
        // SAFETY: live query, not pending (checked above).
        unsafe { gl.query_counter(self.queries[2 * self.next], glow::TIMESTAMP) };
        self.active = true;
    }

    /// Stops timing the work issued since [`Self::begin`].
    pub fn end(&mut self, gl: &glow::Context) {
        if !self.active {
            return;
        }
        // SAFETY: live query of the pair begun above.
        unsafe { gl.query_counter(self.queries[2 * self.next + 1], glow::TIMESTAMP) };
        self.active = false;
        self.pending[self.next] = Some((self.tag, self.started));
        self.next = (self.next + 1) % RING;
    }

    /// The oldest finished measurement, if one is ready (never blocks).
    pub fn poll(&mut self, gl: &glow::Context) -> Option<GlTime> {
        // The oldest pending pair is the one issued longest ago: start after `next`.
        for step in 0..RING {
            let slot = (self.next + step) % RING;
            let Some((tag, started)) = self.pending[slot] else {
                continue;
            };
            let (first, last) = (self.queries[2 * slot], self.queries[2 * slot + 1]);
            // SAFETY: live queries that were issued; a pair's second result is available only
            // after its first.
            let available = unsafe { gl.get_query_parameter_u32(last, glow::QUERY_RESULT_AVAILABLE) } != 0;
            if !available {
                return None;
            }
            // SAFETY: both results are available, so this does not block.
            let (before, after) = unsafe {
                (
                    gl.get_query_parameter_u64(first, glow::QUERY_RESULT),
                    gl.get_query_parameter_u64(last, glow::QUERY_RESULT),
                )
            };
            self.pending[slot] = None;
            let microseconds = after.wrapping_sub(before) as f64 / 1e3;
            // GPU work can't take longer than the wall time since it was issued; some drivers
            // (Mesa's llvmpipe, seen here) occasionally return garbage, which is dropped.
            if after < before || microseconds > started.elapsed().as_secs_f64() * 1e6 {
                log::debug!("dropped an impossible GL timer result ({before} ns to {after} ns)");
                return None;
            }
            let start_us = self.clock.map(|clock| before as f64 / 1e3 + clock.offset_us);
            return Some(GlTime { tag, start_us, microseconds });
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
