//! The blur filters on the CPU (what the CPU backend runs, f32 on all cores) and their f64
//! references (what the tests compare against). Borders clamp to the edge everywhere.
//!
//! The separable filters run line by line ([`blur_lines`]): the columns are filtered from the
//! source into one RGBA32F plane, then each output row is gathered from it, filtered and written.
//! The naive filter ([`naive_rows`]) reads the source as floats from the same plane. That plane
//! ([`Planes`], 16 bytes a pixel, kept between frames) is all the image-sized memory they take;
//! each thread adds a few lines of its own, so more cores add lines, not images.

mod filters;
mod lines;
mod recursive_gaussian;
mod references;
mod weights;

use rayon::prelude::*;

pub use self::filters::{boxes, gaussian, naive, recursive};
pub use self::lines::{Line, Planes, blur_lines, naive_rows};
pub use self::recursive_gaussian::{MIN_RECURSIVE_SIGMA, RecursiveGaussian};
pub use self::references::{reference_boxes, reference_gaussian, reference_recursive};
pub use self::weights::{box_radii, default_radius, gaussian_weights};

/// An RGBA image as floats (RGBA8 images hold 0..=255, RGBA32F images their own values), rows
/// top first.
#[derive(Debug, Clone, PartialEq)]
pub struct Image<T> {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// width × height pixels.
    pub pixels: Vec<[T; 4]>,
}

impl<T: Copy + Default + Send + Sync> Image<T> {
    /// An image of `width × height` default pixels.
    pub fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: vec![[T::default(); 4]; width * height] }
    }

    /// The image with rows and columns swapped.
    pub fn transposed(&self) -> Self {
        let mut out = Self::new(self.height, self.width);
        out.pixels.par_chunks_mut(self.height.max(1)).enumerate().for_each(|(x, row)| {
            for (y, pixel) in row.iter_mut().enumerate() {
                *pixel = self.pixels[y * self.width + x];
            }
        });
        out
    }
}

/// Rounds 0..=255 floats to bytes the way the GPU does (nearest, ties to even, clamped).
pub fn to_bytes(value: f32) -> u8 {
    value.clamp(0.0, 255.0).round_ties_even() as u8
}

#[cfg(test)]
mod tests;
