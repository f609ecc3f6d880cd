/* dev/vram.cu — how fast can this GPU read its memory? The roofline of frigg-bench divides a decode step's
 * bytes by a read bandwidth measured in the same run (fk_read_probe, kernels/bench.cu: a grid-stride loop with
 * 8 independent 16-byte loads per thread in flight, 2 blocks of 512 per SM); that figure is only honest if no
 * kernel of ours reads faster than the probe. This program times the shipped probe through the library beside
 * other ways to read a 2 GiB buffer (far beyond L2), each at several grid shapes, and cudaMemcpy, and prints
 * GB/s (median, min, max of the repeats) per version and shape.
 *
 *   vram [--repeats N] [--memset]
 * (--memset: time over a buffer of 0x01 bytes, as frigg-bench's vram mode reads, instead of random data.)
 * Versions:
 *   shipped   fk_read_probe on the program's kernel context, as frigg-bench launches it (its one grid shape)
 *   stride1   grid-stride, one load per thread per iteration (the probe bench.cu's replaced)
 *   chunkU    each block reads one contiguous slice of the buffer, U loads per thread in flight (U = 4, 8, 16)
 * The grid-stride loop with 4 or 8 loads per iteration at other grid shapes is the shipped kernel's code with
 * other constants: git keeps that sweep (the kernels/dev/vram sweep in benchmarks/h200-2026-11-30/: 4,501-4,601 GB/s over
 * the shapes, the shipped probe 4,586, stride1 at most 4,455, chunkU at most 4,427, cudaMemcpy 4,237).
 * Checks: stride1 and chunkU XOR what they read into a value that decides whether an atomic runs (so no load is
 * dead), and every version and shape must reproduce the CPU's XOR of a known pattern. The shipped probe keeps
 * only "add a thread's XOR to the sink when it is 0x9e3779b9", so it is checked on a buffer of zeros with one
 * 16-byte word of that XOR at a few places (the first, the middle, the last two: on the H200 the buffer's last
 * 131,072 words are read by the loop after the unrolled rounds): the sink must then hold exactly that value,
 * which it does only if the word was read. */
#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "dev.cuh"
#include "kernels.h"


__device__ __forceinline__ uint4 ld_cs(const uint4 *p) { return __ldcs(p); }

/* the XOR of everything read goes to out[block] (the check reads it; a timing pass ignores it) */
__device__ __forceinline__ void block_xor(unsigned acc, unsigned *out) {
    for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicXor(out, acc);
}

