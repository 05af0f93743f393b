//! `interop-lab bench transfer`: what each way of getting a kernel's output into a buffer the
//! graphics API draws costs per frame, for several buffer sizes: every GL path, and Vulkan memory
//! CUDA imports. A fill kernel (or the CPU) writes every byte; each frame ends when the graphics
//! API has executed everything issued, so the figure is the latency a frame pays. Ctrl-C or
//! SIGTERM ends it within a frame: the rows measured whole are reported, marked interrupted.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rayon::prelude::*;
use serde_json::json;

use super::fill::launch_fill;
use super::vulkan::{VULKAN_LABEL, VulkanBench};
use crate::args::CudaArgs;
use crate::cuda::{DeviceLimits, Function, Module, Stream};
use crate::demo_kit::bench::{BenchReport, Ran, Repeats};
use crate::error::{Error, Result};
use crate::gl;
use crate::gl::context::headless::HeadlessGl;
use crate::graphics::{Graphics, GraphicsApi};
use crate::numbers::{ByteCount, Ranged};
use crate::progress::Progress;
use crate::renderer::{self, Canvas, Renderer};
use crate::runtime::{self, CudaOptions};
use crate::stats::{FrameHistory, FrameSample, Percentiles, Stage, StageTimes};
use crate::stop::StopRequest;
use crate::transfer::{Access, SharedBuffer, Target, Transfer, TransferKind};

#[derive(Args, Debug)]
/// `interop-lab bench transfer`.
pub struct TransferBenchArgs {
    /// Buffer sizes, comma-separated, each 4 to 4G bytes, a multiple of 4 (K, M, G suffixes).
    #[arg(long, value_delimiter = ',', value_parser = BUFFER_BYTES, default_value = "1M,16M,64M")]
    pub bytes: Vec<usize>,
    /// Paths to measure, comma-separated (default: every one available here).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub path: Vec<TransferKindArg>,
    /// Buffers used in turn, comma-separated, each 1 to 4 buffers: from 2, the interop path maps
    /// the next frame's buffer during this frame and the external path's semaphores release it
    /// ahead (the other paths prepare nothing, so only depth 1 is run for them).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3", value_parser = Ranged::<u32>::new(1, 4).unit("buffers"))]
    pub pipeline_depth: Vec<u32>,
    /// Untimed frames first, 0 to 1000 frames.
    #[arg(long, default_value_t = 10, value_parser = crate::args::WARMUP.unit("frames"))]
    pub warmup: u32,
    /// Timed frames (median and p90 reported), 1 to 10000 frames.
    #[arg(long, default_value_t = 100, value_parser = crate::args::REPEATS.unit("frames"))]
    pub frames: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Graphics API the paths hand their buffers to: gl (a headless GL context; the default) or
    /// vulkan (the Vulkan renderer: its paths run through it, each frame ended by its next frame,
    /// which waits on the GPU for CUDA's signal).
    #[arg(long, value_enum, default_value_t = GraphicsApi::Gl)]
    pub renderer: GraphicsApi,
    /// Backend and device.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

impl TransferBenchArgs {
    /// The benchmark these flags ask for; `stop` (Ctrl-C, SIGTERM) ends it within a frame.
    pub fn options(&self, stop: &StopRequest) -> TransferBench {
        let on_gl = self.renderer == GraphicsApi::Gl;
        TransferBench {
            sizes: self.bytes.clone(),
            renderer: self.renderer,
            paths: self.path.iter().filter_map(|p| if on_gl { p.gl_path() } else { Some(p.kind()) }).collect(),
            vulkan: on_gl && (self.path.is_empty() || self.path.contains(&TransferKindArg::Vulkan)),
            depths: self.pipeline_depth.clone(),
            warmup: self.warmup,
            frames: self.frames,
            cuda: self.cuda.options(),
            json: self.json.clone(),
            stop: stop.clone(),
        }
    }
}

/// `--path` values of `bench transfer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransferKindArg {
    /// GL interop.
    Interop,
    /// External memory, ordered by host waits.
    External,
    /// External memory, ordered on the GPU by semaphores (GL_EXT_semaphore_fd).
    ExternalSemaphores,
    /// Copy through pinned host memory.
    Copy,
    /// Copy through pageable host memory.
    Pageable,
    /// The CPU path.
    Cpu,
    /// Vulkan memory imported by CUDA, ordered by a timeline semaphore.
    Vulkan,
}

