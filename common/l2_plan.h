/* l2_plan.h — which decode kernel asks L2 to prefetch which later weights (FRIGG_L2_PREFETCH). Host-side
 * logic only, so it is tested on the CPU; the CUDA engine turns a plan into fk_prefetch ranges per launch.
 *
 * A plan is a comma-separated list of KERNEL:TARGET=SIZE items, e.g. "o:gu=all,down:next-qkv=8".
 *   KERNEL: qkv, o, gu, down (the decode GEMVs of a layer, in execution order; attention sits between qkv and o)
 *   TARGET: o, gu, down, next-qkv (the next virtual layer's gqkv); it must come after KERNEL
 *   SIZE:   MiB (a decimal number > 0) or "all"
 * When several items name one target, each takes up where the one before it (in execution order) stopped,
 * so "qkv:gu=8,o:gu=all" splits gate_up between the two kernels. "off" (or empty) is the empty plan. Each
 * kernel carries at most two items. */
#ifndef FRIGG_L2_PLAN_H
#define FRIGG_L2_PLAN_H

enum { FRIGG_L2_QKV, FRIGG_L2_O, FRIGG_L2_GU, FRIGG_L2_DOWN, FRIGG_L2_NEXT_QKV, FRIGG_L2_N };
#define FRIGG_L2_MAX_ITEMS 8
#define FRIGG_L2_ALL (~0ULL)

typedef struct {
    int n;
    struct {
        int kernel, target;
        unsigned long long bytes; /* FRIGG_L2_ALL: the whole target */
    } item[FRIGG_L2_MAX_ITEMS];
} frigg_l2_plan;

typedef struct {
    int target;
    unsigned long long off, len; /* bytes into the target's weights */
} frigg_l2_range;

/* Parse `s` into *p. 0, or -1 with frigg_error() naming what is wrong. */
int frigg_l2_plan_parse(const char *s, frigg_l2_plan *p);
/* For one layer whose targets hold size[t] bytes (0: absent, e.g. no next layer): the ranges each kernel
 * k (FRIGG_L2_QKV..FRIGG_L2_DOWN) prefetches into out[k][0..count[k]). Lengths are multiples of 16. */
void frigg_l2_plan_layer(const frigg_l2_plan *p, const unsigned long long size[FRIGG_L2_N], frigg_l2_range out[4][2],
                         int count[4]);
/* The plan back as text (for benchmark rows): "off" or the items, normalised. */
void frigg_l2_plan_format(const frigg_l2_plan *p, char *buf, int cap);

#endif
