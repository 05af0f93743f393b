// blur.cu: Gaussian blur with clamp-to-edge borders, four ways.
//
//   naive      one thread per pixel sums the full (2r+1)² window: the teaching baseline.
//   separable  two passes of a 1-D Gaussian. Each pass filters rows from a shared-memory tile and
//              writes its result transposed, so the second pass (on the transposed image) filters
//              the original columns with the same code and coalesced reads, and transposes back.
//   box        the same two passes, but each applies four box filters (running sums from a
//              prefix scan in shared memory) whose cascade approximates the Gaussian: the cost per
//              pixel does not grow with σ.
//   recursive  Young and van Vliet's recursive Gaussian, run as three first-order recursions per
//              direction by threads that walk columns: coalesced reads, a cost per pixel that does
//              not grow with the number of taps, and a 16-bit intermediate for RGBA8.
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


// ---------------------------------------------------------------------------------------------
// Recursive Gaussian. The filter's impulse response is h[n] = Σ_j c_j p_j^|n| over a real pole and
// a complex-conjugate pair, so out = y⁺ + y⁻ with
//   y⁺[n] = Σ_{k≥0} h[k] x[n−k] = Σ_j c_j s_j[n],      s_j[n] = x[n] + p_j s_j[n−1]
//   y⁻[n] = Σ_{k≥1} h[k] x[n+k] = Σ_j c_j p_j t_j[n],  t_j[n] = x[n+1] + p_j t_j[n+1]
// (the conjugate pole's share is the complex conjugate of its partner's, hence the 2 Re(·) folded
// into the weights). A pass filters the columns of its input and writes its result transposed, so
// the second pass filters the original rows with the same code, like the separable passes.
//
// Work split: a block owns `columns` = threads/2 columns and a segment of `segment` rows. For
// each column one thread (an even warp) walks down computing y⁺, another (the next warp) walks up
// computing y⁻; each starts `warmup − skip` rows outside the segment from the state of a constant
// edge (exact at the image border, forgotten to within the host's tolerance inside the image: the
// host picks the fewest steps whose impulse-response tail stays within it). Until
// the middle of the segment each parks its partial sums in shared memory; after one
// __syncthreads each adds the other's partial sum over the second half of its walk and leaves the
// finished value in the same slot. The block then writes the tile transposed: a warp writes 32
// consecutive pixels of one output row.
//
// Per step a walker loads one pixel (a warp: one coalesced row segment), converts it with a byte
// permute and one add per channel, and updates its states: 3 FMA per channel with the pair as a
// second-order recursion, 5 as a complex one (see the walkers); output steps add 3 FMA per
// channel. Loads run a chunk of RECURSIVE_CHUNK steps ahead of the arithmetic.

#ifdef FORMAT_F32
typedef float4 raw_pixel;     // a source pixel as the recursive pass reads it
typedef float4 mid_pixel;     // the intermediate between the passes
typedef float4 partial_sum;   // one direction's share of a result, parked in shared memory
typedef float4 packed_pixel;  // a finished output pixel
#define RECURSIVE_CHUNK 8
#else
typedef unsigned raw_pixel;   // RGBA8 as one 32-bit word
typedef uint2 mid_pixel;      // value × 256 as four 16-bit integers (error ≤ 1/512 of a level)
typedef uint2 partial_sum;    // value × 64 + 32768 as four 16-bit integers (error ≤ 1/128 of a level)
typedef unsigned packed_pixel;
#define RECURSIVE_CHUNK 16
#endif

// Coefficients, as the host computes them (src/demos/blur/kernels.rs, RecursiveParams).
struct Recursive {
    float pole, pole_re, pole_im;           // real pole; complex pole (its conjugate is implied)
    float causal, causal_re, causal_im;     // y⁺ = causal·s + causal_re·Re z − causal_im·Im z
    float anti, anti_re, anti_im;           // y⁻, the same way from the backward states
    float steady, steady_re, steady_im;     // states for a constant input 1: 1/(1 − p)
    // The complex pair as one second-order recursion v = x + pair_a1·v₁ + pair_a2·v₂ (a1 = 2 Re p,
    // a2 = −|p|²) whose share of y⁺ is causal_g0·v + causal_g1·v₁ (y⁻: anti_g0, anti_g1).
    float pair_a1, pair_a2;
    float causal_g0, causal_g1, anti_g0, anti_g1;
    float pair_steady;                      // v for a constant input 1: 1/|1 − p|²
    int warmup;                             // rows before the segment the loads start, a multiple of RECURSIVE_CHUNK
    int segment;                            // rows per segment, a power of two ≥ 2·RECURSIVE_CHUNK
    int skip;                               // leading rows of the first chunk not computed (< RECURSIVE_CHUNK)
};

