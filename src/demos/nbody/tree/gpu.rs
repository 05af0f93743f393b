//! The tree method on CUDA: the kernels of `kernels/nbody_tree.cu`, their typed launches (the one
//! place that vouches for their argument lists), and the scratch memory a step needs, allocated
//! once per body count and freed with it.
#![allow(unsafe_code)]

use std::rc::Rc;

use super::boxes;
use crate::cuda::launch::arg;
use crate::cuda::{
    Compiler, Context, DeviceBuffer, DeviceLimits, DeviceSpan, Event, Function, LaunchConfig, Module, PinnedBuffer,
    Stream,
};
use crate::sources::SourceFile;
use crate::error::{Error, Result};
use crate::sources::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/nbody_tree.cu");

/// Blocks of `tree_bounds_partial` (each reduces a grid-stride share of the bodies).
const BOUNDS_BLOCKS: u32 = 256;
/// Threads of the fixed-shape kernels (bounds, radix passes), as written in the source.
const BLOCK: u32 = 256;
/// Keys per radix tile (`RADIX_TILE`) and digits per pass (`RADIX_DIGITS`).
const RADIX_TILE: u32 = 256;
const RADIX_DIGITS: u32 = 256;
/// Bits per radix pass and passes over the 64-bit keys.
const RADIX_BITS: u32 = 8;
const RADIX_PASSES: u32 = 8;
/// Entries per block of `scan_blocks` (`SCAN_BLOCK`).
const SCAN_BLOCK: u32 = 1024;
/// Bytes per node: centre and mass, quadrupole and radius, quadrupole cross terms, low, high.
const NODE_BYTES: usize = 5 * 16;

/// The nodes' arrays as `tree_leaves` and `tree_moments` take them (`struct TreeNodes`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct NodePointers {
    centre_mass: u64,
    quadrupole_radius: u64,
    quadrupole_cross: u64,
    low: u64,
    high: u64,
}

/// Device bytes the tree of `n` bodies needs besides all-pairs' buffers, for the check before
/// any allocation.
pub fn scratch_bytes(n: u32) -> usize {
    let n = n.max(1) as usize;
    let tiles = n.div_ceil(RADIX_TILE as usize);
    let counts = RADIX_DIGITS as usize * tiles;
    2 * n * (8 + 4) // codes and indices, twice (the sort's ping-pong)
        + (counts + counts.div_ceil(SCAN_BLOCK as usize)) * 4
        + n * (8 + 4) // children and arrival counters of the internal nodes
        + (2 * n) * (4 + NODE_BYTES) // parents and moments of every node
        + 2 * BOUNDS_BLOCKS as usize * 16
        + 64
}

/// The status word's error bits: which bound a walk hit, or a position that is not finite.
fn describe_errors(bits: u32) -> String {
    let mut parts = Vec::new();
    if bits & 1 != 0 {
        parts.push("a walk filled its 96-entry stack (the tree is deeper than its codes allow)");
    }
    if bits & 2 != 0 {
        parts.push("a walk visited more nodes than the tree has (the tree is malformed)");
    }
    if bits & 4 != 0 {
        parts.push("a body's position or mass became NaN or infinite");
    }
    parts.join("; ")
}

/// The stages of a tree step, in order, as [`StageMarks`] times them: bounds and Morton codes,
/// the radix sort, the radix tree's internal nodes, the leaves and the moments, the walk.
pub const STAGES: [&str; 5] = ["codes", "sort", "build", "moments", "walk"];

/// Events recorded before a tree step and after each of its [`STAGES`]: what a stage took is the
/// time between two neighbours, measured on the stream, not on the host.
pub struct StageMarks {
    events: [Event; STAGES.len() + 1],
}

impl StageMarks {
    /// Events in `context`.
    pub fn new(context: &Rc<Context>) -> Result<Self> {
        let event = || Event::new(context);
        Ok(Self { events: [event()?, event()?, event()?, event()?, event()?, event()?] })
    }

    fn record(&self, at: usize, stream: &Stream) -> Result<()> {
        match self.events.get(at) {
            Some(event) => event.record(stream),
            None => Err(Error::InvalidInput(format!("n-body tree: no stage mark {at}"))),
        }
    }

