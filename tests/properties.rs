//! Property tests: launch-configuration checks against an independent statement of the limits,
//! invariants of the CPU references (a blur of a constant image is that constant; n-body steps
//! conserve momentum), and parsers that must answer every input with a value or an error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

use interop_lab::bench::transfer::parse_bytes;
use interop_lab::cuda::module::FunctionAttributes;
use interop_lab::cuda::{DeviceLimits, LaunchConfig};
use interop_lab::demos::blur::cpu::{self as blur, Image};
use interop_lab::demos::blur::kernels::{self, Filter, Job};
use interop_lab::demos::nbody::cpu::{self as nbody, Params};
use interop_lab::demos::nbody::presets::Bodies;
use interop_lab::demos::nbody::state::{self, SavedState};
use interop_lab::pixel::PixelFormat;
use proptest::prelude::*;

/// H200-like limits; the properties hold for any limits, these keep the numbers realistic.
const LIMITS: DeviceLimits = DeviceLimits {
    max_threads_per_block: 1024,
    max_block_dim: [1024, 1024, 64],
    max_grid_dim: [2_147_483_647, 65535, 65535],
    shared_memory_per_block_optin: 232_448,
};

fn attributes(max_threads: i32, static_shared: i32) -> FunctionAttributes {
    FunctionAttributes {
        max_threads_per_block: max_threads,
        registers: 32,
        static_shared_bytes: static_shared,
        max_dynamic_shared_bytes: 48 * 1024 - static_shared,
        local_bytes: 0,
        const_bytes: 0,
        ptx_version: 90,
        binary_version: 90,
    }
}

