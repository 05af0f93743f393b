//! The separable filters line by line, on all cores: the filter of one line, and the two passes
//! that run it down the columns (into one reusable RGBA32F plane) and then along the rows (into
//! the output). Each thread holds a few lines of its own, whatever the number of threads.

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

    /// Filters `extended` (the line with `reach` clamped pixels each side) into `out`, with
    /// `scratch` for the filter's own lines.
    fn run(&self, extended: &[[f32; 4]], out: &mut [[f32; 4]], scratch: &mut FilterScratch) {
        match self {
            Line::Gaussian(weights) => gaussian_line(weights, extended, out),
            Line::Boxes(radii) => boxes_line(*radii, extended, out, scratch),
            Line::Recursive(filter) => {
                scratch.sums.resize(out.len(), [0.0; 4]);
                recursive_line(filter, extended, &mut scratch.sums);
                for (o, sum) in out.iter_mut().zip(&scratch.sums) {
                    *o = sum.map(|v| v as f32);
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

fn boxes_line(radii: [u32; 4], row: &[[f32; 4]], out: &mut [[f32; 4]], scratch: &mut FilterScratch) {
    let (mut current, mut next) = (&mut scratch.boxes, &mut scratch.next_boxes);
    current.clear();
    current.extend_from_slice(row);
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

/// The lines a filter works in besides its input and output: the recursive filter's f64 sums,
/// the box cascade's two running lines.
#[derive(Debug, Default)]
struct FilterScratch {
    sums: Vec<[f64; 4]>,
    boxes: Vec<[f32; 4]>,
    next_boxes: Vec<[f32; 4]>,
}

/// What one thread filters in: a line with its clamped ends, its result, and the filter's own.
/// Made once per rayon task and reused for every line of it, so it is a few lines whatever the
/// image, and the blur's memory grows with the thread count by lines, not by images.
#[derive(Debug, Default)]
struct LineScratch {
    extended: Vec<[f32; 4]>,
    filtered: Vec<[f32; 4]>,
    filter: FilterScratch,
}

impl LineScratch {
    /// The extended line (`length` pixels plus `reach` each side) and the result line, sized.
    fn lines(&mut self, length: usize, reach: usize) -> (&mut [[f32; 4]], &mut [[f32; 4]], &mut FilterScratch) {
        self.extended.resize(length + 2 * reach, [0.0; 4]);
        self.filtered.resize(length, [0.0; 4]);
        (&mut self.extended, &mut self.filtered, &mut self.filter)
    }
}

/// The working memory of the CPU filters, kept between frames so that a frame allocates no
/// image: one RGBA32F plane. The separable filters keep their columns pass's result in it, in
/// blocks of `BLOCK` columns (each block's rows one after the other); the naive filter keeps the
/// source as floats in it, row by row.
#[derive(Debug, Default)]
pub struct Planes {
    plane: Vec<[f32; 4]>,
}

impl Planes {
    /// Host bytes the working memory takes per pixel of the image.
    pub const BYTES_PER_PIXEL: u64 = 16;

    /// The plane, holding `pixels` pixels.
    pub(super) fn sized(&mut self, pixels: usize) -> &mut [[f32; 4]] {
        self.plane.resize(pixels, [0.0; 4]);
        &mut self.plane
    }
}

/// Columns in one block of the plane: a block is one task of the columns pass, and each of its
/// rows is a run of 256 contiguous bytes for the rows pass to read.
const BLOCK: usize = 16;

/// Fills `extended[..reach]` and `extended[reach + n..]` with the edge pixels of the line in
/// between (`n` pixels).
fn clamp_ends(extended: &mut [[f32; 4]], reach: usize, n: usize) {
    let (first, last) = (extended[reach], extended[reach + n - 1]);
    extended[..reach].fill(first);
    extended[reach + n..].fill(last);
}

/// Blurs a `width × height` image with `line`, columns then rows: `read(y, x, pixels)` fills
/// `pixels` with row `y` of the source from column `x` on, as floats, and each finished row goes
/// to `write(row, out_row)`, where `out` holds `row_len` elements per row. Runs on all cores;
/// `planes` is the working memory.
#[allow(clippy::too_many_arguments)] // a width, a height and the five parts of one pass
pub fn blur_lines<O: Send>(
    width: usize,
    height: usize,
    line: Line<'_>,
    read: impl Fn(usize, usize, &mut [[f32; 4]]) + Sync,
    planes: &mut Planes,
    out: &mut [O],
    row_len: usize,
    write: impl Fn(&[[f32; 4]], &mut [O]) + Sync,
) {
    if width == 0 || height == 0 {
        return;
    }
    let reach = line.reach();
    let plane = planes.sized(width * height);
    // Columns, a block at a time: the block's rows are read from the source, then each of its
    // columns is filtered in place (the block stays in the core's cache meanwhile).
    plane.par_chunks_mut(BLOCK * height).enumerate().for_each_init(LineScratch::default, |scratch, (block, pixels)| {
        let columns = pixels.len() / height;
        for (y, row) in pixels.chunks_exact_mut(columns).enumerate() {
            read(y, block * BLOCK, row);
        }
        let (extended, filtered, filter) = scratch.lines(height, reach);
        for column in 0..columns {
            for (slot, pixel) in extended[reach..].iter_mut().zip(pixels[column..].iter().step_by(columns)) {
                *slot = *pixel;
            }
            clamp_ends(extended, reach, height);
            line.run(extended, filtered, filter);
            for (pixel, result) in pixels[column..].iter_mut().step_by(columns).zip(filtered.iter()) {
                *pixel = *result;
            }
        }
    });
    // Rows: each output row gathers its runs from every block, is filtered and written.
    let plane = &*plane;
    out.par_chunks_mut(row_len).enumerate().for_each_init(LineScratch::default, |scratch, (y, out_row)| {
        let (extended, filtered, filter) = scratch.lines(width, reach);
        for (block, pixels) in plane.chunks(BLOCK * height).enumerate() {
            let columns = pixels.len() / height;
            let first = reach + block * BLOCK;
            extended[first..first + columns].copy_from_slice(&pixels[y * columns..(y + 1) * columns]);
        }
        clamp_ends(extended, reach, width);
        line.run(extended, filtered, filter);
        write(filtered, out_row);
    });
}

/// The naive filter's output row `y`: the full 2-D window of `weights` around each pixel of a
/// `width`-wide row-major float image, borders clamped.
pub(super) fn naive_row(pixels: &[[f32; 4]], width: usize, weights: &[f32], y: usize, out: &mut [[f32; 4]]) {
    let radius = weights.len() as isize - 1;
    let height = (pixels.len() / width) as isize;
    for (x, pixel) in out.iter_mut().enumerate() {
        let mut sum = [0.0f32; 4];
        for j in -radius..=radius {
            let source_row = (y as isize + j).clamp(0, height - 1) as usize * width;
            let mut row_sum = [0.0f32; 4];
            for i in -radius..=radius {
                let source = pixels[source_row + (x as isize + i).clamp(0, width as isize - 1) as usize];
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
}

/// The naive filter (the full 2-D window of `weights`) over a `width × height` image, with
/// `read`, `out`, `row_len` and `write` as for [`blur_lines`]: the source goes into the plane of
/// `planes` as floats, and each output row is summed from it into a line of its thread's own.
#[allow(clippy::too_many_arguments)] // a width, a height and the five parts of one pass
pub fn naive_rows<O: Send>(
    width: usize,
    height: usize,
    weights: &[f32],
    read: impl Fn(usize, usize, &mut [[f32; 4]]) + Sync,
    planes: &mut Planes,
    out: &mut [O],
    row_len: usize,
    write: impl Fn(&[[f32; 4]], &mut [O]) + Sync,
) {
    if width == 0 || height == 0 {
        return;
    }
    let plane = planes.sized(width * height);
    plane.par_chunks_mut(width).enumerate().for_each(|(y, row)| read(y, 0, row));
    let plane = &*plane;
    out.par_chunks_mut(row_len).enumerate().for_each_init(Vec::new, |line, (y, out_row)| {
        line.resize(width, [0.0; 4]);
        naive_row(plane, width, weights, y, line);
        write(line, out_row);
    });
}
