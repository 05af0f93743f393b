//! n-body split across several CUDA contexts: one per entry of `--devices`, on different GPUs or
//! several on one GPU.
//!
//! The bodies are cut into `slices` j slices of `slice_length` (as on one device); each device
//! owns a contiguous run of whole slices, integrates those bodies, and computes their forces
//! against *all* positions. A step, per device:
//!
//! ```text
//! compute stream:  drift own bodies ─▶ forces vs own slices ─▶ [wait p] forces vs slices of p … ─▶ kick
//!                       │ drifted
//! exchange stream:      └─▶ cuMemcpyPeerAsync own positions to every other device ─▶ sent
//! ```
//!
//! so the forces against the slices already on the device overlap the copies. The partial sums
//! are added by `nbody_kick` in slice order, exactly as on one device: with the same slice length
//! the result is bit-identical to the single-device run.
//!
//! The first device is the one that renders: its positions and velocities are the caller's (GL)
//! buffers, the others copy their slices into them, and the caller's stream waits for every device
//! before it unmaps.

mod partition;

use std::collections::VecDeque;
use std::rc::Rc;

use super::cpu::Params;
use super::kernels::{ForcesRange, Kernels, Precision, Variant};
use super::sim::{StepBuffers, slice_length};
use crate::cuda::memory::copy_peer_async;
use crate::cuda::timing::EventRing;
use crate::cuda::{Compiler, Context, DeviceBuffer, DeviceSpan, Event, Stream, device};
use crate::runtime::CudaRuntime;
use crate::{Error, Result};

pub use self::partition::{MAX_DEVICES, Partition, check_ordinals, parse_devices, partition, total_slices};

/// How positions travel from one device to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Two contexts on one GPU: `cuMemcpyPeerAsync` copies within that GPU's memory.
    SameDevice,
    /// `cuDeviceCanAccessPeer` allows it and `cuCtxEnablePeerAccess` was called: the copy engine
    /// moves the bytes GPU to GPU (NVLink or PCIe).
    Peer,
    /// No peer access: `cuMemcpyPeerAsync` still works, the driver stages the bytes through host
    /// memory.
    DriverStaged,
}

impl Route {
    /// A short description for the panel and the bench output.
    pub fn label(self) -> &'static str {
        match self {
            Route::SameDevice => "same GPU, copy between contexts",
            Route::Peer => "peer to peer",
            Route::DriverStaged => "staged by the driver through host memory",
        }
    }
}

/// GPU times of one device in one step, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DeviceTimes {
    /// `nbody_drift` of its bodies.
    pub drift_us: f64,
    /// Forces against its own slices (overlapping the exchange).
    pub own_forces_us: f64,
    /// Forces against the other devices' slices.
    pub remote_forces_us: f64,
    /// `nbody_kick` of its bodies.
    pub kick_us: f64,
    /// Waiting for other devices' positions (compute stream idle).
    pub wait_us: f64,
    /// Its outgoing position copies (on the exchange stream).
    pub exchange_us: f64,
}

impl DeviceTimes {
    /// Time its kernels ran: drift, forces and kick.
    pub fn kernel_us(&self) -> f64 {
        self.drift_us + self.own_forces_us + self.remote_forces_us + self.kick_us
    }
}

/// What the caller learns about one device.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceSummary {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Device name.
    pub name: String,
    /// "primary" or "created".
    pub context: &'static str,
    /// Its bodies.
    pub first_body: u32,
    /// How many.
    pub bodies: u32,
}

/// One device's part of the simulation. Field order is drop order; the context goes last (every
/// other field also holds an `Rc` to it).
struct Part {
    drifted: Event,
    kicked: Event,
    finished: Event,
    kernels: Kernels,
    /// Full-length positions, ping-pong; `None` on the first device, which uses the caller's.
    positions: Option<[DeviceBuffer; 2]>,
    /// Velocities of its bodies; `None` on the first device (a range of the caller's).
    velocities: Option<DeviceBuffer>,
    accelerations: DeviceBuffer,
    partial: DeviceBuffer,
    stream: Stream,
    exchange: Stream,
    partition: Partition,
    context: Rc<Context>,
}