impl TransferKindArg {
    /// The path this names.
    fn kind(self) -> TransferKind {
        self.gl_path().unwrap_or(TransferKind::Vulkan)
    }

    /// The GL path this names (`None` for Vulkan, which is not a GL path).
    fn gl_path(self) -> Option<TransferKind> {
        match self {
            TransferKindArg::Interop => Some(TransferKind::Interop),
            TransferKindArg::External => Some(TransferKind::External),
            TransferKindArg::ExternalSemaphores => Some(TransferKind::ExternalSemaphores),
            TransferKindArg::Copy => Some(TransferKind::HostCopy),
            TransferKindArg::Pageable => Some(TransferKind::HostCopyPageable),
            TransferKindArg::Cpu => Some(TransferKind::Cpu),
            TransferKindArg::Vulkan => None,
        }
    }
}

/// What `bench transfer` measures.
#[derive(Debug, Clone)]
pub struct TransferBench {
    /// Buffer sizes in bytes (multiples of 4).
    pub sizes: Vec<usize>,
    /// The graphics API the paths hand their buffers to.
    pub renderer: GraphicsApi,
    /// Paths to measure through `renderer` (empty with `vulkan` set, or on the Vulkan renderer:
    /// every one available; empty without: none).
    pub paths: Vec<TransferKind>,
    /// On GL: the Vulkan rows too, taken apart below the seam (`bench::vulkan`; where they are
    /// available, the table says why not otherwise).
    pub vulkan: bool,
    /// Pipeline depths (buffers used in turn) for the interop path.
    pub depths: Vec<u32>,
    /// Untimed frames first.
    pub warmup: u32,
    /// Timed frames.
    pub frames: u32,
    /// Backend and device.
    pub cuda: CudaOptions,
    /// Where to write the JSON.
    pub json: Option<PathBuf>,
    /// Set by Ctrl-C or SIGTERM: finish the frame being run, then report the rows measured whole.
    pub stop: StopRequest,
}

/// Parses `1M`, `16M`, `512K`, `4096` into bytes.
pub fn parse_bytes(text: &str) -> std::result::Result<usize, String> {
    BUFFER_BYTES.parse(text)
}

/// One row of the table at each size, planned before the run so that its progress can count them.
#[derive(Debug, Clone)]
enum Row {
    /// A GL path at a pipeline depth.
    Gl(TransferKind, u32),
    /// A GL path this context or device does not offer, and why.
    Unavailable(TransferKind, String),
    /// The Vulkan rows: the hand-off and the rows that take it apart.
    Vulkan,
}

/// The rows run at each size: every path asked for (or available) at each depth that changes
/// it (from 2, only the paths that prepare the next buffer), and Vulkan last when asked for.
fn plan(options: &TransferBench, depths: &[u32], selection: &runtime::Selection) -> Vec<Row> {
    let available = selection.available_transfers();
    let every_path = options.paths.is_empty() && (options.vulkan || options.renderer != GraphicsApi::Gl);
    let paths: Vec<TransferKind> = if every_path { available.clone() } else { options.paths.clone() };
    let mut rows = Vec::new();
    for kind in paths {
        for &depth in depths {
            // Only these prepare the next buffer: a deeper ring changes nothing elsewhere.
            if depth > 1 && !prepares_next(kind) {
                continue;
            }
            if available.contains(&kind) {
                rows.push(Row::Gl(kind, depth));
            } else if depth == 1 {
                let why = match selection.why_unavailable(kind) {
                    Some(why) => why.to_owned(),
                    None if options.renderer == GraphicsApi::Gl => {
                        "not available with this GL context and device".to_owned()
                    }
                    None => format!("the {} renderer does not offer it", options.renderer.label()),
                };
                rows.push(Row::Unavailable(kind, why));
            }
        }
    }
    if options.vulkan {
        rows.push(Row::Vulkan);
    }
    rows
}

