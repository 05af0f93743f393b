// nbody_tree.cu: the Barnes-Hut tree method's forces in fp32, stage for stage what the CPU tree
// (src/demos/nbody/tree/) does, so the two can be compared body by body:
//
//   tree_bounds_partial, tree_bounds_final   bounding box of the positions → Morton quantisation
//   tree_codes                               63-bit Morton code and body index of every body
//   radix_histogram, scan_*, radix_scatter   stable LSD radix sort of (code, index), 8 bits a pass
//   tree_karras                              binary radix tree over the sorted codes (Karras 2012)
//   tree_leaves                              leaf moments, arrival counters reset
//   tree_moments                             bottom-up mass, centre, quadrupole, radius
//   tree_walk                                per body: explicit-stack walk, accelerations without G
//   tree_boxes_clear, tree_boxes             the top levels' boxes as line vertices (the overlay)
//
// The walk writes `partial` in the layout nbody_kick (nbody.cu) reads with one slice, so the
// integrator, and the buffers GL and Vulkan draw, are all-pairs' own.
//
// Node numbering: internal nodes 0 .. n−2, leaf k (the k-th body in Morton order) at n−1+k; the
// root is node 0. Every launch is one thread per item with a guard, except where a kernel says
// it is launched as a single block.

#define TREE_NO_NODE 0xffffffffu
// A root-to-leaf path has at most 87 internal nodes (63 code bits, then 24 index bits for up to
// 2^24 equal codes) and the walk keeps at most one pending sibling per level.
#define TREE_STACK_NODES 96
#define TREE_CELLS 2097151.0f // 2^21 − 1 cells per axis
#define TREE_ERROR_STACK 1u
#define TREE_ERROR_VISITS 2u
#define RADIX_BITS 8
#define RADIX_DIGITS 256
#define RADIX_TILE 256 // keys per block of radix_histogram and radix_scatter (one per thread)
#define SCAN_BLOCK 1024 // elements per block of scan_blocks (one per thread)

__device__ __forceinline__ float tree_infinity() { return __int_as_float(0x7f800000); }

// ---------------------------------------------------------------------------------------------
// Bounding box. Non-finite coordinates are left out, as on the CPU.

// The box of a block of 256 threads: each thread's box (l, h) goes into shared memory and is
// halved down to entry 0 of `low` and `high`, which every thread may read on return.
__device__ void tree_reduce_box(float (*low)[256], float (*high)[256], const float* l, const float* h)
{
    for (int k = 0; k < 3; ++k) {
        low[k][threadIdx.x] = l[k];
        high[k][threadIdx.x] = h[k];
    }
    __syncthreads();
    for (unsigned int stride = 128; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            for (int k = 0; k < 3; ++k) {
                low[k][threadIdx.x] = fminf(low[k][threadIdx.x], low[k][threadIdx.x + stride]);
                high[k][threadIdx.x] = fmaxf(high[k][threadIdx.x], high[k][threadIdx.x + stride]);
            }
        }
        __syncthreads();
    }
}

// Launched with 256 threads a block and any grid: block b writes the box of its grid-stride share.
extern "C" __global__ void __launch_bounds__(256)
tree_bounds_partial(const float4* __restrict__ positions, unsigned int n, float4* __restrict__ partial_low,
                    float4* __restrict__ partial_high, unsigned int* __restrict__ errors)
{
    __shared__ float low[3][256];
    __shared__ float high[3][256];
    float l[3] = {tree_infinity(), tree_infinity(), tree_infinity()};
    float h[3] = {-tree_infinity(), -tree_infinity(), -tree_infinity()};
    bool non_finite = false;
    for (unsigned int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) {
        const float4 p = positions[i];
        const float c[3] = {p.x, p.y, p.z};
        for (int k = 0; k < 3; ++k) {
            if (isfinite(c[k])) {
                l[k] = fminf(l[k], c[k]);
                h[k] = fmaxf(h[k], c[k]);
            } else {
                non_finite = true;
            }
        }
        non_finite |= !isfinite(p.w);
    }
    // Bit 4 of the status word: a position or mass that is NaN or infinite (the host keeps the
    // last good state and says so).
    if (__syncthreads_or(non_finite) && threadIdx.x == 0) {
        atomicOr(errors, 4u);
    }
    tree_reduce_box(low, high, l, h);
    if (threadIdx.x == 0) {
        partial_low[blockIdx.x] = make_float4(low[0][0], low[1][0], low[2][0], 0.0f);
        partial_high[blockIdx.x] = make_float4(high[0][0], high[1][0], high[2][0], 0.0f);
    }
}