/// Position, velocity spans a part reads and writes this step: (positions in, positions out,
/// its velocities).
type PartSpans = (DeviceSpan, DeviceSpan, DeviceSpan);

/// n-body on several contexts.
pub struct MultiSimulation {
    /// Timing rings, one per part (kept apart from the parts so marks of all parts can be open at
    /// once): compute stream, then exchange stream.
    timers: Vec<EventRing>,
    exchange_timers: Vec<EventRing>,
    /// Per part, recorded on its exchange stream when its positions have gone out (apart from the
    /// parts so one part can wait on the others' while it is borrowed mutably).
    sent: Vec<Event>,
    /// Finished timings per part not yet matched with the other parts' of the same step.
    compute_times: Vec<VecDeque<(u64, Vec<f64>)>>,
    exchange_times: Vec<VecDeque<(u64, f64)>>,
    begin: Event,
    parts: Vec<Part>,
    routes: Vec<Vec<Route>>,
    n: u32,
    slices: u32,
    slice_length: u32,
    current: usize,
    gather_velocities: bool,
    home: Rc<Context>,
}

impl MultiSimulation {
    /// Contexts, kernels and memory for `n` fp32 bodies on `ordinals` (the first must be `home`'s
    /// device: it renders). Entries naming a device already used get a context of their own
    /// (`cuCtxCreate`). With `gather_velocities` the other devices also copy their velocities
    /// into the caller's velocity buffer every step (for drawing and the energy).
    pub fn new(
        home: &CudaRuntime,
        ordinals: &[i32],
        variant: Variant,
        n: u32,
        slices: Option<u32>,
        gather_velocities: bool,
    ) -> Result<Self> {
        if variant.precision != Precision::F32 {
            return Err(Error::InvalidInput(
                "n-body across devices runs in fp32 only: drop --precision f64 or --devices".to_owned(),
            ));
        }
        let Some(&first) = ordinals.first() else {
            return Err(Error::InvalidInput("--devices needs at least one device".to_owned()));
        };
        check_ordinals(ordinals, device::device_count()?)?;
        let home_context = home.context.clone();
        if first != home_context.device().ordinal {
            return Err(Error::InvalidInput(format!(
                "the first of --devices renders, so it must be the device the app computes on ({}), not {first}: \
                 list device {} first, or pass --device {first}",
                home_context.device().ordinal,
                home_context.device().ordinal
            )));
        }
        let result = Self::build(home, &home_context, ordinals, variant, n, slices, gather_velocities);
        // Whatever happened, the caller's context is the current one again.
        home_context.make_current()?;
        result
    }

