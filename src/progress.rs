//! Progress of work that takes more than a moment (benchmarks, autotuning, soak, compiles), as a
//! bar on the terminal; silent when standard error is not a terminal (logs, tests), where the
//! log lines say what runs.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::stop::StopRequest;

/// One task's progress: `total` steps, each named as it starts.
pub struct Progress {
    bar: ProgressBar,
    stop: StopRequest,
}

impl Progress {
    /// A bar for `total` steps of `task` (e.g. "bench nbody"), drawn on standard error.
    pub fn new(task: &str, total: u64, stop: &StopRequest) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed} {msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(task.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar, stop: stop.clone() }
    }

    /// A bar that draws nothing (library callers, tests).
    pub fn hidden(stop: &StopRequest) -> Self {
        Self { bar: ProgressBar::hidden(), stop: stop.clone() }
    }

    /// Names the step now running.
    pub fn step(&self, what: impl Into<String>) {
        self.bar.set_message(what.into());
    }

    /// One step done.
    pub fn done_one(&self) {
        self.bar.inc(1);
    }

    /// Adds steps found along the way.
    pub fn add_steps(&self, more: u64) {
        self.bar.inc_length(more);
    }

    /// Whether the user asked to stop (Ctrl-C): the work should end after this step and report
    /// what it has.
    pub fn stopped(&self) -> bool {
        self.stop.requested()
    }

    /// Prints a line above the bar.
    pub fn say(&self, line: &str) {
        self.bar.println(line);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