// Launched as a single block of 256 threads: the box of the `blocks` partial boxes, and from it
// quantisation[0] = origin, quantisation[1] = cells per unit length of each axis (0 for an axis
// where every body has the same coordinate).
extern "C" __global__ void __launch_bounds__(256)
tree_bounds_final(const float4* __restrict__ partial_low, const float4* __restrict__ partial_high,
                  unsigned int blocks, float4* __restrict__ quantisation)
{
    __shared__ float low[3][256];
    __shared__ float high[3][256];
    float l[3] = {tree_infinity(), tree_infinity(), tree_infinity()};
    float h[3] = {-tree_infinity(), -tree_infinity(), -tree_infinity()};
    for (unsigned int b = threadIdx.x; b < blocks; b += 256) {
        const float4 a = partial_low[b];
        const float4 c = partial_high[b];
        l[0] = fminf(l[0], a.x);
        l[1] = fminf(l[1], a.y);
        l[2] = fminf(l[2], a.z);
        h[0] = fmaxf(h[0], c.x);
        h[1] = fmaxf(h[1], c.y);
        h[2] = fmaxf(h[2], c.z);
    }
    tree_reduce_box(low, high, l, h);
    if (threadIdx.x == 0) {
        float origin[3], scale[3];
        for (int k = 0; k < 3; ++k) {
            const float extent = high[k][0] - low[k][0];
            const bool usable = isfinite(extent) && extent > 0.0f;
            origin[k] = usable ? low[k][0] : 0.0f;
            scale[k] = usable ? TREE_CELLS / extent : 0.0f;
        }
        quantisation[0] = make_float4(origin[0], origin[1], origin[2], 0.0f);
        quantisation[1] = make_float4(scale[0], scale[1], scale[2], 0.0f);
    }
}

// ---------------------------------------------------------------------------------------------
// Morton codes.

__device__ __forceinline__ unsigned long long tree_spread_bits(unsigned long long value)
{
    unsigned long long x = value & 0x1fffffull;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

// codes[i] = 63-bit Morton code of body i (x's bit highest in each triple), indices[i] = i.
extern "C" __global__ void tree_codes(const float4* __restrict__ positions, unsigned int n,
                                      const float4* __restrict__ quantisation,
                                      unsigned long long* __restrict__ codes, unsigned int* __restrict__ indices)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const float4 origin = quantisation[0];
    const float4 scale = quantisation[1];
    const float4 p = positions[i];
    const float c[3] = {(p.x - origin.x) * scale.x, (p.y - origin.y) * scale.y, (p.z - origin.z) * scale.z};
    unsigned long long code = 0;
    for (int k = 0; k < 3; ++k) {
        // fmaxf(NaN, 0) is 0: every input gets a cell in range.
        const float cell = fminf(fmaxf(c[k], 0.0f), TREE_CELLS);
        code |= tree_spread_bits((unsigned long long)cell) << (2 - k);
    }
    codes[i] = code;
    indices[i] = i;
}

// ---------------------------------------------------------------------------------------------
// Stable LSD radix sort of (code, index) pairs, 8 bits a pass: histogram per tile, exclusive scan
// of the digit-major counts, scatter. Launched with RADIX_TILE threads a block, one block a tile.

