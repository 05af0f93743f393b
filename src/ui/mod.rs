//! The egui side panel: which demo, which backend and transfer path (and why), the demo's own
//! controls and launch configuration, per-stage timings, and the device's attributes.

pub mod timeline;
pub mod vulkan;

pub use crate::args::PanelSection;
use crate::demo_kit::Demo;
use crate::demos;
use crate::gl::GlInfo;
use crate::runtime::Selection;
use crate::stats::{FrameHistory, Percentiles, Stage};
use crate::transfer::{TransferKind, WhatIf};

/// State of the panel that outlives one frame.
#[derive(Debug, Default)]
pub struct PanelState {
    /// The simulation is paused.
    pub paused: bool,
    /// Advance one frame while paused.
    pub step_once: bool,
    /// Vsync on (window only; `None` headless).
    pub vsync: Option<bool>,
    /// Errors to show until dismissed (a headless run that has any fails with them).
    pub messages: Vec<String>,
    /// Things the user should know that are not errors (a switch with no effect on this path).
    pub notices: Vec<String>,
    /// Width of the panel in points, measured when it was last drawn (the scene is drawn right of it).
    pub width_points: f32,
    /// The trace view shows the setup calls instead of the last frame's.
    pub trace_setup: bool,
    /// Timeline options.
    pub timeline: timeline::TimelineState,
    /// The learners' switches.
    pub what_if: WhatIf,
    /// Sections shown open when the panel first appears (the rest start closed).
    pub open_sections: Vec<PanelSection>,
    /// The recording running (window only): folder, frames written, frames dropped.
    pub recording: Option<(std::path::PathBuf, u64, u64)>,
}

impl PanelState {
    fn opens(&self, section: PanelSection) -> bool {
        self.open_sections.contains(&section)
    }
}

/// What the user asked for in the panel; the app carries it out after the frame.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelAction {
    /// Open another demo.
    SwitchDemo(&'static str),
    /// Move the demo to another transfer path.
    SwitchTransfer(TransferKind),
    /// Turn vsync on or off.
    SetVsync(bool),
    /// Change the learners' switches.
    SetWhatIf(WhatIf),
    /// Map a buffer CUDA already holds, to show the driver's answer.
    UseWhileMapped,
    /// Start the app again as a new process (CUDA after a lost context).
    Relaunch,
    /// Start recording frames, or stop the recording running.
    ToggleRecording,
    /// Restart the demo, its settings kept, in a window drawn with Vulkan.
    SwitchToVulkan,
}

/// What the panel shows.
pub struct PanelInput<'a> {
    /// The running demo.
    pub demo: &'a mut dyn Demo,
    /// Backend and path selection.
    pub selection: &'a Selection,
    /// Recent frames.
    pub history: &'a FrameHistory,
    /// The GL context's strings.
    pub gl_info: &'a GlInfo,
    /// The kernel-source watcher, when kernels come from a folder.
    pub watcher: Option<&'a crate::kernel_watch::KernelWatcher>,
}

/// Draws the side panel into `ui` and returns the actions the user took.
pub fn side_panel(ui: &mut egui::Ui, mut input: PanelInput<'_>, state: &mut PanelState) -> Vec<PanelAction> {
    let mut actions = Vec::new();
    let response = egui::Panel::left("side_panel").resizable(true).default_size(340.0).show(ui, |ui| {
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.heading("interop-lab");
            demo_picker(ui, input.demo.name(), &mut actions);
            ui.separator();
            compute_section(ui, &input, &mut actions);
            ui.separator();
            run_controls(ui, state, &mut actions);
            ui.separator();
            // What each stage costs comes before the demo's settings: it is what the panel is for,
            // and it stays in view in the default window.
            egui::CollapsingHeader::new("Timings").default_open(true).show(ui, |ui| {
                if let Some(message) = timeline::show(ui, input.history, &mut state.timeline) {
                    push_message(state, message);
                }
            });
            ui.separator();
            egui::CollapsingHeader::new(format!("{} settings", input.demo.name())).default_open(true).show(ui, |ui| {
                input.demo.panel(ui);
            });
            what_if_section(ui, &input, state, &mut actions);
            inspector(ui, &mut input, state);
            kernel_sources(ui, &mut input, state);
            trace_section(ui, &input, state);
            device_section(ui, &input, state);
            messages(ui, state);
        });
    });
    state.width_points = response.response.rect.width();
    actions
}

