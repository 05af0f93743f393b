//! The panel's sections: what computes and how results reach the graphics API, the run's
//! controls, the learners' switches and buffer ownership, the device, the kernel inspector, the
//! kernel sources and the driver-call trace.

use super::{PanelAction, PanelInput, PanelSection, PanelView};
use crate::graphics::GraphicsApi;
use crate::stats::{Percentiles, Stage};
use crate::transfer::TransferKind;

pub(super) fn compute_section(ui: &mut egui::Ui, input: &PanelInput<'_>, actions: &mut Vec<PanelAction>) {
    let graphics = input.renderer;
    ui.label(format!("Drawn with {} on {}", graphics.api.label(), graphics.device));
    match &input.selection.cuda {
        Some(cuda) => {
            let device = cuda.context.device();
            ui.label(format!("Backend: CUDA on {} ({})", device.name, device.arch()));
        }
        None => {
            ui.label(format!("Backend: CPU ({} threads)", rayon::current_num_threads()));
        }
    }
    let current = input.demo.pipeline().kind();
    ui.horizontal_wrapped(|ui| {
        ui.label("Transfer:");
        for kind in input.selection.available_transfers() {
            if ui.radio(current == kind, kind.label()).clicked() && current != kind {
                actions.push(PanelAction::SwitchTransfer(kind));
            }
        }
    });
    // Body size: this sentence is what the path does, the panel's first lesson.
    ui.label(current.explanation());
    // One switch for each API not in use.
    for other in GraphicsApi::ALL.into_iter().filter(|&api| api != graphics.api) {
        if ui
            .button(format!("Draw with {}", other.label()))
            .on_hover_text(format!(
                "Restart the demo drawn with {}, its settings and state kept (n-body's bodies too)",
                other.label()
            ))
            .clicked()
        {
            actions.push(PanelAction::SwitchRenderer(other));
        }
    }
    // Why this path runs (a fallback says what is missing and the fix): full-size text.
    let why = format!("Why: {}", input.selection.reason);
    if matches!(current, TransferKind::Interop | TransferKind::Vulkan) {
        ui.label(why);
    } else {
        ui.colored_label(egui::Color32::from_rgb(0xf0, 0xd0, 0x80), why);
    }
    if let Some(unmet) = &input.selection.unmet_request {
        ui.colored_label(egui::Color32::YELLOW, unmet);
    }
    if input.selection.cuda_lost
        && ui
            .button("Relaunch with CUDA")
            .on_hover_text("A kernel fault lost the CUDA context; a new process of the app gets a fresh one")
            .clicked()
    {
        actions.push(PanelAction::Relaunch);
    }
}

pub(super) fn run_controls(ui: &mut egui::Ui, input: &PanelInput<'_>, actions: &mut Vec<PanelAction>) {
    let facts = &input.facts;
    ui.horizontal(|ui| {
        let label = if facts.paused { "resume" } else { "pause" };
        if ui.button(label).clicked() {
            actions.push(PanelAction::Pause(!facts.paused));
        }
        if ui.add_enabled(facts.paused, egui::Button::new("step")).clicked() {
            actions.push(PanelAction::Step);
        }
        if let Some(vsync) = facts.vsync {
            let mut on = vsync;
            if ui.checkbox(&mut on, "vsync").changed() {
                actions.push(PanelAction::SetVsync(on));
            }
        }
        if facts.window {
            let label = if facts.recording.is_some() { "stop recording" } else { "record" };
            if ui.button(label).on_hover_text("frames as a numbered PNG sequence (--record DIR)").clicked() {
                actions.push(PanelAction::ToggleRecording);
            }
        }
    });
    if let Some((dir, frames, dropped)) = &facts.recording {
        ui.colored_label(
            egui::Color32::from_rgb(0xff, 0x70, 0x70),
            format!("REC into {}: {frames} frames, {dropped} dropped", dir.display()),
        );
    }
}

pub(super) fn what_if_section(
    ui: &mut egui::Ui,
    input: &PanelInput<'_>,
    view: &PanelView,
    actions: &mut Vec<PanelAction>,
) {
    egui::CollapsingHeader::new("What if…").default_open(view.opens(PanelSection::WhatIf)).show(ui, |ui| {
        ownership(ui, input);
        ui.separator();
        let kind = input.demo.pipeline().kind();
        if ui.add_enabled(kind == TransferKind::Interop, egui::Button::new("draw while mapped")).clicked() {
            actions.push(PanelAction::UseWhileMapped);
        }
        explain(ui, "GL may not touch a buffer CUDA has mapped; instead of drawing, the app maps it a second time and shows what the driver answers.");
        let before = input.facts.what_if;
        let mut what_if = before;
        ui.checkbox(&mut what_if.skip_copy_sync, "skip the sync before the upload (host copy)");
        explain(ui, "The host uploads staging memory the GPU may still be copying into, so frames can come out stale or torn.");
        ui.checkbox(&mut what_if.register_every_frame, "register the buffer every frame (interop)");
        explain(ui, "Registration is meant to happen once; doing it per frame adds its cost to Map in the timeline.");
        ui.checkbox(&mut what_if.skip_semaphore_wait, "skip the semaphore wait (Vulkan)");
        explain(ui, "Vulkan submits its draw without waiting for CUDA's signal: the frame may show memory CUDA is still writing.");
        if what_if != before {
            actions.push(PanelAction::SetWhatIf(what_if));
        }
        if let Some(report) = input.demo.pipeline().what_if_report() {
            ui.colored_label(egui::Color32::YELLOW, report);
        }
    });
}

