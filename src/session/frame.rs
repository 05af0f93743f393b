//! One frame: step the demo (the first frames watched for a stalling driver), lay out the panel,
//! draw the scene and the panel, present or read back, keep the pixels asked for, and collect the
//! GPU times that arrived late.

use std::path::Path;
use std::time::Instant;

use super::{FrameInput, FrameReport, Session, anatomy, stall_advice};
use crate::demo_kit::{DemoTransfer, View};
use crate::error::{Error, Result};
use crate::renderer::PanelPaint;
use crate::stats::{FrameSample, Stage, StageTimes, clock_us};
use crate::transfer::TransferKind;
use crate::ui::{self, PanelAction, PanelFacts, PanelInput, PanelView};

/// The first frames are watched for stalls (first map, first wait on GL).
const FRAMES_WATCHED: u64 = 3;

/// `INTEROP_LAB_SIMULATE_STALL_MS`: the first GL-interop frame waits that long inside the watched
/// section, as a stalled driver would; for the tests of the watchdog, and to see what the app does.
fn simulate_stall(kind: TransferKind) {
    let Some(ms) = std::env::var("INTEROP_LAB_SIMULATE_STALL_MS").ok().and_then(|v| v.parse::<u64>().ok()) else {
        return;
    };
    if kind == TransferKind::Interop {
        log::warn!("simulating a driver stall of {ms} ms (INTEROP_LAB_SIMULATE_STALL_MS)");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

impl Session {
    /// One frame: step the demo (unless paused), lay out the panel, draw the scene right of it,
    /// present or read back, collect what arrived. Errors go to the panel and the report; a
    /// failing step pauses the demo on its last good frame.
    pub fn frame(&mut self, input: FrameInput<'_>) -> FrameReport {
        let mut report = FrameReport::default();
        let started = Instant::now();
        let frame_us = self.last_frame_start.map_or(f64::NAN, |t| (started - t).as_secs_f64() * 1e6);
        self.last_frame_start = Some(started);
        self.first_frame_at.get_or_insert(started);
        let frame = self.frame;
        self.frame += 1;
        let Some(demo) = self.demo.as_deref_mut() else { return report };
        if let Some(watcher) = &mut self.watcher {
            watcher.poll(demo);
        }

        let mut stages = StageTimes::default();
        let run = !self.state.paused || std::mem::take(&mut self.state.step_once);
        // The first frames map and wait for the first time: where a stalling driver shows.
        let advice = stall_advice(demo.pipeline().kind()).filter(|_| frame < FRAMES_WATCHED);
        let watch = advice.map(|advice| self.watchdog.watch("the first frames (map, kernel, draw)", advice));
        if frame == 0 {
            simulate_stall(demo.pipeline().kind());
        }
        if run {
            match demo.step(self.renderer.graphics(), frame, input.dt) {
                Ok(times) => stages = times,
                Err(error) if error.is_context_lost() => {
                    drop(watch);
                    return self.recover(&error);
                }
                Err(error) => {
                    self.state.paused = true;
                    let message = format!("paused: {error}");
                    report.error(&message);
                    self.push_message(message);
                }
            }
        }

        // The panel first: the demo is drawn right of it. A frame whose pixels are kept lays it
        // out afresh, so what is saved is current.
        let capture = input.capture || input.screenshot.is_some() || self.recorder.is_some();
        let panel_started = Instant::now();
        let (actions, panel) = match input.panel {
            Some(raw) => self.lay_out_panel(raw, capture, &mut report),
            None => (Vec::new(), None),
        };
        let panel_us = panel_started.elapsed().as_secs_f64() * 1e6;
        let [width, height] = self.renderer.size();
        let panel_px = self.panel_width().min(width.saturating_sub(1));
        let view = View { origin: [panel_px, 0], size: [width - panel_px, height] };

        // The frame loop's own parts and calls, for the anatomy: gathered only while it is
        // recorded, so a frame that is not recorded allocates nothing for it.
        let recording = self.anatomy.recording();
        let mut parts = Vec::new();
        let laid_out = panel.is_some();
        let drawn = self.draw(frame, &view, panel.as_ref(), capture);
        self.panel.kept = panel.filter(|panel| panel.keep);
        if watch.is_some() {
            drop(watch);
            self.leave_a_stalled_path(&mut report);
        }
        match drawn {
            Ok(Some(end)) => {
                let panel = laid_out.then_some((panel_started, panel_us));
                let timing = Drawn { panel, recording, screenshot: input.screenshot };
                self.note_drawn(end, &timing, &mut stages, &mut parts, &mut report);
            }
            Ok(None) => {}
            Err(error) if error.is_context_lost() => return self.recover(&error),
            Err(error) => {
                report.error(&error);
                self.push_message(error.to_string());
            }
        }

        self.history.push(FrameSample { frame, frame_us, stages });
        if frame == 0
            && let Some(age) = crate::stats::since_program_start()
        {
            log::info!("first frame drawn {:.2} s after the program started", age.as_secs_f64());
        }
        if let Some(error) = self.collect_late_times(false) {
            return self.recover(&error);
        }
        let late_errors = self.end_recorded_frame(frame, started, recording, parts);
        for error in late_errors {
            report.error(&error);
            self.push_message(error.to_string());
        }
        for action in actions {
            report.merge(self.act(action));
        }
        report
    }

    /// Closes the frame for CUDA's call trace and the anatomy (its calls among the frame's parts
    /// while recorded); returns the errors CUDA objects reported since.
    fn end_recorded_frame(
        &mut self,
        frame: u64,
        started: Instant,
        recording: bool,
        mut parts: Vec<crate::anatomy::Span>,
    ) -> Vec<Error> {
        let late_errors = match &self.selection.cuda {
            Some(cuda) => {
                let trace = cuda.context.trace();
                trace.end_frame(); // the frame's calls, the submission included
                if recording {
                    parts.extend(anatomy::call_spans(trace.last_frame()));
                }
                cuda.context.take_errors()
            }
            None => Vec::new(),
        };
        let (rules, depth) = self.demo.as_deref().map_or((&[][..], 1), |demo| {
            let pipeline = demo.pipeline();
            (pipeline.kind().edges_with(pipeline.what_if()), demo.buffer_sets())
        });
        self.anatomy.push(frame, started, rules, depth, parts);
        late_errors
    }

    /// What a drawn frame took, into `stages` and (while recorded) the anatomy's `parts`; its
    /// pixels kept, written and handed back where asked.
    fn note_drawn(
        &mut self,
        end: FrameEnd,
        drawn: &Drawn<'_>,
        stages: &mut StageTimes,
        parts: &mut Vec<crate::anatomy::Span>,
        report: &mut FrameReport,
    ) {
        let recording = drawn.recording;
        report.drawn = true;
        let (draw_us, paint_us, present_us) = end.micros();
        stages.set_host_span(Stage::Draw, clock_us(end.started), draw_us);
        if let Some((panel_started, panel_us)) = drawn.panel {
            stages.set_host(Stage::Panel, panel_us + paint_us);
            // The panel's span is its layout; its paint, after the draw, is a part of its own.
            stages.set_host_span(Stage::Panel, clock_us(panel_started), panel_us);
            if recording {
                parts.push(anatomy::host_part("panel paint", end.painting, end.presenting));
            }
        }
        // A window presents; offscreen, ending the frame is submitting its drawing.
        if self.renderer.info().window {
            stages.set_host(Stage::Draw, draw_us);
            stages.set_host_at(Stage::Present, clock_us(end.presenting), present_us);
        } else {
            stages.set_host(Stage::Draw, draw_us + present_us);
            if recording {
                parts.push(anatomy::host_part("submit", end.presenting, end.ended));
            }
        }
        if let Some(pixels) = end.pixels {
            self.keep_pixels(&pixels, drawn.screenshot, report);
            report.pixels = Some(pixels);
        }
    }

    /// Lays the panel out for this frame, or keeps the last layout when nothing happened in the
    /// panel since and it is younger than [`PANEL_REFRESH`] (`fresh` forces a new one); returns
    /// what the user asked for and what to paint.
    fn lay_out_panel(
        &mut self,
        raw: egui::RawInput,
        fresh: bool,
        report: &mut FrameReport,
    ) -> (Vec<PanelAction>, Option<PanelPrimitives>) {
        let quiet = raw.events.is_empty() && raw.dropped_files.is_empty() && raw.hovered_files.is_empty();
        if let Some(kept) = self.panel.kept.take()
            && !fresh
            && quiet
            && kept.reusable(raw.screen_rect)
        {
            return (Vec::new(), Some(kept));
        }
        let recording = self.recorder.as_ref().map(|recorder| {
            let (frames, dropped) = recorder.counts();
            (recorder.dir(), frames, dropped)
        });
        let facts = PanelFacts {
            paused: self.state.paused,
            vsync: self.renderer.vsync(),
            window: self.renderer.info().window,
            recording,
            messages: &self.state.messages,
            notices: &self.state.notices,
            what_if: self.state.what_if,
        };
        let anatomy = self.panel.view.anatomy.open.then(|| ui::anatomy::AnatomyInput {
            frames: self.anatomy.for_view(&self.history),
            calibrations: self.calibrations(),
            recording: self.anatomy.recording(),
            api: self.renderer.info().api.label(),
            kind: self.transfer_kind(),
            what_if: self.state.what_if != crate::transfer::WhatIf::default(),
        });
        let Some(demo) = self.demo.as_deref_mut() else { return (Vec::new(), None) };
        let (selection, history, renderer, watcher) =
            (&self.selection, &self.history, self.renderer.info(), self.watcher.as_ref());
        let view = &mut self.panel.view;
        let mut actions = Vec::new();
        let raw_screen = raw.screen_rect;
        let output = self.panel.egui.run_ui(raw, |ui| {
            let anatomy = anatomy.as_ref();
            let input = PanelInput { demo: &mut *demo, selection, history, renderer, watcher, facts, anatomy };
            actions = ui::side_panel(ui, input, view);
        });
        self.panel.textures.append(output.textures_delta);
        // An animation (a section opening) asks to be laid out again at once.
        let animating = output
            .viewport_output
            .get(&egui::ViewportId::ROOT)
            .is_some_and(|viewport| viewport.repaint_delay.is_zero());
        let primitives = self.panel.egui.tessellate(output.shapes, output.pixels_per_point);
        report.platform_output = Some(output.platform_output);
        let laid_out = PanelPrimitives {
            primitives,
            pixels_per_point: output.pixels_per_point,
            screen: raw_screen,
            at: Instant::now(),
            keep: !animating && actions.is_empty(),
        };
        (actions, Some(laid_out))
    }

    /// Draws the frame (scene, then panel) and ends it; `None`: nothing was drawn this time.
    fn draw(
        &mut self,
        frame: u64,
        view: &View,
        panel: Option<&PanelPrimitives>,
        capture: bool,
    ) -> Result<Option<FrameEnd>> {
        let started = Instant::now();
        if !self.renderer.begin_frame(frame)? {
            return Ok(None);
        }
        let demo = self.demo.as_deref_mut().ok_or_else(|| Error::Unavailable("no demo is running".to_owned()))?;
        let drawn = self.renderer.draw(&demo.scene(view), view);
        let painting = Instant::now();
        let painted = match panel {
            Some(panel) => self.renderer.paint_panel(PanelPaint {
                primitives: &panel.primitives,
                textures: &mut self.panel.textures,
                pixels_per_point: panel.pixels_per_point,
            }),
            None => Ok(()),
        };
        // The frame is ended whatever happened in it, so that the next one can begin.
        let presenting = Instant::now();
        let pixels = self.renderer.end_frame(capture);
        let end = FrameEnd { pixels: None, started, painting, presenting, ended: Instant::now() };
        drawn?;
        painted?;
        Ok(Some(FrameEnd { pixels: pixels?, ..end }))
    }

    /// The frame's pixels to the screenshot and the recording.
    fn keep_pixels(&mut self, pixels: &[u8], screenshot: Option<&Path>, report: &mut FrameReport) {
        let size = self.renderer.size();
        if let Some(path) = screenshot
            && let Err(error) = crate::output::write_rgba8(path, size, pixels)
        {
            report.error(&error);
            self.push_message(error.to_string());
        }
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.frame(size, pixels.to_vec());
        }
    }

    /// Moves GPU times that have arrived into the history (with `all`, waits for every frame
    /// first). Returns the error if the CUDA context turned out to be lost.
    pub(super) fn collect_late_times(&mut self, all: bool) -> Option<Error> {
        let mut lost = None;
        if let Some(demo) = self.demo.as_deref_mut() {
            loop {
                match demo.pipeline_mut().transfer().poll_gpu_times() {
                    Ok(Some(late)) => self.history.add_late(late),
                    Ok(None) => break,
                    Err(error) if error.is_context_lost() => {
                        lost = Some(error);
                        break;
                    }
                    Err(error) => {
                        self.push_message(error.to_string());
                        break;
                    }
                }
            }
        }
        match self.renderer.gpu_times(all) {
            Ok(times) => times.into_iter().for_each(|late| self.history.add_late(late)),
            Err(error) => self.push_message(error.to_string()),
        }
        lost
    }
}

/// How long a panel layout is painted again while nothing happens in the panel: its numbers
/// change every frame, and twenty updates a second are as many as a reader takes in. Laying it
/// out costs ~0.5–1 ms of host time; painting what was laid out, a fraction of that.
const PANEL_REFRESH: std::time::Duration = std::time::Duration::from_millis(50);

/// The side panel's state: egui's context, what the panel shows, the texture changes no paint has
/// applied yet, and the last layout, painted again while nothing happens in it.
pub(super) struct Panel {
    pub(super) egui: egui::Context,
    pub(super) view: PanelView,
    pub(super) textures: egui::TexturesDelta,
    pub(super) kept: Option<PanelPrimitives>,
}

impl Panel {
    pub(super) fn new(view: PanelView) -> Self {
        Self { egui: egui::Context::default(), view, textures: egui::TexturesDelta::default(), kept: None }
    }

    /// For a new painter (another renderer), which has none of egui's textures: a new context
    /// sends them all. What the panel shows stays.
    pub(super) fn restart(&mut self) {
        self.kept = None;
        self.egui = egui::Context::default();
        self.textures = egui::TexturesDelta::default();
    }
}

/// A panel laid out and tessellated, ready to paint (again).
pub(super) struct PanelPrimitives {
    primitives: Vec<egui::ClippedPrimitive>,
    pixels_per_point: f32,
    /// The screen it was laid out for.
    screen: Option<egui::Rect>,
    at: Instant,
    /// May be painted again: nothing was clicked and nothing is moving in it.
    keep: bool,
}

impl PanelPrimitives {
    fn reusable(&self, screen: Option<egui::Rect>) -> bool {
        self.keep && self.screen == screen && self.at.elapsed() < PANEL_REFRESH
    }
}

/// What [`Session::note_drawn`] needs to know of the frame besides how it ended: when the panel
/// was laid out and how long that took (when it was), whether the anatomy records, and where the
/// screenshot goes.
struct Drawn<'a> {
    panel: Option<(Instant, f64)>,
    recording: bool,
    screenshot: Option<&'a Path>,
}

/// How a frame ended, and when each part of it began.
struct FrameEnd {
    pixels: Option<Vec<u8>>,
    /// Beginning the frame and drawing the scene.
    started: Instant,
    /// Painting the panel.
    painting: Instant,
    /// Presenting or submitting it (and reading it back when asked).
    presenting: Instant,
    /// Done.
    ended: Instant,
}

impl FrameEnd {
    /// Host µs of the draw, the panel's paint, and the present or submit.
    fn micros(&self) -> (f64, f64, f64) {
        let micros = |from: Instant, to: Instant| (to - from).as_secs_f64() * 1e6;
        (
            micros(self.started, self.painting),
            micros(self.painting, self.presenting),
            micros(self.presenting, self.ended),
        )
    }
}
