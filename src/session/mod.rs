//! The frame loop — the only one, in a window and offscreen, for both graphics APIs. A
//! [`Session`] owns the renderer (through [`Renderer`]: it knows no GL or Vulkan type), the
//! selection of what computes, the demo, the frame history, the panel and its state, the kernel
//! watcher, the watchdog and the recording. Each [`Session::frame`] steps the demo, lays out the
//! panel, draws, presents or reads back, and returns a [`FrameReport`]: what went wrong, what the
//! user should know, what the caller must do (relaunch, switch renderer). What the panel or a key
//! asks for comes back as a [`PanelAction`] and is carried out by [`Session::act`].
//!
//! ```text
//!   window shell (app/) ─┐                      ┌─ demo.step ─ Transfer::run ─ CUDA or the CPU
//!   offscreen runner   ──┴─ Session::frame ─────┼─ ui::side_panel ─▶ PanelAction ─▶ Session::act
//!                                               └─ Renderer: begin · draw · paint_panel · end
//! ```

mod actions;
mod anatomy;
mod frame;
mod recovery;
mod stats_json;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

pub use self::stats_json::{RunFacts, STATS_SCHEMA};
use crate::args::PathFlag;
use crate::demo_kit::{Demo, DemoEnv, DemoSpec, DemoTransfer, View};
use crate::error::{Error, Result};
use crate::graphics::{Graphics, GraphicsApi};
use crate::kernel_watch::KernelWatcher;
use crate::record::{FrameRecorder, RecordReport};
use crate::renderer::Renderer;
use crate::runtime::Selection;
use crate::stats::FrameHistory;
use crate::transfer::{TransferKind, WhatIf};
use crate::ui::PanelView;
pub use crate::ui::{PanelAction, PanelSection};
use crate::watchdog::Watchdog;

/// Frames kept for the panel and the statistics (window and offscreen, both APIs).
pub const HISTORY_FRAMES: usize = 2000;

/// Messages and notices the panel keeps (the oldest go first).
const MESSAGES_KEPT: usize = 6;

/// How a session starts, besides its renderer.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// The learners' switches.
    pub what_if: WhatIf,
    /// Panel sections open from the start (an open trace records every frame).
    pub open_sections: Vec<PanelSection>,
    /// Demo flags only some paths use: said when the path in use ignores them.
    pub path_flags: Vec<PathFlag>,
    /// Record every frame into this folder, from the first.
    pub record: Option<PathBuf>,
}

/// What one frame takes from its caller.
#[derive(Default)]
pub struct FrameInput<'a> {
    /// Simulated seconds since the last frame.
    pub dt: f32,
    /// The panel's input for this frame (a window's events, or a synthetic one offscreen);
    /// `None`: no panel, the demo takes the whole view.
    pub panel: Option<egui::RawInput>,
    /// Write this frame, panel included, to this PNG.
    pub screenshot: Option<&'a Path>,
    /// Hand back this frame's pixels (RGBA8, top row first) in the report.
    pub capture: bool,
}

/// What the caller of [`Session::frame`] or [`Session::act`] must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Start the app again as a new process with the same arguments (CUDA after a kernel fault).
    Relaunch,
    /// Open a renderer of this API and hand it to [`Session::switch_renderer`].
    SwitchRenderer(GraphicsApi),
    /// After a kernel fault: the graphics device waited for the lost CUDA context and cannot be
    /// trusted. Open a renderer of this API (OpenGL: no Vulkan device makes progress after it on
    /// NVIDIA's driver), without CUDA (`--backend cpu`: CUDA cannot run again in this process),
    /// and hand it to [`Session::switch_renderer`], which restarts the demo there.
    ReopenRenderer(GraphicsApi),
}

