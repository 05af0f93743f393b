//! `interop-lab bench handoff`: what one hand-off between two of the GPU's queues costs on this
//! machine, apart from any demo and any buffer size.
//!
//! Each chain row enqueues round trips back to back, with no host wait until the end: one side
//! runs a tiny command (a one-block kernel, a 4-byte fill or copy) and signals; the other waits
//! for that signal on the GPU, runs a tiny command of its own and signals back. A round trip is
//! two hand-offs, so the chain's time per round is what two hand-offs cost when nothing else
//! runs. The pairs differ in one thing each: two CUDA streams of one context (events), two CUDA
//! contexts (a semaphore, no graphics API), CUDA and Vulkan, CUDA and GL, Vulkan and GL; and CUDA
//! with each graphics API where the way back is not a semaphore but a word of shared memory the
//! graphics API writes and CUDA's stream polls (`cuStreamWaitValue64`). The host rows are the
//! controls: one tiny command and a host wait for it, per API.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk as raw;
use clap::Args;
use serde_json::json;

mod sides;
mod word;

use self::sides::{GlNames, GlPair, OtherContext};
use super::fill::launch_fill_blocks;
use crate::args::CudaArgs;
use crate::cuda::import::ImportedSemaphore;
use crate::cuda::{DeviceBuffer, DeviceLimits, Event, Function, Module, Stream};
use crate::demo_kit::bench::{BenchReport, Ran, Repeats, cell};
use crate::error::{Error, Result};
use crate::gl;
use crate::gl::context::headless::HeadlessGl;
use crate::gl::external::GlSemaphores;
use crate::progress::Progress;
use crate::runtime::{self, CudaRuntime};
use crate::stats::Percentiles;
use crate::stop::StopRequest;
use crate::vk::commands::CommandRing;
use crate::vk::device::{DeviceChoice, VulkanContext};
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::sync::{ExportableBinarySemaphore, Signal, TimelineSemaphore, Wait};

/// `interop-lab bench handoff`.
#[derive(Args, Debug)]
pub struct HandoffBenchArgs {
    /// Round trips in each chain, 2 to 10000 round trips.
    #[arg(long, default_value_t = 100, value_parser = crate::numbers::Ranged::<u32>::new(2, 10_000).unit("round trips"))]
    pub rounds: u32,
    /// Timed chains per row, 1 to 100 chains, after one untimed chain; each row reports their median.
    #[arg(long, default_value_t = 5, value_parser = crate::numbers::Ranged::<u32>::new(1, 100).unit("chains"))]
    pub batches: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Backend and device.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

/// Bytes each side's tiny command writes.
const TINY_BYTES: usize = 4096;
/// Longest a row may wait for the GPU before it says the GPU is stuck.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One chain: its wall time from the first call to the end of the host's wait, the host's time
/// spent making the calls, and the CUDA stream's own time from the first round to the last
/// (events), where CUDA is on the chain.
struct Chain {
    wall_us: f64,
    enqueue_us: f64,
    gpu_us: Option<f64>,
    /// The tiny commands wrote what the last round asked for (`None`: not checked on this pair).
    checked: Option<bool>,
}

/// A row's outcome.
enum Row {
    /// Round trips: µs per round (wall, host calls, GPU), medians over the timed chains.
    Chain { wall: f64, enqueue: f64, gpu: Option<f64>, checked: Option<bool> },
    /// One command and a host wait, each timed.
    Latency(Percentiles),
    /// A stop came before the row's end: it is left out, the rows before are kept.
    Stopped,
}

/// How a row is measured.
type RowFn = fn(&mut Bench) -> Result<Row>;

/// How the CUDA side of a chain waits for the other side, signals it, and how the host waits
/// for the chain's end mark.
struct CudaLegs<'a> {
    wait_back: &'a dyn Fn(&Stream, u64) -> Result<()>,
    signal_there: &'a dyn Fn(&Stream, u64) -> Result<()>,
    finish: &'a dyn Fn(&Bench, &Event, u64) -> Result<()>,
}

/// The host's wait at the end of a chain whose stream waits only on semaphores or events.
fn synchronize(bench: &Bench, _end: &Event, _last: u64) -> Result<()> {
    bench.streams[0].synchronize()
}

