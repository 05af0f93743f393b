//! The n-body simulation on CUDA: the device memory a step needs besides the GL buffers, the
//! three launches of a step, the energy readout and the timing of the forces kernel.

use std::rc::Rc;

use super::cpu::Params;
use super::kernels::{Kernels, Precision};
use super::presets::Bodies;
use super::tree::gpu::GpuTree;
use super::tree::{ForceMethod, Method};
use crate::cuda::timing::EventRing;
use crate::cuda::{Compiler, Context, DeviceBuffer, DeviceSpan, Event, PinnedBuffer, Stream};
use crate::numbers::Ranged;
use crate::error::{Error, Result};

/// Most slices the j range is cut into.
const MAX_SLICES: u32 = 64;

/// Slices the j range may be cut into (`--slices`).
pub const SLICES: Ranged<u32> = Ranged::new(1, MAX_SLICES).unit("slices");

/// How to cut the j range of the forces kernel: enough blocks to fill the GPU several times over.
pub fn auto_slices(multiprocessors: i32, bodies_per_block: u32, tile: u32, n: u32) -> u32 {
    let blocks = n.div_ceil(bodies_per_block.max(1)).max(1);
    let wanted = (4 * multiprocessors.max(1) as u32).div_ceil(blocks);
    let most = (n / tile.max(1)).clamp(1, MAX_SLICES);
    wanted.clamp(1, most)
}

/// Length of each slice for `slices` slices of `n` bodies: a whole number of tiles.
pub fn slice_length(n: u32, slices: u32, tile: u32) -> u32 {
    let tile = tile.max(1);
    n.div_ceil(slices.max(1)).div_ceil(tile).max(1) * tile
}

/// The state in device memory: positions (ping-pong) and velocities, in the variant's precision
/// (fp64 always; fp32 when the GL buffers are a pipeline of display copies).
struct DeviceState {
    positions: [DeviceBuffer; 2],
    velocities: DeviceBuffer,
    current: usize,
}

/// An energy computation in flight.
struct EnergyReadback {
    sums: DeviceBuffer,
    host: PinnedBuffer,
    done: Event,
    pending: Option<u64>,
}

/// Everything CUDA-side of a running simulation except the GL buffers.
pub struct Simulation {
    context: Rc<Context>,
    kernels: Kernels,
    n: u32,
    slices: u32,
    slice_length: u32,
    accelerations: DeviceBuffer,
    partial: DeviceBuffer,
    device_state: Option<DeviceState>,
    energy: EnergyReadback,
    force_timer: EventRing,
    method: ForceMethod,
    /// The tree's kernels and scratch, made when the tree method is first chosen.
    tree: Option<GpuTree>,
}

/// What one step reads and writes in GL buffers (device pointers of the mapped buffers).
#[derive(Debug, Clone, Copy)]
pub struct StepBuffers {
    /// Positions before the step (fp32: the state; fp64: unused).
    pub positions_in: DeviceSpan,
    /// Positions after the step (fp32: the state; fp64: float copy for drawing).
    pub positions_out: DeviceSpan,
    /// Velocities (fp32: the state; fp64: float copy for colouring).
    pub velocities: DeviceSpan,
}

