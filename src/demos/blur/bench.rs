//! `interop-lab bench blur`: every filter at each σ, kernels alone (CUDA events around both
//! passes, median after a warm-up), then full headless frames per route through the app itself;
//! on the CPU backend, the CPU filters.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

use super::cpu as blur_cpu;
use super::image::SourceImage;
use super::kernels::{BlurKernels, Filter, Job, Output as BlurOutput};
use super::{BlurSettings, Route, bytes_moved};
use crate::graphics::GraphicsApi;
use crate::cuda::{DeviceBuffer, DeviceInfo, DeviceSpan, Stream};
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, FrameRun, FrameRunner, Repeats};
use crate::pixel::PixelFormat;
use crate::progress::Progress;
use crate::runtime::{self, BackendRequest, CudaOptions, TransferRequest};
use crate::stats::Percentiles;
use crate::stop::StopRequest;
use crate::error::{Error, Result};

/// What `bench blur` measures.
#[derive(Debug, Clone)]
pub struct BlurBench {
    /// Image size (a generated test pattern).
    pub size: [u32; 2],
    /// σ values.
    pub sigmas: Vec<f64>,
    /// Pixel format.
    pub format: PixelFormat,
    /// Filters to time (empty: all).
    pub filters: Vec<Filter>,
    /// Threads per block (`None`: each filter's own default).
    pub block: Option<[u32; 2]>,
    /// Rows per segment of the recursive filter (`None`: automatic).
    pub segment: Option<u32>,
    /// Outputs per thread per tile row.
    pub pixels_per_thread: u32,
    /// Untimed runs first.
    pub warmup: u32,
    /// Timed runs (median reported).
    pub repeats: u32,
    /// Headless frames per route (0: skip).
    pub frames: u32,
    /// Backend and device.
    pub cuda: CudaOptions,
    /// Where to write the JSON.
    pub json: Option<PathBuf>,
    /// Where to write each frame run's anatomy as a Chrome trace (CUDA only: the CPU backend runs
    /// no frames, and says so).
    pub trace_dir: Option<PathBuf>,
    /// Set by Ctrl-C or SIGTERM: finish the filter (CUDA) or the run (CPU) being timed, then report
    /// what was measured.
    pub stop: StopRequest,
}

/// The naive filter is timed only up to this radius: beyond it one launch takes seconds.
const NAIVE_BENCH_RADIUS: u32 = 16;

