/* gguf.c — the GGUF container (gguf.h): a bounds-checked reader over the mapping, and the ggml block formats'
 * dequantization to f32 in gguf-py's arithmetic. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

/* The most elements a tensor may have: 2^40 (4 TiB of bytes at one byte each, more than any file here); a
 * product past it is refused before it could wrap. */
#define GGUF_MAX_ELEMENTS (1ull << 40)
/* Keys and tensor names longer than this are garbage, not metadata (ggml's own tensor names stop at 63). */
#define GGUF_MAX_NAME 65535u
/* Arrays of arrays deeper than this are refused (no GGUF writer nests at all; the bound keeps the walk's
 * recursion small). */
#define GGUF_MAX_DEPTH 8

const char *frigg_gguf_vtype_name(int t) {
    static const char *const n[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                    "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
    return t >= 0 && t <= 12 ? n[t] : "(unknown type)";
}

/* ggml's type traits (ggml.c type_traits: blck_size, type_size), for every type a file may name. */
static const struct {
    uint32_t type;
    const char *name;
    uint32_t blck, bytes;
} k_types[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},        {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},       {8, "Q8_0", 32, 34},        {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},     {11, "Q3_K", 256, 110},    {12, "Q4_K", 256, 144},     {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},   {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},    {20, "IQ4_NL", 32, 18},     {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},    {23, "IQ4_XS", 256, 136},  {24, "I8", 1, 1},           {25, "I16", 1, 2},
    {26, "I32", 1, 4},         {27, "I64", 1, 8},         {28, "F64", 1, 8},          {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},    {35, "TQ2_0", 256, 66},     {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},     {41, "Q1_0", 128, 18},     {42, "Q2_0", 64, 18},
};

const char *frigg_ggml_type_name(uint32_t type) {
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].type == type) return k_types[i].name;
    return NULL;
}

int frigg_ggml_type_block(uint32_t type, uint32_t *blck, uint32_t *bytes) {
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].type == type) {
            *blck = k_types[i].blck;
            *bytes = k_types[i].bytes;
            return 1;
        }
    *blck = *bytes = 0;
    return 0;
}

int frigg_gguf_magic(const void *buf, size_t size) { return size >= 4 && !memcmp(buf, "GGUF", 4); }

int frigg_gguf_is_file(const char *path) {
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char m[4];
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && frigg_gguf_magic(m, 4);
}

/* ---- the reader: a cursor that never passes the end ---- */

typedef struct {
    const unsigned char *b;
    size_t size, pos;
    const char *path;
} rd;

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
/* n bytes at the cursor, or 0 when fewer are left. */
static int have(const rd *r, uint64_t n) { return n <= r->size - r->pos; }
static int get_u(rd *r, int n, uint64_t *v) {
    if (!have(r, (uint64_t)n)) return -1;
    *v = le(r->b + r->pos, n);
    r->pos += (size_t)n;
    return 0;
}

static size_t scalar_size(int t) {
    switch (t) {
    case FRIGG_GGUF_UINT8: case FRIGG_GGUF_INT8: case FRIGG_GGUF_BOOL: return 1;
    case FRIGG_GGUF_UINT16: case FRIGG_GGUF_INT16: return 2;
    case FRIGG_GGUF_UINT32: case FRIGG_GGUF_INT32: case FRIGG_GGUF_FLOAT32: return 4;
    case FRIGG_GGUF_UINT64: case FRIGG_GGUF_INT64: case FRIGG_GGUF_FLOAT64: return 8;
    }
    return 0;
}