__global__ void stride1(const uint4 *buf, size_t n, unsigned *out) {
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = ld_cs(buf + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    block_xor(acc, out);
}

/* block b reads [n*b/grid, n*(b+1)/grid): each round U x blockDim contiguous 16-byte words */
template <int U>
__global__ void chunkU(const uint4 *buf, size_t n, unsigned *out) {
    unsigned acc = 0;
    const size_t lo = n * blockIdx.x / gridDim.x, hi = n * (blockIdx.x + 1) / gridDim.x;
    size_t i = lo + threadIdx.x;
    for (; i + (U - 1) * blockDim.x < hi; i += (size_t)U * blockDim.x) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = ld_cs(buf + i + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < hi; i += blockDim.x) {
        uint4 v = ld_cs(buf + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    block_xor(acc, out);
}

typedef void (*probe_fn)(const uint4 *, size_t, unsigned *);
struct version {
    const char *name;
    probe_fn fn;
};
static const version versions[] = {
    {"stride1", stride1}, {"chunk4", chunkU<4>}, {"chunk8", chunkU<8>}, {"chunk16", chunkU<16>},
};
struct shape {
    int blocks_per_sm, threads;
};
static const shape shapes[] = {{1, 1024}, {2, 512}, {4, 256}, {4, 512}, {8, 512}, {16, 128}, {32, 256}};

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    int repeats = 7, memset_data = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (*argv[i] < '0' || *argv[i] > '9' || *end || v < 1 || v > 1000) {
                fprintf(stderr, "vram: --repeats must be a whole number 1..1000, not '%s'\n", argv[i]);
                return 2;
            }
            repeats = (int)v;
        } else if (!strcmp(argv[i], "--memset")) memset_data = 1;
        else {
            fprintf(stderr, "usage: vram [--repeats N] [--memset]\n");
            return 2;
        }
    }
    const int dev = 0;
    int sms = 0;
    fk_ctx *kc = dev_ctx(dev);
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    const size_t bytes = (size_t)2 << 30, n = bytes / 16;
    uint4 *buf, *dst;
    unsigned *out;
    CK(cudaMalloc(&buf, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMalloc(&out, 4));
    printf("device: %s, %d SMs\n", prop.name, sms);

    /* check the shipped probe: zeros but for one word of XOR 0x9e3779b9 (bench.cu's sink condition) */
    {
        const uint32_t magic = 0x9e3779b9u, word[4] = {magic, 0, 0, 0}, zero[4] = {0, 0, 0, 0};
        const size_t at[] = {0, n / 2, n - 2, n - 1};
        int bad = 0;
        CK(cudaMemset(buf, 0, bytes));
        for (size_t w : at) {
            unsigned got = 0;
            CK(cudaMemset(out, 0, 4));
            CK(cudaMemcpy(buf + w, word, 16, cudaMemcpyHostToDevice));
            if (fk_read_probe(kc, buf, bytes, out, 0)) {
                fprintf(stderr, "fk_read_probe: %s\n", frigg_error());
                return 2;
            }
            CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(buf + w, zero, 16, cudaMemcpyHostToDevice));
            if (got != magic) {
                printf("check shipped word %zu FAIL (sink %08x, want %08x)\n", w, got, magic);
                bad = 1;
            }
        }
        printf("check: %s\n", bad ? "FAIL" : "the shipped probe reads the first, middle and last two words (PASS)");
        if (bad) return 1;
    }

    /* check: a pattern whose XOR the CPU knows; every version and shape must reproduce it */
    {
        std::vector<uint32_t> h(bytes / 4);
        uint32_t s = 12345, want = 0;
        for (size_t i = 0; i < h.size(); i++) {
            s = s * 1664525u + 1013904223u;
            h[i] = s;
            want ^= s;
        }
        CK(cudaMemcpy(buf, h.data(), bytes, cudaMemcpyHostToDevice));
        int bad = 0;
        for (const version &v : versions)
            for (const shape &sh : shapes) {
                unsigned got = 0;
                CK(cudaMemset(out, 0, 4));
                v.fn<<<sms * sh.blocks_per_sm, sh.threads>>>(buf, n, out);
                CK(cudaGetLastError());
                CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
                if (got != want) {
                    printf("check %-8s %2dx%-4d FAIL (xor %08x, want %08x)\n", v.name, sh.blocks_per_sm, sh.threads, got, want);
                    bad = 1;
                }
            }
        printf("check: %s\n", bad ? "FAIL" : "every version and shape reads every byte (PASS)");
        if (bad) return 1;
    }

    if (memset_data) CK(cudaMemset(buf, 1, bytes));
    printf("timed over %s data\n", memset_data ? "0x01 (memset)" : "random");
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time_ms = [&](auto &&launch) {
        launch(); /* warm-up */
        std::vector<double> ms;
        for (int r = 0; r < repeats; r++) {
            CK(cudaEventRecord(e0));
            launch();
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t = 0;
            CK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t);
        }
        return ms;
    };
    auto report = [&](const char *name, int bps, int threads, const std::vector<double> &ms, double moved) {
        double lo = *std::min_element(ms.begin(), ms.end()), hi = *std::max_element(ms.begin(), ms.end());
        printf("time %-8s %2dx%-4d %8.1f GB/s (min %.1f max %.1f)\n", name, bps, threads, moved / (median(ms) * 1e6),
               moved / (hi * 1e6), moved / (lo * 1e6));
    };
    report("memcpy", 0, 0, time_ms([&] { CK(cudaMemcpyAsync(dst, buf, bytes, cudaMemcpyDeviceToDevice)); }), 2.0 * bytes);
    for (const version &v : versions)
        for (const shape &sh : shapes)
            report(v.name, sh.blocks_per_sm, sh.threads, time_ms([&] {
                       v.fn<<<sms * sh.blocks_per_sm, sh.threads>>>(buf, n, out);
                       CK(cudaGetLastError());
                   }),
                   (double)bytes);
    report("shipped", 2, 512, time_ms([&] {
               if (fk_read_probe(kc, buf, bytes, out, 0)) exit(1);
           }),
           (double)bytes);
    fk_ctx_free(kc);
    return 0;
}
