//! `interop-lab bench map`: what `cuGraphicsMapResources` costs and what it waits for. One
//! registered GL buffer (or a ring of them) is mapped, filled and unmapped under conditions that
//! differ in one thing each — no GL work at all, GL reading the buffer, GL busy with other
//! buffers, a wait for GL every frame, a ring of buffers — and the map's host time and GPU time
//! (CUDA events around it) are reported side by side. The table is the lesson: whether the map
//! has a fixed cost, or waits for GL's work on this buffer, or for all of GL's work. Ctrl-C or
//! SIGTERM ends it within an iteration, with the conditions measured whole.
#![allow(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use glow::HasContext;
use serde_json::json;

use crate::args::CudaArgs;
use crate::cuda::interop::{self, GraphicsResource, MapAccess};
use crate::cuda::{DeviceLimits, Event, Function, Module, Stream};
use crate::demo_kit::bench::{BenchReport, Ran, Repeats};
use crate::error::{Error, Result};
use crate::gl;
use crate::gl::context::headless::HeadlessGl;
use crate::guard::Guard;
use crate::progress::Progress;
use crate::runtime::{self, CudaOptions};
use crate::stats::Percentiles;
use crate::stop::StopRequest;

/// `interop-lab bench map`.
#[derive(Args, Debug)]
pub struct MapBenchArgs {
    /// Size of each registered buffer, 4 to 4G bytes, a multiple of 4 (K, M, G suffixes).
    #[arg(long, value_parser = super::transfer::BUFFER_BYTES, default_value = "16M")]
    pub bytes: usize,
    /// Untimed iterations first, per condition, 0 to 1000.
    #[arg(long, default_value_t = 20, value_parser = crate::args::WARMUP)]
    pub warmup: u32,
    /// Timed iterations per condition (medians reported), 1 to 10000.
    #[arg(long, default_value_t = 200, value_parser = crate::args::REPEATS)]
    pub frames: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Backend and device.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

/// One way of running the loop around the map.
#[derive(Debug, Clone, Copy)]
struct Condition {
    name: &'static str,
    /// What it tells apart from the others.
    question: &'static str,
    /// Registered buffers used in turn.
    ring: usize,
    /// Launch the fill kernel between map and unmap.
    fill: bool,
    /// GL copies the whole buffer just filled (as a draw would read it).
    gl_reads: bool,
    /// GL copies this many bytes between two buffers of its own before the map.
    gl_busy_bytes: usize,
    /// How the host waits for GL, if at all.
    wait: Wait,
    /// GL copies this many bytes between its own buffers after its read (work still pending
    /// when [`Wait::ReadFence`] returns).
    gl_after_bytes: usize,
    /// A ~1 ms kernel on a plain device buffer first, and on which stream the map then goes.
    long_kernel: Option<MapStream>,
}

/// Where the map goes relative to the long kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapStream {
    /// The same stream: the map waits for the kernel, then for GL.
    Same,
    /// A second stream: does the map's wait overlap the kernel?
    Other,
}

/// How an iteration waits for GL on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Never.
    No,
    /// A fence after everything issued, waited at the end of the iteration.
    AfterFrame,
    /// A fence after everything issued, waited just before the map.
    BeforeMap,
    /// A fence placed right after GL's read of the buffer, waited just before the next map;
    /// GL work issued after it may still run.
    ReadFence,
    /// `glFinish` just before the map.
    Finish,
}

/// What every condition does unless it says otherwise: one buffer, mapped and unmapped, no kernel,
/// no GL work, no wait.
const BASE: Condition = Condition {
    name: "",
    question: "",
    ring: 1,
    fill: false,
    gl_reads: false,
    gl_busy_bytes: 0,
    wait: Wait::No,
    gl_after_bytes: 0,
    long_kernel: None,
};

