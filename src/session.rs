//! What runs between the GL context and the screen, shared by the window and headless mode: the
//! demo, the backend selection, the frame history, the draw timer and the panel's state.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use crate::demo_kit::{Demo, DemoEnv, DemoSpec, View};
use crate::gl::{GlInfo, TimerQueries};
use crate::guard::Guard;
use crate::render::gl::GlScenes;
use crate::render::{Graphics, SceneDrawer};
use crate::runtime::Selection;
use crate::stats::{FrameHistory, FrameSample, LateGpuTimes, Stage, StageTimes};
use crate::transfer::{TransferKind, WhatIf};
use crate::ui::{self, PanelAction, PanelInput, PanelSection, PanelState};
use crate::kernel_watch::KernelWatcher;
use crate::watchdog::Watchdog;
use crate::{Error, Result};

/// Frames kept for the panel and the statistics.
pub const HISTORY_FRAMES: usize = 2000;

/// The first frames are watched for stalls (first map, first wait on GL).
const FRAMES_WATCHED: u64 = 3;

/// What the user can do when a driver call on path `kind` stalls; `None`: the path makes no
/// call that can stall that way (the CPU's: its slow steps are its own work, not a driver's).
fn stall_advice(kind: TransferKind) -> Option<&'static str> {
    match kind {
        TransferKind::Cpu => None,
        TransferKind::Interop => Some(
            "The app goes on with a copy through host memory once it returns; to avoid GL interop from the start, \
             run with --transfer copy.",
        ),
        _ => Some("The app goes on once it returns; if it never does, end it (Ctrl-C) and check `nvidia-smi`."),
    }
}

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

/// Creates demo `spec` and gets the renderer ready for its scenes; a demo whose shaders don't build
/// fails here, released again.
fn create(env: &DemoEnv<'_>, spec: &DemoSpec, renderer: &mut GlScenes) -> Result<Box<dyn Demo>> {
    let mut demo = spec.create(env)?;
    let scene_view = View { origin: [0, 0], size: [1, 1] };
    if let Err(error) = renderer.prepare(env.graphics, &demo.scene(&scene_view)) {
        demo.destroy(env.graphics);
        return Err(error);
    }
    Ok(demo)
}

/// A running demo and everything around it.
pub struct Session {
    demo: Option<Box<dyn Demo>>,
    selection: Selection,
    history: FrameHistory,
    draw_timer: TimerQueries,
    /// GPU time of the side panel's paint, when the caller times it ([`Self::time_panel`]).
    panel_timer: TimerQueries,
    renderer: GlScenes,
    gl_info: GlInfo,
    frame: u64,
    last_frame_start: Option<Instant>,
    watcher: Option<KernelWatcher>,
    /// What each recovery from a lost CUDA context did, in order.
    recoveries: Vec<String>,
    /// Notices driver calls that stall (setup, the first frames, the final wait).
    watchdog: Watchdog,
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
        let draw_timer = Guard::new(TimerQueries::new(gl)?, |mut timer: TimerQueries| timer.destroy(gl));
        let panel_timer = Guard::new(TimerQueries::new(gl)?, |mut timer: TimerQueries| timer.destroy(gl));
        let mut renderer =
            Guard::new(GlScenes::new(shaders_dir), |mut renderer: GlScenes| renderer.destroy(Graphics::Gl(gl)));
        let env = DemoEnv { graphics: Graphics::Gl(gl), cuda: selection.cuda.clone(), transfer: selection.transfer };
        let watchdog = Watchdog::new();
        let demo = {
            let _watch = stall_advice(selection.transfer).map(|advice| {
                watchdog.watch("setting up the demo (compiling kernels, registering buffers with CUDA)", advice)
            });
            create(&env, spec, &mut renderer)?
        };
        crate::stats::log_start_phase("demo set up");
        let (renderer, draw_timer, panel_timer) = (renderer.keep(), draw_timer.keep(), panel_timer.keep());
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
            panel_timer,
            renderer,
            gl_info,
            frame: 0,
            last_frame_start: None,
            recoveries: Vec::new(),
            watchdog,
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
        // The first frames map and wait for the first time: where a stalling driver shows.
        let advice = stall_advice(demo.pipeline().kind()).filter(|_| frame < FRAMES_WATCHED);
        let watch = advice.map(|advice| self.watchdog.watch("the first frames (map, kernel, draw)", advice));
        if frame == 0 {
            simulate_stall(demo.pipeline().kind());
        }
        if run {
            match demo.step(Graphics::Gl(gl), frame, dt) {
                Ok(times) => stages = times,
                Err(error) if error.is_context_lost() => {
                    self.recover(gl, &error);
                    return;
                }
                Err(error) => {
                    self.panel.paused = true;
                    ui::push_message(&mut self.panel, format!("paused: {error}"));
                }
            }
        }