    fn build(
        home: &CudaRuntime,
        home_context: &Rc<Context>,
        ordinals: &[i32],
        variant: Variant,
        n: u32,
        slices: Option<u32>,
        gather_velocities: bool,
    ) -> Result<Self> {
        let slices = total_slices(home_context.device().multiprocessors, &variant, n, ordinals.len(), slices);
        if slices == 0 {
            return Err(Error::InvalidInput("slices must be at least 1".to_owned()));
        }
        let slice_length = slice_length(n, slices, variant.tile_size);
        let slices = n.div_ceil(slice_length);
        let partitions = partition(n, slice_length, ordinals.len())?;

        let mut contexts: Vec<Rc<Context>> = vec![home_context.clone()];
        for (index, &ordinal) in ordinals.iter().enumerate().skip(1) {
            let context = if ordinals[..index].contains(&ordinal) {
                Context::new_separate(home_context.driver(), ordinal)?
            } else {
                Context::new(home_context.driver(), ordinal)?
            };
            contexts.push(context);
        }
        let mut routes = vec![vec![Route::SameDevice; contexts.len()]; contexts.len()];
        for (from, source) in contexts.iter().enumerate() {
            for (to, destination) in contexts.iter().enumerate() {
                if source.raw_device() == destination.raw_device() {
                    continue;
                }
                routes[from][to] = if source.can_access_peer(destination)? {
                    source.enable_peer_access(destination)?;
                    Route::Peer
                } else {
                    Route::DriverStaged
                };
            }
        }

        let vector = Precision::F32.vector_bytes();
        let mut parts = Vec::with_capacity(contexts.len());
        let mut timers = Vec::with_capacity(contexts.len());
        let mut exchange_timers = Vec::with_capacity(contexts.len());
        let mut sent = Vec::with_capacity(contexts.len());
        for (index, (context, partition)) in contexts.iter().zip(&partitions).enumerate() {
            context.make_current()?;
            let compiler = if context.device().compute_capability == home_context.device().compute_capability {
                home.compiler.clone()
            } else {
                Compiler::new(
                    context.device().compute_capability,
                    home.compiler.kernels_dir().map(Into::into),
                    home.compiler.cache_dir().map(Into::into),
                )?
            };
            let kernels = Kernels::load_in(&compiler, context, variant)?;
            let bodies = partition.bodies as usize;
            let own = if index == 0 { 0 } else { 2 * n as usize + bodies };
            let needed = (own + bodies + slices as usize * bodies) * vector;
            let (free, _) = context.memory_info()?;
            if needed > free {
                return Err(Error::InvalidInput(format!(
                    "device {} needs {} MiB for its share of {n} bodies and {} MiB are free: choose fewer bodies",
                    context.device().ordinal,
                    needed >> 20,
                    free >> 20
                )));
            }
            let (positions, velocities) = if index == 0 {
                (None, None)
            } else {
                (
                    Some([
                        DeviceBuffer::new(context, n as usize * vector)?,
                        DeviceBuffer::new(context, n as usize * vector)?,
                    ]),
                    Some(DeviceBuffer::new(context, bodies * vector)?),
                )
            };
            // Marks: start, after drift, after own forces, (start, end) per other device, after kick.
            timers.push(EventRing::new(context, 4, 2 * contexts.len() + 2)?);
            exchange_timers.push(EventRing::new(context, 4, 2)?);
            sent.push(Event::new_untimed(context)?);
            parts.push(Part {
                drifted: Event::new_untimed(context)?,
                kicked: Event::new_untimed(context)?,
                finished: Event::new_untimed(context)?,
                kernels,
                positions,
                velocities,
                accelerations: DeviceBuffer::new(context, bodies * vector)?,
                partial: DeviceBuffer::new(context, slices as usize * bodies * vector)?,
                stream: Stream::new(context)?,
                exchange: Stream::new(context)?,
                partition: *partition,
                context: context.clone(),
            });
        }
        home_context.make_current()?;
        Ok(Self {
            timers,
            exchange_timers,
            sent,
            compute_times: vec![VecDeque::new(); parts.len()],
            exchange_times: vec![VecDeque::new(); parts.len()],
            begin: Event::new_untimed(home_context)?,
            parts,
            routes,
            n,
            slices,
            slice_length,
            current: 0,
            gather_velocities,
            home: home_context.clone(),
        })
    }

    /// Number of bodies.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Whether there are no bodies (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// j slices in all.
    pub fn slices(&self) -> u32 {
        self.slices
    }

    /// Bodies per j slice.
    pub fn slice_length(&self) -> u32 {
        self.slice_length
    }

    /// The forces kernel variant.
    pub fn variant(&self) -> Variant {
        self.parts.first().map(|part| part.kernels.variant).unwrap_or_default()
    }

    /// Number of devices (contexts).
    pub fn device_count(&self) -> usize {
        self.parts.len()
    }

    /// Each device's ordinal, context kind and bodies.
    pub fn devices(&self) -> Vec<DeviceSummary> {
        self.parts
            .iter()
            .map(|part| DeviceSummary {
                ordinal: part.context.device().ordinal,
                name: part.context.device().name.clone(),
                context: match part.context.kind() {
                    crate::cuda::context::ContextKind::Primary => "primary",
                    crate::cuda::context::ContextKind::Created => "created",
                },
                first_body: part.partition.first_body,
                bodies: part.partition.bodies,
            })
            .collect()
    }

    /// `routes()[from][to]`: how positions go from device `from` to device `to`.
    pub fn routes(&self) -> &[Vec<Route>] {
        &self.routes
    }

