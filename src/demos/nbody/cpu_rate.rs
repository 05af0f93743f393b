//! How fast this machine's CPU computes n-body interactions, and so how many bodies the window
//! takes on the CPU backend: a limit measured in CPU time and rounded to a coarse rung, so that it
//! is the same from run to run. Offscreen runs have no limit.

use super::cpu::{Params, Real, Scratch, accelerations};
use super::tree::Method;

/// The longest CPU step the window accepts, seconds: it answers input between steps, so a step
/// longer than this would leave it unresponsive. Offscreen runs have no such limit.
pub const MAX_STEP_SECONDS: f64 = 0.5;

/// The share of [`machine_rate`] the window's limit counts on, so that a step stays within
/// [`MAX_STEP_SECONDS`] where the cores do not share the work perfectly or other work takes a
/// little of them.
pub const RATE_MARGIN: f64 = 0.8;

/// Bodies the window always takes on the CPU: well under a tenth of a second a step on any CPU
/// the app runs on, so no rate is measured for them.
pub const ALWAYS_TAKEN: u32 = 8192;

/// Body-body interactions per second this machine's CPU computes in precision `T` now, timed by
/// the wall clock on a small problem (a few milliseconds): what a run gets with whatever else the
/// machine is doing (a benchmark's plan).
pub fn measured_rate<T: Real>() -> f64 {
    let (interactions, timings) = timed_passes::<T>(1);
    interactions / timings.iter().map(|timing| timing.wall).fold(f64::INFINITY, f64::min).max(1e-9)
}

/// Body-body interactions per second this machine's CPU computes in precision `T` with all its
/// cores: the best of five passes, each timed in the CPU time its threads ran (per thread), so
/// that other programs' work, which only delays the passes, does not move it. Where the kernel
/// does not report thread times, the best of the five by the wall clock.
pub fn machine_rate<T: Real>() -> f64 {
    let (interactions, timings) = timed_passes::<T>(5);
    let threads = rayon::current_num_threads().max(1) as f64;
    let per_pass = |timing: &PassTiming| timing.cpu.map(|cpu| cpu / threads);
    let seconds = match timings.iter().map(per_pass).collect::<Option<Vec<f64>>>() {
        Some(cpu) => cpu.into_iter().fold(f64::INFINITY, f64::min),
        None => timings.iter().map(|timing| timing.wall).fold(f64::INFINITY, f64::min),
    };
    interactions / seconds.max(1e-9)
}

/// One accelerations pass: wall-clock seconds, and the CPU seconds this process's threads ran.
struct PassTiming {
    wall: f64,
    cpu: Option<f64>,
}

/// `passes` accelerations passes of 2,048 bodies after a warm-up, each timed; with the
/// interactions one pass computes.
fn timed_passes<T: Real>(passes: usize) -> (f64, Vec<PassTiming>) {
    const BODIES: usize = 2048;
    let positions: Vec<[T; 4]> = (0..BODIES)
        .map(|i| {
            let t = i as f64;
            [(t * 0.37).sin(), (t * 0.73).cos(), (t * 0.11).sin(), 1.0 / BODIES as f64].map(T::from_f64)
        })
        .collect();
    let params = Params { dt: 0.01, softening: 0.05, gravity: 1.0, damping: 1.0 };
    let (mut scratch, mut out) = (Scratch::default(), vec![[T::ZERO; 4]; BODIES]);
    accelerations(&positions, &params, &mut scratch, &mut out); // warm-up: threads, pages
    let timings = (0..passes)
        .map(|_| {
            let cpu_before = process_cpu_seconds();
            let started = std::time::Instant::now();
            accelerations(&positions, &params, &mut scratch, &mut out);
            let wall = started.elapsed().as_secs_f64();
            let cpu = cpu_before.zip(process_cpu_seconds()).map(|(before, after)| after - before);
            PassTiming { wall, cpu }
        })
        .collect();
    ((BODIES * BODIES) as f64, timings)
}

/// CPU seconds all of this process's threads have run (Linux's per-thread `schedstat`, in
/// nanoseconds); `None` where the kernel does not keep it.
fn process_cpu_seconds() -> Option<f64> {
    let mut nanoseconds = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        nanoseconds += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(nanoseconds as f64 * 1e-9)
}

/// What one step of `n` bodies costs on the CPU, in all-pairs interactions: n² for all-pairs;
/// for the tree (its build, then a few hundred node interactions a body, each with the
/// quadrupole) about 10,000 a body at 16,384 bodies, growing with log N. Measured on 2 cores at
/// θ 0.35 against all-pairs' pass: 10,150 a body at 16,384 bodies (316 ms against 510 ms), 4,800 at
/// 65,536 and 7,900 at 262,144 (all-pairs there extrapolated by N²); the model takes the
/// highest, so a window it accepts steps in time.
pub fn step_interactions(n: f64, method: Method) -> f64 {
    match method {
        Method::AllPairs => n * n,
        Method::Tree => n * (10_000.0 + 1_500.0 * (n / 16_384.0).log2().max(0.0)),
    }
}

