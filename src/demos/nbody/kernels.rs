//! The kernels of `kernels/nbody.cu`, compiled per variant, and their typed launches: the one
//! place that vouches for their argument lists.
#![allow(unsafe_code)]

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::cpu::Params;
use crate::cuda::launch::{KernelArg, arg};
use crate::cuda::module::{CompiledModule, FunctionAttributes};
use crate::cuda::{
    Compiler, Context, DeviceBuffer, DeviceLimits, DeviceSpan, Event, Function, LaunchConfig, Module, Stream,
};
use crate::numbers::Ranged;
use crate::runtime::CudaRuntime;
use crate::sources::SourceFile;
use crate::error::{Error, Result};
use crate::sources::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/nbody.cu");

/// Threads per block of the O(N) kernels (drift, kick) and of the energy kernel (fixed in the source).
const SMALL_BLOCK: u32 = 256;

/// Threads per block of the forces kernel: whole warps, up to the most a CUDA block has.
pub const BLOCK_SIZES: Ranged<u32> = Ranged::new(32, 1024).unit("threads").multiple_of(32);

/// Bodies staged in shared memory per tile.
pub const TILE_SIZES: Ranged<u32> = Ranged::new(1, 8192).unit("bodies");

/// Unroll factors of the loop over a tile.
pub const UNROLLS: Ranged<u32> = Ranged::new(1, 64);

/// Bodies each thread accumulates.
pub const BODIES_PER_THREAD: Ranged<u32> = Ranged::new(1, 8).unit("bodies");

/// Arithmetic and storage precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// float: positions live in the GL buffers themselves.
    F32,
    /// double: state in device memory, GL buffers get a float copy for drawing.
    F64,
}

impl Precision {
    /// Bytes of one 4-vector.
    pub fn vector_bytes(self) -> usize {
        match self {
            Precision::F32 => 16,
            Precision::F64 => 32,
        }
    }

    /// "f32" or "f64".
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

/// The compile-time shape of the forces kernel. Each distinct variant is one NVRTC compile
/// (cached on disk), so switching between variants already built is instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Variant {
    /// fp32 or fp64.
    pub precision: Precision,
    /// Threads per block.
    pub block_size: u32,
    /// Bodies staged in shared memory per tile.
    pub tile_size: u32,
    /// Unroll factor of the loop over a tile.
    pub unroll: u32,
    /// Bodies each thread accumulates.
    pub bodies_per_thread: u32,
}

impl Default for Variant {
    fn default() -> Self {
        Self { precision: Precision::F32, block_size: 256, tile_size: 256, unroll: 8, bodies_per_thread: 2 }
    }
}

impl Variant {
    /// Checks the values the kernel can be compiled with; the message names the rule broken.
    pub fn validate(&self) -> Result<()> {
        let rules = [
            ("block size", BLOCK_SIZES, self.block_size),
            ("tile size", TILE_SIZES, self.tile_size),
            ("unroll", UNROLLS, self.unroll),
            ("bodies per thread", BODIES_PER_THREAD, self.bodies_per_thread),
        ];
        for (name, range, value) in rules {
            range.check_value(name, value).map_err(|why| Error::InvalidInput(format!("forces kernel {why}")))?;
        }
        Ok(())
    }

    /// NVRTC options that select this variant. `--ftz=true` lets `rsqrtf` compile to a single
    /// MUFU.RSQ: without it the compiler wraps each one in instructions that rescale denormal
    /// inputs, which cost issue slots in the innermost loop and matter nowhere in gravity.
    pub fn options(&self) -> Vec<String> {
        let mut options = vec![
            "--ftz=true".to_owned(),
            format!("-DBLOCK_SIZE={}", self.block_size),
            format!("-DTILE_SIZE={}", self.tile_size),
            format!("-DUNROLL={}", self.unroll),
            format!("-DBODIES_PER_THREAD={}", self.bodies_per_thread),
        ];
        if self.precision == Precision::F64 {
            options.push("-DNBODY_DOUBLE".to_owned());
        }
        options
    }

