// Does compute-sanitizer's initcheck follow a copy between two contexts?
//
// interop-lab's n-body split (`--devices 0,0`) gives each entry its own context and moves positions
// between them with cuMemcpyPeerAsync. Under initcheck every read of received bytes is reported as
// uninitialised, while the results are bit-identical to one device. This program isolates that:
// context A fills a buffer with a kernel, the bytes reach context B's buffer, and a kernel in B
// sums them.
//
//   nvcc -arch=sm_90 -o probe scripts/initcheck-peer-probe.cu -lcuda
//   for mode in 0 1 2 3; do compute-sanitizer --tool initcheck --print-limit 1 ./probe $mode; done
//
// Modes: 0 cuMemcpyPeerAsync A → B; 1 cuMemcpyDtoDAsync A → B; 2 no copy (a true uninitialised
// read: the sum is 0); 3 control, both buffers in B, filled and copied there.
// The sum printed says whether the reading kernel saw the filled values.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                      \
    do {                                                                 \
        CUresult status = (call);                                        \
        if (status != CUDA_SUCCESS) {                                    \
            const char* text = nullptr;                                  \
            cuGetErrorString(status, &text);                             \
            std::printf("%s: %s\n", #call, text ? text : "unknown");     \
            return 1;                                                    \
        }                                                                \
    } while (0)

__global__ void fill(float* data, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = (float)i;
}

__global__ void sum(const float* data, float* total, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(total, data[i]);
}

int main(int argc, char** argv)
{
    const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
    const int n = 1024;
    const int blocks = (n + 255) / 256;
    CHECK(cuInit(0));
    CUdevice device;
    CHECK(cuDeviceGet(&device, 0));
    CUctxCreateParams params = {};
    CUcontext a, b;
    CHECK(cuCtxCreate(&a, &params, 0, device));
    CHECK(cuCtxCreate(&b, &params, 0, device));
    CUdeviceptr source, received, total;
    CHECK(cuCtxSetCurrent(mode == 3 ? b : a));
    CHECK(cuMemAlloc(&source, n * sizeof(float)));
    fill<<<blocks, 256>>>((float*)source, n);
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(b));
    CHECK(cuMemAlloc(&received, n * sizeof(float)));
    CHECK(cuMemAlloc(&total, sizeof(float)));
    CHECK(cuMemsetD32(total, 0, 1));
    if (mode == 0) CHECK(cuMemcpyPeerAsync(received, b, source, a, n * sizeof(float), nullptr));
    if (mode == 1 || mode == 3) CHECK(cuMemcpyDtoDAsync(received, source, n * sizeof(float), nullptr));
    CHECK(cuCtxSynchronize());
    sum<<<blocks, 256>>>((const float*)received, (float*)total, n);
    CHECK(cuCtxSynchronize());
    float host = 0.0f;
    CHECK(cuMemcpyDtoH(&host, total, sizeof(float)));
    std::printf("mode %d: sum %.0f (filled values give %.0f)\n", mode, host, (n - 1) * n / 2.0);
    return 0;
}
