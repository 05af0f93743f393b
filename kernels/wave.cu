// wave.cu: the "hello interop" kernel. Each thread writes one vertex of a width × height grid as
// float4(u, height, v, 1), with u, v in [-1, 1] and a height that moves with `phase`.
//
// The vertex buffer it writes is a GL buffer mapped for CUDA (interop path) or plain device memory
// (host-copy path); the kernel can't tell the difference.

extern "C" __global__ void wave(float4* positions,
                                unsigned int width,
                                unsigned int height,
                                float phase,
                                float frequency,
                                float amplitude)
{
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) {
        return;
    }
    // A 1-wide grid sits at the centre instead of dividing by zero.
    const float u = width > 1 ? (float)x / (float)(width - 1) * 2.0f - 1.0f : 0.0f;
    const float v = height > 1 ? (float)y / (float)(height - 1) * 2.0f - 1.0f : 0.0f;
    const float h = amplitude * sinf(u * frequency + phase) * cosf(v * frequency + phase);
    positions[(size_t)y * width + x] = make_float4(u, h, v, 1.0f);
}
