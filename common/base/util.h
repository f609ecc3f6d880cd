/* util.h — error reporting, bf16/f16 conversions, small helpers shared by all of frigg. */
#ifndef FRIGG_UTIL_H
#define FRIGG_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Errors: a failing library call returns -1 (or NULL) and leaves a message here, like dlerror().
 * The message is per thread, so worker threads cannot clobber the caller's. */
void frigg_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *frigg_error(void);

void *frigg_xmalloc(size_t n);          /* aborts with a message on out-of-memory */
void *frigg_xcalloc(size_t n, size_t sz);
void *frigg_xrealloc(void *p, size_t n);
char *frigg_xstrdup(const char *s);
double frigg_now_ms(void);              /* monotonic clock */

/* Read a whole file (NUL-terminated); NULL and an error on failure. */
char *frigg_read_file(const char *path, size_t *len_out);
/* Join a directory and a file name into a new string. */
char *frigg_path_join(const char *dir, const char *name);
int frigg_file_exists(const char *path);

/* bfloat16: the top 16 bits of an IEEE fp32. Round-to-nearest-even, as torch does. */
static inline float frigg_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t frigg_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
/* Round an fp32 value to the nearest bf16 value, kept as fp32: the CPU engine stores activations
 * this way so that every place HF rounds to bf16 is one visible call. */
static inline float frigg_round_bf16(float f) { return frigg_bf16_to_f32(frigg_f32_to_bf16(f)); }

float frigg_f16_to_f32(uint16_t h);

#endif