// counts[digit · tiles + tile] = keys of the tile whose digit at `shift` is `digit`.
extern "C" __global__ void __launch_bounds__(RADIX_TILE)
radix_histogram(const unsigned long long* __restrict__ keys, unsigned int n, unsigned int shift,
                unsigned int* __restrict__ counts)
{
    __shared__ unsigned int bins[RADIX_DIGITS];
    bins[threadIdx.x] = 0;
    __syncthreads();
    const unsigned int i = blockIdx.x * RADIX_TILE + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[(unsigned int)(keys[i] >> shift) & (RADIX_DIGITS - 1)], 1u);
    }
    __syncthreads();
    counts[threadIdx.x * gridDim.x + blockIdx.x] = bins[threadIdx.x];
}

// Each key goes to offsets[digit · tiles + tile] + (keys of its digit before it in its tile):
// earlier warps' counts from shared memory, earlier lanes of its own warp from __match_any_sync.
extern "C" __global__ void __launch_bounds__(RADIX_TILE)
radix_scatter(const unsigned long long* __restrict__ keys_in, const unsigned int* __restrict__ values_in,
              unsigned long long* __restrict__ keys_out, unsigned int* __restrict__ values_out, unsigned int n,
              unsigned int shift, const unsigned int* __restrict__ offsets)
{
    __shared__ unsigned int warp_counts[RADIX_TILE / 32][RADIX_DIGITS];
    for (unsigned int k = threadIdx.x; k < (RADIX_TILE / 32) * RADIX_DIGITS; k += RADIX_TILE) {
        (&warp_counts[0][0])[k] = 0;
    }
    __syncthreads();
    const unsigned int i = blockIdx.x * RADIX_TILE + threadIdx.x;
    const unsigned int warp = threadIdx.x / 32;
    const unsigned int lane = threadIdx.x % 32;
    unsigned long long key = 0;
    // Threads past the end take digit RADIX_DIGITS: a group of their own that writes nothing.
    unsigned int digit = RADIX_DIGITS;
    if (i < n) {
        key = keys_in[i];
        digit = (unsigned int)(key >> shift) & (RADIX_DIGITS - 1);
    }
    const unsigned int peers = __match_any_sync(0xffffffffu, digit);
    const unsigned int earlier_lanes = __popc(peers & ((1u << lane) - 1u));
    if (digit < RADIX_DIGITS && earlier_lanes == 0) {
        warp_counts[warp][digit] = __popc(peers);
    }
    __syncthreads();
    if (digit < RADIX_DIGITS) {
        unsigned int position = offsets[digit * gridDim.x + blockIdx.x] + earlier_lanes;
        for (unsigned int w = 0; w < warp; ++w) {
            position += warp_counts[w][digit];
        }
        keys_out[position] = key;
        values_out[position] = values_in[i];
    }
}

// Inclusive Hillis-Steele scan of `buffer` (SCAN_BLOCK entries) by a block of SCAN_BLOCK threads.
__device__ __forceinline__ unsigned int scan_inclusive_in_block(unsigned int* buffer, unsigned int value)
{
    buffer[threadIdx.x] = value;
    __syncthreads();
    for (unsigned int stride = 1; stride < SCAN_BLOCK; stride *= 2) {
        const unsigned int add = threadIdx.x >= stride ? buffer[threadIdx.x - stride] : 0;
        __syncthreads();
        buffer[threadIdx.x] += add;
        __syncthreads();
    }
    return buffer[threadIdx.x];
}