/* Decode a scalar of type t at p into the kv's widened fields. */
static void widen(int t, const unsigned char *p, uint64_t *u, int64_t *i, double *f) {
    uint64_t v = le(p, (int)scalar_size(t));
    uint64_t uu = 0;
    int64_t ii = 0;
    double ff = 0;
    switch (t) {
    case FRIGG_GGUF_UINT8: case FRIGG_GGUF_UINT16: case FRIGG_GGUF_UINT32: case FRIGG_GGUF_UINT64: case FRIGG_GGUF_BOOL:
        uu = v, ii = (int64_t)v, ff = (double)v;
        break;
    case FRIGG_GGUF_INT8: ii = (int8_t)v, uu = (uint64_t)ii, ff = (double)ii; break;
    case FRIGG_GGUF_INT16: ii = (int16_t)v, uu = (uint64_t)ii, ff = (double)ii; break;
    case FRIGG_GGUF_INT32: ii = (int32_t)v, uu = (uint64_t)ii, ff = (double)ii; break;
    case FRIGG_GGUF_INT64: ii = (int64_t)v, uu = (uint64_t)ii, ff = (double)ii; break;
    case FRIGG_GGUF_FLOAT32: {
        uint32_t w = (uint32_t)v;
        float x;
        memcpy(&x, &w, 4);
        ff = x;
        break;
    }
    case FRIGG_GGUF_FLOAT64: memcpy(&ff, &v, 8); break;
    }
    if (u) *u = uu;
    if (i) *i = ii;
    if (f) *f = ff;
}

/* A string at the cursor: its bytes stay in the mapping. `what` names it in messages. */
static int get_str(rd *r, const char **s, uint64_t *len, const char *what, const char *name) {
    size_t at = r->pos;
    uint64_t n;
    if (get_u(r, 8, &n)) {
        frigg_set_error("%s: %s%s%s%s: truncated at offset %zu (no string length; the file is %zu bytes)", r->path, what,
                        name ? " \"" : "", name ? name : "", name ? "\"" : "", at, r->size);
        return -1;
    }
    if (!have(r, n)) {
        frigg_set_error("%s: %s%s%s%s: a string of %llu bytes at offset %zu runs past the end of the file (%zu bytes; "
                        "truncated?)", r->path, what, name ? " \"" : "", name ? name : "", name ? "\"" : "",
                        (unsigned long long)n, at, r->size);
        return -1;
    }
    *s = (const char *)r->b + r->pos;
    *len = n;
    r->pos += (size_t)n;
    return 0;
}

/* A name (key or tensor name) at the cursor, copied: bounded, no NUL inside (a NUL would make two different
 * names one C string). */
static char *get_name(rd *r, const char *what, int64_t index) {
    char idx[64];
    snprintf(idx, sizeof idx, "%s %lld", what, (long long)index);
    const char *s;
    uint64_t n;
    size_t at = r->pos;
    if (get_str(r, &s, &n, idx, NULL)) return NULL;
    if (n == 0 || n > GGUF_MAX_NAME || memchr(s, 0, (size_t)n)) {
        frigg_set_error("%s: %s at offset %zu: its name is %s", r->path, idx, at,
                        n == 0 ? "empty" : n > GGUF_MAX_NAME ? "longer than 65535 bytes" : "holding a NUL byte");
        return NULL;
    }
    char *c = frigg_xmalloc((size_t)n + 1);
    memcpy(c, s, (size_t)n);
    c[n] = 0;
    return c;
}

/* Check and skip the elements of an array of type t, count n, at the cursor (for arrays of arrays, each nested
 * {type, count, elements}). */