    /// Bodies one block of the forces kernel computes.
    pub fn bodies_per_block(&self) -> u32 {
        self.block_size * self.bodies_per_thread
    }

    /// Dynamic shared memory of the forces kernel: one tile of 4-vectors.
    pub fn shared_bytes(&self) -> u32 {
        self.tile_size * self.precision.vector_bytes() as u32
    }

    /// A short label, e.g. `f32 b256 t256 u8 p2`.
    pub fn label(&self) -> String {
        format!(
            "{} block {} tile {} unroll {} bodies/thread {}",
            self.precision.name(),
            self.block_size,
            self.tile_size,
            self.unroll,
            self.bodies_per_thread
        )
    }
}

/// The four kernels of one variant.
pub struct Kernels {
    /// What they were compiled as.
    pub variant: Variant,
    /// Where the source came from.
    pub origin: String,
    /// NVRTC time (0 when cached) and whether the cache served it.
    pub compile_ms: f64,
    /// Served from the on-disk cache.
    pub from_cache: bool,
    forces: Function,
    /// `nbody_forces_range`, for a device's share when the bodies are split across devices (absent
    /// from a kernel file written before it existed).
    forces_range: Option<Function>,
    drift: Function,
    kick: Function,
    energy: Function,
    limits: DeviceLimits,
}

/// A `real` kernel argument: f32 or f64 by the variant's precision.
enum RealArg {
    F32(f32),
    F64(f64),
}

impl RealArg {
    fn new(precision: Precision, value: f64) -> Self {
        match precision {
            Precision::F32 => RealArg::F32(value as f32),
            Precision::F64 => RealArg::F64(value),
        }
    }

    fn pointer(&self) -> KernelArg<'_> {
        match self {
            RealArg::F32(v) => arg(v),
            RealArg::F64(v) => arg(v),
        }
    }
}

/// One launch of `nbody_forces_range`: which bodies, against which j slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForcesRange {
    /// All bodies (the length of the positions).
    pub n: u32,
    /// Bodies per j slice (a whole number of tiles).
    pub slice_length: u32,
    /// j slices in all (rows of `partial`).
    pub slices: u32,
    /// First body whose forces are computed.
    pub first_body: u32,
    /// How many bodies (columns of `partial`).
    pub bodies: u32,
    /// First j slice of this launch.
    pub first_slice: u32,
    /// j slices of this launch (gridDim.y).
    pub slice_count: u32,
}

/// A null device pointer: "no display buffer".
pub const NO_BUFFER: u64 = 0;

impl Kernels {
    /// Compiles (or takes from the cache) and loads `variant`.
    pub fn load(cuda: &CudaRuntime, variant: Variant) -> Result<Self> {
        Self::load_in(&cuda.compiler, &cuda.context, variant)
    }

    /// As [`Self::load`], into `context` (current on this thread) with `compiler` (one for that
    /// context's device architecture).
    pub fn load_in(compiler: &Compiler, context: &Rc<Context>, variant: Variant) -> Result<Self> {
        variant.validate()?;
        let compiled: CompiledModule = compiler.compile(&KERNEL, &variant.options())?;
        if !compiled.log.is_empty() {
            log::info!("NVRTC ({}): {}", compiled.origin, compiled.log);
        }
        Self::from_compiled_in(context, variant, &compiled)
    }

    /// Loads `compiled` (built with `variant.options()`, e.g. by a background recompile).
    pub fn from_compiled(cuda: &CudaRuntime, variant: Variant, compiled: &CompiledModule) -> Result<Self> {
        Self::from_compiled_in(&cuda.context, variant, compiled)
    }

