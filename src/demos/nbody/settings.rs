//! Everything that defines an n-body run, with the checks that say which value is wrong and what
//! is allowed.

use std::path::PathBuf;

use super::NBody;
use super::cpu::Params;
use super::kernels::Variant;
use super::presets::Preset;
use super::tree::{DEFAULT_THETA, ForceMethod, Method};
use crate::demo_kit::{Demo, DemoEnv, Output, Settings};
use crate::numbers::Ranged;
use crate::output::OutputKind;
use crate::error::{Error, Result};

/// Flops per body-body interaction, by the convention of CUDA's nbody sample.
pub const FLOPS_PER_INTERACTION: f64 = 20.0;

/// Most bodies accepted.
pub const MAX_BODIES: u32 = 1 << 24;

/// Bodies a run may have (`--bodies`, the panel, a state file).
pub const BODIES: Ranged<u32> = Ranged::new(1, MAX_BODIES).unit("bodies");

/// The time step, in simulation time units (G = 1, masses summing to 1).
pub const DT: Ranged<f64> = Ranged::above(0.0, 1.0);

/// The softening length: without it a close pair's force is unbounded and a body's own term
/// divides by zero.
pub const SOFTENING: Ranged<f64> = Ranged::above(0.0, 10.0);

/// The gravitational constant.
pub const GRAVITY: Ranged<f64> = Ranged::above(0.0, 1e6);

/// The velocity factor per step (1: none).
pub const DAMPING: Ranged<f64> = Ranged::above(0.0, 1.0);

/// Buffer sets the frames use in turn: 1 (the state in the GL buffers) or 2 (the state on the
/// device, two GL copies in turn).
pub const PIPELINE_DEPTHS: Ranged<u32> = Ranged::new(1, 2);

/// Default body count on CUDA and on the CPU.
pub const DEFAULT_BODIES_CUDA: u32 = 65_536;
/// Seconds between the tree's force checks by default.
pub const DEFAULT_FORCE_CHECK_EVERY: f64 = 3.0;

/// Default on the CPU backend: what two cores step at interactive rates.
pub const DEFAULT_BODIES_CPU: u32 = 4_096;

/// Everything that defines an n-body run; each is also a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct NBodySettings {
    /// Bodies (`None`: 65,536 on CUDA, 4,096 on the CPU).
    pub bodies: Option<u32>,
    /// Initial conditions.
    pub preset: Preset,
    /// Seed of the initial conditions.
    pub seed: u64,
    /// Time step (`None`: the preset's).
    pub dt: Option<f64>,
    /// Softening length (`None`: the preset's).
    pub softening: Option<f64>,
    /// Velocity factor per step (1 = none).
    pub damping: f64,
    /// Gravitational constant.
    pub gravity: f64,
    /// Forces kernel variant (its precision is the run's precision).
    pub variant: Variant,
    /// Start from the variant tuned for this device (timing the candidates first if it was never
    /// tuned) instead of `variant`, whose precision is kept.
    pub auto_variant: bool,
    /// Slices of the j range (`None`: enough to fill the GPU).
    pub slices: Option<u32>,
    /// Sprite radius in world units.
    pub point_size: f32,
    /// Brightness factor.
    pub brightness: f32,
    /// Speed of the hottest colour, as a multiple of the initial RMS speed.
    pub colour_scale: f32,
    /// Compute the energy every this many steps (0: only when asked).
    pub energy_every: u32,
    /// With the tree method, compare its forces with direct summation every this many seconds
    /// (0: only when asked).
    pub force_check_every: f64,
    /// Start from this state file instead of the preset.
    pub load: Option<PathBuf>,
    /// Save the state here when the run ends.
    pub save: Option<PathBuf>,
    /// CUDA devices to split the bodies across, one context each, the first rendering (empty:
    /// the computing device alone). Repeating an ordinal gives it another context.
    pub devices: Vec<i32>,
    /// 1: the state lives in the GL buffers, mapped at each frame's start. 2: the state lives in
    /// device memory and two pairs of GL buffers take turns as the drawn copy, the next pair
    /// mapped while this one is drawn (GL interop; docs/interop-map.md). No frame of latency.
    pub pipeline_depth: u32,
    /// How the forces are summed: every pair, or the Barnes-Hut tree.
    pub method: Method,
    /// `method` was not chosen: the demo picks it from the body count and backend when it starts
    /// ([`Method::fastest_for`]).
    pub auto_method: bool,
    /// The tree's opening angle θ, 0.2..=1.0 (smaller: more exact, slower).
    pub theta: f64,
    /// Draw the tree's boxes over the bodies (with the tree method).
    pub draw_tree: bool,
    /// Levels of the tree drawn, 1..=`tree::boxes::MAX_LEVELS`.
    pub tree_levels: u32,
}