// Conversions with the float mantissa trick: a 16-bit or 8-bit integer i placed in the low bits of
// 2^23's bit pattern reads as 2^23 + i, and a float in [2^23, 2^24) rounds to an integer whose
// bits sit in the low mantissa. One byte permute and one add or FMA per channel, all exact.
#define MANTISSA_BASE 0x4B000000u
#define TWO_TO_23 8388608.0f

__device__ __forceinline__ float byte_value(unsigned word, unsigned selector)
{
    return __uint_as_float(__byte_perm(word, MANTISSA_BASE, selector)) - TWO_TO_23;
}

// Two channels to 16-bit integers round(v·scale + offset − 2^23) in one word (offset includes 2^23).
__device__ __forceinline__ unsigned pack_halves(float a, float b, float scale, float offset)
{
    return __byte_perm(__float_as_uint(fmaf(a, scale, offset)), __float_as_uint(fmaf(b, scale, offset)), 0x5410);
}

// Low (selector 0x7410) or high (0x7432) 16 bits of a word as 2^23 + i, then times scale plus offset.
__device__ __forceinline__ float half_value(unsigned word, unsigned selector, float scale, float offset)
{
    return fmaf(__uint_as_float(__byte_perm(word, MANTISSA_BASE, selector)), scale, offset);
}

__device__ __forceinline__ float4 levels(const float4 v) { return v; }
__device__ __forceinline__ float4 levels(const unsigned word)
{
    return make_float4(byte_value(word, 0x7440), byte_value(word, 0x7441), byte_value(word, 0x7442), byte_value(word, 0x7443));
}
// The RGBA8 intermediate: value × 256.
__device__ __forceinline__ float4 levels(const uint2 v)
{
    const float scale = 1.0f / 256.0f;
    const float offset = -TWO_TO_23 / 256.0f;
    return make_float4(half_value(v.x, 0x7410, scale, offset), half_value(v.x, 0x7432, scale, offset),
                       half_value(v.y, 0x7410, scale, offset), half_value(v.y, 0x7432, scale, offset));
}

#ifdef FORMAT_F32
__device__ __forceinline__ partial_sum park(const float4 v) { return v; }
__device__ __forceinline__ float4 unpark(const partial_sum p) { return p; }
__device__ __forceinline__ mid_pixel to_mid(const float4 v) { return v; }
__device__ __forceinline__ packed_pixel to_packed(const float4 v) { return v; }
#else
// |partial sum| < 512 levels: Σ_{k≥0} |h[k]| · 255 < 150 for every σ the host allows.
__device__ __forceinline__ partial_sum park(const float4 v)
{
    const float offset = TWO_TO_23 + 32768.0f;
    return make_uint2(pack_halves(v.x, v.y, 64.0f, offset), pack_halves(v.z, v.w, 64.0f, offset));
}
__device__ __forceinline__ float4 unpark(const partial_sum p)
{
    const float scale = 1.0f / 64.0f;
    const float offset = -(TWO_TO_23 + 32768.0f) / 64.0f;
    return make_float4(half_value(p.x, 0x7410, scale, offset), half_value(p.x, 0x7432, scale, offset),
                       half_value(p.y, 0x7410, scale, offset), half_value(p.y, 0x7432, scale, offset));
}
// Clamps with one saturating multiply: v / top in [0, 1], then the FMA of the conversion scales back.
__device__ __forceinline__ float clamp_mid(float v) { return __saturatef(v * (256.0f / 65535.0f)); }
__device__ __forceinline__ mid_pixel to_mid(const float4 v)
{
    return make_uint2(pack_halves(clamp_mid(v.x), clamp_mid(v.y), 65535.0f, TWO_TO_23),
                      pack_halves(clamp_mid(v.z), clamp_mid(v.w), 65535.0f, TWO_TO_23));
}
// Rounds to nearest, as to_byte() does (ties may differ by the last bit of v / 255).
__device__ __forceinline__ unsigned byte_bits(float v) { return __float_as_uint(fmaf(__saturatef(v * (1.0f / 255.0f)), 255.0f, TWO_TO_23)); }
__device__ __forceinline__ packed_pixel to_packed(const float4 v)
{
    const unsigned rg = __byte_perm(byte_bits(v.x), byte_bits(v.y), 0x0040);
    const unsigned ba = __byte_perm(byte_bits(v.z), byte_bits(v.w), 0x0040);
    return __byte_perm(rg, ba, 0x5410);
}
#endif