/// Runs `bench blur`: kernels alone (CUDA events around both passes), then full headless frames
/// per route at the σ closest to 10 with the fastest filter there.
pub fn blur(options: &BlurBench, frames: FrameRunner<'_>) -> Result<BenchReport> {
    check_options(options)?;
    let filters = if options.filters.is_empty() { Filter::ALL.to_vec() } else { options.filters.clone() };
    let cuda = match runtime::cuda_without_gl(&options.cuda) {
        Ok(cuda) => cuda,
        Err(error) if options.cuda.backend != BackendRequest::Cuda => {
            return blur_cpu(options, &filters, &error.to_string());
        }
        Err(error) => return Err(error),
    };
    // Checked (and made) only now: the CPU backend runs no frames, so it writes no traces.
    crate::output::check_optional(&options.trace_dir, crate::output::OutputKind::Folder, "--trace-dir")?;
    let device = cuda.context.device().clone();
    let bandwidth = device.dram_bandwidth_bytes_per_s();
    let source = super::image::test_pattern(options.size[0], options.size[1]);
    let pixels = f64::from(options.size[0]) * f64::from(options.size[1]);
    let stream = Stream::new(&cuda.context)?;
    let mut kernels = BlurKernels::load(&cuda, options.format, options.pixels_per_thread)?;
    let bytes = source.bytes(options.format);
    let mut input = DeviceBuffer::new(&cuda.context, bytes.len())?;
    input.upload(&stream, &bytes)?;
    let scratch = DeviceBuffer::new(&cuda.context, pixels as usize * 16)?;
    let output = DeviceBuffer::new(&cuda.context, bytes.len())?;
    let recursive_block = options.block.unwrap_or(Filter::Recursive.default_block());
    let mut table = table_head(options, &device, &kernels, &filters, recursive_block);
    let mut results = Vec::new();
    let progress = Progress::new("bench blur", (options.sigmas.len() * filters.len()) as u64, &options.stop);
    for &sigma in &options.sigmas {
        if progress.stopped() {
            break;
        }
        let settings = BlurSettings {
            sigma,
            format: options.format,
            block: options.block,
            segment: options.segment,
            pixels_per_thread: options.pixels_per_thread,
            ..BlurSettings::default()
        };
        let weights: Vec<f32> =
            blur_cpu::gaussian_weights(sigma, settings.radius() as usize).iter().map(|&w| w as f32).collect();
        let mut weights_buffer = DeviceBuffer::new(&cuda.context, weights.len() * 4)?;
        weights_buffer.upload(&stream, bytemuck::cast_slice(&weights))?;
        for &filter in &filters {
            if progress.stopped() {
                break;
            }
            progress.step(format!("σ {sigma} {}", filter.name()));
            progress.done_one();
            let settings = BlurSettings { filter, ..settings.clone() };
            if let Some(reason) = why_skipped(options, &kernels, &settings)? {
                table.push_str(&format!("{:>7} {:<10} skipped: {reason}\n", sigma, filter.name()));
                results.push(json!({ "sigma": sigma, "filter": filter, "skipped": reason }));
                continue;
            }
            let job = settings.job(options.size);
            let spans = [input.span(), scratch.span(), weights_buffer.span(), output.span()];
            let passes = time_passes(options, &stream, &mut kernels, &job, spans)?;
            let (line, result) = kernel_row(options, &settings, passes, pixels, bandwidth);
            table.push_str(&line);
            results.push(result);
        }
    }
    // Full frames at the σ closest to 10 with the filter that was fastest there.
    let frame_sigma =
        options.sigmas.iter().copied().min_by(|a, b| (a - 10.0).abs().total_cmp(&(b - 10.0).abs())).unwrap_or(10.0);
    let mut frame_results = Vec::new();
    if let (Some((filter, blur_us)), true) = (fastest_at(&results, frame_sigma), options.frames > 0 && !progress.stopped())
    {
        progress.step(format!("full frames, σ {frame_sigma}"));
        let fastest = Fastest { sigma: frame_sigma, filter, blur_us };
        frame_results = full_frames(options, frames, fastest, &source, &mut table)?;
    }
    let json = json!({
        "benchmark": "blur",
        "backend": "cuda",
        "device": device,
        "size": options.size,
        "format": options.format,
        "block": options.block,
        "segment": options.segment,
        "recursive_segment_rows": kernels.recursive_segment(recursive_block, options.segment),
        "pixels_per_thread": options.pixels_per_thread,
        "dram_bytes_per_s": bandwidth,
        "method": format!("CUDA events before, between and after the passes; {} warm-up then {} timed, median; bytes = each pass's input read once and output written once", options.warmup, options.repeats),
        "kernels": results,
        "frames": frame_results,
    });
    BenchReport::finish(json, table, &options.stop, &options.json)
}

/// What is wrong with the options before anything runs: the image size, no σ or repeat, a σ out
/// of range, a recursive segment the kernels cannot take.
fn check_options(options: &BlurBench) -> Result<()> {
    super::image::check_size(options.size[0], options.size[1]).map_err(Error::InvalidInput)?;
    if options.sigmas.is_empty() || options.repeats == 0 {
        return Err(Error::InvalidInput("bench blur needs at least one σ and one repeat".to_owned()));
    }
    let (low, high) = super::SIGMA_RANGE;
    if let Some(sigma) = options.sigmas.iter().find(|s| !(s.is_finite() && **s >= low && **s <= high)) {
        return Err(Error::InvalidInput(format!("--sigma {sigma}: every σ must be in {low}..={high}")));
    }
    if let Some(segment) = options.segment {
        // Up front: a bad segment is an error, not a skipped row.
        super::kernels::check_recursive_segment(options.format, segment)?;
    }
    Ok(())
}

/// Why a filter at a σ is not timed: its settings are invalid, it is naive beyond
/// [`NAIVE_BENCH_RADIUS`], or the device cannot launch its job. A recursive segment set by hand
/// that cannot launch is bad input, not a row to skip: an error.
fn why_skipped(options: &BlurBench, kernels: &BlurKernels, settings: &BlurSettings) -> Result<Option<String>> {
    if let Err(error) = settings.validate() {
        return Ok(Some(error.to_string()));
    }
    if settings.filter == Filter::Naive && settings.radius() > NAIVE_BENCH_RADIUS {
        return Ok(Some(format!("naive not timed beyond radius {NAIVE_BENCH_RADIUS}: (2r+1)² taps per pixel")));
    }
    match kernels.validate(&settings.job(options.size)) {
        Ok(()) => Ok(None),
        Err(error) if settings.filter == Filter::Recursive && options.segment.is_some() => Err(error),
        Err(error) => Ok(Some(error.to_string())),
    }
}