// Launched with SCAN_BLOCK threads a block: each block scans its SCAN_BLOCK entries of `data`
// (exclusive, in place) and writes their total to block_sums[block].
extern "C" __global__ void __launch_bounds__(SCAN_BLOCK)
scan_blocks(unsigned int* __restrict__ data, unsigned int length, unsigned int* __restrict__ block_sums)
{
    __shared__ unsigned int buffer[SCAN_BLOCK];
    const unsigned int i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    const unsigned int value = i < length ? data[i] : 0;
    const unsigned int inclusive = scan_inclusive_in_block(buffer, value);
    if (i < length) {
        data[i] = inclusive - value;
    }
    if (threadIdx.x == SCAN_BLOCK - 1) {
        block_sums[blockIdx.x] = inclusive;
    }
}

// Launched as a single block of SCAN_BLOCK threads: exclusive scan of `count` entries in place,
// a chunk at a time with a running carry.
extern "C" __global__ void __launch_bounds__(SCAN_BLOCK)
scan_block_sums(unsigned int* __restrict__ sums, unsigned int count)
{
    __shared__ unsigned int buffer[SCAN_BLOCK];
    unsigned int carry = 0;
    for (unsigned int base = 0; base < count; base += SCAN_BLOCK) {
        const unsigned int i = base + threadIdx.x;
        const unsigned int value = i < count ? sums[i] : 0;
        const unsigned int inclusive = scan_inclusive_in_block(buffer, value);
        if (i < count) {
            sums[i] = carry + inclusive - value;
        }
        carry += buffer[SCAN_BLOCK - 1];
        __syncthreads(); // every thread has read the total before the next chunk overwrites it
    }
}

// data[i] += block_sums[i / SCAN_BLOCK]: the scanned blocks made one scan.
extern "C" __global__ void scan_add_block_sums(unsigned int* __restrict__ data, unsigned int length,
                                               const unsigned int* __restrict__ block_sums)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < length) {
        data[i] += block_sums[i / SCAN_BLOCK];
    }
}

// ---------------------------------------------------------------------------------------------
// The radix tree (Karras 2012, figure 4).

// Common prefix of leaves i and j: code bits, then index bits where codes are equal (so every
// key is distinct); −1 when j is outside 0 .. n−1.
__device__ __forceinline__ int tree_common_prefix(const unsigned long long* codes, int n, int i, int j)
{
    if (j < 0 || j >= n) {
        return -1;
    }
    const unsigned long long a = codes[i];
    const unsigned long long b = codes[j];
    if (a != b) {
        return __clzll((long long)(a ^ b));
    }
    return 64 + __clz((int)((unsigned int)i ^ (unsigned int)j));
}

// children[i] and the parents of both for internal node i < n − 1 (n ≥ 2).
extern "C" __global__ void tree_karras(const unsigned long long* __restrict__ codes, unsigned int n,
                                       uint2* __restrict__ children, unsigned int* __restrict__ parent)
{
    const unsigned int thread = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < 2 || thread >= n - 1) {
        return;
    }
    const int count = (int)n;
    const int i = (int)thread;
    const int direction =
        tree_common_prefix(codes, count, i, i + 1) - tree_common_prefix(codes, count, i, i - 1) >= 0 ? 1 : -1;
    const int floor = tree_common_prefix(codes, count, i, i - direction);
    int most = 2;
    while (tree_common_prefix(codes, count, i, i + most * direction) > floor) {
        most *= 2;
    }
    int length = 0;
    for (int step = most / 2; step >= 1; step /= 2) {
        if (tree_common_prefix(codes, count, i, i + (length + step) * direction) > floor) {
            length += step;
        }
    }
    const int other = i + length * direction;
    const int node_prefix = tree_common_prefix(codes, count, i, other);
    int split = 0;
    int step = length;
    do {
        step = (step + 1) / 2;
        if (tree_common_prefix(codes, count, i, i + (split + step) * direction) > node_prefix) {
            split += step;
        }
    } while (step > 1);
    const int gamma = i + split * direction + min(direction, 0);
    const int first = min(i, other);
    const int last = max(i, other);
    const unsigned int left = first == gamma ? (unsigned int)(count - 1 + gamma) : (unsigned int)gamma;
    const unsigned int right = last == gamma + 1 ? (unsigned int)(count + gamma) : (unsigned int)(gamma + 1);
    children[i] = make_uint2(left, right);
    parent[left] = (unsigned int)i;
    parent[right] = (unsigned int)i;
}

