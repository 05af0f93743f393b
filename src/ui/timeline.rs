//! The per-stage timeline: a stacked bar per frame (host or GPU time of each stage), a table of
//! medians and p90s, and export of every recorded frame as CSV or JSON.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::stats::{FrameHistory, FrameSample, Stage};

/// Frames drawn in the timeline.
const TIMELINE_FRAMES: usize = 300;
/// Frames the table's medians are taken over.
const SUMMARY_FRAMES: usize = 120;

/// Timeline options that outlive a frame.
#[derive(Debug, Default)]
pub struct TimelineState {
    /// Plot GPU times instead of host times.
    pub gpu: bool,
}

/// Each stage's colour (the anatomy's spans share it).
pub(super) fn colour(stage: Stage) -> egui::Color32 {
    match stage {
        Stage::Map => egui::Color32::from_rgb(90, 160, 255),
        Stage::Kernel => egui::Color32::from_rgb(120, 220, 120),
        Stage::Unmap => egui::Color32::from_rgb(60, 110, 200),
        Stage::Download => egui::Color32::from_rgb(240, 170, 60),
        Stage::Upload => egui::Color32::from_rgb(230, 110, 70),
        Stage::Sync => egui::Color32::from_rgb(200, 120, 220),
        Stage::Draw => egui::Color32::from_rgb(200, 200, 200),
        Stage::Panel => egui::Color32::from_rgb(150, 150, 110),
        Stage::Present => egui::Color32::from_rgb(255, 225, 90),
    }
}

/// Draws the timeline section; returns a message for the user (an export's path or error).
pub fn show(ui: &mut egui::Ui, history: &FrameHistory, state: &mut TimelineState) -> Option<String> {
    let summary = history.summary(Some(SUMMARY_FRAMES));
    if let Some(frame) = summary.frame_us {
        ui.label(format!(
            "{:.0} frames/s (frame {:.2} ms median, {:.2} ms p90)",
            1e6 / frame.median.max(1.0),
            frame.median / 1e3,
            frame.p90 / 1e3
        ));
    }
    let cell = |p: Option<crate::stats::Percentiles>| {
        p.map(|p| format!("{:.1} / {:.1}", p.median, p.p90)).unwrap_or_else(|| "–".to_owned())
    };
    egui::Grid::new("stage_times").striped(true).show(ui, |ui| {
        ui.strong("stage");
        ui.strong("host µs (median / p90)");
        ui.strong("GPU µs");
        ui.end_row();
        for stage in Stage::ALL {
            let Some(times) = summary.stage(stage) else { continue };
            ui.colored_label(colour(stage), stage.name());
            ui.label(cell(times.host_us));
            ui.label(cell(times.gpu_us));
            ui.end_row();
        }
    });
    ui.horizontal(|ui| {
        ui.radio_value(&mut state.gpu, false, "host time");
        ui.radio_value(&mut state.gpu, true, "GPU time");
    });
    let skip = history.len().saturating_sub(TIMELINE_FRAMES);
    let samples: Vec<&FrameSample> = history.samples().skip(skip).collect();
    let value = |sample: &FrameSample, stage: Stage| {
        if state.gpu { sample.stages.gpu(stage) } else { sample.stages.host(stage) }
    };
    let shown = decimate(&samples, ui.available_width() as usize, |sample| {
        Stage::ALL.iter().filter_map(|&stage| value(sample, stage)).sum()
    });
    let mut charts: Vec<egui_plot::BarChart> = Vec::new();
    for stage in Stage::ALL {
        if !shown.frames.iter().any(|sample| value(sample, stage).is_some()) {
            continue;
        }
        // One bar per frame shown in every chart (0 where the stage did not run): stacking pairs
        // the charts' bars by index.
        let bars: Vec<egui_plot::Bar> = shown
            .frames
            .iter()
            .map(|sample| {
                let us = value(sample, stage).unwrap_or(0.0);
                egui_plot::Bar::new(sample.frame as f64, us).width(shown.bucket as f64)
            })
            .collect();
        let chart = egui_plot::BarChart::new(stage.name(), bars).color(colour(stage));
        let refs: Vec<&egui_plot::BarChart> = charts.iter().collect();
        let chart = chart.stack_on(&refs);
        charts.push(chart);
    }
    egui_plot::Plot::new("stage_timeline")
        .height(140.0)
        .include_y(0.0)
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        .y_axis_label("µs")
        .legend(egui_plot::Legend::default())
        .show(ui, |plot| {
            for chart in charts {
                plot.bar_chart(chart);
            }
        });
    let mut message = None;
    ui.horizontal(|ui| {
        for (label, extension) in [("save CSV", "csv"), ("save JSON", "json")] {
            if ui.button(label).clicked() {
                let path = export_path("timeline", extension);
                message = Some(match export(history, &path) {
                    Ok(()) => format!("wrote {}", path.display()),
                    Err(error) => error.to_string(),
                });
            }
        }
    });
    message
}

