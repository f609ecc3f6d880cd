/* gpu_state.h — the GPU a measurement ran on, as its result rows name it: name, SM and memory clocks, temperature,
 * read now through nvidia-smi (part of the driver, so no library of NVIDIA's is linked for it). */
#ifndef FRIGG_GPU_STATE_H
#define FRIGG_GPU_STATE_H

#include <stddef.h>

typedef struct {
    char name[128]; /* "unknown" when it cannot be read */
    int sm_clock_mhz, mem_clock_mhz, temp_c; /* -1 when they cannot be read */
} frigg_gpu_state;

/* Device `device` now: 0, or -1 with the fields at "unknown" / -1 (no nvidia-smi, no such device). */
int frigg_gpu_state_read(int device, frigg_gpu_state *st);
/* Its temperature alone (C), or -1 where it cannot be read. */
int frigg_gpu_temp(int device);
/* The fields as a result row's JSON members: "gpu":"NAME","sm_clock_mhz":N,"mem_clock_mhz":N,"temp_c":N. */
void frigg_gpu_state_json(const frigg_gpu_state *st, char *out, size_t n);

#endif