/// What one frame (or one action) did.
#[derive(Default)]
pub struct FrameReport {
    /// A frame was drawn (a minimised window draws none).
    pub drawn: bool,
    /// Errors met, as the panel shows them: a run that has any did not do what it was asked.
    pub errors: Vec<String>,
    /// Recoveries from a lost CUDA context (the run goes on, on the CPU).
    pub recoveries: Vec<String>,
    /// What the user should know that is not an error.
    pub notices: Vec<String>,
    /// What the caller must do.
    pub requests: Vec<Request>,
    /// The frame's pixels, when asked for.
    pub pixels: Option<Vec<u8>>,
    /// egui's requests to the window system (cursor, clipboard), for the window shell.
    pub platform_output: Option<egui::PlatformOutput>,
}

impl FrameReport {
    fn error(&mut self, error: impl ToString) {
        self.errors.push(error.to_string());
    }

    /// Adds `other` (a later report of the same frame) to this one.
    pub fn merge(&mut self, other: FrameReport) {
        self.drawn |= other.drawn;
        self.errors.extend(other.errors);
        self.recoveries.extend(other.recoveries);
        self.notices.extend(other.notices);
        self.requests.extend(other.requests);
        self.pixels = other.pixels.or(self.pixels.take());
        self.platform_output = other.platform_output.or(self.platform_output.take());
    }
}

/// The run's state the panel shows and the actions change.
#[derive(Debug, Default)]
struct RunState {
    paused: bool,
    step_once: bool,
    messages: Vec<String>,
    notices: Vec<String>,
    what_if: WhatIf,
}

/// A running demo and everything around it.
pub struct Session {
    // Field order is drop order; the demo is released explicitly first (it needs the renderer's
    // context), the renderer after everything that holds graphics objects.
    demo: Option<Box<dyn Demo>>,
    /// Its recoveries from a lost CUDA context: the demo to restart, what was left on a stranded
    /// device, what each did.
    recovery: recovery::Recovery,
    selection: Selection,
    history: FrameHistory,
    /// What each frame's anatomy needs besides its stage times.
    anatomy: anatomy::AnatomyLog,
    frame: u64,
    last_frame_start: Option<Instant>,
    /// When the first frame started (the wall clock `--stats` reports).
    first_frame_at: Option<Instant>,
    watcher: Option<KernelWatcher>,
    /// Notices driver calls that stall (setup, the first frames, the final wait).
    watchdog: Watchdog,
    state: RunState,
    /// The side panel: egui's context, what it shows, what it last laid out.
    panel: frame::Panel,
    recorder: Option<FrameRecorder>,
    recordings: Vec<RecordReport>,
    path_flags: Vec<PathFlag>,
    renderer: Box<dyn Renderer>,
}

/// What the advice is when a driver call on path `kind` stalls; `None`: the path makes no call
/// that can stall that way (the CPU's slow steps are its own work, not a driver's).
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

/// Creates demo `spec` on `renderer` on path `transfer`, its scenes prepared; a demo whose shaders
/// don't build fails here, released again.
fn create_demo(
    renderer: &mut dyn Renderer,
    cuda: Option<Rc<crate::runtime::CudaRuntime>>,
    spec: &DemoSpec,
    transfer: TransferKind,
    what_if: WhatIf,
) -> Result<Box<dyn Demo>> {
    let window = renderer.window().is_some();
    let env = DemoEnv { graphics: renderer.graphics(), cuda, transfer, window };
    let mut demo = spec.create(&env)?;
    demo.pipeline_mut().set_what_if(what_if);
    let scene_view = View { origin: [0, 0], size: [1, 1] };
    if let Err(error) = renderer.prepare(&demo.scene(&scene_view)) {
        demo.destroy(renderer.graphics());
        return Err(error);
    }
    Ok(demo)
}