const CONDITIONS: [Condition; 12] = [
    Condition { name: "map + unmap only", question: "the fixed cost: no kernel, no GL work", ..BASE },
    Condition { name: "fill", question: "a kernel writes the mapped buffer; GL never touches it", fill: true, ..BASE },
    Condition {
        name: "fill, GL reads it",
        question: "GL reads the buffer after each unmap, no wait: the app's frame",
        fill: true,
        gl_reads: true,
        ..BASE
    },
    Condition {
        name: "fill, GL reads it, wait",
        question: "as above, then a wait for GL every frame: bench transfer's frame",
        fill: true,
        gl_reads: true,
        wait: Wait::AfterFrame,
        ..BASE
    },
    Condition {
        name: "fill, GL busy elsewhere",
        question: "GL copies 256 MiB between buffers of its own first: does the map wait for all of GL?",
        fill: true,
        gl_busy_bytes: 256 << 20,
        ..BASE
    },
    Condition {
        name: "ring of 2, GL reads",
        question: "two registered buffers in turn: the map never follows GL's read of the same buffer",
        ring: 2,
        fill: true,
        gl_reads: true,
        ..BASE
    },
    Condition { name: "ring of 3, GL reads", question: "three in turn", ring: 3, fill: true, gl_reads: true, ..BASE },
    Condition {
        name: "map + unmap, GL waited",
        question: "no GL work, but a fence waited before each map: does a known-idle GL make the map cheap?",
        wait: Wait::BeforeMap,
        ..BASE
    },
    Condition {
        name: "fill, GL reads, glFinish",
        question: "glFinish instead of a fence before the map",
        fill: true,
        gl_reads: true,
        wait: Wait::Finish,
        ..BASE
    },
    Condition {
        name: "fill, GL reads, read fence",
        question: "a fence right after GL's read is waited before the map; 64 MiB of later GL copies may still run",
        fill: true,
        gl_reads: true,
        wait: Wait::ReadFence,
        gl_after_bytes: 64 << 20,
        ..BASE
    },
    Condition {
        name: "1 ms kernel, then map",
        question: "a long kernel on another buffer, the map after it on the same stream; CUDA synced each time",
        gl_reads: true,
        long_kernel: Some(MapStream::Same),
        ..BASE
    },
    Condition {
        name: "1 ms kernel || map",
        question: "the same, the map on a second stream: does its wait overlap the kernel (what pipelining needs)?",
        gl_reads: true,
        long_kernel: Some(MapStream::Other),
        ..BASE
    },
];

/// The long kernel fills this many bytes this many times: about 1 ms on an H200 (4 TB/s).
const LONG_KERNEL_BYTES: usize = 256 << 20;
const LONG_KERNEL_REPEATS: u32 = 16;

/// Medians of one condition.
struct Measured {
    map_host: Percentiles,
    map_gpu: Percentiles,
    unmap_host: Percentiles,
    iteration: Percentiles,
}

impl Measured {
    /// The condition's line in the table.
    fn line(&self, condition: &Condition) -> String {
        format!(
            "{:<26} {:>13.1} {:>12.1} {:>15.1} {:>14.1}  {}\n",
            condition.name,
            self.map_host.median,
            self.map_gpu.median,
            self.unmap_host.median,
            self.iteration.median,
            condition.question
        )
    }

    /// The condition's row in the JSON.
    fn json(&self, condition: &Condition) -> serde_json::Value {
        json!({
            "condition": condition.name,
            "question": condition.question,
            "ring": condition.ring,
            "fill": condition.fill,
            "gl_reads": condition.gl_reads,
            "gl_busy_bytes": condition.gl_busy_bytes,
            "wait": format!("{:?}", condition.wait),
            "gl_after_bytes": condition.gl_after_bytes,
            "map_host_us": self.map_host,
            "map_gpu_us": self.map_gpu,
            "unmap_host_us": self.unmap_host,
            "iteration_us": self.iteration,
        })
    }
}

