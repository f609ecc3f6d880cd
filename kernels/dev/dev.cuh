/* dev.cuh — what the microbenchmarks in kernels/dev/ share. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

extern "C" {
#include "base/util.h"
}
#include "kernels.h"

/* A CUDA call that must succeed: on an error, where and what, and exit status 2 (a failed check is 1). */
#define CK(call)                                                                                            \
    do {                                                                                                    \
        cudaError_t e_ = (call);                                                                            \
        if (e_ != cudaSuccess) {                                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));          \
            exit(2);                                                                                        \
        }                                                                                                   \
    } while (0)

/* The program's kernel context (kernels.h: fk_ctx) on `device`, made current first; exit status 2 when it
 * cannot be made. Every launcher the program calls takes it. */
static inline fk_ctx *dev_ctx(int device) {
    CK(cudaSetDevice(device));
    fk_ctx *kc = fk_ctx_create();
    if (!kc) {
        fprintf(stderr, "fk_ctx_create: %s\n", frigg_error());
        exit(2);
    }
    return kc;
}

/* A hash of an element's index and a seed: the microbenchmarks fill their (often tens of GB of) buffers on the
 * device from it, values whose exact bits do not affect the time. */
__device__ __forceinline__ uint32_t dev_hash(size_t i, uint32_t seed) {
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return h;
}

/* The median time in ms of `replays` launches of `exec` on `st` after `warm` untimed ones (at most 32), each
 * launch timed alone between two events: the decode-attention programs' timing. */
static inline float dev_graph_median_ms(cudaGraphExec_t exec, cudaStream_t st, int warm, int replays) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[32];
    if (replays > 32) replays = 32;
    for (int r = 0; r < warm + replays; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(exec, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        if (r >= warm) CK(cudaEventElapsedTime(&t[r - warm], e0, e1));
    }
    for (int i = 1; i < replays; i++) /* insertion sort: a handful of values */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            float x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return t[replays / 2];
}

/* A counter one grid's blocks raise after their writes and another grid's (or the same grid's) blocks wait on:
 * release / acquire at gpu scope, so what the raising block wrote before is visible to the one that sees it. */
__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release(int *p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
