// nbody.cu: all-pairs gravity with Plummer softening, integrated with kick-drift-kick leapfrog.
//
// One step is three launches on the demo's stream (split across devices, each device runs them
// for its own range of bodies, with nbody_forces_range in place of nbody_forces):
//   nbody_drift   v += a·dt/2; x += v·dt            (O(N); reads x_n, writes x_{n+1})
//   nbody_forces  partial accelerations of x_{n+1}  (O(N²); the part worth tuning)
//   nbody_kick    a = G·Σ partials; v += a·dt/2     (O(N))
// so positions and velocities are in step after every step (what the energy readout needs).
//
// Compile-time parameters (NVRTC -D options), chosen live in the panel:
//   NBODY_DOUBLE       fp64 state and arithmetic (default fp32)
//   BLOCK_SIZE         threads per block of nbody_forces
//   TILE_SIZE          bodies staged in shared memory per tile (dynamic shared memory)
//   UNROLL             unroll factor of the inner loop over a tile
//   BODIES_PER_THREAD  bodies each thread accumulates: every body loaded from shared memory is
//                      used that many times (fewer loads per interaction, more registers)
// Run-time parameter: gridDim.y splits the j range into slices whose partial sums nbody_kick adds
// in a fixed order, so small N still fills the GPU and results do not depend on timing.

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef TILE_SIZE
#define TILE_SIZE BLOCK_SIZE
#endif
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef BODIES_PER_THREAD
#define BODIES_PER_THREAD 1
#endif

#define NBODY_STRINGIFY(x) #x
#define NBODY_PRAGMA_UNROLL(n) _Pragma(NBODY_STRINGIFY(unroll n))

#ifdef NBODY_DOUBLE
typedef double real;
// Our own 32-byte-aligned vector: CUDA 13 deprecates double4 in favour of double4_32a, which
// CUDA 12's headers do not have.
struct __align__(32) real4 {
    double x, y, z, w;
};
__device__ __forceinline__ real nbody_rsqrt(real x) { return rsqrt(x); }
__device__ __forceinline__ real4 make_real4(real x, real y, real z, real w) { return real4{x, y, z, w}; }
#else
typedef float real;
typedef float4 real4;
__device__ __forceinline__ real nbody_rsqrt(real x) { return rsqrtf(x); }
__device__ __forceinline__ real4 make_real4(real x, real y, real z, real w) { return make_float4(x, y, z, w); }
#endif

// Acceleration on `me` from `other` (mass in .w), without G: 3 sub, 3 fma, rsqrt, 3 mul, 3 fma.
__device__ __forceinline__ void nbody_interact(const real4 me, const real4 other, real& ax, real& ay, real& az,
                                               const real softening2)
{
    const real dx = other.x - me.x;
    const real dy = other.y - me.y;
    const real dz = other.z - me.z;
    const real distance2 = fma(dx, dx, fma(dy, dy, fma(dz, dz, softening2)));
    const real inverse = nbody_rsqrt(distance2);
    const real strength = other.w * (inverse * inverse * inverse);
    ax = fma(dx, strength, ax);
    ay = fma(dy, strength, ay);
    az = fma(dz, strength, az);
}

