//! Initial conditions, in N-body units (G = 1, total mass 1), generated from a seed.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Bodies on the host, in f64: what presets make, state files hold and references start from.
#[derive(Debug, Clone, PartialEq)]
pub struct Bodies {
    /// x, y, z and mass of each body.
    pub positions: Vec<[f64; 4]>,
    /// vx, vy, vz of each body.
    pub velocities: Vec<[f64; 3]>,
}

impl Bodies {
    /// Number of bodies.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Total momentum Σ m v.
    pub fn momentum(&self) -> [f64; 3] {
        let mut p = [0.0; 3];
        for (x, v) in self.positions.iter().zip(&self.velocities) {
            for axis in 0..3 {
                p[axis] += x[3] * v[axis];
            }
        }
        p
    }

    /// Root-mean-square speed.
    pub fn rms_speed(&self) -> f64 {
        let sum: f64 = self.velocities.iter().map(|v| v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sum();
        (sum / self.len().max(1) as f64).sqrt()
    }

    /// Moves to the centre-of-mass frame (zero total momentum, centre of mass at the origin).
    pub fn to_centre_of_mass_frame(&mut self) {
        let total: f64 = self.positions.iter().map(|p| p[3]).sum();
        if total <= 0.0 {
            return;
        }
        let mut centre = [0.0; 3];
        for p in &self.positions {
            for axis in 0..3 {
                centre[axis] += p[3] * p[axis] / total;
            }
        }
        let momentum = self.momentum();
        for (p, v) in self.positions.iter_mut().zip(&mut self.velocities) {
            for axis in 0..3 {
                p[axis] -= centre[axis];
                v[axis] -= momentum[axis] / total;
            }
        }
    }
}

/// The starting configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Bodies at rest, uniform in a cube: a cold collapse.
    Cube,
    /// A thin rotating spherical shell.
    Shell,
    /// A Plummer sphere in equilibrium (velocities from its distribution function).
    Plummer,
    /// A rotating disk galaxy around a heavy central body.
    Disk,
    /// Two disk galaxies on a collision course.
    Collision,
    /// A uniform ball expanding outwards.
    Expanding,
    /// Two disk galaxies merging, a million bodies on CUDA: the tree method's preset.
    Merger,
}

impl Preset {
    /// Every preset, in menu order.
    pub const ALL: [Preset; 7] = [
        Preset::Collision,
        Preset::Merger,
        Preset::Disk,
        Preset::Plummer,
        Preset::Cube,
        Preset::Shell,
        Preset::Expanding,
    ];

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Cube => "cube",
            Preset::Shell => "shell",
            Preset::Plummer => "plummer",
            Preset::Disk => "disk",
            Preset::Collision => "collision",
            Preset::Expanding => "expanding",
            Preset::Merger => "merger",
        }
    }

    /// The bodies this preset starts with when `--bodies` is not given (`None`: the demo's
    /// default for the backend).
    pub fn default_bodies(self, cuda: bool) -> Option<u32> {
        match self {
            // On the CPU, as many as the tree steps in about a tenth of a second on 2 cores.
            Preset::Merger => Some(if cuda { 1 << 20 } else { 16_384 }),
            _ => None,
        }
    }

    /// Whether the preset is made for the tree method (its default body count is beyond what
    /// all-pairs steps live).
    pub fn wants_tree(self) -> bool {
        self == Preset::Merger
    }

    /// A time step that keeps the leapfrog stable and the energy error small for this preset.
    pub fn default_dt(self) -> f64 {
        match self {
            Preset::Plummer => 0.004,
            Preset::Disk | Preset::Collision | Preset::Merger => 0.002,
            Preset::Cube | Preset::Shell | Preset::Expanding => 0.003,
        }
    }

    /// Softening length: about the mean distance between neighbours in the dense parts.
    pub fn default_softening(self) -> f64 {
        match self {
            Preset::Plummer => 0.02,
            Preset::Disk | Preset::Collision => 0.015,
            // Sixteen times the bodies of `collision`'s 65,536: neighbours are 2.5 times closer.
            Preset::Merger => 0.006,
            Preset::Cube | Preset::Shell | Preset::Expanding => 0.04,
        }
    }

    /// Generates `n` bodies (n ≥ 1) from `seed`.
    pub fn generate(self, n: usize, seed: u64) -> Bodies {
        let mut rng = Rng::new(seed ^ (self as u64).wrapping_mul(0x9E37_79B9));
        let mut bodies = match self {
            Preset::Cube => cube(n, &mut rng),
            Preset::Shell => shell(n, &mut rng),
            Preset::Plummer => plummer(n, &mut rng),
            Preset::Disk => disk(n, &mut rng, 1.0, self.default_softening()),
            Preset::Collision | Preset::Merger => collision(n, &mut rng, self.default_softening()),
            Preset::Expanding => expanding(n, &mut rng),
        };
        bodies.to_centre_of_mass_frame();
        bodies
    }
}

