//! The n-body demo's section of the side panel: bodies, preset and physics, the forces kernel's
//! variant, the readouts (steps/s, interactions/s, energy drift) and, with `--devices`, each
//! device's share.

use std::path::PathBuf;

use super::engine::Engine;
use super::kernels::Precision;
use super::multi::{DeviceTimes, MultiSimulation};
use super::presets::Preset;
use super::tree::boxes::MAX_LEVELS;
use super::tree::{MAX_THETA, MIN_THETA, Method};
use super::{Change, FLOPS_PER_INTERACTION, MAX_BODIES, NBody, Readouts, validate_params};

/// The n-body section of the panel.
pub(super) fn controls(demo: &mut NBody, ui: &mut egui::Ui) {
    readouts(demo, ui); // first: what the user came to see
    ui.separator();
    preset_controls(demo, ui);
    ui.separator();
    physics_controls(demo, ui);
    ui.separator();
    method_controls(demo, ui);
    ui.separator();
    look_controls(demo, ui);
    ui.separator();
    variant_controls(demo, ui);
    ui.separator();
    state_controls(demo, ui);
}

/// Steps/s, the forces' cost, the devices' shares, the energy and the force check.
fn readouts(demo: &mut NBody, ui: &mut egui::Ui) {
    let n = demo.len();
    match demo.steps_per_second() {
        Some(rate) => ui.label(format!("{} bodies, step {}, {:.1} steps/s", n, demo.step, rate)),
        None => ui.label(format!("{} bodies, step {}, not stepping (paused)", n, demo.step)),
    };
    let tree = demo.settings.method == Method::Tree;
    if let (true, Some(forces_us)) = (tree, demo.readouts.median_forces_us()) {
        let per_body = demo.readouts.tree_interactions_per_body;
        ui.label(format!(
            "tree forces: {:.1} µs a step (build and walk){}",
            forces_us,
            per_body.map(|p| format!(", {p:.0} node interactions per body")).unwrap_or_default()
        ));
    } else if let Some(forces_us) = demo.readouts.median_forces_us() {
        let interactions = f64::from(n) * f64::from(n) / (forces_us * 1e-6);
        let gflops = interactions * FLOPS_PER_INTERACTION / 1e9;
        let peak = demo
            .peak_flops()
            .map(|peak| {
                format!(", {:.0} % of {} peak", 100.0 * gflops * 1e9 / peak, demo.settings.variant.precision.name())
            })
            .unwrap_or_default();
        ui.label(format!(
            "forces: {:.1} µs, {:.3e} interactions/s, {:.0} GFLOP/s{peak}",
            forces_us, interactions, gflops
        ));
    }
    if let Engine::Cuda { multi: Some(multi), .. } = &demo.engine {
        devices_readout(ui, multi, &demo.readouts);
    }
    match demo.energy() {
        (Some((step, kinetic, potential)), Some(initial)) => {
            let total = kinetic + potential;
            ui.label(format!("energy {total:.6} (K {kinetic:.4}, W {potential:.4}) at step {step}"));
            ui.label(format!("drift since reset: {:+.2e} (relative)", (total - initial) / initial.abs().max(1e-300)));
        }
        _ if !demo.energy_by_itself() => {
            ui.label("energy: only when asked at this count (an O(N²) sum: seconds at millions of bodies)");
        }
        _ => {
            ui.label("energy: not computed yet");
        }
    }
    if ui.button("compute energy now").clicked() {
        demo.pending.push(Change::Energy);
    }
    force_check_readout(demo, ui);
}

/// Preset, body count and seed, applied with a reset.
fn preset_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        egui::ComboBox::new("nbody_preset", "preset").selected_text(demo.edit.preset.name()).show_ui(ui, |ui| {
            for preset in Preset::ALL {
                // Choosing a preset starts it (with the body count and seed shown).
                if ui.selectable_value(&mut demo.edit.preset, preset, preset.name()).clicked() {
                    demo.pending.push(Change::Reset);
                }
            }
        });
    });
    ui.horizontal(|ui| {
        ui.label("bodies");
        ui.add(egui::DragValue::new(&mut demo.edit.bodies).range(1..=MAX_BODIES).speed(64));
        ui.label("seed");
        ui.add(egui::DragValue::new(&mut demo.edit.seed));
    });
    if ui.button("reset").on_hover_text("regenerate the preset with this body count and seed").clicked() {
        demo.pending.push(Change::Reset);
    }
}

