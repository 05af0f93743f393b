//! The recursive (IIR) Gaussian: its poles and residues for a σ, its impulse response, the
//! warm-up a recursion needs, and the exact f64 recursion of one line.

/// A recursive (IIR) Gaussian after Young and van Vliet (1995): a third-order causal recursion
/// run forwards and backwards. Its two-sided impulse response is
/// `h[n] = Σ_j c_j p_j^|n|` over one real pole and a complex-conjugate pair, so the filter can be
/// run as three independent first-order recursions per direction (`s_j[n] = x[n] + p_j s_j[n−1]`),
/// which stay well conditioned even when the poles crowd towards 1 at large σ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecursiveGaussian {
    /// σ it was made for.
    pub sigma: f64,
    /// The real pole, in (0, 1).
    pub real_pole: f64,
    /// The complex pole with positive imaginary part, `[re, im]`; its conjugate is the third.
    pub complex_pole: [f64; 2],
    /// Residue `c` of the real pole.
    pub real_residue: f64,
    /// Residue of the complex pole, `[re, im]` (the conjugate pole has the conjugate residue).
    pub complex_residue: [f64; 2],
}

/// The smallest σ the recursive filter accepts: below it Young and van Vliet's fit departs from
/// the sampled Gaussian by more than 6 levels of 255 on edges (about 10 at σ = 2).
pub const MIN_RECURSIVE_SIGMA: f64 = 4.0;

#[derive(Debug, Clone, Copy)]
struct Complex(f64, f64);

impl Complex {
    fn mul(self, o: Complex) -> Complex {
        Complex(self.0 * o.0 - self.1 * o.1, self.0 * o.1 + self.1 * o.0)
    }
    fn div(self, o: Complex) -> Complex {
        let d = o.0 * o.0 + o.1 * o.1;
        Complex((self.0 * o.0 + self.1 * o.1) / d, (self.1 * o.0 - self.0 * o.1) / d)
    }
    fn add(self, o: Complex) -> Complex {
        Complex(self.0 + o.0, self.1 + o.1)
    }
    fn one_minus(self) -> Complex {
        Complex(1.0 - self.0, -self.1)
    }
    fn abs(self) -> f64 {
        self.0.hypot(self.1)
    }
    /// self^n, from the polar form.
    fn powi(self, n: i32) -> Complex {
        let magnitude = self.abs().powi(n);
        let angle = f64::from(n) * self.1.atan2(self.0);
        Complex(magnitude * angle.cos(), magnitude * angle.sin())
    }
}

impl RecursiveGaussian {
    /// Poles and residues for `sigma` (Young and van Vliet's q(σ) and b coefficients).
    pub fn new(sigma: f64) -> Self {
        let q =
            if sigma >= 2.5 { 0.98711 * sigma - 0.96330 } else { 3.97156 - 4.14554 * (1.0 - 0.26891 * sigma).sqrt() };
        let b0 = 1.57825 + 2.44413 * q + 1.4281 * q * q + 0.422205 * q * q * q;
        let b1 = 2.44413 * q + 2.85619 * q * q + 1.26661 * q * q * q;
        let b2 = -(1.4281 * q * q + 1.26661 * q * q * q);
        let b3 = 0.422205 * q * q * q;
        let a = [b1 / b0, b2 / b0, b3 / b0];
        let gain = 1.0 - a[0] - a[1] - a[2];
        // Poles: roots of p³ − a1 p² − a2 p − a3. The cubic is −a3 < 0 at 0 and the gain > 0 at
        // 1, so bisection finds the real root; the quadratic left has the complex pair.
        let cubic = |p: f64| ((p - a[0]) * p - a[1]) * p - a[2];
        let (mut low, mut high) = (0.0f64, 1.0f64);
        for _ in 0..200 {
            let middle = 0.5 * (low + high);
            if cubic(middle) > 0.0 {
                high = middle;
            } else {
                low = middle;
            }
        }
        let real = 0.5 * (low + high);
        let beta = real - a[0];
        let gamma = a[2] / real;
        let discriminant = beta * beta - 4.0 * gamma;
        let complex = Complex(-0.5 * beta, 0.5 * (-discriminant).max(0.0).sqrt());
        // c_j = gain² / (Π_{i≠j} (1 − p_i/p_j) · Π_i (1 − p_i p_j)): the residues of
        // gain² / (A(z) A(1/z)) at the poles inside the unit circle.
        let poles = [Complex(real, 0.0), complex, Complex(complex.0, -complex.1)];
        let residue = |j: usize| {
            let mut denominator = Complex(1.0, 0.0);
            for (i, &pole) in poles.iter().enumerate() {
                if i != j {
                    denominator = denominator.mul(pole.div(poles[j]).one_minus());
                }
                denominator = denominator.mul(pole.mul(poles[j]).one_minus());
            }
            Complex(gain * gain, 0.0).div(denominator)
        };
        let (real_residue, complex_residue) = (residue(0), residue(1));
        Self {
            sigma,
            real_pole: real,
            complex_pole: [complex.0, complex.1],
            real_residue: real_residue.0,
            complex_residue: [complex_residue.0, complex_residue.1],
        }
    }