    /// The routes in one line, e.g. `0→1 peer to peer, 1→0 peer to peer`.
    pub fn routes_label(&self) -> String {
        let mut seen: Vec<Route> = Vec::new();
        let mut pairs = Vec::new();
        for (from, row) in self.routes.iter().enumerate() {
            for (to, route) in row.iter().enumerate() {
                if from != to {
                    pairs.push(format!("{from}->{to}"));
                    if !seen.contains(route) {
                        seen.push(*route);
                    }
                }
            }
        }
        match seen.as_slice() {
            [] => "one device, no exchange".to_owned(),
            [only] => format!("cuMemcpyPeerAsync, {} ({})", only.label(), pairs.join(", ")),
            _ => {
                let mut parts = Vec::new();
                for (from, row) in self.routes.iter().enumerate() {
                    for (to, route) in row.iter().enumerate() {
                        if from != to {
                            parts.push(format!("{from}->{to} {}", route.label()));
                        }
                    }
                }
                format!("cuMemcpyPeerAsync: {}", parts.join(", "))
            }
        }
    }

    /// Spans part `index` uses this step.
    fn spans(&self, index: usize, home: &StepBuffers) -> Result<PartSpans> {
        let part = &self.parts[index];
        let vector = Precision::F32.vector_bytes();
        let own = (part.partition.first_body as usize * vector, part.partition.bodies as usize * vector);
        match (&part.positions, &part.velocities) {
            (Some(positions), Some(velocities)) => {
                Ok((positions[self.current].span(), positions[1 - self.current].span(), velocities.span()))
            }
            _ => Ok((home.positions_in, home.positions_out, home.velocities.range(own.0, own.1)?)),
        }
    }

    fn check_home(&self, home: &StepBuffers) -> Result<()> {
        let needed = self.n as usize * Precision::F32.vector_bytes();
        for (name, span) in [
            ("positions in", home.positions_in),
            ("positions out", home.positions_out),
            ("velocities", home.velocities),
        ] {
            if span.bytes < needed {
                return Err(Error::InvalidInput(format!(
                    "n-body across devices: {name} buffer has {} bytes, {needed} needed",
                    span.bytes
                )));
            }
        }
        Ok(())
    }

    /// Accelerations of the current state, after a reset or load: copies the caller's positions
    /// (all) and velocities (each device's share) to the other devices, then on every device
    /// forces against all slices and a kick with dt = 0. Work waits for, and `stream` waits on,
    /// everything queued.
    pub fn initialise(&mut self, stream: &Stream, home: &StepBuffers, params: &Params) -> Result<()> {
        let result = self.initialise_inner(stream, home, params);
        self.home.make_current()?;
        result
    }

    fn initialise_inner(&mut self, stream: &Stream, home: &StepBuffers, params: &Params) -> Result<()> {
        self.check_home(home)?;
        let only_accelerations = Params { dt: 0.0, damping: 1.0, ..*params };
        self.home.make_current()?;
        self.begin.record(stream)?;
        for index in 0..self.parts.len() {
            let (positions, _, velocities) = self.spans(index, home)?;
            let (home_context, begin) = (&self.home, &self.begin);
            let (n, slices, slice_length) = (self.n, self.slices, self.slice_length);
            let part = &mut self.parts[index];
            part.context.make_current()?;
            part.stream.wait_event(begin)?;
            if index > 0 {
                let vector = Precision::F32.vector_bytes();
                let own = home
                    .velocities
                    .range(part.partition.first_body as usize * vector, part.partition.bodies as usize * vector)?;
                copy_peer_async(&part.stream, positions, &part.context, home.positions_in, home_context)?;
                copy_peer_async(&part.stream, velocities, &part.context, own, home_context)?;
            }
            let range = ForcesRange {
                n,
                slice_length,
                slices,
                first_body: part.partition.first_body,
                bodies: part.partition.bodies,
                first_slice: 0,
                slice_count: slices,
            };
            part.kernels.forces_range(&part.stream, positions, part.partial.span(), &range, params)?;
            part.kernels.kick(
                &part.stream,
                velocities,
                part.accelerations.span(),
                part.partial.span(),
                None,
                part.partition.bodies,
                slices,
                &only_accelerations,
            )?;
            part.finished.record(&part.stream)?;
        }
        self.home.make_current()?;
        for part in &self.parts {
            stream.wait_event(&part.finished)?;
        }
        Ok(())
    }