// ---------------------------------------------------------------------------------------------
// Moments. A node is four float4s: (centre, mass), (qxx, qyy, qzz, radius), (qxy, qxz, qyz, 0),
// and its box (low, high). The quadrupole is traceless, Σ m (3 y_i y_j − |y|² δ_ij) about the
// centre of mass; the radius is the distance from the centre to the box's farthest corner.

struct TreeNodes {
    float4* centre_mass;
    float4* quadrupole_radius;
    float4* quadrupole_cross;
    float4* low;
    float4* high;
};

// Leaf k = body indices[k]; arrival counters of the internal nodes reset; the root has no parent.
extern "C" __global__ void tree_leaves(const float4* __restrict__ positions, const unsigned int* __restrict__ indices,
                                       unsigned int n, TreeNodes nodes, unsigned int* __restrict__ parent,
                                       unsigned int* __restrict__ arrivals)
{
    const unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) {
        return;
    }
    if (k + 1 < n) {
        arrivals[k] = 0;
    }
    if (k == 0) {
        parent[0] = TREE_NO_NODE;
    }
    const float4 p = positions[indices[k]];
    const unsigned int node = n - 1 + k;
    nodes.centre_mass[node] = p;
    nodes.quadrupole_radius[node] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    nodes.quadrupole_cross[node] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    nodes.low[node] = make_float4(p.x, p.y, p.z, 0.0f);
    nodes.high[node] = make_float4(p.x, p.y, p.z, 0.0f);
}

// One thread per leaf climbs towards the root; at each internal node the first child to arrive
// stops, the second (both children done) combines them and climbs on. Children written by
// another thread are read through L2 (__ldcg): L1 is not coherent between multiprocessors.
extern "C" __global__ void tree_moments(unsigned int n, const uint2* __restrict__ children,
                                        const unsigned int* __restrict__ parent, TreeNodes nodes,
                                        unsigned int* __restrict__ arrivals)
{
    const unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) {
        return;
    }
    unsigned int node = n - 1 + k;
    while (true) {
        const unsigned int up = __ldcg(&parent[node]);
        if (up == TREE_NO_NODE) {
            return;
        }
        __threadfence(); // this node's moments are visible before the arrival is counted
        if (atomicAdd(&arrivals[up], 1u) == 0) {
            return; // the sibling is not done yet: its thread carries on from here
        }
        __threadfence();
        const uint2 pair = __ldcg(&children[up]);
        const unsigned int both[2] = {pair.x, pair.y};
        float4 cm[2], low[2], high[2], qr[2], qc[2];
        for (int c = 0; c < 2; ++c) {
            cm[c] = __ldcg(&nodes.centre_mass[both[c]]);
            low[c] = __ldcg(&nodes.low[both[c]]);
            high[c] = __ldcg(&nodes.high[both[c]]);
            qr[c] = __ldcg(&nodes.quadrupole_radius[both[c]]);
            qc[c] = __ldcg(&nodes.quadrupole_cross[both[c]]);
        }
        const float mass = cm[0].w + cm[1].w;
        const float lo[3] = {fminf(low[0].x, low[1].x), fminf(low[0].y, low[1].y), fminf(low[0].z, low[1].z)};
        const float hi[3] = {fmaxf(high[0].x, high[1].x), fmaxf(high[0].y, high[1].y), fmaxf(high[0].z, high[1].z)};
        const float a[2][3] = {{cm[0].x, cm[0].y, cm[0].z}, {cm[1].x, cm[1].y, cm[1].z}};
        float centre[3];
        for (int axis = 0; axis < 3; ++axis) {
            // Clamped to the box: rounding must not put the centre outside the bodies' hull.
            centre[axis] = mass > 0.0f
                ? fminf(fmaxf((cm[0].w * a[0][axis] + cm[1].w * a[1][axis]) / mass, lo[axis]), hi[axis])
                : 0.5f * (lo[axis] + hi[axis]);
        }
        float q[6] = {qr[0].x + qr[1].x, qr[0].y + qr[1].y, qr[0].z + qr[1].z,
                      qc[0].x + qc[1].x, qc[0].y + qc[1].y, qc[0].z + qc[1].z};
        for (int c = 0; c < 2; ++c) {
            // Parallel-axis theorem: each child's quadrupole moved to the parent's centre.
            const float y[3] = {a[c][0] - centre[0], a[c][1] - centre[1], a[c][2] - centre[2]};
            const float r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
            const float m = cm[c].w;
            q[0] += m * (3.0f * y[0] * y[0] - r2);
            q[1] += m * (3.0f * y[1] * y[1] - r2);
            q[2] += m * (3.0f * y[2] * y[2] - r2);
            q[3] += m * 3.0f * y[0] * y[1];
            q[4] += m * 3.0f * y[0] * y[2];
            q[5] += m * 3.0f * y[1] * y[2];
        }
        float radius2 = 0.0f;
        for (int axis = 0; axis < 3; ++axis) {
            const float reach = fmaxf(fmaxf(centre[axis] - lo[axis], hi[axis] - centre[axis]), 0.0f);
            radius2 += reach * reach;
        }
        nodes.centre_mass[up] = make_float4(centre[0], centre[1], centre[2], mass);
        nodes.quadrupole_radius[up] = make_float4(q[0], q[1], q[2], sqrtf(radius2));
        nodes.quadrupole_cross[up] = make_float4(q[3], q[4], q[5], 0.0f);
        nodes.low[up] = make_float4(lo[0], lo[1], lo[2], 0.0f);
        nodes.high[up] = make_float4(hi[0], hi[1], hi[2], 0.0f);
        node = up;
    }
}

