/* dev.cuh — what the microbenchmarks in kernels/dev/ share. */
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

extern "C" {
#include "util.h"
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
