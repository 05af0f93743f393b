//! The wave's CPU twin (what the CPU backend runs) and its f64 reference (what tests compare to).

use rayon::prelude::*;

/// Parameters of one wave frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaveFrame {
    /// Vertices per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Phase, radians (kept in [0, 2π) so `sin` stays accurate).
    pub phase: f32,
    /// Spatial frequency.
    pub frequency: f32,
    /// Height amplitude.
    pub amplitude: f32,
}

fn coordinate(index: u32, count: u32) -> f32 {
    if count > 1 { index as f32 / (count - 1) as f32 * 2.0 - 1.0 } else { 0.0 }
}

/// Writes every vertex as `[u, height, v, 1]`, like `kernels/wave.cu`, on all cores.
pub fn fill(positions: &mut [[f32; 4]], frame: &WaveFrame) {
    let width = frame.width as usize;
    positions.par_chunks_mut(width.max(1)).take(frame.height as usize).enumerate().for_each(|(y, row)| {
        let v = coordinate(y as u32, frame.height);
        for (x, vertex) in row.iter_mut().enumerate().take(width) {
            let u = coordinate(x as u32, frame.width);
            let h =
                frame.amplitude * (u * frame.frequency + frame.phase).sin() * (v * frame.frequency + frame.phase).cos();
            *vertex = [u, h, v, 1.0];
        }
    });
}

/// The same function in f64, the reference GPU and CPU results are measured against.
pub fn reference(frame: &WaveFrame) -> Vec<[f64; 4]> {
    let coordinate = |index: u32, count: u32| -> f64 {
        if count > 1 { f64::from(index) / f64::from(count - 1) * 2.0 - 1.0 } else { 0.0 }
    };
    let (phase, frequency, amplitude) =
        (f64::from(frame.phase), f64::from(frame.frequency), f64::from(frame.amplitude));
    let mut out = Vec::with_capacity(frame.width as usize * frame.height as usize);
    for y in 0..frame.height {
        let v = coordinate(y, frame.height);
        for x in 0..frame.width {
            let u = coordinate(x, frame.width);
            out.push([u, amplitude * (u * frequency + phase).sin() * (v * frequency + phase).cos(), v, 1.0]);
        }
    }
    out
}

/// `‖out − reference‖₂ / ‖reference‖₂` over all components; NaN if any output is NaN.
pub fn relative_error(out: &[[f32; 4]], reference: &[[f64; 4]]) -> f64 {
    if out.len() != reference.len() {
        return f64::NAN;
    }
    let (mut difference, mut norm) = (0.0f64, 0.0f64);
    for (o, r) in out.iter().zip(reference) {
        for i in 0..4 {
            let d = f64::from(o[i]) - r[i];
            difference += d * d;
            norm += r[i] * r[i];
        }
    }
    (difference / norm).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_twin_matches_the_f64_reference() {
        // Odd sizes, a 1-wide row and a 1-tall column included; fresh parameters each case.
        for (width, height, phase) in [(257, 129, 0.3f32), (1, 17, 5.9), (33, 1, 2.0), (1, 1, 1.0), (640, 480, 6.2)] {
            let frame = WaveFrame { width, height, phase, frequency: 4.0, amplitude: 0.3 };
            let mut out = vec![[f32::NAN; 4]; (width * height) as usize];
            fill(&mut out, &frame);
            let error = relative_error(&out, &reference(&frame));
            assert!(error < 1e-6, "{width}x{height}: relative error {error}");
            assert!(out.iter().flatten().all(|v| v.is_finite()), "every vertex written");
        }
    }

    #[test]
    fn relative_error_never_passes_nan() {
        let frame = WaveFrame { width: 4, height: 4, phase: 0.0, frequency: 1.0, amplitude: 1.0 };
        let mut out = vec![[0.0f32; 4]; 16];
        fill(&mut out, &frame);
        out[5][1] = f32::NAN;
        let error = relative_error(&out, &reference(&frame));
        assert!(error.is_nan(), "NaN in the output must make the error NaN (never below a bound): {error}");
    }
}
