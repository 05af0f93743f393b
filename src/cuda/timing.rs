//! GPU timestamps read back without stalling: a ring of event sets, one set per frame, each set
//! `marks` events recorded at stage boundaries and read once the GPU has passed the last one.
//!
//! When the host runs more frames ahead of the GPU than the ring is deep (a heavy kernel, no vsync),
//! the next set is still in flight; that frame then goes untimed rather than overwriting a set
//! whose times are yet to be read, so GPU times keep arriving, for every few frames.
//!
//! While the driver-call trace records every frame (the frame anatomy is shown or written), the
//! marks are also put on the host clock: an epoch event is recorded on a stream of its own, which
//! has no other work, between two host clock reads ([`EventRing::begin_calibrated`], every 2 s),
//! and each mark's time is the epoch's plus the events' elapsed time. The frame's own stream is
//! never waited for.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::context::Context;
use super::stream::{Event, Stream};
use crate::error::Result;

/// Event sets of a per-frame stage timer: frames whose GPU timestamps may still be pending, deep
/// enough for headless runs, where the host runs up to ~130 frames ahead of the GPU (a frame that
/// finds every set pending goes untimed). Not the frames the graphics API keeps in flight
/// (`vk::frame::FRAMES_IN_FLIGHT`). Events are small; 256 sets cost nothing measurable.
pub const TIMED_FRAMES: usize = 256;

/// A ring of `depth` event sets of `marks` events each.
pub struct EventRing {
    sets: Vec<Vec<Event>>,
    /// Which marks of each set were recorded since the set was begun: an interval whose ends were
    /// not both recorded is reported as unknown (NaN), never read from a stale or unrecorded event.
    recorded: Vec<Vec<Cell<bool>>>,
    tags: Vec<Option<u64>>,
    next: usize,
    untimed: bool,
    /// An event whose time on the host clock is known, while calibrating.
    epoch: Option<Epoch>,
    /// The stream epochs are recorded on (made with the first): nothing else runs on it, so its
    /// event completes as soon as the GPU reaches it.
    clock_stream: Option<Stream>,
    /// The marks of the set [`Self::poll`] read last, µs on the host clock (NaN: not known).
    marks_us: Vec<f64>,
    context: Rc<Context>,
}

/// How often the epoch is taken again (the GPU's and the host's clocks drift apart slowly, and
/// `cuEventElapsedTime`'s float milliseconds lose precision with distance).
const RECALIBRATE: Duration = Duration::from_secs(2);

struct Epoch {
    event: Event,
    /// The event's time on the host clock, µs.
    host_us: f64,
    /// Half the host time between recording it and seeing it complete, µs.
    error_us: f64,
    at: Instant,
}

/// The events of one set, to record as the stages of a frame end (none when the frame goes
/// untimed because every set is still in flight).
pub struct Marks<'a>(Option<(&'a [Event], &'a [Cell<bool>])>);