impl Simulation {
    /// Device memory for `n` bodies with `kernels`. For fp64, and for fp32 with `device_state`,
    /// the state is uploaded from `bodies` and the GL buffers only receive float copies to draw;
    /// otherwise (fp32) it lives in the GL buffers the caller fills. Fails with a clear message
    /// when the device lacks the memory, allocating nothing.
    pub fn new(
        context: &Rc<Context>,
        kernels: Kernels,
        bodies: &Bodies,
        slices: Option<u32>,
        device_state: bool,
    ) -> Result<Self> {
        let n = u32::try_from(bodies.len()).map_err(|_| Error::InvalidInput("too many bodies".to_owned()))?;
        if n == 0 {
            return Err(Error::InvalidInput("the simulation needs at least 1 body".to_owned()));
        }
        let variant = kernels.variant;
        let slices = slices.unwrap_or_else(|| {
            auto_slices(context.device().multiprocessors, variant.bodies_per_block(), variant.tile_size, n)
        });
        SLICES.check_value("slices", slices).map_err(Error::InvalidInput)?;
        let slice_length = slice_length(n, slices, variant.tile_size);
        let slices = n.div_ceil(slice_length);
        kernels.validate_forces(n, slice_length)?;

        let vector = variant.precision.vector_bytes();
        let device_state = device_state || variant.precision == Precision::F64;
        let double_bytes = if device_state { 3 * n as usize * vector } else { 0 };
        // GL's buffers (3 × n × 16 bytes) are counted too: they come out of the same memory.
        let needed = (1 + slices as usize) * n as usize * vector + double_bytes + 3 * n as usize * 16;
        let (free, _) = context.memory_info()?;
        if needed > free {
            return Err(Error::InvalidInput(format!(
                "{n} bodies need {} MiB of device memory and {} MiB are free: choose fewer bodies",
                needed >> 20,
                free >> 20
            )));
        }
        let accelerations = DeviceBuffer::new(context, n as usize * vector)?;
        let partial = DeviceBuffer::new(context, slices as usize * n as usize * vector)?;
        let blocks = Kernels::energy_blocks(n) as usize;
        let energy = EnergyReadback {
            sums: DeviceBuffer::new(context, blocks * 16)?,
            host: PinnedBuffer::new(context, blocks * 16)?,
            done: Event::new(context)?,
            pending: None,
        };
        let device_state = if device_state {
            let stream = Stream::new(context)?;
            let positions: Vec<[f64; 4]> = bodies.positions.clone();
            let velocities: Vec<[f64; 4]> = bodies.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect();
            let (positions, velocities): (Vec<u8>, Vec<u8>) = match variant.precision {
                Precision::F64 => {
                    (bytemuck::cast_slice(&positions).to_vec(), bytemuck::cast_slice(&velocities).to_vec())
                }
                Precision::F32 => {
                    let narrow = |v: &Vec<[f64; 4]>| -> Vec<u8> {
                        let floats: Vec<[f32; 4]> = v.iter().map(|x| x.map(|c| c as f32)).collect();
                        bytemuck::cast_slice(&floats).to_vec()
                    };
                    (narrow(&positions), narrow(&velocities))
                }
            };
            let mut state = DeviceState {
                positions: [
                    DeviceBuffer::new(context, n as usize * vector)?,
                    DeviceBuffer::new(context, n as usize * vector)?,
                ],
                velocities: DeviceBuffer::new(context, n as usize * vector)?,
                current: 0,
            };
            for buffer in &mut state.positions {
                buffer.upload(&stream, &positions)?;
            }
            state.velocities.upload(&stream, &velocities)?;
            Some(state)
        } else {
            None
        };
        Ok(Self {
            context: context.clone(),
            kernels,
            n,
            slices,
            slice_length,
            accelerations,
            partial,
            device_state,
            energy,
            force_timer: EventRing::new(context, crate::cuda::timing::TIMED_FRAMES, 2)?,
            method: ForceMethod::default(),
            tree: None,
        })
    }

    /// Chooses the force method; the tree's kernels and scratch are made the first time it is
    /// chosen (fp32 only). On failure the method in use stays.
    pub fn set_method(&mut self, compiler: &Compiler, method: ForceMethod) -> Result<()> {
        if method.method == Method::Tree {
            super::tree::validate_theta(method.theta)?;
            if self.kernels.variant.precision != Precision::F32 {
                return Err(Error::InvalidInput(
                    "the tree method runs in fp32 on CUDA: choose fp32, or the all-pairs method for fp64".to_owned(),
                ));
            }
            if self.tree.is_none() {
                self.tree = Some(GpuTree::new(compiler, &self.context, self.n)?);
            }
        }
        self.method = method;
        Ok(())
    }

    /// The force method in use.
    pub fn method(&self) -> ForceMethod {
        self.method
    }

    /// Interactions of the last finished tree walk (never blocking); an error when a walk hit its
    /// stack or visit bound.
    pub fn poll_tree_status(&mut self) -> Result<Option<u64>> {
        match &mut self.tree {
            Some(tree) => tree.poll_status(),
            None => Ok(None),
        }
    }

    /// Queues the overlay's boxes of the tree the last step built into `vertices`
    /// (`tree::boxes`); an error when the tree method is not in use.
    pub fn write_tree_boxes(&mut self, stream: &Stream, vertices: DeviceSpan, levels: u32) -> Result<()> {
        match &mut self.tree {
            Some(tree) if self.method.method == Method::Tree => tree.write_boxes(stream, vertices, levels),
            _ => Err(Error::InvalidInput("the tree is drawn only with the tree method".to_owned())),
        }
    }

    /// Waits for the last tree walk: its interactions, or the error it reported.
    pub fn finish_tree(&mut self) -> Result<u64> {
        match &mut self.tree {
            Some(tree) => tree.finish(),
            None => Ok(0),
        }
    }

    /// The kernels in use.
    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// Number of bodies.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Whether there are no bodies (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Slices of the j range (gridDim.y of the forces kernel).
    pub fn slices(&self) -> u32 {
        self.slices
    }

