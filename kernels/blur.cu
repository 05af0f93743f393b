// blur.cu: Gaussian blur with clamp-to-edge borders, three ways.
//
//   naive      one thread per pixel sums the full (2r+1)² window: the teaching baseline.
//   separable  two passes of a 1-D Gaussian. Each pass filters rows from a shared-memory tile and
//              writes its result transposed, so the second pass (on the transposed image) filters
//              the original columns with the same code and coalesced reads, and transposes back.
//   box        the same two passes, but each applies four box filters (running sums from a
//              prefix scan in shared memory) whose cascade approximates the Gaussian: the cost per
//              pixel does not grow with σ.
//
// Compile-time options: FORMAT_F32 (RGBA32F pixels; default RGBA8), PIXELS_PER_THREAD (outputs
// each thread computes per row of a tile). Run-time launch parameters: blockDim.x threads along a
// row, blockDim.y rows per tile; the tile is blockDim.x·PIXELS_PER_THREAD pixels wide.
// Dynamic shared memory: 2 × blockDim.y × (tile width + 2·reach) float4, reach = r or Σ box radii.
//
// Final outputs go either to a linear buffer (a GL pixel-buffer object mapped for CUDA, or device
// memory) or to a surface object over a GL texture registered with cuGraphicsGLRegisterImage.

#ifndef PIXELS_PER_THREAD
#define PIXELS_PER_THREAD 2
#endif

// RGBA8 pixels are computed on in 0..255 and rounded to nearest when stored.
__device__ __forceinline__ float4 to_float4(const float4 p) { return p; }
__device__ __forceinline__ float4 to_float4(const uchar4 p) { return make_float4(p.x, p.y, p.z, p.w); }
__device__ __forceinline__ unsigned char to_byte(float v) { return (unsigned char)__float2uint_rn(fminf(fmaxf(v, 0.0f), 255.0f)); }
#ifdef FORMAT_F32
typedef float4 pixel;
__device__ __forceinline__ float4 from_float4(const float4 v) { return v; }
#else
typedef uchar4 pixel;
__device__ __forceinline__ uchar4 from_float4(const float4 v) { return make_uchar4(to_byte(v.x), to_byte(v.y), to_byte(v.z), to_byte(v.w)); }
#endif

__device__ __forceinline__ float4 operator+(const float4 a, const float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__device__ __forceinline__ float4 operator-(const float4 a, const float4 b) { return make_float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
__device__ __forceinline__ float4 operator*(const float s, const float4 a) { return make_float4(s * a.x, s * a.y, s * a.z, s * a.w); }
__device__ __forceinline__ float4 fma4(const float s, const float4 a, const float4 acc)
{
    return make_float4(fmaf(s, a.x, acc.x), fmaf(s, a.y, acc.y), fmaf(s, a.z, acc.z), fmaf(s, a.w, acc.w));
}

__device__ __forceinline__ int clamp_index(int i, int n) { return min(max(i, 0), n - 1); }

// ---------------------------------------------------------------------------------------------
// Output targets.
struct BufferOut {
    pixel* data;
    __device__ void write(int x, int y, int width, const float4 v) const { data[(size_t)y * width + x] = from_float4(v); }
};
struct SurfaceOut {
    cudaSurfaceObject_t surface;
    __device__ void write(int x, int y, int, const float4 v) const { surf2Dwrite(from_float4(v), surface, x * (int)sizeof(pixel), y); }
};

// ---------------------------------------------------------------------------------------------
// naive: out(x, y) = Σ_j w|j| Σ_i w|i| in(clamp(x + i), clamp(y + j)); weights[k] = w_k for k = 0..r.
template <class Out>
__device__ void naive(const pixel* __restrict__ in, Out out, int width, int height, const float* __restrict__ weights, int radius)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) {
        return;
    }
    float4 sum = make_float4(0, 0, 0, 0);
    for (int j = -radius; j <= radius; ++j) {
        const pixel* row = in + (size_t)clamp_index(y + j, height) * width;
        float4 row_sum = make_float4(0, 0, 0, 0);
        for (int i = -radius; i <= radius; ++i) {
            row_sum = fma4(weights[abs(i)], to_float4(row[clamp_index(x + i, width)]), row_sum);
        }
        sum = fma4(weights[abs(j)], row_sum, sum);
    }
    out.write(x, y, width, sum);
}