    /// Microseconds of each stage of the last marked step, waiting for it to finish.
    pub fn stage_us(&self) -> Result<[f64; STAGES.len()]> {
        self.events[STAGES.len()].synchronize()?;
        let mut times = [0.0; STAGES.len()];
        for (stage, time) in times.iter_mut().enumerate() {
            *time = f64::from(self.events[stage + 1].elapsed_ms_since(&self.events[stage])?) * 1e3;
        }
        Ok(times)
    }
}

/// The tree's kernels, compiled and loaded into one context.
struct TreeKernels {
    bounds_partial: Function,
    bounds_final: Function,
    codes: Function,
    histogram: Function,
    scatter: Function,
    scan_blocks: Function,
    scan_block_sums: Function,
    scan_add: Function,
    karras: Function,
    leaves: Function,
    moments: Function,
    walk: Function,
    boxes_clear: Function,
    boxes: Function,
    limits: DeviceLimits,
}

/// The tree method's kernels and scratch memory for `n` bodies on one device.
pub struct GpuTree {
    kernels: TreeKernels,
    n: u32,
    bounds_low: DeviceBuffer,
    bounds_high: DeviceBuffer,
    quantisation: DeviceBuffer,
    codes: [DeviceBuffer; 2],
    indices: [DeviceBuffer; 2],
    counts: DeviceBuffer,
    block_sums: DeviceBuffer,
    children: DeviceBuffer,
    parent: DeviceBuffer,
    arrivals: DeviceBuffer,
    nodes: [DeviceBuffer; 5],
    /// The walk's error bits (u32 at 0) and interaction count (u64 at 8).
    status: DeviceBuffer,
    status_host: PinnedBuffer,
    status_ready: Event,
    /// A copy of the status is in flight.
    status_pending: bool,
    /// Walks summed in the device's status word since it was last cleared (`None`: never cleared).
    status_steps: Option<u32>,
    /// Walks the copy in flight sums.
    copied_steps: u32,
    /// Boxes `tree_boxes` has given slots to (u32).
    boxes_taken: DeviceBuffer,
    /// A step has built the tree in `parent` and `nodes`.
    built: bool,
}

impl GpuTree {
    /// Compiles (or takes from the cache) the kernels and allocates the scratch for `n` bodies;
    /// refuses, allocating nothing, when the device lacks the memory.
    pub fn new(compiler: &Compiler, context: &Rc<Context>, n: u32) -> Result<Self> {
        if n == 0 {
            return Err(Error::InvalidInput("the tree needs at least 1 body".to_owned()));
        }
        let needed = scratch_bytes(n);
        let (free, _) = context.memory_info()?;
        if needed > free {
            return Err(Error::InvalidInput(format!(
                "the tree of {n} bodies needs {} MiB of device memory and {} MiB are free: choose fewer bodies",
                needed >> 20,
                free >> 20
            )));
        }
        let compiled = compiler.compile(&KERNEL, &["--ftz=true".to_owned()])?;
        if !compiled.log.is_empty() {
            log::info!("NVRTC ({}): {}", compiled.origin, compiled.log);
        }
        let module = Module::load(context, &compiled)?;
        let kernels = TreeKernels {
            bounds_partial: module.function("tree_bounds_partial")?,
            bounds_final: module.function("tree_bounds_final")?,
            codes: module.function("tree_codes")?,
            histogram: module.function("radix_histogram")?,
            scatter: module.function("radix_scatter")?,
            scan_blocks: module.function("scan_blocks")?,
            scan_block_sums: module.function("scan_block_sums")?,
            scan_add: module.function("scan_add_block_sums")?,
            karras: module.function("tree_karras")?,
            leaves: module.function("tree_leaves")?,
            moments: module.function("tree_moments")?,
            walk: module.function("tree_walk")?,
            boxes_clear: module.function("tree_boxes_clear")?,
            boxes: module.function("tree_boxes")?,
            limits: DeviceLimits::from(context.device()),
        };
        let bodies = n as usize;
        let internal = bodies.saturating_sub(1).max(1);
        let all_nodes = 2 * bodies - 1;
        let counts = (RADIX_DIGITS * n.div_ceil(RADIX_TILE)) as usize;
        let buffer = |bytes: usize| DeviceBuffer::new(context, bytes);
        Ok(Self {
            kernels,
            n,
            bounds_low: buffer(BOUNDS_BLOCKS as usize * 16)?,
            bounds_high: buffer(BOUNDS_BLOCKS as usize * 16)?,
            quantisation: buffer(32)?,
            codes: [buffer(bodies * 8)?, buffer(bodies * 8)?],
            indices: [buffer(bodies * 4)?, buffer(bodies * 4)?],
            counts: buffer(counts * 4)?,
            block_sums: buffer(counts.div_ceil(SCAN_BLOCK as usize) * 4)?,
            children: buffer(internal * 8)?,
            parent: buffer(all_nodes * 4)?,
            arrivals: buffer(internal * 4)?,
            nodes: [
                buffer(all_nodes * 16)?,
                buffer(all_nodes * 16)?,
                buffer(all_nodes * 16)?,
                buffer(all_nodes * 16)?,
                buffer(all_nodes * 16)?,
            ],
            status: buffer(16)?,
            status_host: PinnedBuffer::new(context, 16)?,
            status_ready: Event::new(context)?,
            status_pending: false,
            status_steps: None,
            copied_steps: 0,
            boxes_taken: buffer(4)?,
            built: false,
        })
    }