/// The table's title, the recursive filter's geometry (when it runs) and the column heads.
fn table_head(
    options: &BlurBench,
    device: &DeviceInfo,
    kernels: &BlurKernels,
    filters: &[Filter],
    recursive_block: [u32; 2],
) -> String {
    let mut table = format!(
        "blur of a {}x{} {} image on {} (DRAM {:.0} GB/s theoretical), median of {} after {} warm-up\n",
        options.size[0],
        options.size[1],
        options.format.name(),
        device.name,
        device.dram_bandwidth_bytes_per_s() / 1e9,
        options.repeats,
        options.warmup
    );
    if filters.contains(&Filter::Recursive) {
        let rows = kernels.recursive_segment(recursive_block, options.segment);
        let chosen = if options.segment.is_some() { "--segment" } else { "auto" };
        table.push_str(&format!(
            "recursive: block {}x{}, segments of {rows} rows ({chosen}); the others: block {}\n",
            recursive_block[0],
            recursive_block[1],
            options.block.map(|b| format!("{}x{}", b[0], b[1])).unwrap_or_else(|| "64x4".to_owned())
        ));
    }
    table.push_str(&format!(
        "{:>7} {:<10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n",
        "sigma", "filter", "pass 1 µs", "pass 2 µs", "total µs", "Mpixel/s", "GB/s", "% DRAM"
    ));
    table
}

/// Times `job`'s passes: the warm-up untimed, then CUDA events before, between and after the
/// passes of each timed run. `spans`: input, scratch, weights, output. Returns the medians of
/// the first pass, the second and both.
fn time_passes(
    options: &BlurBench,
    stream: &Stream,
    kernels: &mut BlurKernels,
    job: &Job,
    spans: [DeviceSpan; 4],
) -> Result<[Percentiles; 3]> {
    let [input, scratch, weights, output] = spans;
    let run = |kernels: &mut BlurKernels, marks: Option<(&crate::cuda::timing::Marks<'_>, usize)>| {
        kernels.run(stream, job, input, scratch, weights, BlurOutput::Buffer(output), marks)
    };
    for _ in 0..options.warmup {
        run(kernels, None)?;
    }
    let mut ring = crate::cuda::timing::EventRing::new(stream.context(), options.repeats as usize, 3)?;
    for repeat in 0..options.repeats {
        let marks = ring.begin();
        marks.mark(0, stream)?;
        run(kernels, Some((&marks, 1)))?;
        marks.mark(2, stream)?;
        ring.commit(u64::from(repeat));
    }
    stream.synchronize()?;
    let mut passes = Vec::new();
    let mut interval = [0.0; 2];
    while ring.poll(&mut interval)?.is_some() {
        passes.push(interval);
    }
    let median = |of: &dyn Fn(&[f64; 2]) -> f64| {
        Percentiles::of(passes.iter().map(of)).ok_or_else(|| Error::Unavailable("no timings".to_owned()))
    };
    Ok([median(&|p| p[0])?, median(&|p| p[1])?, median(&|p| p[0] + p[1])?])
}

/// One filter's row in the table and its JSON: the passes' medians, pixel rate, bytes moved and
/// their share of DRAM bandwidth.
fn kernel_row(
    options: &BlurBench,
    settings: &BlurSettings,
    [first, second, total]: [Percentiles; 3],
    pixels: f64,
    bandwidth: f64,
) -> (String, serde_json::Value) {
    let (sigma, filter) = (settings.sigma, settings.filter);
    let moved = bytes_moved(filter, options.format, pixels);
    let gbps = moved / (total.median * 1e3);
    let line = format!(
        "{:>7} {:<10} {:>10.1} {:>10.1} {:>10.1} {:>10.0} {:>8.0} {:>8.1}\n",
        sigma,
        filter.name(),
        first.median,
        second.median,
        total.median,
        pixels / total.median,
        gbps,
        100.0 * moved / (total.median * 1e-6) / bandwidth
    );
    let result = json!({
        "sigma": sigma,
        "filter": filter,
        "radius": settings.radius(),
        "box_radii": blur_cpu::box_radii(sigma).0,
        "pass_1_us": first,
        "pass_2_us": second,
        "total_us": total,
        "megapixels_per_s": pixels / total.median,
        "bytes_moved": moved,
        "gigabytes_per_s": gbps,
        "percent_of_dram": 100.0 * moved / (total.median * 1e-6) / bandwidth,
    });
    (line, result)
}

