/* ctx.cuh — the kernels' context (kernels.h: fk_ctx): everything a launcher needs to know about its device and
 * the engine's kernel choices. Each engine owns one, made on its own device, so two engines on two GPUs, or
 * with different choices, run side by side in one process; no launcher keeps state anywhere else. */
#ifndef FRIGG_KERNELS_CTX_CUH
#define FRIGG_KERNELS_CTX_CUH

#include "kernels.h"

#define FK_TC_MAX_WARPS 16 /* gemv_tc.cu: K split over up to 16 warps */
#define FK_TC_NMODE 3      /* gemv_tc.cu: its batch modes (1 row, up to 8, up to 16) */
#define GEMV_AUTO_ROWS 10  /* gemv.cu: five shape classes, for bf16 and for quantized weights */

struct fk_ctx {
    int device;      /* the device it was made on (launchers run on the caller's current device: this one) */
    int sms;         /* multiprocessors */
    int pdl;         /* sm_90+: programmatic dependent launch, thread-block clusters */
    int clusters_ok; /* the decode attention's 16-block clusters run here (a MIG slice may say no) */
    /* gemv.cu */
    int gemv_impl;           /* FK_GEMV_IMPL_* */
    char gemv_auto[GEMV_AUTO_ROWS][9]; /* the auto table: per shape class (bf16, then quantized weights), a letter
                                        * per batch size ('s' simt, 't' tc) */
    int tc_max_blocks;       /* 0: as many as fit */
    /* gemv_q.cu: the CUDA-core kernel's output units per warp at batch 1 and warps per block (0: its defaults) */
    int gq_units, gq_warps;
    /* gemv_tc.cu: blocks of each instantiation and warp count that fit on one SM,
     * [weight dtype (frigg_dtype)][batch mode][norm][epi][warps] */
    int tc_fit[3][FK_TC_NMODE][2][4][FK_TC_MAX_WARPS + 1];
    /* attention.cu */
    int prefill_impl;        /* FK_PREFILL_* */
    /* attention_decode.cu */
    int dec_impl, dec_spb;   /* FK_ATTND_*, splits per block (0: by batch size) */
    int dec_split_blocks;    /* splits x heads aimed at (0: DEC_SPLIT_BLOCKS) */
    /* clusters of n blocks (1..16) of the int8 cluster kernel at head_dim 32, 64, 128 the device runs at once */
    int dec_i8_fit[3][17];
    /* norm.cu, rope.cu */
    int eltwise_general;     /* the elementwise kernels take their general paths (a test hook) */
};

/* Per-file parts of fk_ctx_create (each sets the function attributes of its kernels on the current device). */
int fk_gemv_ctx_init(fk_ctx *k);
int fk_gemv_tc_ctx_init(fk_ctx *k);
int fk_gemv_q_ctx_init(fk_ctx *k);
int fk_attention_ctx_init(fk_ctx *k);
int fk_attn_decode_ctx_init(fk_ctx *k);

#endif
