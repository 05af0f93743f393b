//! A request to stop, made from outside the frame loop (Ctrl-C, SIGTERM, a closed terminal) and
//! read between frames: the loop finishes the frame it is on, writes every output that was asked
//! for, and returns. The binary installs the signal handler; the library only reads the request,
//! which remembers the signal so that the message and the exit status can name it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

/// `SIGHUP`: the terminal closed.
pub const SIGHUP: i32 = 1;
/// `SIGINT`: Ctrl-C.
pub const SIGINT: i32 = 2;
/// `SIGTERM`: `kill`, a service manager, a CI timeout.
pub const SIGTERM: i32 = 15;

/// A shared stop request; clones see the same request.
#[derive(Debug, Clone, Default)]
pub struct StopRequest(Arc<AtomicI32>);

impl StopRequest {
    /// A request nobody has made.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop after its current unit of work, because of `signal` (a signal
    /// number; the first one is kept). Returns whether a stop was already asked for (a second
    /// Ctrl-C).
    pub fn request(&self, signal: i32) -> bool {
        self.0.compare_exchange(0, signal.max(1), Ordering::SeqCst, Ordering::SeqCst).is_err()
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.signal().is_some()
    }

    /// The signal that asked for the stop, if one did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.0.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
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
}
