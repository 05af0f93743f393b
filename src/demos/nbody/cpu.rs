//! The n-body integrator on the CPU (what the CPU backend runs, in f32 or f64, on all cores) and
//! a plain f64 reference (what every test compares against).
//!
//! Both do what `kernels/nbody.cu` does: kick-drift-kick leapfrog with Plummer softening, a body's
//! own term included (it is exactly zero since ε > 0), accelerations kept between steps.

use rayon::prelude::*;

use super::presets::{Bodies, Preset};

/// The physical parameters of a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Time step.
    pub dt: f64,
    /// Softening length ε (> 0).
    pub softening: f64,
    /// Gravitational constant.
    pub gravity: f64,
    /// Velocity factor applied each step (1 = none).
    pub damping: f64,
}

impl Params {
    /// `preset`'s time step and softening, unit gravity, no damping: what the benchmarks step with.
    pub fn defaults_for(preset: Preset) -> Self {
        Self { dt: preset.default_dt(), softening: preset.default_softening(), gravity: 1.0, damping: 1.0 }
    }
}

/// f32 or f64, for the integrator's generic code.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + bytemuck::Pod
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::AddAssign
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Conversion from f64 (rounding for f32).
    fn from_f64(value: f64) -> Self;
    /// Conversion to f64.
    fn to_f64(self) -> f64;
    /// Square root.
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(value: f64) -> Self {
        value
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// Independent j-sums per body, so the compiler can put them in SIMD lanes (a float sum in one
/// accumulator can't be reordered, so it would not vectorise).
const LANES: usize = 8;
/// Bodies per rayon task.
const CHUNK: usize = 32;

/// Positions as separate arrays, padded with massless bodies to a multiple of `LANES` (8).
#[derive(Debug, Clone)]
pub struct Scratch<T> {
    x: Vec<T>,
    y: Vec<T>,
    z: Vec<T>,
    m: Vec<T>,
}

impl<T> Default for Scratch<T> {
    fn default() -> Self {
        Self { x: Vec::new(), y: Vec::new(), z: Vec::new(), m: Vec::new() }
    }
}

impl<T: Real> Scratch<T> {
    fn load(&mut self, positions: &[[T; 4]]) {
        let padded = positions.len().div_ceil(LANES) * LANES;
        for (array, component) in [(&mut self.x, 0), (&mut self.y, 1), (&mut self.z, 2), (&mut self.m, 3)] {
            array.clear();
            array.extend(positions.iter().map(|p| p[component]));
            array.resize(padded, T::ZERO);
        }
    }
}

/// `out[i] = G Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}` for every body, on all cores.
pub fn accelerations<T: Real>(positions: &[[T; 4]], params: &Params, scratch: &mut Scratch<T>, out: &mut [[T; 4]]) {
    accelerations_in_bands(positions, params, scratch, out, out.len(), || true);
}

/// [`accelerations`] in bands of about `band` bodies (whole rayon tasks), asking `go_on()`
/// before each band after the first: a long pass (a benchmark's, at a large size) can so be
/// stopped within one band. Returns whether every band ran.
pub fn accelerations_in_bands<T: Real>(
    positions: &[[T; 4]],
    params: &Params,
    scratch: &mut Scratch<T>,
    out: &mut [[T; 4]],
    band: usize,
    mut go_on: impl FnMut() -> bool,
) -> bool {
    scratch.load(positions);
    let softening2 = T::from_f64(params.softening * params.softening);
    let gravity = T::from_f64(params.gravity);
    let scratch = &*scratch;
    let band = band.div_ceil(CHUNK).max(1) * CHUNK;
    for (index, out) in out.chunks_mut(band).enumerate() {
        if index > 0 && !go_on() {
            return false;
        }
        let first = index * band;
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, out)| {
            for (k, acceleration) in out.iter_mut().enumerate() {
                let me = positions[first + chunk * CHUNK + k];
                *acceleration = acceleration_of(me, scratch, softening2, gravity);
            }
        });
    }
    true
}