fn equal_masses(n: usize, total: f64) -> f64 {
    total / n.max(1) as f64
}

fn cube(n: usize, rng: &mut Rng) -> Bodies {
    let m = equal_masses(n, 1.0);
    let positions = (0..n).map(|_| [rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), m]).collect();
    let velocities = (0..n).map(|_| [0.02 * rng.normal(), 0.02 * rng.normal(), 0.02 * rng.normal()]).collect();
    Bodies { positions, velocities }
}

fn shell(n: usize, rng: &mut Rng) -> Bodies {
    let m = equal_masses(n, 1.0);
    let mut positions = Vec::with_capacity(n);
    let mut velocities = Vec::with_capacity(n);
    for _ in 0..n {
        let [x, y, z] = rng.unit_vector();
        let r = 1.0 + 0.03 * rng.normal();
        positions.push([x * r, y * r, z * r, m]);
        // Rotation about y at half the speed that would hold the shell up: it falls in, spinning.
        let omega = 0.5;
        velocities.push([omega * z * r, 0.0, -omega * x * r]);
    }
    Bodies { positions, velocities }
}

/// Plummer sphere with scale length 1 (Aarseth, Hénon & Wielen 1974 sampling).
fn plummer(n: usize, rng: &mut Rng) -> Bodies {
    let m = equal_masses(n, 1.0);
    let mut positions = Vec::with_capacity(n);
    let mut velocities = Vec::with_capacity(n);
    for _ in 0..n {
        // Radius from the cumulative mass, cut at 99 % of the mass so no body starts far away.
        let mass_fraction = rng.range(1e-6, 0.99);
        let r = 1.0 / (mass_fraction.powf(-2.0 / 3.0) - 1.0).sqrt();
        let [x, y, z] = rng.unit_vector();
        positions.push([x * r, y * r, z * r, m]);
        // Speed as a fraction q of the local escape speed, by rejection from q²(1 − q²)^{7/2}.
        let q = loop {
            let q = rng.uniform();
            let g = 0.1 * rng.uniform();
            if g < q * q * (1.0 - q * q).powf(3.5) {
                break q;
            }
        };
        let escape = std::f64::consts::SQRT_2 * (1.0 + r * r).powf(-0.25);
        let [vx, vy, vz] = rng.unit_vector();
        let speed = q * escape;
        velocities.push([vx * speed, vy * speed, vz * speed]);
    }
    Bodies { positions, velocities }
}

/// A disk of `n − 1` bodies (exponential profile, scale length 0.25) around a central body of 30 %
/// of the mass, each on a circular orbit for the softened mass inside its radius.
fn disk(n: usize, rng: &mut Rng, total_mass: f64, softening: f64) -> Bodies {
    if n == 1 {
        return Bodies { positions: vec![[0.0, 0.0, 0.0, total_mass]], velocities: vec![[0.0; 3]] };
    }
    let central = 0.3 * total_mass;
    let m = (total_mass - central) / (n - 1) as f64;
    let scale = 0.25;
    let mut radii: Vec<f64> = (0..n - 1)
        .map(|_| {
            loop {
                // Exponential surface density: radius ~ Gamma(2, scale), kept within 6 scale lengths.
                let r = -scale * (rng.uniform().max(1e-12) * rng.uniform().max(1e-12)).ln();
                if r < 6.0 * scale {
                    break r.max(0.02);
                }
            }
        })
        .collect();
    radii.sort_by(f64::total_cmp);
    let mut positions = vec![[0.0, 0.0, 0.0, central]];
    let mut velocities = vec![[0.0; 3]];
    for (index, &r) in radii.iter().enumerate() {
        let angle = rng.range(0.0, std::f64::consts::TAU);
        let (sin, cos) = angle.sin_cos();
        let height = 0.01 * rng.normal();
        positions.push([r * cos, height, r * sin, m]);
        let enclosed = central + m * index as f64;
        let speed = (enclosed * r * r / (r * r + softening * softening).powf(1.5)).sqrt();
        let dispersion = 0.03 * speed;
        // Counter-clockwise seen from +y.
        velocities.push([
            -speed * sin + dispersion * rng.normal(),
            dispersion * rng.normal(),
            speed * cos + dispersion * rng.normal(),
        ]);
    }
    Bodies { positions, velocities }
}