// ---------------------------------------------------------------------------------------------
// The walk.

// partial[body] = Σ over accepted nodes of M d/r³ − Q d/r⁵ + (5/2)(dᵀQd) d/r⁷ (r² = |d|² + ε²,
// without G), for the body of sorted leaf k (neighbouring threads walk neighbouring bodies).
// A node is taken whole when its radius is 0 or radius < θ·d (all its mass within θ·d of its
// centre); leaves always. A full stack or more visits than nodes sets a bit of `errors` and stops
// that body's walk; interactions[0] gets the number of nodes taken, over all bodies.
extern "C" __global__ void __launch_bounds__(256)
tree_walk(const float4* __restrict__ positions, const unsigned int* __restrict__ indices, unsigned int n,
          const float4* __restrict__ centre_mass, const float4* __restrict__ quadrupole_radius,
          const float4* __restrict__ quadrupole_cross, const uint2* __restrict__ children,
          float4* __restrict__ partial, float theta, float softening2, unsigned int* __restrict__ errors,
          unsigned long long* __restrict__ interactions)
{
    const unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int taken = 0;
    if (k < n) {
        const unsigned int body = indices[k];
        const float4 me = positions[body];
        const float theta2 = theta * theta;
        const unsigned int nodes = 2 * n - 1;
        unsigned int stack[TREE_STACK_NODES];
        unsigned int depth = 1;
        stack[0] = 0;
        unsigned int visits = 0;
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        while (depth > 0) {
            if (++visits > nodes) {
                atomicOr(errors, TREE_ERROR_VISITS);
                break;
            }
            const unsigned int node = stack[--depth];
            const float4 cm = centre_mass[node];
            const float4 qr = quadrupole_radius[node];
            const float dx = cm.x - me.x;
            const float dy = cm.y - me.y;
            const float dz = cm.z - me.z;
            const float distance2 = dx * dx + dy * dy + dz * dz;
            const bool leaf = node + 1 >= n;
            if (leaf || qr.w == 0.0f || qr.w * qr.w < theta2 * distance2) {
                const float4 qc = quadrupole_cross[node];
                const float inverse = rsqrtf(distance2 + softening2);
                const float inverse2 = inverse * inverse;
                const float inverse3 = inverse * inverse2;
                const float inverse5 = inverse3 * inverse2;
                const float qdx = qr.x * dx + qc.x * dy + qc.y * dz;
                const float qdy = qc.x * dx + qr.y * dy + qc.z * dz;
                const float qdz = qc.y * dx + qc.z * dy + qr.z * dz;
                const float dqd = dx * qdx + dy * qdy + dz * qdz;
                const float radial = cm.w * inverse3 + 2.5f * dqd * inverse5 * inverse2;
                ax += dx * radial - qdx * inverse5;
                ay += dy * radial - qdy * inverse5;
                az += dz * radial - qdz * inverse5;
                ++taken;
                continue;
            }
            if (depth + 2 > TREE_STACK_NODES) {
                atomicOr(errors, TREE_ERROR_STACK);
                break;
            }
            const uint2 pair = children[node];
            stack[depth] = pair.y;
            stack[depth + 1] = pair.x;
            depth += 2;
        }
        partial[body] = make_float4(ax, ay, az, 0.0f);
    }
    // One atomic a warp for the interaction count.
    unsigned long long sum = taken;
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (threadIdx.x % 32 == 0 && sum > 0) {
        atomicAdd(interactions, sum);
    }
}

