//! The launches that build the tree on the GPU, in order: bounds, codes, the radix sort, the
//! radix tree, leaves, moments. Each states the grid and block its kernel is written for.
#![allow(unsafe_code)]

use super::{
    BLOCK, BOUNDS_BLOCKS, GpuTree, RADIX_BITS, RADIX_DIGITS, RADIX_PASSES, RADIX_TILE, SCAN_BLOCK, StageMarks,
};
use crate::error::Result;
use crate::cuda::launch::arg;
use crate::cuda::{DeviceSpan, LaunchConfig, Stream};

/// One block of `threads` threads.
fn single_block(threads: u32) -> LaunchConfig {
    LaunchConfig { grid: [1, 1, 1], block: [threads, 1, 1], shared_memory_bytes: 0 }
}

impl GpuTree {
    /// Queues the whole build for fp32 `positions` (n float4, checked by the caller), recording
    /// `marks` (when given) before it and after each of its stages.
    pub(super) fn build(&mut self, stream: &Stream, positions: DeviceSpan, marks: Option<&StageMarks>) -> Result<()> {
        let mark = |stage: usize| marks.map_or(Ok(()), |marks| marks.record(stage, stream));
        mark(0)?;
        self.bounds(stream, positions)?;
        self.codes(stream, positions)?;
        mark(1)?;
        self.sort(stream)?;
        mark(2)?;
        self.radix_tree(stream)?;
        mark(3)?;
        self.leaves_and_moments(stream, positions)?;
        mark(4)
    }

    fn bounds(&mut self, stream: &Stream, positions: DeviceSpan) -> Result<()> {
        let n = self.n;
        let (low, high) = (self.bounds_low.span().ptr, self.bounds_high.span().ptr);
        let errors = self.status.span().range(0, 4)?.ptr;
        let mut args = [arg(&positions.ptr), arg(&n), arg(&low), arg(&high), arg(&errors)];
        let config = LaunchConfig { grid: [BOUNDS_BLOCKS, 1, 1], block: [BLOCK, 1, 1], shared_memory_bytes: 0 };
        let limits = &self.kernels.limits;
        // SAFETY: matches tree_bounds_partial(const float4*, unsigned, float4*, float4*, unsigned*),
        // written for 256-thread blocks; the partial boxes hold BOUNDS_BLOCKS entries, one per
        // block; errors is the status word's first 4 bytes.
        unsafe { self.kernels.bounds_partial.launch(stream, limits, &config, &mut args)? };
        let (blocks, quantisation) = (BOUNDS_BLOCKS, self.quantisation.span().ptr);
        let mut args = [arg(&low), arg(&high), arg(&blocks), arg(&quantisation)];
        // SAFETY: matches tree_bounds_final(const float4*, const float4*, unsigned, float4*), one
        // block of 256 threads; reads `blocks` partial boxes, writes two float4 (32 bytes held).
        unsafe { self.kernels.bounds_final.launch(stream, limits, &single_block(BLOCK), &mut args) }
    }

    fn codes(&mut self, stream: &Stream, positions: DeviceSpan) -> Result<()> {
        let n = self.n;
        let (quantisation, codes, indices) =
            (self.quantisation.span().ptr, self.codes[0].span().ptr, self.indices[0].span().ptr);
        let mut args = [arg(&positions.ptr), arg(&n), arg(&quantisation), arg(&codes), arg(&indices)];
        // SAFETY: matches tree_codes(const float4*, unsigned, const float4*, unsigned long long*,
        // unsigned*); codes and indices hold n entries; the kernel guards i < n.
        unsafe {
            self.kernels.codes.launch(stream, &self.kernels.limits, &LaunchConfig::for_items(n, BLOCK), &mut args)
        }
    }

