//! The frame anatomy in the panel: the last frames as lanes on one time axis — the host's frame
//! stages, its driver and API calls, the CUDA stream, the graphics queue — with an arrow for each
//! edge that orders one lane's work after another's, each lane's idle share, and how well each
//! GPU lane sits on the host clock. Hover a span for what it was; freeze to read it still.

use super::{PanelAction, PanelView};
use crate::anatomy::{Calibration, FrameAnatomy, Span};
use crate::args::PanelSection;
use crate::stats::{Lane, Stage};
use crate::transfer::TransferKind;

/// What the view draws, gathered by the session while the section is open.
pub struct AnatomyInput {
    /// The frames, oldest first.
    pub frames: Vec<FrameAnatomy>,
    /// Each GPU lane's calibration, or why it has none.
    pub calibrations: Vec<Calibration>,
    /// Calls and the frame loop's parts are being recorded.
    pub recording: bool,
    /// The graphics API's name (the last lane's).
    pub api: &'static str,
    /// The path in use (which lesson explains it).
    pub kind: TransferKind,
    /// A what-if switch is on.
    pub what_if: bool,
}

/// The lesson that explains what the view shows on path `kind`.
fn lesson(kind: TransferKind, what_if: bool) -> Option<&'static str> {
    if what_if {
        return Some("docs/lessons/what-if.md");
    }
    match kind {
        TransferKind::Interop => Some("docs/lessons/map-unmap.md"),
        TransferKind::HostCopy | TransferKind::HostCopyPageable => Some("docs/lessons/interop-vs-host-copy.md"),
        TransferKind::External | TransferKind::ExternalSemaphores | TransferKind::Vulkan => {
            Some("docs/lessons/host-waits-vs-semaphores.md")
        }
        TransferKind::Cpu => None,
    }
}

/// The view's state between frames.
#[derive(Debug, Default)]
pub struct AnatomyState {
    /// The section was open at the last layout (the session gathers frames only then).
    pub open: bool,
    /// Frames held still by "freeze".
    frozen: Option<Vec<FrameAnatomy>>,
}

/// Rows, top to bottom: lane, calls or not, label (`None`: the graphics API's name).
const ROWS: [(Lane, bool, Option<&str>); 4] = [
    (Lane::Host, false, Some("host")),
    (Lane::Host, true, Some("calls")),
    (Lane::Cuda, false, Some("CUDA")),
    (Lane::Graphics, false, None),
];
const ROW_HEIGHT: f32 = 18.0;
const LABEL_WIDTH: f32 = 44.0;

/// Draws the section.
pub fn section(ui: &mut egui::Ui, input: Option<&AnatomyInput>, view: &mut PanelView, actions: &mut Vec<PanelAction>) {
    let header = egui::CollapsingHeader::new("Frame anatomy")
        .default_open(view.opens(PanelSection::Anatomy))
        .show(ui, |ui| body(ui, input, &mut view.anatomy, actions));
    view.anatomy.open = header.body_returned.is_some();
}

fn body(ui: &mut egui::Ui, input: Option<&AnatomyInput>, state: &mut AnatomyState, actions: &mut Vec<PanelAction>) {
    let Some(input) = input else {
        ui.label("gathering the next frames…");
        return;
    };
    if !input.recording {
        // Open means recorded: the calls and the CUDA lane's calibration start now.
        actions.push(PanelAction::RecordAnatomy(true));
    }
    ui.horizontal(|ui| {
        let mut frozen = state.frozen.is_some();
        if ui.checkbox(&mut frozen, "freeze").changed() {
            state.frozen = frozen.then(|| input.frames.clone());
        }
        if ui.button("save trace JSON").on_hover_text("the last 120 frames, for ui.perfetto.dev").clicked() {
            actions.push(PanelAction::SaveTrace);
        }
    });
    let frames = state.frozen.as_deref().unwrap_or(&input.frames);
    if frames.is_empty() {
        ui.label("no frame recorded yet");
        return;
    }
    lanes(ui, frames, input.api);
    let legend = "outlined: each frame's critical path · arrows: what orders one lane's work after another's";
    ui.label(egui::RichText::new(legend).small().weak());
    idle_line(ui, frames, input.api);
    if let Some(page) = lesson(input.kind, input.what_if) {
        ui.label(egui::RichText::new(format!("what it means: {page} (and docs/lessons/pipelining.md)")).small());
    }
    for calibration in &input.calibrations {
        let text = match calibration.error_us {
            Some(error) => format!("{} on the host clock within ±{error:.1} µs", calibration.name),
            None => format!("{}: {}", calibration.name, calibration.note),
        };
        ui.label(egui::RichText::new(text).small().weak()).on_hover_text(&calibration.note);
    }
}