/// Everything the rows share: CUDA (a context, two streams, the fill kernel), the headless GL
/// context and Vulkan on the CUDA device, each made once.
struct Bench {
    rounds: u32,
    batches: u32,
    fill: Function,
    limits: DeviceLimits,
    scratch: [DeviceBuffer; 2],
    streams: [Stream; 2],
    cuda: Rc<CudaRuntime>,
    vulkan: std::result::Result<Rc<VulkanContext>, String>,
    gl: std::sync::Arc<glow::Context>,
    /// Checked before each chain and each timed command.
    stop: StopRequest,
}

/// Runs every row on a headless GL context, CUDA and Vulkan on one device; a row whose APIs do
/// not run here says why. A stop request ends it within a chain, with the rows measured whole.
pub fn run(args: &HandoffBenchArgs, stop: &StopRequest) -> Result<BenchReport> {
    crate::output::check_optional(&args.json, crate::output::OutputKind::Data, "--json")?;
    let options = args.cuda.options();
    let context = HeadlessGl::new(runtime::preferred_cuda_device(&options))?;
    let gl = context.gl().clone();
    let selection = runtime::select(&options, &gl, &|name| context.proc_address(name));
    let cuda = selection.cuda.clone().ok_or_else(|| {
        Error::Unavailable(format!(
            "bench handoff measures hand-offs to and from CUDA, which is not running: {}",
            selection.reason
        ))
    })?;
    let device = cuda.context.device().clone();
    let compiled = cuda.compiler.compile(&super::fill::KERNEL, &[])?;
    let module = Module::load(&cuda.context, &compiled)?;
    let vulkan = VulkanContext::new(&DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() })
        .map_err(|e| e.to_string());
    let mut bench = Bench {
        rounds: args.rounds,
        batches: args.batches,
        fill: module.function("fill")?,
        limits: DeviceLimits::from(&device),
        scratch: [DeviceBuffer::new(&cuda.context, TINY_BYTES)?, DeviceBuffer::new(&cuda.context, TINY_BYTES)?],
        streams: [Stream::new(&cuda.context)?, Stream::new(&cuda.context)?],
        cuda,
        vulkan,
        gl,
        stop: stop.clone(),
    };
    let rows: [(&str, &str, RowFn); 10] = [
        ("host_cuda", "host waits for a CUDA kernel", Bench::host_cuda),
        ("host_vulkan", "host waits for a Vulkan fill", Bench::host_vulkan),
        ("host_gl", "host waits for a GL copy", Bench::host_gl),
        ("cuda_streams", "CUDA stream <-> stream (events)", Bench::cuda_streams),
        ("cuda_contexts", "CUDA context <-> context", Bench::cuda_contexts),
        ("cuda_vulkan", "CUDA <-> Vulkan (timelines)", Bench::cuda_vulkan),
        ("cuda_gl", "CUDA <-> GL (binary)", Bench::cuda_gl),
        ("vulkan_gl", "Vulkan <-> GL (binary)", Bench::vulkan_gl),
        ("cuda_vulkan_word", "CUDA <-> Vulkan (back: a word)", Bench::cuda_vulkan_word),
        ("cuda_gl_word", "CUDA <-> GL (back: a word)", Bench::cuda_gl_word),
    ];
    let mut table = format!(
        "hand-offs on {}: chains of {} round trips enqueued back to back, one host wait at the end; median of {} \
         chains (one more untimed first). A round trip is two hand-offs.\n{:<36} {:>12} {:>12} {:>12}  {}\n",
        device.name,
        args.rounds,
        args.batches,
        "pair",
        "µs / round",
        "GPU µs",
        "host calls",
        "(host rows: µs per command and wait, median / p90)"
    );
    let mut results = Vec::new();
    let progress = Progress::new("bench handoff", rows.len() as u64, stop);
    for (key, label, row) in rows {
        if progress.stopped() {
            break;
        }
        progress.step(label);
        let Some((line, result)) = row_outcome(key, label, row(&mut bench)) else {
            break; // a stop cut the row short: it is left out, the rows before are kept
        };
        table.push_str(&line);
        results.push(result);
        progress.done_one();
    }
    let json = json!({
        "benchmark": "handoff",
        "device": device.name,
        "gl": gl::GlInfo::query(&bench.gl),
        "rounds": args.rounds,
        "method": format!(
            "chains of {} round trips enqueued back to back with no host wait until the end: one side runs a tiny \
             command (a one-block fill kernel of {TINY_BYTES} bytes, vkCmdFillBuffer, a 4-byte glCopyBufferSubData) \
             and signals, the other waits on the GPU, runs its own and signals back; round_trip_us is the wall time \
             from the first call to the end of the host's wait over the rounds, gpu_round_trip_us the CUDA stream's \
             events from the first round to the last over the rounds; median of {} chains after one untimed. \
             Host rows: one tiny command and a host wait, each timed, median and p90",
            args.rounds, args.batches
        ),
        "results": results,
    });
    BenchReport::finish(json, table, stop, &args.json)
}