struct MidOut {
    typedef mid_pixel value;
    mid_pixel* data;
    static __device__ __forceinline__ value finish(const float4 v) { return to_mid(v); }
    __device__ void put(int x, int y, int width, const value v) const { data[(size_t)y * width + x] = v; }
};
struct PackedBufferOut {
    typedef packed_pixel value;
    packed_pixel* data;
    static __device__ __forceinline__ value finish(const float4 v) { return to_packed(v); }
    __device__ void put(int x, int y, int width, const value v) const { data[(size_t)y * width + x] = v; }
};
struct PackedSurfaceOut {
    typedef packed_pixel value;
    cudaSurfaceObject_t surface;
    static __device__ __forceinline__ value finish(const float4 v) { return to_packed(v); }
    __device__ void put(int x, int y, int, const value v) const { surf2Dwrite(v, surface, x * (int)sizeof(value), y); }
};

// Loads RECURSIVE_CHUNK pixels of a column from `row` on, `direction` = ±1 rows apart. Inside
// the image (every chunk but a few at the borders) the address just steps by a row.
template <class In>
__device__ __forceinline__ void load_chunk(In (&chunk)[RECURSIVE_CHUNK], const In* __restrict__ column, int width, int height, int row, int direction)
{
    const int last = row + direction * (RECURSIVE_CHUNK - 1);
    if (min(row, last) >= 0 && max(row, last) < height) {
        const In* pointer = column + (size_t)row * width;
        const ptrdiff_t stride = (ptrdiff_t)direction * width;
#pragma unroll
        for (int u = 0; u < RECURSIVE_CHUNK; ++u) {
            chunk[u] = *pointer;
            pointer += stride;
        }
    } else {
#pragma unroll
        for (int u = 0; u < RECURSIVE_CHUNK; ++u) {
            chunk[u] = column[(size_t)clamp_index(row + direction * u, height) * width];
        }
    }
}

// The real pole's recursion s = x + p·s, four channels.
__device__ __forceinline__ float4 advance(const float pole, const float4 s, const float4 x)
{
    return make_float4(fmaf(pole, s.x, x.x), fmaf(pole, s.y, x.y), fmaf(pole, s.z, x.z), fmaf(pole, s.w, x.w));
}

// A walker's recursions, four channels each, in one of two forms. Both run the real pole as
// s = x + p·s. ComplexWalker runs the complex pole as a first-order complex recursion (4 FMA per
// channel and step): well conditioned for any σ. PairWalker runs the conjugate pair as one
// real second-order recursion (2 FMA): its states grow as 1/|1 − p|², so float rounding grows
// with σ, and the host takes it only where that stays far below a level (RGBA8, σ ≤ 100). Each
// form has its own kernels (blur_recursive_pair_* for the pair), so each gets its own register count.
struct ComplexWalker {
    float4 real;      // s (or t) of the real pole
    float4 re, im;    // s (or t) of the complex pole
    float pole, pole_re, pole_im;
    float weight, weight_re, weight_im;

    __device__ __forceinline__ ComplexWalker(const Recursive& c, bool backward, const float4 edge)
        : real(c.steady * edge), re(c.steady_re * edge), im(c.steady_im * edge), pole(c.pole), pole_re(c.pole_re),
          pole_im(c.pole_im), weight(backward ? c.anti : c.causal), weight_re(backward ? c.anti_re : c.causal_re),
          weight_im(backward ? c.anti_im : c.causal_im)
    {
    }

    __device__ __forceinline__ void step(const float4 x)
    {
        real = advance(pole, real, x);
        const float4 next_re = make_float4(fmaf(pole_re, re.x, fmaf(-pole_im, im.x, x.x)), fmaf(pole_re, re.y, fmaf(-pole_im, im.y, x.y)),
                                           fmaf(pole_re, re.z, fmaf(-pole_im, im.z, x.z)), fmaf(pole_re, re.w, fmaf(-pole_im, im.w, x.w)));
        im = make_float4(fmaf(pole_re, im.x, pole_im * re.x), fmaf(pole_re, im.y, pole_im * re.y),
                         fmaf(pole_re, im.z, pole_im * re.z), fmaf(pole_re, im.w, pole_im * re.w));
        re = next_re;
    }

