//! What the demo starts from: the forces kernel variant (as chosen, as tuned for this device, or
//! tuned now) and the bodies, their parameters and step (a preset, or a state file).

use super::cpu::Params;
use super::cpu_rate;
use super::kernels::Precision;
use super::presets::Bodies;
use super::tree::{Method, TREE_FROM_CPU, TREE_FROM_CUDA};
use super::{NBodySettings, state, tune, validate_bodies, validate_params};
use crate::error::Result;
use crate::demo_kit::DemoEnv;

/// The variant to start from. Chosen by hand: as given. Otherwise (`auto_variant`, on CUDA) the
/// one tuned for this device; never tuned: the window begins with the fastest variant known and
/// asks for a [`tune::Tuner`] (the `bool`), a headless run tunes now, with a bar on the terminal.
pub(super) fn choose_variant(
    env: &DemoEnv<'_>,
    mut settings: NBodySettings,
) -> (NBodySettings, bool, Option<tune::Tuned>) {
    let Some(cuda) = env.cuda.as_deref() else { return (settings, false, None) };
    if !settings.auto_variant || settings.devices.len() > 1 {
        return (settings, false, None);
    }
    let precision = settings.variant.precision;
    let (variant, known) = tune::starting_variant(cuda, precision);
    settings.variant = variant;
    if known.is_some() {
        return (settings, false, known);
    }
    if cuda.background_compiles {
        return (settings, true, None);
    }
    let candidates = tune::candidates(precision).len() as u64;
    let progress = crate::progress::Progress::new("tuning n-body", candidates, &crate::stop::StopRequest::new());
    match tune::tune_now(cuda, precision, &progress) {
        Ok(tuned) => {
            log::info!(
                "tuned n-body on {}: {} ({:.3e} interactions/s at {} bodies)",
                tuned.device,
                tuned.variant.label(),
                tuned.interactions_per_s,
                tuned.bodies
            );
            settings.variant = tuned.variant;
            (settings, false, Some(tuned))
        }
        Err(error) => {
            log::warn!("n-body autotuning failed, starting from {}: {error}", variant.label());
            (settings, false, None)
        }
    }
}

/// The force method, when none was chosen (`auto_method`): the faster one for `n` bodies on this
/// backend, or the tree where the preset is made for it or `--draw-tree` asks to see it; said in
/// the log. The tree runs in fp32 and on one device on CUDA: otherwise all-pairs stays.
pub(super) fn choose_method(settings: &mut NBodySettings, n: u32, cuda: bool) {
    if !settings.auto_method {
        if settings.draw_tree && settings.method == Method::AllPairs {
            log::warn!("n-body: --draw-tree draws the tree, which all-pairs does not build: choose --method tree");
        }
        return;
    }
    let tree_runs = !cuda || (settings.variant.precision == Precision::F32 && settings.devices.len() <= 1);
    let fastest = Method::fastest_for(n, cuda);
    let wanted = fastest == Method::Tree || settings.preset.wants_tree() || settings.draw_tree;
    settings.method = if tree_runs && wanted { Method::Tree } else { Method::AllPairs };
    if settings.method == Method::Tree {
        log::info!(
            "n-body: {n} bodies with the Barnes-Hut tree (θ {}), {} (`--method all-pairs` sums every pair exactly)",
            settings.theta,
            if fastest == Method::Tree {
                format!("faster than all-pairs from {} bodies here", if cuda { TREE_FROM_CUDA } else { TREE_FROM_CPU })
            } else if settings.preset.wants_tree() {
                format!("as the {} preset asks", settings.preset.name())
            } else {
                "because --draw-tree draws it".to_owned()
            }
        );
    } else if fastest == Method::Tree {
        log::info!("n-body: {n} bodies with all-pairs: the tree runs in fp32 on one CUDA device");
    }
}

