//! What a session does when the GPU fails it: a kernel fault that lost the CUDA context (the demo
//! starts again on the CPU, said), and a driver that stalled in the first frames on GL interop
//! (the demo moves to a copy through host memory, said).

use super::{FrameReport, Request, Session, create_demo};
use crate::Error;
use crate::demo_kit::DemoTransfer;
use crate::transfer::TransferKind;

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
        // What the graphics API waits for from CUDA never comes now: released first, so tearing
        // the demo down (which waits for the API's frames) does not wait for it.
        let device_held = demo.pipeline_mut().transfer().cuda_lost();
        let spec = demo.spec().on_cpu();
        demo.destroy(self.renderer.graphics());
        self.watcher = None;
        self.selection.lose_cuda(format!("CPU backend after a kernel fault: {error}"));
        let mut outcome = "CUDA cannot run again in this process (the driver reports the fault to every later \
                           call), so every CUDA object was released and the demo restarted with its settings on \
                           the CPU backend; relaunch the app to use CUDA again (after fixing the kernel if it was \
                           edited)"
            .to_owned();
        if device_held {
            // The device's queue waited for signals of the lost context: a new device is opened
            // by the caller and the demo starts there (Session::switch_renderer).
            let api = self.renderer.info().api;
            outcome = format!(
                "{outcome}; the {} device, whose frames waited for the lost context's signals, is opened again \
                 for it",
                api.label()
            );
            self.restart = Some(spec);
            report.requests.push(Request::ReopenRenderer(api));
        } else {
            match create_demo(self.renderer.as_mut(), None, &spec, TransferKind::Cpu, self.state.what_if) {
                Ok(demo) => self.demo = Some(demo),
                Err(start) => outcome = format!("{outcome}; but the demo failed to start on the CPU: {start}"),
            }
        }
        let message = format!("CUDA context lost at frame {frame}: {error}. Recovery: {outcome}.");
        log::warn!("{message}");
        self.push_message(message.clone());
        self.recoveries.push(message.clone());
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