/// The acceleration of a body at `me` from every body in `scratch`.
#[inline]
fn acceleration_of<T: Real>(me: [T; 4], scratch: &Scratch<T>, softening2: T, gravity: T) -> [T; 4] {
    let (mut ax, mut ay, mut az) = ([T::ZERO; LANES], [T::ZERO; LANES], [T::ZERO; LANES]);
    let lanes = scratch
        .x
        .chunks_exact(LANES)
        .zip(scratch.y.chunks_exact(LANES))
        .zip(scratch.z.chunks_exact(LANES))
        .zip(scratch.m.chunks_exact(LANES));
    for (((x, y), z), m) in lanes {
        for l in 0..LANES {
            let dx = x[l] - me[0];
            let dy = y[l] - me[1];
            let dz = z[l] - me[2];
            let distance2 = dx * dx + dy * dy + dz * dz + softening2;
            let inverse = T::ONE / distance2.sqrt();
            let strength = m[l] * (inverse * inverse * inverse);
            ax[l] += dx * strength;
            ay[l] += dy * strength;
            az[l] += dz * strength;
        }
    }
    let sum = |lanes: [T; LANES]| lanes.iter().fold(T::ZERO, |s, &v| s + v);
    [sum(ax) * gravity, sum(ay) * gravity, sum(az) * gravity, T::ZERO]
}

/// First half of a step: `v += a·dt/2`, `x_out = x_in + v·dt` (mass carried over).
pub fn drift<T: Real>(
    positions_in: &[[T; 4]],
    positions_out: &mut [[T; 4]],
    velocities: &mut [[T; 4]],
    accelerations: &[[T; 4]],
    dt: f64,
) {
    let (dt, half) = (T::from_f64(dt), T::from_f64(dt * 0.5));
    positions_out
        .par_iter_mut()
        .zip(velocities.par_iter_mut())
        .zip(positions_in.par_iter().zip(accelerations.par_iter()))
        .for_each(|((out, v), (x, a))| {
            for axis in 0..3 {
                v[axis] += a[axis] * half;
                out[axis] = x[axis] + v[axis] * dt;
            }
            out[3] = x[3];
        });
}

/// Second half: `v = (v + a·dt/2)·damping`.
pub fn kick<T: Real>(velocities: &mut [[T; 4]], accelerations: &[[T; 4]], dt: f64, damping: f64) {
    let (half, damping) = (T::from_f64(dt * 0.5), T::from_f64(damping));
    velocities.par_iter_mut().zip(accelerations.par_iter()).for_each(|(v, a)| {
        for axis in 0..3 {
            v[axis] = (v[axis] + a[axis] * half) * damping;
        }
    });
}

/// One full step from `positions_in` into `positions_out`; `accelerations` must hold a(x_in)
/// (from [`accelerations`]) and hold a(x_out) afterwards.
pub fn step<T: Real>(
    positions_in: &[[T; 4]],
    positions_out: &mut [[T; 4]],
    velocities: &mut [[T; 4]],
    accelerations_now: &mut [[T; 4]],
    params: &Params,
    scratch: &mut Scratch<T>,
) {
    drift(positions_in, positions_out, velocities, accelerations_now, params.dt);
    accelerations(positions_out, params, scratch, accelerations_now);
    kick(velocities, accelerations_now, params.dt, params.damping);
}

/// Kinetic and potential energy in f64 (the pair potential −G m_i m_j / √(r² + ε²) matches the
/// softened force).
pub fn energy<T: Real>(positions: &[[T; 4]], velocities: &[[T; 4]], params: &Params) -> (f64, f64) {
    let softening2 = params.softening * params.softening;
    let kinetic: f64 = positions
        .par_iter()
        .zip(velocities.par_iter())
        .map(|(p, v)| {
            let (vx, vy, vz) = (v[0].to_f64(), v[1].to_f64(), v[2].to_f64());
            0.5 * p[3].to_f64() * (vx * vx + vy * vy + vz * vz)
        })
        .sum();
    let potential: f64 = positions
        .par_iter()
        .enumerate()
        .map(|(i, a)| {
            let mut sum = 0.0;
            for (j, b) in positions.iter().enumerate().skip(i + 1) {
                debug_assert!(j > i);
                let dx = b[0].to_f64() - a[0].to_f64();
                let dy = b[1].to_f64() - a[1].to_f64();
                let dz = b[2].to_f64() - a[2].to_f64();
                sum -= b[3].to_f64() / (dx * dx + dy * dy + dz * dz + softening2).sqrt();
            }
            sum * a[3].to_f64()
        })
        .sum();
    (kinetic, potential * params.gravity)
}

