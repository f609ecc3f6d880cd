/* memcheck.c — see memcheck.h. */
#include "memcheck.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"

#ifdef FRIGG_CUDA
#include "engine/cuda_backend.h"
#endif

#define GIB 1073741824.0
/* Work buffers' slack beside what is counted (the allocator's rounding, small tables), as frigg-serve's budget. */
#define WORK_SLACK (64.0 * 1048576)

const char *frigg_mem_engine(const char *engine) {
    if (engine && strcmp(engine, "auto")) return engine;
#ifdef FRIGG_CUDA
    return frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
    return "cpu";
#endif
}

double frigg_mem_bf16_weights(const frigg_config *c) {
    double D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double per_layer = 4 * D * D + D * D + 2 * I * D + D * I; /* gqkv, o, gate_up, down */
    return 2.0 * (2 * V * D + 2.0 * c->layers_per_stack * per_layer + D);
}

double frigg_mem_weights(const char *engine, const frigg_model *m, int dequant_rows) {
    if (strcmp(frigg_mem_engine(engine), "cuda")) return 0;
    double stored = frigg_mat_bytes(&m->embed) + frigg_mat_bytes(&m->lm_head), quant = 0, quant_bf16 = 0;
    const frigg_mat *lm = &m->lm_head;
    if (lm->dtype != FRIGG_DT_BF16) quant += frigg_mat_bytes(lm), quant_bf16 += 2.0 * lm->rows * lm->cols;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < m->cfg.layers_per_stack; i++) {
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(&m->stack[s][i], all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++) {
                stored += frigg_mat_bytes(all[j]);
                if (all[j]->dtype != FRIGG_DT_BF16)
                    quant += frigg_mat_bytes(all[j]), quant_bf16 += 2.0 * all[j]->rows * all[j]->cols;
            }
        }
    const int rows = frigg_dequant_rows(m, dequant_rows);
    if (rows > 0) stored += quant_bf16;  /* the bf16 copy */
    if (rows == 1) stored -= quant;      /* every step reads the copy: the stored quantized matrices are freed */
    return stored;
}

static int plan_ctx(const frigg_mem_plan *p) { return p->ctx > 0 ? p->ctx : p->cfg->max_position_embeddings; }

double frigg_mem_kv(const frigg_mem_plan *p) {
    if (!p->cfg || p->seqs < 1) return 0;
    return (double)p->seqs * frigg_kv_seq_bytes(p->cfg, frigg_mem_engine(p->engine), p->kv_dtype, plan_ctx(p));
}

double frigg_mem_work(const frigg_mem_plan *p) {
    if (!p->cfg || p->seqs < 1) return 0;
    const frigg_config *c = p->cfg;
    const int ctx = plan_ctx(p);
#ifdef FRIGG_CUDA
    if (!strcmp(frigg_mem_engine(p->engine), "cuda")) return (double)frigg_cuda_work_bytes(c, ctx, p->kv_dtype) + WORK_SLACK;
#endif
    double D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    return (double)ctx * (10 * D + 3 * I) * 4 + 64.0 * V * 6 + WORK_SLACK;
}

double frigg_mem_available(const char *engine, int device) {
    engine = frigg_mem_engine(engine);
    if (!strcmp(engine, "cuda")) {
#ifdef FRIGG_CUDA
        size_t fr = 0, tot = 0;
        return frigg_cuda_mem_info(device, &fr, &tot) ? -1 : (double)fr;
#else
        (void)device;
        return -1;
#endif
    }
    if (strcmp(engine, "cpu")) return -1;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Plan p's share of the message: "the model: KV cache 1.50 GiB (8 sequences x 4096 tokens, bf16), work ..." */
static void describe(const frigg_mem_plan *p, char *out, size_t n) {
    size_t at = 0;
    at += (size_t)snprintf(out + at, n - at, "%s%s", p->what ? p->what : "", p->what ? ": " : "");
    const char *sep = "";
    if (p->cfg && p->seqs > 0 && at < n) {
        at += (size_t)snprintf(out + at, n - at, "KV cache %.2f GiB (%d sequence%s x %d tokens, %s), work %.2f GiB",
                               frigg_mem_kv(p) / GIB, p->seqs, p->seqs == 1 ? "" : "s", plan_ctx(p),
                               frigg_dtype_name(p->kv_dtype ? p->kv_dtype : FRIGG_DT_BF16), frigg_mem_work(p) / GIB);
        sep = ", ";
    }
    if (p->weights > 0 && at < n)
        at += (size_t)snprintf(out + at, n - at, "%sweights %.2f GiB", sep, p->weights / GIB), sep = ", ";
    if (p->extra > 0 && at < n)
        snprintf(out + at, n - at, "%s%s %.2f GiB", sep, p->extra_what ? p->extra_what : "buffers", p->extra / GIB);
}

int frigg_mem_check(const frigg_mem_plan *plans, int n, const char *lower) {
    for (int i = 0; i < n; i++) {
        const char *e = frigg_mem_engine(plans[i].engine);
        const int cuda = !strcmp(e, "cuda"), dev = cuda ? plans[i].device : 0;
        int first = 1; /* the first plan of its memory: the others were summed with it */
        for (int j = 0; j < i && first; j++)
            if (!strcmp(frigg_mem_engine(plans[j].engine), e) && (!cuda || plans[j].device == dev)) first = 0;
        if (!first) continue;
        double need = 0;
        int members = 0;
        for (int j = i; j < n; j++) {
            const frigg_mem_plan *p = &plans[j];
            if (strcmp(frigg_mem_engine(p->engine), e) || (cuda && p->device != dev)) continue;
            need += frigg_mem_kv(p) + frigg_mem_work(p) + p->weights + p->extra;
            members++;
        }
        const double avail = frigg_mem_available(e, dev);
        if (avail < 0 || need <= avail) continue;
        char parts[1200] = "", one[400];
        for (int j = i; j < n; j++) {
            const frigg_mem_plan *p = &plans[j];
            if (strcmp(frigg_mem_engine(p->engine), e) || (cuda && p->device != dev)) continue;
            describe(p, one, sizeof one);
            size_t at = strlen(parts);
            snprintf(parts + at, sizeof parts - at, "%s%s", at ? "; " : "", one);
        }
        char where[64];
        if (cuda) snprintf(where, sizeof where, "device %d has %.2f GiB free", dev, avail / GIB);
        else snprintf(where, sizeof where, "the host has %.2f GiB available (MemAvailable)", avail / GIB);
        frigg_set_error("%s needs %.2f GiB on the %s engine (%s) and %s: lower %s", members > 1 ? "this run" : "the engine",
                        need / GIB, e, parts, where, lower ? lower : "the sequences or the context");
        return -1;
    }
    return 0;
}