    fn from_compiled_in(context: &Rc<Context>, variant: Variant, compiled: &CompiledModule) -> Result<Self> {
        let module = Module::load(context, compiled)?;
        let forces_range = match module.function("nbody_forces_range") {
            Ok(function) => Some(function),
            Err(Error::MissingKernel { .. }) => None,
            Err(error) => return Err(error),
        };
        Ok(Self {
            variant,
            origin: compiled.origin.clone(),
            compile_ms: compiled.compile_time.as_secs_f64() * 1e3,
            from_cache: compiled.from_cache,
            forces: module.function("nbody_forces")?,
            forces_range,
            drift: module.function("nbody_drift")?,
            kick: module.function("nbody_kick")?,
            energy: module.function("nbody_energy")?,
            limits: DeviceLimits::from(context.device()),
        })
    }

    /// The forces kernel.
    pub fn forces_function(&self) -> &Function {
        &self.forces
    }

    /// The forces kernel's attributes.
    pub fn forces_attributes(&self) -> &FunctionAttributes {
        self.forces.attributes()
    }

    /// Resident blocks of the forces kernel per multiprocessor.
    pub fn forces_blocks_per_multiprocessor(&self) -> Result<i32> {
        self.forces.max_active_blocks_per_multiprocessor(self.variant.block_size, self.variant.shared_bytes())
    }

