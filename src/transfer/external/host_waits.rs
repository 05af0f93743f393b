//! The external path ordered from the host: a GL fence before the kernel, the stream after it.

use std::time::Instant;

use crate::cuda::Stream;
use crate::cuda::timing::EventRing;
use crate::error::Result;
use crate::gl;
use crate::stats::{Stage, StageTimes};
use crate::transfer::micros_since;

/// A step ordered from the host: nothing maps or unmaps, so the host waits for GL to be done with
/// the buffers (last frame's draw) before the kernel writes them, and for the kernel before GL
/// draws them.
pub(super) fn run_with_host_waits(
    gl: &glow::Context,
    stream: &Stream,
    events: &mut EventRing,
    frame: u64,
    compute: &mut dyn FnMut(&Stream) -> Result<()>,
) -> Result<StageTimes> {
    let mut times = StageTimes::default();
    let started = Instant::now();
    gl::wait_for_gl(gl)?;
    let mut sync_us = micros_since(started);

    let timing = events.begin_calibrated()?;
    let started = Instant::now();
    timing.mark(0, stream)?;
    compute(stream)?;
    timing.mark(1, stream)?;
    events.commit(frame);
    times.set_host_since(Stage::Kernel, started);

    let started = Instant::now();
    stream.synchronize()?;
    sync_us += micros_since(started);
    times.set_host(Stage::Sync, sync_us);
    // The anatomy shows the host's wait for the stream (the wait for GL is the call before).
    times.set_host_span(Stage::Sync, crate::stats::clock_us(started), micros_since(started));
    Ok(times)
}
