/* safetensors.c — header parsing with jansson, strict bounds checks, mmap. Format:
 * u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:[b,e]},
 * "__metadata__": {...}}, then the byte buffer; offsets are relative to the buffer. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

/* A header larger than this is garbage, not a model (the real 131-tensor header is ~20 KB). */
#define ST_MAX_HEADER (100u << 20)

size_t frigg_st_dtype_size(frigg_st_dtype t) {
    return t == FRIGG_ST_I64 ? 8 : t == FRIGG_ST_F32 || t == FRIGG_ST_I32 ? 4 : 2;
}
const char *frigg_st_dtype_name(frigg_st_dtype t) {
    switch (t) {
    case FRIGG_ST_BF16: return "BF16";
    case FRIGG_ST_F16: return "F16";
    case FRIGG_ST_F32: return "F32";
    case FRIGG_ST_I32: return "I32";
    case FRIGG_ST_I64: return "I64";
    }
    return "?";
}

typedef struct {
    size_t begin, end;
    int idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

/* The most elements a tensor may have (and the largest dimension): 2^40. */
#define ST_MAX_ELEMENTS (1ull << 40)

int frigg_st_parse(frigg_st_set *set, const void *buf, size_t size, const char *path, int file_index) {
    const unsigned char *b = buf;
    if (size < 8) {
        frigg_set_error("%s: truncated safetensors file (%zu bytes, no header length)", path, size);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
    if (hlen == 0 || hlen > ST_MAX_HEADER || hlen > size - 8) {
        frigg_set_error("%s: bad safetensors header length %llu (file is %zu bytes)", path, (unsigned long long)hlen,
                        size);
        return -1;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        frigg_set_error("%s: safetensors header is not valid JSON (column %d: %s)", path, jerr.column, jerr.text);
        return -1;
    }
    const unsigned char *data = b + 8 + hlen;
    size_t dsize = size - 8 - (size_t)hlen;
    int rc = -1, first = set->ntensors;
    span *spans = NULL;
    if (!json_is_object(root)) {
        frigg_set_error("%s: safetensors header must be a JSON object", path);
        goto out;
    }
    size_t n = json_object_size(root);
    set->tensors = realloc(set->tensors, (set->ntensors + n) * sizeof *set->tensors);
    if (!set->tensors && n) abort();
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(v)) {
                frigg_set_error("%s: __metadata__ must be an object", path);
                goto out;
            }
            continue;
        }
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
               *off = json_object_get(v, "data_offsets");
        if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
            json_array_size(off) != 2 || json_object_size(v) != 3) {
            frigg_set_error("%s: tensor \"%s\": header entry must be {dtype, shape, data_offsets:[begin,end]}", path,
                            key);
            goto out;
        }
        frigg_tensor t = {0};
        const char *d = json_string_value(dt);
        if (!strcmp(d, "BF16")) t.dtype = FRIGG_ST_BF16;
        else if (!strcmp(d, "F16")) t.dtype = FRIGG_ST_F16;
        else if (!strcmp(d, "F32")) t.dtype = FRIGG_ST_F32;
        else if (!strcmp(d, "I32")) t.dtype = FRIGG_ST_I32;
        else if (!strcmp(d, "I64")) t.dtype = FRIGG_ST_I64;
        else {
            frigg_set_error("%s: tensor \"%s\": dtype %s is not supported (BF16, F16, F32, I32, I64)", path, key, d);
            goto out;
        }
        if (json_array_size(sh) > FRIGG_ST_MAXDIM) {
            frigg_set_error("%s: tensor \"%s\": %zu dimensions (at most %d)", path, key, json_array_size(sh),
                            FRIGG_ST_MAXDIM);
            goto out;
        }
        t.ndim = (int)json_array_size(sh);
        int zero = 0;
        for (int i = 0; i < t.ndim; i++) {
            json_t *e = json_array_get(sh, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > (json_int_t)ST_MAX_ELEMENTS) {
                frigg_set_error("%s: tensor \"%s\": shape entry %d must be an integer in [0, 2^40]", path, key, i);
                goto out;
            }
            t.shape[i] = json_integer_value(e);
            zero |= t.shape[i] == 0;
        }
        /* The element count, checked before each multiplication: a product past 2^40 (4 TiB of BF16, more than any
         * file here) is refused, where multiplying on would wrap around 2^64 to a small count, even 0. A zero
         * dimension makes it 0 whatever the others are. */
        uint64_t count = zero ? 0 : 1;
        for (int i = 0; i < t.ndim && !zero; i++) {
            if (count > ST_MAX_ELEMENTS / (uint64_t)t.shape[i]) {
                char dims[200] = "", *p = dims;
                for (int j = 0; j < t.ndim; j++)
                    p += snprintf(p, (size_t)(dims + sizeof dims - p), "%s%lld", j ? ", " : "", (long long)t.shape[j]);
                frigg_set_error("%s: tensor \"%s\": shape [%s] has more than 2^40 elements", path, key, dims);
                goto out;
            }
            count *= (uint64_t)t.shape[i];
        }
        json_t *ob = json_array_get(off, 0), *oe = json_array_get(off, 1);
        if (!json_is_integer(ob) || !json_is_integer(oe) || json_integer_value(ob) < 0 ||
            json_integer_value(oe) < json_integer_value(ob)) {
            frigg_set_error("%s: tensor \"%s\": bad data_offsets", path, key);
            goto out;
        }
        uint64_t beg = (uint64_t)json_integer_value(ob), end = (uint64_t)json_integer_value(oe);
        if (end > dsize) {
            frigg_set_error("%s: tensor \"%s\": data_offsets [%llu, %llu) run past the end of the data (%zu bytes; "
                            "file truncated?)", path, key, (unsigned long long)beg, (unsigned long long)end, dsize);
            goto out;
        }
        if (end - beg != count * frigg_st_dtype_size(t.dtype)) {
            frigg_set_error("%s: tensor \"%s\": %llu bytes for %llu elements of %s", path, key,
                            (unsigned long long)(end - beg), (unsigned long long)count, d);
            goto out;
        }
        t.name = frigg_xstrdup(key);
        t.data = data + beg;
        t.nbytes = (size_t)(end - beg);
        t.file = file_index;
        set->tensors[set->ntensors++] = t;
    }
    /* Overlapping tensors would alias each other's weights: refuse. */
    int nt = set->ntensors - first;
    spans = frigg_xmalloc((nt ? nt : 1) * sizeof *spans);
    for (int i = 0; i < nt; i++) {
        frigg_tensor *t = &set->tensors[first + i];
        spans[i].begin = (size_t)((const unsigned char *)t->data - data);
        spans[i].end = spans[i].begin + t->nbytes;
        spans[i].idx = first + i;
    }
    qsort(spans, nt, sizeof *spans, cmp_span);
    for (int i = 1; i < nt; i++)
        if (spans[i].begin < spans[i - 1].end && spans[i].end > spans[i].begin) {
            frigg_set_error("%s: tensors \"%s\" and \"%s\" overlap in the data buffer", path,
                            set->tensors[spans[i - 1].idx].name, set->tensors[spans[i].idx].name);
            goto out;
        }
    rc = 0;
