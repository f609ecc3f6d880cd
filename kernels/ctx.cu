/* ctx.cu — fk_ctx_create / fk_ctx_free (kernels.h): a context for the current device, with every kernel's
 * function attributes set there and the default kernel choices. */
#include <stdlib.h>

#include "common.cuh"
#include "kernels.h"

extern "C" fk_ctx *fk_ctx_create(void) {
    fk_ctx *kc = (fk_ctx *)calloc(1, sizeof *kc);
    if (!kc) {
        frigg_set_error("kernels: out of memory for a context");
        return NULL;
    }
    int major = 0;
    cudaError_t e = cudaGetDevice(&kc->device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&kc->sms, cudaDevAttrMultiProcessorCount, kc->device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, kc->device);
    if (e != cudaSuccess || kc->sms < 1) {
        frigg_set_error("kernels: cannot read the device's properties: %s", cudaGetErrorString(e));
        free(kc);
        return NULL;
    }
    kc->pdl = major >= 9;
    if (fk_gemv_ctx_init(kc) || fk_gemv_tc_ctx_init(kc) || fk_gemv_q_ctx_init(kc) || fk_attention_ctx_init(kc) ||
        fk_attn_decode_ctx_init(kc)) {
        free(kc);
        return NULL;
    }
    return kc;
}

extern "C" void fk_ctx_free(fk_ctx *kc) { free(kc); }