// Partial accelerations of bodies first_body .. first_body + bodies − 1 (their own numbering
// 0 .. bodies − 1 in `partial`) from the bodies of j slice first_slice + blockIdx.y:
// partial[(first_slice + blockIdx.y) · bodies + i] = Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}.
// Thread t of block b handles bodies b·BLOCK_SIZE·BODIES_PER_THREAD + t + k·BLOCK_SIZE of the range.
// Forced inline into both entry points, so nbody_forces (first_body = 0, bodies = n,
// first_slice = 0) compiles to the same code as before the range version existed.
__device__ __forceinline__ void nbody_forces_body(const real4* __restrict__ positions,
                                                  real4* __restrict__ partial,
                                                  unsigned int n,
                                                  unsigned int slice_length,
                                                  real softening2,
                                                  unsigned int first_body,
                                                  unsigned int bodies,
                                                  unsigned int first_slice)
{
    extern __shared__ unsigned char nbody_shared[];
    real4* tile = reinterpret_cast<real4*>(nbody_shared);

    real4 me[BODIES_PER_THREAD];
    real ax[BODIES_PER_THREAD], ay[BODIES_PER_THREAD], az[BODIES_PER_THREAD];
    const unsigned int first = blockIdx.x * (BLOCK_SIZE * BODIES_PER_THREAD) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < BODIES_PER_THREAD; ++k) {
        const unsigned int i = first + k * BLOCK_SIZE;
        me[k] = i < bodies ? positions[first_body + i] : make_real4(0, 0, 0, 0);
        ax[k] = 0;
        ay[k] = 0;
        az[k] = 0;
    }

    const unsigned int slice = first_slice + blockIdx.y;
    const unsigned int begin = slice * slice_length;
    const unsigned int end = min(n, begin + slice_length);
    for (unsigned int tile_start = begin; tile_start < end; tile_start += TILE_SIZE) {
        for (unsigned int k = threadIdx.x; k < TILE_SIZE; k += BLOCK_SIZE) {
            const unsigned int j = tile_start + k;
            // Bodies past the end of the slice get zero mass: they add nothing (ε > 0).
            tile[k] = j < end ? positions[j] : make_real4(0, 0, 0, 0);
        }
        __syncthreads();
        NBODY_PRAGMA_UNROLL(UNROLL)
        for (int j = 0; j < TILE_SIZE; ++j) {
            const real4 other = tile[j];
#pragma unroll
            for (int k = 0; k < BODIES_PER_THREAD; ++k) {
                nbody_interact(me[k], other, ax[k], ay[k], az[k], softening2);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int k = 0; k < BODIES_PER_THREAD; ++k) {
        const unsigned int i = first + k * BLOCK_SIZE;
        if (i < bodies) {
            partial[(size_t)slice * bodies + i] = make_real4(ax[k], ay[k], az[k], 0);
        }
    }
}

// partial[slice * n + i] for every body i and j slice blockIdx.y: the single-device launch.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
nbody_forces(const real4* __restrict__ positions,
             real4* __restrict__ partial,
             unsigned int n,
             unsigned int slice_length,
             real softening2)
{
    nbody_forces_body(positions, partial, n, slice_length, softening2, 0, n, 0);
}

// One device's share when the bodies are split across devices: the bodies it integrates
// (first_body, bodies) against the j slices first_slice .. first_slice + gridDim.y − 1 of all n
// positions. Launched once per device partition of j, so the slices already on the device run
// while the others are still being copied in.
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
nbody_forces_range(const real4* __restrict__ positions,
                   real4* __restrict__ partial,
                   unsigned int n,
                   unsigned int slice_length,
                   real softening2,
                   unsigned int first_body,
                   unsigned int bodies,
                   unsigned int first_slice)
{
    nbody_forces_body(positions, partial, n, slice_length, softening2, first_body, bodies, first_slice);
}

// The first half of a step: v_{n+½} = v_n + a_n·dt/2, x_{n+1} = x_n + v_{n+½}·dt.
// In fp64 builds the state lives in device memory and `display` (the GL vertex buffer) gets a
// float copy of the new positions; in fp32 builds `positions_out` is the GL buffer itself.
extern "C" __global__ void nbody_drift(const real4* __restrict__ positions_in,
                                       real4* __restrict__ positions_out,
                                       real4* __restrict__ velocities,
                                       const real4* __restrict__ accelerations,
                                       float4* __restrict__ display,
                                       unsigned int n,
                                       real dt)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const real4 x = positions_in[i];
    real4 v = velocities[i];
    const real4 a = accelerations[i];
    const real half = dt * (real)0.5;
    v.x = fma(a.x, half, v.x);
    v.y = fma(a.y, half, v.y);
    v.z = fma(a.z, half, v.z);
    const real4 moved = make_real4(fma(v.x, dt, x.x), fma(v.y, dt, x.y), fma(v.z, dt, x.z), x.w);
    positions_out[i] = moved;
    velocities[i] = v;
    if (display != nullptr) {
        display[i] = make_float4((float)moved.x, (float)moved.y, (float)moved.z, (float)moved.w);
    }
}

