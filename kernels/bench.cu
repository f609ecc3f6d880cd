/* bench.cu — probes for frigg-bench: a pure-read kernel (the read side of the roofline) and an empty kernel
 * (launch overhead). Not used by the engine. */
#include "common.cuh"
#include "kernels.h"

__global__ void read_probe_kernel(const uint4 *buf, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(buf + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    /* The result must be observable or the loads would be removed; the branch is almost never taken. */
    if (acc == 0x9e3779b9u) atomicAdd(sink, acc);
}

__global__ void empty_kernel(void) {}

extern "C" int fk_read_probe(const void *buf, size_t bytes, unsigned *sink, cudaStream_t s) {
    int dev, sms;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    read_probe_kernel<<<sms * 8, 512, 0, s>>>((const uint4 *)buf, bytes / 16, sink);
    return fk_check_launch("read_probe");
}

extern "C" int fk_empty(cudaStream_t s) {
    empty_kernel<<<1, 32, 0, s>>>();
    return fk_check_launch("empty");
}