    /// One kick-drift-kick step of all bodies on all devices; `stream` (the caller's, in the first
    /// device's context) waits for all of it, so work queued on it afterwards (an unmap, the
    /// energy) sees the whole new state in `home`. GPU times come later from [`Self::poll_times`].
    pub fn step(&mut self, stream: &Stream, home: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        let result = self.step_inner(stream, home, params, tag);
        self.home.make_current()?;
        result?;
        self.current = 1 - self.current;
        Ok(())
    }

    fn step_inner(&mut self, stream: &Stream, home: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        self.check_home(home)?;
        let spans: Vec<PartSpans> =
            (0..self.parts.len()).map(|index| self.spans(index, home)).collect::<Result<_>>()?;
        let vector = Precision::F32.vector_bytes();
        let (n, slices, slice_length) = (self.n, self.slices, self.slice_length);
        self.home.make_current()?;
        self.begin.record(stream)?;
        let marks: Vec<_> = self.timers.iter_mut().map(EventRing::begin).collect();
        let exchange_marks: Vec<_> = self.exchange_timers.iter_mut().map(EventRing::begin).collect();

        // Phase 1, every device: drift its bodies, then send them to every other device. All
        // `sent` events are recorded before any device is told to wait on one (a wait binds to
        // the latest record at the time of the call).
        let contexts: Vec<Rc<Context>> = self.parts.iter().map(|part| part.context.clone()).collect();
        for (index, part) in self.parts.iter_mut().enumerate() {
            let (positions_in, positions_out, velocities) = spans[index];
            let own = (part.partition.first_body as usize * vector, part.partition.bodies as usize * vector);
            part.context.make_current()?;
            part.stream.wait_event(&self.begin)?;
            marks[index].mark(0, &part.stream)?;
            part.kernels.drift(
                &part.stream,
                positions_in.range(own.0, own.1)?,
                positions_out.range(own.0, own.1)?,
                velocities,
                part.accelerations.span(),
                None,
                part.partition.bodies,
                params,
            )?;
            marks[index].mark(1, &part.stream)?;
            part.drifted.record(&part.stream)?;
            part.exchange.wait_event(&part.drifted)?;
            exchange_marks[index].mark(0, &part.exchange)?;
            let source = positions_out.range(own.0, own.1)?;
            for (other, target) in contexts.iter().enumerate() {
                if other != index {
                    let destination = spans[other].1.range(own.0, own.1)?;
                    copy_peer_async(&part.exchange, destination, target, source, &part.context)?;
                }
            }
            exchange_marks[index].mark(1, &part.exchange)?;
            self.sent[index].record(&part.exchange)?;
        }

        // Phase 2, every device: forces against its own slices (the copies run meanwhile), then
        // against each other device's slices once they have arrived, then the kick.
        let count = self.parts.len();
        let partitions: Vec<Partition> = self.parts.iter().map(|part| part.partition).collect();
        for (index, part) in self.parts.iter_mut().enumerate() {
            let (_, positions_out, velocities) = spans[index];
            part.context.make_current()?;
            let own = partitions[index];
            let range = |of: &Partition| ForcesRange {
                n,
                slice_length,
                slices,
                first_body: own.first_body,
                bodies: own.bodies,
                first_slice: of.first_slice,
                slice_count: of.slice_count,
            };
            part.kernels.forces_range(&part.stream, positions_out, part.partial.span(), &range(&own), params)?;
            marks[index].mark(2, &part.stream)?;
            let others = self.sent.iter().zip(&partitions).enumerate().filter(|(other, _)| *other != index);
            for (slot, (_, (sent, partition))) in others.enumerate() {
                part.stream.wait_event(sent)?;
                marks[index].mark(3 + 2 * slot, &part.stream)?;
                part.kernels.forces_range(
                    &part.stream,
                    positions_out,
                    part.partial.span(),
                    &range(partition),
                    params,
                )?;
                marks[index].mark(4 + 2 * slot, &part.stream)?;
            }
            part.kernels.kick(
                &part.stream,
                velocities,
                part.accelerations.span(),
                part.partial.span(),
                None,
                own.bodies,
                slices,
                params,
            )?;
            marks[index].mark(2 * count + 1, &part.stream)?;
            part.kicked.record(&part.stream)?;
            part.exchange.wait_event(&part.kicked)?;
            if self.gather_velocities && index > 0 {
                let destination =
                    home.velocities.range(own.first_body as usize * vector, own.bodies as usize * vector)?;
                copy_peer_async(&part.exchange, destination, &self.home, velocities, &part.context)?;
            }
            part.finished.record(&part.exchange)?;
        }
        drop(marks);
        drop(exchange_marks);
        for timer in self.timers.iter_mut().chain(self.exchange_timers.iter_mut()) {
            timer.commit(tag);
        }

        // Phase 3: the caller's stream waits for every device.
        self.home.make_current()?;
        for part in &self.parts {
            stream.wait_event(&part.finished)?;
        }
        Ok(())
    }

