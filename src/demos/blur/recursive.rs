//! The recursive filter's geometry on the GPU: its accuracy bound per format, when the
//! second-order (pair) form applies, how many rows a segment holds and what shared memory that
//! takes, and the coefficients a launch passes (from the exact recursion of `cpu`).

use super::cpu::RecursiveGaussian;
use crate::pixel::PixelFormat;
use crate::error::{Error, Result};

/// How far the recursive filter's warm-up may leave its result from the exact recursion, as a
/// fraction of the value range, per direction and pass: four such errors add up to at most
/// 0.1 of a level for RGBA8 and 4e-6 for RGBA32F.
pub fn recursive_tolerance(format: PixelFormat) -> f64 {
    match format {
        PixelFormat::Rgba8 => 1e-4,
        PixelFormat::Rgba32f => 1e-6,
    }
}

/// The largest σ at which the recursive filter runs its complex pole pair as one second-order
/// recursion (RGBA8 only). Its states grow as 1/|1 − p|², and its DC gain 1/(1 − a1 − a2) depends
/// ever more on the f32 rounding of a1 and a2: against the complex first-order form it moves one
/// direction's output by at most 2e-3 of a level up to σ = 100 (unit test), 1.3e-2 at σ = 200, and
/// an f32 model of its arithmetic loses 1e-3 of a level at σ = 100, 0.5 at σ = 1000. RGBA32F, and
/// larger σ, keep the first-order form.
pub const PAIR_FORM_MAX_SIGMA: f64 = 100.0;

/// Whether the recursive filter walks the pole pair as one second-order recursion (3 FMA per
/// channel and step instead of 5) for this format and σ.
pub fn uses_pair_form(format: PixelFormat, sigma: f64) -> bool {
    format == PixelFormat::Rgba8 && sigma <= PAIR_FORM_MAX_SIGMA
}

/// Shared memory the recursive filter's segment may take per block: at most this, so that at
/// least three blocks fit on an SM of 228 KiB.
const RECURSIVE_SHARED_BUDGET: u64 = 72 * 1024;

/// Steps the recursive kernels load ahead (RECURSIVE_CHUNK in blur.cu).
pub fn recursive_chunk(format: PixelFormat) -> u32 {
    match format {
        PixelFormat::Rgba8 => 16,
        PixelFormat::Rgba32f => 8,
    }
}

/// Bytes of one shared-memory slot of the recursive kernels (partial_sum in blur.cu).
pub fn recursive_slot_bytes(format: PixelFormat) -> u64 {
    match format {
        PixelFormat::Rgba8 => 8,
        PixelFormat::Rgba32f => 16,
    }
}

/// The shortest segment the recursive kernels take: two chunks (each half of a segment is walked
/// in whole chunks).
pub fn smallest_recursive_segment(format: PixelFormat) -> u32 {
    2 * recursive_chunk(format)
}

/// Checks a segment length (rows per segment, the recursive filter's tile) asked for by hand:
/// blur.cu splits a segment into two halves of whole RECURSIVE_CHUNK-row chunks and finds a
/// pixel's row with a bit mask, so it must be a power of two of at least two chunks (32 rows for
/// RGBA8, 16 for RGBA32F). Whether it fits in shared memory depends on the block and the device:
/// [`validate_job`](super::kernels::validate_job) checks that.
pub fn check_recursive_segment(format: PixelFormat, segment: u32) -> Result<()> {
    let smallest = smallest_recursive_segment(format);
    if segment == 0 || !segment.is_power_of_two() || segment < smallest {
        let mut examples: Vec<String> = (0..4).map(|i| (smallest << i).to_string()).collect();
        examples.push("…".to_owned());
        return Err(Error::InvalidInput(format!(
            "--segment {segment}: the recursive filter's segment (rows per segment) must be a power of two of at \
             least {smallest} for {} (two chunks of {} rows: each half of a segment is walked in whole chunks and \
             rows are found with a bit mask); use {}, or leave --segment out for the automatic choice",
            format.name(),
            recursive_chunk(format),
            examples.join(", ")
        )));
    }
    Ok(())
}

