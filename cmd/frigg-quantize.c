/* frigg-quantize — write an int8 or int4 build of an HRM-Text checkpoint in the compressed-tensors
 * "pack-quantized" format (common/model/ctensors.h: what is written; common/model/quant.h: how q and the scales are
 * chosen). The source is read through the loader (frigg_model_load: packed, split or sharded, bf16/f16/f32)
 * and streamed a block of rows at a time; OUT is built in a sibling folder and renamed into place, never
 * over an existing OUT. See man/frigg-quantize.1. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/cli.h"
#include "run/memcheck.h"
#include "run/progress.h"
#include "model/ctensors.h"
#include "eval/kl.h"
#include "model/model.h"
#include "model/quant.h"
#include "base/threadpool.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

#define PROG "frigg-quantize"
#define CHUNK_BYTES (8u << 20) /* packed output bytes per block of rows */

static void usage(FILE *f) {
    fprintf(f,
            "usage: " PROG " SRC OUT --method int8|int4 [--group N] [--int4-rtn] [--keep-embedding] [--threads N]\n"
            "                      [--check [--check-text FILE] [--check-limit N] [--check-backend cpu|cuda] [--progress]]\n"
            "  SRC: an HRM-Text checkpoint folder (config.json + safetensors: packed, split or sharded; bf16/f16/f32),\n"
            "       or an hrm_text GGUF file (tokenizer.json beside it is copied)\n"
            "  OUT: a new folder (never overwritten): compressed-tensors pack-quantized safetensors, config.json with\n"
            "       quantization_config, the tokenizer files, SRC's license file (if any), NOTICE, README.md\n"
            "  --method int8   every linear, lm_head and the embedding: int8, one scale per output row\n"
            "  --method int4   decoder-layer linears int4 in groups of N inputs (--group, default 128; the scale\n"
            "                  of each group by a clipping search, or round-to-nearest with --int4-rtn);\n"
            "                  lm_head and the embedding int8 per row\n"
            "  --keep-embedding  copy the embedding unchanged (transformers 5.17 cannot load a quantized one)\n"
            "  -t, --threads N quantize with N threads (default: every CPU)\n"
            "  --check         then score the build against SRC, teacher-forced on a held-out text (frigg-eval kl's\n"
            "                  code): mean and p99 KL(SRC || build) per token, top-1 agreement, both NLLs, written to\n"
            "                  OUT/quality.json and OUT/README.md; the text: --check-text (default: heldout.txt of the\n"
            "                  bundled default model), at most --check-limit sequences (default all), on\n"
            "                  --check-backend (default: cuda when a GPU is present, else cpu); its progress line on\n"
            "                  stderr kept current on a terminal or with --progress, else one every 30 s\n"
            "  -h, --help, --version\n");
}

/* ---- small I/O helpers ---- */

static int write_all(int fd, const void *buf, size_t n, off_t off) {
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            frigg_set_error("write failed: %s", w < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        p += w, n -= (size_t)w, off += w;
    }
    return 0;
}

static int write_text(const char *dir, const char *name, const char *text) {
    char *p = frigg_path_join(dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644), rc = -1;
    if (fd < 0)
        frigg_set_error("%s: %s", p, strerror(errno));
    else {
        rc = write_all(fd, text, strlen(text), 0);
        if (close(fd) && !rc) rc = -1, frigg_set_error("%s: close: %s", p, strerror(errno));
    }
    free(p);
    return rc;
}

/* Copy SRC/name to OUT/name when it exists: 1 copied, 0 absent, -1 error. */
static int copy_if_present(const char *src, const char *out, const char *name) {
    char *sp = frigg_model_side_path(src, name), *dp = frigg_path_join(out, name);
    int rc = 0, in = -1, fd = -1;
    if (!frigg_file_exists(sp)) goto done;
    rc = -1;
    in = open(sp, O_RDONLY);
    fd = open(dp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (in < 0 || fd < 0) {
        frigg_set_error("copying %s: %s", name, strerror(errno));
        goto done;
    }
    char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            frigg_set_error("%s: read: %s", sp, strerror(errno));
            goto done;
        }
        if (n == 0) break;
        if (write_all(fd, buf, (size_t)n, off)) goto done;
        off += n;
    }
    rc = 1;
done:
    if (in >= 0) close(in);
    if (fd >= 0 && close(fd) && rc == 1) rc = -1, frigg_set_error("%s: close: %s", dp, strerror(errno));
    free(sp);
    free(dp);
    return rc;
}

