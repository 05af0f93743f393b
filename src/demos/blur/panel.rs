//! The blur demo's section of the side panel: image, σ and radius, filter, route and format,
//! launch parameters, the view (split, zoom, 1:1), the pass times and saving the result.

use std::path::{Path, PathBuf};

use super::kernels::{self, Filter};
use super::{Blur, BlurSettings, Change, Engine, MAX_RADIUS, Route, SIGMA_RANGE, blurred_name, bytes_moved, cpu};
use crate::pixel::PixelFormat;
use crate::transfer::TransferKind;

/// The blur section of the panel.
pub(super) fn controls(demo: &mut Blur, ui: &mut egui::Ui) {
    let [w, h] = demo.size();
    ui.label(format!("{}: {w}×{h} {}", demo.source.origin, demo.settings.format.name()));
    let radius = demo.settings.radius();
    match demo.settings.filter {
        Filter::Box => {
            let (radii, achieved) = cpu::box_radii(demo.settings.sigma);
            ui.label(format!(
                "σ {:.2}: four boxes of radius {radii:?}, effective σ {achieved:.2}",
                demo.settings.sigma
            ));
        }
        Filter::Recursive => {
            let filter = cpu::RecursiveGaussian::new(demo.settings.sigma);
            let [re, im] = filter.complex_pole;
            let segment = match &demo.engine {
                Engine::Cuda { kernels, .. } => format!(
                    ", segments of {} rows{}",
                    kernels.recursive_segment(demo.settings.block, demo.settings.segment),
                    if demo.settings.segment.is_none() { " (auto)" } else { "" }
                ),
                Engine::Cpu { .. } => String::new(),
            };
            ui.label(format!(
                "σ {:.2}: poles {:.4} and {re:.4} ± {im:.4}i, warm-up {} rows{segment}",
                demo.settings.sigma,
                filter.real_pole,
                filter.warmup(kernels::recursive_tolerance(demo.settings.format))
            ));
        }
        _ => {
            ui.label(format!("σ {:.2}: radius {radius} ({} taps per pass)", demo.settings.sigma, 2 * radius + 1));
        }
    }
    ui.label(format!("route: {}", demo.route().label()));
    if let Some((first, second)) = demo.pass_times() {
        let total_us = first.median + second.median;
        let pixels = f64::from(w) * f64::from(h);
        let bytes = bytes_moved(demo.settings.filter, demo.settings.format, pixels);
        let bandwidth = demo.pipeline.cuda().map(|c| c.context.device().dram_bandwidth_bytes_per_s());
        ui.label(format!(
            "kernels: {:.1} + {:.1} µs, {:.0} Mpixel/s, {:.0} GB/s{}",
            first.median,
            second.median,
            pixels / total_us,
            bytes / (total_us * 1e3),
            bandwidth.map(|b| format!(" ({:.0} % of DRAM)", 100.0 * bytes / (total_us * 1e-6) / b)).unwrap_or_default()
        ));
    }

    ui.separator();
    let edit = &mut demo.edit;
    ui.add(egui::Slider::new(&mut edit.sigma, SIGMA_RANGE.0..=200.0).logarithmic(true).text("σ"));
    let mut manual = edit.radius.is_some();
    ui.horizontal(|ui| {
        ui.checkbox(&mut manual, "radius by hand");
        if manual {
            let mut r = edit.radius.unwrap_or(radius);
            ui.add(egui::DragValue::new(&mut r).range(1..=MAX_RADIUS));
            edit.radius = Some(r);
        } else {
            edit.radius = None;
        }
    });
    ui.horizontal(|ui| {
        for filter in Filter::ALL {
            ui.radio_value(&mut edit.filter, filter, filter.name());
        }
    });
    ui.horizontal(|ui| {
        ui.radio_value(&mut edit.format, PixelFormat::Rgba8, "RGBA8");
        ui.radio_value(&mut edit.format, PixelFormat::Rgba32f, "RGBA32F");
    });
    let interop = demo.pipeline.kind() == TransferKind::Interop;
    ui.horizontal(|ui| {
        ui.add_enabled_ui(interop, |ui| ui.radio_value(&mut edit.route, Route::Texture, "texture"));
        ui.radio_value(&mut edit.route, Route::Pbo, "pixel buffer");
    });
    let smallest = kernels::smallest_recursive_segment(edit.format);
    if edit.segment.is_some_and(|s| s < smallest) {
        // RGBA8 walks longer chunks than RGBA32F: a segment fine for one is too short for the other.
        edit.segment = Some(smallest);
    }
    if demo.pipeline.cuda().is_some() {
        ui.horizontal(|ui| {
            ui.label("block");
            ui.add(egui::DragValue::new(&mut edit.block[0]).range(1..=1024));
            ui.label("×");
            ui.add(egui::DragValue::new(&mut edit.block[1]).range(1..=1024));
            if edit.filter == Filter::Recursive {
                segment_control(ui, edit);
            }
            ui.label("pixels/thread");
            ui.add(egui::DragValue::new(&mut edit.pixels_per_thread).range(1..=8));
        });
    }
    ui.add(egui::Slider::new(&mut edit.split, 0.0..=1.0).text("before | after"));
    if *edit != demo.settings {
        let candidate = edit.clone();
        let valid = candidate.validate().and_then(|()| match &demo.engine {
            // Launch limits are checked now when the kernels stay, so the panel can say at once.
            Engine::Cuda { kernels, .. }
                if candidate.format == demo.settings.format
                    && candidate.pixels_per_thread == demo.settings.pixels_per_thread =>
            {
                kernels.validate(&candidate.job(demo.size()))
            }
            _ => Ok(()),
        });
        match valid {
            Ok(()) => {
                let only_view = BlurSettings { split: demo.settings.split, ..candidate.clone() } == demo.settings;
                if only_view {
                    demo.settings.split = candidate.split;
                } else if demo.pending.last() != Some(&Change::Settings(Box::new(candidate.clone()))) {
                    demo.pending.push(Change::Settings(Box::new(candidate)));
                }
                demo.message = None;
            }
            Err(error) => demo.message = Some(format!("{error} (still running the previous settings)")),
        }
    }

    ui.separator();
    ui.horizontal(|ui| {
        if ui.button("fit").clicked() {
            demo.zoom = None;
            demo.pan = glam::Vec2::ZERO;
        }
        if ui.button("1:1").clicked() {
            demo.zoom = Some(1.0);
        }
    });
    ui.horizontal(|ui| {
        ui.label("file");
        ui.text_edit_singleline(&mut demo.path);
    });
    ui.horizontal(|ui| {
        if ui.button("open").clicked() {
            demo.pending.push(Change::Open(PathBuf::from(&demo.path)));
        }
        if ui.button("save blurred").clicked() {
            let path =
                if demo.path.is_empty() { PathBuf::from("blurred.png") } else { blurred_name(Path::new(&demo.path)) };
            demo.pending.push(Change::Save(path));
        }
    });
    ui.label(egui::RichText::new("Drop a PNG or JPEG on the window to open it.").small().weak());
    if let Some(message) = &demo.message {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
}

/// The recursive filter's segment length (its tile): automatic, or a power of two from the
/// format's smallest to 512 (1024 rows of even 64 threads take more than the 227 KiB of shared
/// memory a block can have on current GPUs). The launch check says when a choice doesn't fit.
fn segment_control(ui: &mut egui::Ui, edit: &mut BlurSettings) {
    let smallest = kernels::smallest_recursive_segment(edit.format);
    let text = edit.segment.map_or_else(|| "auto".to_owned(), |s| s.to_string());
    egui::ComboBox::new("blur_segment", "rows/segment")
        .selected_text(text)
        .show_ui(ui, |ui| {
            ui.selectable_value(&mut edit.segment, None, "auto");
            let mut segment = smallest;
            while segment <= 512 {
                ui.selectable_value(&mut edit.segment, Some(segment), segment.to_string());
                segment *= 2;
            }
        })
        .response
        .on_hover_text("Rows per segment of the recursive filter (its tile): --segment");
}
