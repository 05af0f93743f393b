//! What runs between the GL context and the screen, shared by the window and headless mode: the
//! demo, the backend selection, the frame history, the draw timer and the panel's state.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use crate::demos::{Demo, DemoEnv, DemoSpec, View};
use crate::gl::{GlInfo, TimerQueries};
use crate::runtime::Selection;
use crate::stats::{FrameHistory, FrameSample, LateGpuTimes, Stage, StageTimes};
use crate::transfer::{TransferKind, WhatIf};
use crate::ui::{self, PanelAction, PanelInput, PanelSection, PanelState};
use crate::watch::KernelWatcher;
use crate::{Error, Result};

/// Frames kept for the panel and the statistics.
pub const HISTORY_FRAMES: usize = 2000;

/// A running demo and everything around it.
pub struct Session {
    demo: Option<Box<dyn Demo>>,
    selection: Selection,
    history: FrameHistory,
    draw_timer: TimerQueries,
    gl_info: GlInfo,
    shaders_dir: Option<PathBuf>,
    frame: u64,
    last_frame_start: Option<Instant>,
    watcher: Option<KernelWatcher>,
    /// Panel state (pause, messages...).
    pub panel: PanelState,
}

impl Session {
    /// Starts demo `spec` on the selected backend. The GL context must be current.
    pub fn new(
        gl: &glow::Context,
        selection: Selection,
        spec: &DemoSpec,
        shaders_dir: Option<PathBuf>,
    ) -> Result<Self> {
        let gl_info = GlInfo::query(gl);
        let mut draw_timer = TimerQueries::new(gl)?;
        let env = DemoEnv {
            gl,
            cuda: selection.cuda.clone(),
            transfer: selection.transfer,
            shaders_dir: shaders_dir.clone(),
        };
        let demo = match spec.create(&env) {
            Ok(demo) => demo,
            Err(error) => {
                draw_timer.destroy(gl);
                return Err(error);
            }
        };
        // Kernels read from a folder are watched, so edits there reload live.
        let watcher = selection
            .cuda
            .as_ref()
            .and_then(|cuda| Some(KernelWatcher::new(cuda.compiler.kernels_dir()?.to_owned(), cuda.compiler.clone())));
        Ok(Self {
            watcher,
            demo: Some(demo),
            selection,
            history: FrameHistory::new(HISTORY_FRAMES),
            draw_timer,
            gl_info,
            shaders_dir,
            frame: 0,
            last_frame_start: None,
            panel: PanelState::default(),
        })
    }

    /// The running demo.
    pub fn demo(&mut self) -> Result<&mut dyn Demo> {
        match self.demo.as_deref_mut() {
            Some(demo) => Ok(demo),
            None => Err(Error::Unavailable("no demo is running".to_owned())),
        }
    }

    /// The backend selection.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Recent frames.
    pub fn history(&self) -> &FrameHistory {
        &self.history
    }

    /// The kernel-source watcher and the demo it reloads, when kernels come from a folder.
    pub fn watcher_mut(&mut self) -> Option<(&mut KernelWatcher, &mut dyn Demo)> {
        let demo = self.demo.as_deref_mut()?;
        Some((self.watcher.as_mut()?, demo))
    }

    /// The GL context's strings.
    pub fn gl_info(&self) -> &GlInfo {
        &self.gl_info
    }

    /// Frames run so far.
    pub fn frames(&self) -> u64 {
        self.frame
    }

    /// One frame: step the demo (unless paused), draw it into the bound framebuffer, collect the
    /// timings that have arrived. `dt` is the simulated time step in seconds. Errors go to the
    /// panel; a failing step pauses the demo so it stays on its last good frame.
    pub fn frame(&mut self, gl: &glow::Context, view: View, dt: f32) {
        let started = Instant::now();
        let frame_us = self.last_frame_start.map(|t| (started - t).as_secs_f64() * 1e6);
        self.last_frame_start = Some(started);
        let frame = self.frame;
        self.frame += 1;
        let Some(demo) = self.demo.as_deref_mut() else {
            return;
        };
        if let Some(watcher) = &mut self.watcher {
            watcher.poll(demo);
        }

        let mut stages = StageTimes::default();
        let run = !self.panel.paused || std::mem::take(&mut self.panel.step_once);
        if run {
            match demo.step(gl, frame, dt) {
                Ok(times) => stages = times,
                Err(error) => {
                    self.panel.paused = true;
                    ui::push_message(&mut self.panel, format!("paused: {error}"));
                }
            }
        }

        let draw_started = Instant::now();
        self.draw_timer.begin(gl, frame);
        let drawn = demo.draw(gl, &view);
        self.draw_timer.end(gl);
        stages.set_host(Stage::Draw, draw_started.elapsed().as_secs_f64() * 1e6);
        if let Err(error) = drawn {
            ui::push_message(&mut self.panel, error.to_string());
        }

        self.history.push(FrameSample { frame, frame_us: frame_us.unwrap_or(f64::NAN), stages });
        self.collect_late_times(gl);
        if let Some(cuda) = &self.selection.cuda {
            for error in cuda.context.take_errors() {
                ui::push_message(&mut self.panel, error.to_string());
            }
            cuda.context.trace().end_frame();
        }
    }

