//! What the panel and the keys ask of a session, carried out: pause and step, path, demo and
//! renderer switches, the learners' switches, vsync, recording.

use std::path::PathBuf;

use super::{FrameReport, HISTORY_FRAMES, Request, Session, create_demo};
use crate::demo_kit::{DemoSpec, DemoTransfer};
use crate::error::{Error, Result};
use crate::record::FrameRecorder;
use crate::renderer::Renderer;
use crate::runtime::Selection;
use crate::stats::FrameHistory;
use crate::transfer::{TransferKind, WhatIf};
use crate::ui::PanelAction;

impl Session {
    /// Carries out `action` (from the panel, a key, or a script); what failed is in the report and
    /// the panel, and leaves the last good state running.
    pub fn act(&mut self, action: PanelAction) -> FrameReport {
        let mut report = FrameReport::default();
        let result = match action {
            PanelAction::SwitchTransfer(kind) => self.switch_transfer(kind),
            PanelAction::SwitchDemo(name) => crate::demos::default_spec(name).and_then(|spec| self.switch_demo(&spec)),
            PanelAction::SwitchRenderer(api) => {
                report.requests.push(Request::SwitchRenderer(api));
                Ok(())
            }
            PanelAction::SetWhatIf(what_if) => {
                self.set_what_if(what_if);
                Ok(())
            }
            PanelAction::SetVsync(on) => self.renderer.set_vsync(on),
            PanelAction::UseWhileMapped => self.demo().and_then(|demo| demo.use_while_mapped()).map(|answer| {
                self.push_notice(format!("Mapped again while CUDA held it; the driver said: {answer}"));
            }),
            PanelAction::Relaunch => {
                report.requests.push(Request::Relaunch);
                Ok(())
            }
            PanelAction::ToggleRecording => self.toggle_recording(&mut report),
            PanelAction::Pause(paused) => {
                self.state.paused = paused;
                Ok(())
            }
            PanelAction::Step => {
                (self.state.paused, self.state.step_once) = (true, true);
                Ok(())
            }
            PanelAction::DismissMessages => {
                self.state.messages.clear();
                self.state.notices.clear();
                Ok(())
            }
            PanelAction::Say(text) => {
                self.push_notice(text.clone());
                report.notices.push(text);
                Ok(())
            }
            PanelAction::RecordAnatomy(on) => {
                self.record_anatomy(on);
                Ok(())
            }
            PanelAction::SaveTrace => {
                let path = crate::ui::timeline::export_path("trace", "json");
                let request = crate::args::TraceRequest { path: path.clone(), frames: 120 };
                self.write_trace(&request).map(|frames| {
                    let text = format!("wrote {frames} frames to {} (open it in ui.perfetto.dev)", path.display());
                    self.push_notice(text.clone());
                    report.notices.push(text);
                })
            }
        };
        if let Err(error) = result {
            report.error(&error);
            self.push_message(error.to_string());
        }
        report
    }

    /// Turns the learners' switches on or off (they stay set across demo, path and renderer
    /// changes); a switch that does nothing on the path in use is said, in the log and the panel.
    pub fn set_what_if(&mut self, what_if: WhatIf) {
        self.state.what_if = what_if;
        let Some(demo) = self.demo.as_deref_mut() else { return };
        demo.pipeline_mut().set_what_if(what_if);
        for note in what_if.inapplicable(demo.pipeline().kind()) {
            log::warn!("{note}");
            self.push_notice(note);
        }
    }

    /// Moves the demo to another transfer path; on failure it stays where it was.
    pub fn switch_transfer(&mut self, kind: TransferKind) -> Result<()> {
        if !self.selection.offered.contains(&kind) {
            let why = self.selection.why_unavailable(kind).unwrap_or("this renderer does not offer it");
            return Err(Error::Unavailable(format!("the {} path cannot run here: {why}", kind.label())));
        }
        let graphics = self.renderer.graphics();
        let demo = self.demo.as_deref_mut().ok_or_else(|| Error::Unavailable("no demo is running".to_owned()))?;
        demo.switch_transfer(graphics, kind)?;
        log::info!("transfer path: {}", kind.label());
        for note in self.path_flags.iter().filter_map(|flag| flag.ignored_on(kind)).collect::<Vec<_>>() {
            self.push_notice(note);
        }
        Ok(())
    }

