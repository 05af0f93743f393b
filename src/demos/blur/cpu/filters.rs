//! The CPU backend's filters on whole f32 images, on all cores (what the tests compare with the
//! references): the separable ones through [`blur_lines`], and the naive direct 2-D convolution.

use rayon::prelude::*;

use super::Image;
use super::lines::{Line, Planes, blur_lines, naive_row};
use super::recursive_gaussian::RecursiveGaussian;

/// Runs `line` over a whole float image (what the tests and the references compare).
fn through_lines(image: &Image<f32>, line: Line<'_>) -> Image<f32> {
    let mut out = Image::new(image.width, image.height);
    let width = image.width;
    blur_lines(
        image.width,
        image.height,
        line,
        |y, x, pixels| pixels.copy_from_slice(&image.pixels[y * width + x..][..pixels.len()]),
        &mut Planes::default(),
        &mut out.pixels,
        width,
        |line, out_row| out_row.copy_from_slice(line),
    );
    out
}

/// The recursive Gaussian for the CPU backend (on all cores; each line computed in f64).
pub fn recursive(image: &Image<f32>, filter: &RecursiveGaussian) -> Image<f32> {
    through_lines(image, Line::Recursive(filter))
}

/// f32 Gaussian blur on all cores (the CPU backend's separable filter).
pub fn gaussian(image: &Image<f32>, weights: &[f32]) -> Image<f32> {
    through_lines(image, Line::Gaussian(weights))
}

/// f32 four-box cascade on all cores, each box from a running sum.
pub fn boxes(image: &Image<f32>, radii: [u32; 4]) -> Image<f32> {
    through_lines(image, Line::Boxes(radii))
}

/// f32 direct 2-D convolution on all cores (the naive filter).
pub fn naive(image: &Image<f32>, weights: &[f32]) -> Image<f32> {
    let mut out = Image::new(image.width, image.height);
    out.pixels
        .par_chunks_mut(image.width.max(1))
        .enumerate()
        .for_each(|(y, row)| naive_row(&image.pixels, image.width, weights, y, row));
    out
}
