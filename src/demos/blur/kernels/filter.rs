//! The four filters: what each costs and which is fastest within the accuracy bound at a σ.

use serde::{Deserialize, Serialize};

use crate::pixel::PixelFormat;

/// The largest σ at which the recursive filter is held to the accuracy bound (and picked by auto).
pub const RECURSIVE_MAX_SIGMA: f64 = 100.0;

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// Full 2-D window per pixel: O(r²).
    Naive,
    /// Two 1-D Gaussian passes from shared-memory tiles: O(r).
    Separable,
    /// Two passes of a four-box cascade from prefix sums: O(1) in σ (approximate Gaussian).
    Box,
    /// Two passes of a recursive (IIR) Gaussian walking columns: O(1) in σ per output, plus a
    /// warm-up per segment that grows with σ (approximate Gaussian).
    Recursive,
}

impl Filter {
    /// Every filter, in menu order.
    pub const ALL: [Filter; 4] = [Filter::Separable, Filter::Recursive, Filter::Box, Filter::Naive];

    /// Whether the filter's cost and limits depend on the Gaussian's radius (the others ignore it).
    pub fn uses_radius(self) -> bool {
        matches!(self, Filter::Naive | Filter::Separable)
    }

    /// Threads per block the filter runs fastest with by default (4K RGBA8 on an H200: the
    /// recursive filter 133.4 µs at 64×2 against 145.6 µs at 64×4, σ = 10; the separable one is
    /// fastest at 64×4; docs/blur-performance.md).
    pub fn default_block(self) -> [u32; 2] {
        match self {
            Filter::Recursive => [64, 2],
            _ => [64, 4],
        }
    }

    /// The fastest filter whose accuracy bound (6 levels of 255 at most, 1.5 on average, against
    /// the sampled Gaussian) holds at `sigma`. Measured on an H200, 4K RGBA8
    /// (docs/blur-performance.md): at σ = 2 the separable filter takes 232 µs, the box cascade
    /// 444; at σ = 5 the recursive 123, separable 295, box 457; at σ = 100 recursive 297 (block
    /// 64×2), box 1529, separable 4973. The recursive filter holds the bound from σ = 4 to 100;
    /// beyond, its edges drift (up to 21 levels at σ 500 on small images: the CPU tests), and the
    /// box cascade, within bound up to σ 2000, is the fastest that holds it — on the GPU while its
    /// tile fits in shared memory (it stages 2·reach pixels a row; the blur demo falls back to the
    /// recursive filter beyond, and says so).
    pub fn fastest_for(sigma: f64) -> Filter {
        if sigma < super::super::cpu::MIN_RECURSIVE_SIGMA {
            Filter::Separable
        } else if sigma <= RECURSIVE_MAX_SIGMA {
            Filter::Recursive
        } else {
            Filter::Box
        }
    }

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Filter::Naive => "naive",
            Filter::Separable => "separable",
            Filter::Box => "box",
            Filter::Recursive => "recursive",
        }
    }
}

/// Bytes per pixel of the intermediate between the two passes: RGBA8 goes through value × 256 as
/// four 16-bit integers, RGBA32F through float4.
pub fn intermediate_bytes(filter: Filter, format: PixelFormat) -> usize {
    match (filter, format) {
        (Filter::Recursive, PixelFormat::Rgba8) => 8,
        _ => 16,
    }
}
