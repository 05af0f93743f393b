//! The soak's frames phase, watched as it runs: peak resident memory of its first and last tenth.

use serde::Serialize;

/// Peak resident memory of the frames phase's first and last tenth, sampled as they run. The
/// footprint after a phase is taken once GL has finished, when frames a driver kept queued (the
/// host running ahead of Mesa's llvmpipe beside a build) may have been let go again; their peak
/// is what the machine must hold, and it climbs from the first tenth to the last.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct FramePeaks {
    /// Frames in each tenth.
    pub frames: u32,
    /// The highest resident memory sampled in the first tenth, bytes.
    pub first_bytes: u64,
    /// The highest resident memory sampled in the last tenth, bytes.
    pub last_bytes: u64,
}

/// The frames phase samples resident memory every this many frames.
pub(super) const FRAMES_PER_SAMPLE: u32 = 10;

impl FramePeaks {
    /// The peaks of the first and last tenth of `samples` (one every `FRAMES_PER_SAMPLE`
    /// frames); `None` under 20 samples, too few for a tenth to have a peak.
    pub fn of(samples: &[u64]) -> Option<Self> {
        let tenth = samples.len() / 10;
        let peak = |part: &[u64]| part.iter().copied().max().unwrap_or(0);
        (tenth >= 2).then(|| Self {
            frames: tenth as u32 * FRAMES_PER_SAMPLE,
            first_bytes: peak(&samples[..tenth]),
            last_bytes: peak(&samples[samples.len() - tenth..]),
        })
    }

    /// "peak RSS 210.3 MiB in the first 1000 frames, 212.0 MiB in the last 1000 (+1.7 MiB, bound
    /// +64.0)", against a bound of `bound_bytes` from the first to the last.
    pub fn growth(&self, bound_bytes: u64) -> String {
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        let (first, last, frames) = (mib(self.first_bytes), mib(self.last_bytes), self.frames);
        let bound = mib(bound_bytes);
        format!(
            "peak RSS {first:.1} MiB in the first {frames} frames, {last:.1} MiB in the last {frames} ({:+.1} MiB, bound +{bound:.1})",
            last - first
        )
    }

    /// The growth in words when the last tenth's peak is more than `bound_bytes` above the first's.
    pub fn exceeded(&self, bound_bytes: u64) -> Option<String> {
        (self.last_bytes.saturating_sub(self.first_bytes) > bound_bytes).then(|| {
            format!("host memory in the frames phase: {}: it climbs as frames are drawn", self.growth(bound_bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: u64 = 64 << 20;

    #[test]
    fn a_frames_phase_whose_peak_climbs_is_named_and_a_flat_one_passes() {
        let flat: Vec<u64> = (0..100).map(|i| (200 << 20) + (i % 7) * (1 << 20)).collect();
        let peaks = FramePeaks::of(&flat).expect("100 samples");
        assert_eq!(peaks.frames, 100);
        assert_eq!(peaks.exceeded(BOUND), None, "{}", peaks.growth(BOUND));
        // 1 MiB more every sample: +90 MiB from the first tenth's peak to the last's.
        let climbing: Vec<u64> = (0..100).map(|i| (200 << 20) + i * (1 << 20)).collect();
        let named = FramePeaks::of(&climbing).and_then(|peaks| peaks.exceeded(BOUND)).expect("exceeded");
        assert!(named.starts_with("host memory in the frames phase") && named.contains("+90.0 MiB"), "{named}");
        assert_eq!(FramePeaks::of(&climbing[..19]), None, "too few samples to have two tenths");
    }
}
