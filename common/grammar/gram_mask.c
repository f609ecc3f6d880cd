/* gram_mask.c — the allowed-token mask of a recogniser state, by walking the vocabulary's trie with the
 * recogniser, and its cache.
 *
 * A walk starts from a DFA state s over an unknown stack (GPAR_BASE): a token is accepted where its bytes run
 * through s's rule (and whatever it calls); where the rule may end with bytes of the token left, the walk
 * records that trie node as a pop point: those tokens' fate depends on the frame below. So the mask of a stack
 * [s, r1, r2, ...] is built level by level, each level cached in a tree keyed by the frames:
 *   level 1 (s):           acc = tokens that stay inside s's rule; pops = pop points
 *   level k+1 (.., r_k):   acc = acc_k plus the tokens below each pop point that run on from r_k; pops = where
 *                          those may pop past r_k
 * and the answer for a stack is acc at the first level without pops, or at its bottom (popping past the bottom
 * is the end of the document: those tokens are refused). Most states need one level (a rule's bytes rarely
 * reach its end within one token), a string's inside needs the frames its closing quote returns to, and a mask
 * seen before costs only the lookups and a copy: this is XGrammar's split of a mask into the part that depends
 * on the state alone and the part that depends on the stack, with the second cached per stack prefix.
 *
 * A walk reads at most max_depth bytes (the longest token), so two DFA states that no string of that length
 * tells apart (the same acceptance after every such string; a state with calls only equals itself) have the
 * same masks and pop points: the cache is keyed by a class of such states (classes_build), computed once per
 * masker. A counted string is one state per position (and per partial escape), all alike until the count's end
 * is within one token's reach: without the classes each position of a long string was a cold walk of the
 * whole trie (milliseconds) the first time a document reached it. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

/* past this the cache is emptied and starts again (a bound on memory, not on correctness) */
#define GM_CACHE_LIMIT ((size_t)512 << 20)

enum { GM_IDS, GM_BITS, GM_NOT_IDS };
typedef struct {
    uint8_t kind;
    int32_t n;       /* ids listed (GM_IDS, GM_NOT_IDS) */
    int32_t count;   /* ids allowed */
    void *p;
} gmask;

typedef struct gnode {
    int32_t key;
    gmask acc;
    int32_t *pops;
    int32_t npops;
    struct gnode **kids;
    int32_t nk, capk;
} gnode;

typedef struct {
    int32_t *v;
    size_t n, cap;
} ivec;

/* What one walk needs of its own: the fill path's under the masker's lock, each precompute thread its own. */
typedef struct {
    gpool pool;         /* the walks' frames (cleared per walk) */
    gcfgv *sets;        /* [max_depth + 2]: configurations after each depth's bytes */
    int nsets;
    uint32_t *bits;     /* the accepted tokens */
    ivec pops;          /* the pop points */
    long walks, visited;
} gscratch;

struct frigg_gmasker {
    const frigg_grammar *g;
    const frigg_gvocab *v;
    pthread_mutex_t mu;
    gnode **lvl1;       /* [g->n] */
    gscratch sc;        /* the fill path's (under mu) */
    int32_t *rep;       /* [g->n]: the state whose cache entry serves this one (classes_build); NULL until then */
    int32_t nclasses;
    double classes_ms;  /* classes_build's time */
    int W;              /* words of a mask */
    ivec pops;
    size_t bytes;
    frigg_gmask_stats st;
};

static void ipush(ivec *x, int32_t v) {
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 64;
        x->v = frigg_xrealloc(x->v, x->cap * sizeof *x->v);
    }
    x->v[x->n++] = v;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- masks ---- */
static void set_bit(uint32_t *b, int32_t i) { b[i >> 5] |= 1u << (i & 31); }

static int popcount_words(const uint32_t *b, int W) {
    int n = 0;
    for (int i = 0; i < W; i++) n += __builtin_popcount(b[i]);
    return n;
}

/* The ids whose bit is `want`, skipping the words that hold none of them. */
static int32_t list_ids(const uint32_t *bits, int V, int W, int want, int32_t *ids) {
    int32_t k = 0;
    for (int w = 0; w < W; w++) {
        uint32_t x = want ? bits[w] : ~bits[w];
        if (w == W - 1 && (V & 31)) x &= (1u << (V & 31)) - 1;
        while (x) {
            ids[k++] = w * 32 + __builtin_ctz(x);
            x &= x - 1;
        }
    }
    return k;
}

