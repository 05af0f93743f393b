//! The force error, live, and the state kept to go back to (`guard`): every few seconds
//! (`--force-check-every`) the state is read back and, with the tree, the accelerations it gave
//! are compared, for a sample of bodies, with direct summation in f64 at the same positions. The
//! sum runs on a thread of its own, so the frames go on; the panel, `--stats` and the log show
//! median, p99 and max of |a − a_direct| / |a_direct|. For the tree that is its approximation;
//! for all-pairs (checked when asked), fp32 rounding.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cpu::Params;
use super::engine::Engine;
use super::tree::check::{ForceErrors, direct_accelerations, force_errors, sample};
use super::tree::{ForceMethod, Method};
use super::{NBody, mismatch};
use crate::scene::Graphics;
use crate::error::{Error, Result};

/// Bodies compared at each check.
pub const SAMPLE: usize = 1024;

/// A finished check.
#[derive(Debug, Clone, Copy)]
pub struct ForceCheck {
    /// The method and θ the accelerations came from.
    pub method: ForceMethod,
    /// The step whose accelerations were checked.
    pub step: u64,
    /// The relative error over the sample.
    pub errors: ForceErrors,
    /// When the check finished.
    pub at: Instant,
}

impl ForceCheck {
    /// The check as `--stats` gives it.
    pub fn to_json(&self) -> serde_json::Value {
        let finite = |v: f64| v.is_finite().then_some(v);
        serde_json::json!({
            "method": self.method.method.name(),
            "theta": (self.method.method == Method::Tree).then_some(self.method.theta),
            "step": self.step,
            "bodies": self.errors.bodies,
            "median": finite(self.errors.median),
            "p99": finite(self.errors.p99),
            "max": finite(self.errors.max),
        })
    }
}

/// Checks in flight and done.
#[derive(Default)]
pub(super) struct ForceChecks {
    running: Option<(ForceMethod, u64, JoinHandle<ForceErrors>)>,
    started: Option<Instant>,
    /// The last finished check.
    pub(super) last: Option<ForceCheck>,
    /// Asked for from the panel: the next step starts one whatever the interval.
    pub(super) asked: bool,
}

impl NBody {
    /// Every `--force-check-every` seconds reads the state back, keeps it as the state to go back
    /// to (`guard`) and, with the tree, starts a check of its forces; a check asked for in the
    /// panel starts at the next step. Collects a check that finished. The read needs the state on
    /// the host: with CUDA a copy of positions and velocities (and accelerations for a check),
    /// 56 bytes a body widened to f64, in the frame that reads it (its pause on the GPU machine is
    /// not measured yet).
    pub(super) fn advance_force_check(&mut self, graphics: Graphics<'_>) -> Result<()> {
        self.collect_force_check(false)?;
        let checks = &self.force_checks;
        let every = self.settings.force_check_every;
        let periodic = every > 0.0 && checks.started.is_none_or(|at| at.elapsed() >= Duration::from_secs_f64(every));
        // All-pairs' error is fp32 rounding: its forces are checked when asked.
        let check = (checks.asked || (periodic && self.settings.method == Method::Tree)) && checks.running.is_none();
        if !(periodic || check) || matches!(self.engine, Engine::Compiling(_)) {
            return Ok(());
        }
        self.force_checks.started = Some(Instant::now());
        let bodies = Arc::new(self.read_bodies(graphics)?);
        self.keep_checkpoint(&bodies)?;
        // With --devices the accelerations are spread over the devices: the state is kept, the
        // forces are not checked.
        if !check || matches!(self.engine, Engine::Cuda { multi: Some(_), .. }) {
            return Ok(());
        }
        self.force_checks.asked = false;
        let accelerations = self.current_accelerations()?;
        if accelerations.len() != bodies.positions.len() {
            return Err(mismatch());
        }
        let (params, method, step) = (self.params, self.settings.force_method(), self.step);
        let handle = std::thread::Builder::new()
            .name("force check".to_owned())
            .spawn(move || check_forces(&bodies.positions, &accelerations, &params))
            .map_err(|e| Error::InvalidInput(format!("n-body: cannot start the force check: {e}")))?;
        self.force_checks.running = Some((method, step, handle));
        Ok(())
    }

    /// Collects the check in flight when it has finished, or (`wait`) once it has.
    pub(super) fn collect_force_check(&mut self, wait: bool) -> Result<()> {
        let checks = &mut self.force_checks;
        let finished = checks.running.as_ref().is_some_and(|(_, _, handle)| handle.is_finished());
        if !(finished || wait) {
            return Ok(());
        }
        let Some((method, step, handle)) = checks.running.take() else { return Ok(()) };
        let errors =
            handle.join().map_err(|_| Error::InvalidInput("n-body: the force check's thread panicked".to_owned()))?;
        // Said once, and again whenever p99 is above the 1 % the default θ is chosen for.
        let said = if checks.last.is_none() || errors.p99 > 0.01 || errors.p99.is_nan() {
            log::Level::Info
        } else {
            log::Level::Debug
        };
        log::log!(said, "n-body force error at step {step} ({}): {errors}", method.method.name());
        checks.last = Some(ForceCheck { method, step, errors, at: Instant::now() });
        Ok(())
    }

    /// a(x) of the current state, as the next kick uses it (with G), widened to f64.
    fn current_accelerations(&self) -> Result<Vec<[f64; 4]>> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => {
                let stream = crate::cuda::Stream::new(simulation.context())?;
                simulation.read_accelerations(&stream)
            }
            Engine::Cpu(engine) => Ok(match &engine.double {
                Some(double) => double.accelerations.clone(),
                None => engine.accelerations.iter().map(|a| a.map(f64::from)).collect(),
            }),
            Engine::Compiling(_) => Err(mismatch()),
        }
    }

    /// The last finished force check.
    pub fn force_check(&self) -> Option<ForceCheck> {
        self.force_checks.last
    }
}

/// The error of `accelerations` (with G) at `positions` against direct summation over a sample.
fn check_forces(positions: &[[f64; 4]], accelerations: &[[f64; 4]], params: &Params) -> ForceErrors {
    let bodies = sample(positions.len(), SAMPLE);
    let direct = direct_accelerations(positions, &bodies, params);
    force_errors(accelerations, &bodies, &direct)
}