// ---------------------------------------------------------------------------------------------
// The tree on screen: the box of every internal node less than `levels` below the root, as its
// 12 edges, 24 float4 vertices (x, y, z, level + 1) a box, into the buffer the graphics API
// draws as lines. Boxes take slots in arrival order; tree_boxes_clear first marks every slot
// empty (w = 0, which the line shader skips) and resets the slot count.

extern "C" __global__ void tree_boxes_clear(float4* __restrict__ vertices, unsigned int vertex_count,
                                            unsigned int* __restrict__ taken)
{
    const unsigned int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v == 0) {
        *taken = 0;
    }
    if (v < vertex_count) {
        vertices[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

__device__ __forceinline__ float4 tree_corner(float4 low, float4 high, int corner, float w)
{
    return make_float4(corner & 1 ? high.x : low.x, corner & 2 ? high.y : low.y, corner & 4 ? high.z : low.z, w);
}

// One thread per internal node (n ≥ 2); a node's level is found by climbing its parents, at most
// `levels` of them. `capacity` boxes fit in `vertices`.
extern "C" __global__ void tree_boxes(unsigned int n, const unsigned int* __restrict__ parent,
                                      const float4* __restrict__ low, const float4* __restrict__ high,
                                      unsigned int levels, unsigned int capacity, float4* __restrict__ vertices,
                                      unsigned int* __restrict__ taken)
{
    const unsigned int node = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < 2 || node >= n - 1) {
        return;
    }
    unsigned int level = 0;
    for (unsigned int up = parent[node]; up != TREE_NO_NODE; up = parent[up]) {
        if (++level >= levels) {
            return;
        }
    }
    const unsigned int slot = atomicAdd(taken, 1u);
    if (slot >= capacity) {
        return;
    }
    const float4 l = low[node];
    const float4 h = high[node];
    const float w = (float)(level + 1);
    float4* out = vertices + 24 * (size_t)slot;
    int edge = 0;
    // An edge joins two corners that differ along one axis: from each corner on the low side.
    for (int axis = 0; axis < 3; ++axis) {
        for (int corner = 0; corner < 8; ++corner) {
            if (corner & (1 << axis)) {
                continue;
            }
            out[2 * edge] = tree_corner(l, h, corner, w);
            out[2 * edge + 1] = tree_corner(l, h, corner | (1 << axis), w);
            ++edge;
        }
    }
}
