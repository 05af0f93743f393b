//! The blur demo's section of the side panel: image, σ and radius, filter, route and format,
//! launch parameters, the view (split, zoom, 1:1), the pass times and saving the result.

use std::path::{Path, PathBuf};

use super::kernels::{self, Filter};
use super::{Blur, BlurSettings, Change, Engine, MAX_RADIUS, Route, SIGMA_RANGE, blurred_name, bytes_moved, cpu};
use crate::pixel::PixelFormat;
use crate::transfer::TransferKind;

/// The blur section of the panel.
pub(super) fn controls(demo: &mut Blur, ui: &mut egui::Ui) {
    readouts(demo, ui);
    ui.separator();
    filter_controls(demo, ui);
    apply_edit(demo, ui);
    ui.separator();
    view_and_file(demo, ui);
}

/// The image, what σ makes of the filter, the route, a compile in progress and the pass times.
fn readouts(demo: &mut Blur, ui: &mut egui::Ui) {
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
                    kernels.recursive_segment(demo.settings.block(), demo.settings.segment),
                    if demo.settings.segment.is_none() { " (auto)" } else { "" }
                ),
                Engine::Cpu { .. } | Engine::Compiling { .. } => String::new(),
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
    ui.label(format!("route: {}", demo.route_label()));
    if let Some((file, since)) = demo.compiling() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label(format!(
                "NVRTC is compiling {file} ({:.1} s): the first start on this device; shown unfiltered until then",
                since.as_secs_f64()
            ));
        });
    }
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
}

/// σ, radius, filter, format, route and launch parameters: edits of `demo.edit`.
fn filter_controls(demo: &mut Blur, ui: &mut egui::Ui) {
    let radius = demo.settings.radius();
    let edit = &mut demo.edit;
    ui.add(egui::Slider::new(&mut edit.sigma, SIGMA_RANGE.0..=SIGMA_RANGE.1).logarithmic(true).text("σ"));
    if edit.filter.uses_radius() {
        let mut manual = edit.radius.is_some();
        ui.horizontal(|ui| {
            ui.checkbox(&mut manual, "radius by hand");
            if manual {
                let mut r = edit.radius.unwrap_or(radius.min(MAX_RADIUS));
                ui.add(egui::DragValue::new(&mut r).range(1..=MAX_RADIUS));
                edit.radius = Some(r);
            } else {
                edit.radius = None;
            }
        });
    }
    ui.horizontal(|ui| {
        ui.radio_value(&mut edit.auto_filter, true, "auto").on_hover_text(
            "The fastest filter whose accuracy bound holds at this σ: separable below 4, recursive to 100, box beyond",
        );
        for filter in Filter::ALL {
            if ui.radio(!edit.auto_filter && edit.filter == filter, filter.name()).clicked() {
                edit.auto_filter = false;
                edit.filter = filter;
            }
        }
    });
    edit.resolve();
    if edit.auto_filter && demo.settings.auto_filter {
        ui.label(format!("auto: {} at σ {:.2}", demo.settings.filter.name(), demo.settings.sigma));
    }
    ui.horizontal(|ui| {
        ui.radio_value(&mut edit.format, PixelFormat::Rgba8, "RGBA8");
        ui.radio_value(&mut edit.format, PixelFormat::Rgba32f, "RGBA32F");
    });
    let interop = demo.pipeline.kind() == TransferKind::Interop;
    ui.horizontal(|ui| {
        // The route in use is the one marked: off interop, the texture route runs as the pixel buffer.
        let in_use = if interop { edit.route } else { Route::Pbo };
        ui.add_enabled_ui(interop, |ui| {
            if ui.radio(in_use == Route::Texture, "texture").clicked() {
                edit.route = Route::Texture;
            }
        })
        .response
        .on_disabled_hover_text("writing the texture in place needs GL interop");
        if ui.radio(in_use == Route::Pbo, "pixel buffer").clicked() {
            edit.route = Route::Pbo;
        }
    });
    let smallest = kernels::smallest_recursive_segment(edit.format);
    if edit.segment.is_some_and(|s| s < smallest) {
        // RGBA8 walks longer chunks than RGBA32F: a segment fine for one is too short for the other.
        edit.segment = Some(smallest);
    }
    if demo.pipeline.cuda().is_some() {
        ui.horizontal(|ui| {
            ui.label("block");
            let mut block = edit.block();
            let x = ui.add(egui::DragValue::new(&mut block[0]).range(1..=1024)).changed();
            ui.label("×");
            let y = ui.add(egui::DragValue::new(&mut block[1]).range(1..=1024)).changed();
            if x || y {
                edit.block = Some(block);
            }
            if edit.block.is_some() && ui.small_button("default").on_hover_text("the filter's own block").clicked() {
                edit.block = None;
            }
            if edit.filter == Filter::Recursive {
                segment_control(ui, edit);
            }
            ui.label("pixels/thread");
            ui.add(egui::DragValue::new(&mut edit.pixels_per_thread).range(1..=8));
        });
    }
}

/// The split, and the edits applied: at once when valid (the split alone without a rebuild), else
/// said and the running settings kept.
fn apply_edit(demo: &mut Blur, ui: &mut egui::Ui) {
    let edit = &mut demo.edit;
    ui.add(egui::Slider::new(&mut edit.split, 0.0..=1.0).text("before | after"));
    // With the filter picked automatically, the one running may differ from the one σ alone
    // picks (a box tile too large for the GPU gives way to the recursive filter): not a change.
    let differs = if edit.auto_filter && demo.settings.auto_filter {
        BlurSettings { filter: demo.settings.filter, ..edit.clone() } != demo.settings
    } else {
        *edit != demo.settings
    };
    if differs {
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
}

/// Fit or 1:1, the file to open or save to, and what the last change said.
fn view_and_file(demo: &mut Blur, ui: &mut egui::Ui) {
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
        let save_to =
            if demo.path.is_empty() { PathBuf::from("blurred.png") } else { blurred_name(Path::new(&demo.path)) };
        let save_to = std::path::absolute(&save_to).unwrap_or(save_to);
        if ui.button("save blurred").on_hover_text(format!("writes {}", save_to.display())).clicked() {
            demo.pending.push(Change::Save(save_to.clone()));
        }
        ui.label(egui::RichText::new(format!("to {}", save_to.display())).small());
    });
    ui.label(egui::RichText::new("Drop a PNG or JPEG on the window to open it.").small());
    if let Some(notice) = &demo.notice {
        ui.label(notice);
    }
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