/// dt, softening, damping and G: applied at once when valid, else said and the old values kept.
fn physics_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    let mut params = demo.edit.params;
    ui.horizontal(|ui| {
        ui.label("dt");
        ui.add(egui::DragValue::new(&mut params.dt).speed(0.0001).max_decimals(5));
        ui.label("softening");
        ui.add(egui::DragValue::new(&mut params.softening).speed(0.001).max_decimals(4));
    });
    ui.horizontal(|ui| {
        ui.label("damping");
        ui.add(egui::DragValue::new(&mut params.damping).speed(0.0001).max_decimals(5));
        ui.label("G");
        ui.add(egui::DragValue::new(&mut params.gravity).speed(0.01).max_decimals(3));
    });
    if params != demo.edit.params {
        demo.edit.params = params;
        match validate_params(&params) {
            Ok(()) => {
                demo.params = params;
                demo.message = None;
            }
            Err(error) => demo.message = Some(format!("{error} (still running with the previous values)")),
        }
    }
}

/// How the bodies look: sprite size, brightness, colour scale.
fn look_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    ui.add(egui::Slider::new(&mut demo.settings.point_size, 0.001..=0.05).logarithmic(true).text("point size"));
    ui.add(egui::Slider::new(&mut demo.settings.brightness, 0.05..=20.0).logarithmic(true).text("brightness"));
    ui.add(
        egui::Slider::new(&mut demo.settings.colour_scale, 0.2..=10.0).logarithmic(true).text("colour: speed scale"),
    );
}

/// Save and load the state, and what the last change said.
fn state_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    ui.horizontal(|ui| {
        ui.label("state file");
        ui.text_edit_singleline(&mut demo.edit.path);
    });
    ui.horizontal(|ui| {
        if ui.button("save").clicked() {
            demo.pending.push(Change::Save(PathBuf::from(&demo.edit.path)));
        }
        if ui.button("load").clicked() {
            demo.pending.push(Change::Load(PathBuf::from(&demo.edit.path)));
        }
    });
    if let Some(notice) = &demo.notice {
        ui.label(notice);
    }
    if let Some(message) = &demo.message {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
}

/// All-pairs or the tree, and the tree's θ: both live, the bodies stay.
fn method_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    let mut method = demo.settings.force_method();
    ui.horizontal(|ui| {
        ui.label("forces");
        ui.radio_value(&mut method.method, Method::AllPairs, "all pairs").on_hover_text("every pair, exactly: O(N²)");
        ui.radio_value(&mut method.method, Method::Tree, "tree").on_hover_text(
            "Barnes-Hut: far groups as their mass, centre and quadrupole, O(N log N); error set by θ (docs/nbody.md)",
        );
    });
    if method.method == Method::Tree {
        ui.add(egui::Slider::new(&mut method.theta, MIN_THETA..=MAX_THETA).text("θ (opening angle)")).on_hover_text(
            "a node is taken whole when its radius is below θ times its distance: smaller is more exact and slower",
        );
        ui.horizontal(|ui| {
            ui.checkbox(&mut demo.settings.draw_tree, "draw the tree").on_hover_text(
                "each node's box, written by the step into a second shared buffer and drawn as lines over the bodies",
            );
            ui.add_enabled(
                demo.settings.draw_tree,
                egui::Slider::new(&mut demo.settings.tree_levels, 1..=MAX_LEVELS).text("levels"),
            )
            .on_hover_text("the root and the levels below it: each level halves a box along one axis");
        });
    }
    if method != demo.settings.force_method() && !demo.pending.iter().any(|c| matches!(c, Change::Method(_))) {
        demo.pending.push(Change::Method(method));
    }
}