    /// The forces launch for `n` bodies whose j range is cut into slices of `slice_length`.
    pub fn forces_config(&self, n: u32, slice_length: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [n.div_ceil(self.variant.bodies_per_block()).max(1), n.div_ceil(slice_length.max(1)).max(1), 1],
            block: [self.variant.block_size, 1, 1],
            shared_memory_bytes: self.variant.shared_bytes(),
        }
    }

    /// Checks that the forces launch for `n` bodies can run here (block, grid, shared memory).
    pub fn validate_forces(&self, n: u32, slice_length: u32) -> Result<()> {
        Ok(self.forces_config(n, slice_length).validate(&self.limits, self.forces.attributes())?)
    }

    /// `partial = forces(positions)`, slice by slice.
    pub fn forces(
        &mut self,
        stream: &Stream,
        positions: DeviceSpan,
        partial: DeviceSpan,
        n: u32,
        slice_length: u32,
        params: &Params,
    ) -> Result<()> {
        let config = self.forces_config(n, slice_length);
        let vector = self.variant.precision.vector_bytes();
        check_len("positions", positions, n as usize * vector)?;
        check_len("partial accelerations", partial, config.grid[1] as usize * n as usize * vector)?;
        let softening2 = RealArg::new(self.variant.precision, params.softening * params.softening);
        let mut args = [arg(&positions.ptr), arg(&partial.ptr), arg(&n), arg(&slice_length), softening2.pointer()];
        // SAFETY: matches nbody_forces(const real4*, real4*, unsigned, unsigned, real) for this
        // variant's `real`; positions hold n vectors and partial grid.y·n (checked above); the
        // kernel reads/writes only indices below those.
        unsafe { self.forces.launch(stream, &self.limits, &config, &mut args) }
    }

    /// The launch of [`Self::forces_range`]: `bodies` bodies against `slice_count` j slices.
    pub fn forces_range_config(&self, bodies: u32, slice_count: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [bodies.div_ceil(self.variant.bodies_per_block()).max(1), slice_count.max(1), 1],
            block: [self.variant.block_size, 1, 1],
            shared_memory_bytes: self.variant.shared_bytes(),
        }
    }

    /// `partial[first_slice + s][i] = forces on body first_body + i from j slice first_slice + s`
    /// for `i < range.bodies`, `s < range.slice_count`: one device's share of the forces, against
    /// one device partition of the j range. `partial` has `slices × range.bodies` vectors.
    pub fn forces_range(
        &mut self,
        stream: &Stream,
        positions: DeviceSpan,
        partial: DeviceSpan,
        range: &ForcesRange,
        params: &Params,
    ) -> Result<()> {
        let config = self.forces_range_config(range.bodies, range.slice_count);
        let Some(function) = self.forces_range.as_mut() else {
            return Err(Error::MissingKernel { file: self.origin.clone(), function: "nbody_forces_range".to_owned() });
        };
        let vector = self.variant.precision.vector_bytes();
        let ForcesRange { n, slice_length, slices, first_body, bodies, first_slice, slice_count } = *range;
        let fits = first_body.checked_add(bodies).is_some_and(|end| end <= n)
            && first_slice.checked_add(slice_count).is_some_and(|end| end <= slices)
            && u64::from(slices) * u64::from(slice_length) >= u64::from(n);
        if !fits || bodies == 0 || slice_count == 0 {
            return Err(Error::InvalidInput(format!("n-body: forces range {range:?} does not fit its {n} bodies")));
        }
        check_len("positions", positions, n as usize * vector)?;
        check_len("partial accelerations", partial, slices as usize * bodies as usize * vector)?;
        let softening2 = RealArg::new(self.variant.precision, params.softening * params.softening);
        let mut args = [
            arg(&positions.ptr),
            arg(&partial.ptr),
            arg(&n),
            arg(&slice_length),
            softening2.pointer(),
            arg(&first_body),
            arg(&bodies),
            arg(&first_slice),
        ];
        // SAFETY: matches nbody_forces_range(const real4*, real4*, unsigned, unsigned, real,
        // unsigned, unsigned, unsigned) for this variant's `real`; positions hold n vectors and
        // partial slices·bodies (checked); the kernel reads positions below n and writes partial
        // rows first_slice .. first_slice + slice_count ≤ slices, columns below bodies.
        unsafe { function.launch(stream, &self.limits, &config, &mut args) }
    }

    /// First half of a step. `display` (fp64) receives float positions; `NO_BUFFER` otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn drift(
        &mut self,
        stream: &Stream,
        positions_in: DeviceSpan,
        positions_out: DeviceSpan,
        velocities: DeviceSpan,
        accelerations: DeviceSpan,
        display: Option<DeviceSpan>,
        n: u32,
        params: &Params,
    ) -> Result<()> {
        let vector = self.variant.precision.vector_bytes();
        for (name, span) in [
            ("positions in", positions_in),
            ("positions out", positions_out),
            ("velocities", velocities),
            ("accelerations", accelerations),
        ] {
            check_len(name, span, n as usize * vector)?;
        }
        let display_ptr = match display {
            Some(span) => check_len("display positions", span, n as usize * 16).map(|()| span.ptr)?,
            None => NO_BUFFER,
        };
        let dt = RealArg::new(self.variant.precision, params.dt);
        let mut args = [
            arg(&positions_in.ptr),
            arg(&positions_out.ptr),
            arg(&velocities.ptr),
            arg(&accelerations.ptr),
            arg(&display_ptr),
            arg(&n),
            dt.pointer(),
        ];
        let config = LaunchConfig::for_items(n, SMALL_BLOCK);
        // SAFETY: matches nbody_drift(const real4*, real4*, real4*, const real4*, float4*,
        // unsigned, real); every buffer holds n elements (checked); display may be null.
        unsafe { self.drift.launch(stream, &self.limits, &config, &mut args) }
    }

    /// Second half of a step (with dt = 0 and damping = 1: only computes the accelerations).
    #[allow(clippy::too_many_arguments)]
    pub fn kick(
        &mut self,
        stream: &Stream,
        velocities: DeviceSpan,
        accelerations: DeviceSpan,
        partial: DeviceSpan,
        display: Option<DeviceSpan>,
        n: u32,
        slices: u32,
        params: &Params,
    ) -> Result<()> {
        let vector = self.variant.precision.vector_bytes();
        check_len("velocities", velocities, n as usize * vector)?;
        check_len("accelerations", accelerations, n as usize * vector)?;
        check_len("partial accelerations", partial, slices as usize * n as usize * vector)?;
        let display_ptr = match display {
            Some(span) => check_len("display velocities", span, n as usize * 16).map(|()| span.ptr)?,
            None => NO_BUFFER,
        };
        let precision = self.variant.precision;
        let (dt, gravity, damping) = (
            RealArg::new(precision, params.dt),
            RealArg::new(precision, params.gravity),
            RealArg::new(precision, params.damping),
        );
        let mut args = [
            arg(&velocities.ptr),
            arg(&accelerations.ptr),
            arg(&partial.ptr),
            arg(&display_ptr),
            arg(&n),
            arg(&slices),
            dt.pointer(),
            gravity.pointer(),
            damping.pointer(),
        ];
        let config = LaunchConfig::for_items(n, SMALL_BLOCK);
        // SAFETY: matches nbody_kick(real4*, real4*, const real4*, float4*, unsigned, unsigned,
        // real, real, real); buffers sized as checked; display may be null.
        unsafe { self.kick.launch(stream, &self.limits, &config, &mut args) }
    }

    /// Blocks the energy kernel uses for `n` bodies (two doubles of output each).
    pub fn energy_blocks(n: u32) -> u32 {
        n.div_ceil(SMALL_BLOCK).max(1)
    }

    /// Queues the energy kernel: `sums` gets (kinetic, potential) per block.
    pub fn energy(
        &mut self,
        stream: &Stream,
        positions: DeviceSpan,
        velocities: DeviceSpan,
        sums: DeviceSpan,
        n: u32,
        params: &Params,
    ) -> Result<()> {
        let vector = self.variant.precision.vector_bytes();
        check_len("positions", positions, n as usize * vector)?;
        check_len("velocities", velocities, n as usize * vector)?;
        check_len("energy sums", sums, Self::energy_blocks(n) as usize * 16)?;
        let precision = self.variant.precision;
        let (softening2, gravity) =
            (RealArg::new(precision, params.softening * params.softening), RealArg::new(precision, params.gravity));
        let mut args = [
            arg(&positions.ptr),
            arg(&velocities.ptr),
            arg(&sums.ptr),
            arg(&n),
            softening2.pointer(),
            gravity.pointer(),
        ];
        let mut config = LaunchConfig::for_items(n, SMALL_BLOCK);
        config.shared_memory_bytes = SMALL_BLOCK * vector as u32;
        // SAFETY: matches nbody_energy(const real4*, const real4*, double*, unsigned, real, real),
        // launched with the 256 threads it is written for; buffers sized as checked.
        unsafe { self.energy.launch(stream, &self.limits, &config, &mut args) }
    }
}

fn check_len(name: &str, span: DeviceSpan, needed: usize) -> Result<()> {
    if span.bytes < needed {
        return Err(Error::InvalidInput(format!("n-body: {name} buffer has {} bytes, {needed} needed", span.bytes)));
    }
    Ok(())
}

/// Times `warmup` + `repeats` forces launches with CUDA events; the timed ones' µs.
#[allow(clippy::too_many_arguments)]
pub(super) fn time_forces(
    kernels: &mut Kernels,
    stream: &Stream,
    positions: &DeviceBuffer,
    partial: &DeviceBuffer,
    n: u32,
    slice_length: u32,
    params: &Params,
    warmup: u32,
    repeats: u32,
) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        kernels.forces(stream, positions.span(), partial.span(), n, slice_length, params)?;
    }
    let context = stream.context();
    let mut events = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        let (start, end) = (Event::new(context)?, Event::new(context)?);
        start.record(stream)?;
        kernels.forces(stream, positions.span(), partial.span(), n, slice_length, params)?;
        end.record(stream)?;
        events.push((start, end));
    }
    stream.synchronize()?;
    events.iter().map(|(start, end)| Ok(f64::from(end.elapsed_ms_since(start)?) * 1e3)).collect()
}