fn collision(n: usize, rng: &mut Rng, softening: f64) -> Bodies {
    if n < 2 {
        return disk(n, rng, 1.0, softening);
    }
    let first = n / 2;
    let mut a = disk(first, rng, 0.5, softening);
    let mut b = disk(n - first, rng, 0.5, softening);
    // Tilt the second galaxy by 40° about x, then put the two on a grazing, bound approach.
    let (sin, cos) = 40f64.to_radians().sin_cos();
    for (p, v) in b.positions.iter_mut().zip(&mut b.velocities) {
        let (y, z) = (p[1], p[2]);
        p[1] = y * cos - z * sin;
        p[2] = y * sin + z * cos;
        let (vy, vz) = (v[1], v[2]);
        v[1] = vy * cos - vz * sin;
        v[2] = vy * sin + vz * cos;
    }
    for (bodies, offset, drift) in
        [(&mut a, [-1.4, 0.0, -0.35], [0.32, 0.0, 0.05]), (&mut b, [1.4, 0.0, 0.35], [-0.32, 0.0, -0.05])]
    {
        for (p, v) in bodies.positions.iter_mut().zip(&mut bodies.velocities) {
            for axis in 0..3 {
                p[axis] += offset[axis];
                v[axis] += drift[axis];
            }
        }
    }
    a.positions.extend(b.positions);
    a.velocities.extend(b.velocities);
    a
}

fn expanding(n: usize, rng: &mut Rng) -> Bodies {
    let m = equal_masses(n, 1.0);
    let mut positions = Vec::with_capacity(n);
    let mut velocities = Vec::with_capacity(n);
    for _ in 0..n {
        let [x, y, z] = rng.unit_vector();
        let r = rng.uniform().cbrt() * 0.8;
        positions.push([x * r, y * r, z * r, m]);
        // Outward, faster further out (a Hubble-like flow), just above what gravity can stop.
        let speed = 1.6 * r;
        velocities.push([x * speed, y * speed, z * speed]);
    }
    Bodies { positions, velocities }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_makes_n_finite_bodies_of_unit_mass_at_rest_overall() {
        for preset in Preset::ALL {
            for n in [1usize, 2, 3, 1000] {
                let bodies = preset.generate(n, 12345);
                assert_eq!(bodies.len(), n, "{}", preset.name());
                assert_eq!(bodies.velocities.len(), n);
                assert!(bodies.positions.iter().flatten().all(|v| v.is_finite()), "{}", preset.name());
                assert!(bodies.velocities.iter().flatten().all(|v| v.is_finite()), "{}", preset.name());
                let mass: f64 = bodies.positions.iter().map(|p| p[3]).sum();
                assert!((mass - 1.0).abs() < 1e-9, "{} n={n}: total mass {mass}", preset.name());
                assert!(bodies.positions.iter().all(|p| p[3] > 0.0), "positive masses");
                let momentum = bodies.momentum();
                assert!(momentum.iter().all(|p| p.abs() < 1e-12), "{}: momentum {momentum:?}", preset.name());
            }
            assert_eq!(preset.generate(100, 1), preset.generate(100, 1), "{}: same seed, same bodies", preset.name());
            assert_ne!(preset.generate(100, 1), preset.generate(100, 2), "{}: seeds differ", preset.name());
        }
    }

    #[test]
    fn plummer_sphere_is_near_virial_equilibrium() {
        // For a Plummer sphere 2K + W = 0; sampling noise at n = 4000 keeps it within ~10 %.
        let bodies = Preset::Plummer.generate(4000, 9);
        let kinetic: f64 = bodies
            .positions
            .iter()
            .zip(&bodies.velocities)
            .map(|(p, v)| 0.5 * p[3] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
            .sum();
        let mut potential = 0.0;
        for i in 0..bodies.len() {
            for j in i + 1..bodies.len() {
                let (a, b) = (bodies.positions[i], bodies.positions[j]);
                let r = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
                potential -= a[3] * b[3] / r;
            }
        }
        let virial = 2.0 * kinetic / -potential;
        assert!((virial - 1.0).abs() < 0.1, "2K/|W| = {virial}");
    }
}