/// The reference: `steps` KDK steps in plain f64, one body at a time, no SIMD, no threads.
pub fn reference_steps(bodies: &Bodies, params: &Params, steps: usize) -> Bodies {
    let n = bodies.len();
    let softening2 = params.softening * params.softening;
    let acceleration_of = |positions: &[[f64; 4]]| -> Vec<[f64; 3]> {
        (0..n)
            .map(|i| {
                let mut a = [0.0; 3];
                for j in 0..n {
                    let d = [
                        positions[j][0] - positions[i][0],
                        positions[j][1] - positions[i][1],
                        positions[j][2] - positions[i][2],
                    ];
                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + softening2;
                    let s = params.gravity * positions[j][3] / (r2 * r2.sqrt());
                    for axis in 0..3 {
                        a[axis] += d[axis] * s;
                    }
                }
                a
            })
            .collect()
    };
    let mut positions = bodies.positions.clone();
    let mut velocities = bodies.velocities.clone();
    let mut acceleration = acceleration_of(&positions);
    for _ in 0..steps {
        for i in 0..n {
            for axis in 0..3 {
                velocities[i][axis] += acceleration[i][axis] * params.dt * 0.5;
                positions[i][axis] += velocities[i][axis] * params.dt;
            }
        }
        acceleration = acceleration_of(&positions);
        for i in 0..n {
            for axis in 0..3 {
                velocities[i][axis] = (velocities[i][axis] + acceleration[i][axis] * params.dt * 0.5) * params.damping;
            }
        }
    }
    Bodies { positions, velocities }
}

/// `‖a − b‖₂ / ‖b‖₂` over the first three components of each row; NaN if anything is NaN.
pub fn relative_error<const A: usize, const B: usize>(a: &[[f64; A]], b: &[[f64; B]]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    let (mut difference, mut norm) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        for axis in 0..3 {
            difference += (x[axis] - y[axis]).powi(2);
            norm += y[axis] * y[axis];
        }
    }
    (difference / norm).sqrt()
}