fn extent(limit: u32) -> impl Strategy<Value = u32> {
    // Mostly in range, with zeros and values just past the limit mixed in.
    prop_oneof![4 => 1..=limit, 1 => Just(0u32), 1 => limit..=limit.saturating_add(8)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A configuration is accepted exactly when every limit, stated here independently, holds.
    #[test]
    fn launch_validation_accepts_exactly_what_the_limits_allow(
        bx in extent(1024), by in extent(1024), bz in extent(64),
        gx in extent(4096), gy in extent(65535), gz in extent(65535),
        shared in prop_oneof![0u32..=64 * 1024, 200_000u32..=240_000],
        kernel_threads in prop_oneof![Just(1024), 128..=1024i32],
        static_shared in 0..=16 * 1024i32,
    ) {
        let config = LaunchConfig { grid: [gx, gy, gz], block: [bx, by, bz], shared_memory_bytes: shared };
        let function = attributes(kernel_threads, static_shared);
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        let fits = [bx, by, bz, gx, gy, gz].iter().all(|&e| e > 0)
            && bx <= 1024 && by <= 1024 && bz <= 64
            && gy <= 65535 && gz <= 65535
            && threads <= 1024
            && threads <= kernel_threads as u64
            && i64::from(shared) + i64::from(static_shared) <= 232_448;
        let verdict = config.validate(&LIMITS, &function);
        prop_assert_eq!(verdict.is_ok(), fits, "{:?} → {:?}", config, verdict);
        if let Err(error) = verdict {
            prop_assert!(!error.to_string().is_empty());
        }
    }

    /// Every filter of a constant image gives back the constant (weights sum to one, edges clamp).
    #[test]
    fn blurring_a_constant_image_leaves_it_unchanged(
        width in 1usize..48, height in 1usize..48,
        value in 0.0f32..=1.0, sigma in 0.5f64..12.0,
    ) {
        let mut image = Image::<f32>::new(width, height);
        for pixel in &mut image.pixels {
            *pixel = [value; 4];
        }
        let radius = blur::default_radius(sigma);
        let weights: Vec<f32> = blur::gaussian_weights(sigma, radius).iter().map(|&w| w as f32).collect();
        let (radii, _) = blur::box_radii(sigma);
        for (name, out) in [
            ("separable", blur::gaussian(&image, &weights)),
            ("naive", blur::naive(&image, &weights)),
            ("boxes", blur::boxes(&image, radii)),
            ("recursive", blur::recursive(&image, &blur::RecursiveGaussian::new(sigma.max(blur::MIN_RECURSIVE_SIGMA)))),
        ] {
            prop_assert_eq!((out.width, out.height), (width, height));
            for pixel in &out.pixels {
                for &channel in pixel {
                    prop_assert!((channel - value).abs() <= 2e-6 * (1.0 + radius as f32), "{} gave {} for {}", name, channel, value);
                }
            }
        }
        let mut exact = Image::<f64>::new(width, height);
        for pixel in &mut exact.pixels {
            *pixel = [f64::from(value); 4];
        }
        let reference = blur::reference_gaussian(&exact, &blur::gaussian_weights(sigma, radius));
        prop_assert!(reference.pixels.iter().flatten().all(|&c| (c - f64::from(value)).abs() < 1e-12));
    }

    /// The recursive filter's launch check accepts a block and segment exactly when, stated here
    /// independently: threads are a multiple of 64 and at most 1024, the segment (when set) is a
    /// power of two of at least two chunks (32 rows for RGBA8, 16 for RGBA32F), and
    /// segment × (threads/2 + 1) slots of 8 or 16 bytes fit the opt-in shared memory. When unset,
    /// the automatic segment is always one a user could set, within a 72 KiB budget unless
    /// already at its shortest.
    #[test]
    fn recursive_segments_are_accepted_exactly_when_they_can_run(
        bx in prop_oneof![Just(32u32), Just(64), Just(128), 1u32..=1024],
        by in prop_oneof![Just(1u32), Just(2), Just(4), Just(8), 1u32..=64],
        segment in prop_oneof![
            3 => (0u32..=12).prop_map(|k| 1u32 << k),
            1 => any::<u32>(),
            1 => Just(0u32),
            1 => Just(48u32),
            1 => Just(u32::MAX),
        ],
        set in any::<bool>(),
        f32_format in any::<bool>(),
    ) {
        let format = if f32_format { PixelFormat::Rgba32f } else { PixelFormat::Rgba8 };
        let (smallest, slot) = if f32_format { (16u64, 16u64) } else { (32, 8) };
        let job = Job {
            filter: Filter::Recursive,
            size: [1920, 1080],
            radius: 30,
            box_radii: [1; 4],
            recursive: blur::RecursiveGaussian::new(10.0),
            block: [bx, by],
            segment: set.then_some(segment),
        };
        let function = attributes(1024, 0);
        let verdict = kernels::validate_job(format, 5, &LIMITS, [&function, &function], &job);
        let threads = u64::from(bx) * u64::from(by);
        let rows = if set { u64::from(segment) } else { u64::from(kernels::auto_recursive_segment(format, [bx, by])) };
        let shared = rows * (threads / 2 + 1) * slot;
        let fits = threads % 64 == 0
            && threads <= 1024
            && rows.is_power_of_two()
            && rows >= smallest
            && shared <= 232_448;
        prop_assert_eq!(verdict.is_ok(), fits, "{}x{} segment {:?} {:?} → {:?}", bx, by, job.segment, format, verdict);
        if threads % 64 == 0 && threads <= 1024 && !set {
            prop_assert!(kernels::check_recursive_segment(format, rows as u32).is_ok());
            prop_assert!(shared <= 72 * 1024 || rows == smallest, "auto {} rows take {} bytes", rows, shared);
        }
        if let Err(error) = verdict {
            let message = error.to_string();
            if threads % 64 == 0 && threads <= 1024 && rows.is_power_of_two() && rows >= smallest {
                prop_assert!(message.contains("lower --segment") || rows == smallest, "{}", message);
                prop_assert!(message.contains("fewer threads per block"), "{}", message);
            }
        }
    }
}

fn random_bodies() -> impl Strategy<Value = Bodies> {
    (2usize..24).prop_flat_map(|n| {
        (
            proptest::collection::vec((-2.0f64..2.0, -2.0f64..2.0, -2.0f64..2.0, 0.01f64..1.0), n),
            proptest::collection::vec((-0.5f64..0.5, -0.5f64..0.5, -0.5f64..0.5), n),
        )
            .prop_map(|(p, v)| Bodies {
                positions: p.into_iter().map(|(x, y, z, m)| [x, y, z, m]).collect(),
                velocities: v.into_iter().map(|(x, y, z)| [x, y, z]).collect(),
            })
    })
}

fn momentum(bodies: &Bodies) -> ([f64; 3], f64) {
    let mut total = [0.0; 3];
    let mut scale = 0.0;
    for (p, v) in bodies.positions.iter().zip(&bodies.velocities) {
        for axis in 0..3 {
            total[axis] += p[3] * v[axis];
            scale += (p[3] * v[axis]).abs();
        }
    }
    (total, scale)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Pairwise forces are equal and opposite, so undamped steps keep total momentum, in the f64
    /// reference and in the integrator the CPU backend runs (f64 build).
    #[test]
    fn undamped_steps_conserve_momentum(
        bodies in random_bodies(), steps in 1usize..20,
        dt in 0.001f64..0.02, softening in 0.05f64..0.5, gravity in 0.1f64..2.0,
    ) {
        let params = Params { dt, softening, gravity, damping: 1.0 };
        let (before, before_scale) = momentum(&bodies);
        for (name, after) in [
            ("reference", nbody::reference_steps(&bodies, &params, steps)),
            ("cpu f64", nbody::simulate::<f64>(&bodies, &params, steps)),
        ] {
            let (now, now_scale) = momentum(&after);
            let scale = before_scale.max(now_scale).max(1e-3);
            for axis in 0..3 {
                let drift = (now[axis] - before[axis]).abs() / scale;
                prop_assert!(drift < 1e-10, "{}: momentum {} moved by {:e} of its scale", name, axis, drift);
            }
        }
    }

    /// A saved state reads back as it was.
    #[test]
    fn state_files_round_trip(bodies in random_bodies(), step in any::<u64>(), dt in 1e-5f64..1.0) {
        let saved = SavedState { bodies, params: Params { dt, softening: 0.1, gravity: 1.0, damping: 1.0 }, step };
        prop_assert_eq!(state::decode(&state::encode(&saved)), Ok(saved));
    }

    /// A damaged state file is answered with a value or a message, never a panic; a truncated one
    /// is always refused.
    #[test]
    fn damaged_state_files_never_panic(
        bodies in random_bodies(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        let saved = SavedState { bodies, params: Params { dt: 0.01, softening: 0.1, gravity: 1.0, damping: 1.0 }, step: 3 };
        let mut bytes = state::encode(&saved);
        for (at, value) in flips {
            let at = at % bytes.len();
            bytes[at] ^= value;
        }
        let _ = state::decode(&bytes);
        let cut = cut % bytes.len();
        let truncated = state::decode(&bytes[..cut]);
        prop_assert!(truncated.is_err(), "{} of {} bytes accepted", cut, bytes.len());
    }

    /// Sizes parse to what they say, and any text gets an answer rather than a panic.
    #[test]
    fn byte_sizes_parse(value in 1usize..4096, unit in prop::sample::select(vec![("", 1usize), ("K", 1 << 10), ("M", 1 << 20)]), noise in ".{0,12}") {
        let bytes = value * unit.1;
        let parsed = parse_bytes(&format!("{value}{}", unit.0));
        if bytes % 4 == 0 {
            prop_assert_eq!(parsed, Ok(bytes));
        } else {
            prop_assert!(parsed.is_err());
        }
        let _ = parse_bytes(&noise);
    }
}
