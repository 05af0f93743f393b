//! The anatomy of a frame: its work as spans on lanes — the host thread, the CUDA stream, the
//! graphics queue — on one clock ([`crate::stats::clock_us`]), and the edges that order work on
//! one lane after work on another (an unmap before the draw that reads the buffer, a semaphore
//! signal before its wait). The panel draws it; [`chrome_trace`] writes it for Perfetto.
//!
//! Host spans are timed by host clocks. GPU spans come from CUDA events and GL or Vulkan
//! timestamps put on the host clock by a calibration, whose error each lane states
//! ([`Calibration`]); a lane that could not be calibrated says so and has no spans.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::stats::{FrameSample, Lane, Stage};

/// One piece of work on a lane.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// Where it ran.
    pub lane: Lane,
    /// A stage name (`kernel`, `draw`, …), a part of the frame loop, or a call
    /// (`cuGraphicsMapResources`).
    pub name: &'static str,
    /// Arguments or what it was, in words (may be empty).
    pub detail: String,
    /// Start, µs on the one clock.
    pub start_us: f64,
    /// Length, µs.
    pub dur_us: f64,
    /// An API call (the driver-call trace) rather than a stage.
    pub call: bool,
}

impl Span {
    /// Where it ends, µs on the one clock.
    pub fn end_us(&self) -> f64 {
        self.start_us + self.dur_us
    }

    /// A stage in which its lane waits for another rather than works: a wait for a semaphore or
    /// for the stream (`sync`), and on the CUDA stream the map (which sits until GL is done with
    /// the buffers). Idle shares count these as idle.
    pub fn waits(&self) -> bool {
        !self.call && (self.name == Stage::Sync.name() || (self.lane == Lane::Cuda && self.name == Stage::Map.name()))
    }
}

/// An ordering edge: the work ending at `from_us` on `from` comes before the work starting at
/// `to_us` on `to`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// Lane of the work that comes first.
    pub from: Lane,
    /// Its end, µs.
    pub from_us: f64,
    /// Lane of the work that waits.
    pub to: Lane,
    /// Its start, µs.
    pub to_us: f64,
    /// What orders them, in words.
    pub label: String,
}

/// How a transfer path orders two stages: `from` ends before `to` of this frame starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeRule {
    /// The stage that comes first.
    pub from: Stage,
    /// The stage that waits for it.
    pub to: Stage,
    /// What orders them.
    pub label: &'static str,
    /// Which frame's `from` it is.
    pub from_frame: FromFrame,
    /// The call that makes the ordering (a semaphore's signal or wait), whose arguments (the
    /// semaphore and its value) the edge's label shows where the frame's calls were recorded.
    pub via: Option<&'static str>,
}

/// The frame whose stage an [`EdgeRule`] starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromFrame {
    /// This frame.
    This,
    /// The frame that last used this frame's buffers: as many frames back as sets of buffers are
    /// used in turn (the pipeline depth).
    LastUse,
    /// As `LastUse`, only while one set of buffers is used: deeper, the wait happens in the frame
    /// before, while it prepares the next set, which has no span of its own.
    LastUseAtDepthOne,
}

/// How well a lane's times sit on the one clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// The lane.
    pub lane: Lane,
    /// The lane's name (`CUDA stream`, `OpenGL`, `Vulkan`).
    pub name: String,
    /// Half the width of the interval the calibration's GPU timestamp was taken in, µs; `None`:
    /// not calibrated.
    pub error_us: Option<f64>,
    /// How it was calibrated, or why it was not.
    pub note: String,
}

/// One frame's anatomy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameAnatomy {
    /// Frame number.
    pub frame: u64,
    /// The frame's start (its step's), µs on the one clock.
    pub start_us: f64,
    /// The spans, stages first, then calls.
    pub spans: Vec<Span>,
    /// The ordering edges found among them.
    pub edges: Vec<Edge>,
}