static void remove_tree(const char *dir) { /* our own partial build: plain files, then the folder */
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char *p = frigg_path_join(dir, e->d_name);
                unlink(p);
                free(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* sha256 of every source safetensors file, streamed with read() (libsodium's crypto_hash_sha256 API), as
 * "name=hex name=hex" in the set's order. */
static char *hash_sources(const frigg_st_set *st) {
    size_t cap = 256, len = 0;
    char *s = frigg_xmalloc(cap);
    s[0] = 0;
    unsigned char *buf = frigg_xmalloc(1 << 20);
    for (int i = 0; i < st->nfiles; i++) {
        int fd = open(st->files[i].path, O_RDONLY);
        if (fd < 0) {
            frigg_set_error("%s: %s", st->files[i].path, strerror(errno));
            goto fail;
        }
        crypto_hash_sha256_state h;
        crypto_hash_sha256_init(&h);
        for (;;) {
            ssize_t n = read(fd, buf, 1 << 20);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                frigg_set_error("%s: read: %s", st->files[i].path, strerror(errno));
                close(fd);
                goto fail;
            }
            if (n == 0) break;
            crypto_hash_sha256_update(&h, buf, (unsigned long long)n);
        }
        close(fd);
        unsigned char dg[crypto_hash_sha256_BYTES];
        crypto_hash_sha256_final(&h, dg);
        const char *bn = base_name(st->files[i].path);
        size_t need = len + strlen(bn) + 2 * sizeof dg + 3;
        if (need > cap) s = frigg_xrealloc(s, cap = 2 * need);
        len += (size_t)sprintf(s + len, "%s%s=", i ? " " : "", bn);
        for (size_t k = 0; k < sizeof dg; k++) len += (size_t)sprintf(s + len, "%02x", dg[k]);
    }
    free(buf);
    return s;
fail:
    free(buf);
    free(s);
    return NULL;
}

/* ---- the build plan: modules, output tensors, offsets ---- */

typedef struct {
    char name[200];
    const char *dtype; /* safetensors dtype */
    int esize, ndim;
    int64_t shape[2];
    size_t nbytes, offset;
} out_tensor;

typedef struct {
    char name[160];   /* the HF module name */
    frigg_mat mat;
    int bits, group;  /* group 0: per output channel */
    int t_packed, t_scale, t_shape;
} qmodule;

typedef struct {
    const frigg_tensor *src; /* copied unchanged: model.z_L_init, and the embedding with --keep-embedding */
    int t;
} copied;

typedef struct {
    out_tensor *t;
    int nt;
    qmodule *mods;
    int nmods;
    copied copies[2];
    int ncopies;
} plan;

static int add_tensor(plan *p, const char *name, const char *dtype, int esize, int ndim, int64_t d0, int64_t d1) {
    p->t = frigg_xrealloc(p->t, (p->nt + 1) * sizeof *p->t);
    out_tensor *t = &p->t[p->nt];
    *t = (out_tensor){.dtype = dtype, .esize = esize, .ndim = ndim, .shape = {d0, d1}};
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nbytes = (size_t)esize * (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    return p->nt++;
}

static void add_copy(plan *p, const frigg_tensor *src) {
    copied *c = &p->copies[p->ncopies++];
    c->src = src;
    c->t = add_tensor(p, src->name, frigg_st_dtype_name(src->dtype), (int)frigg_st_dtype_size(src->dtype), src->ndim,
                      src->shape[0], src->ndim == 2 ? src->shape[1] : 0);
}

static void add_module(plan *p, const char *name, const frigg_mat *m, int bits, int group) {
    p->mods = frigg_xrealloc(p->mods, (p->nmods + 1) * sizeof *p->mods);
    qmodule *q = &p->mods[p->nmods++];
    *q = (qmodule){.mat = *m, .bits = bits, .group = group};
    snprintf(q->name, sizeof q->name, "%s", name);
    char tn[220];
    snprintf(tn, sizeof tn, "%s.weight_packed", name);
    q->t_packed = add_tensor(p, tn, "I32", 4, 2, m->rows, frigg_ct_packed_words(m->cols, bits));
    snprintf(tn, sizeof tn, "%s.weight_scale", name);
    q->t_scale = add_tensor(p, tn, "BF16", 2, 2, m->rows, group ? m->cols / group : 1);
    snprintf(tn, sizeof tn, "%s.weight_shape", name);
    q->t_shape = add_tensor(p, tn, "I64", 8, 1, 2, 0);
}

static int cmp_order(const void *a, const void *b) { /* element size descending, then name */
    const out_tensor *x = *(const out_tensor *const *)a, *y = *(const out_tensor *const *)b;
    if (x->esize != y->esize) return y->esize - x->esize;
    return strcmp(x->name, y->name);
}

/* The safetensors header (JSON, padded with spaces so the data starts 8-aligned) with every tensor's
 * offsets assigned; returns its text and length, *data_bytes the data section's size. */
static char *build_header(plan *p, json_t *meta, size_t *hlen, size_t *data_bytes) {
    out_tensor **ord = frigg_xmalloc(p->nt * sizeof *ord);
    for (int i = 0; i < p->nt; i++) ord[i] = &p->t[i];
    qsort(ord, p->nt, sizeof *ord, cmp_order);
    json_t *h = json_object();
    json_object_set(h, "__metadata__", meta);
    size_t off = 0;
    for (int i = 0; i < p->nt; i++) {
        out_tensor *t = ord[i];
        t->offset = off;
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_object_set_new(h, t->name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", t->dtype, "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + t->nbytes)));
        off += t->nbytes;
    }
    free(ord);
    char *js = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t n = strlen(js), padded = (n + 7) / 8 * 8;
    js = frigg_xrealloc(js, padded + 1);
    memset(js + n, ' ', padded - n);
    js[padded] = 0;
    *hlen = padded;
    *data_bytes = off;
    return js;
}

/* ---- quantizing one module, a block of rows at a time ---- */

typedef struct {
    const qmodule *q;
    int search, row0;
    uint8_t *packed;   /* rows of the block, packed */
    uint16_t *scales;  /* rows of the block, ngroups each */
    float **wbuf;      /* per thread: one row as floats */
    int8_t **qbuf;     /* per thread: one row of q */
    char **err;        /* per thread: the first error */
} block_ctx;

static void quant_rows(void *vctx, int begin, int end, int thread) {
    block_ctx *c = vctx;
    const qmodule *q = c->q;
    int cols = q->mat.cols, ng = q->group ? cols / q->group : 1;
    size_t rb = frigg_ct_packed_row_bytes(cols, q->bits);
    for (int r = begin; r < end && !c->err[thread]; r++) {
        int rc = frigg_mat_row(&q->mat, c->row0 + r, c->wbuf[thread]);
        if (!rc)
            rc = q->bits == 8 ? frigg_q8_row(c->wbuf[thread], cols, c->qbuf[thread], &c->scales[(size_t)r])
                              : frigg_q4_row(c->wbuf[thread], cols, q->group, c->search, c->qbuf[thread],
                                             &c->scales[(size_t)r * ng], NULL);
        if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s row %d: %s", q->name, c->row0 + r, frigg_error());
            c->err[thread] = frigg_xstrdup(msg);
            return;
        }
        frigg_ct_pack_row(c->qbuf[thread], cols, q->bits, c->packed + (size_t)r * rb);
    }
}

/* Drop the pages of [p, p + n) from this process when they lie in one of the source files' mappings (the
 * data stays in the page cache; a later read faults it back in). Never applied to the loader's own buffers. */
