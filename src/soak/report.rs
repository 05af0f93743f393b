//! What a soak measured: the footprint at each point, the bounds, the report and its table.

use std::fmt::Write;

use serde::Serialize;

use super::frame_peaks::FramePeaks;
use crate::graphics::GraphicsApi;
use crate::renderer::LiveObjects;
use crate::transfer::TransferKind;

/// The growth allowed between the start and the end of a soak.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Bounds {
    /// Device memory (`cuMemGetInfo` free bytes) may shrink by at most this.
    pub device_bytes: u64,
    /// Resident host memory may grow by at most this.
    pub host_rss_bytes: u64,
    /// The renderer's live objects of each kind may grow by at most this.
    pub objects: u64,
}

/// Device memory may move by the driver's allocation granularity; the host's RSS by what the
/// allocator and NVRTC keep cached; the renderer's objects not at all.
pub const BOUNDS: Bounds = Bounds { device_bytes: 4 << 20, host_rss_bytes: 64 << 20, objects: 0 };

/// What was measured at one point of the soak.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Footprint {
    /// Free device memory, bytes (`None`: no CUDA to ask, on the CPU path).
    pub device_free_bytes: Option<u64>,
    /// Resident host memory, bytes.
    pub host_rss_bytes: u64,
    /// The renderer's live objects by kind (GL: buffer, texture, framebuffer and program names;
    /// Vulkan: buffers and images), as a JSON object in the renderer's order.
    #[serde(serialize_with = "kinds_as_object")]
    pub objects: LiveObjects,
}

fn kinds_as_object<S: serde::Serializer>(objects: &LiveObjects, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(objects.iter().copied())
}

/// One phase's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// What the phase did.
    pub name: &'static str,
    /// How many times.
    pub count: u32,
    /// Wall seconds.
    pub seconds: f64,
    /// Footprint after the phase.
    pub after: Footprint,
}

/// The whole soak's result.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// The graphics API soaked.
    pub renderer: GraphicsApi,
    /// The transfer path soaked.
    pub transfer: TransferKind,
    /// The CUDA device.
    pub device: String,
    /// Footprint after warm-up, before the phases.
    pub before: Footprint,
    /// Each phase in order.
    pub phases: Vec<Phase>,
    /// Peak host memory early and late in the frames phase (`None`: too few frames to tell).
    pub frame_peaks: Option<FramePeaks>,
    /// The allowed growth.
    pub bounds: Bounds,
    /// Each bound exceeded, in words (empty: the soak passed).
    pub exceeded: Vec<String>,
    /// What was skipped or cut short, in words.
    pub notes: Vec<String>,
    /// Whether a stop request (Ctrl-C, SIGTERM) cut the soak short: the phases hold what ran.
    pub interrupted: bool,
}

impl SoakReport {
    /// What changed from before the phases to after the last, beside the bound of each: "device
    /// memory free −1.0 MiB (bound −4.0), host RSS +12.3 MiB (bound +64.0), OpenGL objects of any kind +0
    /// (bound +0)".
    pub fn change(&self) -> String {
        let Some(after) = self.phases.last().map(|phase| &phase.after) else {
            return "no phase ran".to_owned();
        };
        let mib = |bytes: i128| format!("{:+.1} MiB", bytes as f64 / f64::from(1 << 20));
        let device = match (self.before.device_free_bytes, after.device_free_bytes) {
            (Some(before), Some(after)) => format!(
                "device memory free {} (bound −{:.1} MiB)",
                mib(i128::from(after) - i128::from(before)),
                self.bounds.device_bytes as f64 / f64::from(1 << 20)
            ),
            _ => "device memory not measured (no CUDA)".to_owned(),
        };
        let rss = mib(i128::from(after.host_rss_bytes) - i128::from(self.before.host_rss_bytes));
        let grown = grown(&self.before, after).map(|(_, then, now)| i128::from(now) - i128::from(then)).max();
        format!(
            "{device}, host RSS {rss} (bound +{:.1} MiB), {} objects of any kind {:+} (bound +{})",
            self.bounds.host_rss_bytes as f64 / f64::from(1 << 20),
            self.renderer.label(),
            grown.unwrap_or(0),
            self.bounds.objects
        )
    }

