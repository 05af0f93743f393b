//! The recursive filter's two forms against each other, and the recursive launches' segments
//! and shared memory against the device's limits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

use super::super::cpu::RecursiveGaussian;
use super::*;

/// Runs one walker of the kernel's recursion over `line` in f64 with the coefficients as the
/// kernel gets them, in either form, from the steady state of the first sample; returns its
/// share of each output.
fn walk(params: &RecursiveParams, backward: bool, pair: bool, line: &[f64]) -> Vec<f64> {
    let f = |v: f32| f64::from(v);
    let edge = line[0];
    let (mut real, mut re, mut im) = (f(params.steady) * edge, f(params.steady_re) * edge, f(params.steady_im) * edge);
    let (mut v1, mut v2) = (f(params.pair_steady) * edge, f(params.pair_steady) * edge);
    let weight = if backward { f(params.anti) } else { f(params.causal) };
    let (weight_re, weight_im) =
        if backward { (f(params.anti_re), f(params.anti_im)) } else { (f(params.causal_re), f(params.causal_im)) };
    let (g0, g1) =
        if backward { (f(params.anti_g0), f(params.anti_g1)) } else { (f(params.causal_g0), f(params.causal_g1)) };
    let (pole, pr, pi) = (f(params.pole), f(params.pole_re), f(params.pole_im));
    let (a1, a2) = (f(params.pair_a1), f(params.pair_a2));
    line.iter()
        .map(|&x| {
            real = pole * real + x;
            if pair {
                let v = a1 * v1 + a2 * v2 + x;
                (v2, v1) = (v1, v);
                weight * real + g0 * v1 + g1 * v2
            } else {
                (re, im) = (pr * re - pi * im + x, pr * im + pi * re);
                weight * real + weight_re * re - weight_im * im
            }
        })
        .collect()
}

#[test]
fn the_pair_form_walks_the_same_filter_as_the_complex_form() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let line: Vec<f64> = (0..600)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 256) as f64
        })
        .collect();
    for sigma in [4.0, 10.0, 25.0, 40.0, 60.0, 90.0, 100.0] {
        let params = RecursiveParams::new(&RecursiveGaussian::new(sigma), PixelFormat::Rgba8, 128);
        assert!(uses_pair_form(PixelFormat::Rgba8, sigma), "σ {sigma}");
        for backward in [false, true] {
            let complex = walk(&params, backward, false, &line);
            let pair = walk(&params, backward, true, &line);
            let worst = complex.iter().zip(&pair).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            // Both from the same f64 poles, rounded to f32 differently. The pair's DC gain
            // 1 / (1 − a1 − a2) is sensitive to that rounding as σ grows: 2e-3 of a level at
            // σ = 90, 5e-3 to 1.3e-2 between σ = 110 and 200, hence the form's σ limit.
            assert!(worst < 5e-3, "σ {sigma} backward {backward}: {worst} levels apart");
            assert!(complex.iter().all(|v| v.is_finite()));
        }
    }
    assert!(!uses_pair_form(PixelFormat::Rgba8, 101.0));
    assert!(!uses_pair_form(PixelFormat::Rgba32f, 10.0));
}

/// H200-like limits (227 KiB of shared memory per block with opt-in).
const LIMITS: DeviceLimits = DeviceLimits {
    max_threads_per_block: 1024,
    max_block_dim: [1024, 1024, 64],
    max_grid_dim: [2_147_483_647, 65535, 65535],
    shared_memory_per_block_optin: 232_448,
};

fn job(block: [u32; 2], segment: Option<u32>) -> Job {
    Job {
        filter: Filter::Recursive,
        size: [3840, 2160],
        radius: 30,
        box_radii: [1; 4],
        recursive: RecursiveGaussian::new(10.0),
        block,
        segment,
    }
}

fn check(format: PixelFormat, block: [u32; 2], segment: Option<u32>) -> Result<()> {
    let attributes = FunctionAttributes { max_threads_per_block: 1024, ..Default::default() };
    validate_job(format, 5, &LIMITS, [&attributes, &attributes], &job(block, segment))
}

#[test]
fn segments_must_be_powers_of_two_of_at_least_two_chunks() {
    for segment in [32, 64, 128, 256, 512, 1 << 20] {
        assert!(check_recursive_segment(PixelFormat::Rgba8, segment).is_ok(), "{segment}");
    }
    assert!(check_recursive_segment(PixelFormat::Rgba32f, 16).is_ok());
    for (format, segment) in [
        (PixelFormat::Rgba8, 0),
        (PixelFormat::Rgba8, 16),
        (PixelFormat::Rgba8, 48),
        (PixelFormat::Rgba8, 100),
        (PixelFormat::Rgba32f, 8),
        (PixelFormat::Rgba32f, 24),
        (PixelFormat::Rgba8, u32::MAX),
    ] {
        let message = check_recursive_segment(format, segment).unwrap_err().to_string();
        assert!(message.contains(&format!("--segment {segment}")), "{message}");
        assert!(message.contains("power of two"), "{message}");
        let smallest = smallest_recursive_segment(format);
        assert!(message.contains(&format!("at least {smallest}")), "{message}");
        assert!(check(format, [64, 2], Some(segment)).is_err(), "the launch check refuses {segment} too");
    }
}

#[test]
fn the_automatic_segment_is_unchanged_and_fits_the_budget() {
    // segment × (threads/2 + 1) × 8 bytes ≤ 72 KiB for RGBA8.
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 4]), 64);
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 2]), 128);
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [32, 4]), 128);
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 1]), 256);
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba32f, [64, 2]), 64);
    assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [1024, 1]), 32, "never below two chunks");
    let launches = launches(PixelFormat::Rgba8, 5, &job([64, 2], None));
    assert_eq!(launches[0].grid, [3840 / 64, 2160u32.div_ceil(128), 1]);
    assert_eq!(launches[0].shared_memory_bytes, 128 * 65 * 8);
    assert_eq!(launches[1].grid, [2160u32.div_ceil(64), 3840 / 128, 1]);
}

#[test]
fn a_segment_set_by_hand_is_used_and_its_shared_memory_checked() {
    let launches = launches(PixelFormat::Rgba8, 5, &job([64, 4], Some(256)));
    assert_eq!(launches[0].shared_memory_bytes, 256 * 129 * 8);
    assert_eq!(launches[0].grid[1], 2160u32.div_ceil(256));
    assert!(check(PixelFormat::Rgba8, [64, 4], Some(128)).is_ok());
    assert!(check(PixelFormat::Rgba8, [64, 2], Some(256)).is_ok(), "beyond the budget, within the device");
    // 512 × 129 × 8 = 528384 bytes: more than a block can have.
    let message = check(PixelFormat::Rgba8, [64, 4], Some(512)).unwrap_err().to_string();
    assert!(message.contains("shared memory") && message.contains("528384 bytes"), "{message}");
    assert!(message.contains("lower --segment") && message.contains("fewer threads per block"), "{message}");
    assert!(message.contains("set by --segment"), "{message}");
}
