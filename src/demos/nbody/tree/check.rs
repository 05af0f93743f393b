//! How far a force method is from the exact sum: direct summation in f64 for a sample of bodies,
//! and the relative error of each, |a − a_direct| / |a_direct|, as median, p99 and max.

use rayon::prelude::*;

use super::super::cpu::Params;
use super::super::presets::Preset;
use crate::rng::Rng;

/// Percentiles of the relative force error over a sample of bodies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForceErrors {
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Bodies compared.
    pub bodies: usize,
}

impl std::fmt::Display for ForceErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "median {:.2e}, p99 {:.2e}, max {:.2e} over {} bodies", self.median, self.p99, self.max, self.bodies)
    }
}

/// Bodies to compare: all of them up to `count`, else `count` spread evenly over the index range
/// (presets and test inputs are not ordered by position, so this is a fair sample).
pub fn sample(n: usize, count: usize) -> Vec<usize> {
    if n <= count {
        return (0..n).collect();
    }
    (0..count).map(|k| k * n / count).collect()
}

/// G Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2} in f64 for each body `i` of `bodies`.
pub fn direct_accelerations(positions: &[[f64; 4]], bodies: &[usize], params: &Params) -> Vec<[f64; 3]> {
    let softening2 = params.softening * params.softening;
    bodies
        .par_iter()
        .map(|&i| {
            let me = positions[i];
            let mut a = [0.0; 3];
            for other in positions {
                let d = [other[0] - me[0], other[1] - me[1], other[2] - me[2]];
                let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + softening2;
                let strength = params.gravity * other[3] / (r2 * r2.sqrt());
                for axis in 0..3 {
                    a[axis] += d[axis] * strength;
                }
            }
            a
        })
        .collect()
}

/// The relative error of `accelerations[i]` against `direct[k]` for each `i = bodies[k]`. A NaN
/// anywhere makes every statistic NaN, so no comparison with a bound can pass. A body whose exact
/// force is zero is compared absolutely against the mean force magnitude of the sample (or absolutely, when every exact force is zero).
pub fn force_errors(accelerations: &[[f64; 4]], bodies: &[usize], direct: &[[f64; 3]]) -> ForceErrors {
    errors_scaled(accelerations, bodies, direct, false)
}

/// As [`force_errors`], with every difference divided by the sample's mean exact force instead of
/// the body's own: the measure for inputs where many bodies feel almost no net force (inside a
/// uniform plane or line), whose relative errors say nothing about the method.
pub fn force_errors_against_mean(accelerations: &[[f64; 4]], bodies: &[usize], direct: &[[f64; 3]]) -> ForceErrors {
    errors_scaled(accelerations, bodies, direct, true)
}

fn errors_scaled(accelerations: &[[f64; 4]], bodies: &[usize], direct: &[[f64; 3]], against_mean: bool) -> ForceErrors {
    let norm = |v: [f64; 3]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let mean = direct.iter().map(|&a| norm(a)).sum::<f64>() / direct.len().max(1) as f64;
    let mut errors: Vec<f64> = bodies
        .iter()
        .zip(direct)
        .map(|(&i, &exact)| {
            let a = accelerations.get(i).copied().unwrap_or([f64::NAN; 4]);
            let difference = norm([a[0] - exact[0], a[1] - exact[1], a[2] - exact[2]]);
            let scale = if against_mean { 0.0 } else { norm(exact) };
            difference
                / if scale > 0.0 {
                    scale
                } else if mean > 0.0 {
                    mean
                } else {
                    1.0
                }
        })
        .collect();
    if errors.is_empty() || errors.iter().any(|e| !e.is_finite()) {
        return ForceErrors { median: f64::NAN, p99: f64::NAN, max: f64::NAN, bodies: errors.len() };
    }
    errors.sort_by(f64::total_cmp);
    let at = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize];
    ForceErrors { median: at(0.5), p99: at(0.99), max: at(1.0), bodies: errors.len() }
}

/// The inputs the tree is tested on, named: random (a uniform cube), clustered (two Plummer
/// spheres of unequal size and mass; two colliding disk galaxies), each of `bodies` bodies, and
/// degenerate ones of `degenerate_bodies`: all at one point, 37 points each repeated, a plane, a
/// line, one body 10⁹ away, and a cluster 10⁻⁷ wide 5,000 units from the rest.
pub fn test_inputs(bodies: usize, degenerate_bodies: usize, seed: u64) -> Vec<(&'static str, Vec<[f64; 4]>)> {
    let mut rng = Rng::new(seed);
    let cube = |n: usize, rng: &mut Rng| -> Vec<[f64; 4]> {
        (0..n).map(|_| [rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), 1.0 / n as f64]).collect()
    };
    let mut spheres = Preset::Plummer.generate(bodies / 2, seed).positions;
    for p in Preset::Plummer.generate(bodies - bodies / 2, seed + 1).positions {
        spheres.push([p[0] * 0.5 + 3.0, p[1] * 0.5, p[2] * 0.5 + 0.5, p[3] * 0.3]);
    }
    let n = degenerate_bodies;
    let mass = 1.0 / n as f64;
    let repeated = (0..n)
        .map(|i| {
            let k = (i % 37) as f64;
            [k.sin(), (2.0 * k).cos(), k * 0.01, mass]
        })
        .collect();
    let plane = (0..n).map(|_| [rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), 0.0, mass]).collect();
    let line = (0..n).map(|_| [rng.range(-1.0, 1.0), 2.0, -3.0, mass]).collect();
    let mut far = cube(n, &mut rng);
    far[n / 2] = [1e9, -1e9, 1e9, mass];
    let mut tiny_cluster = cube(n, &mut rng);
    for p in &mut tiny_cluster[..n / 2] {
        *p = [p[0] * 1e-7 + 5e3, p[1] * 1e-7, p[2] * 1e-7, p[3]];
    }
    vec![
        ("uniform cube", cube(bodies, &mut rng)),
        ("two Plummer spheres", spheres),
        ("colliding disks", Preset::Collision.generate(bodies, seed).positions),
        ("all at one point", vec![[0.25, -0.5, 1.0, mass]; n]),
        ("37 points, repeated", repeated),
        ("a plane", plane),
        ("a line", line),
        ("one body far away", far),
        ("a tiny cluster far away", tiny_cluster),
    ]
}

/// Whether an input of [`test_inputs`] is one of the degenerate ones.
pub fn is_degenerate(name: &str) -> bool {
    !matches!(name, "uniform cube" | "two Plummer spheres" | "colliding disks")
}
