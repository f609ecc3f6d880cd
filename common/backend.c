/* backend.c — choose and create an engine by name. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

frigg_backend *frigg_backend_create(const char *name, const frigg_model *m, const frigg_backend_opts *opts) {
    if (!name || !strcmp(name, "auto")) {
#ifdef FRIGG_CUDA
        name = frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
        name = "cpu";
#endif
    }
    if (!strcmp(name, "cpu")) return frigg_backend_cpu_create(m, opts);
    if (!strcmp(name, "cuda")) {
#ifdef FRIGG_CUDA
        return frigg_backend_cuda_create(m, opts);
#else
        frigg_set_error("backend \"cuda\" is not in this build (built with FRIGG_CUDA=0 or without nvcc)");
        return NULL;
#endif
    }
    frigg_set_error("unknown backend \"%s\" (expected cpu or cuda)", name);
    return NULL;
}

void frigg_backend_destroy(frigg_backend *b) {
    if (b) b->destroy(b);
}

frigg_backend *frigg_backend_alloc(const char *name, const frigg_model *m, const frigg_backend_opts *opts,
                                   frigg_backend_opts *o) {
    *o = opts ? *opts : (frigg_backend_opts){0};
    if (o->max_seqs < 1) o->max_seqs = 1;
    if (o->max_ctx <= 0 || o->max_ctx > m->cfg.max_position_embeddings) o->max_ctx = m->cfg.max_position_embeddings;
    frigg_backend *b = frigg_xcalloc(1, sizeof *b);
    b->name = name;
    b->model = m;
    b->max_seqs = o->max_seqs;
    b->max_ctx = o->max_ctx;
    b->seq_len = frigg_xcalloc(o->max_seqs, sizeof(int));
    return b;
}