/// A row's table line and JSON row: what it measured, or why it did not run; `None` when a stop
/// cut it short.
fn row_outcome(key: &str, label: &str, measured: Result<Row>) -> Option<(String, serde_json::Value)> {
    Some(match measured {
        Ok(Row::Chain { wall, enqueue, gpu, checked }) => {
            let check = match checked {
                Some(false) => "  the last round's writes were NOT seen: the order did not hold",
                _ => "",
            };
            let line = format!("{label:<36} {wall:>12.1} {:>12} {enqueue:>12.1}{check}\n", cell(gpu, 1));
            let result = json!({
                "pair": key, "label": label, "round_trip_us": wall, "hand_off_us": wall / 2.0,
                "gpu_round_trip_us": gpu, "host_calls_us": enqueue, "order_checked": checked,
            });
            (line, result)
        }
        Ok(Row::Latency(latency)) => (
            format!("{label:<36} {:>12.1} {:>12} {:>12}  p90 {:.1}\n", latency.median, "–", "–", latency.p90),
            json!({ "pair": key, "label": label, "latency_us": latency }),
        ),
        Ok(Row::Stopped) => return None,
        Err(error) => (
            format!("{label:<36} not run: {error}\n"),
            json!({ "pair": key, "label": label, "skipped": error.to_string() }),
        ),
    })
}

/// Microseconds since `started`.
fn micros(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e6
}

impl Bench {
    fn vulkan(&self) -> Result<Rc<VulkanContext>> {
        self.vulkan.clone().map_err(Error::Unavailable)
    }

    fn gl_semaphores(&self) -> Result<GlSemaphores> {
        self.cuda.gl_semaphores.ok_or_else(|| {
            Error::Unavailable("this GL context offers no GL_EXT_semaphore_fd (or external memory)".to_owned())
        })
    }

    /// The one-block fill on `stream` over scratch buffer `which`, word i = value ^ i.
    fn tiny_kernel(&mut self, stream: usize, which: usize, value: u32) -> Result<()> {
        launch_fill_blocks(&mut self.fill, &self.limits, &self.streams[stream], self.scratch[which].span(), value, 1)
    }

    /// Runs one untimed and `batches` timed chains of `chain(first_round)` and takes the medians
    /// per round. Every chain must pass its own check where it makes one.
    fn chains(&mut self, mut chain: impl FnMut(&mut Self, u64) -> Result<Chain>) -> Result<Row> {
        let rounds = f64::from(self.rounds);
        let (mut wall, mut enqueue, mut gpu) = (Vec::new(), Vec::new(), Vec::new());
        let mut checked = None;
        let stop = self.stop.clone();
        let ran = Repeats { warmup: 1, timed: self.batches }.run(&stop, |batch, timed| {
            let measured = chain(self, batch * u64::from(self.rounds))?;
            if timed {
                wall.push(measured.wall_us / rounds);
                enqueue.push(measured.enqueue_us / rounds);
                gpu.extend(measured.gpu_us.map(|g| g / rounds));
                checked = measured.checked.map(|ok| checked.unwrap_or(true) && ok).or(checked);
            }
            Ok(())
        })?;
        if ran == Ran::Stopped {
            return Ok(Row::Stopped);
        }
        let median = |values: Vec<f64>| Percentiles::of(values.into_iter()).map(|p| p.median);
        Ok(Row::Chain {
            wall: median(wall).ok_or_else(|| Error::Unavailable("no chain finished".to_owned()))?,
            enqueue: median(enqueue).unwrap_or(f64::NAN),
            gpu: median(gpu),
            checked,
        })
    }