static gmask compress(const uint32_t *bits, int V, int W, size_t *bytes) {
    int n = popcount_words(bits, W);
    gmask m = {0};
    m.count = n;
    if (n < V / 32 || V - n < V / 32) {
        int want = n < V / 32 ? 1 : 0;
        m.kind = want ? GM_IDS : GM_NOT_IDS;
        m.n = want ? n : V - n;
        int32_t *ids = frigg_xmalloc((size_t)(m.n ? m.n : 1) * sizeof *ids);
        list_ids(bits, V, W, want, ids);
        m.p = ids;
        *bytes += (size_t)m.n * sizeof *ids;
    } else {
        m.kind = GM_BITS;
        m.p = frigg_xmalloc((size_t)W * sizeof(uint32_t));
        memcpy(m.p, bits, (size_t)W * sizeof(uint32_t));
        *bytes += (size_t)W * sizeof(uint32_t);
    }
    return m;
}

/* out |= m; first: out holds nothing yet (written, not or-ed) */
static void mask_or(uint32_t *out, const gmask *m, int V, int W, int first) {
    if (m->kind == GM_BITS) {
        const uint32_t *b = m->p;
        if (first) memcpy(out, b, (size_t)W * sizeof *out);
        else for (int i = 0; i < W; i++) out[i] |= b[i];
        return;
    }
    const int32_t *ids = m->p;
    if (m->kind == GM_IDS) {
        if (first) memset(out, 0, (size_t)W * sizeof *out);
        for (int32_t k = 0; k < m->n; k++) set_bit(out, ids[k]);
        return;
    }
    /* all but the listed ids: where out already holds bits, a listed id keeps its bit */
    if (first) {
        memset(out, 0xFF, (size_t)W * sizeof *out);
        for (int32_t k = 0; k < m->n; k++) out[ids[k] >> 5] &= ~(1u << (ids[k] & 31));
    } else {
        uint32_t *keep = frigg_xmalloc((size_t)m->n * sizeof *keep + 1);
        for (int32_t k = 0; k < m->n; k++) keep[k] = (out[ids[k] >> 5] >> (ids[k] & 31)) & 1;
        memset(out, 0xFF, (size_t)W * sizeof *out);
        for (int32_t k = 0; k < m->n; k++)
            if (!keep[k]) out[ids[k] >> 5] &= ~(1u << (ids[k] & 31));
        free(keep);
    }
    if (V & 31) out[W - 1] &= (1u << (V & 31)) - 1;
}

/* ---- the walk ---- */
static void set1(gcfgv *v, gcfg c) {
    if (!v->cap) {
        v->cap = 8;
        v->v = frigg_xmalloc((size_t)v->cap * sizeof *v->v);
    }
    v->v[0] = c;
    v->n = 1;
}

static int has_kids(const frigg_gvocab *v, int32_t i) { return v->tend[i] > i + 1; }

static void scratch_init(gscratch *sc, const frigg_gvocab *v) {
    memset(sc, 0, sizeof *sc);
    gpool_init(&sc->pool);
    sc->nsets = v->max_depth + 2;
    sc->sets = frigg_xcalloc((size_t)sc->nsets, sizeof *sc->sets);
    sc->bits = frigg_xcalloc((size_t)(v->V + 31) / 32 + 1, sizeof *sc->bits);
}

static void scratch_free(gscratch *sc) {
    gpool_free(&sc->pool);
    for (int i = 0; i < sc->nsets; i++) free(sc->sets[i].v);
    free(sc->sets);
    free(sc->bits);
    free(sc->pops.v);
}

/* The subtree below trie node `from` from the configurations start (at from's depth): accepted tokens into
 * sc->bits, pop points appended to sc->pops. Reads only the grammar and the vocabulary of mk, so threads with
 * scratches of their own walk at once. */