/// Whether `kind` prepares the next frame's buffer during this one (the paths a pipeline depth
/// changes).
fn prepares_next(kind: TransferKind) -> bool {
    matches!(kind, TransferKind::Interop | TransferKind::ExternalSemaphores)
}

/// The buffer sizes the transfer and map benches take: whole 4-byte words, up to 4 GiB.
pub const BUFFER_BYTES: ByteCount = ByteCount::new(4, 4 << 30, 4);

/// Runs the benchmark on a headless GL context. A stop request ends it within one frame; the
/// rows measured whole are reported, marked interrupted.
pub fn run(options: &TransferBench) -> Result<BenchReport> {
    if options.sizes.is_empty() || options.frames == 0 {
        return Err(Error::InvalidInput("bench transfer needs at least one size and one frame".to_owned()));
    }
    if let Some(depth) = options.depths.iter().find(|&&d| !(1..=4).contains(&d)) {
        return Err(Error::InvalidInput(format!("--pipeline-depth {depth}: 1 to 4 buffers")));
    }
    crate::output::check_optional(&options.json, crate::output::OutputKind::Data, "--json")?;
    let depths = if options.depths.is_empty() { vec![1] } else { options.depths.clone() };
    match options.renderer {
        GraphicsApi::Gl => {
            let context = HeadlessGl::new(runtime::preferred_cuda_device(&options.cuda))?;
            let gl = context.gl().clone();
            let selection = runtime::select(&options.cuda, &gl, &|name| context.proc_address(name));
            let about = json!({ "gl": crate::gl::GlInfo::query(&gl) });
            measure_rows(options, &depths, &selection, FrameEnd::GlFence(&gl), about)
        }
        api => {
            let canvas = Canvas::Offscreen { size: [64, 64] };
            let (mut renderer, selection) = renderer::open(api, canvas, &options.cuda, None)?;
            let about = json!({ "renderer_info": renderer.info() });
            measure_rows(options, &depths, &selection, FrameEnd::Renderer(renderer.as_mut()), about)
        }
    }
}

/// Every row at every size, each frame ended by `end`; `about` describes the graphics side in
/// the JSON.
fn measure_rows(
    options: &TransferBench,
    depths: &[u32],
    selection: &runtime::Selection,
    end: FrameEnd<'_>,
    about: serde_json::Value,
) -> Result<BenchReport> {
    let stream = match &selection.cuda {
        Some(cuda) => Some(std::rc::Rc::new(Stream::new(&cuda.context)?)),
        None => None,
    };
    let kernel = match &selection.cuda {
        Some(cuda) => {
            let compiled = cuda.compiler.compile(&super::fill::KERNEL, &[])?;
            let module = Module::load(&cuda.context, &compiled)?;
            Some((module.function("fill")?, DeviceLimits::from(cuda.context.device())))
        }
        None => None,
    };
    let device = selection.cuda.as_ref().map(|c| c.context.device().name.clone()).unwrap_or_else(|| "CPU".to_owned());
    // The Vulkan path: set up once, or the reason it cannot run here (reported in its rows).
    let mut vulkan = options.vulkan.then(|| match (&selection.cuda, &stream) {
        (Some(cuda), Some(stream)) => VulkanBench::new(&cuda.context, stream).map_err(|e| e.to_string()),
        _ => Err("it needs CUDA, which is not running".to_owned()),
    });
    let rows = plan(options, depths, selection);
    let mut table = header(options, &device, depths, &rows);
    let mut gl_rows = PathRows { end, cuda: selection.cuda.as_deref(), stream: stream.as_ref(), kernel };
    let progress = Progress::new("bench transfer", (options.sizes.len() * rows.len()) as u64, &options.stop);
    let mut results = Vec::new();
    'sizes: for &bytes in &options.sizes {
        for row in &rows {
            if progress.stopped() {
                break 'sizes;
            }
            let measured = match row {
                Row::Unavailable(kind, why) => Some(skipped_row(bytes, &json!(kind), kind.label(), why)),
                Row::Gl(kind, depth) => {
                    progress.step(format!("{} B, {}, depth {depth}", bytes, kind.label()));
                    gl_rows.measure(*kind, *depth, bytes, options)?
                }
                Row::Vulkan => {
                    progress.step(format!("{bytes} B, {VULKAN_LABEL}"));
                    Some(vulkan_rows(&mut vulkan, &mut gl_rows.kernel, bytes, options)?)
                }
            };
            // `None`: a stop cut the row short; it is left out, the rows before are kept.
            let Some((lines, row_results)) = measured else {
                break 'sizes;
            };
            table.push_str(&lines);
            results.extend(row_results);
            progress.done_one();
        }
    }
    let mut json = json!({
        "benchmark": "transfer",
        "device": device,
        "renderer": options.renderer,
        "method": format!(
            "{} warm-up frames, then {} timed; a frame: the path's run (fill kernel or CPU loop writing every byte) and, \
             on GL, a fence wait (the Vulkan rows taken apart: a submission that waits for CUDA's semaphore signal and \
             copies the last 16 bytes, then a host wait for its signal), on the Vulkan renderer its next frame (which \
             waits on the GPU for CUDA's signal) submitted and waited for; wall-clock median and p90. period_us: as \
             many frames again enqueued back to back with one wait at the end, their wall time over their count; the \
             'vulkan_period' rows: two buffers in turn, frames enqueued with no host wait, the timed frames' wall time \
             over their count",
            options.warmup, options.frames
        ),
        "results": results,
    });
    if let (Some(json), serde_json::Value::Object(about)) = (json.as_object_mut(), about) {
        json.extend(about);
    }
    BenchReport::finish(json, table, &options.stop, &options.json)
}