impl FrameAnatomy {
    /// The anatomy of `sample`, which started at `start_us`, with `extra` spans (driver calls,
    /// the frame loop's own parts) and the edges `rules` give where both stages have a span.
    /// A stage's edge end is its GPU span where one was measured, its host span otherwise.
    /// `last_use` is the frame that last used this frame's buffers and `depth` how many frames
    /// back it is, for the rules that start there.
    pub fn build(
        sample: &FrameSample,
        start_us: f64,
        extra: Vec<Span>,
        rules: &[EdgeRule],
        last_use: Option<&FrameSample>,
        depth: u32,
    ) -> Self {
        let mut spans = Vec::new();
        for stage in Stage::ALL {
            if let Some((start, dur)) = sample.stages.host_span(stage) {
                spans.push(stage_span(Lane::Host, stage, start, dur));
            }
            if let Some((lane, start, dur)) = sample.stages.gpu_span(stage) {
                spans.push(stage_span(lane, stage, start, dur));
            }
        }
        spans.extend(extra);
        let edges = rules
            .iter()
            .filter_map(|rule| {
                let (to, to_us, _) = placed(sample, rule.to)?;
                let (from, start, dur) = match rule.from_frame {
                    FromFrame::This => placed(sample, rule.from)?,
                    FromFrame::LastUseAtDepthOne if depth != 1 => return None,
                    FromFrame::LastUse | FromFrame::LastUseAtDepthOne => placed(last_use?, rule.from)?,
                };
                // The last such call: a step may consume an earlier signal before its own wait.
                let call = rule.via.and_then(|via| spans.iter().rev().find(|s| s.call && s.name == via));
                let label = match call {
                    Some(call) if !call.detail.is_empty() => format!("{} ({})", rule.label, call.detail),
                    _ => rule.label.to_owned(),
                };
                Some(Edge { from, from_us: start + dur, to, to_us, label })
            })
            .collect();
        Self { frame: sample.frame, start_us, spans, edges }
    }

    /// Where the frame's last span ends.
    pub fn end_us(&self) -> f64 {
        self.spans.iter().map(Span::end_us).fold(self.start_us, f64::max)
    }

    /// The frame's critical path, as indices into `spans`, last first: from the stage that ends
    /// last, back through what each waited for — the edge into it, or the stage before it on its
    /// own lane, whichever ended later (that one held it up).
    pub fn critical_path(&self) -> Vec<usize> {
        const NEAR: f64 = 1e-3;
        let stages = || self.spans.iter().enumerate().filter(|(_, s)| !s.call);
        let Some((mut current, _)) = stages().max_by(|a, b| a.1.end_us().total_cmp(&b.1.end_us())) else {
            return Vec::new();
        };
        let mut path = vec![current];
        loop {
            let span = &self.spans[current];
            let by_edge = self
                .edges
                .iter()
                .filter(|e| e.to == span.lane && (e.to_us - span.start_us).abs() < NEAR)
                .filter_map(|e| stages().find(|(_, s)| s.lane == e.from && (s.end_us() - e.from_us).abs() < NEAR));
            let on_lane = stages().filter(|(i, s)| {
                *i != current && s.lane == span.lane && s.end_us() <= span.start_us + NEAR && s.start_us < span.start_us
            });
            let before = by_edge
                .chain(on_lane)
                .filter(|(i, _)| !path.contains(i))
                .max_by(|a, b| a.1.end_us().total_cmp(&b.1.end_us()));
            match before {
                Some((index, _)) => {
                    path.push(index);
                    current = index;
                }
                None => return path,
            }
        }
    }
}

/// The share (0–1) of a window as long as the frames' periods (first frame's start to the last
/// frame's) in which `lane` ran no stage or only waited ([`Span::waits`]). The window starts at
/// the lane's first span: a GPU lane's work runs later than the host's frame, by its latency, and
/// is measured over its own periods. `None` with fewer than two frames or no span on the lane.
pub fn idle_fraction(frames: &[FrameAnatomy], lane: Lane) -> Option<f64> {
    let period = frames.last()?.start_us - frames.first()?.start_us;
    let spans = || frames.iter().flat_map(|frame| &frame.spans).filter(|s| s.lane == lane && !s.call);
    let first = spans().map(|s| s.start_us).min_by(f64::total_cmp)?;
    let last = first + period;
    if period <= 0.0 {
        return None;
    }
    let mut pieces: Vec<(f64, f64)> = spans()
        .filter(|s| !s.waits())
        .map(|s| (s.start_us.max(first), s.end_us().min(last)))
        .filter(|(a, b)| b > a)
        .collect();
    pieces.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut busy = 0.0;
    let mut reach = f64::NEG_INFINITY;
    for (a, b) in pieces {
        let a = a.max(reach);
        if b > a {
            busy += b - a;
            reach = b;
        }
    }
    Some((1.0 - busy / (last - first)).clamp(0.0, 1.0))
}

