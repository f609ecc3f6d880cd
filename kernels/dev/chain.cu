/* dev/chain.cu — what does one kernel boundary cost inside a decode step? A batch-1 step is 651 kernels in a
 * CUDA graph, each waiting (griddepcontrol.wait, PDL) for the whole previous grid to complete before it reads
 * what that grid wrote. This program times chains of nearly empty kernels, each block reading a value its
 * predecessor's blocks wrote and writing the next, captured in one graph and replayed, in three versions:
 *   plain  no programmatic launch: each kernel starts when the previous one has completed
 *   grid   the shipped pattern, kernels/common.cuh's pdl_wait: launched early (PDL), trigger, griddepcontrol.wait
 *   flag   launched early (PDL) and triggered as grid, but the wait is a spin on a counter the previous
 *          kernel's blocks raise after their writes (release / acquire at gpu scope), not grid completion
 *   persist  one kernel whose blocks are all resident, the links as phases separated by flag's counters:
 *          a grid-wide dependency with no kernel boundary (what a persistent decode kernel would pay)
 * and prints µs per kernel (median, min, max over the repeats) for several grid sizes. A check replays each
 * chain once more and compares the last kernel's values with the chain length (the values are carried from
 * kernel to kernel: a stale read shows).
 *
 *   chain [--repeats N] [--kernels N]
 */
#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "common.cuh"
#include "dev.cuh"

enum { V_PLAIN, V_GRID, V_FLAG, V_PERSIST, NV };
static const char *const vname[NV] = {"plain", "grid", "flag", "persist"};

/* FLAG's trigger without the wait (pdl_wait does both) */
__device__ __forceinline__ void trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Kernel k of the chain: every block reads in[blockIdx % nin] (written by kernel k - 1), writes it + 1 to
 * out[blockIdx]. FLAG: waits until ctr[k - 1] counts nin blocks, raises ctr[k] after its write. Kernel 0 of
 * every version waits on the grid (its predecessor is the graph's counter reset). */
template <int V>
__global__ void link(const int *in, int nin, int *out, int *ctr, int k) {
    if (V == V_FLAG && k > 0) {
        trigger();
        if (threadIdx.x == 0)
            while (ld_acquire(ctr + k - 1) < nin) {
            }
        __syncthreads();
    } else if (V != V_PLAIN) {
        pdl_wait(); /* trigger, then griddepcontrol.wait */
    }
    if (threadIdx.x == 0) out[blockIdx.x] = in[blockIdx.x % nin] + 1;
    if (V == V_FLAG) {
        __syncthreads();
        if (threadIdx.x == 0) red_release(ctr + k, 1);
    }
}

/* PERSIST: one kernel, every block resident, the chain's nk links as phases separated by the same counters as
 * FLAG (a block raises ctr[k] after its write of phase k; phase k + 1 waits until ctr[k] counts every block):
 * what a persistent decode kernel's grid-wide dependency costs, with no kernel boundary at all. */
__global__ void persist(int *buf, int maxb, int *ctr, int nk) {
    for (int k = 0; k < nk; k++) {
        const int *in = buf + (k & 1) * maxb;
        int *out = buf + ((k + 1) & 1) * maxb;
        if (k > 0) {
            if (threadIdx.x == 0)
                while (ld_acquire(ctr + k - 1) < (int)gridDim.x) {
                }
            __syncthreads();
        }
        if (threadIdx.x == 0) out[blockIdx.x] = in[blockIdx.x % gridDim.x] + 1;
        __syncthreads();
        if (threadIdx.x == 0) red_release(ctr + k, 1);
    }
}

static void launch(int v, int blocks, cudaStream_t s, const int *in, int nin, int *out, int *ctr, int k) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = blocks;
    cfg.blockDim = 128;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = v == V_PLAIN ? 0 : 1;
    void (*fn)(const int *, int, int *, int *, int) = v == V_PLAIN ? link<V_PLAIN> : v == V_GRID ? link<V_GRID> : link<V_FLAG>;
    CK(cudaLaunchKernelEx(&cfg, fn, in, nin, out, ctr, k));
}

int main(int argc, char **argv) {
    int repeats = 5, nk = 640;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
        int ok = i + 1 < argc && end && !*end && v >= 1 && v <= 100000;
        if (!strcmp(argv[i], "--repeats") && ok) repeats = (int)v;
        else if (!strcmp(argv[i], "--kernels") && ok) nk = (int)v;
        else {
            fprintf(stderr, "usage: chain [--repeats N (1..100000)] [--kernels N (1..100000)]\n");
            return 2;
        }
        i++;
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs, %d kernels per chain, %d repeats\n", prop.name, sms, nk, repeats);
    const int grids[] = {1, sms, 2 * sms, 8 * sms};
    int *buf, *ctr;
    const int maxb = 8 * sms;
    CK(cudaMalloc(&buf, sizeof(int) * 2 * maxb));
    CK(cudaMalloc(&ctr, sizeof(int) * nk));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int bad = 0;
    printf("%-6s %7s %10s %10s %10s\n", "ver", "blocks", "us/kernel", "min", "max");
    int persist_fit = 0; /* PERSIST spins on blocks that have not run yet unless every block is resident */
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&persist_fit, persist, 128, 0));
    for (int g : grids)
        for (int v = 0; v < NV; v++) {
            if (v == V_PERSIST && g > persist_fit * sms) {
                printf("%-6s %7d (not every block fits on the GPU at once: skipped)\n", vname[v], g);
                continue;
            }
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            CK(cudaMemsetAsync(buf, 0, sizeof(int) * 2 * maxb, s));
            CK(cudaMemsetAsync(ctr, 0, sizeof(int) * nk, s));
            if (v == V_PERSIST) {
                persist<<<g, 128, 0, s>>>(buf, maxb, ctr, nk);
                CK(cudaGetLastError());
            } else {
                for (int k = 0; k < nk; k++)
                    launch(v, g, s, buf + (k & 1) * maxb, g, buf + ((k + 1) & 1) * maxb, ctr, k);
            }
            CK(cudaStreamEndCapture(s, &graph));
            CK(cudaGraphInstantiate(&exec, graph, 0));
            CK(cudaGraphLaunch(exec, s)); /* warm-up and check */
            CK(cudaStreamSynchronize(s));
            std::vector<int> got(g);
            CK(cudaMemcpy(got.data(), buf + (nk & 1) * maxb, sizeof(int) * g, cudaMemcpyDeviceToHost));
            for (int b = 0; b < g; b++)
                if (got[b] != nk) {
                    if (!bad) fprintf(stderr, "chain: %s %d blocks: block %d ends at %d, not %d\n", vname[v], g, b, got[b], nk);
                    bad = 1;
                }
            std::vector<float> us;
            for (int r = 0; r < repeats; r++) {
                CK(cudaEventRecord(e0, s));
                CK(cudaGraphLaunch(exec, s));
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                us.push_back(ms * 1000.0f / nk);
            }
            std::sort(us.begin(), us.end());
            printf("%-6s %7d %10.3f %10.3f %10.3f\n", vname[v], g, us[us.size() / 2], us.front(), us.back());
            CK(cudaGraphExecDestroy(exec));
            CK(cudaGraphDestroy(graph));
        }
    CK(cudaFree(buf));
    CK(cudaFree(ctr));
    return bad;
}