/// The table's title, a note on depths that change nothing here, and the column heads.
fn header(options: &TransferBench, device: &str, depths: &[u32], rows: &[Row]) -> String {
    let mut table = format!(
        "transfer paths on {device}: per-frame latency (fill every byte, then wait for {}), median of {} frames; \
         period: the same frames enqueued back to back, one wait at the end\n",
        options.renderer.label(),
        options.frames
    );
    // Depths beyond 1 change only the paths that prepare the next buffer: said when none of
    // those runs here, instead of leaving the asked-for depth out without a word.
    let deeper: Vec<u32> = depths.iter().copied().filter(|&depth| depth > 1).collect();
    let any_prepares = rows.iter().any(|row| matches!(row, Row::Gl(kind, _) if prepares_next(*kind)));
    if !deeper.is_empty() && !any_prepares {
        table.push_str(&format!(
            "note: --pipeline-depth {} not run: only GL interop and external + semaphores prepare the next buffer \
             (a deeper ring changes nothing on the other paths), and neither runs here\n",
            deeper.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ));
    }
    table.push_str(&format!(
        "{:>9} {:<22} {:>5} {:>10} {:>10} {:>10} {:>10}  {}\n",
        "bytes", "path", "depth", "frame µs", "p90 µs", "GB/s", "period µs", "stages (host µs; map: GPU µs too)"
    ));
    table
}

/// The Vulkan rows at `bytes`, or the one that says why they cannot run here. Those measured
/// whole before a stop are returned.
fn vulkan_rows(
    vulkan: &mut Option<std::result::Result<VulkanBench, String>>,
    kernel: &mut Option<(Function, DeviceLimits)>,
    bytes: usize,
    options: &TransferBench,
) -> Result<(String, Vec<serde_json::Value>)> {
    match vulkan {
        Some(Ok(bench)) => {
            let (function, limits) =
                kernel.as_mut().ok_or_else(|| Error::Unavailable("fill kernel not loaded".to_owned()))?;
            let repeats = Repeats { warmup: options.warmup, timed: options.frames };
            bench.run(bytes, repeats, function, limits, &options.stop)
        }
        Some(Err(why)) => Ok(skipped_row(bytes, &json!("vulkan"), VULKAN_LABEL, why)),
        None => Ok((String::new(), Vec::new())),
    }
}

/// The line and JSON row of a path that cannot run here, with the reason.
fn skipped_row(bytes: usize, path: &serde_json::Value, label: &str, why: &str) -> (String, Vec<serde_json::Value>) {
    let line = format!("{bytes:>9} {label:<22} not available here: {why}\n");
    (line, vec![json!({ "bytes": bytes, "path": path, "skipped": why })])
}