extern "C" __global__ void blur_naive_to_buffer(const pixel* in, pixel* out, int width, int height, const float* weights, int radius)
{
    naive(in, BufferOut{out}, width, height, weights, radius);
}

extern "C" __global__ void blur_naive_to_surface(const pixel* in, cudaSurfaceObject_t out, int width, int height, const float* weights, int radius)
{
    naive(in, SurfaceOut{out}, width, height, weights, radius);
}

// ---------------------------------------------------------------------------------------------
// Row passes. A block filters blockDim.y rows × `tile` pixels. The input row segment, `reach`
// pixels wider on each side (clamped at the image edge), is staged in shared memory as float4.

struct Tile {
    int tile;       // pixels per row of the tile
    int span;       // staged pixels per row: tile + 2·reach, padded (see tile_span)
    int x0;         // first output column
    int y;          // this thread's row (may be ≥ height for the last block)
    float4* row;    // this row's staged pixels
    float4* work;   // a second row-sized buffer: results, or intermediate sums
};

// Staged pixels per row: the tile, `reach` on each side, PIXELS_PER_THREAD more so the Gaussian's
// register window may read past the last tap, rounded up to an odd count: rows of an odd number
// of float4 start in different banks, so the transposed write reads them without conflicts.
__device__ __forceinline__ int tile_span(int tile, int reach)
{
    return (tile + 2 * reach + PIXELS_PER_THREAD) | 1;
}

template <class In>
__device__ Tile stage_rows(const In* __restrict__ in, int width, int height, int reach)
{
    extern __shared__ float4 blur_shared[];
    Tile t;
    t.tile = blockDim.x * PIXELS_PER_THREAD;
    t.span = tile_span(t.tile, reach);
    t.x0 = blockIdx.x * t.tile;
    t.y = blockIdx.y * blockDim.y + threadIdx.y;
    t.row = blur_shared + threadIdx.y * t.span;
    t.work = blur_shared + (blockDim.y + threadIdx.y) * t.span;
    const In* source = in + (size_t)clamp_index(t.y, height) * width;
    for (int k = threadIdx.x; k < t.span; k += blockDim.x) {
        t.row[k] = to_float4(source[clamp_index(t.x0 - reach + k, width)]);
    }
    __syncthreads();
    return t;
}

// Writes the tile's results (t.work[0..tile) of every row) transposed: out[x·height + y], so that
// consecutive threads write the blockDim.y consecutive pixels of one output row. blockDim.y must
// be a power of two (checked on the host), so the index split is a shift and a mask.
template <class Out>
__device__ void write_transposed(const Tile& t, Out out, int width, int height)
{
    __syncthreads();
    extern __shared__ float4 blur_shared[];
    const int rows = blockDim.y;
    const int row_bits = __ffs(rows) - 1;
    const int threads = blockDim.x * blockDim.y;
    const int thread = threadIdx.y * blockDim.x + threadIdx.x;
    for (int k = thread; k < t.tile * rows; k += threads) {
        const int column = k >> row_bits;
        const int row = k & (rows - 1);
        const int x = t.x0 + column;
        const int y = blockIdx.y * rows + row;
        if (x < width && y < height) {
            const float4 v = blur_shared[(rows + row) * t.span + column];
            out.write(y, x, height, v);
        }
    }
}

struct FloatOut {
    float4* data;
    __device__ void write(int x, int y, int width, const float4 v) const { data[(size_t)y * width + x] = v; }
};