    /// Number of bodies the scratch is for.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Whether the tree is for no bodies (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Queues a whole tree step on `stream`: `partial[i]` (float4, the first `n` of its rows)
    /// gets body i's acceleration without G from fp32 `positions` (float4, mass in w), as
    /// `nbody_kick` reads it with one slice. The walk's status is copied back for
    /// [`Self::poll_status`] and cleared behind the copy; while a copy is in flight, walks add to
    /// the same word, so no error bit is ever lost and the host never waits.
    pub fn forces(
        &mut self,
        stream: &Stream,
        positions: DeviceSpan,
        partial: DeviceSpan,
        theta: f64,
        softening: f64,
    ) -> Result<()> {
        self.forces_marked(stream, positions, partial, theta, softening, None)
    }

    /// [`Self::forces`], recording `marks` between its stages (`bench nbody --method tree`).
    pub fn forces_marked(
        &mut self,
        stream: &Stream,
        positions: DeviceSpan,
        partial: DeviceSpan,
        theta: f64,
        softening: f64,
        marks: Option<&StageMarks>,
    ) -> Result<()> {
        super::validate_theta(theta)?;
        let n = self.n;
        let vectors = n as usize * 16;
        for (name, span) in [("positions", positions), ("partial accelerations", partial)] {
            if span.bytes < vectors {
                return Err(Error::InvalidInput(format!(
                    "n-body tree: {name} buffer has {} bytes, {vectors} needed",
                    span.bytes
                )));
            }
        }
        if self.status_steps.is_none() {
            self.status.fill(stream, 0)?;
            self.status_steps = Some(0);
        }
        self.build(stream, positions, marks)?;
        self.built = true;
        let nodes = self.node_pointers();
        let (theta, softening2) = (theta as f32, (softening * softening) as f32);
        let errors = self.status.span().range(0, 4)?;
        let interactions = self.status.span().range(8, 8)?;
        let (indices, children) = (self.indices[0].span().ptr, self.children.span().ptr);
        let mut args = [
            arg(&positions.ptr),
            arg(&indices),
            arg(&n),
            arg(&nodes.centre_mass),
            arg(&nodes.quadrupole_radius),
            arg(&nodes.quadrupole_cross),
            arg(&children),
            arg(&partial.ptr),
            arg(&theta),
            arg(&softening2),
            arg(&errors.ptr),
            arg(&interactions.ptr),
        ];
        let config = LaunchConfig::for_items(n, BLOCK);
        // SAFETY: matches tree_walk(const float4*, const unsigned*, unsigned, const float4* ×3,
        // const uint2*, float4*, float, float, unsigned*, unsigned long long*); positions and
        // partial hold n float4 (checked), indices n, nodes 2n − 1, children max(n − 1, 1); the
        // kernel guards k < n and reads only nodes the build wrote.
        unsafe { self.kernels.walk.launch(stream, &self.kernels.limits, &config, &mut args)? };
        if let Some(marks) = marks {
            marks.record(STAGES.len(), stream)?;
        }
        let steps = self.status_steps.unwrap_or(0) + 1;
        self.status_steps = Some(steps);
        if !self.status_pending {
            self.status_host.download_async(stream, self.status.span())?;
            self.status.fill(stream, 0)?; // after the copy on the same stream
            self.status_ready.record(stream)?;
            self.status_pending = true;
            self.copied_steps = steps;
            self.status_steps = Some(0);
        }
        Ok(())
    }