    /// Replaces the kernels with another variant of the same precision. If the new forces launch
    /// can't run for this `n`, nothing changes.
    pub fn set_kernels(&mut self, kernels: Kernels) -> Result<Kernels> {
        if kernels.variant.precision != self.kernels.variant.precision {
            return Err(Error::InvalidInput("a precision change needs a new simulation".to_owned()));
        }
        let slice_length = slice_length(self.n, self.slices, kernels.variant.tile_size);
        let slices = self.n.div_ceil(slice_length);
        if slices > self.slices {
            return Err(Error::InvalidInput("this tile size needs more slices than allocated".to_owned()));
        }
        kernels.validate_forces(self.n, slice_length)?;
        self.slice_length = slice_length;
        self.slices = slices;
        Ok(std::mem::replace(&mut self.kernels, kernels))
    }

    /// Computes the accelerations of the current state (after a reset or load): forces, then a
    /// kick with dt = 0. The forces kernel is timed like a step's.
    pub fn initialise(&mut self, stream: &Stream, buffers: &StepBuffers, params: &Params) -> Result<()> {
        let (positions, velocities, display) = self.state_spans(buffers);
        let only_accelerations = Params { dt: 0.0, damping: 1.0, ..*params };
        let marks = self.force_timer.begin();
        marks.mark(0, stream)?;
        let slices = queue_forces(
            ForcesOf { kernels: &mut self.kernels, tree: self.tree.as_mut(), method: self.method },
            stream,
            positions,
            self.partial.span(),
            (self.n, self.slice_length, self.slices),
            params,
        )?;
        marks.mark(1, stream)?;
        self.force_timer.commit(u64::MAX);
        self.kernels.kick(
            stream,
            velocities,
            self.accelerations.span(),
            self.partial.span(),
            display,
            self.n,
            slices,
            &only_accelerations,
        )
    }

    /// (positions, velocities, display velocities) of the current state.
    fn state_spans(&self, buffers: &StepBuffers) -> (DeviceSpan, DeviceSpan, Option<DeviceSpan>) {
        match &self.device_state {
            None => (buffers.positions_in, buffers.velocities, None),
            Some(state) => (state.positions[state.current].span(), state.velocities.span(), Some(buffers.velocities)),
        }
    }

    /// One kick-drift-kick step; the forces kernel is timed for [`Self::poll_force_time`].
    pub fn step(&mut self, stream: &Stream, buffers: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        let (positions_in, positions_out, velocities, display_positions, display_velocities) =
            match &mut self.device_state {
                None => (buffers.positions_in, buffers.positions_out, buffers.velocities, None, None),
                Some(state) => {
                    let from = state.current;
                    state.current = 1 - from;
                    (
                        state.positions[from].span(),
                        state.positions[1 - from].span(),
                        state.velocities.span(),
                        Some(buffers.positions_out),
                        Some(buffers.velocities),
                    )
                }
            };
        let accelerations = self.accelerations.span();
        self.kernels.drift(
            stream,
            positions_in,
            positions_out,
            velocities,
            accelerations,
            display_positions,
            self.n,
            params,
        )?;
        let marks = self.force_timer.begin();
        marks.mark(0, stream)?;
        let slices = queue_forces(
            ForcesOf { kernels: &mut self.kernels, tree: self.tree.as_mut(), method: self.method },
            stream,
            positions_out,
            self.partial.span(),
            (self.n, self.slice_length, self.slices),
            params,
        )?;
        marks.mark(1, stream)?;
        self.force_timer.commit(tag);
        self.kernels.kick(
            stream,
            velocities,
            accelerations,
            self.partial.span(),
            display_velocities,
            self.n,
            slices,
            params,
        )
    }

    /// GPU time of the forces kernel of an earlier step: `(tag, µs)`, never blocking.
    pub fn poll_force_time(&mut self) -> Result<Option<(u64, f64)>> {
        let mut interval = [0.0];
        Ok(self.force_timer.poll(&mut interval)?.map(|tag| (tag, interval[0])))
    }

    /// Queues an energy computation of the current state (one at a time; later requests while one
    /// is in flight are ignored). `buffers.positions_in` must hold the current fp32 state.
    pub fn request_energy(&mut self, stream: &Stream, buffers: &StepBuffers, params: &Params, tag: u64) -> Result<()> {
        if self.energy.pending.is_some() {
            return Ok(());
        }
        let (positions, velocities, _) = self.state_spans(buffers);
        self.kernels.energy(stream, positions, velocities, self.energy.sums.span(), self.n, params)?;
        self.energy.host.download_async(stream, self.energy.sums.span())?;
        self.energy.done.record(stream)?;
        self.energy.pending = Some(tag);
        Ok(())
    }

    /// A finished energy computation: `(tag, kinetic, potential)`.
    pub fn poll_energy(&mut self) -> Result<Option<(u64, f64, f64)>> {
        let Some(tag) = self.energy.pending else {
            return Ok(None);
        };
        if !self.energy.done.is_complete()? {
            return Ok(None);
        }
        self.energy.pending = None;
        let sums: &[f64] = bytemuck::try_cast_slice(self.energy.host.as_slice())
            .map_err(|e| Error::InvalidInput(format!("energy readback: {e}")))?;
        let kinetic = sums.iter().step_by(2).sum();
        let potential = sums.iter().skip(1).step_by(2).sum();
        Ok(Some((tag, kinetic, potential)))
    }

