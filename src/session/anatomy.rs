//! What the session keeps of each frame for its anatomy: where it started, the path's ordering
//! rules, and — while the anatomy is recorded (its panel section open, `--trace-json`) — the
//! frame's driver and API calls and the frame loop's own parts. The stage spans themselves live
//! in the frame history, where GPU times arriving late join them.

use std::collections::VecDeque;
use std::time::Instant;

use super::Session;
use crate::anatomy::{Calibration, EdgeRule, FrameAnatomy, Span, chrome_trace};
use crate::args::TraceRequest;
use crate::cuda::trace::TraceEntry;
use crate::error::Result;
use crate::stats::{FrameHistory, FrameSample, Lane, Stage, clock_us};

/// Frames whose anatomy is kept (as many as the frame history keeps).
const KEPT: usize = super::HISTORY_FRAMES;
// `--trace-frames` promises what the history keeps.
const _: () = assert!(KEPT == crate::args::TRACE_FRAMES_MAX as usize);
/// Frames the panel's view shows.
const VIEW_FRAMES: usize = 3;
/// How far back the view looks for frames whose GPU times have arrived (headless, the host runs
/// up to ~130 frames ahead of the GPU).
const VIEW_SCAN: usize = 240;

struct FrameRecord {
    frame: u64,
    start_us: f64,
    extra: Vec<Span>,
    rules: &'static [EdgeRule],
    /// Sets of buffers used in turn: the frame that last used this one's is this many back.
    depth: u32,
}

/// The frames' records, oldest first.
pub(super) struct AnatomyLog {
    records: VecDeque<FrameRecord>,
    /// Calls and the frame loop's parts are recorded.
    recording: bool,
}

impl AnatomyLog {
    pub(super) fn new(recording: bool) -> Self {
        Self { records: VecDeque::new(), recording }
    }

    pub(super) fn recording(&self) -> bool {
        self.recording
    }

    pub(super) fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    /// Keeps frame `frame`, which started at `started`, ordered by `rules` with `depth` sets of
    /// buffers in turn, with its `extra` spans (none unless recording: the caller gathers them
    /// only then).
    pub(super) fn push(
        &mut self,
        frame: u64,
        started: Instant,
        rules: &'static [EdgeRule],
        depth: u32,
        extra: Vec<Span>,
    ) {
        if self.records.len() == KEPT {
            self.records.pop_front();
        }
        self.records.push_back(FrameRecord { frame, start_us: clock_us(started), extra, rules, depth });
    }

    /// The anatomy of the last `last` frames the history still holds, oldest first.
    pub(super) fn frames(&self, history: &FrameHistory, last: usize) -> Vec<FrameAnatomy> {
        let skip = history.len().saturating_sub(last);
        history.samples().skip(skip).filter_map(|sample| self.build(history, sample)).collect()
    }

    /// The anatomy of `sample`, when its record is still kept, with the edges from the frame
    /// that last used its buffers where the history still holds that one.
    fn build(&self, history: &FrameHistory, sample: &FrameSample) -> Option<FrameAnatomy> {
        let record = self.records.iter().rev().find(|r| r.frame == sample.frame)?;
        let last_use = sample.frame.checked_sub(u64::from(record.depth)).and_then(|earlier| {
            // Frame numbers rise through the history, so the search stops at the first older one.
            history.samples().rev().find(|s| s.frame <= earlier).filter(|s| s.frame == earlier)
        });
        Some(FrameAnatomy::build(sample, record.start_us, record.extra.clone(), record.rules, last_use, record.depth))
    }