static int skip_array(rd *r, uint32_t t, uint64_t n, int depth, const char *key) {
    size_t at = r->pos;
    if (t == FRIGG_GGUF_STRING) {
        if (n > (r->size - r->pos) / 8) {
            frigg_set_error("%s: key \"%s\": an array of %llu strings at offset %zu cannot fit in the %zu bytes left "
                            "(truncated or lying count)", r->path, key, (unsigned long long)n, at, r->size - r->pos);
            return -1;
        }
        for (uint64_t k = 0; k < n; k++) {
            const char *s;
            uint64_t len;
            char what[96];
            snprintf(what, sizeof what, "array element %llu of key", (unsigned long long)k);
            if (get_str(r, &s, &len, what, key)) return -1;
        }
        return 0;
    }
    if (t == FRIGG_GGUF_ARRAY) {
        if (depth >= GGUF_MAX_DEPTH) {
            frigg_set_error("%s: key \"%s\": arrays nested deeper than %d at offset %zu", r->path, key, GGUF_MAX_DEPTH, at);
            return -1;
        }
        if (n > (r->size - r->pos) / 12) {
            frigg_set_error("%s: key \"%s\": an array of %llu arrays at offset %zu cannot fit in the %zu bytes left",
                            r->path, key, (unsigned long long)n, at, r->size - r->pos);
            return -1;
        }
        for (uint64_t k = 0; k < n; k++) {
            uint64_t et, en;
            size_t eat = r->pos;
            if (get_u(r, 4, &et) || get_u(r, 8, &en)) {
                frigg_set_error("%s: key \"%s\": nested array %llu truncated at offset %zu", r->path, key,
                                (unsigned long long)k, eat);
                return -1;
            }
            if (et > 12) {
                frigg_set_error("%s: key \"%s\": nested array %llu at offset %zu has element type %llu (not a GGUF "
                                "type)", r->path, key, (unsigned long long)k, eat, (unsigned long long)et);
                return -1;
            }
            if (skip_array(r, (uint32_t)et, en, depth + 1, key)) return -1;
        }
        return 0;
    }
    size_t es = scalar_size((int)t);
    if (!es) {
        frigg_set_error("%s: key \"%s\": array element type %u at offset %zu is not a GGUF type", r->path, key, t, at);
        return -1;
    }
    if (n > (r->size - r->pos) / es) {
        frigg_set_error("%s: key \"%s\": an array of %llu %s values at offset %zu runs past the end of the file (%zu "
                        "bytes left; truncated or lying count)", r->path, key, (unsigned long long)n,
                        frigg_gguf_vtype_name((int)t), at, r->size - r->pos);
        return -1;
    }
    if (t == FRIGG_GGUF_BOOL)
        for (uint64_t k = 0; k < n; k++)
            if (r->b[r->pos + k] > 1) {
                frigg_set_error("%s: key \"%s\": bool array element %llu at offset %zu is %u (not 0 or 1)", r->path, key,
                                (unsigned long long)k, r->pos + (size_t)k, r->b[r->pos + k]);
                return -1;
            }
    r->pos += (size_t)(n * es);
    return 0;
}

static int parse_kv(rd *r, frigg_gguf_kv *kv, int64_t index) {
    size_t at = r->pos;
    if (!(kv->key = get_name(r, "metadata key", index))) return -1;
    uint64_t t;
    kv->offset = r->pos;
    if (get_u(r, 4, &t)) {
        frigg_set_error("%s: key \"%s\" (at offset %zu): truncated before its value type", r->path, kv->key, at);
        return -1;
    }
    if (t > 12) {
        frigg_set_error("%s: key \"%s\": value type %llu at offset %zu is not a GGUF type (0..12)", r->path, kv->key,
                        (unsigned long long)t, kv->offset);
        return -1;
    }
    kv->type = (frigg_gguf_vtype)t;
    if (t == FRIGG_GGUF_STRING) return get_str(r, &kv->str, &kv->len, "key", kv->key);
    if (t == FRIGG_GGUF_ARRAY) {
        uint64_t et, n;
        if (get_u(r, 4, &et) || get_u(r, 8, &n)) {
            frigg_set_error("%s: key \"%s\": array header truncated at offset %zu", r->path, kv->key, r->pos);
            return -1;
        }
        if (et > 12) {
            frigg_set_error("%s: key \"%s\": array element type %llu at offset %zu is not a GGUF type", r->path, kv->key,
                            (unsigned long long)et, kv->offset + 4);
            return -1;
        }
        kv->atype = (frigg_gguf_vtype)et;
        kv->n = n;
        kv->adata = r->b + r->pos;
        return skip_array(r, (uint32_t)et, n, 1, kv->key);
    }
    size_t es = scalar_size((int)t);
    if (!have(r, es)) {
        frigg_set_error("%s: key \"%s\": its %s value at offset %zu runs past the end of the file (%zu bytes)", r->path,
                        kv->key, frigg_gguf_vtype_name((int)t), r->pos, r->size);
        return -1;
    }
    if (t == FRIGG_GGUF_BOOL && r->b[r->pos] > 1) {
        frigg_set_error("%s: key \"%s\": bool value %u at offset %zu is not 0 or 1", r->path, kv->key, r->b[r->pos],
                        r->pos);
        return -1;
    }
    widen((int)t, r->b + r->pos, &kv->u, &kv->i, &kv->f);
    r->pos += es;
    return 0;
}

