//! The filters' parameters from σ: the sampled Gaussian's weights and radius, and the four box
//! radii whose cascade comes closest to that Gaussian.

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
