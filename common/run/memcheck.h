/* memcheck.h — whether engines fit in memory, checked before they are created. The CPU engine reserves its KV
 * cache with calloc, which the OS commits only as positions are written: an engine far larger than the machine
 * is created without an error and dies later under the OOM killer (frigg-bench --random-mimir --backend cpu
 * --batch 64 --ctx 4096 reserved 406 GB on a 23 GB machine). Every program asks here first, as frigg-serve does,
 * and refuses with the need, what is available and which of its options to lower.
 *
 * The figures are frigg-serve's budget: the KV cache (frigg_kv_seq_bytes: K and V of every virtual layer, as
 * the engine keeps them), the work buffers (the activations of a whole prompt and the logits; on the CUDA engine
 * its own count, frigg_cuda_work_bytes), and the weights where the engine adds them to the memory checked (the
 * CUDA engine's upload; on the CPU engine the weights are the mapped file, which the page cache holds, or a
 * random model already in memory). Checked against MemAvailable (/proc/meminfo) for the CPU engine and the
 * device's free memory (cudaMemGetInfo) for the CUDA engine; where neither can be read, nothing is refused. */
#ifndef FRIGG_MEMCHECK_H
#define FRIGG_MEMCHECK_H

#include "engine/backend.h"
#include "model/model.h"

/* One engine (or a buffer of the caller's) in some memory. */
typedef struct {
    const char *what;         /* for the message: "the model", "the reference", "decode batch 64 at ctx 4096" */
    const frigg_config *cfg;  /* the model's config */
    const char *engine;       /* "cpu", "cuda", NULL or "auto" (resolved as frigg_backend_create resolves it) */
    int device;               /* the CUDA device */
    int seqs, ctx;            /* sequence slots and tokens per sequence (ctx 0: max_position_embeddings) */
    frigg_dtype kv_dtype;     /* 0: bf16 */
    double weights;           /* bytes of weights this engine adds to the memory checked (frigg_mem_weights) */
    double extra;             /* bytes the caller holds beside the engine in the same memory (e.g. score logits) */
    const char *extra_what;   /* what extra is, for the message */
} frigg_mem_plan;

/* "cpu" or "cuda" for an engine name as frigg_backend_create takes it (NULL/"auto": cuda when a GPU is present in
 * a CUDA build); any other name is returned as it is (the engine's creation refuses it). */
const char *frigg_mem_engine(const char *engine);
/* The bytes of m's weights an engine adds to the memory it runs in: on the CUDA engine its upload (the matrices
 * as stored, the embedding, and the bf16 copy of quantized layers that dequant_rows asks for: frigg_dequant_rows;
 * the stored quantized matrices are freed where every step reads the copy); on the CPU engine 0 (it computes
 * from the mapped file). */
double frigg_mem_weights(const char *engine, const frigg_model *m, int dequant_rows);
/* The bytes of bf16 weights of a model of config c (what frigg_model_random allocates). */
double frigg_mem_bf16_weights(const frigg_config *c);
/* A plan's KV cache and work buffers, in bytes. */
double frigg_mem_kv(const frigg_mem_plan *p);
double frigg_mem_work(const frigg_mem_plan *p);
/* Bytes available to an engine: MemAvailable for "cpu", the device's free memory for "cuda"; -1 when it cannot
 * be read. */
double frigg_mem_available(const char *engine, int device);
/* 0 when the n plans fit (those of one memory, the host or one device, summed); else -1 with frigg_error():
 * "<what> needs N GiB (KV cache ..., work ..., weights ...) and <the host|device d> has M GiB available
 * (MemAvailable|free): lower <lower>". */
int frigg_mem_check(const frigg_mem_plan *plans, int n, const char *lower);

#endif
