//! The Barnes-Hut tree method on the CPU: a radix tree over the bodies' Morton codes, monopole
//! moments, and a walk per body with an opening angle θ. It is what the CPU backend runs when the
//! method is `tree`, and the reference the GPU tree (`kernels/nbody_tree.cu`) is tested against.
//!
//! The force law, softening and integrator are all-pairs' (`super::cpu`): only the sum over
//! bodies is approximated, by taking far groups as their centre of mass.

pub mod boxes;
pub mod build;
pub mod check;
pub mod gpu;
pub mod walk;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::cpu::{Params, Real};
use crate::error::{Error, Result};

pub use self::build::Tree;
pub use self::walk::WalkResult;

/// How the forces are summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Every pair, exactly: O(N²).
    #[default]
    AllPairs,
    /// Barnes-Hut: far groups of bodies as one mass, O(N log N), error set by θ.
    Tree,
}

impl Method {
    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::AllPairs => "all-pairs",
            Method::Tree => "tree",
        }
    }
}

/// From this many bodies on CUDA the tree steps faster than all-pairs: `bench nbody --method
/// tree` on an H200 measured all-pairs faster at 65,536 bodies (467 steps/s against 322) and the
/// tree at 262,144 (74 against 29); this is between the two.
pub const TREE_FROM_CUDA: u32 = 131_072;
/// From this many bodies on the CPU backend the tree's pass is faster than all-pairs' (`bench
/// nbody --method tree` on 2 cores: all-pairs 32 ms against the tree's 44 ms at 4,096 bodies,
/// 510 ms against 316 ms at 16,384).
pub const TREE_FROM_CPU: u32 = 8_192;

impl Method {
    /// The faster method for `n` bodies on CUDA or the CPU: all-pairs is exact and fastest for
    /// small counts, the tree (p99 force error under 1 % at the default θ) beyond.
    pub fn fastest_for(n: u32, cuda: bool) -> Method {
        if n >= if cuda { TREE_FROM_CUDA } else { TREE_FROM_CPU } { Method::Tree } else { Method::AllPairs }
    }
}

/// The force method and its opening angle: what a step needs to know besides the physics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForceMethod {
    /// All-pairs or tree.
    pub method: Method,
    /// The tree's opening angle θ (unused by all-pairs).
    pub theta: f64,
}

impl Default for ForceMethod {
    fn default() -> Self {
        Self { method: Method::AllPairs, theta: DEFAULT_THETA }
    }
}

/// Smallest opening angle accepted (smaller costs much more and gains little over all-pairs).
pub const MIN_THETA: f64 = 0.2;
/// Largest opening angle accepted: beyond 1 a body may take a node it lies inside as a point.
pub const MAX_THETA: f64 = 1.0;
/// The default opening angle: the largest that kept p99 of the relative force error below 1 % on
/// random and clustered bodies (measured: 0.9–1.1 % at 0.4, 0.3–0.5 % at 0.3; docs/nbody.md).
pub const DEFAULT_THETA: f64 = 0.35;

/// Checks an opening angle; the message gives the range.
pub fn validate_theta(theta: f64) -> Result<()> {
    if (MIN_THETA..=MAX_THETA).contains(&theta) {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "the tree's opening angle θ must be in {MIN_THETA}..={MAX_THETA} (smaller: more exact and slower), not {theta}"
        )))
    }
}

/// What a tree step did, for the readouts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeStats {
    /// Node interactions summed over all bodies.
    pub interactions: u64,
}

/// The tree method's state between steps: the tree and scratch space, reused every step.
#[derive(Debug, Default)]
pub struct TreeForces {
    tree: Tree,
    positions: Vec<[f64; 4]>,
    sorted: Vec<WalkResult>,
}

impl TreeForces {
    /// The tree of the last call.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// `out[i] = G Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}` for every body, far groups
    /// taken as their centre of mass under opening angle `theta`; the fourth component is 0.
    pub fn accelerations<T: Real>(
        &mut self,
        positions: &[[T; 4]],
        params: &Params,
        theta: f64,
        out: &mut [[T; 4]],
    ) -> Result<TreeStats> {
        validate_theta(theta)?;
        self.accelerations_at_any_theta(positions, params, theta, out)
    }

    /// [`Self::accelerations`] without the range check on θ (θ = 0 opens every node of size > 0).
    fn accelerations_at_any_theta<T: Real>(
        &mut self,
        positions: &[[T; 4]],
        params: &Params,
        theta: f64,
        out: &mut [[T; 4]],
    ) -> Result<TreeStats> {
        if out.len() != positions.len() {
            return Err(Error::InvalidInput(format!(
                "n-body tree: {} accelerations for {} bodies",
                out.len(),
                positions.len()
            )));
        }
        self.positions.clear();
        self.positions.par_extend(positions.par_iter().map(|p| p.map(T::to_f64)));
        self.tree.build(&self.positions);
        let softening2 = params.softening * params.softening;
        let (tree, bodies) = (&self.tree, &self.positions);
        // In Morton order, so neighbouring walks visit the same nodes (cache).
        tree.order
            .par_iter()
            .map(|&body| {
                let p = bodies[body as usize];
                walk::walk(tree, [p[0], p[1], p[2]], theta, softening2)
            })
            .collect_into_vec(&mut self.sorted);
        if self.sorted.iter().any(|result| result.overflowed) {
            return Err(Error::InvalidInput(format!(
                "n-body tree: a walk needed more than {} stack entries; the tree is deeper than its codes allow",
                walk::STACK_NODES
            )));
        }
        let gravity = params.gravity;
        let mut interactions = 0;
        for (result, &body) in self.sorted.iter().zip(&tree.order) {
            let a = result.acceleration;
            out[body as usize] = [a[0] * gravity, a[1] * gravity, a[2] * gravity, 0.0].map(T::from_f64);
            interactions += u64::from(result.interactions);
        }
        Ok(TreeStats { interactions })
    }
}

/// One kick-drift-kick step with tree forces: all-pairs' drift and kick around them.
/// `accelerations` must hold a(x_in) and holds a(x_out) afterwards.
#[allow(clippy::too_many_arguments)]
pub fn step<T: Real>(
    forces: &mut TreeForces,
    positions_in: &[[T; 4]],
    positions_out: &mut [[T; 4]],
    velocities: &mut [[T; 4]],
    accelerations: &mut [[T; 4]],
    params: &Params,
    theta: f64,
) -> Result<TreeStats> {
    super::cpu::drift(positions_in, positions_out, velocities, accelerations, params.dt);
    let stats = forces.accelerations(positions_out, params, theta, accelerations)?;
    super::cpu::kick(velocities, accelerations, params.dt, params.damping);
    Ok(stats)
}

#[cfg(test)]
mod accuracy;
