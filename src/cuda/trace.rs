//! The driver-call trace: every CUDA driver call the app makes goes through [`Trace::call`], which,
//! when tracing is on, records the call's name, the arguments that matter and its host duration.
//! The one-time setup calls (init, device, context, NVRTC, module load, registration) are kept
//! from the start; per-frame recording is off by default and then costs one `Cell` read per call.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use cudarc::driver::sys;

use super::driver::check;
use crate::error::Result;

/// One driver call as recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TraceEntry {
    /// Entry point, e.g. `cuGraphicsMapResources`.
    pub call: &'static str,
    /// The arguments that matter, in words.
    pub detail: String,
    /// Host time spent in the call, µs.
    pub host_us: f64,
    /// When the call began, µs on the frame anatomy's clock ([`crate::stats::clock_us`]).
    pub start_us: f64,
    /// The error name, when it failed.
    pub error: Option<String>,
}

/// Most entries kept per list: a frame makes a few dozen calls; the cap protects a frame that
/// loops (a benchmark) from growing without bound.
const MAX_ENTRIES: usize = 4096;

/// The recorder, owned by a [`super::Context`].
#[derive(Debug, Default)]
pub struct Trace {
    per_frame: Cell<bool>,
    setup_open: Cell<bool>,
    setup: RefCell<Vec<TraceEntry>>,
    current: RefCell<Vec<TraceEntry>>,
    last_frame: RefCell<Vec<TraceEntry>>,
}

impl Trace {
    /// A recorder that keeps the setup calls until the first [`Self::end_frame`].
    pub fn new(setup: Vec<TraceEntry>) -> Self {
        Self {
            per_frame: Cell::new(false),
            setup_open: Cell::new(true),
            setup: RefCell::new(setup),
            current: RefCell::new(Vec::new()),
            last_frame: RefCell::new(Vec::new()),
        }
    }

    /// Runs the driver call `f`, records it if recording, and turns its status into a `Result`.
    pub fn call(
        &self,
        call: &'static str,
        detail: impl FnOnce() -> String,
        f: impl FnOnce() -> sys::CUresult,
    ) -> Result<()> {
        // Names the call before it runs, so a driver call that never returns is the last line of
        // `RUST_LOG=interop_lab::cuda=trace`.
        log::trace!("{call}");
        let setup = self.setup_open.get();
        if !setup && !self.per_frame.get() {
            return check(f(), call);
        }
        let started = Instant::now();
        let status = f();
        let entry = entry(call, detail(), started, status);
        let list = if setup { &self.setup } else { &self.current };
        let mut list = list.borrow_mut();
        if list.len() < MAX_ENTRIES {
            list.push(entry);
        }
        check(status, call)
    }

    /// Records a step that is not a driver call (an NVRTC compile, a cache hit, another API's
    /// call) in the same list; `detail` is made only when something is being recorded.
    pub fn note(&self, call: &'static str, detail: impl FnOnce() -> String, host_us: f64) {
        let list = if self.setup_open.get() {
            &self.setup
        } else if self.per_frame.get() {
            &self.current
        } else {
            return;
        };
        let mut list = list.borrow_mut();
        if list.len() < MAX_ENTRIES {
            let start_us = crate::stats::clock_us(Instant::now()) - host_us;
            list.push(TraceEntry { call, detail: detail(), host_us, start_us, error: None });
        }
    }

    /// Turns per-frame recording on or off.
    pub fn set_per_frame(&self, on: bool) {
        self.per_frame.set(on);
        if !on {
            self.current.borrow_mut().clear();
            self.last_frame.borrow_mut().clear();
        }
    }

    /// Whether per-frame recording is on.
    pub fn per_frame(&self) -> bool {
        self.per_frame.get()
    }

    /// Ends a frame: its calls become [`Self::last_frame`]; the first call also closes the setup list.
    pub fn end_frame(&self) {
        if self.setup_open.replace(false) {
            return;
        }
        if self.per_frame.get() {
            let mut current = self.current.borrow_mut();
            let mut last = self.last_frame.borrow_mut();
            std::mem::swap(&mut *current, &mut *last);
            current.clear();
        }
    }

    /// Calls recorded from the start until the first frame ended.
    pub fn setup(&self) -> Vec<TraceEntry> {
        self.setup.borrow().clone()
    }

    /// Calls of the last complete frame (empty when per-frame recording is off).
    pub fn last_frame(&self) -> Vec<TraceEntry> {
        self.last_frame.borrow().clone()
    }
}

/// An entry for a call that was made outside any [`Trace`] (before a context exists).
pub fn entry(call: &'static str, detail: String, started: Instant, status: sys::CUresult) -> TraceEntry {
    TraceEntry {
        call,
        detail,
        host_us: started.elapsed().as_secs_f64() * 1e6,
        start_us: crate::stats::clock_us(started),
        error: (status != sys::CUresult::CUDA_SUCCESS).then(|| format!("{status:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_setup_then_only_frames_asked_for() {
        let trace = Trace::new(Vec::new());
        let ok = || sys::CUresult::CUDA_SUCCESS;
        trace.call("cuInitLike", || "setup".to_owned(), ok).expect("ok");
        trace.end_frame(); // closes setup
        trace.call("cuNotRecorded", || unreachable!("detail is not even formatted when off"), ok).expect("ok");
        trace.set_per_frame(true);
        trace.call("cuFirst", || "a".to_owned(), ok).expect("ok");
        let failed = trace.call("cuSecond", || "b".to_owned(), || sys::CUresult::CUDA_ERROR_INVALID_VALUE);
        assert!(failed.is_err());
        assert!(trace.last_frame().is_empty(), "nothing until the frame ends");
        trace.end_frame();
        let frame = trace.last_frame();
        assert_eq!(frame.iter().map(|e| e.call).collect::<Vec<_>>(), vec!["cuFirst", "cuSecond"]);
        assert_eq!(frame[1].error.as_deref(), Some("CUDA_ERROR_INVALID_VALUE"));
        assert_eq!(trace.setup().iter().map(|e| e.call).collect::<Vec<_>>(), vec!["cuInitLike"]);
    }

    #[test]
    fn each_call_is_stamped_where_it_began_in_the_order_made() {
        let trace = Trace::new(Vec::new());
        trace.end_frame(); // closes setup
        trace.set_per_frame(true);
        let slow = || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            sys::CUresult::CUDA_SUCCESS
        };
        let before = crate::stats::clock_us(Instant::now());
        trace.call("cuFirst", String::new, slow).expect("ok");
        // Another API's call, noted when it returns with its own host time.
        let other = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(1));
        trace.note("glOther", String::new, other.elapsed().as_secs_f64() * 1e6);
        trace.call("cuThird", String::new, slow).expect("ok");
        trace.end_frame();
        let frame = trace.last_frame();
        assert!(frame[0].start_us >= before, "{} < {before}", frame[0].start_us);
        for pair in frame.windows(2) {
            assert!(
                pair[1].start_us >= pair[0].start_us + pair[0].host_us - 1.0,
                "{} starts before {} ended",
                pair[1].call,
                pair[0].call
            );
        }
        assert!(frame[0].host_us >= 2000.0, "the call's own time: {}", frame[0].host_us);
    }
}