static int parse_tensor_info(rd *r, frigg_gguf_tensor *t, int64_t index) {
    t->info_offset = r->pos;
    if (!(t->name = get_name(r, "tensor", index))) return -1;
    uint64_t nd;
    if (get_u(r, 4, &nd)) {
        frigg_set_error("%s: tensor \"%s\" (info at offset %zu): truncated before n_dims", r->path, t->name,
                        t->info_offset);
        return -1;
    }
    if (nd < 1 || nd > FRIGG_GGUF_MAXDIM) {
        frigg_set_error("%s: tensor \"%s\" (info at offset %zu): n_dims %llu (1 to %d)", r->path, t->name,
                        t->info_offset, (unsigned long long)nd, FRIGG_GGUF_MAXDIM);
        return -1;
    }
    t->ndim = (int)nd;
    for (int d = 0; d < FRIGG_GGUF_MAXDIM; d++) t->ne[d] = 1;
    for (int d = 0; d < t->ndim; d++)
        if (get_u(r, 8, &t->ne[d])) {
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu): truncated in its dimensions", r->path, t->name,
                            t->info_offset);
            return -1;
        }
    uint64_t ty;
    if (get_u(r, 4, &ty) || get_u(r, 8, &t->offset)) {
        frigg_set_error("%s: tensor \"%s\" (info at offset %zu): truncated before its type and offset", r->path,
                        t->name, t->info_offset);
        return -1;
    }
    t->type = (uint32_t)ty;
    uint32_t blck, bytes;
    if (ty > UINT32_MAX || !frigg_ggml_type_block(t->type, &blck, &bytes)) {
        frigg_set_error("%s: tensor \"%s\" (info at offset %zu): ggml type %llu is not one ggml defines", r->path,
                        t->name, t->info_offset, (unsigned long long)ty);
        return -1;
    }
    uint64_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->ne[d] > GGUF_MAX_ELEMENTS || (t->ne[d] && count > GGUF_MAX_ELEMENTS / t->ne[d])) {
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu): more than 2^40 elements", r->path, t->name,
                            t->info_offset);
            return -1;
        }
        count *= t->ne[d];
    }
    if (t->ne[0] % blck) {
        frigg_set_error("%s: tensor \"%s\" (info at offset %zu): row length %llu is not a multiple of %s's block of %u",
                        r->path, t->name, t->info_offset, (unsigned long long)t->ne[0], frigg_ggml_type_name(t->type),
                        blck);
        return -1;
    }
    t->nelem = count;
    t->nbytes = (size_t)(count / blck * bytes);
    return 0;
}

