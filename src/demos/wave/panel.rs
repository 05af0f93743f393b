//! The wave's section of the side panel.

use super::Wave;
use super::settings::{DrawMode, MAX_SIDE};

/// The wave's section of the side panel: grid size, wave shape, drawing, launch configuration.
pub(super) fn controls(wave: &mut Wave, ui: &mut egui::Ui) {
    let gl_size = (wave.settings.width, wave.settings.height);
    let mut size = [gl_size.0, gl_size.1];
    ui.horizontal(|ui| {
        ui.label("Vertices");
        ui.add(egui::DragValue::new(&mut size[0]).range(1..=MAX_SIDE).speed(4));
        ui.label("×");
        ui.add(egui::DragValue::new(&mut size[1]).range(1..=MAX_SIDE).speed(4));
    });
    if size != [gl_size.0, gl_size.1] {
        wave.pending_resize = Some(size);
    }
    let mut depth = wave.settings.pipeline_depth;
    ui.add(egui::Slider::new(&mut depth, 1..=super::settings::MAX_PIPELINE_DEPTH).text("pipeline depth"))
        .on_hover_text(
            "vertex buffers used in turn; from 2 the next frame's buffer is mapped before this one is drawn (GL \
         interop). Each frame still draws what its own kernel wrote: no latency is added",
        );
    if depth != wave.settings.pipeline_depth {
        wave.pending_depth = Some(depth);
    }
    ui.add(egui::Slider::new(&mut wave.settings.frequency, 0.0..=20.0).text("frequency"));
    ui.add(egui::Slider::new(&mut wave.settings.amplitude, 0.0..=1.0).text("amplitude"));
    ui.add(egui::Slider::new(&mut wave.settings.speed, -5.0..=5.0).text("speed (rad/s)"));
    ui.horizontal(|ui| {
        ui.radio_value(&mut wave.settings.mode, DrawMode::Mesh, "mesh");
        ui.radio_value(&mut wave.settings.mode, DrawMode::Points, "points");
    });
    if wave.settings.mode == DrawMode::Points {
        ui.add(egui::Slider::new(&mut wave.settings.point_size, 1.0..=16.0).text("point size"));
    }
    ui.separator();
    match &wave.kernel {
        Some(kernel) => {
            let problem = [wave.settings.width, wave.settings.height];
            if let Some(config) = wave.launch_editor.show(ui, &kernel.limits, kernel.function.attributes(), problem) {
                wave.launch = config;
                wave.settings.block = [config.block[0], config.block[1]];
                wave.settings.grid = (!wave.launch_editor.auto_grid()).then_some([config.grid[0], config.grid[1]]);
            }
            let threads = wave.launch.block_threads() * u64::from(wave.launch.grid[0]) * u64::from(wave.launch.grid[1]);
            if threads < wave.settings.vertices() as u64 {
                ui.colored_label(
                    egui::Color32::YELLOW,
                    format!(
                        "{threads} threads for {} vertices: the grid does not cover every vertex, so part of \
                         the surface keeps its old values",
                        wave.settings.vertices()
                    ),
                );
            }
        }
        None => {
            ui.label(format!(
                "CPU backend: the loop runs on {} threads (rayon); launch parameters apply to CUDA only.",
                rayon::current_num_threads()
            ));
        }
    }
    if let Some(message) = &wave.message {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
}