/// Rows per segment the recursive filter picks for `block` when none is set: the largest power
/// of two up to 256 whose shared memory (segment × (columns + 1) slots, columns = threads / 2)
/// stays within a budget that leaves room for three blocks per SM, and at least two chunks.
pub fn auto_recursive_segment(format: PixelFormat, block: [u32; 2]) -> u32 {
    let smallest = smallest_recursive_segment(format);
    let mut segment = 256u32;
    while segment > smallest && recursive_shared_bytes(format, block, segment) > RECURSIVE_SHARED_BUDGET {
        segment /= 2;
    }
    segment
}

/// Dynamic shared memory one block of the recursive kernels takes: segment × (threads/2 + 1)
/// slots.
pub fn recursive_shared_bytes(format: PixelFormat, block: [u32; 2], segment: u32) -> u64 {
    let columns = (u64::from(block[0]) * u64::from(block[1]) / 2).max(1);
    u64::from(segment) * (columns + 1) * recursive_slot_bytes(format)
}

/// The coefficients struct `Recursive` of blur.cu, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecursiveParams {
    pub(super) pole: f32,
    pub(super) pole_re: f32,
    pub(super) pole_im: f32,
    pub(super) causal: f32,
    pub(super) causal_re: f32,
    pub(super) causal_im: f32,
    pub(super) anti: f32,
    pub(super) anti_re: f32,
    pub(super) anti_im: f32,
    pub(super) steady: f32,
    pub(super) steady_re: f32,
    pub(super) steady_im: f32,
    pub(super) pair_a1: f32,
    pub(super) pair_a2: f32,
    pub(super) causal_g0: f32,
    pub(super) causal_g1: f32,
    pub(super) anti_g0: f32,
    pub(super) anti_g1: f32,
    pub(super) pair_steady: f32,
    /// Steps before the segment, rounded up to whole chunks: where each walker's loads start.
    pub warmup: i32,
    /// Rows per segment.
    pub segment: i32,
    /// Leading steps of the first chunk the walker does not compute (`warmup` less the steps
    /// the tolerance needs): it starts from the steady state of the pixel after them.
    pub skip: i32,
}

impl RecursiveParams {
    /// The kernel's coefficients for `filter`; the warm-up's loads start whole chunks before the
    /// segment, its arithmetic `skip` steps later.
    pub fn new(filter: &RecursiveGaussian, format: PixelFormat, segment: u32) -> Self {
        let chunk = recursive_chunk(format) as usize;
        let needed = filter.warmup(recursive_tolerance(format));
        let warmup = needed.div_ceil(chunk) * chunk;
        let (p, [pr, pi]) = (filter.real_pole, filter.complex_pole);
        let (c, [cr, ci]) = (filter.real_residue, filter.complex_residue);
        // The backward weights are c·p; the complex weights carry the conjugate's share (× 2).
        let (ar, ai) = (cr * pr - ci * pi, cr * pi + ci * pr);
        let norm = (1.0 - pr) * (1.0 - pr) + pi * pi;
        let magnitude = pr * pr + pi * pi;
        Self {
            pole: p as f32,
            pole_re: pr as f32,
            pole_im: pi as f32,
            causal: c as f32,
            causal_re: (2.0 * cr) as f32,
            causal_im: (2.0 * ci) as f32,
            anti: (c * p) as f32,
            anti_re: (2.0 * ar) as f32,
            anti_im: (2.0 * ai) as f32,
            steady: (1.0 / (1.0 - p)) as f32,
            steady_re: ((1.0 - pr) / norm) as f32,
            steady_im: (pi / norm) as f32,
            // v = x + 2 Re p · v₁ − |p|² v₂; the pair's share 2 Re(w·z) with z = v − conj(p)·v₁.
            pair_a1: (2.0 * pr) as f32,
            pair_a2: (-magnitude) as f32,
            causal_g0: (2.0 * cr) as f32,
            causal_g1: (-2.0 * (cr * pr + ci * pi)) as f32,
            anti_g0: (2.0 * ar) as f32,
            anti_g1: (-2.0 * (ar * pr + ai * pi)) as f32,
            pair_steady: (1.0 / norm) as f32,
            warmup: i32::try_from(warmup).unwrap_or(i32::MAX),
            segment: i32::try_from(segment).unwrap_or(i32::MAX),
            skip: i32::try_from(warmup - needed).unwrap_or(0),
        }
    }
}
