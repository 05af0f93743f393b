//! What a demo's benchmark gives and gets: its report (a table and JSON), and a way to run whole
//! frames of the app headless, passed in by the `bench` command that sits above the demos. Also
//! what every benchmark shares: units of measurement that stop when asked ([`Repeats`]), the
//! report that says it was stopped ([`BenchReport::finish`]), and cells for figures that do not
//! apply ([`cell`]).

use std::path::PathBuf;

use super::DemoSpec;
use crate::error::{Error, Result};
use crate::graphics::GraphicsApi;
use crate::runtime::CudaOptions;
use crate::stats::Summary;
use crate::stop::StopRequest;

/// Output of a benchmark.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Everything, as written to `--json`.
    pub json: serde_json::Value,
    /// The table for stdout.
    pub table: String,
}

/// Whole frames of a demo to render headless.
#[derive(Debug, Clone)]
pub struct FrameRun {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// Frames to render.
    pub frames: u32,
    /// Framebuffer size in pixels.
    pub size: [u32; 2],
    /// Backend and transfer choices.
    pub cuda: CudaOptions,
    /// The API that draws (on Vulkan, CUDA writes memory it imported from Vulkan).
    pub renderer: GraphicsApi,
    /// Set by Ctrl-C: stop after the current frame.
    pub stop: StopRequest,
    /// The frames' anatomy to write as a Chrome trace when the run ends.
    pub trace: Option<crate::args::TraceRequest>,
}

/// The trace of a bench's frame run named `name` in `dir` (`--trace-dir`): its last 120 frames.
pub fn trace_in(dir: Option<&std::path::Path>, name: &str) -> Option<crate::args::TraceRequest> {
    let path = dir?.join(format!("{name}.trace.json"));
    Some(crate::args::TraceRequest { path, frames: 120 })
}

/// What such a run measured.
#[derive(Debug, Clone)]
pub struct FramesMeasured {
    /// The transfer path the frames ran on, as the headless report names it.
    pub transfer: serde_json::Value,
    /// Frames per second over the whole run (GPU finished at the end).
    pub frames_per_second: f64,
    /// Per-stage timings.
    pub timings: Summary,
}

/// Renders a [`FrameRun`] headless.
pub type FrameRunner<'a> = &'a dyn Fn(&FrameRun) -> Result<FramesMeasured>;

/// Writes `json` to `path`, when one was given.
pub fn write_json(path: &Option<PathBuf>, json: &serde_json::Value) -> Result<()> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
    }
    Ok(())
}

impl BenchReport {
    /// The report of a benchmark that ended, done or stopped: the JSON says `"interrupted"`
    /// (whether a stop was asked for), the table ends by saying what stopped it, and the JSON is
    /// written to `path` when one was given (checked before the run: [`crate::output::check`]).
    pub fn finish(
        mut json: serde_json::Value,
        mut table: String,
        stop: &StopRequest,
        path: &Option<PathBuf>,
    ) -> Result<Self> {
        let interrupted = stop.requested();
        if let Some(fields) = json.as_object_mut() {
            fields.insert("interrupted".to_owned(), interrupted.into());
        }
        if interrupted {
            table.push_str(&format!("stopped ({}): the table holds what was measured before\n", stop.cause()));
        }
        write_json(path, &json)?;
        Ok(Self { json, table })
    }
}

/// A measurement's units (frames, launches, passes): untimed ones first, then timed ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    /// Untimed units.
    pub warmup: u32,
    /// Timed units.
    pub timed: u32,
}

/// How far a measurement got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Ran {
    /// Every unit ran.
    All,
    /// A stop was asked for: the unit running then finished, and no other started.
    Stopped,
}

impl Repeats {
    /// `timed` units and no warm-up.
    pub fn timed(timed: u32) -> Self {
        Self { warmup: 0, timed }
    }

    /// Untimed and timed units together.
    pub fn total(self) -> u64 {
        u64::from(self.warmup) + u64::from(self.timed)
    }

    /// Runs `unit(index, timed)` for each unit in turn (indices from 0; the first `warmup` are
    /// untimed) until they are done or `stop` is asked for, which is checked before each: a
    /// benchmark then stops within one unit, however many it was asked for.
    pub fn run(self, stop: &StopRequest, mut unit: impl FnMut(u64, bool) -> Result<()>) -> Result<Ran> {
        for index in 0..self.total() {
            if stop.requested() {
                return Ok(Ran::Stopped);
            }
            unit(index, index >= u64::from(self.warmup))?;
        }
        Ok(Ran::All)
    }
}

/// A table cell for a figure that may not apply (a stage a row does not run, a time never
/// measured): the figure with `decimals` decimals, or "–" (never "NaN").
pub fn cell(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(value) if value.is_finite() => format!("{value:.decimals$}"),
        _ => "–".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_stop_within_one_unit_and_say_so() {
        let stop = StopRequest::new();
        let mut seen = Vec::new();
        let ran = Repeats { warmup: 2, timed: 3 }.run(&stop, |index, timed| {
            seen.push((index, timed));
            Ok(())
        });
        assert_eq!(ran.expect("ran"), Ran::All);
        assert_eq!(seen, [(0, false), (1, false), (2, true), (3, true), (4, true)]);
        // A stop asked for during unit 3 of a million: unit 3 finishes, unit 4 never starts.
        let mut units = 0;
        let ran = Repeats { warmup: 1, timed: 1_000_000 }.run(&stop, |index, _| {
            units += 1;
            if index == 3 {
                stop.request(crate::stop::SIGTERM);
            }
            Ok(())
        });
        assert_eq!((ran.expect("ran"), units), (Ran::Stopped, 4));
        let ran = Repeats::timed(5).run(&stop, |_, _| panic!("no unit starts once a stop was asked for"));
        assert_eq!(ran.expect("ran"), Ran::Stopped);
    }

    #[test]
    fn a_finished_report_says_whether_it_was_stopped_and_writes_its_json() {
        let dir = std::env::temp_dir().join(format!("interop-lab-bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = Some(dir.join("bench.json"));
        let stop = StopRequest::new();
        let done = BenchReport::finish(serde_json::json!({ "rows": [1] }), "table\n".to_owned(), &stop, &path);
        let done = done.expect("finished");
        assert_eq!((done.json["interrupted"].clone(), done.table.as_str()), (false.into(), "table\n"));
        stop.request(crate::stop::SIGINT);
        let stopped = BenchReport::finish(serde_json::json!({ "rows": [] }), "table\n".to_owned(), &stop, &path);
        let stopped = stopped.expect("finished");
        assert!(stopped.table.ends_with("stopped (Ctrl-C): the table holds what was measured before\n"));
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("bench.json")).expect("written")).expect("JSON");
        assert_eq!(written["interrupted"], true, "{written}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn cells_that_do_not_apply_are_a_dash() {
        assert_eq!(cell(Some(12.345), 1), "12.3");
        assert_eq!(cell(None, 1), "–");
        assert_eq!(cell(Some(f64::NAN), 0), "–");
        assert_eq!(cell(Some(f64::INFINITY), 2), "–");
    }
}
