//! A request to stop, made from outside the frame loop (Ctrl-C, SIGTERM, a closed terminal) and
//! read between frames: the loop finishes the frame it is on, writes every output that was asked
//! for, and returns. The binary installs the signal handler; the library only reads the request,
//! which remembers the signal so that the message and the exit status can name it. A run also
//! says when it starts and ends writing its outputs, so that a second signal, which exits at once,
//! can say truly what was written.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

/// `SIGHUP`: the terminal closed.
pub const SIGHUP: i32 = 1;
/// `SIGINT`: Ctrl-C.
pub const SIGINT: i32 = 2;
/// `SIGTERM`: `kill`, a service manager, a CI timeout.
pub const SIGTERM: i32 = 15;

/// A shared stop request; clones see the same request.
#[derive(Debug, Clone, Default)]
pub struct StopRequest(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    /// The first signal, 0 before any.
    signal: AtomicI32,
    /// Where the run's outputs stand, an [`Outputs`] as a number.
    outputs: AtomicU8,
}

/// Where the outputs a run writes at its end (`--screenshot`, `--stats`, `--trace-json`, …) stand
/// when a second signal ends the process at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputs {
    /// Not begun: none will be written.
    NotBegun,
    /// Being written: those not finished are lost.
    Writing,
    /// All written.
    Written,
}

impl Outputs {
    const NOT_BEGUN: u8 = 0;
    const WRITING: u8 = 1;
    const WRITTEN: u8 = 2;
    /// A second signal came first: nothing may be written any more.
    const GIVEN_UP: u8 = 3;
}

impl StopRequest {
    /// A request nobody has made.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop after its current unit of work, because of `signal` (a signal
    /// number; the first one is kept). Returns whether a stop was already asked for (a second
    /// Ctrl-C).
    pub fn request(&self, signal: i32) -> bool {
        self.0.signal.compare_exchange(0, signal.max(1), Ordering::SeqCst, Ordering::SeqCst).is_err()
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.signal().is_some()
    }

    /// The signal that asked for the stop, if one did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.0.signal.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
    }

    /// What asked for the stop, in words ("Ctrl-C", "SIGTERM"), for "stopped (…)" lines.
    pub fn cause(&self) -> &'static str {
        match self.signal() {
            Some(SIGINT) => "Ctrl-C",
            Some(SIGTERM) => "SIGTERM",
            Some(SIGHUP) => "SIGHUP: the terminal closed",
            Some(_) => "a signal",
            None => "not stopped",
        }
    }

    /// The exit status of a process that stopped because of this request: 128 + the signal (130
    /// after Ctrl-C, 143 after SIGTERM), as shells report a process a signal ended, so a script
    /// can tell an interrupted run from a finished one. `None` when no stop was asked for.
    pub fn exit_status(&self) -> Option<u8> {
        self.signal().map(|signal| u8::try_from(128 + signal).unwrap_or(u8::MAX))
    }

    /// Called by a run before it writes its outputs. False when a second signal has given them
    /// up (the process is ending): write nothing then.
    pub fn begin_writing(&self) -> bool {
        let writing = |now| (now != Outputs::GIVEN_UP).then_some(Outputs::WRITING);
        self.0.outputs.fetch_update(Ordering::SeqCst, Ordering::SeqCst, writing).is_ok()
    }

    /// Called by a run once its outputs are written.
    pub fn outputs_written(&self) {
        let outputs = &self.0.outputs;
        let _ = outputs.compare_exchange(Outputs::WRITING, Outputs::WRITTEN, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// For a second signal, which ends the process at once: where the outputs stand. Outputs not
    /// begun are given up, so that [`Self::begin_writing`] refuses from now on and what the
    /// message says stays true.
    pub fn give_up_outputs(&self) -> Outputs {
        let outputs = &self.0.outputs;
        match outputs.compare_exchange(Outputs::NOT_BEGUN, Outputs::GIVEN_UP, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => Outputs::NotBegun,
            Err(Outputs::WRITING) => Outputs::Writing,
            Err(Outputs::WRITTEN) => Outputs::Written,
            Err(_) => Outputs::NotBegun,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_kept_and_names_the_exit_status() {
        let stop = StopRequest::new();
        assert!(!stop.requested());
        assert_eq!(stop.exit_status(), None);
        let seen_by_a_clone = stop.clone();
        assert!(!stop.request(SIGTERM), "the first request");
        assert!(stop.request(SIGINT), "a second one says so");
        assert!(seen_by_a_clone.requested());
        assert_eq!(seen_by_a_clone.cause(), "SIGTERM");
        assert_eq!(seen_by_a_clone.exit_status(), Some(143));
        let interrupted = StopRequest::new();
        interrupted.request(SIGINT);
        assert_eq!((interrupted.cause(), interrupted.exit_status()), ("Ctrl-C", Some(130)));
    }

    #[test]
    fn a_second_signal_gives_up_the_outputs_not_begun_and_says_where_the_others_stand() {
        let stop = StopRequest::new();
        assert_eq!(stop.give_up_outputs(), Outputs::NotBegun);
        assert!(!stop.begin_writing(), "given up: the run writes nothing");
        assert_eq!(stop.give_up_outputs(), Outputs::NotBegun, "still none written");

        let writing = StopRequest::new();
        assert!(writing.begin_writing() && writing.begin_writing(), "begun once or twice");
        assert_eq!(writing.give_up_outputs(), Outputs::Writing);
        writing.outputs_written();
        assert_eq!(writing.give_up_outputs(), Outputs::Written);
        assert!(writing.begin_writing(), "a run that wrote may write again");
        assert_eq!(writing.give_up_outputs(), Outputs::Writing);

        let untouched = StopRequest::new();
        untouched.outputs_written();
        assert_eq!(untouched.give_up_outputs(), Outputs::NotBegun, "written only after begun");
    }
}