/// The split across devices: who computes what, how positions travel, and what each device's
/// GPU time went to (medians of the last second or so of steps).
fn devices_readout(ui: &mut egui::Ui, multi: &MultiSimulation, readouts: &Readouts) {
    let summary = multi.devices();
    let n = f64::from(multi.len());
    ui.label(egui::RichText::new(format!("Split across {} contexts", summary.len())).strong());
    ui.label(format!("exchange: {}", multi.routes_label()));
    let median = |index: usize, field: fn(&DeviceTimes) -> f64| {
        crate::stats::Percentiles::of(readouts.devices.iter().filter_map(|times| times.get(index)).map(field))
            .map(|p| p.median)
    };
    let mut slowest_span_us: Option<f64> = None;
    for (index, device) in summary.iter().enumerate() {
        let kernel = median(index, DeviceTimes::kernel_us);
        let forces = median(index, |t| t.own_forces_us + t.remote_forces_us);
        let wait = median(index, |t| t.wait_us);
        let exchange = median(index, |t| t.exchange_us);
        if let (Some(kernel), Some(wait)) = (kernel, wait) {
            slowest_span_us = Some(slowest_span_us.unwrap_or(0.0).max(kernel + wait));
        }
        let ms = |value: Option<f64>| value.map(|v| format!("{:.3}", v / 1e3)).unwrap_or_else(|| "–".to_owned());
        ui.label(format!(
            "device {} ({}, {} context): bodies {}..{}; kernels {} ms (forces {}), waiting {} ms, exchange {} ms",
            device.ordinal,
            device.name,
            device.context,
            device.first_body,
            device.first_body + device.bodies,
            ms(kernel),
            ms(forces),
            ms(wait),
            ms(exchange),
        ));
    }
    if let Some(step_us) = slowest_span_us {
        let interactions = n * n / (step_us * 1e-6);
        let efficiency = readouts
            .one_device_forces_us
            .map(|one| {
                format!(
                    "; scaling efficiency {:.0} % against the forces kernel on device {} alone ({:.3} ms, measured at reset)",
                    100.0 * one / (summary.len() as f64 * step_us),
                    summary.first().map(|d| d.ordinal).unwrap_or(0),
                    one / 1e3
                )
            })
            .unwrap_or_default();
        ui.label(format!(
            "step ≈ {:.3} ms (slowest device): {interactions:.3e} interactions/s{efficiency}",
            step_us / 1e3
        ));
    }
    let distinct = summary.iter().map(|d| d.ordinal).collect::<std::collections::BTreeSet<_>>().len();
    if distinct < summary.len() {
        ui.label("several contexts share one GPU: this checks the split and the exchange, it cannot speed anything up");
    }
}

fn variant_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    let mut variant = demo.edit.variant;
    ui.label(egui::RichText::new("Forces kernel").strong());
    compile_and_tuning(demo, ui);
    ui.horizontal(|ui| {
        ui.radio_value(&mut variant.precision, Precision::F32, "fp32");
        ui.radio_value(&mut variant.precision, Precision::F64, "fp64");
    });
    let cuda = matches!(demo.engine, Engine::Cuda { .. });
    if cuda {
        let choice = |ui: &mut egui::Ui, id: &str, label: &str, value: &mut u32, options: &[u32]| {
            egui::ComboBox::new(id, label).selected_text(value.to_string()).show_ui(ui, |ui| {
                for &option in options {
                    ui.selectable_value(value, option, option.to_string());
                }
            });
        };
        ui.horizontal(|ui| {
            choice(ui, "nbody_block", "block", &mut variant.block_size, &[64, 128, 256, 512, 1024]);
            choice(ui, "nbody_tile", "tile", &mut variant.tile_size, &[64, 128, 256, 512, 1024, 2048]);
        });
        ui.horizontal(|ui| {
            choice(ui, "nbody_unroll", "unroll", &mut variant.unroll, &[1, 2, 4, 8, 16, 32]);
            choice(ui, "nbody_per_thread", "bodies/thread", &mut variant.bodies_per_thread, &[1, 2, 4, 8]);
        });
        ui.horizontal(|ui| {
            let mut auto = demo.edit.slices_auto;
            ui.checkbox(&mut auto, "slices: fill the GPU");
            if !auto {
                ui.add(egui::DragValue::new(&mut demo.edit.slices).range(1..=64));
            }
            if auto != demo.edit.slices_auto {
                demo.edit.slices_auto = auto;
            }
            let wanted = (!demo.edit.slices_auto).then_some(demo.edit.slices);
            if ui.button("apply slices").clicked() && wanted != demo.settings.slices {
                demo.pending.push(Change::Slices(wanted));
            }
        });
        let mut depth = demo.settings.pipeline_depth;
        ui.horizontal(|ui| {
            ui.label("pipeline depth");
            ui.radio_value(&mut depth, 1, "1")
                .on_hover_text("the state in the GL buffers, mapped at each step's start");
            ui.radio_value(&mut depth, 2, "2").on_hover_text(
                "the state on the device; two GL copies drawn in turn, the next mapped before this one is drawn \
                 (no frame of latency; docs/interop-map.md says what it gains here)",
            );
        });
        if depth != demo.settings.pipeline_depth && demo.settings.devices.len() <= 1 {
            demo.pending.push(Change::PipelineDepth(depth));
        }
    }
    if variant != demo.edit.variant {
        demo.edit.variant = variant;
        demo.pending.push(Change::Variant(variant));
    }
    kernel_facts(demo, ui);
}