typedef struct {
    uint64_t b, e;
    int64_t idx;
} span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}
static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Two entries with one name: refused (a lookup would find either). */
static int check_unique(const frigg_gguf *g, int keys) {
    int64_t n = keys ? g->nkv : g->ntensors;
    if (n < 2) return 0;
    char **names = frigg_xmalloc((size_t)n * sizeof *names);
    for (int64_t i = 0; i < n; i++) names[i] = keys ? g->kv[i].key : g->tensors[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    int rc = 0;
    for (int64_t i = 1; i < n && !rc; i++)
        if (!strcmp(names[i], names[i - 1])) {
            frigg_set_error("%s: %s \"%s\" appears twice", g->path, keys ? "metadata key" : "tensor", names[i]);
            rc = -1;
        }
    free(names);
    return rc;
}

int frigg_gguf_parse(frigg_gguf *g, const void *buf, size_t size, const char *path) {
    memset(g, 0, sizeof *g);
    g->path = frigg_xstrdup(path);
    g->map = buf;
    g->size = size;
    rd r = {buf, size, 0, g->path};
    uint64_t ver, nt, nkv;
    if (!frigg_gguf_magic(buf, size)) {
        frigg_set_error("%s: not a GGUF file (no \"GGUF\" magic at offset 0)", path);
        return -1;
    }
    r.pos = 4;
    if (get_u(&r, 4, &ver)) {
        frigg_set_error("%s: truncated GGUF header (%zu bytes, no version)", path, size);
        return -1;
    }
    g->version = (uint32_t)ver;
    if (ver != 2 && ver != 3) {
        if (ver > 0xffff && !(ver & 0xffff))
            frigg_set_error("%s: version field 0x%08llx at offset 4: a big-endian GGUF (only little-endian files are "
                            "read)", path, (unsigned long long)ver);
        else
            frigg_set_error("%s: GGUF version %llu at offset 4 is not supported (2 or 3%s)", path,
                            (unsigned long long)ver, ver == 1 ? "; version 1 has 32-bit counts" : "");
        return -1;
    }
    if (get_u(&r, 8, &nt) || get_u(&r, 8, &nkv)) {
        frigg_set_error("%s: truncated GGUF header (%zu bytes; the counts end at offset 24)", path, size);
        return -1;
    }
    /* Each key/value takes at least 13 bytes (8 length + 1 byte of name + 4 type) and each tensor info at least
     * 25 (8 + 1 + 4 n_dims + 8 ne[0] + 4 type... + 8 offset): a count the rest of the file cannot hold is a lie,
     * refused before anything is allocated for it. */
    if (nkv > (size - r.pos) / 13) {
        frigg_set_error("%s: kv_count %llu at offset 16 cannot fit in the file's %zu bytes (truncated or lying header)",
                        path, (unsigned long long)nkv, size);
        return -1;
    }
    g->kv = frigg_xcalloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    for (uint64_t i = 0; i < nkv; i++) {
        g->nkv = (int64_t)i + 1; /* so close frees this entry's key */
        if (parse_kv(&r, &g->kv[i], (int64_t)i)) return -1;
    }
    if (check_unique(g, 1)) return -1;
    if (nt > (size - r.pos) / 33) {
        frigg_set_error("%s: tensor_count %llu at offset 8 cannot fit in the %zu bytes after the metadata (offset %zu; "
                        "truncated or lying header)", path, (unsigned long long)nt, size - r.pos, r.pos);
        return -1;
    }
    g->tensors = frigg_xcalloc(nt ? (size_t)nt : 1, sizeof *g->tensors);
    for (uint64_t i = 0; i < nt; i++) {
        g->ntensors = (int64_t)i + 1;
        if (parse_tensor_info(&r, &g->tensors[i], (int64_t)i)) return -1;
    }
    if (check_unique(g, 0)) return -1;

    g->alignment = 32;
    const frigg_gguf_kv *al = frigg_gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->type != FRIGG_GGUF_UINT32) {
            frigg_set_error("%s: key \"general.alignment\" at offset %zu is %s, expected UINT32", path, al->offset,
                            frigg_gguf_vtype_name(al->type));
            return -1;
        }
        if (al->u == 0 || (al->u & (al->u - 1))) {
            frigg_set_error("%s: key \"general.alignment\" = %llu (at offset %zu) is not a power of two", path,
                            (unsigned long long)al->u, al->offset);
            return -1;
        }
        g->alignment = al->u;
    }
    /* The data section starts at the next multiple of the alignment after the tensor infos. */
    uint64_t d0 = ((uint64_t)r.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->ntensors == 0) {
        g->data_offset = d0 <= size ? (size_t)d0 : size;
        return 0;
    }
    if (d0 > size) {
        frigg_set_error("%s: the data section would start at offset %llu (the tensor infos end at %zu, aligned to %llu), "
                        "past the end of the file (%zu bytes; truncated?)", path, (unsigned long long)d0, r.pos,
                        (unsigned long long)g->alignment, size);
        return -1;
    }
    g->data_offset = (size_t)d0;
    size_t dsize = size - g->data_offset;
    span *sp = frigg_xmalloc((size_t)g->ntensors * sizeof *sp);
    int rc = 0;
    for (int64_t i = 0; i < g->ntensors && !rc; i++) {
        frigg_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu): data offset %llu is not a multiple of the alignment "
                            "%llu (misaligned)", path, t->name, t->info_offset, (unsigned long long)t->offset,
                            (unsigned long long)g->alignment);
            rc = -1;
        } else if (t->offset > dsize || t->nbytes > dsize - t->offset) {
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu): its %zu bytes at data offset %llu (file offset "
                            "%llu) run past the end of the file (%zu bytes; truncated?)", path, t->name, t->info_offset,
                            t->nbytes, (unsigned long long)t->offset,
                            (unsigned long long)(g->data_offset + t->offset), size);
            rc = -1;
        } else {
            t->data = g->map + g->data_offset + t->offset;
            sp[i] = (span){t->offset, t->offset + t->nbytes, i};
        }
    }
    if (!rc) {
        /* Overlapping tensors would alias each other's weights: refused. */
        qsort(sp, (size_t)g->ntensors, sizeof *sp, cmp_span);
        for (int64_t i = 1; i < g->ntensors && !rc; i++)
            if (sp[i].b < sp[i - 1].e && sp[i].e > sp[i].b) {
                frigg_set_error("%s: tensors \"%s\" and \"%s\" overlap in the data section (data offsets %llu and %llu)",
                                path, g->tensors[sp[i - 1].idx].name, g->tensors[sp[i].idx].name,
                                (unsigned long long)sp[i - 1].b, (unsigned long long)sp[i].b);
                rc = -1;
            }
    }
    free(sp);
    return rc;
}