    fn modes(&self) -> [(Complex, Complex, f64); 2] {
        // (pole, residue, multiplicity): the conjugate pair counts twice (its real part).
        [
            (Complex(self.real_pole, 0.0), Complex(self.real_residue, 0.0), 1.0),
            (
                Complex(self.complex_pole[0], self.complex_pole[1]),
                Complex(self.complex_residue[0], self.complex_residue[1]),
                2.0,
            ),
        ]
    }

    /// The impulse response `h[n]` (symmetric; Σ h = 1).
    pub fn impulse(&self, n: i64) -> f64 {
        let n = n.unsigned_abs().min(i32::MAX as u64) as i32;
        self.modes().iter().map(|&(pole, residue, multiplicity)| multiplicity * residue.mul(pole.powi(n)).0).sum()
    }

    /// Steps a recursion must run before its first output so that starting from a wrong state
    /// (anything the input range allows) moves the output by at most `tolerance` × the input range.
    ///
    /// A walker that starts from the steady state of the pixel it first reads and walks `L` steps
    /// is off by `Σ_{k≥1} d_k h[L + k]` at its first output, where d_k (within ± the range) are the
    /// differences between that pixel and the ones before it: at most `Σ_{n>L} |h[n]|` of the
    /// range, and exactly that for the worst input. That tail is summed here, down from a point
    /// where the modes' geometric bounds add up to 1 % of the tolerance and stand in for the rest
    /// (a few µs at σ = 100: it runs for every launch).
    pub fn warmup(&self, tolerance: f64) -> usize {
        let modes = self.modes();
        // Σ_{n≥m} |h[n]| ≤ Σ_modes multiplicity·|c|·|p|^m / (1 − |p|): the horizon is where each
        // mode's share of that is at most 0.5 % of the tolerance.
        let scale = |&(pole, residue, multiplicity): &(Complex, Complex, f64)| {
            multiplicity * residue.abs() / (1.0 - pole.abs())
        };
        let horizon = modes
            .iter()
            .map(|mode| {
                let target = 0.005 * tolerance / scale(mode);
                if target >= 1.0 { 0.0 } else { (target.ln() / mode.0.abs().ln()).ceil() }
            })
            .fold(0.0, f64::max)
            .min(f64::from(1 << 24)) as i32;
        let mut tail: f64 = modes.iter().map(|mode| scale(mode) * mode.0.abs().powi(horizon)).sum();
        // Down from the horizon, tail = Σ_{n>steps} |h[n]|; p^n steps down by multiplying by 1/p.
        let mut powers = modes.map(|(pole, _, _)| pole.powi(horizon));
        let inverses = modes.map(|(pole, _, _)| Complex(1.0, 0.0).div(pole));
        let mut steps = horizon;
        while steps > 0 {
            let h: f64 = modes
                .iter()
                .zip(&powers)
                .map(|(&(_, residue, multiplicity), &power)| multiplicity * residue.mul(power).0)
                .sum();
            if tail + h.abs() > tolerance {
                break;
            }
            tail += h.abs();
            steps -= 1;
            for (power, inverse) in powers.iter_mut().zip(inverses) {
                *power = power.mul(inverse);
            }
        }
        steps as usize
    }
}

/// The recursive Gaussian of one line (f32 or f64 pixels), in f64, with clamp-to-edge borders
/// taken exactly: the state entering the line from either side is that of an infinite run of the
/// edge pixel.
pub(super) fn recursive_line<T: Copy + Into<f64>>(filter: &RecursiveGaussian, row: &[[T; 4]], out: &mut [[f64; 4]]) {
    let n = row.len();
    for pixel in out.iter_mut() {
        *pixel = [0.0; 4];
    }
    for (pole, residue, multiplicity) in filter.modes() {
        let steady = Complex(1.0, 0.0).div(pole.one_minus());
        for c in 0..4 {
            // Causal part y⁺[i] = Σ_{k≥0} h[k] x[i−k] = Σ_j c_j s_j[i], s_j[i] = x[i] + p_j s_j[i−1].
            let edge: f64 = row[0][c].into();
            let mut state = Complex(steady.0 * edge, steady.1 * edge);
            for i in 0..n {
                state = Complex(row[i][c].into(), 0.0).add(pole.mul(state));
                out[i][c] += multiplicity * residue.mul(state).0;
            }
            // Anticausal part y⁻[i] = Σ_{k≥1} h[k] x[i+k] = Σ_j c_j p_j t_j[i],
            // t_j[i] = x[i+1] + p_j t_j[i+1], t_j[n−1] = x[n−1] / (1 − p_j).
            let edge: f64 = row[n - 1][c].into();
            let mut state = Complex(steady.0 * edge, steady.1 * edge);
            let weight = residue.mul(pole);
            for i in (0..n).rev() {
                if i + 1 < n {
                    state = Complex(row[i + 1][c].into(), 0.0).add(pole.mul(state));
                }
                out[i][c] += multiplicity * weight.mul(state).0;
            }
        }
    }
}
