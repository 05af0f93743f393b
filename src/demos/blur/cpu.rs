//! The blur filters on the CPU (what the CPU backend runs, f32 on all cores) and their f64
//! references (what the tests compare against). Borders clamp to the edge everywhere.

use rayon::prelude::*;

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

/// Gaussian weights `w[0..=radius]` of a sampled Gaussian of `sigma`, normalised so that
/// `w[0] + 2 Σ w[k] = 1`.
pub fn gaussian_weights(sigma: f64, radius: usize) -> Vec<f64> {
    let mut weights: Vec<f64> = (0..=radius).map(|k| (-((k * k) as f64) / (2.0 * sigma * sigma)).exp()).collect();
    let total = weights[0] + 2.0 * weights[1..].iter().sum::<f64>();
    for w in &mut weights {
        *w /= total;
    }
    weights
}

/// The radius that covers ±3σ of a Gaussian.
pub fn default_radius(sigma: f64) -> usize {
    (3.0 * sigma).ceil().max(1.0) as usize
}

/// Radii of four box filters whose cascade has a variance as close to σ² as odd widths allow
/// (two widths w and w + 2, in the mix that best matches), and the σ it achieves.
pub fn box_radii(sigma: f64) -> ([u32; 4], f64) {
    const BOXES: f64 = 4.0;
    let ideal = (12.0 * sigma * sigma / BOXES + 1.0).sqrt();
    let mut lower = ideal.floor() as i64;
    if lower % 2 == 0 {
        lower -= 1;
    }
    let lower = lower.max(1);
    let upper = lower + 2;
    // m boxes of the lower width, 4 − m of the upper: m from the variance equation, rounded.
    let (l, u) = (lower as f64, upper as f64);
    let m = ((12.0 * sigma * sigma - BOXES * u * u + BOXES) / (l * l - u * u)).round().clamp(0.0, BOXES) as usize;
    let mut radii = [0u32; 4];
    for (index, radius) in radii.iter_mut().enumerate() {
        let width = if index < m { lower } else { upper };
        *radius = ((width - 1) / 2) as u32;
    }
    let variance: f64 = radii.iter().map(|&r| ((2 * r + 1) as f64).powi(2) - 1.0).sum::<f64>() / 12.0;
    (radii, variance.sqrt())
}

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

/// f64 reference of the sampled Gaussian blur with `weights` (from [`gaussian_weights`]).
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

/// f32 Gaussian blur on all cores (the CPU backend's separable filter).
pub fn gaussian(image: &Image<f32>, weights: &[f32]) -> Image<f32> {
    let radius = weights.len() - 1;
    separable(image, radius, |row, out| {
        for (x, pixel) in out.iter_mut().enumerate() {
            let centre = x + radius;
            let mut sum = row[centre].map(|v| v * weights[0]);
            for (k, &w) in weights.iter().enumerate().skip(1) {
                for c in 0..4 {
                    sum[c] += w * (row[centre - k][c] + row[centre + k][c]);
                }
            }
            *pixel = sum;
        }
    })
}