int frigg_gguf_open(frigg_gguf *g, const char *path) {
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        frigg_set_error("%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        frigg_set_error("%s: not a regular file", path);
        close(fd);
        return -1;
    }
    void *map = NULL;
    if (st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            frigg_set_error("%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    int rc = frigg_gguf_parse(g, map ? map : "", (size_t)st.st_size, path);
    g->map = map;
    g->size = (size_t)st.st_size;
    g->mapped = map != NULL;
    return rc;
}

void frigg_gguf_release_map(frigg_gguf *g) { g->mapped = 0; }

void frigg_gguf_close(frigg_gguf *g) {
    for (int64_t i = 0; i < g->nkv; i++) free(g->kv[i].key);
    for (int64_t i = 0; i < g->ntensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->mapped) munmap((void *)g->map, g->size);
    free(g->path);
    memset(g, 0, sizeof *g);
}

const frigg_gguf_kv *frigg_gguf_find_kv(const frigg_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->nkv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const frigg_gguf_tensor *frigg_gguf_find_tensor(const frigg_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->ntensors; i++)
        if (g->tensors[i].name && !strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* Skip one nested array at p (checked by the parser). */
static const unsigned char *skip_checked(const unsigned char *p) {
    uint32_t t = (uint32_t)le(p, 4);
    uint64_t n = le(p + 4, 8);
    p += 12;
    if (t == FRIGG_GGUF_STRING) {
        for (uint64_t k = 0; k < n; k++) p += 8 + le(p, 8);
    } else if (t == FRIGG_GGUF_ARRAY) {
        for (uint64_t k = 0; k < n; k++) p = skip_checked(p);
    } else {
        p += n * scalar_size((int)t);
    }
    return p;
}

void frigg_gguf_arr_next(const frigg_gguf_kv *kv, const unsigned char **p, const char **str, uint64_t *len,
                         uint64_t *u, int64_t *i, double *f) {
    const unsigned char *q = *p;
    if (kv->atype == FRIGG_GGUF_STRING) {
        uint64_t n = le(q, 8);
        if (str) *str = (const char *)q + 8;
        if (len) *len = n;
        *p = q + 8 + n;
    } else if (kv->atype == FRIGG_GGUF_ARRAY) {
        *p = skip_checked(q);
    } else {
        widen(kv->atype, q, u, i, f);
        *p = q + scalar_size(kv->atype);
    }
}

/* ---- dequantization: gguf-py's quants.py, element for element ----
 * Each value is the fp32 result of the same operations in the same order as numpy evaluates them there (fp16
 * scales widened exactly, products and sums each rounded to fp32). frigg builds with -std=c11, where GCC does not
 * contract a * b - c into a fused multiply-add (-ffp-contract=off is the ISO C default), and the products are
 * separate statements, so clang's per-expression contraction does not apply either. */

static float h2f(const unsigned char *p) { return frigg_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void dq_q4_0(const unsigned char *b, float *y) { /* d, qs[16]: low nibbles are 0..15, high 16..31 */
    float d = h2f(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 15) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}
static void dq_q4_1(const unsigned char *b, float *y) { /* d, m, qs[16]: d * q + m */
    float d = h2f(b), m = h2f(b + 2);
    for (int j = 0; j < 16; j++) {
        float lo = d * (float)(b[4 + j] & 15), hi = d * (float)(b[4 + j] >> 4);
        y[j] = lo + m;
        y[j + 16] = hi + m;
    }
}
static void dq_q5_0(const unsigned char *b, float *y) { /* d, qh (u32: bit i is element i's fifth bit), qs[16] */
    float d = h2f(b);
    uint32_t qh = (uint32_t)le(b + 2, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 15) | (int)((qh >> j) & 1) << 4, hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}
static void dq_q5_1(const unsigned char *b, float *y) {
    float d = h2f(b), m = h2f(b + 2);
    uint32_t qh = (uint32_t)le(b + 4, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 15) | (int)((qh >> j) & 1) << 4, hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        float a = d * (float)lo, c = d * (float)hi;
        y[j] = a + m;
        y[j + 16] = c + m;
    }
}
static void dq_q8_0(const unsigned char *b, float *y) { /* d, qs[32] int8: x * d */
    float d = h2f(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}
static void dq_q2_k(const unsigned char *b, float *y) { /* scales[16], qs[64], d, dmin */
    const unsigned char *sc = b, *qs = b + 16;
    float d = h2f(b + 80), dmin = h2f(b + 82);
    for (int e = 0; e < 256; e++) {
        int j = e / 16, h = e / 128, s = (e % 128) / 32, l = e % 32;
        float dl = d * (float)(sc[j] & 15), ml = dmin * (float)(sc[j] >> 4);
        float q = (float)((qs[h * 32 + l] >> (2 * s)) & 3);
        float p = dl * q;
        y[e] = p - ml;
    }
}
static void dq_q3_k(const unsigned char *b, float *y) { /* hmask[32], qs[64], scales[12], d */
    const unsigned char *hm = b, *qs = b + 32, *sc = b + 96;
    float d = h2f(b + 108), dl[16];
    for (int k = 0; k < 16; k++) {
        int lo = (sc[k % 8] >> (4 * (k / 8))) & 15, hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        dl[k] = d * (float)((int8_t)(lo | hi << 4) - 32);
    }
    for (int e = 0; e < 256; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        int ql = (qs[h * 32 + l] >> (2 * s)) & 3, qh = ((hm[l] >> (e / 32)) & 1) ^ 1;
        y[e] = dl[e / 16] * (float)(ql - (qh << 2));
    }
}
/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (gguf-py's Q4_K.get_scale_min). */
static void k_scale_min(const unsigned char *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[4 + j] & 63;
    } else {
        *sc = (s[8 + j - 4] & 15) | ((s[j - 4] >> 2) & 0x30);
        *m = (s[8 + j - 4] >> 4) | ((s[4 + j - 4] >> 2) & 0x30);
    }
}
static void dq_q4_k(const unsigned char *b, float *y) { /* d, dmin, scales[12], qs[128] */
    float d = h2f(b), dmin = h2f(b + 2);
    const unsigned char *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(b + 4, j, &sc, &m);
        float dj = d * (float)sc, mj = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            float p = dj * (float)((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 15);
            y[j * 32 + l] = p - mj;
        }
    }
}
static void dq_q5_k(const unsigned char *b, float *y) { /* d, dmin, scales[12], qh[32], qs[128] */
    float d = h2f(b), dmin = h2f(b + 2);
    const unsigned char *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(b + 4, j, &sc, &m);
        float dj = d * (float)sc, mj = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 15) | ((qh[l] >> j) & 1) << 4;
            float p = dj * (float)q;
            y[j * 32 + l] = p - mj;
        }
    }
}
static void dq_q6_k(const unsigned char *b, float *y) { /* ql[128], qh[64], scales[16] int8, d */
    const unsigned char *ql = b, *qh = b + 128, *sc = b + 192;
    float d = h2f(b + 208);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, nib = (e % 128) / 64, idx = e % 64, s = (e % 128) / 32, l = e % 32;
        int q = ((ql[h * 64 + idx] >> (4 * nib)) & 15) | ((qh[h * 32 + l] >> (2 * s)) & 3) << 4;
        float dk = d * (float)(int8_t)sc[e / 16];
        y[e] = dk * (float)(q - 32);
    }
}

