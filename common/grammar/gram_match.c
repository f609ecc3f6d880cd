/* gram_match.c — the recogniser: a set of configurations (a top DFA state over a stack of return states),
 * stepped one byte at a time. Frames are hash-consed in a pool, so equal stacks are one id and the set stays
 * as small as the grammar's ambiguity at that point; a frame is made only when a byte actually enters the
 * called rule, and the pool is compacted when it has grown well past what the set still uses. */
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

/* ---- frames ---- */
void gpool_init(gpool *p) { memset(p, 0, sizeof *p); }

void gpool_free(gpool *p) {
    free(p->fs);
    free(p->fp);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

void gpool_clear(gpool *p) {
    p->n = 0;
    if (p->slot) memset(p->slot, 0, (p->mask + 1) * sizeof *p->slot);
}

static size_t frame_hash(int32_t s, int32_t par) {
    uint64_t h = (uint64_t)(uint32_t)s * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)par * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 31));
}

static void pool_grow(gpool *p) {
    size_t cap = p->mask ? (p->mask + 1) * 2 : 256;
    int32_t *slot = frigg_xcalloc(cap, sizeof *slot);
    for (size_t i = 0; i < p->n; i++) {
        size_t h = frame_hash(p->fs[i], p->fp[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = (int32_t)i + 1;
    }
    free(p->slot);
    p->slot = slot;
    p->mask = cap - 1;
}

int32_t gpool_frame(gpool *p, int32_t s, int32_t par) {
    if ((p->n + 1) * 2 > p->mask + 1 || !p->slot) pool_grow(p);
    size_t h = frame_hash(s, par) & p->mask;
    while (p->slot[h]) {
        int32_t i = p->slot[h] - 1;
        if (p->fs[i] == s && p->fp[i] == par) return i;
        h = (h + 1) & p->mask;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 256;
        p->fs = frigg_xrealloc(p->fs, p->cap * sizeof *p->fs);
        p->fp = frigg_xrealloc(p->fp, p->cap * sizeof *p->fp);
    }
    int32_t id = (int32_t)p->n++;
    p->fs[id] = s;
    p->fp[id] = par;
    p->slot[h] = id + 1;
    return id;
}

void gcfgv_push_unique(gcfgv *v, gcfg c) {
    for (int i = 0; i < v->n; i++)
        if (v->v[i].s == c.s && v->v[i].par == c.par) return;
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 8;
        v->v = frigg_xrealloc(v->v, (size_t)v->cap * sizeof *v->v);
    }
    v->v[v->n++] = c;
}

/* ---- one byte ---- */
/* Frames a call would push, top first, not yet made: they are made only once a byte lands inside. */
typedef struct gchain {
    int32_t ret;
    const struct gchain *below;
} gchain;

static int32_t materialize(gpool *p, const gchain *c, int32_t par) {
    if (!c) return par;
    int32_t below = materialize(p, c->below, par);
    return gpool_frame(p, c->ret, below);
}

static void visit(const frigg_grammar *g, gpool *p, int32_t s, int32_t par, const gchain *ch, int cls, gcfgv *out) {
    int32_t t = g->trans[(size_t)s * g->ncls + cls];
    if (t >= 0) gcfgv_push_unique(out, (gcfg){t, materialize(p, ch, par)});
    for (int32_t k = g->call_off[s]; k < g->call_off[s + 1]; k++) {
        gchain c2 = {g->calls[k].ret, ch};
        visit(g, p, g->rule_start[g->calls[k].rule], par, &c2, cls, out);
    }
    /* the rule may end here: the byte may belong to the caller (a called rule's start never accepts, so this
     * happens only with nothing pending) */
    if (!ch && g->accept[s] && par >= 0) visit(g, p, p->fs[par], p->fp[par], NULL, cls, out);
}

void gstep(const frigg_grammar *g, gpool *p, const gcfg *in, int nin, uint8_t byte, gcfgv *out) {
    out->n = 0;
    int cls = g->cls[byte];
    for (int i = 0; i < nin; i++) visit(g, p, in[i].s, in[i].par, NULL, cls, out);
}

int gcan_pop_to(const frigg_grammar *g, const gpool *p, const gcfg *in, int nin, int32_t bottom) {
    for (int i = 0; i < nin; i++) {
        int32_t s = in[i].s, par = in[i].par;
        while (g->accept[s]) {
            if (par == bottom) return 1;
            if (par < 0) break;
            s = p->fs[par];
            par = p->fp[par];
        }
    }
    return 0;
}

/* ---- the matcher ---- */
struct frigg_gmatcher {
    const frigg_grammar *g;
    gpool pool;
    gcfgv cur, a, b;
    int ended;
    size_t gc_at;
};

frigg_gmatcher *frigg_gmatcher_new(const frigg_grammar *g) {
    frigg_gmatcher *m = frigg_xcalloc(1, sizeof *m);
    m->g = g;
    gpool_init(&m->pool);
    gcfgv_push_unique(&m->cur, (gcfg){g->rule_start[0], GPAR_END});
    m->gc_at = 4096;
    return m;
}

static void cfgv_copy(gcfgv *dst, const gcfgv *src) {
    dst->n = 0;
    for (int i = 0; i < src->n; i++) gcfgv_push_unique(dst, src->v[i]);
}

frigg_gmatcher *frigg_gmatcher_clone(const frigg_gmatcher *m) {
    frigg_gmatcher *c = frigg_xcalloc(1, sizeof *c);
    c->g = m->g;
    c->ended = m->ended;
    c->gc_at = m->gc_at;
    gpool *p = &c->pool;
    p->n = p->cap = m->pool.n;
    p->fs = frigg_xmalloc((p->cap ? p->cap : 1) * sizeof *p->fs);
    p->fp = frigg_xmalloc((p->cap ? p->cap : 1) * sizeof *p->fp);
    if (p->n) {
        memcpy(p->fs, m->pool.fs, p->n * sizeof *p->fs);
        memcpy(p->fp, m->pool.fp, p->n * sizeof *p->fp);
    }
    if (m->pool.slot) {
        p->mask = m->pool.mask;
        p->slot = frigg_xmalloc((p->mask + 1) * sizeof *p->slot);
        memcpy(p->slot, m->pool.slot, (p->mask + 1) * sizeof *p->slot);
    }
    cfgv_copy(&c->cur, &m->cur);
    return c;
}

void frigg_gmatcher_free(frigg_gmatcher *m) {
    if (!m) return;
    gpool_free(&m->pool);
    free(m->cur.v);
    free(m->a.v);
    free(m->b.v);
    free(m);
}

/* Keep only the frames the set still stands on (each stack rebuilt bottom up, so the pool stays hash-consed). */
static int32_t remap(const gpool *old, gpool *nw, int32_t *memo, int32_t f) {
    if (f < 0) return f;
    if (memo[f] != -3) return memo[f];
    int32_t below = remap(old, nw, memo, old->fp[f]);
    return memo[f] = gpool_frame(nw, old->fs[f], below);
}

static void collect(frigg_gmatcher *m) {
    gpool nw;
    gpool_init(&nw);
    int32_t *memo = frigg_xmalloc((m->pool.n ? m->pool.n : 1) * sizeof *memo);
    for (size_t i = 0; i < m->pool.n; i++) memo[i] = -3;
    for (int i = 0; i < m->cur.n; i++) m->cur.v[i].par = remap(&m->pool, &nw, memo, m->cur.v[i].par);
    free(memo);
    gpool_free(&m->pool);
    m->pool = nw;
    m->gc_at = m->pool.n * 4 > 4096 ? m->pool.n * 4 : 4096;
}

/* Run the bytes from the current set; the result in *res (m->a or m->b), NULL when some byte is refused. */
static gcfgv *run(frigg_gmatcher *m, const uint8_t *s, size_t n) {
    gcfgv *x = &m->a, *y = &m->b;
    cfgv_copy(x, &m->cur);
    for (size_t i = 0; i < n; i++) {
        gstep(m->g, &m->pool, x->v, x->n, s[i], y);
        if (!y->n) return NULL;
        gcfgv *t = x;
        x = y;
        y = t;
    }
    return x;
}

int frigg_gmatcher_accepts(frigg_gmatcher *m, const void *bytes, size_t n) {
    if (m->ended) return n == 0;
    return run(m, bytes, n) != NULL;
}

int frigg_gmatcher_advance(frigg_gmatcher *m, const void *bytes, size_t n) {
    if (m->ended) return n ? -1 : 0;
    gcfgv *r = run(m, bytes, n);
    if (!r) return -1;
    cfgv_copy(&m->cur, r);
    if (m->pool.n > m->gc_at) collect(m);
    return 0;
}

int frigg_gmatcher_can_end(const frigg_gmatcher *m) {
    return m->ended || gcan_pop_to(m->g, &m->pool, m->cur.v, m->cur.n, GPAR_END);
}

int frigg_gmatcher_is_done(const frigg_gmatcher *m) {
    if (m->ended) return 1;
    if (!frigg_gmatcher_can_end(m)) return 0;
    const frigg_grammar *g = m->g;
    for (int i = 0; i < m->cur.n; i++) {
        int32_t s = m->cur.v[i].s, par = m->cur.v[i].par;
        for (;;) {
            if (g->has_out[s]) return 0;
            if (!g->accept[s] || par < 0) break;
            s = m->pool.fs[par];
            par = m->pool.fp[par];
        }
    }
    return 1;
}

int frigg_gmatcher_ended(const frigg_gmatcher *m) { return m->ended; }
int frigg_gmatcher_n_stacks(const frigg_gmatcher *m) { return m->cur.n; }

int frigg_gmatcher_advance_token(frigg_gmatcher *m, const frigg_gvocab *v, int32_t id) {
    if (m->ended || id < 0 || id >= v->V) return -1;
    if (v->is_end[id]) {
        if (!frigg_gmatcher_can_end(m)) return -1;
        m->ended = 1;
        return 0;
    }
    size_t n = v->off[id + 1] - v->off[id];
    if (!n) return -1;
    return frigg_gmatcher_advance(m, v->bytes + v->off[id], n);
}

/* For the masker: the matcher's configurations and pool (read-only). */
const gcfg *gmatcher_cfgs(const frigg_gmatcher *m, int *n, const gpool **pool, int *ended) {
    *n = m->cur.n;
    *pool = &m->pool;
    *ended = m->ended;
    return m->cur.v;
}
