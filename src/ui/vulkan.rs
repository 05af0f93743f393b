//! The side panel of the Vulkan window and of headless Vulkan frames (`--panel`): the
//! devices, the transfer path and what it does, pause and step, recording, vsync, the what-if,
//! the timeline of the frame's stages, the driver calls of a frame, and the demo's own section.

use crate::demo_kit::Demo;
use crate::runtime::CudaRuntime;
use crate::stats::FrameHistory;
use crate::transfer::TransferKind;
use crate::ui::timeline::{self, TimelineState};
use crate::vk::frame::VulkanGraphics;

/// What the panel says about the devices and the path.
pub struct PanelInfo {
    vulkan: String,
    cuda: String,
    transfer: TransferKind,
}

impl PanelInfo {
    /// What `vulkan`, `cuda` and the path `transfer` are, in words.
    pub fn of(vulkan: &VulkanGraphics, cuda: Option<&CudaRuntime>, transfer: TransferKind) -> Self {
        let device = vulkan.context().description();
        Self {
            vulkan: device.to_string(),
            cuda: match cuda {
                Some(cuda) => format!("CUDA device {}", cuda.context.device().name),
                None => "no CUDA: the CPU backend computes".to_owned(),
            },
            transfer,
        }
    }
}

/// What the panel shows and changes besides the demo.
pub struct PanelState<'a> {
    /// Recent frames.
    pub history: &'a FrameHistory,
    /// The timeline's options.
    pub timeline: &'a mut TimelineState,
    /// CUDA's driver-call trace, when CUDA runs.
    pub trace: Option<&'a crate::cuda::trace::Trace>,
    /// The trace section shows the setup's calls (else the last frame's).
    pub trace_setup: &'a mut bool,
    /// Messages for the user (errors, notes); the panel can dismiss them.
    pub messages: &'a mut Vec<String>,
    /// The simulation is paused.
    pub paused: &'a mut bool,
    /// Step once while paused.
    pub step_once: &'a mut bool,
    /// The recording running: its folder, frames written and dropped.
    pub recording: Option<(String, (u64, u64))>,
    /// Set when the record button is pressed.
    pub toggle_recording: &'a mut bool,
    /// Set when "Draw with OpenGL" is pressed (the window only).
    pub switch_renderer: &'a mut bool,
    /// Presenting waits for vertical blank.
    pub vsync: bool,
    /// Set when the vsync box changes.
    pub toggle_vsync: &'a mut bool,
    /// The driver calls are shown open (`--panel-open trace`).
    pub open_trace: bool,
    /// In a window: its controls (draw with OpenGL, pause and step, vsync, record) are shown;
    /// headless they are not.
    pub window: bool,
}

/// The side panel; returns its width in points.
pub fn panel(ui: &mut egui::Ui, demo: &mut dyn Demo, info: &PanelInfo, state: &mut PanelState<'_>) -> f32 {
    let (history, trace) = (state.history, state.trace);
    let (timeline_state, trace_setup) = (&mut *state.timeline, &mut *state.trace_setup);
    let (messages, paused, step_once) = (&mut *state.messages, &mut *state.paused, &mut *state.step_once);
    let response = egui::Panel::left("vulkan panel").resizable(true).default_size(340.0).show(ui, |ui| {
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.heading(format!("interop-lab — {}", demo.name()));
            ui.label(format!("Vulkan: {}", info.vulkan));
            ui.label(&info.cuda);
            ui.label(format!("Transfer path: {}", info.transfer.label()));
            ui.label(egui::RichText::new(info.transfer.explanation()).small().weak());
            if state.window
                && ui
                .button("Draw with OpenGL")
                .on_hover_text(
                    "Restart the demo in a window drawn with OpenGL, its settings kept (n-body's bodies too): every \
                     transfer path, the kernel inspector and live kernel sources are there",
                )
                .clicked()
            {
                *state.switch_renderer = true;
            }
            ui.horizontal(|ui| {
                if state.window && ui.button(if *paused { "resume" } else { "pause" }).clicked() {
                    *paused = !*paused;
                }
                if state.window && ui.button("step").clicked() {
                    (*paused, *step_once) = (true, true);
                }
                let mut vsync = state.vsync;
                if state.window && ui.checkbox(&mut vsync, "vsync").changed() {
                    *state.toggle_vsync = true;
                }
                let fps = history.summary(Some(120)).frame_us.map(|f| 1e6 / f.median).unwrap_or(0.0);
                ui.label(format!("{fps:.0} frames/s"));
            });
            if state.window {
                ui.horizontal(|ui| {
                    let recording = state.recording.clone();
                    if ui.button(if recording.is_some() { "stop recording" } else { "record" }).clicked() {
                        *state.toggle_recording = true;
                    }
                    if let Some((dir, (frames, dropped))) = recording {
                        ui.label(format!("{frames} frames ({dropped} dropped) into {dir}"));
                    }
                });
            }
            if !messages.is_empty() {
                for message in messages.iter() {
                    ui.colored_label(egui::Color32::from_rgb(255, 120, 100), message);
                }
                if ui.button("dismiss").clicked() {
                    messages.clear();
                }
            }
            if info.transfer == TransferKind::Vulkan {
                let mut what_if = demo.pipeline().what_if();
                let before = what_if;
                ui.checkbox(&mut what_if.skip_semaphore_wait, "what if: skip the semaphore wait");
                if what_if != before {
                    demo.pipeline_mut().set_what_if(what_if);
                }
                if let Some(report) = demo.pipeline().what_if_report() {
                    ui.colored_label(egui::Color32::from_rgb(255, 190, 90), report);
                }
            }
            egui::CollapsingHeader::new("Timeline").default_open(true).show(ui, |ui| {
                if let Some(note) = timeline::show(ui, history, timeline_state) {
                    messages.push(note);
                }
            });
            if let Some(trace) = trace {
                egui::CollapsingHeader::new("Driver calls")
                    .default_open(state.open_trace)
                    .show(ui, |ui| crate::ui::trace_view(ui, trace, trace_setup));
            }
            egui::CollapsingHeader::new(demo.name()).default_open(true).show(ui, |ui| demo.panel(ui));
            ui.label(
                egui::RichText::new(
                    "The kernel inspector, live kernel sources and the other paths are in the OpenGL window \
                     (--renderer gl).",
                )
                .small()
                .weak(),
            );
        });
    });
    response.response.rect.width()
}