/// What ends a frame: the graphics API has executed everything issued after the path's run.
enum FrameEnd<'a> {
    /// A GL fence wait (a headless GL context).
    GlFence(&'a glow::Context),
    /// The renderer's next frame (on Vulkan it waits on the GPU for CUDA's signal), submitted;
    /// waited for at the end.
    Renderer(&'a mut dyn Renderer),
}

impl FrameEnd<'_> {
    /// The context the paths make their buffers in and run with.
    fn graphics(&self) -> Graphics<'_> {
        match self {
            FrameEnd::GlFence(gl) => Graphics::Gl(gl),
            FrameEnd::Renderer(renderer) => renderer.graphics(),
        }
    }

    /// Issues what follows frame `frame`'s run on the graphics side, without waiting for it.
    fn enqueue(&mut self, frame: u64) -> Result<()> {
        match self {
            FrameEnd::GlFence(_) => Ok(()),
            FrameEnd::Renderer(renderer) => {
                if renderer.begin_frame(frame)? {
                    renderer.end_frame(false)?;
                }
                Ok(())
            }
        }
    }

    /// Waits until the graphics API has executed everything issued.
    fn wait(&mut self) -> Result<()> {
        match self {
            FrameEnd::GlFence(gl) => gl::wait_for_gl(gl),
            FrameEnd::Renderer(renderer) => renderer.finish(),
        }
    }
}

/// What the rows run with: how a frame ends, CUDA when it runs, and the fill kernel.
struct PathRows<'a, 'g> {
    end: FrameEnd<'g>,
    cuda: Option<&'a runtime::CudaRuntime>,
    stream: Option<&'a std::rc::Rc<Stream>>,
    kernel: Option<(Function, DeviceLimits)>,
}

/// What a GL row's frames measured.
struct GlFrames {
    frame_us: Vec<f64>,
    history: FrameHistory,
    period_us: f64,
}

impl PathRows<'_, '_> {
    /// Measures `kind` at `bytes` with `depth` buffers in turn: its table line and JSON row (or
    /// why it could not start); `None` when a stop came before its end.
    fn measure(
        &mut self,
        kind: TransferKind,
        depth: u32,
        bytes: usize,
        options: &TransferBench,
    ) -> Result<Option<(String, Vec<serde_json::Value>)>> {
        // A path GL offers can still fail to start (external + semaphores needs a Vulkan device
        // on the CUDA device): its row says why, the others run.
        let mut path = match runtime::create_transfer(self.cuda, self.stream, kind) {
            Ok(path) => path,
            Err(error) => return Ok(Some(skipped_row(bytes, &json!(kind), kind.label(), &error.to_string()))),
        };
        let mut ring = Vec::with_capacity(depth as usize);
        for _ in 0..depth {
            ring.push(path.create_buffer(self.end.graphics(), &vec![0u8; bytes])?);
        }
        let measured = self.frames(path.as_mut(), &mut ring, options);
        let mut all: Vec<&mut SharedBuffer> = ring.iter_mut().collect();
        let released = path.release_prepared(&mut all);
        for buffer in ring {
            buffer.destroy(self.end.graphics());
        }
        let Some(measured) = measured? else {
            return Ok(None);
        };
        released?;
        let frame =
            Percentiles::of(measured.frame_us.into_iter()).ok_or_else(|| Error::Unavailable("no frames".to_owned()))?;
        let summary = measured.history.summary(None);
        let stages: Vec<String> = summary
            .stages
            .iter()
            .filter_map(|s| {
                let host = s.host_us?;
                Some(match (s.stage, s.gpu_us) {
                    (Stage::Map, Some(gpu)) => format!("map {:.0} (GPU {:.0})", host.median, gpu.median),
                    _ => format!("{} {:.0}", s.stage.name(), host.median),
                })
            })
            .collect();
        let gbps = bytes as f64 / (frame.median * 1e3);
        let period = measured.period_us;
        let line = format!(
            "{bytes:>9} {:<22} {depth:>5} {:>10.1} {:>10.1} {:>10.2} {period:>10.1}  {}\n",
            kind.label(),
            frame.median,
            frame.p90,
            gbps,
            stages.join(", ")
        );
        let map_unmap = [Stage::Map, Stage::Unmap].iter().any(|&s| summary.stage(s).is_some());
        let result = json!({
            "bytes": bytes,
            "path": kind,
            "pipeline_depth": depth,
            "frame_us": frame,
            "period_us": period,
            "gigabytes_per_s": gbps,
            "maps_and_unmaps": map_unmap,
            "stages_us": summary.stages,
        });
        Ok(Some((line, vec![result])))
    }

