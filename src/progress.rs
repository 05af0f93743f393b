//! Progress of work that takes more than a moment (benchmarks, autotuning, soak, compiles): a bar
//! on a terminal; where standard error is not a terminal (CI, a log file), a plain line when the
//! first step starts, when a step completes and at least every few seconds, so a long run is never
//! silent until its end.

use std::io::IsTerminal;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::stop::StopRequest;

/// Lines, when not on a terminal, come at least this often while work goes on.
const LINE_EVERY: Duration = Duration::from_secs(5);
/// ... and at most this often when steps complete quickly.
const LINE_AT_MOST_EVERY: Duration = Duration::from_secs(2);

/// One task's progress: `total` steps, each named as it starts.
pub struct Progress {
    bar: ProgressBar,
    lines: Option<Lines>,
    stop: StopRequest,
}

/// The plain lines written where no bar can be drawn, by a thread that wakes every
/// [`LINE_EVERY`] and by each completed step.
struct Lines {
    state: Arc<(Mutex<LineState>, Condvar)>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct LineState {
    task: String,
    done: u64,
    total: u64,
    step: String,
    started: Instant,
    last_line: Option<Instant>,
    finished: bool,
}

impl LineState {
    fn say(&mut self) {
        eprintln!(
            "{}: {}/{} done, {:.0} s{}",
            self.task,
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64(),
            if self.step.is_empty() { String::new() } else { format!(": {}", self.step) }
        );
        self.last_line = Some(Instant::now());
    }
}

impl Progress {
    /// Progress of `total` steps of `task` (e.g. "bench nbody") on standard error: a bar on a
    /// terminal, else a line as the first step starts, one per completed step (at most one every
    /// two seconds) and one at least every five seconds.
    pub fn new(task: &str, total: u64, stop: &StopRequest) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { bar: ProgressBar::hidden(), lines: Some(Lines::start(task, total)), stop: stop.clone() };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed} {msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(task.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar, lines: None, stop: stop.clone() }
    }

    /// Progress that says nothing (library callers, tests).
    pub fn hidden(stop: &StopRequest) -> Self {
        Self { bar: ProgressBar::hidden(), lines: None, stop: stop.clone() }
    }

    /// Names the step now running.
    pub fn step(&self, what: impl Into<String>) {
        let what = what.into();
        if let Some(lines) = &self.lines {
            lines.update(|state| {
                state.step = what.clone();
                // The first step is said at once: the run says it has started and how much is ahead.
                if state.last_line.is_none() {
                    state.say();
                }
            });
        }
        self.bar.set_message(what);
    }

    /// One step done.
    pub fn done_one(&self) {
        self.bar.inc(1);
        if let Some(lines) = &self.lines {
            lines.update(|state| {
                state.done += 1;
                // The first line too waits that long: work done in a moment needs no line at all.
                if state.last_line.unwrap_or(state.started).elapsed() >= LINE_AT_MOST_EVERY {
                    state.say();
                }
            });
        }
    }

    /// Whether the user asked to stop (Ctrl-C, SIGTERM): the work should end after this step and
    /// report what it has.
    pub fn stopped(&self) -> bool {
        self.stop.requested()
    }

    /// Prints a line above the bar.
    pub fn say(&self, line: &str) {
        match &self.lines {
            Some(_) => eprintln!("{line}"),
            None => self.bar.println(line),
        }
    }
}

impl Lines {
    fn start(task: &str, total: u64) -> Self {
        let state = Arc::new((
            Mutex::new(LineState {
                task: task.to_owned(),
                done: 0,
                total,
                step: String::new(),
                started: Instant::now(),
                last_line: None,
                finished: false,
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&state);
        let ticker = std::thread::Builder::new()
            .name("progress".to_owned())
            .spawn(move || {
                let (lock, wake) = &*shared;
                let Ok(mut state) = lock.lock() else { return };
                loop {
                    // Until a line is due: a fixed wait would end just before it (the first line
                    // comes a moment after the ticker starts) and skip a whole period.
                    let since = state.last_line.unwrap_or(state.started).elapsed();
                    let due = LINE_EVERY.saturating_sub(since).max(Duration::from_millis(10));
                    let Ok((next, _)) = wake.wait_timeout(state, due) else { return };
                    state = next;
                    if state.finished {
                        return;
                    }
                    if state.last_line.unwrap_or(state.started).elapsed() >= LINE_EVERY {
                        state.say();
                    }
                }
            })
            .ok();
        Self { state, ticker }
    }

    fn update(&self, change: impl FnOnce(&mut LineState)) {
        if let Ok(mut state) = self.state.0.lock() {
            change(&mut state);
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.update(|state| state.finished = true);
        self.state.1.notify_all();
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