    /// Interactions per walk of the walks the last finished status copy covers (never blocking);
    /// an error when a walk hit one of its bounds.
    pub fn poll_status(&mut self) -> Result<Option<u64>> {
        if !self.status_pending || !self.status_ready.is_complete()? {
            return Ok(None);
        }
        self.read_status().map(Some)
    }

    /// Waits for the status copy in flight: interactions per walk, or the error a walk reported.
    /// The caller synchronizes its stream first to cover every walk queued.
    pub fn finish(&mut self) -> Result<u64> {
        if !self.status_pending {
            return Ok(0);
        }
        self.status_ready.synchronize()?;
        self.read_status()
    }

    fn read_status(&mut self) -> Result<u64> {
        self.status_pending = false;
        let bytes = self.status_host.as_slice();
        let word = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let (Some(errors), Some(interactions)) = (word(0), word(8)) else {
            return Err(Error::InvalidInput("n-body tree: the status readback is too short".to_owned()));
        };
        let bits = (errors & 0xffff_ffff) as u32;
        if bits != 0 {
            return Err(Error::Diverged(format!(
                "the tree step found that {} (in the last {} steps)",
                describe_errors(bits),
                self.copied_steps.max(1)
            )));
        }
        Ok(interactions / u64::from(self.copied_steps.max(1)))
    }

    /// Queues the writing of the overlay: the boxes of the tree the last step built, `levels`
    /// levels from the root, into `vertices` ([`boxes::capacity`] boxes of 24 float4, as many
    /// as fit), every slot left marked empty. Before any step, all slots are empty.
    pub fn write_boxes(&mut self, stream: &Stream, vertices: DeviceSpan, levels: u32) -> Result<()> {
        let n = self.n;
        let levels = levels.min(boxes::MAX_LEVELS);
        let fit = u32::try_from(vertices.bytes / boxes::BOX_BYTES).unwrap_or(u32::MAX);
        let capacity = boxes::capacity(levels, n).min(fit);
        let vertex_count = capacity * boxes::VERTICES_PER_BOX as u32;
        let taken = self.boxes_taken.span().ptr;
        let mut args = [arg(&vertices.ptr), arg(&vertex_count), arg(&taken)];
        let config = LaunchConfig::for_items(vertex_count.max(1), BLOCK);
        // SAFETY: matches tree_boxes_clear(float4*, unsigned, unsigned*); vertices holds
        // vertex_count float4 (capacity is at most what fits), taken one u32; guarded v < count.
        unsafe { self.kernels.boxes_clear.launch(stream, &self.kernels.limits, &config, &mut args)? };
        if !self.built || n < 2 || capacity == 0 {
            return Ok(());
        }
        let nodes = self.node_pointers();
        let parent = self.parent.span().ptr;
        let mut args = [
            arg(&n),
            arg(&parent),
            arg(&nodes.low),
            arg(&nodes.high),
            arg(&levels),
            arg(&capacity),
            arg(&vertices.ptr),
            arg(&taken),
        ];
        let config = LaunchConfig::for_items(n - 1, BLOCK);
        // SAFETY: matches tree_boxes(unsigned, const unsigned*, const float4* ×2, unsigned,
        // unsigned, float4*, unsigned*); parent, low and high hold 2n − 1 entries written by the
        // last build (a node's parents are nodes), vertices `capacity` boxes; the kernel guards
        // node < n − 1 and slot < capacity.
        unsafe { self.kernels.boxes.launch(stream, &self.kernels.limits, &config, &mut args) }
    }

    fn node_pointers(&self) -> NodePointers {
        let [centre_mass, quadrupole_radius, quadrupole_cross, low, high] = &self.nodes;
        NodePointers {
            centre_mass: centre_mass.span().ptr,
            quadrupole_radius: quadrupole_radius.span().ptr,
            quadrupole_cross: quadrupole_cross.span().ptr,
            low: low.span().ptr,
            high: high.span().ptr,
        }
    }
}

mod stages;