/// The most bodies the window takes on the CPU backend of a machine that computes `rate`
/// interactions a second with `method`: the count whose step ([`step_interactions`]) takes
/// [`MAX_STEP_SECONDS`] at [`RATE_MARGIN`] of the rate, rounded down to a rung of a ladder of half
/// octaves (8192, 12288, 16384, 24576, …), never below [`ALWAYS_TAKEN`] or above
/// [`MAX_BODIES`](super::MAX_BODIES). The rungs are far apart (a rate must change by 1.8× to 2.3×
/// to move one for all-pairs), so the small differences between one measurement and the next
/// give the same limit.
pub fn window_body_limit(rate: f64, method: Method) -> u32 {
    let budget = MAX_STEP_SECONDS * rate * RATE_MARGIN;
    let mut limit = ALWAYS_TAKEN;
    loop {
        // The next rung: 2^k → 1.5·2^k → 2^(k+1).
        let next = if limit.is_power_of_two() { limit / 2 * 3 } else { limit / 3 * 4 };
        if next > super::MAX_BODIES || budget.is_nan() || step_interactions(f64::from(next), method) > budget {
            return limit;
        }
        limit = next;
    }
}

/// Refuses a window on the CPU backend with more than [`window_body_limit`] bodies for this
/// machine's rate ([`machine_rate`]) and `method`, with the estimate and the fixes. Offscreen runs
/// are not checked: they do what they are asked, however slowly.
pub fn check_window_bodies(n: usize, double: bool, method: Method) -> crate::error::Result<()> {
    if n <= ALWAYS_TAKEN as usize {
        return Ok(());
    }
    let rate = if double { machine_rate::<f64>() } else { machine_rate::<f32>() };
    let limit = window_body_limit(rate, method);
    if n <= limit as usize {
        return Ok(());
    }
    let seconds = step_interactions(n as f64, method) / rate;
    Err(crate::error::Error::InvalidInput(format!(
        "{n} bodies on the CPU backend ({}): about {} per step on this machine ({rate:.2e} interactions/s, timed in \
         CPU time), and the window answers input only between steps; it takes up to {limit} bodies on this CPU with \
         this method (steps of at most {MAX_STEP_SECONDS} s, with a margin): use --bodies {limit} or fewer, \
         --headless (which runs any count, however slowly), or CUDA",
        method.name(),
        human_seconds(seconds)
    )))
}

fn human_seconds(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_body_limit_is_a_rung_whose_step_fits_the_budget_at_the_margin() {
        let rungs: Vec<u32> = (0..22).map(|k| [8192u32, 12288][k % 2] << (k / 2)).collect();
        for rate in (0..60).map(|i| 1e7 * 1.25f64.powi(i)) {
            for method in [Method::AllPairs, Method::Tree] {
                let limit = window_body_limit(rate, method);
                assert!(rungs.contains(&limit) || limit == crate::demos::nbody::MAX_BODIES, "{limit} at {rate:e}");
                let step = step_interactions(f64::from(limit), method) / (rate * RATE_MARGIN);
                assert!(limit == ALWAYS_TAKEN || step <= MAX_STEP_SECONDS, "{limit} bodies take {step} s at {rate:e}");
                assert!(window_body_limit(rate * 1.01, method) >= limit, "more speed never lowers the limit");
            }
        }
        assert_eq!(window_body_limit(1e30, Method::AllPairs), crate::demos::nbody::MAX_BODIES);
        for nothing in [0.0, -1.0, f64::NAN] {
            assert_eq!(window_body_limit(nothing, Method::AllPairs), ALWAYS_TAKEN);
            assert_eq!(window_body_limit(nothing, Method::Tree), ALWAYS_TAKEN);
        }
        // Ten million bodies are beyond any CPU's window with either method.
        assert!(window_body_limit(1e11, Method::Tree) < 10_000_000);
    }

    #[test]
    fn rates_that_differ_as_repeated_measurements_do_give_the_same_window_limit() {
        // The rates a rung takes run from its own step at the margin to the next rung's: a factor
        // of (next / rung)², 1.78 or 2.25. Around the middle of that band, measurements that are
        // 15% apart either way (as two runs on one busy machine are) land on the same rung.
        for (rung, next) in [(8192u32, 12288u32), (12288, 16384), (16384, 24576), (24576, 32768)] {
            let band = |n: u32| f64::from(n).powi(2) / (MAX_STEP_SECONDS * RATE_MARGIN);
            let middle = (band(rung) * band(next)).sqrt();
            for wobble in [0.85, 0.95, 1.0, 1.05, 1.15] {
                assert_eq!(window_body_limit(middle * wobble, Method::AllPairs), rung, "{wobble} × {middle:e}");
            }
        }
    }
}