int frigg_gguf_dequant_supported(uint32_t type) {
    switch (type) {
    case FRIGG_GGML_F32: case FRIGG_GGML_F16: case FRIGG_GGML_BF16: case FRIGG_GGML_Q4_0: case FRIGG_GGML_Q4_1:
    case FRIGG_GGML_Q5_0: case FRIGG_GGML_Q5_1: case FRIGG_GGML_Q8_0: case FRIGG_GGML_Q2_K: case FRIGG_GGML_Q3_K:
    case FRIGG_GGML_Q4_K: case FRIGG_GGML_Q5_K: case FRIGG_GGML_Q6_K:
        return 1;
    }
    return 0;
}

int frigg_gguf_dequant_f32(uint32_t type, const void *src, size_t n, float *out) {
    const unsigned char *b = src;
    void (*blk)(const unsigned char *, float *) = NULL;
    switch (type) {
    case FRIGG_GGML_F32: memcpy(out, src, n * 4); return 0;
    case FRIGG_GGML_F16:
        for (size_t i = 0; i < n; i++) out[i] = h2f(b + 2 * i);
        return 0;
    case FRIGG_GGML_BF16:
        for (size_t i = 0; i < n; i++) out[i] = frigg_bf16_to_f32((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
        return 0;
    case FRIGG_GGML_Q4_0: blk = dq_q4_0; break;
    case FRIGG_GGML_Q4_1: blk = dq_q4_1; break;
    case FRIGG_GGML_Q5_0: blk = dq_q5_0; break;
    case FRIGG_GGML_Q5_1: blk = dq_q5_1; break;
    case FRIGG_GGML_Q8_0: blk = dq_q8_0; break;
    case FRIGG_GGML_Q2_K: blk = dq_q2_k; break;
    case FRIGG_GGML_Q3_K: blk = dq_q3_k; break;
    case FRIGG_GGML_Q4_K: blk = dq_q4_k; break;
    case FRIGG_GGML_Q5_K: blk = dq_q5_k; break;
    case FRIGG_GGML_Q6_K: blk = dq_q6_k; break;
    default: {
        const char *nm = frigg_ggml_type_name(type);
        frigg_set_error("ggml type %s (%u) is not one frigg dequantizes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                        "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", nm ? nm : "(unknown)", type);
        return -1;
    }
    }
    uint32_t be, bb;
    frigg_ggml_type_block(type, &be, &bb);
    if (n % be) {
        frigg_set_error("%zu elements are not whole %s blocks of %u", n, frigg_ggml_type_name(type), be);
        return -1;
    }
    for (size_t k = 0; k < n / be; k++) blk(b + k * bb, out + k * be);
    return 0;
}