static void walk(const frigg_gmasker *mk, gscratch *sc, const gcfg *start, int nstart, int32_t from) {
    const frigg_grammar *g = mk->g;
    const frigg_gvocab *v = mk->v;
    const int ncls = g->ncls;
    uint32_t *bits = sc->bits;
    gpool_clear(&sc->pool);
    int d0 = v->td[from];
    gcfgv *sets = sc->sets;
    sets[d0].n = 0;
    for (int i = 0; i < nstart; i++) gcfgv_push_unique(&sets[d0], start[i]);
    if (has_kids(v, from) && gcan_pop_to(g, &sc->pool, sets[d0].v, sets[d0].n, GPAR_BASE)) ipush(&sc->pops, from);
    sc->walks++;
    long visited = 0;
    int32_t i = from + 1, end = v->tend[from];
    while (i < end) {
        int d = v->td[i];
        const gcfgv *S = &sets[d - 1];
        gcfgv *T = &sets[d];
        visited++;
        int32_t s0 = S->v[0].s, p0 = S->v[0].par;
        if (S->n == 1 && g->call_off[s0] == g->call_off[s0 + 1] && (p0 < 0 || !g->accept[s0])) {
            /* one configuration, no call, no pop: a plain DFA step */
            int32_t t = g->trans[(size_t)s0 * ncls + g->cls[v->tb[i]]];
            if (t < 0) {
                i = v->tend[i];
                continue;
            }
            set1(T, (gcfg){t, p0});
            for (int32_t k = v->ttok[i]; k < v->ttok[i + 1]; k++) set_bit(bits, v->ids[k]);
            if (has_kids(v, i) && g->accept[t] && (p0 == GPAR_BASE || gcan_pop_to(g, &sc->pool, T->v, 1, GPAR_BASE)))
                ipush(&sc->pops, i);
            i++;
            continue;
        }
        gstep(g, &sc->pool, S->v, S->n, v->tb[i], T);
        if (!T->n) {
            i = v->tend[i];
            continue;
        }
        for (int32_t k = v->ttok[i]; k < v->ttok[i + 1]; k++) set_bit(bits, v->ids[k]);
        if (has_kids(v, i) && gcan_pop_to(g, &sc->pool, T->v, T->n, GPAR_BASE)) ipush(&sc->pops, i);
        i++;
    }
    sc->visited += visited;
}

/* A cache node from sc's walks (their bits and pop points); its memory added to *bytes. */
static gnode *make_node(const frigg_gmasker *mk, gscratch *sc, int32_t key, size_t *bytes) {
    gnode *n = frigg_xcalloc(1, sizeof *n);
    n->key = key;
    /* pops: sorted, unique */
    if (sc->pops.n) {
        qsort(sc->pops.v, sc->pops.n, sizeof *sc->pops.v, cmp_i32);
        size_t k = 0;
        for (size_t i = 0; i < sc->pops.n; i++)
            if (!k || sc->pops.v[k - 1] != sc->pops.v[i]) sc->pops.v[k++] = sc->pops.v[i];
        n->npops = (int32_t)k;
        n->pops = frigg_xmalloc(k * sizeof *n->pops);
        memcpy(n->pops, sc->pops.v, k * sizeof *n->pops);
        *bytes += k * sizeof *n->pops;
    }
    n->acc = compress(sc->bits, mk->v->V, mk->W, bytes);
    *bytes += sizeof *n;
    return n;
}

/* The walk stats of the fill path's scratch into the masker's (under mu). */
static void take_walk_stats(frigg_gmasker *mk, gscratch *sc) {
    mk->st.walks += sc->walks;
    mk->st.nodes_visited += sc->visited;
    sc->walks = sc->visited = 0;
}

/* s's level-1 node, walked with sc (no lock needed: the caller inserts it). */
static gnode *level1_walk(const frigg_gmasker *mk, gscratch *sc, int32_t s, size_t *bytes) {
    memset(sc->bits, 0, (size_t)mk->W * sizeof *sc->bits);
    sc->pops.n = 0;
    gcfg c = {s, GPAR_BASE};
    walk(mk, sc, &c, 1, 0);
    return make_node(mk, sc, s, bytes);
}

/* ---- states alike for every walk ----
 * Moore's partition refinement, stopped after max_depth + 1 rounds (or once a round splits nothing): states start
 * in classes by (accept, has_out), a state with calls in one of its own; each round splits a class by the
 * classes its byte transitions lead to. After k rounds two states of one class accept the same strings of up to
 * k bytes and reach the same call states by the same strings, which is all a walk from either sees. */