    /// Whether the state is in device memory (the GL buffers then hold float copies to draw).
    pub fn has_device_state(&self) -> bool {
        self.device_state.is_some()
    }

    /// The state in device memory, read back (for saving or switching precision); `None` when it
    /// is in the GL buffers (fp32 without a pipeline).
    pub fn read_device_state(&self, stream: &Stream) -> Result<Option<Bodies>> {
        let Some(state) = &self.device_state else {
            return Ok(None);
        };
        let n = self.n as usize;
        let (positions, velocities) = match self.kernels.variant.precision {
            Precision::F64 => {
                let mut positions = vec![[0.0f64; 4]; n];
                let mut velocities = vec![[0.0f64; 4]; n];
                state.positions[state.current].download(stream, bytemuck::cast_slice_mut(&mut positions))?;
                state.velocities.download(stream, bytemuck::cast_slice_mut(&mut velocities))?;
                (positions, velocities)
            }
            Precision::F32 => {
                let mut positions = vec![[0.0f32; 4]; n];
                let mut velocities = vec![[0.0f32; 4]; n];
                state.positions[state.current].download(stream, bytemuck::cast_slice_mut(&mut positions))?;
                state.velocities.download(stream, bytemuck::cast_slice_mut(&mut velocities))?;
                let widen = |v: Vec<[f32; 4]>| v.iter().map(|x| x.map(f64::from)).collect::<Vec<_>>();
                (widen(positions), widen(velocities))
            }
        };
        Ok(Some(Bodies { positions, velocities: velocities.iter().map(|v| [v[0], v[1], v[2]]).collect() }))
    }

    /// a(x) of the current state (with G), as the next step's first kick uses it, widened to f64;
    /// waits for the copy. The caller synchronizes the stream that stepped first.
    pub fn read_accelerations(&self, stream: &Stream) -> Result<Vec<[f64; 4]>> {
        let n = self.n as usize;
        match self.kernels.variant.precision {
            Precision::F64 => {
                let mut accelerations = vec![[0.0f64; 4]; n];
                self.accelerations.download(stream, bytemuck::cast_slice_mut(&mut accelerations))?;
                Ok(accelerations)
            }
            Precision::F32 => {
                let mut accelerations = vec![[0.0f32; 4]; n];
                self.accelerations.download(stream, bytemuck::cast_slice_mut(&mut accelerations))?;
                Ok(accelerations.iter().map(|a| a.map(f64::from)).collect())
            }
        }
    }

    /// The context.
    pub fn context(&self) -> &Rc<Context> {
        &self.context
    }
}

/// What queues a step's forces: all-pairs' kernels, and the tree when it is the method.
struct ForcesOf<'a> {
    kernels: &'a mut Kernels,
    tree: Option<&'a mut GpuTree>,
    method: ForceMethod,
}

/// Queues `partial` from `positions` by the method in use; returns the slices the kick sums
/// (the tree writes one). `shape` is (n, slice length, slices) of all-pairs.
fn queue_forces(
    forces: ForcesOf<'_>,
    stream: &Stream,
    positions: DeviceSpan,
    partial: DeviceSpan,
    shape: (u32, u32, u32),
    params: &Params,
) -> Result<u32> {
    let (n, slice_length, slices) = shape;
    match (forces.tree, forces.method.method) {
        (Some(tree), Method::Tree) => {
            tree.forces(stream, positions, partial, forces.method.theta, params.softening)?;
            Ok(1)
        }
        _ => {
            forces.kernels.forces(stream, positions, partial, n, slice_length, params)?;
            Ok(slices)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_fill_the_gpu_and_cover_every_body() {
        // 65536 bodies, 512 per block → 128 blocks; 132 SMs want ≥ 528 blocks → 5 slices.
        assert_eq!(auto_slices(132, 512, 256, 65536), 5);
        // Large N already fills the GPU.
        assert_eq!(auto_slices(132, 512, 256, 1 << 20), 1);
        // Never more slices than tiles.
        assert_eq!(auto_slices(132, 512, 256, 300), 1);
        for (n, slices, tile) in [(65536u32, 5u32, 256u32), (1000, 3, 128), (7, 4, 256), (1, 1, 64)] {
            let length = slice_length(n, slices, tile);
            assert_eq!(length % tile, 0);
            assert!(length * n.div_ceil(length) >= n, "slices cover all bodies");
            assert!(n.div_ceil(length) <= slices);
        }
    }
}
