/* l2_plan.c — FRIGG_L2_PREFETCH plans (l2_plan.h). */
#include "l2_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const names[FRIGG_L2_N] = {"qkv", "o", "gu", "down", "next-qkv"};

static int lookup(const char *s, size_t n) {
    for (int i = 0; i < FRIGG_L2_N; i++)
        if (strlen(names[i]) == n && !strncmp(s, names[i], n)) return i;
    return -1;
}

int frigg_l2_plan_parse(const char *s, frigg_l2_plan *p) {
    memset(p, 0, sizeof *p);
    if (!s || !*s || !strcmp(s, "off")) return 0;
    const char *at = s;
    for (;;) {
        const char *end = strchr(at, ','), *colon = strchr(at, ':'), *eq = strchr(at, '=');
        if (!end) end = at + strlen(at);
        if (!colon || !eq || colon > eq || eq > end) {
            frigg_set_error("FRIGG_L2_PREFETCH: '%.*s' is not KERNEL:TARGET=SIZE", (int)(end - at), at);
            return -1;
        }
        int k = lookup(at, (size_t)(colon - at)), t = lookup(colon + 1, (size_t)(eq - colon - 1));
        if (k < 0 || k > FRIGG_L2_DOWN) {
            frigg_set_error("FRIGG_L2_PREFETCH: kernel '%.*s' is not qkv, o, gu or down", (int)(colon - at), at);
            return -1;
        }
        if (t <= k || t == FRIGG_L2_QKV) {
            frigg_set_error("FRIGG_L2_PREFETCH: target '%.*s' must be o, gu, down or next-qkv, after kernel %s",
                            (int)(eq - colon - 1), colon + 1, names[k]);
            return -1;
        }
        unsigned long long bytes;
        size_t vn = (size_t)(end - eq - 1);
        if (vn == 3 && !strncmp(eq + 1, "all", 3)) {
            bytes = FRIGG_L2_ALL;
        } else {
            char num[32], *e;
            if (vn == 0 || vn >= sizeof num) goto bad_size;
            memcpy(num, eq + 1, vn);
            num[vn] = 0;
            double mb = strtod(num, &e);
            if (*e || !(mb > 0) || mb > 1048576) goto bad_size;
            bytes = (unsigned long long)(mb * 1048576.0);
        }
        int per_kernel = 0;
        for (int i = 0; i < p->n; i++) {
            if (p->item[i].kernel == k && p->item[i].target == t) {
                frigg_set_error("FRIGG_L2_PREFETCH: %s:%s appears twice", names[k], names[t]);
                return -1;
            }
            per_kernel += p->item[i].kernel == k;
        }
        if (per_kernel == 2 || p->n == FRIGG_L2_MAX_ITEMS) {
            frigg_set_error("FRIGG_L2_PREFETCH: at most two items per kernel (and %d in all)", FRIGG_L2_MAX_ITEMS);
            return -1;
        }
        p->item[p->n].kernel = k;
        p->item[p->n].target = t;
        p->item[p->n].bytes = bytes;
        p->n++;
        if (!*end) return 0;
        at = end + 1;
        continue;
    bad_size:
        frigg_set_error("FRIGG_L2_PREFETCH: size '%.*s' is neither a number of MiB > 0 nor 'all'", (int)vn, eq + 1);
        return -1;
    }
}

void frigg_l2_plan_layer(const frigg_l2_plan *p, const unsigned long long size[FRIGG_L2_N], frigg_l2_range out[4][2],
                         int count[4]) {
    unsigned long long done[FRIGG_L2_N] = {0};
    for (int k = 0; k < 4; k++) {
        count[k] = 0;
        for (int i = 0; i < p->n; i++) { /* items of kernel k in the order given */
            if (p->item[i].kernel != k) continue;
            int t = p->item[i].target;
            unsigned long long left = size[t] - done[t], len = p->item[i].bytes < left ? p->item[i].bytes : left;
            len &= ~15ULL; /* the bulk prefetch moves multiples of 16 bytes */
            if (!len) continue;
            out[k][count[k]].target = t;
            out[k][count[k]].off = done[t];
            out[k][count[k]].len = len;
            count[k]++;
            done[t] += len;
        }
    }
}

void frigg_l2_plan_format(const frigg_l2_plan *p, char *buf, int cap) {
    if (cap < 1) return;
    buf[0] = 0;
    if (!p->n) {
        snprintf(buf, (size_t)cap, "off");
        return;
    }
    int used = 0;
    for (int i = 0; i < p->n && used < cap; i++) {
        char size[32];
        if (p->item[i].bytes == FRIGG_L2_ALL) snprintf(size, sizeof size, "all");
        else snprintf(size, sizeof size, "%g", p->item[i].bytes / 1048576.0);
        used += snprintf(buf + used, (size_t)(cap - used), "%s%s:%s=%s", i ? "," : "", names[p->item[i].kernel],
                         names[p->item[i].target], size);
    }
}