    /// The report as the terminal shows it, and whether everything stayed within bounds (a soak
    /// stopped before any measured phase gives no verdict and counts as within).
    pub fn table(&self) -> (String, bool) {
        let mut out = String::new();
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        // One column per kind the renderer counts, as wide as its name.
        let line = |out: &mut String, name: &str, count: u32, seconds: Option<f64>, at: &Footprint| {
            let _ = write!(
                out,
                "{name:<38} {count:>6} {:>8} {:>12} {:>10.1}",
                seconds.map(|s| format!("{s:.1}")).unwrap_or_default(),
                at.device_free_bytes.map(|b| format!("{:.1}", mib(b))).unwrap_or_else(|| "–".to_owned()),
                mib(at.host_rss_bytes),
            );
            for &(kind, live) in &at.objects {
                let _ = write!(out, " {live:>width$}", width = kind.len().max(5));
            }
            out.push('\n');
        };
        let _ = writeln!(out, "soak on {}, {}, transfer {}", self.device, self.renderer.label(), self.transfer.label());
        let _ = write!(out, "{:<38} {:>6} {:>8} {:>12} {:>10}", "phase", "count", "s", "dev free MiB", "RSS MiB");
        for &(kind, _) in &self.before.objects {
            let _ = write!(out, " {kind:>5}");
        }
        out.push('\n');
        line(&mut out, "before", 0, None, &self.before);
        for phase in &self.phases {
            line(&mut out, phase.name, phase.count, Some(phase.seconds), &phase.after);
        }
        if let Some(peaks) = &self.frame_peaks {
            let _ = writeln!(out, "frames phase: {}", peaks.growth(self.bounds.host_rss_bytes));
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        if self.phases.iter().all(|phase| phase.count == 0) {
            let _ = writeln!(out, "no verdict: stopped before any measured phase ran");
            (out, true)
        } else if self.exceeded.is_empty() {
            let _ = writeln!(out, "within bounds: {}", self.change());
            (out, true)
        } else {
            for what in &self.exceeded {
                let _ = writeln!(out, "exceeded: {what}");
            }
            (out, false)
        }
    }
}

/// Each bound `after` exceeds, against `before`, on the renderer of `api`.
pub fn exceeded(before: &Footprint, after: &Footprint, bounds: &Bounds, api: GraphicsApi) -> Vec<String> {
    let mut out = Vec::new();
    let device_lost = match (before.device_free_bytes, after.device_free_bytes) {
        (Some(before), Some(after)) => before.saturating_sub(after),
        _ => 0,
    };
    if device_lost > bounds.device_bytes {
        out.push(format!("device memory: {device_lost} bytes no longer free (bound {})", bounds.device_bytes));
    }
    let rss_grown = after.host_rss_bytes.saturating_sub(before.host_rss_bytes);
    if rss_grown > bounds.host_rss_bytes {
        out.push(format!("host memory: grew {rss_grown} bytes (bound {})", bounds.host_rss_bytes));
    }
    for (kind, then, now) in grown(before, after) {
        if now > then + bounds.objects {
            out.push(format!("{api} {kind}: {then} live before, {now} after", api = api.label()));
        }
    }
    out
}

/// Each kind of object counted at both points: its count before and after.
fn grown<'a>(before: &'a Footprint, after: &'a Footprint) -> impl Iterator<Item = (&'static str, u64, u64)> + 'a {
    before.objects.iter().filter_map(|&(kind, then)| {
        let now = after.objects.iter().find(|&&(other, _)| other == kind)?.1;
        Some((kind, then, now))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(device_free_bytes: u64, host_rss_bytes: u64, buffers: u64) -> Footprint {
        Footprint {
            device_free_bytes: Some(device_free_bytes),
            host_rss_bytes,
            objects: vec![("buffers", buffers), ("textures", 3), ("framebuffers", 1), ("programs", 1)],
        }
    }

    #[test]
    fn growth_within_bounds_passes_and_beyond_is_named() {
        let before = at(10 << 30, 100 << 20, 5);
        assert!(exceeded(&before, &at((10 << 30) - (1 << 20), 120 << 20, 5), &BOUNDS, GraphicsApi::Gl).is_empty());
        let lost = exceeded(&before, &at((10 << 30) - (64 << 20), 100 << 20, 6), &BOUNDS, GraphicsApi::Vulkan);
        assert_eq!(lost.len(), 2, "{lost:?}");
        assert!(lost[0].starts_with("device memory") && lost[1].starts_with("Vulkan buffers"), "{lost:?}");
    }
}