impl Default for NBodySettings {
    fn default() -> Self {
        Self {
            bodies: None,
            preset: Preset::Collision,
            seed: 1,
            dt: None,
            softening: None,
            damping: 1.0,
            gravity: 1.0,
            variant: Variant::default(),
            auto_variant: false,
            slices: None,
            point_size: 0.006,
            brightness: 1.0,
            colour_scale: 2.0,
            energy_every: 30,
            force_check_every: DEFAULT_FORCE_CHECK_EVERY,
            load: None,
            save: None,
            devices: Vec::new(),
            pipeline_depth: 1,
            method: Method::AllPairs,
            auto_method: false,
            theta: DEFAULT_THETA,
            draw_tree: false,
            tree_levels: super::tree::boxes::DEFAULT_LEVELS,
        }
    }
}

impl NBodySettings {
    /// The physical parameters, with the preset's defaults filled in.
    pub fn params(&self) -> Params {
        Params {
            dt: self.dt.unwrap_or_else(|| self.preset.default_dt()),
            softening: self.softening.unwrap_or_else(|| self.preset.default_softening()),
            gravity: self.gravity,
            damping: self.damping,
        }
    }

    /// Checks the pipeline depth against the rest of the settings.
    pub fn validate_pipeline(&self) -> Result<()> {
        PIPELINE_DEPTHS.check_value("n-body --pipeline-depth", self.pipeline_depth).map_err(|why| {
            Error::InvalidInput(format!(
                "{why} (1: state in the GL buffers; 2: state on the device, two GL copies in turn)"
            ))
        })?;
        if self.pipeline_depth > 1 && self.devices.len() > 1 {
            return Err(Error::InvalidInput(
                "--pipeline-depth 2 with --devices: the split reads and writes the GL buffers; use one of them"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// The force method and its opening angle.
    pub fn force_method(&self) -> ForceMethod {
        ForceMethod { method: self.method, theta: self.theta }
    }

    /// The body count for a backend.
    pub fn body_count(&self, cuda: bool) -> u32 {
        self.bodies.or(self.preset.default_bodies(cuda)).unwrap_or(if cuda {
            DEFAULT_BODIES_CUDA
        } else {
            DEFAULT_BODIES_CPU
        })
    }
}

/// Checks the physical parameters (from flags, the panel or a state file); the message names the
/// value that is wrong and its range.
pub fn validate_params(params: &Params) -> Result<()> {
    let rules = [
        ("dt", DT, params.dt),
        ("softening", SOFTENING, params.softening),
        ("gravity G", GRAVITY, params.gravity),
        ("damping", DAMPING, params.damping),
    ];
    for (name, range, value) in rules {
        range.check_value(name, value).map_err(Error::InvalidInput)?;
    }
    Ok(())
}

/// Checks a body count.
pub fn validate_bodies(n: u32) -> Result<()> {
    BODIES.check_value("the number of bodies", n).map_err(Error::InvalidInput)
}

impl Settings for NBodySettings {
    const NAME: &'static str = "nbody";

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Ok(Box::new(NBody::new(env, self.clone())?))
    }

    fn outputs(&self) -> Vec<Output> {
        let output = |path: &PathBuf| Output { path: path.clone(), kind: OutputKind::Data, flag: "--save" };
        self.save.iter().map(output).collect()
    }

    /// The CPU computes all bodies itself: a split across CUDA devices is dropped.
    fn on_cpu(&self) -> Self {
        Self { devices: Vec::new(), ..self.clone() }
    }
}