out:
    free(spans);
    if (rc) { /* roll back this file's entries */
        for (int i = first; i < set->ntensors; i++) free(set->tensors[i].name);
        set->ntensors = first;
    }
    json_decref(root);
    return rc;
}

static int map_file(frigg_st_set *set, const char *path) {
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
    set->files = realloc(set->files, (set->nfiles + 1) * sizeof *set->files);
    if (!set->files) abort();
    frigg_st_file *f = &set->files[set->nfiles];
    f->path = frigg_xstrdup(path);
    f->map = map;
    f->size = (size_t)st.st_size;
    if (frigg_st_parse(set, map ? map : "", f->size, path, set->nfiles)) {
        if (map) munmap(map, f->size);
        free(f->path);
        return -1;
    }
    set->nfiles++;
    return 0;
}

int frigg_st_open_file(frigg_st_set *set, const char *path) { return map_file(set, path); }

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const frigg_tensor *)a)->name, ((const frigg_tensor *)b)->name);
}

int frigg_st_finish(frigg_st_set *set) {
    qsort(set->tensors, set->ntensors, sizeof *set->tensors, cmp_tensor);
    for (int i = 1; i < set->ntensors; i++)
        if (!strcmp(set->tensors[i].name, set->tensors[i - 1].name)) {
            frigg_set_error("tensor \"%s\" appears in two files", set->tensors[i].name);
            return -1;
        }
    return 0;
}