/// Bodies, parameters and step count to start from, and the force method when none was chosen;
/// in a `window`, refused on the CPU when the steps would be too slow for it to answer input.
pub(super) fn initial_state(settings: &mut NBodySettings, cuda: bool, window: bool) -> Result<(Bodies, Params, u64)> {
    settings.variant.validate()?;
    settings.validate_pipeline()?;
    match &settings.load {
        Some(path) => {
            let saved = state::load(path)?;
            validate_params(&saved.params)?;
            choose_method(settings, saved.bodies.len() as u32, cuda);
            Ok((saved.bodies, saved.params, saved.step))
        }
        None => {
            let n = settings.body_count(cuda);
            validate_bodies(n)?;
            choose_method(settings, n, cuda);
            if !cuda && window {
                // Before the bodies are made: 10 million of them take seconds to generate.
                cpu_rate::check_window_bodies(
                    n as usize,
                    settings.variant.precision == Precision::F64,
                    settings.method,
                )?;
            }
            let params = settings.params();
            validate_params(&params)?;
            Ok((settings.preset.generate(n as usize, settings.seed), params, 0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::nbody::presets::Preset;

    fn auto(preset: Preset, precision: Precision) -> NBodySettings {
        let mut settings = NBodySettings { preset, auto_method: true, ..NBodySettings::default() };
        settings.variant.precision = precision;
        settings
    }

    fn chosen(mut settings: NBodySettings, n: u32, cuda: bool) -> Method {
        choose_method(&mut settings, n, cuda);
        settings.method
    }

    #[test]
    fn the_method_not_chosen_is_the_faster_for_the_count_and_backend() {
        let collision = auto(Preset::Collision, Precision::F32);
        for (n, cuda, expected) in [
            (TREE_FROM_CUDA - 1, true, Method::AllPairs),
            (TREE_FROM_CUDA, true, Method::Tree),
            (1_000_000, true, Method::Tree),
            (TREE_FROM_CPU - 1, false, Method::AllPairs),
            (TREE_FROM_CPU, false, Method::Tree),
        ] {
            assert_eq!(chosen(collision.clone(), n, cuda), expected, "{n} bodies, CUDA {cuda}");
        }
        // The merger preset is the tree's at any count; on CUDA the tree is fp32 on one device.
        assert_eq!(chosen(auto(Preset::Merger, Precision::F32), 1000, true), Method::Tree);
        assert_eq!(chosen(auto(Preset::Collision, Precision::F64), 1_000_000, true), Method::AllPairs);
        assert_eq!(chosen(auto(Preset::Collision, Precision::F64), 1_000_000, false), Method::Tree);
        let split = NBodySettings { devices: vec![0, 0], ..auto(Preset::Merger, Precision::F32) };
        assert_eq!(chosen(split, 1 << 20, true), Method::AllPairs);
        // A method asked for is kept, whatever the count.
        let asked = NBodySettings { auto_method: false, ..collision };
        assert_eq!(chosen(asked, 1 << 24, true), Method::AllPairs);
    }

    #[test]
    fn the_merger_preset_starts_with_a_million_bodies_on_cuda_unless_told() {
        let merger = NBodySettings { preset: Preset::Merger, ..NBodySettings::default() };
        assert_eq!(merger.body_count(true), 1 << 20);
        assert_eq!(merger.body_count(false), 16_384);
        assert_eq!(NBodySettings { bodies: Some(5000), ..merger }.body_count(true), 5000);
    }

    #[test]
    fn the_help_of_method_names_the_counts_in_use() {
        use clap::Args;
        let command = super::super::args::NBodyPhysicsArgs::augment_args(clap::Command::new("nbody"));
        let method = command.get_arguments().find(|a| a.get_id() == "method").expect("--method");
        let help = method.get_long_help().or(method.get_help()).map(ToString::to_string).unwrap_or_default();
        for count in [TREE_FROM_CUDA, TREE_FROM_CPU] {
            assert!(help.contains(&count.to_string()), "--method's help names {count}: {help}");
        }
    }
}