    /// The frames the panel's view shows: the last [`VIEW_FRAMES`] in which the demo stepped (so
    /// a paused demo holds the view still, and a step adds one), from the newest whose GPU times
    /// have all arrived (they come a few frames late, CUDA's and the graphics API's apart: a
    /// frame with only some would join its edges to host spans); else from the newest with any;
    /// the last frames when none has.
    pub(super) fn for_view(&self, history: &FrameHistory) -> Vec<FrameAnatomy> {
        let stepped = |sample: &&FrameSample| sample.stages.host(Stage::Kernel).is_some();
        let placed = |sample: &&FrameSample| Stage::ALL.iter().any(|&stage| sample.stages.gpu_start(stage).is_some());
        let on_cuda = |sample: &&FrameSample| matches!(sample.stages.gpu_start(Stage::Kernel), Some((Lane::Cuda, _)));
        let mut recent: Vec<&FrameSample> = history.samples().rev().take(VIEW_SCAN).filter(stepped).collect();
        if recent.is_empty() {
            recent = history.samples().rev().take(VIEW_FRAMES).collect();
        }
        let cuda = recent.iter().any(on_cuda);
        let settled = |sample: &&FrameSample| {
            let drawn = matches!(sample.stages.gpu_start(Stage::Draw), Some((Lane::Graphics, _)));
            drawn && (!cuda || on_cuda(sample))
        };
        let newest = recent.iter().position(settled).or_else(|| recent.iter().position(placed)).unwrap_or(0);
        let mut frames: Vec<FrameAnatomy> =
            recent[newest..].iter().take(VIEW_FRAMES).filter_map(|sample| self.build(history, sample)).collect();
        frames.reverse();
        frames
    }

    /// Forgets every frame (the demo or its path changed; frame numbers start again).
    pub(super) fn clear(&mut self) {
        self.records.clear();
    }
}

/// A host span for a part of the frame loop that is not a stage.
pub(super) fn host_part(name: &'static str, started: Instant, ended: Instant) -> Span {
    Span {
        lane: Lane::Host,
        name,
        detail: String::new(),
        start_us: clock_us(started),
        dur_us: (ended - started).as_secs_f64() * 1e6,
        call: false,
    }
}

/// The driver-call trace's entries as host spans.
pub(super) fn call_spans(entries: Vec<TraceEntry>) -> impl Iterator<Item = Span> {
    entries.into_iter().filter(|e| e.start_us.is_finite()).map(|e| Span {
        lane: Lane::Host,
        name: e.call,
        detail: match e.error {
            Some(error) => format!("{}: failed, {error}", e.detail),
            None => e.detail,
        },
        start_us: e.start_us,
        dur_us: e.host_us,
        call: true,
    })
}

impl Session {
    /// The anatomy of the last `last` frames, oldest first.
    pub fn anatomy(&self, last: usize) -> Vec<FrameAnatomy> {
        self.anatomy.frames(&self.history, last)
    }

    /// Records the frames' calls and the frame loop's parts for the anatomy (or stops).
    pub fn record_anatomy(&mut self, on: bool) {
        self.anatomy.set_recording(on);
        if let Some(cuda) = &self.selection.cuda {
            cuda.context.trace().set_per_frame(on);
        }
    }

    /// How each GPU lane's times were put on the host clock, or why they were not.
    pub fn calibrations(&self) -> Vec<Calibration> {
        let mut calibrations = Vec::new();
        if let Some(demo) = self.demo.as_deref() {
            calibrations.extend(demo.pipeline().transfer_ref().calibration());
        }
        calibrations.push(self.renderer.calibration());
        calibrations
    }

    /// Writes the frames `request` asks for as a Chrome trace (Perfetto, chrome://tracing) and
    /// says where; returns how many frames it holds.
    pub fn write_trace(&self, request: &TraceRequest) -> Result<usize> {
        let anatomy = self.anatomy(request.frames);
        let api = self.renderer.info().api.label();
        let trace = chrome_trace(&anatomy, api, &self.calibrations());
        let text = serde_json::to_string(&trace).map_err(|e| crate::error::Error::InvalidInput(e.to_string()))?;
        crate::output::write(&request.path, text.as_bytes())?;
        log::info!(
            "wrote the anatomy of {} frames to {} (open it in https://ui.perfetto.dev or chrome://tracing)",
            anatomy.len(),
            request.path.display()
        );
        Ok(anatomy.len())
    }
}