fn explain(ui: &mut egui::Ui, text: &str) {
    ui.label(egui::RichText::new(text).small().weak());
}

/// Who owns the shared buffers, and for how long CUDA held them in recent frames.
pub(super) fn ownership(ui: &mut egui::Ui, input: &PanelInput<'_>) {
    match input.demo.pipeline().kind() {
        TransferKind::Interop => {
            // The panel is drawn between frames, after the unmap: GL owns the buffers now.
            ui.label("Buffers now: owned by GL (CUDA maps them only during the compute step)");
            let recent: Vec<(f64, f64)> = input
                .history
                .samples()
                .rev()
                .take(60)
                .filter_map(|s| {
                    let held = [Stage::Map, Stage::Kernel, Stage::Unmap]
                        .iter()
                        .map(|&stage| s.stages.host(stage))
                        .sum::<Option<f64>>()?;
                    Some((held, s.frame_us))
                })
                .collect();
            let held = Percentiles::of(recent.iter().map(|r| r.0));
            let frame = Percentiles::of(recent.iter().map(|r| r.1).filter(|&f| f > 0.0));
            if let (Some(held), Some(frame)) = (held, frame) {
                let share = (held.median / frame.median).clamp(0.0, 1.0) as f32;
                ui.add(egui::ProgressBar::new(share).text(format!(
                    "CUDA held them {:.0} µs of a {:.0} µs frame (median, host, from map to unmap)",
                    held.median, frame.median
                )));
            }
        }
        TransferKind::External => {
            ui.label(
                "Buffers: one allocation seen by both APIs, never handed over; ordering comes from stream and GL syncs",
            );
        }
        TransferKind::ExternalSemaphores => {
            ui.label(
                "Buffers: one allocation seen by both APIs; two semaphores order kernel and draw on the GPU, and the \
                 host waits for neither",
            );
        }
        TransferKind::HostCopy | TransferKind::HostCopyPageable => {
            ui.label(format!(
                "Buffers: CUDA owns its device copy, {} owns its buffer; bytes cross through host memory",
                input.renderer.api.label()
            ));
        }
        TransferKind::Cpu => {
            ui.label(format!("Buffers: owned by {}; the CPU writes them with uploads", input.renderer.api.label()));
        }
        TransferKind::Vulkan => {
            ui.label("Buffers: Vulkan's, imported by CUDA; two timeline semaphores order kernel and draw on the GPU");
        }
    }
}

pub(super) fn device_section(ui: &mut egui::Ui, input: &PanelInput<'_>, view: &PanelView) {
    egui::CollapsingHeader::new("Device").default_open(view.opens(PanelSection::Device)).show(ui, |ui| {
        let graphics = input.renderer;
        ui.label(format!("{}: {} ({})", graphics.api.label(), graphics.device, graphics.vendor));
        ui.label(format!("{} version: {}", graphics.api.label(), graphics.version));
        if !graphics.sharing.is_empty() {
            ui.label(format!("shares with CUDA through: {}", graphics.sharing.join(", ")));
        }
        let Some(cuda) = &input.selection.cuda else {
            ui.label("No CUDA device in use.");
            return;
        };
        let d = cuda.context.device();
        let driver = cuda.context.driver().version;
        let rows = [
            ("name", d.name.clone()),
            ("driver CUDA version", format!("{}.{}", driver.0, driver.1)),
            ("NVRTC", format!("{}.{}", cuda.compiler.nvrtc_version().0, cuda.compiler.nvrtc_version().1)),
            ("compute capability", format!("{}.{}", d.compute_capability.0, d.compute_capability.1)),
            ("multiprocessors", d.multiprocessors.to_string()),
            ("memory", format!("{:.1} GiB", d.total_memory_bytes as f64 / (1u64 << 30) as f64)),
            ("max threads / block", d.max_threads_per_block.to_string()),
            ("max block", format!("{:?}", d.max_block_dim)),
            ("max grid", format!("{:?}", d.max_grid_dim)),
            (
                "shared memory / block",
                format!(
                    "{} KiB (opt-in {} KiB)",
                    d.shared_memory_per_block / 1024,
                    d.shared_memory_per_block_optin / 1024
                ),
            ),
            ("registers / block", d.registers_per_block.to_string()),
            ("warp size", d.warp_size.to_string()),
            ("SM clock", format!("{} MHz", d.clock_rate_khz / 1000)),
            ("memory clock", format!("{} MHz, {}-bit bus", d.memory_clock_rate_khz / 1000, d.memory_bus_width_bits)),
            ("DRAM bandwidth", format!("{:.0} GB/s (theoretical)", d.dram_bandwidth_bytes_per_s() / 1e9)),
            (
                "fp32 peak",
                d.fp32_peak_flops().map(|f| format!("{:.1} TFLOP/s", f / 1e12)).unwrap_or_else(|| "unknown".to_owned()),
            ),
            ("L2 cache", format!("{} MiB", d.l2_cache_bytes / (1 << 20))),
            ("unified addressing", d.unified_addressing.to_string()),
            ("PCI", d.pci_bus_id.clone()),
        ];
        egui::Grid::new("device_attributes").striped(true).show(ui, |ui| {
            for (name, value) in rows {
                ui.label(name);
                ui.label(value);
                ui.end_row();
            }
        });
    });
}