static uint64_t mix64(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* A state's byte transitions as runs of classes with one target (t -1: none), made once; each round reads a
 * state's signature as those runs with adjacent runs of equal target class merged, which is the run-length form
 * of its row of target classes, so equal rows give equal signatures, at a cost of a few runs a state rather than
 * one lookup per byte class. */
typedef struct {
    int32_t *off, *t; /* runs of state s: t[off[s] .. off[s + 1]), each to one target, its classes implied */
    int32_t *c0;      /* first class of each run */
} grows;

/* The class-row signature of s under cl into sig (pairs: first class, target class); returns its length. */
static int32_t row_sig(const grows *r, const int32_t *cl, int32_t s, int32_t *sig) {
    int32_t k = 0;
    for (int32_t j = r->off[s]; j < r->off[s + 1]; j++) {
        int32_t tc = r->t[j] < 0 ? -1 : cl[r->t[j]];
        if (k && sig[k - 1] == tc) continue;
        sig[k++] = r->c0[j];
        sig[k++] = tc;
    }
    return k;
}

static void classes_build(frigg_gmasker *mk) {
    double t0 = frigg_now_ms();
    const frigg_grammar *g = mk->g;
    int32_t n = g->n, C = g->ncls, n1 = n ? n : 1;
    grows rw;
    rw.off = frigg_xmalloc(((size_t)n + 1) * sizeof *rw.off);
    size_t nr = 0, rcap = (size_t)n1 * 4;
    rw.t = frigg_xmalloc(rcap * sizeof *rw.t);
    rw.c0 = frigg_xmalloc(rcap * sizeof *rw.c0);
    for (int32_t s = 0; s < n; s++) {
        rw.off[s] = (int32_t)nr;
        const int32_t *t = g->trans + (size_t)s * C;
        for (int32_t c = 0; c < C; c++) {
            if (c && t[c] == t[c - 1]) continue;
            if (nr == rcap) {
                rcap *= 2;
                rw.t = frigg_xrealloc(rw.t, rcap * sizeof *rw.t);
                rw.c0 = frigg_xrealloc(rw.c0, rcap * sizeof *rw.c0);
            }
            rw.t[nr] = t[c];
            rw.c0[nr++] = c;
        }
    }
    rw.off[n] = (int32_t)nr;
    int32_t *cl = frigg_xmalloc((size_t)n1 * sizeof *cl), *nx = frigg_xmalloc((size_t)n1 * sizeof *nx);
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap <<= 1;
    int32_t *slot = frigg_xmalloc(cap * sizeof *slot); /* a state standing for its signature, -1 empty */
    uint64_t *sh = frigg_xmalloc((size_t)n1 * sizeof *sh);
    int32_t *sig = frigg_xmalloc(((size_t)C * 2 + 2) * sizeof *sig);
    /* the slot owners' signatures, so that a match costs one row_sig, not two */
    int32_t *soff = frigg_xmalloc((size_t)n1 * sizeof *soff), *slen = frigg_xmalloc((size_t)n1 * sizeof *slen);
    size_t sbcap = nr * 2 + 16, sbn;
    int32_t *sbuf = frigg_xmalloc(sbcap * sizeof *sbuf);
    int32_t count = 0;
    for (int32_t s = 0; s < n; s++) /* 0..3 by (accept, has_out); a state with calls: 4 + s */
        cl[s] = g->call_off[s] != g->call_off[s + 1] ? 4 + s : g->accept[s] * 2 + (g->has_out[s] ? 1 : 0);
    for (int round = 0; round <= mk->v->max_depth + 1; round++) {
        memset(slot, 0xFF, cap * sizeof *slot);
        int32_t nc = 0;
        sbn = 0;
        for (int32_t s = 0; s < n; s++) {
            int32_t k = row_sig(&rw, cl, s, sig);
            uint64_t h = mix64(0, (uint64_t)(uint32_t)cl[s]);
            for (int32_t j = 0; j < k; j++) h = mix64(h, (uint64_t)(uint32_t)sig[j]);
            sh[s] = h;
            size_t i = (size_t)h & (cap - 1);
            for (;; i = (i + 1) & (cap - 1)) {
                int32_t o = slot[i];
                if (o < 0) {
                    slot[i] = s;
                    nx[s] = nc++;
                    if (sbn + (size_t)k > sbcap) {
                        sbcap = (sbn + (size_t)k) * 2;
                        sbuf = frigg_xrealloc(sbuf, sbcap * sizeof *sbuf);
                    }
                    memcpy(sbuf + sbn, sig, (size_t)k * sizeof *sig);
                    soff[s] = (int32_t)sbn;
                    slen[s] = k;
                    sbn += (size_t)k;
                    break;
                }
                if (sh[o] != h || cl[o] != cl[s]) continue;
                if (slen[o] == k && !memcmp(sig, sbuf + soff[o], (size_t)k * sizeof *sig)) {
                    nx[s] = nx[o];
                    break;
                }
            }
        }
        int32_t *sw = cl;
        cl = nx;
        nx = sw;
        int stable = nc == count;
        count = nc;
        if (stable) break;
    }
    /* rep: the first state of each class */
    int32_t *first = frigg_xmalloc((size_t)(count ? count : 1) * sizeof *first);
    memset(first, 0xFF, (size_t)(count ? count : 1) * sizeof *first);
    mk->rep = frigg_xmalloc((size_t)n1 * sizeof *mk->rep);
    for (int32_t s = 0; s < n; s++) {
        if (first[cl[s]] < 0) first[cl[s]] = s;
        mk->rep[s] = first[cl[s]];
    }
    mk->nclasses = count;
    mk->classes_ms = frigg_now_ms() - t0;
    free(first);
    free(sig);
    free(sbuf);
    free(soff);
    free(slen);
    free(sh);
    free(slot);
    free(nx);
    free(cl);
    free(rw.off);
    free(rw.t);
    free(rw.c0);
}

static int32_t rep_of(frigg_gmasker *mk, int32_t s) {
    if (!mk->rep) classes_build(mk);
    return mk->rep[s];
}

static gnode *level1(frigg_gmasker *mk, int32_t s) {
    s = rep_of(mk, s);
    if (mk->lvl1[s]) {
        mk->st.hits++;
        return mk->lvl1[s];
    }
    mk->st.misses++;
    mk->lvl1[s] = level1_walk(mk, &mk->sc, s, &mk->bytes);
    take_walk_stats(mk, &mk->sc);
    return mk->lvl1[s];
}

static gnode *child(frigg_gmasker *mk, gnode *n, int32_t r) {
    r = rep_of(mk, r);
    for (int32_t k = 0; k < n->nk; k++)
        if (n->kids[k]->key == r) {
            mk->st.hits++;
            return n->kids[k];
        }
    /* a pop point at the root means every token runs on in r: r's own level 1 */
    gnode *root_cont = n->npops && n->pops[0] == 0 ? level1(mk, r) : NULL;
    mk->st.misses++;
    gscratch *sc = &mk->sc;
    mask_or(sc->bits, &n->acc, mk->v->V, mk->W, 1);
    sc->pops.n = 0;
    gcfg c = {r, GPAR_BASE};
    for (int32_t k = 0; k < n->npops; k++)
        if (n->pops[k] != 0) walk(mk, sc, &c, 1, n->pops[k]);
    if (root_cont) {
        mask_or(sc->bits, &root_cont->acc, mk->v->V, mk->W, 0);
        for (int32_t k = 0; k < root_cont->npops; k++) ipush(&sc->pops, root_cont->pops[k]);
    }
    gnode *x = make_node(mk, sc, r, &mk->bytes);
    take_walk_stats(mk, sc);
    if (n->nk == n->capk) {
        n->capk = n->capk ? n->capk * 2 : 4;
        n->kids = frigg_xrealloc(n->kids, (size_t)n->capk * sizeof *n->kids);
    }
    n->kids[n->nk++] = x;
    mk->bytes += sizeof(gnode *);
    return x;
}

static void node_free(gnode *n) {
    if (!n) return;
    for (int32_t k = 0; k < n->nk; k++) node_free(n->kids[k]);
    free(n->kids);
    free(n->pops);
    free(n->acc.p);
    free(n);
}

static void cache_clear(frigg_gmasker *mk) {
    for (int32_t s = 0; s < mk->g->n; s++) {
        node_free(mk->lvl1[s]);
        mk->lvl1[s] = NULL;
    }
    mk->bytes = 0;
}

/* ---- the API ---- */
frigg_gmasker *frigg_gmasker_new(const frigg_grammar *g, const frigg_gvocab *v) {
    frigg_gmasker *mk = frigg_xcalloc(1, sizeof *mk);
    mk->g = g;
    mk->v = v;
    pthread_mutex_init(&mk->mu, NULL);
    mk->lvl1 = frigg_xcalloc((size_t)(g->n ? g->n : 1), sizeof *mk->lvl1);
    mk->W = (v->V + 31) / 32;
    scratch_init(&mk->sc, v);
    return mk;
}

void frigg_gmasker_free(frigg_gmasker *mk) {
    if (!mk) return;
    cache_clear(mk);
    free(mk->lvl1);
    free(mk->rep);
    scratch_free(&mk->sc);
    pthread_mutex_destroy(&mk->mu);
    free(mk);
}

int frigg_gmasker_fill(frigg_gmasker *mk, const frigg_gmatcher *m, uint32_t *out) {
    const frigg_gvocab *v = mk->v;
    int W = mk->W, n, ended;
    const gpool *pool;
    const gcfg *cf = gmatcher_cfgs(m, &n, &pool, &ended);
    if (ended) {
        memset(out, 0, (size_t)W * sizeof *out);
        return 0;
    }
    pthread_mutex_lock(&mk->mu);
    if (mk->bytes > GM_CACHE_LIMIT) cache_clear(mk);
    int count = 0;
    for (int i = 0; i < n; i++) {
        gnode *x = level1(mk, cf[i].s);
        int32_t f = cf[i].par;
        while (x->npops && f >= 0) {
            x = child(mk, x, pool->fs[f]);
            f = pool->fp[f];
        }
        mask_or(out, &x->acc, v->V, W, i == 0);
        count = x->acc.count;
    }
    pthread_mutex_unlock(&mk->mu);
    if (n == 0) memset(out, 0, (size_t)W * sizeof *out);
    if (n > 1) count = popcount_words(out, W); /* the union: counted once, only where there is one */
    if (frigg_gmatcher_can_end(m))
        for (int i = 0; i < v->n_end; i++) {
            int32_t id = v->end_ids[i];
            count += !((out[id >> 5] >> (id & 31)) & 1);
            set_bit(out, id);
        }
    return count;
}

int frigg_gmasker_precompute(frigg_gmasker *mk) {
    frigg_gmasker_precompute_until(mk, NULL, 1);
    pthread_mutex_lock(&mk->mu);
    int32_t n = mk->nclasses;
    pthread_mutex_unlock(&mk->mu);
    return n;
}

/* Precompute's threads: each takes the next class without a node, walks it with a scratch of its own outside the
 * lock, and inserts the node under it (unless a fill put one there meanwhile). */
typedef struct {
    frigg_gmasker *mk;
    atomic_int *stop;
    const int32_t *todo;
    int ntodo;
    atomic_int next, done;
} pre_job;

static void *pre_thread(void *arg) {
    pre_job *j = arg;
    frigg_gmasker *mk = j->mk;
    gscratch sc;
    scratch_init(&sc, mk->v);
    for (;;) {
        if (j->stop && atomic_load(j->stop)) break;
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->ntodo) break;
        int32_t s = j->todo[i];
        pthread_mutex_lock(&mk->mu);
        int have = mk->lvl1[s] != NULL;
        pthread_mutex_unlock(&mk->mu);
        if (have) continue;
        size_t bytes = 0;
        gnode *n = level1_walk(mk, &sc, s, &bytes);
        pthread_mutex_lock(&mk->mu);
        if (!mk->lvl1[s]) {
            mk->lvl1[s] = n;
            mk->bytes += bytes;
            mk->st.misses++;
            atomic_fetch_add(&j->done, 1);
            n = NULL;
        }
        take_walk_stats(mk, &sc);
        pthread_mutex_unlock(&mk->mu);
        node_free(n);
    }
    scratch_free(&sc);
    return NULL;
}