frigg_tensor *frigg_st_find(frigg_st_set *set, const char *name) {
    frigg_tensor key = {.name = (char *)name};
    return bsearch(&key, set->tensors, set->ntensors, sizeof key, cmp_tensor);
}

/* Sharded: {"metadata":..., "weight_map": {tensor: file}}. Every shard listed is opened, and every
 * tensor must live in the shard the index names. */
static int open_index(frigg_st_set *set, const char *dir, const char *index_path) {
    size_t len;
    char *text = frigg_read_file(index_path, &len);
    if (!text) return -1;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) {
        frigg_set_error("%s: invalid JSON (line %d: %s)", index_path, jerr.line, jerr.text);
        return -1;
    }
    int rc = -1;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        frigg_set_error("%s: no \"weight_map\" object", index_path);
        goto out;
    }
    const char *name;
    json_t *fv;
    json_object_foreach(wm, name, fv) {
        if (!json_is_string(fv) || strchr(json_string_value(fv), '/') || !strcmp(json_string_value(fv), "..")) {
            frigg_set_error("%s: weight_map entry \"%s\" must be a plain file name", index_path, name);
            goto out;
        }
        char *p = frigg_path_join(dir, json_string_value(fv));
        int seen = 0;
        for (int i = 0; i < set->nfiles; i++)
            if (!strcmp(set->files[i].path, p)) seen = 1;
        int err = seen ? 0 : map_file(set, p);
        free(p);
        if (err) goto out;
    }
    if (frigg_st_finish(set)) goto out;
    json_object_foreach(wm, name, fv) {
        frigg_tensor *t = frigg_st_find(set, name);
        if (!t) {
            frigg_set_error("%s: tensor \"%s\" is listed in the index but not in %s", index_path, name,
                            json_string_value(fv));
            goto out;
        }
        const char *fp = set->files[t->file].path, *base = strrchr(fp, '/');
        if (strcmp(base ? base + 1 : fp, json_string_value(fv))) {
            frigg_set_error("%s: tensor \"%s\" is in %s, the index says %s", index_path, name, fp,
                            json_string_value(fv));
            goto out;
        }
    }
    if ((size_t)set->ntensors != json_object_size(wm)) {
        for (int i = 0; i < set->ntensors; i++)
            if (!json_object_get(wm, set->tensors[i].name)) {
                frigg_set_error("%s: tensor \"%s\" (in %s) is not listed in the index", index_path,
                                set->tensors[i].name, set->files[set->tensors[i].file].path);
                goto out;
            }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int frigg_st_open_dir(frigg_st_set *set, const char *dir) {
    memset(set, 0, sizeof *set);
    char *idx = frigg_path_join(dir, "model.safetensors.index.json");
    char *single = frigg_path_join(dir, "model.safetensors");
    int rc;
    if (frigg_file_exists(idx)) {
        rc = open_index(set, dir, idx);
    } else if (frigg_file_exists(single)) {
        rc = map_file(set, single);
        if (!rc) rc = frigg_st_finish(set);
    } else {
        frigg_set_error("%s: no model.safetensors or model.safetensors.index.json", dir);
        rc = -1;
    }
    free(idx);
    free(single);
    if (rc) frigg_st_close(set);
    return rc;
}

void frigg_st_close(frigg_st_set *set) {
    for (int i = 0; i < set->ntensors; i++) free(set->tensors[i].name);
    free(set->tensors);
    for (int i = 0; i < set->nfiles; i++) {
        if (set->files[i].map) munmap(set->files[i].map, set->files[i].size);
        free(set->files[i].path);
    }
    free(set->files);
    memset(set, 0, sizeof *set);
}
