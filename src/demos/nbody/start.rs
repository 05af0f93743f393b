//! What the demo starts from: the forces kernel variant (as chosen, as tuned for this device, or
//! tuned now) and the bodies, their parameters and step (a preset, or a state file).

use super::cpu::Params;
use super::cpu_rate;
use super::kernels::Precision;
use super::presets::Bodies;
use super::{NBodySettings, state, tune, validate_bodies, validate_params};
use crate::Result;
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

/// Bodies, parameters and step count to start from; in a `window`, refused on the CPU when the
/// steps would be too slow for it to answer input.
pub(super) fn initial_state(settings: &NBodySettings, cuda: bool, window: bool) -> Result<(Bodies, Params, u64)> {
    settings.variant.validate()?;
    settings.validate_pipeline()?;
    match &settings.load {
        Some(path) => {
            let saved = state::load(path)?;
            validate_params(&saved.params)?;
            Ok((saved.bodies, saved.params, saved.step))
        }
        None => {
            let n = settings.body_count(cuda);
            validate_bodies(n)?;
            if !cuda && window && settings.method == super::tree::Method::AllPairs {
                // Before the bodies are made: 10 million of them take seconds to generate. The
                // tree's step grows as N log N, so this all-pairs estimate does not apply to it.
                cpu_rate::check_window_bodies(n as usize, settings.variant.precision == Precision::F64)?;
            }
            let params = settings.params();
            validate_params(&params)?;
            Ok((settings.preset.generate(n as usize, settings.seed), params, 0))
        }
    }
}
