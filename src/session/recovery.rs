//! What a session does when the GPU fails it: a kernel fault that lost the CUDA context (the demo
//! starts again on the CPU, said), and a driver that stalled in the first frames on GL interop
//! (the demo moves to a copy through host memory, said).

use std::mem::ManuallyDrop;

use super::{FrameReport, Request, Session, create_demo};
use crate::demo_kit::{Demo, DemoTransfer};
use crate::error::Error;
use crate::renderer::Renderer;
use crate::transfer::TransferKind;

/// What the session keeps of its recoveries from a lost CUDA context.
#[derive(Default)]
pub(super) struct Recovery {
    /// A demo to start again on the next renderer handed over (after a kernel fault that took
    /// the graphics device with it: [`Request::ReopenRenderer`]).
    pub(super) restart: Option<crate::demo_kit::DemoSpec>,
    /// What a lost CUDA context left on a graphics device whose queue waits for it: never used
    /// or released again.
    pub(super) stranded: Stranded,
    /// What each recovery did, in order.
    pub(super) log: Vec<String>,
}

/// The demo and the renderer a kernel fault left behind on a graphics device whose queue waits
/// for signals of the lost CUDA context. On NVIDIA's driver (580, measured) that queue never
/// drains, not even when the owed value is signalled from the host, and a Vulkan device opened
/// after it makes no progress either: releasing the objects would wait for it (10 s per bounded
/// wait, forever in `vkDeviceWaitIdle`) or free what it still reads. So they are never used or
/// released again; the process's exit returns them.
#[derive(Default)]
pub(super) struct Stranded {
    demos: Vec<ManuallyDrop<Box<dyn Demo>>>,
    renderers: Vec<ManuallyDrop<Box<dyn Renderer>>>,
}

impl Stranded {
    pub(super) fn demo(&mut self, demo: Box<dyn Demo>) {
        self.demos.push(ManuallyDrop::new(demo));
    }

    /// Keeps `renderer`, its window (if any) hidden.
    pub(super) fn renderer(&mut self, renderer: Box<dyn Renderer>) {
        if let Some(window) = renderer.window() {
            window.set_visible(false);
        }
        self.renderers.push(ManuallyDrop::new(renderer));
    }
}

impl Session {
    /// A kernel fault lost the CUDA context (`error` says how). The driver reports the fault to
    /// every later call of the process — a new or reset context included — so CUDA can only run
    /// again in a new process. The demo is taken down, every CUDA object released, and the demo
    /// started again with its settings on the CPU backend; the panel offers to relaunch the app,
    /// which gets a fresh CUDA context.
    pub(super) fn recover(&mut self, error: &Error) -> FrameReport {
        let mut report = FrameReport::default();
        let frame = self.frame;
        let Some(mut demo) = self.demo.take() else { return report };
        // What the graphics API waits for from CUDA never comes now: signalled from the host, and
        // where the API's queue waited for it (Vulkan), the demo is left on it, not torn down.
        let device_held = demo.pipeline_mut().transfer().cuda_lost();
        let spec = demo.spec().on_cpu();
        if device_held {
            self.recovery.stranded.demo(demo);
        } else {
            demo.destroy(self.renderer.graphics());
        }
        self.watcher = None;
        self.selection.lose_cuda(format!("CPU backend after a kernel fault: {error}"));
        let released = if device_held { "left" } else { "released" };
        let mut outcome = format!(
            "CUDA cannot run again in this process (the driver reports the fault to every later call), so every \
             CUDA object was {released} and the demo restarted with its settings on the CPU backend; relaunch the \
             app to use CUDA again (after fixing the kernel if it was edited)"
        );
        // The device's queue waited for signals of the lost context, and on NVIDIA's driver no
        // Vulkan device of the process makes progress after it (a new one included; OpenGL
        // does): the caller opens the API's fallback and the demo starts there
        // (Session::switch_renderer).
        let api = self.renderer.info().api;
        match api.fallback().filter(|_| device_held) {
            Some(next) => {
                outcome = format!(
                    "{outcome}; the {api} device, whose frames waited for the lost context's signals (no {api} device \
                     of this process makes progress after that on NVIDIA's driver), is left as it is and the demo \
                     goes on drawn with {next}",
                    api = api.label(),
                    next = next.label(),
                );
                self.recovery.restart = Some(spec);
                report.requests.push(Request::ReopenRenderer(next));
            }
            None => match create_demo(self.renderer.as_mut(), None, &spec, TransferKind::Cpu, self.state.what_if) {
                Ok(demo) => self.demo = Some(demo),
                Err(start) => outcome = format!("{outcome}; but the demo failed to start on the CPU: {start}"),
            },
        }
        let message = format!("CUDA context lost at frame {frame}: {error}. Recovery: {outcome}.");
        log::warn!("{message}");
        self.push_message(message.clone());
        self.recovery.log.push(message.clone());
        report.recoveries.push(message);
        report
    }

    /// After a watched call stalled on GL interop: move the demo to a copy through host memory
    /// (which does not wait on GL's side of the driver) and say so; the panel can switch back.
    pub(super) fn leave_a_stalled_path(&mut self, report: &mut FrameReport) {
        let stalls = self.watchdog.take_stalls();
        let Some((what, waited)) = stalls.first() else { return };
        if self.transfer_kind() != TransferKind::Interop {
            return;
        }
        let note = format!(
            "{what} stalled for {:.0}+ s on GL interop (the driver was busy, e.g. recovering from another process's \
             kernel fault): moved to host copy, which does not wait on GL; switch back in the panel when it has recovered",
            waited.as_secs_f64()
        );
        match self.switch_transfer(TransferKind::HostCopy) {
            Ok(()) => {
                log::warn!("{note}");
                self.selection.reason = format!("host copy after a stall: {what}");
                self.push_notice(note.clone());
                report.notices.push(note);
            }
            Err(error) => {
                let message = format!("{note}; but the switch failed: {error}");
                self.push_message(message.clone());
                report.errors.push(message);
            }
        }
    }
}