/// The frames a plot `columns` pixels wide shows: all of them when they fit, else one per bucket
/// of `bucket` consecutive frames — the one whose stages add up to most, so a spike stays in
/// sight and each bar's stack is one real frame.
struct Decimated<'a> {
    frames: Vec<&'a FrameSample>,
    bucket: usize,
}

fn decimate<'a>(samples: &[&'a FrameSample], columns: usize, total: impl Fn(&FrameSample) -> f64) -> Decimated<'a> {
    let bucket = samples.len().div_ceil(columns.max(1)).max(1);
    let frames = samples
        .chunks(bucket)
        .filter_map(|chunk| chunk.iter().copied().max_by(|a, b| total(a).total_cmp(&total(b))))
        .collect();
    Decimated { frames, bucket }
}

/// A file name for an export from the panel, in the working folder: `interop-lab-WHAT-SECONDS.EXT`.
pub fn export_path(what: &str, extension: &str) -> PathBuf {
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from(format!("interop-lab-{what}-{seconds}.{extension}"))
}

/// Writes every recorded frame: CSV (one row per frame, host and GPU µs per stage) for a `.csv`
/// path, JSON (the frames and their summary) otherwise.
pub fn export(history: &FrameHistory, path: &Path) -> Result<()> {
    let text = if path.extension().is_some_and(|e| e == "csv") { to_csv(history) } else { to_json(history)? };
    crate::output::write(path, text.as_bytes())
}

/// The frames as CSV.
pub fn to_csv(history: &FrameHistory) -> String {
    let mut out = String::from("frame,frame_us");
    for stage in Stage::ALL {
        out.push_str(&format!(",{0}_host_us,{0}_gpu_us", stage.name()));
    }
    out.push('\n');
    let number = |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| format!("{v:.3}")).unwrap_or_default();
    for sample in history.samples() {
        out.push_str(&format!("{},{}", sample.frame, number(Some(sample.frame_us))));
        for stage in Stage::ALL {
            out.push_str(&format!(",{},{}", number(sample.stages.host(stage)), number(sample.stages.gpu(stage))));
        }
        out.push('\n');
    }
    out
}

fn to_json(history: &FrameHistory) -> Result<String> {
    let frames: Vec<serde_json::Value> = history
        .samples()
        .map(|s| {
            let stages: serde_json::Map<String, serde_json::Value> = Stage::ALL
                .iter()
                .filter(|&&stage| s.stages.host(stage).is_some() || s.stages.gpu(stage).is_some())
                .map(|&stage| {
                    (stage.name().to_owned(), serde_json::json!({ "host_us": s.stages.host(stage), "gpu_us": s.stages.gpu(stage) }))
                })
                .collect();
            serde_json::json!({ "frame": s.frame, "frame_us": s.frame_us.is_finite().then_some(s.frame_us), "stages": stages })
        })
        .collect();
    let value = serde_json::json!({ "summary": history.summary(None), "frames": frames });
    serde_json::to_string_pretty(&value).map_err(|e| Error::InvalidInput(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::StageTimes;

    #[test]
    fn decimation_keeps_every_frame_that_fits_and_the_spike_of_each_bucket() {
        let samples: Vec<FrameSample> = (0..10)
            .map(|frame| {
                let mut stages = StageTimes::default();
                stages.set_host(Stage::Kernel, if frame == 7 { 100.0 } else { frame as f64 });
                FrameSample { frame, frame_us: 1.0, stages }
            })
            .collect();
        let refs: Vec<&FrameSample> = samples.iter().collect();
        let total = |s: &FrameSample| s.stages.host(Stage::Kernel).unwrap_or(0.0);
        let all = decimate(&refs, 300, total);
        assert_eq!((all.frames.len(), all.bucket), (10, 1));
        // 4 columns for 10 frames: buckets of 3 (0–2, 3–5, 6–8, 9), each its largest.
        let four = decimate(&refs, 4, total);
        assert_eq!(four.bucket, 3);
        assert_eq!(four.frames.iter().map(|s| s.frame).collect::<Vec<_>>(), vec![2, 5, 7, 9]);
    }

    #[test]
    fn csv_has_a_column_per_stage_and_a_row_per_frame() {
        let mut history = FrameHistory::new(10);
        for frame in 0..3 {
            let mut stages = StageTimes::default();
            stages.set_host(Stage::Map, 10.0 + frame as f64);
            stages.set_gpu(Stage::Kernel, 2.5);
            history.push(FrameSample { frame, frame_us: 1000.0, stages });
        }
        let csv = to_csv(&history);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("frame,frame_us,map_host_us,map_gpu_us,kernel_host_us"), "{}", lines[0]);
        assert_eq!(lines[0].split(',').count(), 2 + 2 * Stage::ALL.len());
        assert!(lines[3].starts_with("2,1000.000,12.000,,,2.500"), "{}", lines[3]);
        let json: serde_json::Value = serde_json::from_str(&to_json(&history).expect("json")).expect("valid");
        assert_eq!(json["frames"].as_array().map(Vec::len), Some(3));
        assert_eq!(json["frames"][1]["stages"]["map"]["host_us"], 11.0);
    }
}