// 1-D Gaussian along the staged row. Each thread computes PIXELS_PER_THREAD consecutive outputs
// c0..c0+P−1, sliding a register window along the taps: every staged pixel it loads serves P
// outputs, so shared-memory traffic is (P + 2r)/P loads per output instead of 2r + 1. With P odd
// the threads' windows start in different banks (no conflicts).
__device__ void gaussian_row(const Tile& t, const float* __restrict__ weights, int radius)
{
    constexpr int P = PIXELS_PER_THREAD;
    const int c0 = threadIdx.x * P;
    const float4* row = t.row + c0;
    const int taps = 2 * radius + 1;
    float4 sum[P];
    float4 window[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
        sum[i] = make_float4(0, 0, 0, 0);
        window[i] = row[i];
    }
    for (int k0 = 0; k0 < taps; k0 += P) {
        float4 next[P];
#pragma unroll
        for (int i = 0; i < P; ++i) {
            next[i] = row[k0 + P + i];
        }
#pragma unroll
        for (int kk = 0; kk < P; ++kk) {
            const int k = k0 + kk;
            if (k < taps) {
                const float w = weights[abs(k - radius)];
#pragma unroll
                for (int i = 0; i < P; ++i) {
                    sum[i] = fma4(w, i + kk < P ? window[i + kk] : next[i + kk - P], sum[i]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < P; ++i) {
            window[i] = next[i];
        }
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
        t.work[c0 + i] = sum[i];
    }
}

template <class In, class Out>
__device__ void gaussian_pass(const In* in, Out out, int width, int height, const float* weights, int radius)
{
    const Tile t = stage_rows(in, width, height, radius);
    gaussian_row(t, weights, radius);
    write_transposed(t, out, width, height);
}

extern "C" __global__ void blur_gaussian_first(const pixel* in, float4* out, int width, int height, const float* weights, int radius)
{
    gaussian_pass(in, FloatOut{out}, width, height, weights, radius);
}

extern "C" __global__ void blur_gaussian_second_to_buffer(const float4* in, pixel* out, int width, int height, const float* weights, int radius)
{
    gaussian_pass(in, BufferOut{out}, width, height, weights, radius);
}

extern "C" __global__ void blur_gaussian_second_to_surface(const float4* in, cudaSurfaceObject_t out, int width, int height, const float* weights, int radius)
{
    gaussian_pass(in, SurfaceOut{out}, width, height, weights, radius);
}

// ---------------------------------------------------------------------------------------------
// Box cascade. Each box of radius b replaces the staged row by its running mean of width 2b+1,
// computed from an inclusive prefix sum (each thread scans a chunk, the chunk totals are scanned
// by one warp, then every thread adds its offset). After all boxes the tile's outputs sit at
// offset `reach` = Σ b of the row.

__device__ __forceinline__ float4 shuffle_up(const float4 v, int offset)
{
    return make_float4(__shfl_up_sync(0xffffffffu, v.x, offset), __shfl_up_sync(0xffffffffu, v.y, offset),
                       __shfl_up_sync(0xffffffffu, v.z, offset), __shfl_up_sync(0xffffffffu, v.w, offset));
}

// Replaces totals[0..count) by their exclusive prefix sums, using the first warp of this row:
// each lane sums a run of totals, the lanes scan their sums with shuffles, then write back.
// Needs blockDim.x to be a multiple of 32, so a warp never spans two rows.
__device__ void exclusive_scan_totals(float4* totals, int count)
{
    if (threadIdx.x >= 32) {
        return;
    }
    const int lane = threadIdx.x;
    const int per_lane = (count + 31) / 32;
    const int begin = min(count, lane * per_lane);
    const int end = min(count, begin + per_lane);
    float4 local = make_float4(0, 0, 0, 0);
    for (int k = begin; k < end; ++k) {
        local = local + totals[k];
    }
    float4 inclusive = local;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const float4 other = shuffle_up(inclusive, offset);
        if (lane >= offset) {
            inclusive = inclusive + other;
        }
    }
    float4 running = inclusive - local;
    for (int k = begin; k < end; ++k) {
        const float4 value = totals[k];
        totals[k] = running;
        running = running + value;
    }
}

// Inclusive prefix sum of row[0..n) into prefix[0..n), by the threads of this row: each thread
// scans a chunk, the chunk totals are scanned by one warp, then every thread adds its offset.
__device__ void prefix_sum_row(const float4* row, float4* prefix, int n, float4* chunk_totals)
{
    const int threads = blockDim.x;
    // An odd chunk keeps the threads' sequential walks in different banks.
    const int chunk = ((n + threads - 1) / threads) | 1;
    const int begin = min(n, threadIdx.x * chunk);
    const int end = min(n, begin + chunk);
    float4 running = make_float4(0, 0, 0, 0);
    for (int k = begin; k < end; ++k) {
        running = running + row[k];
        prefix[k] = running;
    }
    chunk_totals[threadIdx.x] = running;
    __syncthreads();
    exclusive_scan_totals(chunk_totals, threads);
    __syncthreads();
    const float4 offset = chunk_totals[threadIdx.x];
    for (int k = begin; k < end; ++k) {
        prefix[k] = prefix[k] + offset;
    }
    __syncthreads();
}

template <class In, class Out>
__device__ void box_pass(const In* in, Out out, int width, int height, int4 radii, float4* chunk_totals_all)
{
    const int reach = radii.x + radii.y + radii.z + radii.w;
    const Tile t = stage_rows(in, width, height, reach);
    float4* chunk_totals = chunk_totals_all + threadIdx.y * blockDim.x;
    const int box[4] = {radii.x, radii.y, radii.z, radii.w};
    // Valid samples shrink by each box's radius on both sides: [lo, hi) of the staged row.
    int lo = 0;
    int hi = t.span;
    for (int b = 0; b < 4; ++b) {
        const int r = box[b];
        if (r == 0) {
            continue;
        }
        prefix_sum_row(t.row, t.work, hi, chunk_totals);
        const float scale = 1.0f / (2 * r + 1);
        // row[c] = (prefix[c + r] − prefix[c − r − 1]) / (2r + 1) for c in [lo + r, hi − r).
        for (int c = lo + r + threadIdx.x; c < hi - r; c += blockDim.x) {
            const float4 before = c - r - 1 >= 0 ? t.work[c - r - 1] : make_float4(0, 0, 0, 0);
            t.row[c] = scale * (t.work[c + r] - before);
        }
        __syncthreads();
        lo += r;
        hi -= r;
    }
    // Outputs [reach, reach + tile) of the row go to the work buffer for the transposed write.
    for (int p = 0; p < PIXELS_PER_THREAD; ++p) {
        const int c = threadIdx.x + p * blockDim.x;
        t.work[c] = t.row[c + reach];
    }
    write_transposed(t, out, width, height);
}

// The chunk totals of every row of the block follow the two staged buffers in shared memory.
__device__ float4* box_chunk_totals(int width, int4 radii)
{
    extern __shared__ float4 blur_shared[];
    const int reach = radii.x + radii.y + radii.z + radii.w;
    return blur_shared + 2 * blockDim.y * tile_span(blockDim.x * PIXELS_PER_THREAD, reach);
}

extern "C" __global__ void blur_box_first(const pixel* in, float4* out, int width, int height, int4 radii)
{
    box_pass(in, FloatOut{out}, width, height, radii, box_chunk_totals(width, radii));
}

extern "C" __global__ void blur_box_second_to_buffer(const float4* in, pixel* out, int width, int height, int4 radii)
{
    box_pass(in, BufferOut{out}, width, height, radii, box_chunk_totals(width, radii));
}

extern "C" __global__ void blur_box_second_to_surface(const float4* in, cudaSurfaceObject_t out, int width, int height, int4 radii)
{
    box_pass(in, SurfaceOut{out}, width, height, radii, box_chunk_totals(width, radii));
}