    /// Eight stable passes of 8 bits over (code, index): the sorted pairs end in buffers 0.
    fn sort(&mut self, stream: &Stream) -> Result<()> {
        let n = self.n;
        let tiles = n.div_ceil(RADIX_TILE);
        let tile_config = LaunchConfig { grid: [tiles, 1, 1], block: [RADIX_TILE, 1, 1], shared_memory_bytes: 0 };
        let counts = self.counts.span().ptr;
        for pass in 0..RADIX_PASSES {
            let shift = pass * RADIX_BITS;
            let (from, to) = ((pass % 2) as usize, (1 - pass % 2) as usize);
            let (keys_in, values_in) = (self.codes[from].span().ptr, self.indices[from].span().ptr);
            let (keys_out, values_out) = (self.codes[to].span().ptr, self.indices[to].span().ptr);
            let mut args = [arg(&keys_in), arg(&n), arg(&shift), arg(&counts)];
            // SAFETY: matches radix_histogram(const unsigned long long*, unsigned, unsigned,
            // unsigned*), RADIX_TILE (= RADIX_DIGITS) threads a block, one block a tile; counts
            // holds RADIX_DIGITS × tiles entries.
            unsafe { self.kernels.histogram.launch(stream, &self.kernels.limits, &tile_config, &mut args)? };
            self.scan_counts(stream, RADIX_DIGITS * tiles)?;
            let mut args =
                [arg(&keys_in), arg(&values_in), arg(&keys_out), arg(&values_out), arg(&n), arg(&shift), arg(&counts)];
            // SAFETY: matches radix_scatter(const unsigned long long*, const unsigned*, unsigned
            // long long*, unsigned*, unsigned, unsigned, const unsigned*), the same grid as the
            // histogram; every output position is below n (the scanned counts of n keys).
            unsafe { self.kernels.scatter.launch(stream, &self.kernels.limits, &tile_config, &mut args)? };
        }
        Ok(())
    }

    /// Exclusive scan of the first `length` counts, in place.
    fn scan_counts(&mut self, stream: &Stream, length: u32) -> Result<()> {
        let blocks = length.div_ceil(SCAN_BLOCK);
        let (counts, sums) = (self.counts.span().ptr, self.block_sums.span().ptr);
        let limits = &self.kernels.limits;
        let config = LaunchConfig { grid: [blocks, 1, 1], block: [SCAN_BLOCK, 1, 1], shared_memory_bytes: 0 };
        let mut args = [arg(&counts), arg(&length), arg(&sums)];
        // SAFETY: matches scan_blocks(unsigned*, unsigned, unsigned*), SCAN_BLOCK threads a block;
        // counts holds `length` entries (guarded), block_sums one per block (allocated so).
        unsafe { self.kernels.scan_blocks.launch(stream, limits, &config, &mut args)? };
        let mut args = [arg(&sums), arg(&blocks)];
        // SAFETY: matches scan_block_sums(unsigned*, unsigned), one block of SCAN_BLOCK threads.
        unsafe { self.kernels.scan_block_sums.launch(stream, limits, &single_block(SCAN_BLOCK), &mut args)? };
        let mut args = [arg(&counts), arg(&length), arg(&sums)];
        // SAFETY: matches scan_add_block_sums(unsigned*, unsigned, const unsigned*); guarded i < length.
        unsafe { self.kernels.scan_add.launch(stream, limits, &LaunchConfig::for_items(length, BLOCK), &mut args) }
    }

    fn radix_tree(&mut self, stream: &Stream) -> Result<()> {
        let n = self.n;
        if n < 2 {
            return Ok(());
        }
        let (codes, children, parent) = (self.codes[0].span().ptr, self.children.span().ptr, self.parent.span().ptr);
        let mut args = [arg(&codes), arg(&n), arg(&children), arg(&parent)];
        let config = LaunchConfig::for_items(n - 1, BLOCK);
        // SAFETY: matches tree_karras(const unsigned long long*, unsigned, uint2*, unsigned*);
        // guarded i < n − 1; children holds n − 1 pairs, parent 2n − 1 entries.
        unsafe { self.kernels.karras.launch(stream, &self.kernels.limits, &config, &mut args) }
    }

    fn leaves_and_moments(&mut self, stream: &Stream, positions: DeviceSpan) -> Result<()> {
        let n = self.n;
        let nodes = self.node_pointers();
        let (indices, parent, arrivals, children) =
            (self.indices[0].span().ptr, self.parent.span().ptr, self.arrivals.span().ptr, self.children.span().ptr);
        let config = LaunchConfig::for_items(n, BLOCK);
        let limits = &self.kernels.limits;
        let mut args = [arg(&positions.ptr), arg(&indices), arg(&n), arg(&nodes), arg(&parent), arg(&arrivals)];
        // SAFETY: matches tree_leaves(const float4*, const unsigned*, unsigned, TreeNodes,
        // unsigned*, unsigned*), TreeNodes being five pointers as NodePointers is (repr(C));
        // guarded k < n; writes leaves n − 1 .. 2n − 2 and arrivals below n − 1.
        unsafe { self.kernels.leaves.launch(stream, limits, &config, &mut args)? };
        let mut args = [arg(&n), arg(&children), arg(&parent), arg(&nodes), arg(&arrivals)];
        // SAFETY: matches tree_moments(unsigned, const uint2*, const unsigned*, TreeNodes,
        // unsigned*); guarded k < n; climbs parents the radix tree wrote, to the root.
        unsafe { self.kernels.moments.launch(stream, limits, &config, &mut args) }
    }
}