fn demo_picker(ui: &mut egui::Ui, current: &str, actions: &mut Vec<PanelAction>) {
    egui::ComboBox::new("demo_picker", "demo").selected_text(current).show_ui(ui, |ui| {
        for &name in demos::NAMES {
            if ui.selectable_label(name == current, name).clicked() && name != current {
                actions.push(PanelAction::SwitchDemo(name));
            }
        }
    });
}

fn compute_section(ui: &mut egui::Ui, input: &PanelInput<'_>, actions: &mut Vec<PanelAction>) {
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
    ui.horizontal(|ui| {
        ui.label("Transfer:");
        for kind in input.selection.available_transfers() {
            if ui.radio(current == kind, kind.label()).clicked() && current != kind {
                actions.push(PanelAction::SwitchTransfer(kind));
            }
        }
    });
    // Body size: this sentence is what the path does, the panel's first lesson.
    ui.label(current.explanation());
    if ui
        .button("Draw with Vulkan")
        .on_hover_text(
            "Restart the demo in a window drawn with Vulkan, its settings kept (n-body's bodies too): CUDA then \
             writes memory Vulkan allocated, ordered by timeline semaphores",
        )
        .clicked()
    {
        actions.push(PanelAction::SwitchToVulkan);
    }
    // Why this path runs (a fallback says what is missing and the fix): full-size text.
    let why = format!("Why: {}", input.selection.reason);
    if current == TransferKind::Interop {
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

fn what_if_section(ui: &mut egui::Ui, input: &PanelInput<'_>, state: &PanelState, actions: &mut Vec<PanelAction>) {
    egui::CollapsingHeader::new("What if…").default_open(state.opens(PanelSection::WhatIf)).show(ui, |ui| {
        ownership(ui, input);
        ui.separator();
        let interop = input.demo.pipeline().kind() == TransferKind::Interop;
        if ui.add_enabled(interop, egui::Button::new("draw while mapped")).clicked() {
            actions.push(PanelAction::UseWhileMapped);
        }
        explain(ui, "GL may not touch a buffer CUDA has mapped; instead of drawing, the app maps it a second time and shows what the driver answers.");
        let mut what_if = state.what_if;
        ui.checkbox(&mut what_if.skip_copy_sync, "skip the sync before the upload (host copy)");
        explain(ui, "The host uploads staging memory the GPU may still be copying into, so frames can come out stale or torn.");
        ui.checkbox(&mut what_if.register_every_frame, "register the buffer every frame (interop)");
        explain(ui, "Registration is meant to happen once; doing it per frame adds its cost to Map in the timeline.");
        if what_if != state.what_if {
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
fn ownership(ui: &mut egui::Ui, input: &PanelInput<'_>) {
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
            ui.label("Buffers: CUDA owns its device copy, GL owns its buffer; bytes cross through host memory");
        }
        TransferKind::Cpu => {
            ui.label("Buffers: owned by GL; the CPU writes them with uploads");
        }
        TransferKind::Vulkan => {
            ui.label("Buffers: Vulkan's, imported by CUDA; two timeline semaphores order kernel and draw on the GPU");
        }
    }
}

fn run_controls(ui: &mut egui::Ui, state: &mut PanelState, actions: &mut Vec<PanelAction>) {
    ui.horizontal(|ui| {
        let label = if state.paused { "resume" } else { "pause" };
        if ui.button(label).clicked() {
            state.paused = !state.paused;
        }
        if ui.add_enabled(state.paused, egui::Button::new("step")).clicked() {
            state.step_once = true;
        }
        if let Some(vsync) = state.vsync {
            let mut on = vsync;
            if ui.checkbox(&mut on, "vsync").changed() {
                actions.push(PanelAction::SetVsync(on));
            }
            let label = if state.recording.is_some() { "stop recording" } else { "record" };
            if ui.button(label).on_hover_text("frames as a numbered PNG sequence (--record DIR)").clicked() {
                actions.push(PanelAction::ToggleRecording);
            }
        }
    });
    if let Some((dir, frames, dropped)) = &state.recording {
        ui.colored_label(
            egui::Color32::from_rgb(0xff, 0x70, 0x70),
            format!("REC into {}: {frames} frames, {dropped} dropped", dir.display()),
        );
    }
}

fn device_section(ui: &mut egui::Ui, input: &PanelInput<'_>, state: &PanelState) {
    egui::CollapsingHeader::new("Device").default_open(state.opens(PanelSection::Device)).show(ui, |ui| {
        ui.label(format!("GL: {} / {}", input.gl_info.vendor, input.gl_info.renderer));
        ui.label(format!("GL version: {}", input.gl_info.version));
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

fn messages(ui: &mut egui::Ui, state: &mut PanelState) {
    if state.messages.is_empty() && state.notices.is_empty() {
        return;
    }
    ui.separator();
    for notice in &state.notices {
        ui.label(notice);
    }
    for message in &state.messages {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
    if ui.button("dismiss").clicked() {
        state.messages.clear();
        state.notices.clear();
    }
}

/// Adds a notice (not an error) for the user, keeping the last few.
pub fn push_notice(state: &mut PanelState, notice: String) {
    if !state.notices.contains(&notice) {
        state.notices.push(notice);
    }
    let excess = state.notices.len().saturating_sub(4);
    state.notices.drain(..excess);
}

/// Adds a message for the user, keeping the last few.
pub fn push_message(state: &mut PanelState, message: String) {
    if state.messages.last() != Some(&message) {
        state.messages.push(message);
    }
    let excess = state.messages.len().saturating_sub(6);
    state.messages.drain(..excess);
}

fn inspector(ui: &mut egui::Ui, input: &mut PanelInput<'_>, state: &PanelState) {
    let Some(kernel) = input.demo.live_kernels().and_then(|kernels| kernels.kernel_info()) else {
        return;
    };
    egui::CollapsingHeader::new("Kernel inspector").default_open(state.opens(PanelSection::Inspector)).show(ui, |ui| {
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

fn trace_section(ui: &mut egui::Ui, input: &PanelInput<'_>, state: &mut PanelState) {
    let Some(cuda) = &input.selection.cuda else {
        return;
    };
    egui::CollapsingHeader::new("Driver calls")
        .default_open(state.opens(PanelSection::Trace))
        .show(ui, |ui| trace_view(ui, cuda.context.trace(), &mut state.trace_setup));
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

fn kernel_sources(ui: &mut egui::Ui, input: &mut PanelInput<'_>, state: &mut PanelState) {
    let builds = input.demo.live_kernels().map(|kernels| kernels.kernel_builds()).unwrap_or_default();
    if builds.is_empty() {
        return;
    }
    egui::CollapsingHeader::new("Kernel sources").default_open(state.opens(PanelSection::Sources)).show(ui, |ui| {
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
                    push_message(state, format!("cannot open {} (xdg-open: {error})", path.display()));
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

#[cfg(test)]
mod tests {
    /// The characters of every string literal under `src/` outside comments: panel labels, and the
    /// messages the panel shows come from all over the crate. The sources are read from the
    /// working directory (cargo runs tests from the project root, and so does the GPU machine's
    /// check), not from the folder the executable was built in, which may not exist where it runs.
    fn literal_chars() -> std::collections::BTreeMap<char, String> {
        let mut found = std::collections::BTreeMap::new();
        let root = std::path::PathBuf::from("src");
        assert!(
            root.join("lib.rs").is_file(),
            "run this test from the project root: it reads src/ (the working directory is {:?})",
            std::env::current_dir()
        );
        let mut stack = vec![root];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).expect("src folder").flatten().map(|e| e.path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source file");
            for (number, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                // Between the first and last quote of the line: literals, and little else.
                let (Some(first), Some(last)) = (code.find('"'), code.rfind('"')) else { continue };
                for c in code[first..last].chars().filter(|c| !c.is_ascii()) {
                    found.entry(c).or_insert_with(|| format!("{}:{}", path.display(), number + 1));
                }
            }
        }
        found
    }

    #[test]
    fn every_character_the_app_says_is_in_the_panel_font() {
        let mut fonts = egui::epaint::text::Fonts::new(Default::default(), egui::FontDefinitions::default());
        let font = egui::FontId::proportional(14.0);
        let chars = literal_chars();
        assert!(chars.contains_key(&'σ'), "the scan finds the literals (σ is in the blur panel)");
        let missing: Vec<_> =
            chars.iter().filter(|(c, _)| !fonts.has_glyph(&font, **c)).map(|(c, at)| format!("{c:?} ({at})")).collect();
        assert!(missing.is_empty(), "drawn as boxes by egui's default fonts: {missing:?}");
    }
}