impl Session {
    /// Starts `options.spec` on `renderer`, on the path `selection` chose.
    pub fn new(mut renderer: Box<dyn Renderer>, selection: Selection, options: SessionOptions) -> Result<Self> {
        let watchdog = Watchdog::new();
        let demo = {
            let _watch = stall_advice(selection.transfer).map(|advice| {
                watchdog.watch("setting up the demo (compiling kernels, registering buffers with CUDA)", advice)
            });
            create_demo(renderer.as_mut(), selection.cuda.clone(), &options.spec, selection.transfer, options.what_if)?
        };
        crate::stats::log_start_phase("demo set up");
        let recorder = match options.record.as_deref().map(|dir| FrameRecorder::start(dir, "--record")) {
            Some(Ok(recorder)) => Some(recorder),
            Some(Err(error)) => {
                demo.destroy(renderer.graphics());
                return Err(error);
            }
            None => None,
        };
        let mut session = Self {
            watcher: watcher_for(&selection),
            demo: Some(demo),
            recovery: recovery::Recovery::default(),
            selection,
            history: FrameHistory::new(HISTORY_FRAMES),
            anatomy: anatomy::AnatomyLog::new(false),
            frame: 0,
            last_frame_start: None,
            first_frame_at: None,
            watchdog,
            state: RunState { what_if: options.what_if, ..RunState::default() },
            panel: frame::Panel::new(PanelView {
                open_sections: options.open_sections.clone(),
                ..PanelView::default()
            }),
            recorder,
            recordings: Vec::new(),
            path_flags: options.path_flags,
            renderer,
        };
        if options.open_sections.contains(&PanelSection::Trace)
            && let Some(cuda) = &session.selection.cuda
        {
            cuda.context.trace().set_per_frame(true);
        }
        if options.open_sections.contains(&PanelSection::Anatomy) {
            session.record_anatomy(true);
        }
        session.say_start();
        Ok(session)
    }

    /// What the start said: a request that could not be met, switches and flags that do nothing
    /// on this path.
    fn say_start(&mut self) {
        if let Some(unmet) = self.selection.unmet_request.clone() {
            self.push_message(unmet);
        }
        let kind = self.transfer_kind();
        let mut notes = self.state.what_if.inapplicable(kind);
        notes.extend(self.path_flags.iter().filter_map(|flag| flag.ignored_on(kind)));
        for note in notes {
            log::warn!("{note}");
            self.push_notice(note);
        }
    }

    /// The renderer.
    pub fn renderer(&self) -> &dyn Renderer {
        self.renderer.as_ref()
    }

    /// The renderer's live objects by kind, once its frames have finished (`soak`'s leak check).
    pub fn live_objects(&mut self) -> Result<crate::renderer::LiveObjects> {
        self.renderer.live_objects()
    }

    /// The running demo.
    pub fn demo(&mut self) -> Result<&mut dyn Demo> {
        match self.demo.as_deref_mut() {
            Some(demo) => Ok(demo),
            None => Err(Error::Unavailable("no demo is running".to_owned())),
        }
    }