static void drop_source_pages(const frigg_model *m, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < m->st.nfiles; i++) {
        uintptr_t b = (uintptr_t)m->st.files[i].map;
        if (!b || a < b || a + n > b + m->st.files[i].size) continue;
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = a & ~(pg - 1), hi = (a + n + pg - 1) & ~(pg - 1);
        if (lo < (b & ~(pg - 1))) lo = b & ~(pg - 1);
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

static int quantize_module(const frigg_model *m, const qmodule *q, const plan *p, int fd, size_t data0, int search,
                           frigg_pool *pool) {
    int rows = q->mat.rows, cols = q->mat.cols, ng = q->group ? cols / q->group : 1;
    size_t rb = frigg_ct_packed_row_bytes(cols, q->bits);
    int block = (int)(CHUNK_BYTES / rb);
    if (block < 1) block = 1;
    if (block > rows) block = rows;
    int nth = frigg_pool_size(pool);
    block_ctx c = {.q = q, .search = search};
    c.packed = frigg_xmalloc((size_t)block * rb);
    c.scales = frigg_xmalloc((size_t)block * ng * 2);
    c.wbuf = frigg_xcalloc(nth, sizeof *c.wbuf);
    c.qbuf = frigg_xcalloc(nth, sizeof *c.qbuf);
    c.err = frigg_xcalloc(nth, sizeof *c.err);
    for (int t = 0; t < nth; t++) {
        c.wbuf[t] = frigg_xmalloc((size_t)cols * sizeof(float));
        c.qbuf[t] = frigg_xmalloc((size_t)cols);
    }
    int rc = 0;
    const out_tensor *tp = &p->t[q->t_packed], *ts = &p->t[q->t_scale], *tsh = &p->t[q->t_shape];
    for (int r0 = 0; r0 < rows && !rc; r0 += block) {
        int n = rows - r0 < block ? rows - r0 : block;
        c.row0 = r0;
        frigg_pool_run(pool, n, quant_rows, &c);
        for (int t = 0; t < nth; t++)
            if (c.err[t] && !rc) {
                frigg_set_error("%s", c.err[t]);
                rc = -1;
            }
        if (!rc) rc = write_all(fd, c.packed, (size_t)n * rb, (off_t)(data0 + tp->offset + (size_t)r0 * rb));
        if (!rc) rc = write_all(fd, c.scales, (size_t)n * ng * 2, (off_t)(data0 + ts->offset + (size_t)r0 * ng * 2));
        const uint16_t *src = frigg_mat_bf16(&q->mat);
        if (src) drop_source_pages(m, src + (size_t)r0 * cols, (size_t)n * cols * 2);
    }
    if (!rc) {
        int64_t shape[2] = {rows, cols}; /* I64 little-endian */
        unsigned char b[16];
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 8; k++) b[8 * d + k] = (unsigned char)((uint64_t)shape[d] >> (8 * k));
        rc = write_all(fd, b, 16, (off_t)(data0 + tsh->offset));
    }
    for (int t = 0; t < nth; t++) {
        free(c.wbuf[t]);
        free(c.qbuf[t]);
        free(c.err[t]);
    }
    free(c.wbuf);
    free(c.qbuf);
    free(c.err);
    free(c.packed);
    free(c.scales);
    return rc;
}

/* A tensor copied byte for byte, in blocks, dropping its source pages as it goes. */
static int copy_tensor(const frigg_model *m, const copied *c, const plan *p, int fd, size_t data0) {
    const char *d = c->src->data;
    for (size_t off = 0; off < c->src->nbytes; off += CHUNK_BYTES) {
        size_t n = c->src->nbytes - off < CHUNK_BYTES ? c->src->nbytes - off : CHUNK_BYTES;
        if (write_all(fd, d + off, n, (off_t)(data0 + p->t[c->t].offset + off))) return -1;
        drop_source_pages(m, d + off, n);
    }
    return 0;
}

/* ---- config.json, README, NOTICE ---- */

static json_t *scheme(json_t *targets, int bits, int group) {
    json_t *w = json_pack("{s:i,s:s,s:b,s:o,s:s,s:b}", "num_bits", bits, "type", "int", "symmetric", 1, "group_size",
                          group ? json_integer(group) : json_null(), "strategy", group ? "group" : "channel", "dynamic", 0);
    return json_pack("{s:o,s:o,s:n,s:n,s:s}", "targets", targets, "weights", w, "input_activations",
                     "output_activations", "format", FRIGG_CT_FORMAT);
}

static json_t *quant_config(int int4, int group, int keep_embedding) {
    json_t *groups = json_object(), *vocab = json_pack("[s]", "lm_head");
    if (!keep_embedding) json_array_append_new(vocab, json_string("model.embed_tokens"));
    if (int4) {
        json_object_set_new(groups, "group_0", scheme(json_pack("[s]", FRIGG_CT_CORE_REGEX), 4, group));
        json_object_set_new(groups, "group_1", scheme(vocab, 8, 0));
    } else {
        json_t *t = json_pack("[s]", FRIGG_CT_CORE_REGEX);
        json_array_extend(t, vocab);
        json_decref(vocab);
        json_object_set_new(groups, "group_0", scheme(t, 8, 0));
    }
    return json_pack("{s:o,s:s,s:n,s:[],s:n,s:n,s:s,s:s,s:{},s:{},s:s}", "config_groups", groups, "format",
                     FRIGG_CT_FORMAT, "global_compression_ratio", "ignore", "kv_cache_scheme", "moe_sparsity_config",
                     "quant_method", FRIGG_CT_METHOD, "quantization_status", "compressed", "sparsity_config",
                     "transform_config", "version", FRIGG_CT_VERSION);
}

/* The source config.json text with "quantization_config" added as its last key: the source's own bytes
 * are kept (no re-serialisation of its numbers). */
static char *splice_config(const char *text, size_t len, const char *path, json_t *qc) {
    json_error_t je;
    json_t *src = json_loadb(text, len, 0, &je);
    if (!src || !json_is_object(src)) {
        frigg_set_error("%s: not a JSON object (%s)", path, src ? "another JSON value" : je.text);
        json_decref(src);
        return NULL;
    }
    int had = json_object_get(src, "quantization_config") != NULL, empty = json_object_size(src) == 0;
    json_decref(src);
    if (had) {
        frigg_set_error("%s already has a quantization_config: SRC is a quantized checkpoint", path);
        return NULL;
    }
    size_t end = len;
    while (end && (text[end - 1] == ' ' || text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == '\t')) end--;
    if (!end || text[end - 1] != '}') {
        frigg_set_error("%s: does not end in '}'", path);
        return NULL;
    }
    size_t body = end - 1;
    while (body && (text[body - 1] == ' ' || text[body - 1] == '\n' || text[body - 1] == '\r' || text[body - 1] == '\t'))
        body--;
    /* The source's indentation unit: the spaces before its first key (2 when it has none or is one line). */
    int ind = 2;
    const char *nl = memchr(text, '\n', end);
    if (nl) {
        int k = 0;
        while (nl + 1 + k < text + end && nl[1 + k] == ' ') k++;
        if (k >= 1 && k <= 8 && nl[1 + k] == '"') ind = k;
    }
    char *q = json_dumps(qc, JSON_INDENT(ind) | JSON_SORT_KEYS);
    size_t ql = strlen(q), extra = 0;
    for (size_t i = 0; i < ql; i++) extra += q[i] == '\n';
    char *out = frigg_xmalloc(body + ql + (size_t)ind * (extra + 1) + 64);
    memcpy(out, text, body);
    size_t o = body;
    o += (size_t)sprintf(out + o, "%s\n%*s\"quantization_config\": ", empty ? "" : ",", ind, "");
    for (size_t i = 0; i < ql; i++) {
        out[o++] = q[i];
        if (q[i] == '\n')
            for (int k = 0; k < ind; k++) out[o++] = ' ';
    }
    o += (size_t)sprintf(out + o, "\n}\n");
    out[o] = 0;
    free(q);
    return out;
}

/* What the source folder says of itself: a build describes its source in the source's own words, or says
 * nothing, rather than naming a model and a license it may not be (the bundled model is not DFM-Mimir, and its
 * folder states no license). */
