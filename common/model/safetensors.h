/* safetensors.h — read-only, mmap-backed safetensors (single file or sharded via
 * model.safetensors.index.json). Tensors are used in place from the mapping. */
#ifndef FRIGG_SAFETENSORS_H
#define FRIGG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* I32 and I64 carry the integer tensors of quantized checkpoints (compressed-tensors' weight_packed and
 * weight_shape); the model binder refuses them wherever it expects a float tensor. */
typedef enum { FRIGG_ST_BF16, FRIGG_ST_F16, FRIGG_ST_F32, FRIGG_ST_I32, FRIGG_ST_I64 } frigg_st_dtype;

#define FRIGG_ST_MAXDIM 4

typedef struct {
    char *name;
    frigg_st_dtype dtype;
    int ndim;
    int64_t shape[FRIGG_ST_MAXDIM];
    const void *data;       /* inside the file's mapping */
    size_t nbytes;
    int file;               /* index into the set's files */
    int used;               /* set by the model binder: an unused tensor is an error */
} frigg_tensor;

typedef struct {
    char *path;
    void *map;
    size_t size;
} frigg_st_file;

typedef struct {
    frigg_st_file *files;
    int nfiles;
    frigg_tensor *tensors;  /* sorted by name */
    int ntensors;
} frigg_st_set;

size_t frigg_st_dtype_size(frigg_st_dtype t);
const char *frigg_st_dtype_name(frigg_st_dtype t);

/* Parse one safetensors file image (header + data) already in memory. The tensors' data pointers
 * point into `buf`. Used by the loader and directly by the fuzz target. Appends to the set. */
int frigg_st_parse(frigg_st_set *set, const void *buf, size_t size, const char *path, int file_index);

/* Open a model directory: model.safetensors.index.json if present, else model.safetensors. */
int frigg_st_open_dir(frigg_st_set *set, const char *dir);
/* Open one file. */
int frigg_st_open_file(frigg_st_set *set, const char *path);
void frigg_st_close(frigg_st_set *set);

/* Finish: sort by name and reject duplicates (call after the last open/parse). */
int frigg_st_finish(frigg_st_set *set);
frigg_tensor *frigg_st_find(frigg_st_set *set, const char *name);

#endif