    // This direction's share of the result, plus `other`.
    __device__ __forceinline__ float4 output(const float4 other) const
    {
        return make_float4(fmaf(weight, real.x, fmaf(weight_re, re.x, fmaf(-weight_im, im.x, other.x))),
                           fmaf(weight, real.y, fmaf(weight_re, re.y, fmaf(-weight_im, im.y, other.y))),
                           fmaf(weight, real.z, fmaf(weight_re, re.z, fmaf(-weight_im, im.z, other.z))),
                           fmaf(weight, real.w, fmaf(weight_re, re.w, fmaf(-weight_im, im.w, other.w))));
    }
};

struct PairWalker {
    float4 real;      // s (or t) of the real pole
    float4 v1, v2;    // the pair's state at this step and at the one before
    float pole, a1, a2;
    float weight, g0, g1;

    __device__ __forceinline__ PairWalker(const Recursive& c, bool backward, const float4 edge)
        : real(c.steady * edge), v1(c.pair_steady * edge), v2(c.pair_steady * edge), pole(c.pole), a1(c.pair_a1),
          a2(c.pair_a2), weight(backward ? c.anti : c.causal), g0(backward ? c.anti_g0 : c.causal_g0),
          g1(backward ? c.anti_g1 : c.causal_g1)
    {
    }

    __device__ __forceinline__ void step(const float4 x)
    {
        real = advance(pole, real, x);
        const float4 v = make_float4(fmaf(a1, v1.x, fmaf(a2, v2.x, x.x)), fmaf(a1, v1.y, fmaf(a2, v2.y, x.y)),
                                     fmaf(a1, v1.z, fmaf(a2, v2.z, x.z)), fmaf(a1, v1.w, fmaf(a2, v2.w, x.w)));
        v2 = v1;
        v1 = v;
    }

    __device__ __forceinline__ float4 output(const float4 other) const
    {
        return make_float4(fmaf(weight, real.x, fmaf(g0, v1.x, fmaf(g1, v2.x, other.x))),
                           fmaf(weight, real.y, fmaf(g0, v1.y, fmaf(g1, v2.y, other.y))),
                           fmaf(weight, real.z, fmaf(g0, v1.z, fmaf(g1, v2.z, other.z))),
                           fmaf(weight, real.w, fmaf(g0, v1.w, fmaf(g1, v2.w, other.w))));
    }
};

// Phase 0: warm-up (states only), from step `from` of the chunk on. Phase 1: park this
// direction's share in the slot of each row. Phase 2: add the share the other direction parked
// there and leave the finished value.
template <int Phase, class In, class Out, class Walker>
__device__ __forceinline__ void walk_chunk(Walker& walker, const In (&chunk)[RECURSIVE_CHUNK], partial_sum* slot, int slot_step, int from = 0)
{
#pragma unroll
    for (int u = 0; u < RECURSIVE_CHUNK; ++u) {
        if (Phase == 0 && u < from) {
            continue;
        }
        walker.step(levels(chunk[u]));
        if (Phase == 1) {
            slot[u * slot_step] = park(walker.output(make_float4(0, 0, 0, 0)));
        } else if (Phase == 2) {
            const float4 total = walker.output(unpark(slot[u * slot_step]));
            *reinterpret_cast<typename Out::value*>(slot + u * slot_step) = Out::finish(total);
        }
    }
}