        let draw_started = Instant::now();
        self.draw_timer.begin(gl, frame);
        let drawn = self.renderer.draw(Graphics::Gl(gl), &demo.scene(&view), &view);
        self.draw_timer.end(gl);
        stages.set_host(Stage::Draw, draw_started.elapsed().as_secs_f64() * 1e6);
        if watch.is_some() {
            drop(watch);
            self.leave_a_stalled_path(gl);
        }
        match drawn {
            Err(error) if error.is_context_lost() => {
                self.recover(gl, &error);
                return;
            }
            Err(error) => ui::push_message(&mut self.panel, error.to_string()),
            Ok(()) => {}
        }

        self.history.push(FrameSample { frame, frame_us: frame_us.unwrap_or(f64::NAN), stages });
        if frame == 0
            && let Some(age) = crate::stats::since_process_start()
        {
            log::info!("first frame drawn {:.2} s after the process started", age.as_secs_f64());
        }
        if let Some(error) = self.collect_late_times(gl) {
            self.recover(gl, &error);
            return;
        }
        if let Some(cuda) = &self.selection.cuda {
            for error in cuda.context.take_errors() {
                ui::push_message(&mut self.panel, error.to_string());
            }
            cuda.context.trace().end_frame();
        }
    }

    /// Moves GPU times that have arrived into the history. Returns the error if the CUDA context
    /// turned out to be lost.
    fn collect_late_times(&mut self, gl: &glow::Context) -> Option<Error> {
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
                        ui::push_message(&mut self.panel, error.to_string());
                        break;
                    }
                }
            }
        }
        for (timer, stage) in [(&mut self.draw_timer, Stage::Draw), (&mut self.panel_timer, Stage::Panel)] {
            while let Some((frame, microseconds)) = timer.poll(gl) {
                let mut times = StageTimes::default();
                times.set_gpu(stage, microseconds);
                self.history.add_late(LateGpuTimes { frame, times });
            }
        }
        lost
    }

    /// After a watched call stalled on GL interop: move the demo to a copy through host memory
    /// (which does not wait on GL's side of the driver) and say so; the panel can switch back.
    fn leave_a_stalled_path(&mut self, gl: &glow::Context) {
        let stalls = self.watchdog.take_stalls();
        let Some((what, waited)) = stalls.first() else { return };
        let on_interop = self.demo.as_deref().is_some_and(|demo| demo.pipeline().kind() == TransferKind::Interop);
        if !on_interop {
            return;
        }
        let note = format!(
            "{what} stalled for {:.0}+ s on GL interop (the driver was busy, e.g. recovering from another process's \
             kernel fault): moved to host copy, which does not wait on GL; switch back in the panel when it has recovered",
            waited.as_secs_f64()
        );
        match self.switch_transfer(gl, TransferKind::HostCopy) {
            Ok(()) => {
                log::warn!("{note}");
                self.selection.reason = format!("host copy after a stall: {what}");
                ui::push_notice(&mut self.panel, note);
            }
            Err(error) => ui::push_message(&mut self.panel, format!("{note}; but the switch failed: {error}")),
        }
    }

    /// What each recovery from a lost CUDA context so far did (the messages the panel showed).
    pub fn recoveries(&self) -> &[String] {
        &self.recoveries
    }

    /// A kernel faulted and the CUDA context is lost (`error` says how). The driver reports the
    /// fault to every later call of the process — a new or reset context included — so CUDA can
    /// only run again in a new process. The demo is taken down, every CUDA object released, and
    /// the demo started again with its settings on the CPU backend; the panel offers to relaunch
    /// the app, which gets a fresh CUDA context.
    fn recover(&mut self, gl: &glow::Context, error: &Error) {
        let frame = self.frame;
        let Some(demo) = self.demo.take() else {
            return;
        };
        let spec = demo.spec().on_cpu();
        demo.destroy(Graphics::Gl(gl));
        if let Some(lost) = self.selection.cuda.take() {
            for error in lost.context.take_errors() {
                log::debug!("while releasing the lost context: {error}");
            }
        }
        self.watcher = None;
        self.selection.transfer = TransferKind::Cpu;
        self.selection.cuda_lost = true;
        let mut outcome = "CUDA cannot run again in this process (the driver reports the fault to every later \
                           call), so every CUDA object was released and the demo restarted with its settings on \
                           the CPU backend; relaunch the app to use CUDA again (after fixing the kernel if it was \
                           edited)"
            .to_owned();
        match self.start(gl, &spec, TransferKind::Cpu) {
            Ok(demo) => self.demo = Some(demo),
            Err(start) => outcome = format!("{outcome}; but the demo failed to start on the CPU: {start}"),
        }
        self.selection.reason = format!("CPU backend after a kernel fault: {error}");
        let message = format!("CUDA context lost at frame {frame}: {error}. Recovery: {outcome}.");
        log::warn!("{message}");
        ui::push_message(&mut self.panel, message.clone());
        self.recoveries.push(message);
    }

    /// Creates demo `spec` on the current selection, with the learner's switches applied.
    fn start(&mut self, gl: &glow::Context, spec: &DemoSpec, transfer: TransferKind) -> Result<Box<dyn Demo>> {
        let env = DemoEnv { graphics: Graphics::Gl(gl), cuda: self.selection.cuda.as_ref().map(Rc::clone), transfer };
        let mut demo = create(&env, spec, &mut self.renderer)?;
        demo.pipeline_mut().set_what_if(self.panel.what_if);
        Ok(demo)
    }

    /// Waits for all GPU work and collects every outstanding timing (end of a headless run).
    pub fn finish(&mut self, gl: &glow::Context) -> Result<()> {
        {
            let kind = self.demo.as_deref().map_or(TransferKind::Cpu, |demo| demo.pipeline().kind());
            let _watch = stall_advice(kind).map(|advice| self.watchdog.watch("waiting for the GPU to finish (glFinish)", advice));
            crate::gl::finish(gl);
        }
        let demo = self.demo()?;
        demo.pipeline_mut().transfer().synchronize()?;
        demo.finish(Graphics::Gl(gl))?;
        match self.collect_late_times(gl) {
            Some(error) => Err(error),
            None => Ok(()),
        }
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
                    crate::demos::default_spec(name).and_then(|spec| self.switch_demo(gl, &spec))
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

    /// Turns the learners' switches on or off (they stay set across demo and path changes); a
    /// switch that does nothing on the path in use is said, in the log and the panel.
    pub fn set_what_if(&mut self, what_if: WhatIf) {
        self.panel.what_if = what_if;
        let Some(demo) = self.demo.as_deref_mut() else { return };
        demo.pipeline_mut().set_what_if(what_if);
        for note in what_if.inapplicable(demo.pipeline().kind()) {
            log::warn!("{note}");
            ui::push_notice(&mut self.panel, note);
        }
    }

    /// Says (log and panel) each of `flags` that the path the demo runs on ignores.
    pub fn say_flags_without_effect(&mut self, flags: &[crate::args::PathFlag]) {
        let Some(kind) = self.demo.as_deref().map(|demo| demo.pipeline().kind()) else { return };
        for note in flags.iter().filter_map(|flag| flag.ignored_on(kind)) {
            log::warn!("{note}");
            ui::push_notice(&mut self.panel, note);
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
        self.demo()?.set_transfer(Graphics::Gl(gl), kind)?;
        log::info!("transfer path: {}", kind.label());
        Ok(())
    }

    /// Replaces the demo; if the new one can't start, the old one keeps running.
    pub fn switch_demo(&mut self, gl: &glow::Context, spec: &DemoSpec) -> Result<()> {
        let transfer = self.demo.as_deref().map(|d| d.pipeline().kind()).unwrap_or(self.selection.transfer);
        let next = self.start(gl, spec, transfer)?;
        if let Some(previous) = self.demo.replace(next) {
            previous.destroy(Graphics::Gl(gl));
        }
        self.history = FrameHistory::new(HISTORY_FRAMES);
        Ok(())
    }

    /// Releases every GL object. The context must be current.
    pub fn destroy(mut self, gl: &glow::Context) {
        if let Some(demo) = self.demo.take() {
            demo.destroy(Graphics::Gl(gl));
        }
        self.renderer.destroy(Graphics::Gl(gl));
        self.draw_timer.destroy(gl);
        self.panel_timer.destroy(gl);
    }

    /// Runs `paint` (the side panel's egui paint, after [`Self::frame`]) and records its host and
    /// GPU time as the last frame's [`Stage::Panel`].
    pub fn time_panel<R>(&mut self, gl: &glow::Context, paint: impl FnOnce(&mut Self) -> R) -> R {
        let frame = self.frame.saturating_sub(1);
        let started = Instant::now();
        self.panel_timer.begin(gl, frame);
        let result = paint(self);
        self.panel_timer.end(gl);
        self.add_host_time(Stage::Panel, started);
        result
    }

    /// Records the host time since `started` as the last frame's `stage` (a stage that runs after
    /// [`Self::frame`], such as presenting it).
    pub fn add_host_time(&mut self, stage: Stage, started: Instant) {
        let mut times = StageTimes::default();
        times.set_host(stage, started.elapsed().as_secs_f64() * 1e6);
        self.history.add_late(LateGpuTimes { frame: self.frame.saturating_sub(1), times });
    }
}

/// What a run did, for [`Session::stats_json`].
#[derive(Debug, Clone, Copy)]
pub struct RunFacts {
    /// Framebuffer or window size, pixels.
    pub size: [u32; 2],
    /// Frames drawn.
    pub frames: u64,
    /// Frames asked for (`--frames`), if any.
    pub frames_asked: Option<u32>,
    /// Wall time of the frames, seconds.
    pub wall_seconds: f64,
}

impl Session {
    /// The run as `--stats` writes it: backend, path, device, GL, kernel, switches, and the
    /// median and p90 of every stage over the frames kept.
    pub fn stats_json(&mut self, run: &RunFacts) -> Result<serde_json::Value> {
        let summary = self.history.summary(None);
        let selection = &self.selection;
        let device = selection.cuda.as_ref().map(|cuda| cuda.context.device().clone());
        let reason = selection.reason.clone();
        let (gl_info, recoveries, what_if) = (self.gl_info.clone(), self.recoveries.clone(), self.panel.what_if);
        let demo = self.demo()?;
        let what_if_report = demo.pipeline().what_if_report();
        let kernel = demo.live_kernels().and_then(|kernels| kernels.kernel_info()).map(|k| {
            serde_json::json!({
                "name": k.name,
                "source": k.origin,
                "grid": k.launch.grid,
                "block": k.launch.block,
                "shared_memory_bytes": k.launch.shared_memory_bytes,
                "attributes": k.attributes,
            })
        });
        Ok(serde_json::json!({
            "demo": demo.name(),
            "backend": if device.is_some() { "cuda" } else { "cpu" },
            "transfer": demo.pipeline().kind(),
            "reason": reason,
            "device": device,
            "gl": gl_info,
            "size": run.size,
            "frames": run.frames,
            "frames_asked": run.frames_asked,
            "wall_seconds": run.wall_seconds,
            "frames_per_second": run.frames as f64 / run.wall_seconds.max(1e-9),
            "host_peak_rss_bytes": crate::host_memory::status_bytes("VmHWM:"),
            "recoveries": recoveries,
            "kernel": kernel,
            "what_if": {
                "register_every_frame": what_if.register_every_frame,
                "skip_copy_sync": what_if.skip_copy_sync,
                "skip_semaphore_wait": what_if.skip_semaphore_wait,
                "report": what_if_report,
            },
            "timings_us": summary,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_restarted_on_the_cpu_keeps_its_settings_but_not_a_device_split() {
        use crate::demos::nbody::NBodySettings;
        let split = NBodySettings { devices: vec![0, 0], bodies: Some(4096), seed: 7, ..NBodySettings::default() };
        let spec = DemoSpec::new(split.clone()).on_cpu();
        let Some(on_cpu) = spec.settings::<NBodySettings>().cloned() else {
            panic!("still n-body");
        };
        assert!(on_cpu.devices.is_empty());
        assert_eq!(NBodySettings { devices: vec![0, 0], ..on_cpu }, split);
        let wave = crate::demos::default_spec("wave").expect("wave");
        assert_eq!(wave.on_cpu(), wave);
    }

    #[test]
    fn only_kernel_faults_count_as_a_lost_context() {
        use cudarc::driver::sys::CUresult as E;
        let error = |status: E| crate::cuda::driver::cuda_error(status, "cuStreamSynchronize");
        for lost in [E::CUDA_ERROR_ILLEGAL_ADDRESS, E::CUDA_ERROR_LAUNCH_FAILED, E::CUDA_ERROR_ASSERT] {
            assert!(error(lost).is_context_lost(), "{lost:?}");
            assert!(error(lost).to_string().contains("context is lost"), "{}", error(lost));
        }
        for kept in [E::CUDA_ERROR_OUT_OF_MEMORY, E::CUDA_ERROR_ALREADY_MAPPED, E::CUDA_ERROR_INVALID_VALUE] {
            assert!(!error(kept).is_context_lost(), "{kept:?}");
        }
        assert!(!Error::NoNvrtc.is_context_lost());
    }
}