/// The lanes, the frames' starts, the spans and the edges; a tooltip for the span hovered.
fn lanes(ui: &mut egui::Ui, frames: &[FrameAnatomy], api: &str) {
    let width = ui.available_width().max(LABEL_WIDTH + 40.0);
    let height = ROW_HEIGHT * ROWS.len() as f32 + 12.0;
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, height), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals();
    let (t0, t1) = (frames[0].start_us, frames.iter().map(FrameAnatomy::end_us).fold(f64::MIN, f64::max));
    let span_us = (t1 - t0).max(1.0);
    let left = rect.left() + LABEL_WIDTH;
    let x = |t: f64| left + ((t - t0) / span_us) as f32 * (rect.right() - left);
    let row_top = |row: usize| rect.top() + row as f32 * ROW_HEIGHT;
    let row_of = |lane: Lane, call: bool| ROWS.iter().position(|&(l, c, _)| l == lane && c == call);
    let font = egui::FontId::proportional(11.0);
    for (row, &(_, _, label)) in ROWS.iter().enumerate() {
        let top = row_top(row);
        let band =
            egui::Rect::from_min_max(egui::pos2(left, top + 1.0), egui::pos2(rect.right(), top + ROW_HEIGHT - 1.0));
        painter.rect_filled(band, 2.0, visuals.faint_bg_color);
        let text = label.unwrap_or(api);
        painter.text(
            egui::pos2(rect.left(), top + ROW_HEIGHT / 2.0),
            egui::Align2::LEFT_CENTER,
            text,
            font.clone(),
            visuals.text_color(),
        );
    }
    let axis = row_top(ROWS.len());
    let mut labelled = f32::NEG_INFINITY;
    for frame in frames {
        let at = x(frame.start_us);
        painter
            .line_segment([egui::pos2(at, rect.top()), egui::pos2(at, axis)], visuals.widgets.noninteractive.bg_stroke);
        // A label only where it does not run into the one before.
        if at - labelled < 56.0 {
            continue;
        }
        labelled = at;
        painter.text(
            egui::pos2(at + 2.0, axis),
            egui::Align2::LEFT_TOP,
            format!("frame {}", frame.frame),
            font.clone(),
            visuals.weak_text_color(),
        );
    }
    let pointer = response.hover_pos();
    let mut hovered: Option<&Span> = None;
    let critical_stroke = egui::Stroke::new(1.5, visuals.strong_text_color());
    for frame in frames {
        let critical = frame.critical_path();
        for (index, span) in frame.spans.iter().enumerate() {
            let Some(row) = row_of(span.lane, span.call) else { continue };
            let top = row_top(row);
            let (a, b) = (x(span.start_us), x(span.end_us()));
            let block =
                egui::Rect::from_min_max(egui::pos2(a, top + 3.0), egui::pos2(b.max(a + 1.0), top + ROW_HEIGHT - 3.0));
            painter.rect_filled(block, 1.0, colour(span));
            if critical.contains(&index) {
                painter.rect_stroke(block, 1.0, critical_stroke, egui::StrokeKind::Outside);
            }
            if pointer.is_some_and(|p| block.expand2(egui::vec2(1.0, 0.0)).contains(p)) {
                hovered = Some(span);
            }
        }
    }
    let edge_stroke = egui::Stroke::new(1.2, egui::Color32::from_rgb(255, 140, 0));
    for edge in frames.iter().flat_map(|f| &f.edges) {
        let (Some(from), Some(to)) = (row_of(edge.from, false), row_of(edge.to, false)) else { continue };
        // An edge from a frame left of the view starts at the view's edge.
        let start = egui::pos2(x(edge.from_us).max(left), row_top(from) + ROW_HEIGHT / 2.0);
        let end = egui::pos2(x(edge.to_us), row_top(to) + ROW_HEIGHT / 2.0);
        painter.arrow(start, end - start, edge_stroke);
    }
    if let Some(span) = hovered {
        let detail = if span.detail.is_empty() { String::new() } else { format!("\n{}", span.detail) };
        let text = format!(
            "{}{detail}\nat +{:.1} µs from the first frame shown, {:.1} µs long",
            span.name,
            span.start_us - t0,
            span.dur_us
        );
        response.on_hover_text_at_pointer(text);
    }
}

/// Each lane's idle share over the frames shown, e.g. "CUDA idle 92 %".
fn idle_line(ui: &mut egui::Ui, frames: &[FrameAnatomy], api: &str) {
    let mut parts = Vec::new();
    let lanes = [(Lane::Host, "host"), (Lane::Cuda, "CUDA"), (Lane::Graphics, api)];
    for (lane, name) in lanes {
        let Some(idle) = crate::anatomy::idle_fraction(frames, lane) else { continue };
        // What the lane's work waits for: the other lanes its incoming edges come from.
        let mut waits: Vec<&str> = Vec::new();
        for edge in frames.iter().flat_map(|f| &f.edges).filter(|e| e.to == lane && e.from != lane) {
            if let Some(&(_, from)) = lanes.iter().find(|(l, _)| *l == edge.from)
                && !waits.contains(&from)
            {
                waits.push(from);
            }
        }
        parts.push(match waits.is_empty() {
            true => format!("{name} idle {:.0} %", idle * 100.0),
            false => format!("{name} idle {:.0} % (waits for {})", idle * 100.0, waits.join(", ")),
        });
    }
    if !parts.is_empty() {
        ui.label(parts.join(" · ")).on_hover_text(
            "share of the frames' periods in which the lane ran no stage or only waited (a semaphore or stream \
                 wait; on CUDA, the map), from the lane's first span (a GPU lane runs later than the host by its \
                 latency); 'waits for': where the edges into it come from",
        );
    }
}

fn colour(span: &Span) -> egui::Color32 {
    if span.call {
        return egui::Color32::from_rgb(170, 170, 170);
    }
    match Stage::ALL.iter().find(|stage| stage.name() == span.name) {
        Some(&stage) => super::timeline::colour(stage),
        None => egui::Color32::from_rgb(130, 130, 150), // the frame loop's own parts
    }
}
