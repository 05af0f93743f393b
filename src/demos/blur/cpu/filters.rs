//! The CPU backend's filters on whole f32 images, on all cores: the separable ones through
//! [`blur_lines`], and the naive direct 2-D convolution.

use rayon::prelude::*;

use super::Image;
use super::lines::{Line, Planes, blur_lines};
use super::recursive_gaussian::RecursiveGaussian;

/// Runs `line` over a whole float image (what the tests and the references compare).
fn through_lines(image: &Image<f32>, line: Line<'_>) -> Image<f32> {
    let mut out = Image::new(image.width, image.height);
    let width = image.width;
    blur_lines(
        image.width,
        image.height,
        line,
        |y, row| row.copy_from_slice(&image.pixels[y * width..(y + 1) * width]),
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
    let radius = weights.len() as isize - 1;
    let (width, height) = (image.width as isize, image.height as isize);
    let mut out = Image::new(image.width, image.height);
    out.pixels.par_chunks_mut(image.width.max(1)).enumerate().for_each(|(y, row)| {
        for (x, pixel) in row.iter_mut().enumerate() {
            let mut sum = [0.0f32; 4];
            for j in -radius..=radius {
                let source_row = (y as isize + j).clamp(0, height - 1) as usize * image.width;
                let mut row_sum = [0.0f32; 4];
                for i in -radius..=radius {
                    let source = image.pixels[source_row + (x as isize + i).clamp(0, width - 1) as usize];
                    let w = weights[i.unsigned_abs()];
                    for c in 0..4 {
                        row_sum[c] += w * source[c];
                    }
                }
                let w = weights[j.unsigned_abs()];
                for c in 0..4 {
                    sum[c] += w * row_sum[c];
                }
            }
            *pixel = sum;
        }
    });
    out
}