    /// One chain led by CUDA on stream 0: each round waits for the other side's signal of the
    /// round before (`wait_back`; the first round records the start mark instead), runs the
    /// tiny kernel, signals `there` with the round's value and has the other side enqueue its
    /// part (`other`); at the end the stream waits for the last round's signal back, records the
    /// end mark, and the host waits for it (`finish`). Round values run first + 1 ..= first + rounds.
    fn cuda_led_chain(
        &mut self,
        first: u64,
        marks: &[Event; 2],
        legs: &CudaLegs<'_>,
        other: &mut dyn FnMut(&mut Self, u64) -> Result<()>,
    ) -> Result<Chain> {
        let started = Instant::now();
        for r in 0..self.rounds {
            let value = first + u64::from(r) + 1;
            if r > 0 {
                (legs.wait_back)(&self.streams[0], value - 1)?;
            } else {
                marks[0].record(&self.streams[0])?;
            }
            self.tiny_kernel(0, 0, value as u32)?;
            (legs.signal_there)(&self.streams[0], value)?;
            other(self, value)?;
        }
        let last = first + u64::from(self.rounds);
        (legs.wait_back)(&self.streams[0], last)?;
        marks[1].record(&self.streams[0])?;
        let enqueue_us = micros(started);
        (legs.finish)(self, &marks[1], last)?;
        let wall_us = micros(started);
        let gpu_us = f64::from(marks[1].elapsed_ms_since(&marks[0])?) * 1e3;
        Ok(Chain { wall_us, enqueue_us, gpu_us: Some(gpu_us), checked: None })
    }

    /// Times `rounds × batches` of `once` (a command and the host's wait for it), after `rounds`
    /// untimed.
    fn latencies(&mut self, mut once: impl FnMut(&mut Self, u32) -> Result<()>) -> Result<Row> {
        let mut times = Vec::new();
        let (stop, repeats) = (self.stop.clone(), Repeats { warmup: self.rounds, timed: self.rounds * self.batches });
        let ran = repeats.run(&stop, |index, timed| {
            let started = Instant::now();
            once(self, index as u32)?;
            times.extend(timed.then(|| micros(started)));
            Ok(())
        })?;
        if ran == Ran::Stopped {
            return Ok(Row::Stopped);
        }
        Percentiles::of(times.into_iter()).map(Row::Latency).ok_or_else(|| Error::Unavailable("no samples".to_owned()))
    }

    fn host_cuda(&mut self) -> Result<Row> {
        self.latencies(|bench, i| {
            bench.tiny_kernel(0, 0, i)?;
            bench.streams[0].synchronize()
        })
    }