/// A compile in progress, and the autotuning's progress or its result.
fn compile_and_tuning(demo: &NBody, ui: &mut egui::Ui) {
    if let Some((file, since)) = demo.compiling() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label(format!(
                "NVRTC is compiling {file} ({:.1} s): the first start of this variant on this device; the bodies \
                 move once it is done",
                since.as_secs_f64()
            ));
        });
    }
    match demo.tuning() {
        (Some((done, total)), _) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("autotuning: {done} of {total} variants timed (first run on this device)"));
            });
            ui.add(egui::ProgressBar::new(done as f32 / total.max(1) as f32));
        }
        (None, Some(tuned)) => {
            ui.label(format!(
                "autotuned: {} at {:.3e} interactions/s ({} bodies, best of {})",
                tuned.variant.label(),
                tuned.interactions_per_s,
                tuned.bodies,
                tuned.candidates.len()
            ))
            .on_hover_text("timed once on this device; kept beside the kernel cache");
        }
        (None, None) => {}
    }
}

/// The forces kernel's registers, shared memory, slices and occupancy, and where it came from.
fn kernel_facts(demo: &NBody, ui: &mut egui::Ui) {
    if let Engine::Cuda { simulation, .. } = &demo.engine {
        let kernels = simulation.kernels();
        let attributes = kernels.forces_attributes();
        let device = simulation.context().device();
        let occupancy = kernels.forces_blocks_per_multiprocessor().ok().map(|blocks| {
            let warps = blocks * kernels.variant.block_size as i32 / device.warp_size.max(1);
            let most = device.max_threads_per_multiprocessor / device.warp_size.max(1);
            format!("{blocks} blocks/SM, {:.0} % occupancy", 100.0 * warps as f64 / most.max(1) as f64)
        });
        ui.label(format!(
            "{} registers/thread, {} B shared/block, {} slices{}",
            attributes.registers,
            kernels.variant.shared_bytes() + attributes.static_shared_bytes as u32,
            simulation.slices(),
            occupancy.map(|o| format!(", {o}")).unwrap_or_default()
        ));
        ui.label(if kernels.from_cache {
            "from the kernel cache".to_owned()
        } else {
            format!("compiled in {:.0} ms", kernels.compile_ms)
        });
    } else {
        ui.label("CPU backend: the same integrator on all cores (rayon, SIMD lanes)");
    }
}

/// The last force check: how far the method's forces are from direct summation in f64.
fn force_check_readout(demo: &mut NBody, ui: &mut egui::Ui) {
    match demo.force_check() {
        Some(check) => {
            let method = match check.method.method {
                Method::Tree => format!("tree θ {:.2}", check.method.theta),
                Method::AllPairs => "all pairs".to_owned(),
            };
            ui.label(format!(
                "force error ({method}, {} bodies against f64 direct sums, step {}): median {:.1e}, p99 {:.1e}, max {:.1e}",
                check.errors.bodies, check.step, check.errors.median, check.errors.p99, check.errors.max
            ))
            .on_hover_text("|a − a_direct| / |a_direct| over a sample of bodies; the tree's default θ keeps p99 under 1 %");
        }
        None => {
            ui.label("force error: not checked yet");
        }
    }
    if ui.button("check forces now").clicked() {
        demo.force_checks.asked = true;
    }
}
