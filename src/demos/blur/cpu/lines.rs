//! The separable filters line by line, on all cores: the filter of one line and the pass that
//! runs it over rows and then columns through two reusable RGBA32F planes.

use rayon::prelude::*;

use super::recursive_gaussian::{RecursiveGaussian, recursive_line};

/// A separable filter, one line at a time: each line is extended by [`Line::reach`] clamped
/// pixels on both sides, then filtered into a line of the same length as the original.
#[derive(Clone, Copy)]
pub enum Line<'a> {
    /// The sampled Gaussian with these weights (`w[0..=radius]`).
    Gaussian(&'a [f32]),
    /// A cascade of four boxes of these radii, each from a running sum.
    Boxes([u32; 4]),
    /// The recursive Gaussian (each line computed in f64).
    Recursive(&'a RecursiveGaussian),
}

impl Line<'_> {
    /// Clamped pixels each line needs on either side.
    pub fn reach(&self) -> usize {
        match self {
            Line::Gaussian(weights) => weights.len() - 1,
            Line::Boxes(radii) => radii.iter().map(|&r| r as usize).sum(),
            Line::Recursive(_) => 0,
        }
    }

    /// Filters `extended` (the line with `reach` clamped pixels each side) into `out`.
    fn run(&self, extended: &[[f32; 4]], out: &mut [[f32; 4]]) {
        match self {
            Line::Gaussian(weights) => gaussian_line(weights, extended, out),
            Line::Boxes(radii) => boxes_line(*radii, extended, out),
            Line::Recursive(filter) => {
                let wide: Vec<[f64; 4]> = extended.iter().map(|p| p.map(f64::from)).collect();
                let mut result = vec![[0.0f64; 4]; out.len()];
                recursive_line(filter, &wide, &mut result);
                for (o, r) in out.iter_mut().zip(&result) {
                    *o = r.map(|v| v as f32);
                }
            }
        }
    }
}

fn gaussian_line(weights: &[f32], row: &[[f32; 4]], out: &mut [[f32; 4]]) {
    let radius = weights.len() - 1;
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
}

fn boxes_line(radii: [u32; 4], row: &[[f32; 4]], out: &mut [[f32; 4]]) {
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
}

/// The working memory of [`blur_lines`], kept between frames so that a frame allocates nothing:
/// the rows pass's result, and the columns pass's (stored column by column).
#[derive(Debug, Default)]
pub struct Planes {
    rows: Vec<[f32; 4]>,
    columns: Vec<[f32; 4]>,
}

impl Planes {
    /// Host bytes the planes take per pixel of the image.
    pub const BYTES_PER_PIXEL: u64 = 32;
}

/// Pixels gathered together from a strided plane: one 64-byte cache line of RGBA32F.
const STRIP: usize = 4;

/// Fills `extended[..reach]` and `extended[reach + n..]` with the edge pixels of the line in
/// between (`n` pixels).
fn clamp_ends(extended: &mut [[f32; 4]], reach: usize, n: usize) {
    let (first, last) = (extended[reach], extended[reach + n - 1]);
    extended[..reach].fill(first);
    extended[reach + n..].fill(last);
}

/// Blurs a `width × height` image with `line`, rows then columns: `read(y, row)` fills row `y`
/// of the source as floats, and each finished row goes to `write(row, out_row)`, where `out` holds
/// `row_len` elements per row. Runs on all cores; `planes` is the working memory.
#[allow(clippy::too_many_arguments)] // a width, a height and the five parts of one pass
pub fn blur_lines<O: Send>(
    width: usize,
    height: usize,
    line: Line<'_>,
    read: impl Fn(usize, &mut [[f32; 4]]) + Sync,
    planes: &mut Planes,
    out: &mut [O],
    row_len: usize,
    write: impl Fn(&[[f32; 4]], &mut [O]) + Sync,
) {
    if width == 0 || height == 0 {
        return;
    }
    let reach = line.reach();
    planes.rows.resize(width * height, [0.0; 4]);
    planes.columns.resize(width * height, [0.0; 4]);
    planes.rows.par_chunks_mut(width).enumerate().for_each_init(
        || vec![[0.0f32; 4]; width + 2 * reach],
        |extended, (y, row)| {
            read(y, &mut extended[reach..reach + width]);
            clamp_ends(extended, reach, width);
            line.run(extended, row);
        },
    );
    // Columns, STRIP at a time: one cache line of the rows plane feeds STRIP columns.
    let rows = &planes.rows;
    planes.columns.par_chunks_mut(height * STRIP).enumerate().for_each_init(
        || vec![vec![[0.0f32; 4]; height + 2 * reach]; STRIP],
        |lines, (strip, columns)| {
            let first = strip * STRIP;
            let count = columns.len() / height;
            for y in 0..height {
                let pixels = &rows[y * width + first..y * width + first + count];
                for (line, pixel) in lines.iter_mut().zip(pixels) {
                    line[reach + y] = *pixel;
                }
            }
            for (extended, column) in lines.iter_mut().zip(columns.chunks_exact_mut(height)) {
                clamp_ends(extended, reach, height);
                line.run(extended, column);
            }
        },
    );
    // Output rows, STRIP at a time: one cache line of the columns plane feeds STRIP rows.
    let columns = &planes.columns;
    out.par_chunks_mut(row_len * STRIP).enumerate().for_each_init(
        || vec![vec![[0.0f32; 4]; width]; STRIP],
        |lines, (strip, out_rows)| {
            let first = strip * STRIP;
            let count = out_rows.len() / row_len;
            for x in 0..width {
                let pixels = &columns[x * height + first..x * height + first + count];
                for (line, pixel) in lines.iter_mut().zip(pixels) {
                    line[x] = *pixel;
                }
            }
            for (line, out_row) in lines.iter().zip(out_rows.chunks_exact_mut(row_len)) {
                write(line, out_row);
            }
        },
    );
}