    /// Moves GPU times that have arrived into the history.
    fn collect_late_times(&mut self, gl: &glow::Context) {
        if let Some(demo) = self.demo.as_deref_mut() {
            loop {
                match demo.poll_gpu_times() {
                    Ok(Some(late)) => self.history.add_late(late),
                    Ok(None) => break,
                    Err(error) => {
                        ui::push_message(&mut self.panel, error.to_string());
                        break;
                    }
                }
            }
        }
        while let Some((frame, microseconds)) = self.draw_timer.poll(gl) {
            let mut times = StageTimes::default();
            times.set_gpu(Stage::Draw, microseconds);
            self.history.add_late(LateGpuTimes { frame, times });
        }
    }

    /// Waits for all GPU work and collects every outstanding timing (end of a headless run).
    pub fn finish(&mut self, gl: &glow::Context) -> Result<()> {
        crate::gl::finish(gl);
        let demo = self.demo()?;
        demo.synchronize()?;
        demo.finish(gl)?;
        self.collect_late_times(gl);
        Ok(())
    }

    /// Draws the side panel and carries out what the user asked for.
    pub fn panel(&mut self, ui: &mut egui::Ui, gl: &glow::Context) -> Vec<PanelAction> {
        let Some(demo) = self.demo.as_deref_mut() else {
            return Vec::new();
        };
        let input = PanelInput {
            demo,
            selection: &self.selection,
            history: &self.history,
            gl_info: &self.gl_info,
            watcher: self.watcher.as_ref(),
        };
        let actions = ui::side_panel(ui, input, &mut self.panel);
        let mut unhandled = Vec::new();
        for action in actions {
            let result = match action {
                PanelAction::SwitchTransfer(kind) => self.switch_transfer(gl, kind),
                PanelAction::SetWhatIf(what_if) => {
                    self.set_what_if(what_if);
                    Ok(())
                }
                PanelAction::UseWhileMapped => self.demo().and_then(|demo| demo.use_while_mapped()).map(|answer| {
                    ui::push_message(
                        &mut self.panel,
                        format!("Mapped again while CUDA held it; the driver said: {answer}"),
                    );
                }),
                PanelAction::SwitchDemo(name) => {
                    DemoSpec::default_for(name).and_then(|spec| self.switch_demo(gl, &spec))
                }
                other => {
                    unhandled.push(other);
                    Ok(())
                }
            };
            if let Err(error) = result {
                ui::push_message(&mut self.panel, error.to_string());
            }
        }
        unhandled
    }

    /// Turns the learners' switches on or off (they stay set across demo and path changes).
    pub fn set_what_if(&mut self, what_if: WhatIf) {
        self.panel.what_if = what_if;
        if let Some(demo) = self.demo.as_deref_mut() {
            demo.set_what_if(what_if);
        }
    }

    /// Opens panel sections from the start; an open trace records every frame.
    pub fn open_panel_sections(&mut self, sections: &[PanelSection]) {
        self.panel.open_sections = sections.to_vec();
        if let (true, Some(cuda)) = (sections.contains(&PanelSection::Trace), &self.selection.cuda) {
            cuda.context.trace().set_per_frame(true);
        }
    }

    /// Moves the demo to another transfer path; on failure it stays where it was.
    pub fn switch_transfer(&mut self, gl: &glow::Context, kind: TransferKind) -> Result<()> {
        self.demo()?.set_transfer(gl, kind)?;
        log::info!("transfer path: {}", kind.label());
        Ok(())
    }

    /// Replaces the demo; if the new one can't start, the old one keeps running.
    pub fn switch_demo(&mut self, gl: &glow::Context, spec: &DemoSpec) -> Result<()> {
        let transfer = self.demo.as_deref().map(|d| d.transfer_kind()).unwrap_or(self.selection.transfer);
        let env = DemoEnv {
            gl,
            cuda: self.selection.cuda.as_ref().map(Rc::clone),
            transfer,
            shaders_dir: self.shaders_dir.clone(),
        };
        let mut next = spec.create(&env)?;
        next.set_what_if(self.panel.what_if);
        if let Some(previous) = self.demo.replace(next) {
            previous.destroy(gl);
        }
        self.history = FrameHistory::new(HISTORY_FRAMES);
        Ok(())
    }

    /// Releases every GL object. The context must be current.
    pub fn destroy(mut self, gl: &glow::Context) {
        if let Some(demo) = self.demo.take() {
            demo.destroy(gl);
        }
        self.draw_timer.destroy(gl);
    }
}