/// Runs the study on a headless GL context with GL interop. A stop request (Ctrl-C, SIGTERM)
/// ends it within an iteration; the conditions measured whole are reported, marked interrupted.
pub fn run(args: &MapBenchArgs, stop: &StopRequest) -> Result<BenchReport> {
    if args.frames == 0 {
        return Err(Error::InvalidInput("bench map needs at least one frame".to_owned()));
    }
    crate::output::check_optional(&args.json, crate::output::OutputKind::Data, "--json")?;
    let options: CudaOptions = args.cuda.options();
    let context = HeadlessGl::new(runtime::preferred_cuda_device(&options))?;
    let gl = context.gl().clone();
    let selection = runtime::select(&options, &gl, &|name| context.proc_address(name));
    let (cuda, entry_points) = selection.gl_interop().map_err(|why| {
        Error::Unavailable(format!("bench map needs CUDA with GL interop on this GL context's device: {why}"))
    })?;
    let stream = Stream::new(&cuda.context)?;
    let second = Stream::new(&cuda.context)?;
    let plain = crate::cuda::DeviceBuffer::new(&cuda.context, LONG_KERNEL_BYTES)?;
    let compiled = cuda.compiler.compile(&super::fill::KERNEL, &[])?;
    let module = Module::load(&cuda.context, &compiled)?;
    let fill = module.function("fill")?;
    if args.bytes > 1 << 30 {
        return Err(Error::InvalidInput(
            "bench map: buffers of at most 1 GiB (GL copies them with one call)".to_owned(),
        ));
    }
    let limits = DeviceLimits::from(cuda.context.device());
    let bytes = args.bytes;

    // GL's own buffers for the busy condition and the copies' destination.
    let release = |mut buffer: gl::Buffer| buffer.destroy(&gl);
    let busiest = CONDITIONS.iter().map(|c| c.gl_busy_bytes.max(c.gl_after_bytes)).max().unwrap_or(0).max(4);
    let busy = [
        Guard::new(gl::Buffer::uninitialized(&gl, busiest)?, release),
        Guard::new(gl::Buffer::uninitialized(&gl, busiest)?, release),
    ];
    let scratch = Guard::new(gl::Buffer::uninitialized(&gl, bytes)?, release);

    let device = cuda.context.device().name.clone();
    let mut table = table_head(&device, bytes, args.frames);
    let mut results = Vec::new();
    let mut run = Run {
        gl: &gl,
        stream: &stream,
        second: &second,
        plain: plain.span(),
        fill,
        limits,
        busy: [busy[0].raw(), busy[1].raw()],
        scratch: scratch.raw(),
    };
    let progress = Progress::new("bench map", CONDITIONS.len() as u64, stop);
    for condition in CONDITIONS {
        if progress.stopped() {
            break;
        }
        progress.step(condition.name);
        let mut ring = Vec::with_capacity(condition.ring);
        for _ in 0..condition.ring {
            let buffer = Guard::new(gl::Buffer::uninitialized(&gl, bytes)?, release);
            let resource = GraphicsResource::register_buffer(&cuda.context, entry_points, buffer.name())?;
            // The registration is declared first, so it is dropped (unregistered) before its buffer.
            ring.push((resource, buffer));
        }
        let mut views: Vec<_> = ring.iter_mut().map(|(resource, buffer)| (resource, buffer.raw())).collect();
        let repeats = Repeats { warmup: args.warmup, timed: args.frames };
        let measured = run.condition(&condition, &mut views, repeats, stop);
        stream.synchronize()?;
        gl::finish(&gl);
        drop(views);
        drop(ring);
        // `None`: a stop cut the condition short; it is left out, those before are kept.
        let Some(measured) = measured? else {
            break;
        };
        table.push_str(&measured.line(&condition));
        results.push(measured.json(&condition));
        progress.done_one();
    }
    let json = json!({
        "benchmark": "map",
        "device": device,
        "gl": gl::GlInfo::query(&gl),
        "bytes": bytes,
        "method": format!(
            "per condition: {} untimed then {} timed iterations of map, (fill), unmap, (GL work), (GL fence wait); \
             host times with Instant, GPU time between CUDA events recorded before and after the map; medians",
            args.warmup, args.frames
        ),
        "results": results,
    });
    BenchReport::finish(json, table, stop, &args.json)
}

/// The table's title and column heads.
fn table_head(device: &str, bytes: usize, frames: u32) -> String {
    let mut table = format!(
        "cuGraphicsMapResources on {device}, {} MiB buffers: medians of {} iterations per condition\n",
        bytes >> 20,
        frames
    );
    table.push_str(&format!(
        "{:<26} {:>13} {:>12} {:>15} {:>14}  {}\n",
        "condition", "map host µs", "map GPU µs", "unmap host µs", "iteration µs", "what it asks"
    ));
    table
}

/// What every condition runs with.
struct Run<'a> {
    gl: &'a glow::Context,
    stream: &'a Stream,
    /// The map's stream when it runs beside the long kernel.
    second: &'a Stream,
    /// The long kernel's buffer.
    plain: crate::cuda::DeviceSpan,
    fill: Function,
    limits: DeviceLimits,
    busy: [Option<glow::Buffer>; 2],
    scratch: Option<glow::Buffer>,
}

