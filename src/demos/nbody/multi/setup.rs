//! Setting the devices up: the slices and each device's share of them, a context, streams,
//! events, kernels and memory per device, and peer access between them (the routes).

use std::collections::VecDeque;
use std::rc::Rc;

use super::super::kernels::{Kernels, Precision, Variant};
use super::super::sim::slice_length;
use super::partition::{check_ordinals, partition, total_slices};
use super::{MultiSimulation, Part, Route};
use crate::cuda::timing::EventRing;
use crate::cuda::{Compiler, Context, DeviceBuffer, Event, Stream, device};
use crate::runtime::CudaRuntime;
use crate::error::{Error, Result};

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

        let contexts = contexts_for(home_context, ordinals)?;
        let routes = routes_between(&contexts)?;

        let vector = Precision::F32.vector_bytes();
        let mut parts = Vec::with_capacity(contexts.len());
        let mut timers = Vec::with_capacity(contexts.len());
        let mut exchange_timers = Vec::with_capacity(contexts.len());
        let mut sent = Vec::with_capacity(contexts.len());
        for (index, (context, partition)) in contexts.iter().zip(&partitions).enumerate() {
            context.make_current()?;
            let compiler = compiler_for(home, home_context, context)?;
            let kernels = Kernels::load_in(&compiler, context, variant)?;
            let bodies = partition.bodies as usize;
            check_free_memory(context, index, bodies, n, slices)?;
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
}

/// A context per entry of `ordinals`, the first `home_context`. An entry naming a device already
/// used gets a context of its own (`cuCtxCreate`), the others their device's primary context.
fn contexts_for(home_context: &Rc<Context>, ordinals: &[i32]) -> Result<Vec<Rc<Context>>> {
    let mut contexts: Vec<Rc<Context>> = vec![home_context.clone()];
    for (index, &ordinal) in ordinals.iter().enumerate().skip(1) {
        let context = if ordinals[..index].contains(&ordinal) {
            Context::new_separate(home_context.driver(), ordinal)?
        } else {
            Context::new(home_context.driver(), ordinal)?
        };
        contexts.push(context);
    }
    Ok(contexts)
}

/// How positions travel between each pair of `contexts` (`[from][to]`), enabling peer access
/// wherever the devices allow it.
fn routes_between(contexts: &[Rc<Context>]) -> Result<Vec<Vec<Route>>> {
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
    Ok(routes)
}

/// The home runtime's compiler when `context`'s device has the home device's compute capability,
/// else one of its own for that capability, reading the same kernel and cache folders.
fn compiler_for(home: &CudaRuntime, home_context: &Context, context: &Context) -> Result<Compiler> {
    Ok(if context.device().compute_capability == home_context.device().compute_capability {
        home.compiler.clone()
    } else {
        Compiler::new(
            context.device().compute_capability,
            home.compiler.kernels_dir().map(Into::into),
            home.compiler.cache_dir().map(Into::into),
        )?
    })
}

/// Fails, before part `index`'s buffers are allocated, when `context`'s device has too little free
/// memory for them: accelerations and `slices` partial sums of its `bodies`, and on every device
/// but the first (which uses the caller's buffers) two full-length position buffers of `n` bodies
/// and its velocities.
fn check_free_memory(context: &Context, index: usize, bodies: usize, n: u32, slices: u32) -> Result<()> {
    let vector = Precision::F32.vector_bytes();
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
    Ok(())
}