    fn host_vulkan(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        // Declared in this order so they drop in the other: the ring waits for its submissions first.
        let done = TimelineSemaphore::new(&vulkan, false)?;
        let target = Buffer::new(&vulkan, TINY_BYTES, raw::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        let mut ring = CommandRing::new(&vulkan, 2)?;
        self.latencies(|_, i| {
            let value = u64::from(i) + 1;
            ring.submit(&[], &[Signal::timeline(&done, value)], |r| r.fill(&target, i))?;
            wait_timeline(&done, value)
        })
    }

    fn host_gl(&mut self) -> Result<Row> {
        let gl = self.gl.clone();
        let pair = GlPair::new(&gl)?;
        let row = self.latencies(|_, _| {
            pair.copy(&gl)?;
            gl::wait_for_gl(&gl)
        });
        pair.delete(&gl);
        row
    }

    fn cuda_streams(&mut self) -> Result<Row> {
        let context = self.cuda.context.clone();
        let (there, back) = (Event::new_untimed(&context)?, Event::new_untimed(&context)?);
        let marks = [Event::new(&context)?, Event::new(&context)?];
        let legs = CudaLegs {
            wait_back: &|stream, _| stream.wait_event(&back),
            signal_there: &|stream, _| there.record(stream),
            finish: &synchronize,
        };
        self.chains(|bench, first| {
            let mut chain = bench.cuda_led_chain(first, &marks, &legs, &mut |bench, value| {
                bench.streams[1].wait_event(&there)?;
                bench.tiny_kernel(1, 1, value as u32)?;
                back.record(&bench.streams[1])
            })?;
            let last = (first + u64::from(bench.rounds)) as u32;
            chain.checked = Some(first_word(&bench.scratch[1], &bench.streams[0])? == last);
            Ok(chain)
        })
    }

    fn cuda_contexts(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let home = self.cuda.context.clone();
        let other = OtherContext::new(&home, &self.cuda)?;
        let there = TimelineSemaphore::new(&vulkan, true)?;
        let back = TimelineSemaphore::new(&vulkan, true)?;
        let imported = (|| -> Result<_> {
            home.make_current()?;
            let home_side = (
                ImportedSemaphore::new_timeline(&home, there.export_fd()?, "there")?,
                ImportedSemaphore::new_timeline(&home, back.export_fd()?, "back")?,
            );
            other.context.make_current()?;
            let other_side = (
                ImportedSemaphore::new_timeline(&other.context, there.export_fd()?, "there")?,
                ImportedSemaphore::new_timeline(&other.context, back.export_fd()?, "back")?,
            );
            home.make_current()?;
            Ok((home_side, other_side))
        })();
        let ((home_there, home_back), (other_there, other_back)) = match imported {
            Ok(sides) => sides,
            Err(error) => {
                other.release(&home);
                return Err(error);
            }
        };
        let marks = [Event::new(&home)?, Event::new(&home)?];
        let mut other = other;
        let legs = CudaLegs {
            wait_back: &|stream, value| home_back.wait_async(stream, value),
            signal_there: &|stream, value| home_there.signal_async(stream, value),
            finish: &synchronize,
        };
        let row = self.chains(|bench, first| {
            let mut chain = bench.cuda_led_chain(first, &marks, &legs, &mut |_, value| {
                other.context.make_current()?;
                let ran = (|| {
                    other_there.wait_async(&other.stream, value)?;
                    let span = other.scratch.span();
                    launch_fill_blocks(&mut other.fill, &other.limits, &other.stream, span, value as u32, 1)?;
                    other_back.signal_async(&other.stream, value)
                })();
                home.make_current()?;
                ran
            })?;
            other.context.make_current()?;
            let seen = first_word(&other.scratch, &other.stream);
            home.make_current()?;
            chain.checked = Some(seen? == (first + u64::from(bench.rounds)) as u32);
            Ok(chain)
        });
        // The other context's stream and the imports go before the semaphores and the context.
        drop((home_there, home_back));
        other.context.make_current().ok();
        drop((other_there, other_back));
        other.release(&home);
        row
    }

    fn cuda_vulkan(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let there = TimelineSemaphore::new(&vulkan, true)?;
        let back = TimelineSemaphore::new(&vulkan, true)?;
        let context = self.cuda.context.clone();
        let cuda_there = ImportedSemaphore::new_timeline(&context, there.export_fd()?, "there")?;
        let cuda_back = ImportedSemaphore::new_timeline(&context, back.export_fd()?, "back")?;
        let target = Buffer::new(&vulkan, TINY_BYTES, raw::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        // One command buffer per round: the ring never holds the host back inside a chain (and,
        // declared last, it drops first, waiting for its submissions).
        let mut ring = CommandRing::new(&vulkan, self.rounds as usize + 1)?;
        let marks = [Event::new(&context)?, Event::new(&context)?];
        let legs = CudaLegs {
            wait_back: &|stream, value| cuda_back.wait_async(stream, value),
            signal_there: &|stream, value| cuda_there.signal_async(stream, value),
            finish: &synchronize,
        };
        let row = self.chains(|bench, first| {
            let mut chain = bench.cuda_led_chain(first, &marks, &legs, &mut |_, value| {
                let wait = Wait::timeline(&there, value, raw::PipelineStageFlags::TRANSFER);
                ring.submit(&[wait], &[Signal::timeline(&back, value)], |rec| rec.fill(&target, value as u32))
            })?;
            chain.checked = Some(host_word(&target) == Some((first + u64::from(bench.rounds)) as u32));
            Ok(chain)
        });
        // Nothing may still wait on the semaphores when they go (the ring waits for Vulkan's side).
        let settled = self.streams[0].synchronize();
        drop((cuda_there, cuda_back));
        settled?;
        row
    }

    fn cuda_gl(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let semaphores = self.gl_semaphores()?;
        let gl = self.gl.clone();
        let there = ExportableBinarySemaphore::new(&vulkan)?;
        let back = ExportableBinarySemaphore::new(&vulkan)?;
        let context = self.cuda.context.clone();
        let cuda_there = ImportedSemaphore::new_binary(&context, there.export_fd()?, "there")?;
        let cuda_back = ImportedSemaphore::new_binary(&context, back.export_fd()?, "back")?;
        let names = GlNames::import(&gl, semaphores, &there, &back)?;
        let pair = GlPair::new(&gl)?;
        let marks = [Event::new(&context)?, Event::new(&context)?];
        let legs = CudaLegs {
            wait_back: &|stream, _| cuda_back.wait_async(stream, 0),
            signal_there: &|stream, _| cuda_there.signal_async(stream, 0),
            finish: &synchronize,
        };
        let row = self.chains(|bench, first| {
            bench.cuda_led_chain(first, &marks, &legs, &mut |_, _| {
                semaphores.wait(&gl, names.there, &[])?;
                pair.copy(&gl)?;
                semaphores.signal(&gl, names.back, &[])
            })
        });
        let settled = self.streams[0].synchronize();
        semaphores.finish();
        names.delete(semaphores);
        pair.delete(&gl);
        drop((cuda_there, cuda_back));
        settled?;
        row
    }

    fn vulkan_gl(&mut self) -> Result<Row> {
        let vulkan = self.vulkan()?;
        let semaphores = self.gl_semaphores()?;
        let gl = self.gl.clone();
        let there = ExportableBinarySemaphore::new(&vulkan)?;
        let back = ExportableBinarySemaphore::new(&vulkan)?;
        let names = GlNames::import(&gl, semaphores, &there, &back)?;
        let pair = GlPair::new(&gl)?;
        let end = TimelineSemaphore::new(&vulkan, false)?;
        let target = Buffer::new(&vulkan, TINY_BYTES, raw::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        let mut ring = CommandRing::new(&vulkan, self.rounds as usize + 2)?;
        let transfer = raw::PipelineStageFlags::TRANSFER;
        let row = self.chains(|bench, first| {
            let started = Instant::now();
            for r in 0..bench.rounds {
                let word = (first + u64::from(r)) as u32;
                let waits = [Wait::binary(back.raw(), transfer)];
                let waits: &[Wait<'_>] = if r > 0 { &waits } else { &[] };
                ring.submit(waits, &[Signal::binary(there.raw())], |rec| rec.fill(&target, word))?;
                semaphores.wait(&gl, names.there, &[])?;
                pair.copy(&gl)?;
                semaphores.signal(&gl, names.back, &[])?;
            }
            let last = first / u64::from(bench.rounds) + 1;
            ring.submit(&[Wait::binary(back.raw(), transfer)], &[Signal::timeline(&end, last)], |_| Ok(()))?;
            let enqueue_us = micros(started);
            wait_timeline(&end, last)?;
            let wall_us = micros(started);
            let seen = host_word(&target);
            let expected = (first + u64::from(bench.rounds) - 1) as u32;
            Ok(Chain { wall_us, enqueue_us, gpu_us: None, checked: Some(seen == Some(expected)) })
        });
        let settled = end.value().and_then(|value| wait_timeline(&end, value));
        semaphores.finish();
        names.delete(semaphores);
        pair.delete(&gl);
        settled?;
        row
    }
}

/// Waits on the host for `semaphore` to reach `value`, or says the GPU is stuck.
fn wait_timeline(semaphore: &TimelineSemaphore, value: u64) -> Result<()> {
    if semaphore.wait(value, TIMEOUT)? {
        Ok(())
    } else {
        Err(Error::Unavailable(format!("a Vulkan submission did not finish within {} s", TIMEOUT.as_secs())))
    }
}

/// The first word of a host-visible Vulkan buffer.
fn host_word(buffer: &Buffer) -> Option<u32> {
    buffer.host_bytes().and_then(|bytes| bytes.get(..4)).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// The first word of a scratch buffer (fill writes value ^ 0 there), read through `stream`.
fn first_word(buffer: &DeviceBuffer, stream: &Stream) -> Result<u32> {
    let mut word = [0u8; 4];
    buffer.download(stream, &mut word)?;
    Ok(u32::from_ne_bytes(word))
}