impl Run<'_> {
    /// The condition's iterations, medians of the timed ones; `None` when a stop came first.
    fn condition(
        &mut self,
        condition: &Condition,
        buffers: &mut [(&mut GraphicsResource, Option<glow::Buffer>)],
        repeats: Repeats,
        stop: &StopRequest,
    ) -> Result<Option<Measured>> {
        let context = self.stream.context();
        let events: Vec<(Event, Event)> =
            (0..repeats.timed).map(|_| Ok((Event::new(context)?, Event::new(context)?))).collect::<Result<_>>()?;
        let (mut map_host, mut unmap_host, mut iteration) = (Vec::new(), Vec::new(), Vec::new());
        let mut read_fence: Option<gl::Fence> = None;
        let ran = repeats.run(stop, |index, timed| {
            let index = index as usize;
            let timed = timed.then(|| &events[index - repeats.warmup as usize]);
            let started = Instant::now();
            if condition.gl_busy_bytes > 0 {
                self.gl_copy(self.busy[0], self.busy[1], condition.gl_busy_bytes);
                // SAFETY: no arguments.
                unsafe { self.gl.flush() };
            }
            let (resource, buffer) = &mut buffers[index % condition.ring];
            let map_stream = match condition.long_kernel {
                Some(on) => {
                    for repeat in 0..LONG_KERNEL_REPEATS {
                        self.launch_fill(self.stream, self.plain, index as u32 ^ repeat)?;
                    }
                    if on == MapStream::Other { self.second } else { self.stream }
                }
                None => self.stream,
            };
            self.wait_before_map(condition.wait, &mut read_fence)?;
            if let Some((before, _)) = timed {
                before.record(map_stream)?;
            }
            let mapping = Instant::now();
            let mapped = interop::map(map_stream, &mut [(&mut **resource, MapAccess::WriteDiscard)])?;
            let span = mapped.buffer(0)?;
            let map_us = mapping.elapsed().as_secs_f64() * 1e6;
            if let Some((_, after)) = timed {
                after.record(map_stream)?;
            }
            if condition.fill {
                self.launch_fill(map_stream, span, index as u32)?;
            }
            let unmapping = Instant::now();
            mapped.unmap()?;
            let unmap_us = unmapping.elapsed().as_secs_f64() * 1e6;
            if condition.gl_reads {
                self.gl_copy(*buffer, self.scratch, span.bytes);
                if condition.wait == Wait::ReadFence {
                    read_fence = Some(gl::Fence::place(self.gl)?);
                }
                if condition.gl_after_bytes > 0 {
                    self.gl_copy(self.busy[0], self.busy[1], condition.gl_after_bytes);
                }
                // SAFETY: no arguments.
                unsafe { self.gl.flush() };
            }
            if condition.wait == Wait::AfterFrame {
                gl::wait_for_gl(self.gl)?;
            }
            if condition.long_kernel.is_some() {
                self.stream.synchronize()?;
                self.second.synchronize()?;
            }
            if timed.is_some() {
                map_host.push(map_us);
                unmap_host.push(unmap_us);
                iteration.push(started.elapsed().as_secs_f64() * 1e6);
            }
            Ok(())
        });
        if let Some(fence) = read_fence {
            fence.delete(self.gl);
        }
        self.stream.synchronize()?;
        if ran? == Ran::Stopped {
            return Ok(None);
        }
        let map_gpu: Vec<f64> = events
            .iter()
            .map(|(before, after)| after.elapsed_ms_since(before).map(|ms| f64::from(ms) * 1e3))
            .collect::<Result<_>>()?;
        let of = |values: Vec<f64>| {
            Percentiles::of(values.into_iter()).ok_or_else(|| Error::Unavailable("no samples".to_owned()))
        };
        Ok(Some(Measured {
            map_host: of(map_host)?,
            map_gpu: of(map_gpu)?,
            unmap_host: of(unmap_host)?,
            iteration: of(iteration)?,
        }))
    }

    /// The host's wait for GL just before the map, where the condition makes one.
    fn wait_before_map(&self, wait: Wait, read_fence: &mut Option<gl::Fence>) -> Result<()> {
        match wait {
            Wait::BeforeMap => gl::wait_for_gl(self.gl)?,
            Wait::Finish => gl::finish(self.gl),
            Wait::ReadFence => {
                if let Some(fence) = read_fence.take() {
                    fence.wait(self.gl)?;
                }
            }
            Wait::No | Wait::AfterFrame => {}
        }
        Ok(())
    }

    /// Launches `fill` over `span` on `stream`.
    fn launch_fill(&mut self, stream: &Stream, span: crate::cuda::DeviceSpan, value: u32) -> Result<()> {
        super::fill::launch_fill(&mut self.fill, &self.limits, stream, span, value)
    }

    /// GL copies `bytes` from `from` to `to` (both GL buffers of this context).
    fn gl_copy(&self, from: Option<glow::Buffer>, to: Option<glow::Buffer>, bytes: usize) {
        // SAFETY: both are live buffers of the current context, at least `bytes` long.
        unsafe {
            self.gl.bind_buffer(glow::COPY_READ_BUFFER, from);
            self.gl.bind_buffer(glow::COPY_WRITE_BUFFER, to);
            self.gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, 0, 0, bytes as i32);
            self.gl.bind_buffer(glow::COPY_READ_BUFFER, None);
            self.gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        }
    }
}