    /// Replaces the demo; if the new one can't start, the old one keeps running.
    pub fn switch_demo(&mut self, spec: &DemoSpec) -> Result<()> {
        let transfer = self.transfer_kind();
        let next =
            create_demo(self.renderer.as_mut(), self.selection.cuda.clone(), spec, transfer, self.state.what_if)?;
        if let Some(previous) = self.demo.replace(next) {
            previous.destroy(self.renderer.graphics());
        }
        self.history = FrameHistory::new(HISTORY_FRAMES);
        self.anatomy.clear();
        Ok(())
    }

    /// Draws with `renderer` from now on (its `selection` says what CUDA shares with it): the
    /// demo starts again there with its settings and what it computed so far, on the path the
    /// selection chose. If it cannot start there, it starts again where it was and the new
    /// renderer is let go; the error says why.
    pub fn switch_renderer(&mut self, mut renderer: Box<dyn Renderer>, selection: Selection) -> Result<()> {
        if let Some(spec) = self.recovery.restart.take() {
            return self.restart_on(renderer, spec);
        }
        self.renderer.make_current()?;
        let graphics = self.renderer.graphics();
        let demo = self.demo.as_deref_mut().ok_or_else(|| Error::Unavailable("no demo is running".to_owned()))?;
        demo.pipeline_mut().transfer().synchronize()?;
        let spec = demo.spec_with_state(graphics)?;
        if let Some(old) = self.demo.take() {
            old.destroy(self.renderer.graphics());
        }
        renderer.make_current()?;
        let started =
            create_demo(renderer.as_mut(), selection.cuda.clone(), &spec, selection.transfer, self.state.what_if);
        match started {
            Ok(demo) => {
                let api = renderer.info().api;
                self.demo = Some(demo);
                self.selection = selection;
                self.watcher = super::watcher_for(&self.selection);
                // The new selection's CUDA context records the calls too, if the anatomy does.
                self.record_anatomy(self.anatomy.recording());
                drop(self.adopt(renderer));
                log::info!("drawing with {} from now on", api.label());
                self.say_start();
                Ok(())
            }
            Err(error) => {
                drop(renderer);
                self.renderer.make_current()?;
                let transfer = self.selection.transfer;
                let back = create_demo(
                    self.renderer.as_mut(),
                    self.selection.cuda.clone(),
                    &spec,
                    transfer,
                    self.state.what_if,
                )?;
                self.demo = Some(back);
                Err(Error::Unavailable(format!("the demo could not start on the other renderer: {error}")))
            }
        }
    }

    /// After a kernel fault that took the graphics device with it: starts the demo `spec` on
    /// `renderer` (opened without CUDA), on the CPU path; the selection stays the one that says
    /// CUDA was lost. On failure the demo stays to be restarted on the next renderer handed over.
    fn restart_on(&mut self, mut renderer: Box<dyn Renderer>, spec: DemoSpec) -> Result<()> {
        renderer.make_current()?;
        match create_demo(renderer.as_mut(), None, &spec, TransferKind::Cpu, self.state.what_if) {
            Ok(demo) => {
                self.demo = Some(demo);
                let old = self.adopt(renderer);
                self.recovery.stranded.renderer(old);
                log::info!("the demo goes on, on the CPU, drawn with {}", self.renderer.info().api.label());
                Ok(())
            }
            Err(error) => {
                self.recovery.restart = Some(spec);
                Err(error)
            }
        }
    }

    /// Draws with `renderer` from now on: the old one (its window, context, device) goes, and
    /// a new history and panel painter state start.
    /// Draws with `renderer` from now on; returns the one it replaces.
    fn adopt(&mut self, renderer: Box<dyn Renderer>) -> Box<dyn Renderer> {
        let old = std::mem::replace(&mut self.renderer, renderer);
        self.history = FrameHistory::new(HISTORY_FRAMES);
        self.anatomy.clear();
        self.panel.restart();
        old
    }

    /// Starts a recording into a new folder of the working directory, or ends the one running.
    fn toggle_recording(&mut self, report: &mut FrameReport) -> Result<()> {
        match self.recorder.take() {
            Some(recorder) => {
                let finished = recorder.finish()?;
                let note = format!("recorded {} frames; video: {}", finished.frames, finished.ffmpeg_line(60));
                log::info!("{note}");
                self.push_notice(note.clone());
                report.notices.push(note);
                self.recordings.push(finished);
            }
            None => {
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or_default();
                let dir = PathBuf::from(format!("interop-lab-recording-{stamp}"));
                self.recorder = Some(FrameRecorder::start(&dir, "the record button")?);
            }
        }
        Ok(())
    }
}