/// f32 four-box cascade on all cores, each box from a running sum.
pub fn boxes(image: &Image<f32>, radii: [u32; 4]) -> Image<f32> {
    let reach: usize = radii.iter().map(|&r| r as usize).sum();
    separable(image, reach, |row, out| {
        let mut current = row.to_vec();
        let mut next = Vec::with_capacity(current.len());
        for &radius in &radii {
            let r = radius as usize;
            if r == 0 {
                continue;
            }
            let scale = 1.0 / (2 * r + 1) as f32;
            let mut sum = [0.0f32; 4];
            for pixel in &current[..2 * r] {
                for k in 0..4 {
                    sum[k] += pixel[k];
                }
            }
            next.clear();
            for c in r..current.len() - r {
                for k in 0..4 {
                    sum[k] += current[c + r][k];
                }
                next.push(sum.map(|s| s * scale));
                for k in 0..4 {
                    sum[k] -= current[c - r][k];
                }
            }
            std::mem::swap(&mut current, &mut next);
        }
        out.copy_from_slice(&current[..out.len()]);
    })
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

/// Rounds 0..=255 floats to bytes the way the GPU does (nearest, ties to even, clamped).
pub fn to_bytes(value: f32) -> u8 {
    value.clamp(0.0, 255.0).round_ties_even() as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn random_image(width: usize, height: usize, seed: u64) -> Image<f64> {
        // Blocks of random colour plus noise: edges and texture, which a blur must smooth.
        let mut rng = Rng::new(seed);
        let block_colours: Vec<[f64; 4]> =
            (0..64).map(|_| [rng.range(0.0, 255.0), rng.range(0.0, 255.0), rng.range(0.0, 255.0), 255.0]).collect();
        let pixels = (0..width * height)
            .map(|i| {
                let (x, y) = (i % width, i / width);
                let block = block_colours[(x / 7 + 8 * (y / 5)) % 64];
                block.map(|c| (c + rng.range(-20.0, 20.0)).clamp(0.0, 255.0))
            })
            .collect();
        Image { width, height, pixels }
    }

    fn to_f32(image: &Image<f64>) -> Image<f32> {
        Image {
            width: image.width,
            height: image.height,
            pixels: image.pixels.iter().map(|p| p.map(|v| v as f32)).collect(),
        }
    }

    fn max_difference(a: &Image<f32>, b: &Image<f64>) -> f64 {
        a.pixels
            .iter()
            .zip(&b.pixels)
            .flat_map(|(p, q)| (0..4).map(move |c| (f64::from(p[c]) - q[c]).abs()))
            .fold(0.0, f64::max)
    }

    #[test]
    fn weights_are_normalised_and_box_cascades_match_sigma() {
        for sigma in [0.3, 1.0, 2.5, 10.0, 100.0] {
            let weights = gaussian_weights(sigma, default_radius(sigma));
            let total = weights[0] + 2.0 * weights[1..].iter().sum::<f64>();
            assert!((total - 1.0).abs() < 1e-12, "σ {sigma}: Σw = {total}");
        }
        for sigma in [2.0, 5.0, 10.0, 25.0, 100.0] {
            let (radii, achieved) = box_radii(sigma);
            // Odd widths quantise the variance; four boxes get within half a pixel of σ.
            assert!((achieved - sigma).abs() < 0.5, "σ {sigma}: boxes {radii:?} give {achieved}");
        }
    }

    #[test]
    fn cpu_filters_match_their_references() {
        let image = random_image(97, 61, 3);
        let input = to_f32(&image);
        for sigma in [0.8, 3.0, 9.0] {
            let weights = gaussian_weights(sigma, default_radius(sigma));
            let reference = reference_gaussian(&image, &weights);
            let weights32: Vec<f32> = weights.iter().map(|&w| w as f32).collect();
            for (name, out) in [("separable", gaussian(&input, &weights32)), ("naive", naive(&input, &weights32))] {
                let error = max_difference(&out, &reference);
                // f32 sums of ≤ (2r+1)² terms of ≤ 255: far below 1e-2 of a level.
                assert!(error < 1e-2, "{name} σ {sigma}: max |out − ref| = {error}");
            }
            let (radii, _) = box_radii(sigma);
            let error = max_difference(&boxes(&input, radii), &reference_boxes(&image, radii));
            assert!(error < 1e-2, "boxes σ {sigma}: {error}");
        }
    }

    #[test]
    fn blur_of_a_constant_image_is_that_constant_and_borders_clamp() {
        let constant = Image { width: 13, height: 7, pixels: vec![[10.0, 20.0, 30.0, 255.0]; 91] };
        let weights: Vec<f32> = gaussian_weights(4.0, 12).iter().map(|&w| w as f32).collect();
        for out in [gaussian(&constant, &weights), boxes(&constant, box_radii(4.0).0), naive(&constant, &weights)] {
            for p in &out.pixels {
                for c in 0..4 {
                    assert!((p[c] - constant.pixels[0][c]).abs() < 1e-3, "{p:?}");
                }
            }
        }
        // A one-pixel-wide image: clamping makes every tap the same pixel column.
        let column = Image { width: 1, height: 5, pixels: (0..5).map(|y| [y as f64; 4]).collect() };
        let out = reference_gaussian(&column, &gaussian_weights(1.0, 3));
        assert!(out.pixels[0][0] > 0.0 && out.pixels[0][0] < 1.0, "the top pixel mixes with the rows below it");
    }
}