template <class Walker, class In, class Out>
__device__ __forceinline__ void recursive_pass(const In* __restrict__ in, Out out, int width, int height, const Recursive& c)
{
    constexpr int U = RECURSIVE_CHUNK;
    extern __shared__ float4 blur_shared[];
    partial_sum* slots = reinterpret_cast<partial_sum*>(blur_shared);
    const int threads = blockDim.x * blockDim.y;
    const int thread = threadIdx.y * blockDim.x + threadIdx.x;
    const int columns = threads / 2;
    const int pitch = columns + 1;  // odd: a transposed read of one slot column hits every bank once
    const int warp = thread >> 5;
    const bool backward = (warp & 1) != 0;
    const int local = ((warp >> 1) << 5) + (thread & 31);
    const int x0 = blockIdx.x * columns;
    const int s = blockIdx.y * c.segment;
    const int half = c.segment >> 1;
    const In* column = in + min(x0 + local, width - 1);

    // Forward: step k reads row s − warmup + k and yields y⁺ of that row. Backward: step k reads
    // row s + segment + warmup − k and yields y⁻ of the row above it.
    const int first = backward ? s + c.segment + c.warmup : s - c.warmup;
    const int direction = backward ? -1 : 1;
    const int slot_step = direction * pitch;
    // The slot of step k: row (first + direction·k − backward) − s of the tile.
    partial_sum* slot0 = slots + local + (backward ? c.segment + c.warmup - 1 : -c.warmup) * pitch;

    // The states of an endless run of the first pixel the walker computes with (`skip` rows
    // into its first chunk: the host rounds the warm-up the tolerance needs up to whole chunks).
    const float4 edge = levels(column[(size_t)clamp_index(first + direction * c.skip, height) * width]);
    Walker walker(c, backward, edge);

    In current[U];
    In next[U];
    load_chunk(current, column, width, height, first, direction);
    const int steps = c.warmup + c.segment;
    for (int k0 = 0; k0 < steps; k0 += U) {
        load_chunk(next, column, width, height, first + direction * (k0 + U), direction);
        if (k0 == 0 && c.warmup > 0) {
            walk_chunk<0, In, Out, Walker>(walker, current, slot0, slot_step, c.skip);
        } else if (k0 < c.warmup) {
            walk_chunk<0, In, Out, Walker>(walker, current, slot0, slot_step);
        } else if (k0 < c.warmup + half) {
            walk_chunk<1, In, Out, Walker>(walker, current, slot0 + k0 * slot_step, slot_step);
        } else {
            if (k0 == c.warmup + half) {
                __syncthreads();  // both halves parked
            }
            walk_chunk<2, In, Out, Walker>(walker, current, slot0 + k0 * slot_step, slot_step);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            current[u] = next[u];
        }
    }
    __syncthreads();

    // Transposed write: the tile's column x becomes output row x; consecutive threads take
    // consecutive rows of the segment, i.e. consecutive pixels of that output row.
    const int row_bits = __ffs(c.segment) - 1;
    if ((threads & (c.segment - 1)) == 0) {
        // Threads a multiple of the segment (the usual case): each thread keeps one row of the tile.
        const int r = thread & (c.segment - 1);
        const int y = s + r;
        const int step = threads >> row_bits;
        if (y < height) {
            const int last = min(columns, width - x0);
            for (int lc = thread >> row_bits; lc < last; lc += step) {
                out.put(y, x0 + lc, height, *reinterpret_cast<const typename Out::value*>(slots + r * pitch + lc));
            }
        }
        return;
    }
    for (int k = thread; k < columns * c.segment; k += threads) {
        const int lc = k >> row_bits;
        const int r = k & (c.segment - 1);
        const int x = x0 + lc;
        const int y = s + r;
        if (x < width && y < height) {
            out.put(y, x, height, *reinterpret_cast<const typename Out::value*>(slots + r * pitch + lc));
        }
    }
}

extern "C" __global__ void blur_recursive_first(const raw_pixel* in, mid_pixel* out, int width, int height, Recursive c)
{
    recursive_pass<ComplexWalker>(in, MidOut{out}, width, height, c);
}

extern "C" __global__ void blur_recursive_pair_first(const raw_pixel* in, mid_pixel* out, int width, int height, Recursive c)
{
    recursive_pass<PairWalker>(in, MidOut{out}, width, height, c);
}

extern "C" __global__ void blur_recursive_second_to_buffer(const mid_pixel* in, packed_pixel* out, int width, int height, Recursive c)
{
    recursive_pass<ComplexWalker>(in, PackedBufferOut{out}, width, height, c);
}

extern "C" __global__ void blur_recursive_pair_second_to_buffer(const mid_pixel* in, packed_pixel* out, int width, int height, Recursive c)
{
    recursive_pass<PairWalker>(in, PackedBufferOut{out}, width, height, c);
}

extern "C" __global__ void blur_recursive_second_to_surface(const mid_pixel* in, cudaSurfaceObject_t out, int width, int height, Recursive c)
{
    recursive_pass<ComplexWalker>(in, PackedSurfaceOut{out}, width, height, c);
}

extern "C" __global__ void blur_recursive_pair_second_to_surface(const mid_pixel* in, cudaSurfaceObject_t out, int width, int height, Recursive c)
{
    recursive_pass<PairWalker>(in, PackedSurfaceOut{out}, width, height, c);
}