typedef struct {
    char *title;        /* the first "# " heading of SRC/README.md (after a front matter), or NULL */
    char *license;      /* "license:" of README.md's front matter (a Hugging Face model card), or NULL */
    const char *license_file; /* the first of LICENSE_FILES in SRC (copied unchanged), or NULL */
    char *notice;       /* SRC/NOTICE's text (kept in the build's NOTICE), or NULL */
} src_info;

static const char *const LICENSE_FILES[] = {"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"};

/* A line of text [p, e) with the spaces around it and one pair of quotes cut: a new string. */
static char *trimmed(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    if (e - p >= 2 && (*p == '"' || *p == '\'') && e[-1] == *p) p++, e--;
    char *s = frigg_xmalloc((size_t)(e - p) + 1);
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = 0;
    return s;
}

static void src_info_read(const char *src, src_info *si) {
    *si = (src_info){0};
    char *rp = frigg_model_side_path(src, "README.md");
    size_t n = 0;
    char *text = frigg_file_exists(rp) ? frigg_read_file(rp, &n) : NULL;
    free(rp);
    if (text) {
        const char *p = text, *end = text + n;
        if (!strncmp(p, "---\n", 4) || !strncmp(p, "---\r\n", 5)) { /* YAML front matter: "license: X" */
            p = strchr(p, '\n') + 1;
            while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
                if (le - p >= 3 && !strncmp(p, "---", 3)) {
                    p = nl ? nl + 1 : end;
                    break;
                }
                if (!si->license && le - p > 8 && !strncmp(p, "license:", 8)) si->license = trimmed(p + 8, le);
                p = nl ? nl + 1 : end;
            }
        }
        while (p < end && !si->title) {
            const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
            if (le - p > 2 && p[0] == '#' && p[1] == ' ') si->title = trimmed(p + 2, le);
            p = nl ? nl + 1 : end;
        }
        if (si->license && !*si->license) free(si->license), si->license = NULL;
        free(text);
    }
    for (size_t i = 0; i < sizeof LICENSE_FILES / sizeof *LICENSE_FILES && !si->license_file; i++) {
        char *lp = frigg_model_side_path(src, LICENSE_FILES[i]);
        if (frigg_file_exists(lp)) si->license_file = LICENSE_FILES[i];
        free(lp);
    }
    char *np = frigg_model_side_path(src, "NOTICE");
    if (frigg_file_exists(np)) si->notice = frigg_read_file(np, NULL);
    free(np);
}

static void src_info_free(src_info *si) {
    free(si->title);
    free(si->license);
    free(si->notice);
}

typedef struct {
    const char *method;
    int int4, group, search, keep_embedding;
    const char *src_name;      /* SRC's last path component (a local path says nothing to a reader) */
    const src_info *si;
    const char *src_hash;
    const char *layout;
    uint64_t n_params;
    size_t out_bytes, src_bytes;
    int nmods, n4, n8;
} build_info;

static char *scheme_text(const build_info *b) {
    char *s = frigg_xmalloc(512);
    const char *vocab = b->keep_embedding ? "lm_head" : "lm_head and the embedding";
    if (b->int4)
        snprintf(s, 512,
                 "int4 group-wise (groups of %d inputs, one bf16 scale per group chosen by %s) for the %d decoder-layer "
                 "linears; int8 with one bf16 scale per output row for %s%s",
                 b->group, b->search ? "a clipping search minimising the group's squared error" : "round-to-nearest",
                 b->n4, vocab, b->keep_embedding ? "; the embedding unchanged" : "");
    else
        snprintf(s, 512, "int8 with one bf16 scale per output row for all %d modules (the decoder-layer linears and %s)%s",
                 b->nmods, vocab, b->keep_embedding ? "; the embedding unchanged" : "");
    return s;
}

/* The source's license, as its folder states it, in one sentence of the build's NOTICE and README. */
static void license_sentence(const build_info *b, char *out, size_t n) {
    const src_info *si = b->si;
    if (si->license && si->license_file)
        snprintf(out, n, "The source's README.md gives its license as \"%s\"; its %s is copied unchanged.", si->license,
                 si->license_file);
    else if (si->license)
        snprintf(out, n, "The source's README.md gives its license as \"%s\" (the source folder has no license file).",
                 si->license);
    else if (si->license_file)
        snprintf(out, n, "The source's %s is copied unchanged.", si->license_file);
    else
        snprintf(out, n, "The source folder states no license (no LICENSE file, no license in a README.md front "
                         "matter): this build states none either.");
}

static char *notice_text(const build_info *b) {
    char *sch = scheme_text(b), lic[600], named[600] = "";
    license_sentence(b, lic, sizeof lic);
    if (b->si->title) snprintf(named, sizeof named, ", which its README.md calls \"%s\"", b->si->title);
    size_t cap = 4096 + (b->si->notice ? strlen(b->si->notice) : 0);
    char *s = frigg_xmalloc(cap);
    int at = snprintf(s, cap,
                      "A quantized build of the HRM-Text checkpoint \"%s\"%s.\n"
                      "\n"
                      "%s\n"
                      "\n"
                      "The weights were modified: frigg-quantize (frigg %s) quantized them: %s.\n"
                      "Every quantized weight is an approximation of the original value; model.z_L_init is unchanged.\n"
                      "The tokenizer and chat-template files are copied unchanged.\n"
                      "\n"
                      "Source checkpoint (sha256 of its safetensors files): %s\n",
                      b->src_name, named, lic, FRIGG_VERSION, sch, b->src_hash);
    if (b->si->notice && at > 0 && (size_t)at < cap)
        snprintf(s + at, cap - (size_t)at, "\nThe source's NOTICE, unchanged:\n\n%s", b->si->notice);
    free(sch);
    return s;
}

