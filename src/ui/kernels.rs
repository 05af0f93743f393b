//! The panel's kernel sections: the inspector (attributes and occupancy of the kernel running),
//! the kernel sources and their live reload, and the driver-call trace.

use super::{PanelAction, PanelInput, PanelSection, PanelView};

pub(super) fn inspector(ui: &mut egui::Ui, input: &mut PanelInput<'_>, view: &PanelView) {
    let Some(kernel) = input.demo.live_kernels().and_then(|kernels| kernels.kernel_info()) else {
        return;
    };
    egui::CollapsingHeader::new("Kernel inspector").default_open(view.opens(PanelSection::Inspector)).show(ui, |ui| {
        ui.label(egui::RichText::new(&kernel.name).strong());
        ui.label(egui::RichText::new(format!("from {}", kernel.origin)).small().weak());
        let a = kernel.attributes;
        let l = kernel.launch;
        let rows = [
            ("launch", format!("grid {:?} × block {:?}", l.grid, l.block)),
            ("registers / thread", a.registers.to_string()),
            ("shared memory", format!("{} B static + {} B dynamic", a.static_shared_bytes, l.shared_memory_bytes)),
            ("local memory / thread", format!("{} B", a.local_bytes)),
            ("max threads / block", format!("{} (for this kernel)", a.max_threads_per_block)),
            ("PTX / SASS", format!("{}.{} / sm_{}", a.ptx_version / 10, a.ptx_version % 10, a.binary_version)),
        ];
        egui::Grid::new("kernel_attributes").striped(true).show(ui, |ui| {
            for (name, value) in rows {
                ui.label(name);
                ui.label(value);
                ui.end_row();
            }
            if let Some(o) = kernel.occupancy {
                ui.label("occupancy");
                ui.label(format!(
                    "{} blocks/SM, {} of {} warps ({:.0} %)",
                    o.blocks_per_multiprocessor,
                    o.warps_per_multiprocessor,
                    o.max_warps_per_multiprocessor,
                    100.0 * o.fraction()
                ));
                ui.end_row();
                ui.label("suggested block");
                ui.label(format!(
                    "{} threads (a grid of ≥ {} blocks fills the GPU)",
                    o.suggested_block, o.suggested_grid
                ));
                ui.end_row();
            }
        });
        ui.label(
            egui::RichText::new(
                "Occupancy from cuOccupancyMaxActiveBlocksPerMultiprocessor, the suggestion from \
                 cuOccupancyMaxPotentialBlockSize. More resident warps hide more latency; it is not \
                 always faster.",
            )
            .small()
            .weak(),
        );
    });
}

pub(super) fn trace_section(ui: &mut egui::Ui, input: &PanelInput<'_>, view: &mut PanelView) {
    let Some(cuda) = &input.selection.cuda else {
        return;
    };
    egui::CollapsingHeader::new("Driver calls")
        .default_open(view.opens(PanelSection::Trace))
        .show(ui, |ui| trace_view(ui, cuda.context.trace(), &mut view.trace_setup));
}

/// The driver-call trace: recording on or off, then the calls of the last frame (or of the setup,
/// with `setup`), each with its host time and what it was given.
pub fn trace_view(ui: &mut egui::Ui, trace: &crate::cuda::trace::Trace, setup: &mut bool) {
    {
        let mut per_frame = trace.per_frame();
        if ui.checkbox(&mut per_frame, "record every frame").changed() {
            trace.set_per_frame(per_frame);
        }
        ui.horizontal(|ui| {
            ui.radio_value(setup, false, "last frame");
            ui.radio_value(setup, true, "setup (first frame)");
        });
        let entries = if *setup { trace.setup() } else { trace.last_frame() };
        if entries.is_empty() {
            ui.label(if *setup { "no setup calls recorded" } else { "turn recording on to see each frame's calls" });
            return;
        }
        let total: f64 = entries.iter().map(|e| e.host_us).sum();
        ui.label(format!("{} calls, {:.0} µs of host time", entries.len(), total));
        egui::ScrollArea::vertical().max_height(240.0).id_salt("trace_scroll").show(ui, |ui| {
            egui::Grid::new("trace_entries").striped(true).show(ui, |ui| {
                for entry in &entries {
                    let call = egui::RichText::new(entry.call).monospace();
                    ui.label(if entry.error.is_some() { call.color(egui::Color32::LIGHT_RED) } else { call });
                    ui.label(format!("{:.1} µs", entry.host_us));
                    ui.label(entry.error.clone().unwrap_or_else(|| entry.detail.clone()));
                    ui.end_row();
                }
            });
        });
    }
}

pub(super) fn kernel_sources(
    ui: &mut egui::Ui,
    input: &mut PanelInput<'_>,
    view: &PanelView,
    actions: &mut Vec<PanelAction>,
) {
    let builds = input.demo.live_kernels().map(|kernels| kernels.kernel_builds()).unwrap_or_default();
    if builds.is_empty() {
        return;
    }
    egui::CollapsingHeader::new("Kernel sources").default_open(view.opens(PanelSection::Sources)).show(ui, |ui| {
        let Some(watcher) = input.watcher else {
            ui.label("The kernels are the copies built into the binary. Run from a checkout or with --kernels DIR to edit them live.");
            return;
        };
        ui.label(format!("watching {}: save a file to recompile it", watcher.dir().display()));
        for (file, _) in &builds {
            let path = watcher.dir().join(file.name);
            ui.horizontal(|ui| {
                ui.monospace(file.name);
                if ui.button("open").on_hover_text(path.display().to_string()).clicked()
                    && let Err(error) = std::process::Command::new("xdg-open").arg(&path).spawn()
                {
                    actions.push(PanelAction::Say(format!("cannot open {} (xdg-open: {error})", path.display())));
                }
            });
        }
        match watcher.status() {
            crate::kernel_watch::WatchStatus::Watching => {}
            crate::kernel_watch::WatchStatus::Compiling { file, since } => {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label(format!("compiling {file} ({:.1} s)", since.elapsed().as_secs_f64()));
                });
            }
            crate::kernel_watch::WatchStatus::Reloaded { file, compile_ms } => {
                ui.colored_label(egui::Color32::LIGHT_GREEN, format!("{file} reloaded (NVRTC {compile_ms:.0} ms)"));
            }
            crate::kernel_watch::WatchStatus::Failed { file, message } => {
                ui.colored_label(egui::Color32::LIGHT_RED, format!("{file}: the previous kernels keep running"));
                egui::ScrollArea::vertical().max_height(160.0).id_salt("nvrtc_log").show(ui, |ui| {
                    ui.label(egui::RichText::new(message).monospace().small());
                });
            }
        }
    });
}