impl Marks<'_> {
    /// Records mark `index` (0 = start) at the current end of `stream`.
    pub fn mark(&self, index: usize, stream: &Stream) -> Result<()> {
        match self.0 {
            Some((events, recorded)) => {
                events[index].record(stream)?;
                recorded[index].set(true);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl EventRing {
    /// Creates `depth × marks` events.
    pub fn new(context: &Rc<Context>, depth: usize, marks: usize) -> Result<Self> {
        let mut sets = Vec::with_capacity(depth);
        for _ in 0..depth.max(1) {
            sets.push((0..marks.max(2)).map(|_| Event::new(context)).collect::<Result<Vec<_>>>()?);
        }
        let depth = sets.len();
        let recorded = sets.iter().map(|set| set.iter().map(|_| Cell::new(false)).collect()).collect();
        Ok(Self {
            sets,
            recorded,
            tags: vec![None; depth],
            next: 0,
            untimed: false,
            epoch: None,
            clock_stream: None,
            marks_us: Vec::new(),
            context: context.clone(),
        })
    }

    /// As [`Self::begin`]; first, while the trace records every frame and the epoch is older than
    /// 2 s, takes a new one: records an event on the clock's own idle stream between two host
    /// clock reads and waits for it (a few µs: the GPU only writes its clock). The frame's own
    /// stream is not waited for.
    pub fn begin_calibrated(&mut self) -> Result<Marks<'_>> {
        let due = self.epoch.as_ref().is_none_or(|epoch| epoch.at.elapsed() > RECALIBRATE);
        if due && self.context.trace().per_frame() {
            let clock_stream = match &mut self.clock_stream {
                Some(stream) => stream,
                none => none.insert(Stream::new(&self.context)?),
            };
            let event = Event::new(&self.context)?;
            let before = Instant::now();
            event.record(clock_stream)?;
            event.read_clock()?;
            let after = Instant::now();
            let half = (after - before) / 2;
            self.epoch = Some(Epoch {
                event,
                host_us: crate::stats::clock_us(before + half),
                error_us: half.as_secs_f64() * 1e6,
                at: after,
            });
        }
        Ok(self.begin())
    }

    /// Half the width of the last epoch's host interval, µs: how far the marks' host times can
    /// be off; `None` before the first epoch.
    pub fn clock_error_us(&self) -> Option<f64> {
        self.epoch.as_ref().map(|epoch| epoch.error_us)
    }

    /// The host-clock times (µs) of the marks of the set [`Self::poll`] read last; NaN where a
    /// mark was not recorded or no epoch was taken.
    pub fn marks_us(&self) -> &[f64] {
        &self.marks_us
    }

    /// The next set. If the GPU has not yet passed all of it, this frame goes untimed (the set's
    /// times are kept for [`Self::poll`]); if it has but was never read back, those times are dropped.
    pub fn begin(&mut self) -> Marks<'_> {
        let slot = self.next;
        // An event never recorded counts as complete, so only marks actually placed are waited for.
        let in_flight =
            self.tags[slot].is_some() && self.sets[slot].iter().any(|event| !event.is_complete().unwrap_or(true));
        self.untimed = in_flight;
        if in_flight {
            return Marks(None);
        }
        self.tags[slot] = None;
        self.recorded[slot].iter().for_each(|flag| flag.set(false));
        Marks(Some((&self.sets[slot], &self.recorded[slot])))
    }

    /// Declares the set from [`Self::begin`] recorded for `tag` (a frame or step number); nothing
    /// when that frame went untimed.
    pub fn commit(&mut self, tag: u64) {
        if self.untimed {
            return;
        }
        self.tags[self.next] = Some(tag);
        self.next = (self.next + 1) % self.sets.len();
    }

    /// The oldest committed set whose recorded events have all completed: fills `intervals_us[i]`
    /// with the time from mark `i` to mark `i + 1` (NaN when either mark was not recorded for
    /// this set) and returns its tag. Never blocks.
    pub fn poll(&mut self, intervals_us: &mut [f64]) -> Result<Option<u64>> {
        let depth = self.sets.len();
        for step in 0..depth {
            let slot = (self.next + step) % depth;
            let Some(tag) = self.tags[slot] else { continue };
            let (events, recorded) = (&self.sets[slot], &self.recorded[slot]);
            let used = (intervals_us.len() + 1).min(events.len());
            for (event, flag) in events.iter().zip(recorded).take(used) {
                if flag.get() && !event.is_complete()? {
                    return Ok(None);
                }
            }
            for (index, interval) in intervals_us.iter_mut().enumerate().take(used - 1) {
                *interval = if recorded[index].get() && recorded[index + 1].get() {
                    f64::from(events[index + 1].elapsed_ms_since(&events[index])?) * 1e3
                } else {
                    f64::NAN
                };
            }
            self.marks_us.clear();
            for (event, flag) in events.iter().zip(recorded).take(used) {
                let at = match &self.epoch {
                    Some(epoch) if flag.get() => epoch.host_us + f64::from(event.elapsed_ms_since(&epoch.event)?) * 1e3,
                    _ => f64::NAN,
                };
                self.marks_us.push(at);
            }
            self.tags[slot] = None;
            return Ok(Some(tag));
        }
        Ok(None)
    }
}