// The second half: a_{n+1} = G·Σ_slices partial, v_{n+1} = (v_{n+½} + a_{n+1}·dt/2)·damping.
// With dt = 0 and damping = 1 it only computes a_0 (done once after a reset).
// `display` gets float velocities for colouring by speed (fp64 builds; null otherwise).
extern "C" __global__ void nbody_kick(real4* __restrict__ velocities,
                                      real4* __restrict__ accelerations,
                                      const real4* __restrict__ partial,
                                      float4* __restrict__ display,
                                      unsigned int n,
                                      unsigned int slices,
                                      real dt,
                                      real gravity,
                                      real damping)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    real ax = 0, ay = 0, az = 0;
    for (unsigned int s = 0; s < slices; ++s) {
        const real4 p = partial[(size_t)s * n + i];
        ax += p.x;
        ay += p.y;
        az += p.z;
    }
    ax *= gravity;
    ay *= gravity;
    az *= gravity;
    real4 v = velocities[i];
    const real half = dt * (real)0.5;
    v.x = fma(ax, half, v.x) * damping;
    v.y = fma(ay, half, v.y) * damping;
    v.z = fma(az, half, v.z) * damping;
    velocities[i] = v;
    accelerations[i] = make_real4(ax, ay, az, 0);
    if (display != nullptr) {
        display[i] = make_float4((float)v.x, (float)v.y, (float)v.z, 0.0f);
    }
}

// Kinetic and softened potential energy, accumulated in fp64 whatever the state's precision:
// sums[2·block] += Σ ½ m v², sums[2·block + 1] += −½ G Σ_i Σ_{j≠i} m_i m_j / √(r² + ε²).
// Launched with 256 threads per block and 256·sizeof(real4) bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(256)
nbody_energy(const real4* __restrict__ positions,
             const real4* __restrict__ velocities,
             double* __restrict__ sums,
             unsigned int n,
             real softening2,
             real gravity)
{
    extern __shared__ unsigned char nbody_energy_shared[];
    real4* tile = reinterpret_cast<real4*>(nbody_energy_shared);
    __shared__ double kinetic_sum[256];
    __shared__ double potential_sum[256];

    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const real4 me = i < n ? positions[i] : make_real4(0, 0, 0, 0);
    double potential = 0.0;
    for (unsigned int tile_start = 0; tile_start < n; tile_start += 256) {
        const unsigned int j = tile_start + threadIdx.x;
        tile[threadIdx.x] = j < n ? positions[j] : make_real4(0, 0, 0, 0);
        __syncthreads();
        for (unsigned int k = 0; k < 256 && tile_start + k < n; ++k) {
            if (tile_start + k != i) {
                const double dx = (double)tile[k].x - (double)me.x;
                const double dy = (double)tile[k].y - (double)me.y;
                const double dz = (double)tile[k].z - (double)me.z;
                potential -= (double)tile[k].w / sqrt(dx * dx + dy * dy + dz * dz + (double)softening2);
            }
        }
        __syncthreads();
    }
    double kinetic = 0.0;
    if (i < n) {
        const real4 v = velocities[i];
        kinetic = 0.5 * (double)me.w * ((double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z);
        potential *= 0.5 * (double)gravity * (double)me.w;
    } else {
        potential = 0.0;
    }
    kinetic_sum[threadIdx.x] = kinetic;
    potential_sum[threadIdx.x] = potential;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            kinetic_sum[threadIdx.x] += kinetic_sum[threadIdx.x + stride];
            potential_sum[threadIdx.x] += potential_sum[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[2 * blockIdx.x] = kinetic_sum[0];
        sums[2 * blockIdx.x + 1] = potential_sum[0];
    }
}
