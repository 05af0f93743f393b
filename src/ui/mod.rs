//! The side panel, one for both renderers: which demo, what computes and how its results reach
//! the graphics API (and why), the run's controls, the timings, the demo's own settings, the
//! learners' switches, the kernel inspector and sources, the driver calls and the devices.
//!
//! The panel shows what it is given ([`PanelInput`]: the demo, the selection, the renderer, the
//! run's state as facts) and changes nothing itself: what the user asks for comes back as
//! [`PanelAction`] values, which the session carries out. Its own view state ([`PanelView`]:
//! sections open, the timeline's options, its width) is the only thing it writes.

pub mod anatomy;
mod kernels;
mod sections;
pub mod timeline;

use std::path::Path;

pub use crate::args::PanelSection;
use crate::demo_kit::Demo;
use crate::demos;
use crate::graphics::GraphicsApi;
use crate::kernel_watch::KernelWatcher;
use crate::renderer::RendererInfo;
use crate::runtime::Selection;
use crate::stats::FrameHistory;
use crate::transfer::{TransferKind, WhatIf};

/// What the panel remembers of itself between frames.
#[derive(Debug, Default)]
pub struct PanelView {
    /// Width of the panel in points, measured when it was last laid out.
    pub width_points: f32,
    /// The trace view shows the setup calls instead of the last frame's.
    pub trace_setup: bool,
    /// Timeline options.
    pub timeline: timeline::TimelineState,
    /// Sections shown open when the panel first appears (the rest start closed).
    pub open_sections: Vec<PanelSection>,
    /// The frame anatomy's state.
    pub anatomy: anatomy::AnatomyState,
}

impl PanelView {
    fn opens(&self, section: PanelSection) -> bool {
        self.open_sections.contains(&section)
    }
}

/// The run's state as the panel shows it.
#[derive(Debug, Clone, Copy)]
pub struct PanelFacts<'a> {
    /// The simulation is paused.
    pub paused: bool,
    /// Presenting waits for vertical blank (`None`: offscreen, nothing is presented).
    pub vsync: Option<bool>,
    /// Drawn in a window (its controls — record — are shown).
    pub window: bool,
    /// The recording running: folder, frames written, frames dropped.
    pub recording: Option<(&'a Path, u64, u64)>,
    /// Errors to show until dismissed.
    pub messages: &'a [String],
    /// What the user should know that is not an error.
    pub notices: &'a [String],
    /// The learners' switches.
    pub what_if: WhatIf,
}

/// What the user asked for in the panel (or with a key); the session carries it out after the
/// frame.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelAction {
    /// Open another demo.
    SwitchDemo(&'static str),
    /// Move the demo to another transfer path.
    SwitchTransfer(TransferKind),
    /// Draw with the other graphics API, the demo's settings and state kept.
    SwitchRenderer(GraphicsApi),
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
    /// Pause (true) or resume (false).
    Pause(bool),
    /// Advance one frame while paused.
    Step,
    /// Clear the messages and notices shown.
    DismissMessages,
    /// Something for the user to read (an export's path, a file that could not be opened).
    Say(String),
    /// Record every frame's calls for the anatomy (and calibrate the CUDA lane), or stop.
    RecordAnatomy(bool),
    /// Write the last frames' anatomy as a Chrome trace.
    SaveTrace,
}

/// What the panel shows.
pub struct PanelInput<'a> {
    /// The running demo.
    pub demo: &'a mut dyn Demo,
    /// Backend and path selection.
    pub selection: &'a Selection,
    /// Recent frames.
    pub history: &'a FrameHistory,
    /// The graphics API and its device.
    pub renderer: &'a RendererInfo,
    /// The kernel-source watcher, when kernels come from a folder.
    pub watcher: Option<&'a KernelWatcher>,
    /// The run's state.
    pub facts: PanelFacts<'a>,
    /// The frame anatomy's frames, while its section is open.
    pub anatomy: Option<&'a anatomy::AnatomyInput>,
}

/// Draws the side panel into `ui` and returns the actions the user took.
pub fn side_panel(ui: &mut egui::Ui, mut input: PanelInput<'_>, view: &mut PanelView) -> Vec<PanelAction> {
    let mut actions = Vec::new();
    let response = egui::Panel::left("side_panel").resizable(true).default_size(340.0).show(ui, |ui| {
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.heading("interop-lab");
            demo_picker(ui, input.demo.name(), &mut actions);
            ui.separator();
            sections::compute_section(ui, &input, &mut actions);
            ui.separator();
            sections::run_controls(ui, &input, &mut actions);
            messages(ui, &input.facts, &mut actions);
            ui.separator();
            // What each stage costs comes before the demo's settings: it is what the panel is for,
            // and it stays in view in the default window.
            egui::CollapsingHeader::new("Timings").default_open(true).show(ui, |ui| {
                if let Some(message) = timeline::show(ui, input.history, &mut view.timeline) {
                    actions.push(PanelAction::Say(message));
                }
            });
            anatomy::section(ui, input.anatomy, view, &mut actions);
            ui.separator();
            egui::CollapsingHeader::new(format!("{} settings", input.demo.name())).default_open(true).show(ui, |ui| {
                input.demo.panel(ui);
            });
            sections::what_if_section(ui, &input, view, &mut actions);
            kernels::inspector(ui, &mut input, view);
            kernels::kernel_sources(ui, &mut input, view, &mut actions);
            kernels::trace_section(ui, &input, view);
            sections::device_section(ui, &input, view);
        });
    });
    view.width_points = response.response.rect.width();
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

/// Errors in red and notices in the normal colour, near the top where they are seen.
fn messages(ui: &mut egui::Ui, facts: &PanelFacts<'_>, actions: &mut Vec<PanelAction>) {
    if facts.messages.is_empty() && facts.notices.is_empty() {
        return;
    }
    for notice in facts.notices {
        ui.label(notice);
    }
    for message in facts.messages {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
    if ui.button("dismiss").clicked() {
        actions.push(PanelAction::DismissMessages);
    }
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