static char *readme_text(const build_info *b) {
    char *sch = scheme_text(b), *s = frigg_xmalloc(8192), opts[64] = "", lic[600];
    license_sentence(b, lic, sizeof lic);
    if (b->int4) snprintf(opts, sizeof opts, " --group %d%s", b->group, b->search ? "" : " --int4-rtn");
    if (b->keep_embedding) strcat(opts, " --keep-embedding");
    /* a model card's front matter carries the source's license identifier on (a Hugging Face hub reads it
     * there), when it is a plain one such as apache-2.0 */
    char front[160] = "";
    const char *l = b->si->license;
    if (l && strlen(l) < 64 && strspn(l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-_") == strlen(l))
        snprintf(front, sizeof front, "---\nlicense: %s\n---\n\n", l);
    snprintf(s, 8192,
             "%s# %s, quantized: %s weights, compressed-tensors\n"
             "\n"
             "Made by `frigg-quantize --method %s%s` (frigg %s) from a %s HRM-Text checkpoint of %llu parameters "
             "(%zu bytes of safetensors; this build: %zu bytes).\n"
             "\n"
             "Weights: %s. `model.z_L_init` is copied unchanged.\n"
             "\n"
             "Format: [compressed-tensors](https://github.com/vllm-project/compressed-tensors) `pack-quantized` "
             "(version %s), weight-only, symmetric: every quantized module `M` has `M.weight_packed` (int32 words, "
             "q + 2^(bits-1) packed little-end first), `M.weight_scale` (bf16, `[rows, 1]` per row or "
             "`[rows, cols/group]` per group) and `M.weight_shape`; `config.json` carries the `quantization_config`. "
             "Module names are those of Hugging Face transformers' `hrm_text` (`self_attn.{gate,q,k,v,o}_proj`, "
             "`mlp.{gate,up,down}_proj`), so a checkpoint that packed gate/q/k/v and gate/up is written split. "
             "The dequantized weight of row r, column c is `q[r][c] * weight_scale[r][c / group]`.\n"
             "\n"
             "Load with Hugging Face transformers and the `compressed-tensors` package (which decompresses the "
             "weights on the first forward pass):\n"
             "\n"
             "```python\n"
             "from transformers import AutoModelForCausalLM\n"
             "model = AutoModelForCausalLM.from_pretrained(\"PATH\")\n"
             "```\n"
             "\n"
             "%s"
             "Source checkpoint (sha256): %s\n"
             "\n"
             "License: %s NOTICE says what was modified.\n",
             front, b->si->title ? b->si->title : b->src_name, b->int4 ? "int4/int8" : "int8", b->method, opts, FRIGG_VERSION, b->layout, (unsigned long long)b->n_params,
             b->src_bytes, b->out_bytes, sch, FRIGG_CT_VERSION,
             b->keep_embedding
                 ? ""
                 : "Note: transformers 5.17.0 cannot load this build as it is: its `PreTrainedModel._init_weights` reads "
                   "`module.weight` of every `nn.Embedding`, which a compressed embedding (weight_packed, weight_scale, "
                   "weight_shape) does not have (AttributeError). A build made with `--keep-embedding` (the embedding "
                   "copied unchanged) loads.\n\n",
             b->src_hash, lic);
    free(sch);
    return s;
}

/* ---- --check: the build against SRC on a held-out text (common/eval/kl.h, frigg-eval kl's code) ---- */

#define CHECK_PARALLEL 4 /* sequences scored at once, as frigg-eval kl's default */
#define CHECK_CTX 512    /* tokens per sequence at most, as frigg-eval kl's default --ctx */

typedef struct {
    const char *text;    /* NULL: frigg_heldout_text_path() */
    const char *backend; /* NULL: auto */
    int limit, threads;
    int progress; /* --progress: the scoring's progress line kept current whatever stderr is */
} check_opts;

typedef struct {
    char *first_error;
    frigg_progress *pr;
} check_ctx;

static void check_on_seq(void *vctx, int k, const frigg_kl_seq *r) {
    check_ctx *c = vctx;
    if (r->error && !c->first_error) {
        char msg[600];
        snprintf(msg, sizeof msg, "sequence %d: %s", k, r->error);
        c->first_error = frigg_xstrdup(msg);
    }
    frigg_progress_add(c->pr, 1);
}

/* The build in dir scored against the source model m, loaded from src: a new quality object, or NULL with
 * frigg_error(). */
static json_t *run_check(const frigg_model *m, const char *src, const char *dir, const check_opts *co) {
    json_t *q = NULL;
    char *tp = frigg_model_side_path(src, "tokenizer.json"), *text_path = co->text ? frigg_xstrdup(co->text) : frigg_heldout_text_path();
    char *text = NULL;
    frigg_tokenizer *tok = NULL;
    frigg_eval_seq *seqs = NULL;
    int nseqs = 0;
    frigg_model *bm = NULL;
    frigg_backend *rb = NULL, *bb = NULL;
    check_ctx cc = {0};
    size_t tlen = 0;
    if (!frigg_file_exists(tp)) {
        frigg_set_error("--check: %s has no tokenizer.json to encode the held-out text with", src);
        goto out;
    }
    if (!(tok = frigg_tokenizer_load(tp, 0))) goto out;
    if (!(text = frigg_read_file(text_path, &tlen))) {
        char msg[600];
        snprintf(msg, sizeof msg, "--check: %s (give --check-text FILE)", frigg_error());
        frigg_set_error("%s", msg);
        goto out;
    }
    unsigned char dg[crypto_hash_sha256_BYTES];
    char hex[2 * sizeof dg + 1];
    crypto_hash_sha256(dg, (const unsigned char *)text, tlen);
    for (size_t i = 0; i < sizeof dg; i++) sprintf(hex + 2 * i, "%02x", dg[i]);
    int ctx = m->cfg.max_position_embeddings < CHECK_CTX ? m->cfg.max_position_embeddings : CHECK_CTX;
    if (frigg_eval_text_seqs(tok, text, tlen, m->cfg.bos_token_id, ctx, co->limit, &seqs, &nseqs)) {
        char msg[600];
        snprintf(msg, sizeof msg, "--check: %s: %s", text_path, frigg_error());
        frigg_set_error("%s", msg);
        goto out;
    }
    int longest = 0;
    for (int i = 0; i < nseqs; i++) longest = seqs[i].n > longest ? seqs[i].n : longest;
    frigg_backend_opts bo = {.threads = co->threads, .max_seqs = CHECK_PARALLEL, .max_ctx = longest};
    if (!(bm = frigg_model_load(dir))) {
        char msg[600];
        snprintf(msg, sizeof msg, "--check: the build: %s", frigg_error());
        frigg_set_error("%s", msg);
        goto out;
    }
    /* both engines' memory before either is made (run/memcheck.h), with the logits frigg_kl_run holds: each
     * scheduler's for its step and the source's kept until the build's step */
    const double logits = (double)CHECK_PARALLEL * longest * m->cfg.vocab_size * sizeof(float);
    frigg_mem_plan mp[2] = {{.what = "the source", .cfg = &m->cfg, .engine = co->backend, .seqs = CHECK_PARALLEL,
                             .ctx = longest, .weights = frigg_mem_weights(co->backend, m, 0), .extra = 2 * logits,
                             .extra_what = "score logits"},
                            {.what = "the build", .cfg = &bm->cfg, .engine = co->backend, .seqs = CHECK_PARALLEL,
                             .ctx = longest, .weights = frigg_mem_weights(co->backend, bm, 0), .extra = logits,
                             .extra_what = "score logits"}};
    if (frigg_mem_check(mp, 2, "--check-limit, or --check-backend (the other engine's memory)")) {
        char msg[1600];
        snprintf(msg, sizeof msg, "--check: %s", frigg_error());
        frigg_set_error("%s", msg);
        goto out;
    }
    if (!(rb = frigg_backend_create(co->backend, m, &bo))) goto out;
    if (!(bb = frigg_backend_create(co->backend, bm, &bo))) {
        char msg[600];
        snprintf(msg, sizeof msg, "--check: the build: %s", frigg_error());
        frigg_set_error("%s", msg);
        goto out;
    }
    fprintf(stderr, PROG ": --check: %d sequences of %s on the %s engine, the build against %s\n", nseqs, text_path,
            bb->name, src);
    double t0 = frigg_now_ms();
    frigg_kl_summary s;
    frigg_progress pr;
    frigg_progress_start(&pr, PROG, "--check", "sequences scored", nseqs, co->progress);
    cc.pr = &pr;
    int failed = frigg_kl_run(rb, bb, seqs, nseqs, CHECK_PARALLEL, check_on_seq, &cc, &s);
    frigg_progress_end(&pr);
    char cut[128];
    snprintf(cut, sizeof cut, "each non-blank line encoded, in pieces of at most %d tokens after <bos>", ctx - 1);
    if (failed < 0) goto out;
    if (failed > 0) {
        frigg_set_error("--check: %d of %d sequences failed (%s)", failed, nseqs, cc.first_error);
        goto out;
    }
    q = json_pack("{s:s,s:s,s:s,s:i,s:I,s:i,s:f,s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:s,s:s,s:f}",
                  "text", text_path, "text_sha256", hex, "text_cut", cut, "sequences", s.sequences, "target_tokens",
                  (json_int_t)s.tokens, "max_ctx", ctx, "kl_mean", s.kl_mean, "kl_p99", s.kl_p99, "kl_max", s.kl_max,
                  "top1_agreement", s.top1, "top1_agree", (json_int_t)s.top1_agree, "top1_ties",
                  (json_int_t)s.top1_ties, "top1_agreement_with_ties", s.top1_with_ties, "top1_gap_max", s.gap_max,
                  "top1_gap_mean", s.gap_mean, "nll_source", s.nll_ref, "nll_build", s.nll_model, "nll_delta",
                  s.nll_model - s.nll_ref, "ppl_source", exp(s.nll_ref), "ppl_build", exp(s.nll_model), "backend",
                  bb->name, "kl_direction", "KL(source || build), nats per target token", "frigg_version", FRIGG_VERSION,
                  "wall_s", (frigg_now_ms() - t0) / 1000);
    fprintf(stderr, PROG ": --check: %ld tokens: mean KL %.3g nats, p99 %.3g, top-1 agreement %.2f %%, NLL %.4f -> %.4f (%.1f s)\n",
            s.tokens, s.kl_mean, s.kl_p99, 100 * s.top1, s.nll_ref, s.nll_model, (frigg_now_ms() - t0) / 1000);
out:
    free(cc.first_error);
    frigg_backend_destroy(bb);
    frigg_backend_destroy(rb);
    frigg_model_free(bm);
    frigg_eval_seqs_free(seqs, nseqs);
    frigg_tokenizer_free(tok);
    free(text);
    free(text_path);
    free(tp);
    return q;
}

/* The README's section for the --check figures. */
static char *quality_text(const json_t *q) {
    char *s = frigg_xmalloc(4096);
    double top1 = json_real_value(json_object_get(q, "top1_agreement"));
    snprintf(s, 4096,
             "\n## Quality (frigg-quantize --check)\n"
             "\n"
             "This build against its source checkpoint, teacher-forced on `%s` (sha256 %s; %s: %lld sequences, "
             "%lld target tokens), both on frigg's %s engine (frigg %s). The same figures are in `quality.json`.\n"
             "\n"
             "| figure | value |\n"
             "| --- | --- |\n"
             "| mean KL(source \xe2\x80\x96 build) per token | %.6f nats |\n"
             "| p99 KL per token | %.6f nats |\n"
             "| max KL per token | %.6f nats |\n"
             "| top-1 agreement | %.2f %% (%lld of %lld) |\n"
             "| where the top-1 ids differ: the source's lead over the build's pick | mean %.4f, at most %.4f logits |\n"
             "| NLL, source | %.4f nats/token (perplexity %.2f) |\n"
             "| NLL, this build | %.4f nats/token (perplexity %.2f) |\n",
             json_string_value(json_object_get(q, "text")), json_string_value(json_object_get(q, "text_sha256")),
             json_string_value(json_object_get(q, "text_cut")), (long long)json_integer_value(json_object_get(q, "sequences")),
             (long long)json_integer_value(json_object_get(q, "target_tokens")),
             json_string_value(json_object_get(q, "backend")), FRIGG_VERSION,
             json_real_value(json_object_get(q, "kl_mean")), json_real_value(json_object_get(q, "kl_p99")),
             json_real_value(json_object_get(q, "kl_max")), 100 * top1,
             (long long)json_integer_value(json_object_get(q, "top1_agree")),
             (long long)json_integer_value(json_object_get(q, "target_tokens")),
             json_real_value(json_object_get(q, "top1_gap_mean")), json_real_value(json_object_get(q, "top1_gap_max")),
             json_real_value(json_object_get(q, "nll_source")), json_real_value(json_object_get(q, "ppl_source")),
             json_real_value(json_object_get(q, "nll_build")), json_real_value(json_object_get(q, "ppl_build")));
    return s;
}

/* ---- main ---- */

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"method", required_argument, 0, 'm'}, {"group", required_argument, 0, 'g'},
        {"int4-rtn", no_argument, 0, 'r'},     {"threads", required_argument, 0, 't'},
        {"check", no_argument, 0, 'c'},        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},      {"keep-embedding", no_argument, 0, 'k'},
        {"check-text", required_argument, 0, 'T'}, {"check-limit", required_argument, 0, 'L'},
        {"check-backend", required_argument, 0, 'B'}, {"progress", no_argument, 0, 'P'},
        {0, 0, 0, 0},
    };
    const char *method = NULL;
    int group = 128, group_set = 0, rtn = 0, threads = 0, check = 0, keep_embedding = 0;
    check_opts co = {0};
    const char *check_only = NULL; /* a --check-* option without --check */
    double v;
    int o;
    while ((o = getopt_long(argc, argv, "m:g:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': method = optarg; break;
        case 'g':
            if (frigg_cli_number(PROG, "--group", optarg, 1, 1 << 20, 1, &v)) return 2;
            group = (int)v, group_set = 1;
            break;
        case 'r': rtn = 1; break;
        case 't':
            if (frigg_cli_threads(PROG, optarg, &threads)) return 2;
            break;
        case 'c': check = 1; break;
        case 'k': keep_embedding = 1; break;
        case 'T': co.text = optarg, check_only = "--check-text"; break;
        case 'B': co.backend = optarg, check_only = "--check-backend"; break;
        case 'P': co.progress = 1, check_only = "--progress"; break;
        case 'L':
            if (frigg_cli_number(PROG, "--check-limit", optarg, 1, 1e9, 1, &v)) return 2;
            co.limit = (int)v, check_only = "--check-limit";
            break;
        case 'h': usage(stdout); return 0;
        case 'V': frigg_print_version(PROG); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (check_only && !check) {
        fprintf(stderr, PROG ": %s applies to --check only\n", check_only);
        return 2;
    }
    co.threads = threads;
    if (argc - optind != 2) {
        fprintf(stderr, PROG ": need SRC and OUT (got %d positional arguments)\n", argc - optind);
        usage(stderr);
        return 2;
    }
    if (!method || (strcmp(method, "int8") && strcmp(method, "int4"))) {
        fprintf(stderr, PROG ": --method int8 or --method int4 is required%s%s%s\n", method ? " (not \"" : "",
                method ? method : "", method ? "\")" : "");
        return 2;
    }
    int int4 = !strcmp(method, "int4");
    if (!int4 && (group_set || rtn)) {
        fprintf(stderr, PROG ": %s applies to --method int4 only (int8 has one scale per output row)\n",
                group_set ? "--group" : "--int4-rtn");
        return 2;
    }
    const char *src = argv[optind];
    char *out = frigg_xstrdup(argv[optind + 1]);
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) out[n - 1] = 0;
    struct stat sb;
    if (lstat(out, &sb) == 0) {
        fprintf(stderr, PROG ": %s exists: frigg-quantize never overwrites; remove it or name another OUT\n", out);
        free(out);
        return 1;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, PROG ": libsodium failed to initialise\n");
        free(out);
        return 1;
    }

    /* --check's inputs before any work (they used to be found missing only after the quantizing): the text
     * can be read, and SRC (where it exists: a missing SRC is the loader's to report) has a tokenizer.json */
    if (check) {
        char *tp = frigg_model_side_path(src, "tokenizer.json"),
             *text_path = co.text ? frigg_xstrdup(co.text) : frigg_heldout_text_path();
        FILE *tf = fopen(text_path, "r");
        int bad = 0;
        if (!tf) {
            fprintf(stderr, PROG ": --check: %s: %s (%s)\n", text_path, strerror(errno),
                    co.text ? "the --check-text file" : "the bundled held-out text; give --check-text FILE");
            bad = 1;
        } else {
            fclose(tf);
        }
        if (!bad && stat(src, &sb) == 0 && !frigg_file_exists(tp)) {
            fprintf(stderr, PROG ": --check: %s: no such file (SRC's tokenizer, which --check encodes the held-out "
                            "text with)\n", tp);
            bad = 1;
        }
        free(tp);
        free(text_path);
        if (bad) {
            free(out);
            return 1;
        }
    }

    double t0 = frigg_now_ms();
    frigg_model *m = frigg_model_load(src);
    if (!m) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        free(out);
        return 1;
    }
    const frigg_config *c = &m->cfg;
    int rc = 1, fd = -1;
    char *tmp = NULL, *cfg_text = NULL, *cfg_out = NULL, *hash = NULL, *header = NULL;
    json_t *qc = NULL, *meta = NULL;
    frigg_pool *pool = NULL;
    plan p = {0};
    src_info si;
    src_info_read(src, &si);

    /* a quantized SRC (a build of this program, or any compressed-tensors checkpoint) is said to be one first:
     * its tensors have other names (M.weight_packed), which would otherwise read as a missing tensor */
    if (m->quant.ngroups > 0 || !frigg_mat_bf16(&m->embed) || !frigg_mat_bf16(&m->lm_head)) {
        fprintf(stderr, PROG ": %s is already quantized (its config.json has a quantization_config, or its weights "
                        "are int8/int4): quantize its bf16 source instead\n", src);
        goto done;
    }

    /* The modules, by HF name (ctensors.h): embedding, the two stacks' layers, lm_head. */
    const frigg_tensor *emb = frigg_st_find(&m->st, "model.embed_tokens.weight"),
                       *zl = frigg_st_find(&m->st, "model.z_L_init");
    if (!emb || !zl) {
        fprintf(stderr, PROG ": %s: no %s tensor\n", src, emb ? "model.z_L_init" : "model.embed_tokens.weight");
        goto done;
    }
    if (keep_embedding)
        add_copy(&p, emb);
    else
        add_module(&p, "model.embed_tokens", &m->embed, 8, 0);
    int n4 = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < c->layers_per_stack; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *mats[FRIGG_LAYER_MATS];
            frigg_layer_mats(L, mats);
            for (int j = 0; j < 8; j++) {
                char name[160];
                snprintf(name, sizeof name, "model.%s.layers.%d.%s", s ? "H_module" : "L_module", i,
                         frigg_ct_layer_modules[j]);
                if (int4 && mats[j]->cols % group) {
                    fprintf(stderr, PROG ": --group %d does not divide the %d inputs of %s (choose a divisor of %d and %d)\n",
                            group, mats[j]->cols, name, c->hidden_size, c->intermediate_size);
                    rc = 2;
                    goto done;
                }
                add_module(&p, name, mats[j], int4 ? 4 : 8, int4 ? group : 0);
                n4 += int4;
            }
        }
    add_module(&p, "lm_head", &m->lm_head, 8, 0);
    for (int i = 0; i < p.nmods; i++)
        if (!frigg_mat_bf16(&p.mods[i].mat)) {
            fprintf(stderr, PROG ": %s: %s holds %s weights: SRC is already quantized\n", src, p.mods[i].name,
                    frigg_dtype_name(p.mods[i].mat.dtype));
            goto done;
        }
    if (keep_embedding && !frigg_mat_bf16(&m->embed)) {
        fprintf(stderr, PROG ": %s: the embedding holds %s weights: SRC is already quantized\n", src,
                frigg_dtype_name(m->embed.dtype));
        goto done;
    }
    add_copy(&p, zl);

    /* config.json: the source's text plus quantization_config. */
    char *cp = frigg_path_join(src, "config.json"); /* for messages; a GGUF's config is its metadata */
    size_t cl = 0;
    cfg_text = frigg_model_config_text(m, &cl);
    qc = quant_config(int4, group, keep_embedding);
    if (cfg_text) cfg_out = splice_config(cfg_text, cl, cp, qc);
    free(cp);
    if (!cfg_out) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto done;
    }

    const char *layout = m->layout == FRIGG_LAYOUT_PACKED ? "packed" : "split";
    size_t src_bytes = 0;
    for (int i = 0; i < m->st.nfiles; i++) src_bytes += m->st.files[i].size;
    fprintf(stderr, PROG ": %s: %s layout, %d file(s), %llu parameters; %s -> %s\n", src, layout, m->st.nfiles,
            (unsigned long long)m->n_params,
            int4 ? (rtn ? "int4 round-to-nearest (core), int8 (vocabulary)" : "int4 clipping search (core), int8 (vocabulary)")
                 : "int8",
            out);
    if (!(hash = hash_sources(&m->st))) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto done;
    }
    fprintf(stderr, PROG ": source sha256 %s (%.1f s)\n", hash, (frigg_now_ms() - t0) / 1000);

    char gs[16];
    snprintf(gs, sizeof gs, "%d", group);
    meta = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "format", "pt", "frigg_version", FRIGG_VERSION, "frigg_method",
                     method, "frigg_group_size", int4 ? gs : "channel", "frigg_int4_scale",
                     int4 ? (rtn ? "rtn" : "mse-search") : "none", "frigg_embedding", keep_embedding ? "unchanged" : "int8",
                     "frigg_source_layout", layout, "frigg_source_sha256", hash);
    size_t hlen = 0, dbytes = 0;
    header = build_header(&p, meta, &hlen, &dbytes);

    /* Build in a sibling folder, rename into place at the end. */
    size_t tl = strlen(out) + 32;
    tmp = frigg_xmalloc(tl);
    snprintf(tmp, tl, "%s.partial-XXXXXX", out);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", tmp, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto done;
    }
    chmod(tmp, 0755);
    char *mp = frigg_path_join(tmp, "model.safetensors");
    fd = open(mp, O_RDWR | O_CREAT | O_EXCL, 0644);
    free(mp);
    if (fd < 0) {
        fprintf(stderr, PROG ": %s/model.safetensors: %s\n", tmp, strerror(errno));
        goto fail;
    }
    unsigned char lenb[8];
    for (int k = 0; k < 8; k++) lenb[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    size_t data0 = 8 + hlen, total = data0 + dbytes;
    if (write_all(fd, lenb, 8, 0) || write_all(fd, header, hlen, 8) || ftruncate(fd, (off_t)total)) {
        fprintf(stderr, PROG ": writing %s: %s\n", tmp, errno ? strerror(errno) : frigg_error());
        goto fail;
    }
    pool = frigg_pool_create(threads);
    for (int i = 0; i < p.nmods; i++) {
        const qmodule *q = &p.mods[i];
        double t1 = frigg_now_ms();
        if (quantize_module(m, q, &p, fd, data0, !rtn, pool)) {
            fprintf(stderr, PROG ": %s\n", frigg_error());
            goto fail;
        }
        fprintf(stderr, PROG ": [%d/%d] %s [%d x %d] int%d %s%s (%.0f ms)\n", i + 1, p.nmods, q->name, q->mat.rows,
                q->mat.cols, q->bits, q->group ? "group " : "per row", q->group ? gs : "", frigg_now_ms() - t1);
    }
    for (int i = 0; i < p.ncopies; i++) {
        if (copy_tensor(m, &p.copies[i], &p, fd, data0)) {
            fprintf(stderr, PROG ": %s\n", frigg_error());
            goto fail;
        }
        fprintf(stderr, PROG ": copied %s (%s, unchanged)\n", p.copies[i].src->name, frigg_st_dtype_name(p.copies[i].src->dtype));
    }
    if (fsync(fd) || close(fd)) {
        fd = -1;
        fprintf(stderr, PROG ": %s/model.safetensors: %s\n", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;

    char src_name[256];
    size_t sl = strlen(src);
    while (sl > 1 && src[sl - 1] == '/') sl--;
    size_t sb0 = sl;
    while (sb0 > 0 && src[sb0 - 1] != '/') sb0--;
    snprintf(src_name, sizeof src_name, "%.*s", (int)(sl - sb0), src + sb0);
    build_info bi = {.method = method, .int4 = int4, .group = group, .search = !rtn, .keep_embedding = keep_embedding,
                     .src_name = src_name, .si = &si, .src_hash = hash, .layout = layout,
                     .n_params = m->n_params, .out_bytes = total, .src_bytes = src_bytes, .nmods = p.nmods, .n4 = n4,
                     .n8 = p.nmods - n4};
    char *notice = notice_text(&bi);
    int wrc = write_text(tmp, "config.json", cfg_out) || write_text(tmp, "NOTICE", notice);
    if (!wrc && si.license_file && copy_if_present(src, tmp, si.license_file) < 0) wrc = 1;
    free(notice);
    static const char *const copied[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                         "chat_template.jinja", "generation_config.json"};
    for (size_t i = 0; !wrc && i < sizeof copied / sizeof copied[0]; i++)
        if (copy_if_present(src, tmp, copied[i]) < 0) wrc = 1;
    if (wrc) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto fail;
    }
    /* --check scores the finished files in the partial folder, so OUT appears only with its figures */
    json_t *quality = NULL;
    if (check && !(quality = run_check(m, src, tmp, &co))) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto fail;
    }
    char *readme = readme_text(&bi);
    if (quality) {
        char *qt = quality_text(quality);
        readme = frigg_xrealloc(readme, strlen(readme) + strlen(qt) + 1);
        strcat(readme, qt);
        free(qt);
        char *qs = json_dumps(quality, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        size_t ql = strlen(qs);
        qs = frigg_xrealloc(qs, ql + 2);
        qs[ql] = '\n', qs[ql + 1] = 0;
        wrc = write_text(tmp, "quality.json", qs);
        free(qs);
        json_decref(quality);
    }
    wrc = wrc || write_text(tmp, "README.md", readme);
    free(readme);
    if (wrc) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto fail;
    }
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE)) {
        int e = errno;
        if (e == EINVAL || e == ENOSYS) { /* a file system without RENAME_NOREPLACE */
            if (lstat(out, &sb) == 0 || rename(tmp, out)) {
                fprintf(stderr, PROG ": cannot move %s to %s: %s\n", tmp, out, lstat(out, &sb) == 0 ? "it exists" : strerror(errno));
                goto fail;
            }
        } else {
            fprintf(stderr, PROG ": cannot move %s to %s: %s\n", tmp, out, e == EEXIST ? "it exists now" : strerror(e));
            goto fail;
        }
    }
    fprintf(stderr, PROG ": wrote %s: %zu bytes of safetensors from %zu (%.1f %%), %d quantized modules, in %.1f s\n", out,
            total, src_bytes, 100.0 * (double)total / (double)src_bytes, p.nmods, (frigg_now_ms() - t0) / 1000);
    rc = 0;
    goto done;
fail:
    if (fd >= 0) close(fd);
    fd = -1;
    if (tmp) remove_tree(tmp);
done:
    src_info_free(&si);
    frigg_pool_destroy(pool);
    json_decref(qc);
    json_decref(meta);
    free(header);
    free(hash);
    free(cfg_text);
    free(cfg_out);
    free(tmp);
    free(p.t);
    free(p.mods);
    frigg_model_free(m);
    free(out);
    return rc;
}
