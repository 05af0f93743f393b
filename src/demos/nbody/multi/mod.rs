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
mod setup;
mod step;

use std::collections::VecDeque;
use std::rc::Rc;

use super::kernels::{Kernels, Variant};
use crate::error::Result;
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceBuffer, DeviceSpan, Event, Stream};

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
