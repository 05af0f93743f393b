//! The f64 references the tests compare every filter against: each one straight from its
//! definition, rows then columns over clamped edges, with no concern for speed.

use rayon::prelude::*;

use super::Image;
use super::recursive_gaussian::{RecursiveGaussian, recursive_line};

fn clamp_row<T: Copy>(row: &[[T; 4]], reach: usize) -> Vec<[T; 4]> {
    let n = row.len() as isize;
    (-(reach as isize)..n + reach as isize).map(|i| row[i.clamp(0, n - 1) as usize]).collect()
}

/// Filters every row with `filter(extended_row, output_row)`, where the extended row has `reach`
/// clamped pixels on each side; then does the same to the columns.
fn separable<T, F>(image: &Image<T>, reach: usize, filter: F) -> Image<T>
where
    T: Copy + Default + Send + Sync,
    F: Fn(&[[T; 4]], &mut [[T; 4]]) + Sync,
{
    let rows = |input: &Image<T>| -> Image<T> {
        let mut out = Image::new(input.width, input.height);
        out.pixels.par_chunks_mut(input.width.max(1)).enumerate().for_each(|(y, row)| {
            let extended = clamp_row(&input.pixels[y * input.width..(y + 1) * input.width], reach);
            filter(&extended, row);
        });
        out
    };
    rows(&rows(image).transposed()).transposed()
}

/// f64 reference of the sampled Gaussian blur with `weights` (from [`gaussian_weights`](super::gaussian_weights)).
pub fn reference_gaussian(image: &Image<f64>, weights: &[f64]) -> Image<f64> {
    let radius = weights.len() - 1;
    separable(image, radius, |row, out| {
        for (x, pixel) in out.iter_mut().enumerate() {
            let mut sum = [0.0; 4];
            for (k, &w) in weights.iter().enumerate() {
                let taps: &[usize] = if k == 0 { &[radius] } else { &[radius - k, radius + k] };
                for &tap in taps {
                    for c in 0..4 {
                        sum[c] += w * row[x + tap][c];
                    }
                }
            }
            *pixel = sum;
        }
    })
}

/// f64 reference of the four-box cascade with `radii`.
pub fn reference_boxes(image: &Image<f64>, radii: [u32; 4]) -> Image<f64> {
    let reach: usize = radii.iter().map(|&r| r as usize).sum();
    separable(image, reach, |row, out| {
        let mut current = row.to_vec();
        for &radius in &radii {
            let r = radius as usize;
            if r == 0 {
                continue;
            }
            let scale = 1.0 / (2 * r + 1) as f64;
            current = (r..current.len() - r)
                .map(|c| {
                    let mut sum = [0.0; 4];
                    for pixel in &current[c - r..=c + r] {
                        for k in 0..4 {
                            sum[k] += pixel[k];
                        }
                    }
                    sum.map(|s| s * scale)
                })
                .collect();
        }
        out.copy_from_slice(&current[..out.len()]);
    })
}

/// f64 reference of the recursive Gaussian: the exact recursion on every row, then every column.
pub fn reference_recursive(image: &Image<f64>, filter: &RecursiveGaussian) -> Image<f64> {
    separable(image, 0, |row, out| recursive_line(filter, row, out))
}