/// The filter with the lowest median at `sigma` among the timed rows, and that median (µs).
fn fastest_at(results: &[serde_json::Value], sigma: f64) -> Option<(Filter, f64)> {
    results
        .iter()
        .filter(|r| r["sigma"].as_f64() == Some(sigma) && r["total_us"].is_object())
        .min_by(|a, b| {
            a["total_us"]["median"]
                .as_f64()
                .unwrap_or(f64::MAX)
                .total_cmp(&b["total_us"]["median"].as_f64().unwrap_or(f64::MAX))
        })
        .and_then(|r| {
            Some((serde_json::from_value::<Filter>(r["filter"].clone()).ok()?, r["total_us"]["median"].as_f64()?))
        })
}

/// The filter full frames run with: the fastest at the σ closest to 10, and its blur alone (µs).
struct Fastest {
    sigma: f64,
    filter: Filter,
    blur_us: f64,
}

/// Full headless frames through the app, per route: GL interop (texture and pixel buffer), the
/// host copy, and the Vulkan renderer's two routes. Adds their rows to `table`; returns their JSON.
fn full_frames(
    options: &BlurBench,
    frames: FrameRunner<'_>,
    fastest: Fastest,
    source: &SourceImage,
    table: &mut String,
) -> Result<Vec<serde_json::Value>> {
    let Fastest { sigma: frame_sigma, filter, blur_us } = fastest;
    let mut frame_results = Vec::new();
    // Both passes alone, back to back on the stream, set the rate frames could reach.
    let blurs_per_second = 1e6 / blur_us;
    table.push_str(&format!(
        "\nfull headless frames (blur + interop + draw), σ {frame_sigma}, {}; the blur alone: {blurs_per_second:.0}/s \
         (frames/s as a share of it in brackets):\n",
        filter.name()
    ));
    let image_path = std::env::temp_dir().join(format!("interop-lab-bench-{}.png", std::process::id()));
    super::image::save(&image_path, options.size, PixelFormat::Rgba8, &source.rgba8)?;
    // The last two: drawn by the Vulkan renderer, CUDA writing the image Vulkan allocated, or
    // a pixel buffer copied into it.
    for (route, transfer, renderer) in [
        (Route::Texture, TransferRequest::Interop, GraphicsApi::Gl),
        (Route::Pbo, TransferRequest::Interop, GraphicsApi::Gl),
        (Route::Pbo, TransferRequest::Copy, GraphicsApi::Gl),
        (Route::Texture, TransferRequest::Auto, GraphicsApi::Vulkan),
        (Route::Pbo, TransferRequest::Auto, GraphicsApi::Vulkan),
    ] {
        let settings = BlurSettings {
            image: Some(image_path.clone()),
            sigma: frame_sigma,
            filter,
            route,
            format: options.format,
            block: options.block,
            segment: options.segment,
            pixels_per_thread: options.pixels_per_thread,
            ..BlurSettings::default()
        };
        let cuda = CudaOptions { transfer, ..options.cuda.clone() };
        let name = run_name(route, transfer, renderer);
        let run = FrameRun {
            spec: DemoSpec::new(settings),
            frames: options.frames,
            size: [1280, 800],
            cuda,
            renderer,
            stop: options.stop.clone(),
            trace: crate::demo_kit::bench::trace_in(options.trace_dir.as_deref(), &name),
        };
        let measured = match frames(&run) {
            Ok(measured) => measured,
            Err(error) if renderer != GraphicsApi::Gl => {
                let label = format!("vulkan / {}", route.label(renderer));
                table.push_str(&format!("  {label:<48} not measured: {error}\n"));
                frame_results.push(json!({ "route": route, "transfer": "vulkan", "error": error.to_string() }));
                continue;
            }
            Err(error) => return Err(error),
        };
        let label = format!("{} / {}", measured.transfer.as_str().unwrap_or("?"), route.label(renderer));
        let share = measured.frames_per_second / blurs_per_second;
        table.push_str(&format!(
            "  {label:<48} {:>8.0} frames/s ({:.0} %)\n",
            measured.frames_per_second,
            100.0 * share
        ));
        frame_results.push(json!({
            "route": route,
            "transfer": measured.transfer,
            "frames_per_second": measured.frames_per_second,
            "blurs_per_second": blurs_per_second,
            "share_of_blur_rate": share,
            "timings_us": measured.timings,
        }));
    }
    std::fs::remove_file(&image_path).ok();
    Ok(frame_results)
}

