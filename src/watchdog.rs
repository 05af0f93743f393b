//! A watchdog for driver calls that can block: setting up interop, the first frames, the final
//! wait. A call that does not return within [`STALL_AFTER`] is said at once on the terminal (the
//! process is not frozen without a word), and when it returns its caller learns that it stalled,
//! so the session can move off the path that stalled. Seen on an H200 after another process's
//! kernel fault: GL-interop processes waiting seconds to minutes in the driver.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a watched call may take before it is said to stall.
pub const STALL_AFTER: Duration = Duration::from_secs(4);

enum Message {
    Start(u64, Watched, Instant),
    End(u64),
}

/// A call being watched: what it is, and what the user can do when it stalls.
#[derive(Clone, Copy)]
struct Watched {
    what: &'static str,
    advice: &'static str,
}

/// Watches calls from one thread; a thread of its own notices the ones that stall.
pub struct Watchdog {
    sender: Sender<Message>,
    next: std::cell::Cell<u64>,
    stalled: Arc<Mutex<Vec<(&'static str, Duration)>>>,
}

/// A watched call in progress; dropping it ends the watch.
pub struct Watch {
    sender: Sender<Message>,
    id: u64,
}

impl Watchdog {
    /// Starts the watching thread (it ends when the watchdog is dropped).
    pub fn new() -> Self {
        let (sender, receiver) = channel();
        let stalled = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&stalled);
        let spawned =
            std::thread::Builder::new().name("watchdog".to_owned()).spawn(move || watch_loop(&receiver, &seen));
        if let Err(error) = spawned {
            log::warn!("no watchdog thread ({error}): a stalled driver call will not be said");
        }
        Self { sender, next: std::cell::Cell::new(0), stalled }
    }

    /// Watches `what` (a driver call) until the returned guard is dropped; if it stalls, the
    /// terminal is told, with `advice`: what the app does next, or what the user can do.
    pub fn watch(&self, what: &'static str, advice: &'static str) -> Watch {
        let id = self.next.get();
        self.next.set(id + 1);
        let _ = self.sender.send(Message::Start(id, Watched { what, advice }, Instant::now()));
        Watch { sender: self.sender.clone(), id }
    }

    /// The calls that stalled since the last time this was asked, with how long each took to be
    /// noticed (at least [`STALL_AFTER`]).
    pub fn take_stalls(&self) -> Vec<(&'static str, Duration)> {
        self.stalled.lock().map(|mut stalled| std::mem::take(&mut *stalled)).unwrap_or_default()
    }
}

impl Default for Watchdog {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.sender.send(Message::End(self.id));
    }
}

fn watch_loop(receiver: &Receiver<Message>, stalled: &Mutex<Vec<(&'static str, Duration)>>) {
    let mut open: Vec<(u64, Watched, Instant, bool)> = Vec::new();
    loop {
        match receiver.recv_timeout(Duration::from_millis(250)) {
            Ok(Message::Start(id, what, since)) => open.push((id, what, since, false)),
            Ok(Message::End(id)) => {
                if let Some(index) = open.iter().position(|entry| entry.0 == id) {
                    let (_, watched, since, said) = open.swap_remove(index);
                    if said {
                        eprintln!(
                            "interop-lab: {} returned after {:.1} s",
                            watched.what,
                            since.elapsed().as_secs_f64()
                        );
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        for (_, watched, since, said) in open.iter_mut().filter(|entry| !entry.3) {
            let waited = since.elapsed();
            if waited >= STALL_AFTER {
                *said = true;
                eprintln!(
                    "interop-lab: {} has not returned after {:.0} s: the GPU driver is stalling (seen after a kernel \
                     fault in another process, while the driver recovers). {}",
                    watched.what,
                    waited.as_secs_f64(),
                    watched.advice
                );
                if let Ok(mut stalled) = stalled.lock() {
                    stalled.push((watched.what, waited));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_the_limit_is_noticed_and_a_quick_one_is_not() {
        let watchdog = Watchdog::new();
        {
            let _quick = watchdog.watch("a quick call", "nothing to do");
        }
        {
            let _slow = watchdog.watch("a slow call", "nothing to do");
            std::thread::sleep(STALL_AFTER + Duration::from_millis(600));
        }
        let stalls = watchdog.take_stalls();
        assert_eq!(stalls.len(), 1, "{stalls:?}");
        assert_eq!(stalls[0].0, "a slow call");
        assert!(stalls[0].1 >= STALL_AFTER);
        assert!(watchdog.take_stalls().is_empty(), "taken once");
    }
}
