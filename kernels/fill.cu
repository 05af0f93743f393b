// fill.cu: the smallest kernel that writes every byte of a buffer, for measuring what each
// transfer path costs around it (`interop-lab bench transfer`). Word i becomes value ^ i, so a
// reader can tell each frame's contents apart.

extern "C" __global__ void fill(unsigned int* data, unsigned long long words, unsigned int value)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        data[i] = value ^ (unsigned int)i;
    }
}