    /// GPU times of an earlier step, per device, once every device has finished it: `(tag,
    /// times)`. Never blocks.
    pub fn poll_times(&mut self) -> Result<Option<(u64, Vec<DeviceTimes>)>> {
        let count = self.parts.len();
        // Drain whatever each ring has finished into its queue: devices finish a step at
        // different times, and a ring may skip a step another timed (when all its sets were
        // still in flight).
        for (index, (timer, exchange)) in self.timers.iter_mut().zip(&mut self.exchange_timers).enumerate() {
            let mut intervals = vec![0.0; 2 * count + 1];
            while let Some(tag) = timer.poll(&mut intervals)? {
                self.compute_times[index].push_back((tag, intervals.clone()));
            }
            let mut copy = [0.0];
            while let Some(tag) = exchange.poll(&mut copy)? {
                self.exchange_times[index].push_back((tag, copy[0]));
            }
        }
        loop {
            let fronts: Option<Vec<u64>> = self
                .compute_times
                .iter()
                .map(|queue| queue.front().map(|(tag, _)| *tag))
                .chain(self.exchange_times.iter().map(|queue| queue.front().map(|(tag, _)| *tag)))
                .collect();
            let Some(fronts) = fronts else { return Ok(None) };
            let Some(newest) = fronts.iter().copied().max() else { return Ok(None) };
            if fronts.iter().all(|&tag| tag == newest) {
                break;
            }
            // A step some ring did not time can never be complete: drop it everywhere.
            for queue in &mut self.compute_times {
                queue.pop_front_if(|(tag, _)| *tag < newest);
            }
            for queue in &mut self.exchange_times {
                queue.pop_front_if(|(tag, _)| *tag < newest);
            }
        }
        let mut tag = 0;
        let mut times = Vec::with_capacity(count);
        for (compute, exchange) in self.compute_times.iter_mut().zip(&mut self.exchange_times) {
            let (Some((step, intervals)), Some((_, exchange_us))) = (compute.pop_front(), exchange.pop_front()) else {
                return Ok(None);
            };
            tag = step;
            let others = count - 1;
            times.push(DeviceTimes {
                drift_us: intervals[0],
                own_forces_us: intervals[1],
                wait_us: (0..others).map(|slot| intervals[2 + 2 * slot]).sum(),
                remote_forces_us: (0..others).map(|slot| intervals[3 + 2 * slot]).sum(),
                kick_us: intervals[2 * count],
                exchange_us,
            });
        }
        Ok(Some((tag, times)))
    }

    /// Waits, on the host, for all work of every device.
    pub fn synchronize(&self) -> Result<()> {
        for part in &self.parts {
            part.stream.synchronize()?;
            part.exchange.synchronize()?;
        }
        Ok(())
    }
}

impl Drop for MultiSimulation {
    fn drop(&mut self) {
        // Each part's objects are released with its own context current, newest first; then the
        // caller's context is made current again.
        self.timers.clear();
        self.exchange_timers.clear();
        self.sent.clear();
        while let Some(part) = self.parts.pop() {
            if let Err(error) = part.stream.synchronize().and_then(|()| part.exchange.synchronize()) {
                self.home.defer_error(error);
            }
            if let Err(error) = part.context.make_current() {
                self.home.defer_error(error);
            }
            drop(part);
        }
        if let Err(error) = self.home.make_current() {
            log::error!("{error}");
        }
    }
}