    /// Runs `work` on the demo with the renderer's context (tools that drive a demo directly:
    /// the soak re-allocates the wave's buffers).
    pub fn with_demo<T>(&mut self, work: impl FnOnce(&mut dyn Demo, Graphics<'_>) -> Result<T>) -> Result<T> {
        let graphics = self.renderer.graphics();
        let demo = self.demo.as_deref_mut().ok_or_else(|| Error::Unavailable("no demo is running".to_owned()))?;
        work(demo, graphics)
    }

    /// The backend selection.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Recent frames.
    pub fn history(&self) -> &FrameHistory {
        &self.history
    }

    /// Frames run so far.
    pub fn frames(&self) -> u64 {
        self.frame
    }

    /// The path the demo runs on.
    pub fn transfer_kind(&self) -> TransferKind {
        self.demo.as_deref().map_or(self.selection.transfer, |demo| demo.pipeline().kind())
    }

    /// The panel's width in physical pixels, as last laid out (0 before it was).
    pub fn panel_width(&self) -> u32 {
        let scale = self.panel.egui.pixels_per_point();
        (self.panel.view.width_points * scale) as u32
    }

    /// The last frame drawn, RGBA8, top row first (offscreen).
    pub fn read_frame(&mut self) -> Result<Vec<u8>> {
        self.renderer.read_frame()
    }

    /// Where the live reload of edited kernels stands (`None`: kernels are not watched).
    pub fn kernel_watch_status(&self) -> Option<&crate::kernel_watch::WatchStatus> {
        self.watcher.as_ref().map(KernelWatcher::status)
    }

    /// Whether the demo is paused.
    pub fn paused(&self) -> bool {
        self.state.paused
    }

    /// The window was resized.
    pub fn resized(&mut self) {
        self.renderer.resized();
    }

    /// A file dropped on the window (or named by the user): the demo opens it at its next step,
    /// or the panel says why it cannot.
    pub fn open_file(&mut self, path: &Path) {
        let opened = self.demo().and_then(|demo| {
            let name = demo.name();
            match demo.file_opener() {
                Some(opener) => opener.open_file(path),
                None => Err(Error::Unavailable(format!("the {name} demo opens no files ({} ignored)", path.display()))),
            }
        });
        if let Err(error) = opened {
            self.push_message(error.to_string());
        }
    }

    /// The messages shown in the panel (errors) and its notices.
    pub fn messages(&self) -> (&[String], &[String]) {
        (&self.state.messages, &self.state.notices)
    }

    /// What each recovery from a lost CUDA context so far did.
    pub fn recoveries(&self) -> &[String] {
        &self.recovery.log
    }

    /// Waits for all GPU work and collects every outstanding timing (end of a run).
    pub fn finish(&mut self) -> Result<()> {
        let kind = self.transfer_kind();
        {
            let _watch = stall_advice(kind)
                .map(|advice| self.watchdog.watch("waiting for the GPU to finish the last frames", advice));
            self.renderer.finish()?;
        }
        let graphics = self.renderer.graphics();
        let demo = self.demo.as_deref_mut().ok_or_else(|| Error::Unavailable("no demo is running".to_owned()))?;
        demo.pipeline_mut().transfer().synchronize()?;
        demo.finish(graphics)?;
        match self.collect_late_times(true) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Ends the session: the recording running is finished, the demo's objects released while
    /// the renderer lives, then the renderer. Returns the recordings made.
    pub fn close(mut self) -> (Vec<RecordReport>, Option<Error>) {
        let mut failure = None;
        if let Some(recorder) = self.recorder.take() {
            match recorder.finish() {
                Ok(report) => self.recordings.push(report),
                Err(error) => failure = Some(error),
            }
        }
        if let Some(demo) = self.demo.take() {
            if let Err(error) = self.renderer.make_current() {
                log::warn!("{error}");
            }
            demo.destroy(self.renderer.graphics());
        }
        (std::mem::take(&mut self.recordings), failure)
    }

    /// Adds an error for the user, keeping the last few.
    fn push_message(&mut self, message: String) {
        self.panel.kept = None; // shown at the next frame

        if self.state.messages.last() != Some(&message) {
            self.state.messages.push(message);
        }
        let excess = self.state.messages.len().saturating_sub(MESSAGES_KEPT);
        self.state.messages.drain(..excess);
    }

    /// Adds a notice (not an error) for the user, keeping the last few.
    fn push_notice(&mut self, notice: String) {
        self.panel.kept = None;

        if !self.state.notices.contains(&notice) {
            self.state.notices.push(notice);
        }
        let excess = self.state.notices.len().saturating_sub(MESSAGES_KEPT);
        self.state.notices.drain(..excess);
    }
}

/// Kernels read from a folder are watched, so edits there reload live.
fn watcher_for(selection: &Selection) -> Option<KernelWatcher> {
    let cuda = selection.cuda.as_ref()?;
    Some(KernelWatcher::new(cuda.compiler.kernels_dir()?.to_owned(), cuda.compiler.clone()))
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