/// The name of a full-frame run's trace: `blur-texture-gl-interop`, `blur-pbo-vulkan`, …
fn run_name(route: Route, transfer: TransferRequest, renderer: GraphicsApi) -> String {
    let runs_on = match renderer {
        GraphicsApi::Gl => format!("gl-{transfer:?}").to_lowercase(),
        other => other.flag().to_owned(),
    };
    format!("blur-{}-{runs_on}", format!("{route:?}").to_lowercase())
}

fn blur_cpu(options: &BlurBench, filters: &[Filter], why: &str) -> Result<BenchReport> {
    log::info!("bench blur on the CPU backend: {why}");
    let source = super::image::test_pattern(options.size[0], options.size[1]);
    let mut planes = super::cpu::Planes::default();
    let mut out = vec![0u8; source.rgba8.len() / 4 * options.format.bytes_per_pixel()];
    let pixels = f64::from(options.size[0]) * f64::from(options.size[1]);
    let mut table = format!(
        "blur of a {}x{} {} image on the CPU ({} threads)\n",
        options.size[0],
        options.size[1],
        options.format.name(),
        rayon::current_num_threads()
    );
    if let Some(dir) = &options.trace_dir {
        let note = format!(
            "--trace-dir {}: no traces are written on the CPU backend: it times the filters alone and runs no \
             frames, whose anatomy a trace is (frames need CUDA here); no folder was made",
            dir.display()
        );
        log::warn!("{note}");
        table.push_str(&format!("note: {note}\n"));
    }
    let mut results = Vec::new();
    let progress = Progress::new("bench blur (CPU)", (options.sigmas.len() * filters.len()) as u64, &options.stop);
    'sigmas: for &sigma in &options.sigmas {
        for &filter in filters {
            if progress.stopped() {
                break 'sigmas;
            }
            progress.step(format!("σ {sigma} {}", filter.name()));
            let settings = BlurSettings { sigma, filter, format: options.format, ..BlurSettings::default() };
            let skip = match settings.validate() {
                Err(error) => Some(error.to_string()),
                Ok(()) if filter == Filter::Naive && settings.radius() > NAIVE_BENCH_RADIUS => {
                    Some(format!("naive not timed beyond radius {NAIVE_BENCH_RADIUS}: (2r+1)² taps per pixel"))
                }
                Ok(()) => None,
            };
            if let Some(reason) = skip {
                table.push_str(&format!("  σ {sigma:>6} {:<10} skipped: {reason}\n", filter.name()));
                results.push(json!({ "sigma": sigma, "filter": filter, "skipped": reason }));
                progress.done_one();
                continue;
            }
            let mut times = Vec::new();
            let _ = Repeats::timed(options.repeats.min(5)).run(&options.stop, |_, _| {
                let started = Instant::now();
                super::run_cpu(&source, &settings, &mut planes, &mut out);
                times.push(started.elapsed().as_secs_f64() * 1e6);
                Ok(())
            })?;
            let timed_runs = times.len();
            let Some(total) = Percentiles::of(times.into_iter()) else {
                break 'sigmas; // stopped before a run of this filter was timed: it is left out
            };
            table.push_str(&format!(
                "  σ {sigma:>6} {:<10} {:>10.0} µs {:>8.1} Mpixel/s\n",
                filter.name(),
                total.median,
                pixels / total.median
            ));
            results.push(json!({
                "sigma": sigma,
                "filter": filter,
                "total_us": total,
                "timed_runs": timed_runs,
                "megapixels_per_s": pixels / total.median,
            }));
            progress.done_one();
        }
    }
    let json = json!({
        "benchmark": "blur",
        "backend": "cpu",
        "size": options.size,
        "format": options.format,
        "kernels": results,
    });
    BenchReport::finish(json, table, &options.stop, &options.json)
}