    /// The warm-up and timed frames, each waited for, then as many again enqueued back to back
    /// with one wait at the end (as a renderer does; whatever a path waits for inside its run
    /// still counts; their GPU stage times are not kept). `None` when a stop came first.
    fn frames(
        &mut self,
        path: &mut dyn Transfer,
        ring: &mut [SharedBuffer],
        options: &TransferBench,
    ) -> Result<Option<GlFrames>> {
        let mut history = FrameHistory::new(options.frames as usize);
        let mut frame_us = Vec::with_capacity(options.frames as usize);
        let latency = Repeats { warmup: options.warmup, timed: options.frames };
        let ran = latency.run(&options.stop, |frame, timed| {
            let started = Instant::now();
            let times = self.frame(path, ring, frame)?;
            // The graphics API uses the buffer: the frame ends when it has executed everything
            // issued.
            self.end.enqueue(frame)?;
            self.end.wait()?;
            if timed {
                frame_us.push(started.elapsed().as_secs_f64() * 1e6);
                history.push(FrameSample { frame, frame_us: f64::NAN, stages: times });
            }
            while let Some(late) = path.poll_gpu_times()? {
                history.add_late(late);
            }
            Ok(())
        })?;
        path.synchronize()?;
        while let Some(late) = path.poll_gpu_times()? {
            history.add_late(late);
        }
        if ran == Ran::Stopped {
            return Ok(None);
        }
        let started = Instant::now();
        let ran = Repeats::timed(options.frames).run(&options.stop, |index, _| {
            self.frame(path, ring, latency.total() + index)?;
            self.end.enqueue(latency.total() + index)?;
            while path.poll_gpu_times()?.is_some() {}
            Ok(())
        })?;
        self.end.wait()?;
        path.synchronize()?;
        let period_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(options.frames);
        Ok((ran == Ran::All).then_some(GlFrames { frame_us, history, period_us }))
    }

    /// One frame: the path's run on the ring's slot for `frame` (from depth 2 the next slot is
    /// prepared during it: mapped ahead by GL interop, signalled ahead by the external path's
    /// semaphores), the fill kernel or the CPU writing every byte.
    fn frame(&mut self, path: &mut dyn Transfer, ring: &mut [SharedBuffer], frame: u64) -> Result<StageTimes> {
        let value = frame as u32;
        let slot = (frame % ring.len() as u64) as usize;
        let (this, next) = crate::transfer::this_and_next(ring, slot);
        let mut buffers = [(this, Access::Write)];
        let mut next_one;
        let next_buffers: &mut [(&mut SharedBuffer, Access)] = match next {
            Some(buffer) => {
                next_one = [(buffer, Access::Write)];
                &mut next_one
            }
            None => &mut [],
        };
        let kernel = &mut self.kernel;
        path.run_pipelined(self.end.graphics(), frame, &mut buffers, next_buffers, &mut |target| match target {
            Target::Device { buffers, stream } => {
                let (function, limits) =
                    kernel.as_mut().ok_or_else(|| Error::Unavailable("fill kernel not loaded".to_owned()))?;
                launch_fill(function, limits, stream, buffers[0], value)
            }
            Target::Host { buffers } => {
                let words: &mut [u32] =
                    bytemuck::try_cast_slice_mut(&mut *buffers[0]).map_err(|e| Error::InvalidInput(e.to_string()))?;
                words.par_iter_mut().enumerate().for_each(|(i, w)| *w = value ^ i as u32);
                Ok(())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_bytes("1M"), Ok(1 << 20));
        assert_eq!(parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("3").is_err(), "not a multiple of 4");
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("9G").is_err(), "over 4 GiB");
    }
}