/// Runs `steps` steps of the CPU integrator in precision `T` from `bodies`; returns the result in f64.
pub fn simulate<T: Real>(bodies: &Bodies, params: &Params, steps: usize) -> Bodies {
    let to_t = |row: [f64; 4]| row.map(T::from_f64);
    let mut positions: Vec<[T; 4]> = bodies.positions.iter().map(|&p| to_t(p)).collect();
    let mut next = positions.clone();
    let mut velocities: Vec<[T; 4]> = bodies.velocities.iter().map(|v| to_t([v[0], v[1], v[2], 0.0])).collect();
    let mut acceleration = vec![[T::ZERO; 4]; bodies.len()];
    let mut scratch = Scratch::default();
    accelerations(&positions, params, &mut scratch, &mut acceleration);
    for _ in 0..steps {
        step(&positions, &mut next, &mut velocities, &mut acceleration, params, &mut scratch);
        std::mem::swap(&mut positions, &mut next);
    }
    Bodies {
        positions: positions.iter().map(|p| p.map(T::to_f64)).collect(),
        velocities: velocities.iter().map(|v| [v[0].to_f64(), v[1].to_f64(), v[2].to_f64()]).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::nbody::presets::Preset;

    fn params() -> Params {
        Params { dt: 0.002, softening: 0.05, gravity: 1.0, damping: 1.0 }
    }

    #[test]
    fn cpu_integrator_matches_the_f64_reference() {
        // Fresh random bodies each run (the seed is printed).
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(3);
        eprintln!("seed {seed}");
        let bodies = Preset::Plummer.generate(509, seed);
        for steps in [1, 100] {
            let reference = reference_steps(&bodies, &params(), steps);
            let f64_run = simulate::<f64>(&bodies, &params(), steps);
            let f32_run = simulate::<f32>(&bodies, &params(), steps);
            let e64 = (
                relative_error(&f64_run.positions, &reference.positions),
                relative_error(&f64_run.velocities, &reference.velocities),
            );
            let e32 = (
                relative_error(&f32_run.positions, &reference.positions),
                relative_error(&f32_run.velocities, &reference.velocities),
            );
            // f64 differs from the reference only by summation order: ~1e-15 per step.
            assert!(e64.0 < 1e-12 && e64.1 < 1e-12, "{steps} steps, f64: {e64:?}");
            // f32: positions carry ~6e-8 rounding; velocities the f32 sums of 509 terms (≲ 1e-6 each
            // step), compounding over 100 steps of a smooth Plummer sphere.
            let bound = if steps == 1 { (1e-6, 1e-5) } else { (1e-5, 1e-4) };
            assert!(e32.0 < bound.0 && e32.1 < bound.1, "{steps} steps, f32: {e32:?} (bounds {bound:?})");
        }
    }

    #[test]
    fn a_pass_in_bands_is_the_whole_pass_and_stops_between_bands_when_asked() {
        let bodies = Preset::Plummer.generate(1000, 7);
        let positions: Vec<[f64; 4]> = bodies.positions.clone();
        let mut scratch = Scratch::default();
        let mut whole = vec![[0.0; 4]; positions.len()];
        accelerations(&positions, &params(), &mut scratch, &mut whole);
        let mut banded = vec![[f64::NAN; 4]; positions.len()];
        let mut asked = 0;
        let ran = accelerations_in_bands(&positions, &params(), &mut scratch, &mut banded, 100, || {
            asked += 1;
            true
        });
        assert!(ran);
        assert_eq!(banded, whole, "the same sums in the same order");
        assert_eq!(asked, 7, "bands of 128 bodies (whole tasks of 32): asked before each but the first");
        let mut stopped = vec![[f64::NAN; 4]; positions.len()];
        let ran = accelerations_in_bands(&positions, &params(), &mut scratch, &mut stopped, 100, || false);
        assert!(!ran, "a pass cut short says so");
        assert_eq!(stopped[..128], whole[..128], "the first band ran");
        assert!(stopped[128..].iter().flatten().all(|v| v.is_nan()), "no band after the no");
    }

    #[test]
    fn momentum_is_conserved_to_rounding() {
        let bodies = Preset::Collision.generate(300, 77);
        let p0 = bodies.momentum();
        let after = simulate::<f64>(&bodies, &params(), 100);
        let p1 = after.momentum();
        // Scale: Σ m|v|; pairwise forces cancel exactly only up to rounding.
        let scale: f64 = after
            .positions
            .iter()
            .zip(&after.velocities)
            .map(|(p, v)| p[3] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt())
            .sum();
        for axis in 0..3 {
            assert!((p1[axis] - p0[axis]).abs() < 1e-13 * scale, "axis {axis}: {} -> {}", p0[axis], p1[axis]);
        }
        let after32 = simulate::<f32>(&bodies, &params(), 100);
        let p32 = after32.momentum();
        for axis in 0..3 {
            assert!((p32[axis] - p0[axis]).abs() < 1e-5 * scale, "f32 axis {axis}: {} -> {}", p0[axis], p32[axis]);
        }
    }

    #[test]
    fn two_body_circular_orbit_closes_after_one_period() {
        let (bodies, params, steps) = two_body_orbit(2000);
        for result in [
            reference_steps(&bodies, &params, steps),
            simulate::<f64>(&bodies, &params, steps),
            simulate::<f32>(&bodies, &params, steps),
        ] {
            let error = relative_error(&result.positions, &bodies.positions);
            // Leapfrog's phase error after one orbit is ~ (ω·dt)²·π/12·2π ≈ 1e-5 at 2000 steps.
            assert!(error < 1e-4, "orbit does not close: {error:e}");
        }
    }

    /// Two bodies of mass ½ at distance 1 on a circular orbit (softening included in ω), and the
    /// number of steps of one period with `steps` steps per orbit.
    pub fn two_body_orbit(steps: usize) -> (Bodies, Params, usize) {
        let softening: f64 = 1e-3;
        let separation: f64 = 1.0;
        // Relative acceleration G·M·d / (d² + ε²)^{3/2} = ω²·d.
        let omega = (1.0 / (separation * separation + softening * softening).powf(1.5)).sqrt();
        let speed = omega * separation / 2.0;
        let bodies = Bodies {
            positions: vec![[0.5, 0.0, 0.0, 0.5], [-0.5, 0.0, 0.0, 0.5]],
            velocities: vec![[0.0, 0.0, speed], [0.0, 0.0, -speed]],
        };
        let period = std::f64::consts::TAU / omega;
        (bodies, Params { dt: period / steps as f64, softening, gravity: 1.0, damping: 1.0 }, steps)
    }

    #[test]
    fn energy_is_conserved_by_the_integrator() {
        let bodies = Preset::Plummer.generate(400, 5);
        let params = Params { dt: 0.001, ..params() };
        let to32 = |b: &Bodies| -> (Vec<[f64; 4]>, Vec<[f64; 4]>) {
            (b.positions.clone(), b.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect())
        };
        let (p0, v0) = to32(&bodies);
        let (k0, w0) = energy(&p0, &v0, &params);
        let after = simulate::<f64>(&bodies, &params, 200);
        let (p1, v1) = to32(&after);
        let (k1, w1) = energy(&p1, &v1, &params);
        let drift = ((k1 + w1) - (k0 + w0)) / (k0 + w0).abs();
        assert!(drift.abs() < 1e-3, "energy drift {drift:e} over 200 steps");
        assert!(k0 > 0.0 && w0 < 0.0);
    }
}