/// Where `stage` of `sample` ran, for its edges: lane, start and length (µs) of its GPU span where
/// one was measured, of its host span otherwise.
fn placed(sample: &FrameSample, stage: Stage) -> Option<(Lane, f64, f64)> {
    let (lane, start, dur) = sample
        .stages
        .gpu_span(stage)
        .or_else(|| sample.stages.host_span(stage).map(|(start, dur)| (Lane::Host, start, dur)))?;
    Some((lane, start, dur.max(0.0)))
}

fn stage_span(lane: Lane, stage: Stage, start_us: f64, dur_us: f64) -> Span {
    Span { lane, name: stage.name(), detail: String::new(), start_us, dur_us: dur_us.max(0.0), call: false }
}

/// Process ids of the trace: one process per API.
fn pid(lane: Lane) -> u32 {
    match lane {
        Lane::Host => 1,
        Lane::Cuda => 2,
        Lane::Graphics => 3,
    }
}

/// Thread of a span: the host's stages and its calls are two threads of the host process.
fn tid(lane: Lane, call: bool) -> u32 {
    if lane == Lane::Host && call { 2 } else { 1 }
}

/// The frames in the Chrome trace event format (Perfetto's UI and chrome://tracing open it): one
/// process per API (host, CUDA, `graphics_api`), one thread per lane, an `X` event per span, a
/// flow (`s` → `f`) per ordering edge and an instant (`i`) where each frame starts; the lanes'
/// calibrations go in `otherData`.
pub fn chrome_trace(frames: &[FrameAnatomy], graphics_api: &str, calibrations: &[Calibration]) -> Value {
    let mut events = Vec::new();
    let names: HashMap<u32, &str> = HashMap::from([(1, "host"), (2, "CUDA"), (3, graphics_api)]);
    for (pid, name) in &names {
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 1, "args": {"name": name}}));
        events
            .push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 1, "args": {"sort_index": pid}}));
    }
    for (pid, tid, name) in [(1, 1, "frame stages"), (1, 2, "driver and API calls"), (2, 1, "stream"), (3, 1, "queue")]
    {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}));
    }
    let mut flow_id = 0u64;
    for frame in frames {
        // A marker where each frame starts, across the host's lanes.
        events.push(json!({
            "ph": "i", "s": "p", "name": format!("frame {}", frame.frame), "cat": "frame",
            "pid": 1, "tid": 1, "ts": frame.start_us,
        }));
        let critical = frame.critical_path();
        for (index, span) in frame.spans.iter().enumerate() {
            events.push(json!({
                "ph": "X",
                "name": span.name,
                "cat": if span.call { "call" } else { "stage" },
                "pid": pid(span.lane),
                "tid": tid(span.lane, span.call),
                "ts": span.start_us,
                "dur": span.dur_us,
                "args": {"frame": frame.frame, "detail": span.detail, "critical": critical.contains(&index)},
            }));
        }
        for edge in &frame.edges {
            flow_id += 1;
            // A flow starts inside the slice it leaves (just before its end) and binds to the
            // slice enclosing its end point ("bp": "e").
            events.push(json!({
                "ph": "s", "id": flow_id, "name": edge.label, "cat": "order",
                "pid": pid(edge.from), "tid": 1, "ts": edge.from_us - 0.001,
            }));
            events.push(json!({
                "ph": "f", "bp": "e", "id": flow_id, "name": edge.label, "cat": "order",
                "pid": pid(edge.to), "tid": 1, "ts": edge.to_us,
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "clock": "µs since the program started (host CLOCK_MONOTONIC)",
            "frames": frames.len(),
            "calibrations": calibrations,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::StageTimes;

    fn sample() -> FrameSample {
        let mut stages = StageTimes::default();
        stages.set_host(Stage::Kernel, 10.0);
        stages.set_host_span(Stage::Kernel, 100.0, 10.0);
        stages.set_gpu_at(Stage::Kernel, Lane::Cuda, 112.0, 30.0);
        stages.set_host_span(Stage::Draw, 120.0, 5.0);
        stages.set_gpu_at(Stage::Draw, Lane::Graphics, 150.0, 20.0);
        FrameSample { frame: 7, frame_us: 100.0, stages }
    }

    /// CUDA's kernel before the graphics draw, within a frame.
    fn signal_wait() -> EdgeRule {
        EdgeRule { from: Stage::Kernel, to: Stage::Draw, label: "signal, wait", from_frame: FromFrame::This, via: None }
    }

    #[test]
    fn edges_join_the_gpu_spans_where_measured() {
        let rules = [signal_wait()];
        let anatomy = FrameAnatomy::build(&sample(), 100.0, Vec::new(), &rules, None, 1);
        assert_eq!(anatomy.spans.len(), 4);
        assert_eq!(anatomy.edges.len(), 1);
        let edge = &anatomy.edges[0];
        assert_eq!((edge.from, edge.to), (Lane::Cuda, Lane::Graphics));
        assert_eq!((edge.from_us, edge.to_us), (142.0, 150.0));
        assert_eq!(anatomy.end_us(), 170.0);
        // With the frame's calls recorded, the edge names the semaphore and value of its call.
        let signal = Span {
            lane: Lane::Host,
            name: "cuSignalExternalSemaphoresAsync",
            detail: "written = 42".to_owned(),
            start_us: 108.0,
            dur_us: 1.0,
            call: true,
        };
        let via = [EdgeRule { via: Some("cuSignalExternalSemaphoresAsync"), ..rules[0] }];
        let anatomy = FrameAnatomy::build(&sample(), 100.0, vec![signal], &via, None, 1);
        assert_eq!(anatomy.edges[0].label, "signal, wait (written = 42)");
        // A rule whose stage has no span gives no edge.
        let none =
            FrameAnatomy::build(&sample(), 100.0, Vec::new(), &[EdgeRule { from: Stage::Unmap, ..rules[0] }], None, 1);
        assert!(none.edges.is_empty());
    }

    #[test]
    fn an_edge_from_the_frame_that_last_used_the_buffers() {
        let rule =
            |from_frame| EdgeRule { from: Stage::Draw, to: Stage::Kernel, label: "released", from_frame, via: None };
        // Frame 7's draw on the graphics lane ended at 170; frame 9's kernel starts at 312.
        let mut later = sample();
        later.frame = 9;
        later.stages.set_gpu_at(Stage::Kernel, Lane::Cuda, 312.0, 30.0);
        let earlier = sample();
        let anatomy = FrameAnatomy::build(&later, 300.0, Vec::new(), &[rule(FromFrame::LastUse)], Some(&earlier), 2);
        assert_eq!(anatomy.edges.len(), 1);
        let edge = &anatomy.edges[0];
        assert_eq!((edge.from, edge.from_us, edge.to, edge.to_us), (Lane::Graphics, 170.0, Lane::Cuda, 312.0));
        // Where that frame is not known, or the rule holds only with one set of buffers and two
        // are used, there is no edge.
        let rules = [rule(FromFrame::LastUse)];
        assert!(FrameAnatomy::build(&later, 300.0, Vec::new(), &rules, None, 2).edges.is_empty());
        let rules = [rule(FromFrame::LastUseAtDepthOne)];
        assert!(FrameAnatomy::build(&later, 300.0, Vec::new(), &rules, Some(&earlier), 2).edges.is_empty());
        assert_eq!(FrameAnatomy::build(&later, 300.0, Vec::new(), &rules, Some(&earlier), 1).edges.len(), 1);
        // Without a GPU span the earlier stage's host span counts.
        let mut host_only = sample();
        host_only.stages = StageTimes::default();
        host_only.stages.set_host_span(Stage::Draw, 120.0, 5.0);
        let anatomy = FrameAnatomy::build(&later, 300.0, Vec::new(), &[rule(FromFrame::LastUse)], Some(&host_only), 2);
        assert_eq!((anatomy.edges[0].from, anatomy.edges[0].from_us), (Lane::Host, 125.0));
    }

    #[test]
    fn a_span_keeps_its_own_length_when_the_gpu_time_counts_more() {
        // GL interop at depth 2: the map's GPU time counts the maps made ahead for the next
        // frame too, but its span is the map before the kernel, which must not reach past it.
        let mut sample = sample();
        sample.stages.set_gpu_at(Stage::Map, Lane::Cuda, 100.0, 10.0);
        sample.stages.set_gpu(Stage::Map, 300.0);
        let rules = [EdgeRule { from: Stage::Map, to: Stage::Kernel, label: "mapped", ..signal_wait() }];
        let anatomy = FrameAnatomy::build(&sample, 100.0, Vec::new(), &rules, None, 2);
        let map = anatomy.spans.iter().find(|s| s.lane == Lane::Cuda && s.name == "map").expect("map span");
        assert_eq!((map.start_us, map.dur_us), (100.0, 10.0));
        assert_eq!((anatomy.edges[0].from_us, anatomy.edges[0].to_us), (110.0, 112.0));
        assert_eq!(sample.stages.gpu(Stage::Map), Some(300.0));
    }

    #[test]
    fn idle_time_counts_overlapping_spans_once() {
        let first = FrameAnatomy::build(&sample(), 100.0, Vec::new(), &[], None, 1);
        // The next frame starts at 200: the window is 100–200.
        let second = FrameAnatomy { frame: 8, start_us: 200.0, spans: Vec::new(), edges: Vec::new() };
        let frames = [first.clone(), second.clone()];
        // Host: kernel 100–110 and draw 120–125: 85 % idle.
        let idle = idle_fraction(&frames, Lane::Host).expect("host spans");
        assert!((idle - 0.85).abs() < 1e-9, "{idle}");
        // CUDA: 112–142 and an overlapping 120–150 count once: 38 µs busy.
        let mut overlapping = first.clone();
        overlapping.spans.push(stage_span(Lane::Cuda, Stage::Unmap, 120.0, 30.0));
        let idle = idle_fraction(&[overlapping, second.clone()], Lane::Cuda).expect("cuda spans");
        assert!((idle - 0.62).abs() < 1e-9, "{idle}");
        // The graphics draw at 150–170 and a late span of the first frame inside the window count.
        let idle = idle_fraction(&frames, Lane::Graphics).expect("graphics spans");
        assert!((idle - 0.8).abs() < 1e-9, "{idle}");
        assert_eq!(idle_fraction(std::slice::from_ref(&first), Lane::Host), None, "one frame has no window");
        // A map on the CUDA stream is a wait (for GL): it counts as idle, the kernel does not.
        let mut mapped = first;
        mapped.spans.push(stage_span(Lane::Cuda, Stage::Map, 50.0, 60.0));
        let idle = idle_fraction(&[mapped, second], Lane::Cuda).expect("cuda spans");
        assert!((idle - 0.7).abs() < 1e-9, "{idle}");
    }

    #[test]
    fn the_critical_path_follows_the_edges_back_from_the_last_span() {
        let rules = [signal_wait()];
        let anatomy = FrameAnatomy::build(&sample(), 100.0, Vec::new(), &rules, None, 1);
        let names: Vec<(Lane, &str)> =
            anatomy.critical_path().iter().map(|&i| (anatomy.spans[i].lane, anatomy.spans[i].name)).collect();
        // The GL draw ends last (170); it waited for CUDA's kernel (the edge), which came after
        // nothing on its lane: the host's draw (120–125) is not on the path.
        assert_eq!(names, vec![(Lane::Graphics, "draw"), (Lane::Cuda, "kernel")]);
        // Without the edge, the draw is alone on its lane: the path is the draw itself.
        let alone = FrameAnatomy::build(&sample(), 100.0, Vec::new(), &[], None, 1);
        assert_eq!(alone.critical_path().len(), 1);
    }

    #[test]
    fn chrome_trace_has_a_process_per_api_and_a_flow_per_edge() {
        let rules = [signal_wait()];
        let anatomy = FrameAnatomy::build(&sample(), 100.0, Vec::new(), &rules, None, 1);
        let trace = chrome_trace(&[anatomy], "Vulkan", &[]);
        let events = trace["traceEvents"].as_array().expect("events");
        let processes: Vec<&str> =
            events.iter().filter(|e| e["name"] == "process_name").filter_map(|e| e["args"]["name"].as_str()).collect();
        for name in ["host", "CUDA", "Vulkan"] {
            assert!(processes.contains(&name), "{processes:?}");
        }
        assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 4);
        let start = events.iter().find(|e| e["ph"] == "s").expect("flow start");
        let finish = events.iter().find(|e| e["ph"] == "f").expect("flow end");
        assert_eq!(start["id"], finish["id"]);
        assert!(start["ts"].as_f64() < finish["ts"].as_f64());
        assert_eq!((start["pid"].as_u64(), finish["pid"].as_u64()), (Some(2), Some(3)));
    }
}