int frigg_gmasker_precompute_until(frigg_gmasker *mk, atomic_int *stop, int threads) {
    pthread_mutex_lock(&mk->mu);
    if (!mk->rep) classes_build(mk);
    int32_t *todo = frigg_xmalloc((size_t)(mk->g->n ? mk->g->n : 1) * sizeof *todo);
    int nt = 0;
    for (int32_t s = 0; s < mk->g->n; s++)
        if (mk->rep[s] == s && !mk->lvl1[s]) todo[nt++] = s;
    pthread_mutex_unlock(&mk->mu);
    pre_job j = {.mk = mk, .stop = stop, .todo = todo, .ntodo = nt};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    if (threads > 16) threads = 16;
    pthread_t th[16];
    int started = 0;
    for (int t = 1; t < threads && t < nt; t++)
        if (!pthread_create(&th[started], NULL, pre_thread, &j)) started++;
    pre_thread(&j); /* this thread is one of them */
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    free(todo);
    if (stop && atomic_load(stop)) return -1;
    return atomic_load(&j.done);
}

void frigg_gmasker_stats(frigg_gmasker *mk, frigg_gmask_stats *st) {
    pthread_mutex_lock(&mk->mu);
    *st = mk->st;
    st->bytes = mk->bytes;
    st->classes = mk->rep ? mk->nclasses : -1;
    st->classes_ms = mk->classes_ms;
    pthread_mutex_unlock(&mk->mu);
}

void frigg_grammar_apply_mask(float *logits, int vocab, const uint32_t *bits) {
    for (int i = 0; i < vocab; i++)
        if (!((bits[i >> 5] >> (i & 31)) & 1)) logits[i] = -INFINITY;
}
