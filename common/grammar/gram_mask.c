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
 * on the state alone and the part that depends on the stack, with the second cached per stack prefix. */
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

struct frigg_gmasker {
    const frigg_grammar *g;
    const frigg_gvocab *v;
    pthread_mutex_t mu;
    gnode **lvl1;       /* [g->n] */
    gpool pool;         /* the walks' frames (cleared per walk) */
    gcfgv *sets;        /* [max_depth + 2]: configurations after each depth's bytes */
    uint32_t *bits, *tmp;
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

/* The subtree below trie node `from` from the configurations start (at from's depth): accepted tokens into
 * mk->bits, pop points appended to mk->pops. */
static void walk(frigg_gmasker *mk, const gcfg *start, int nstart, int32_t from) {
    const frigg_grammar *g = mk->g;
    const frigg_gvocab *v = mk->v;
    const int ncls = g->ncls;
    uint32_t *bits = mk->bits;
    gpool_clear(&mk->pool);
    int d0 = v->td[from];
    gcfgv *sets = mk->sets;
    sets[d0].n = 0;
    for (int i = 0; i < nstart; i++) gcfgv_push_unique(&sets[d0], start[i]);
    if (has_kids(v, from) && gcan_pop_to(g, &mk->pool, sets[d0].v, sets[d0].n, GPAR_BASE)) ipush(&mk->pops, from);
    mk->st.walks++;
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
            if (has_kids(v, i) && g->accept[t] && (p0 == GPAR_BASE || gcan_pop_to(g, &mk->pool, T->v, 1, GPAR_BASE)))
                ipush(&mk->pops, i);
            i++;
            continue;
        }
        gstep(g, &mk->pool, S->v, S->n, v->tb[i], T);
        if (!T->n) {
            i = v->tend[i];
            continue;
        }
        for (int32_t k = v->ttok[i]; k < v->ttok[i + 1]; k++) set_bit(bits, v->ids[k]);
        if (has_kids(v, i) && gcan_pop_to(g, &mk->pool, T->v, T->n, GPAR_BASE)) ipush(&mk->pops, i);
        i++;
    }
    mk->st.nodes_visited += visited;
}

static gnode *new_node(frigg_gmasker *mk, int32_t key) {
    gnode *n = frigg_xcalloc(1, sizeof *n);
    n->key = key;
    /* pops: sorted, unique */
    if (mk->pops.n) {
        qsort(mk->pops.v, mk->pops.n, sizeof *mk->pops.v, cmp_i32);
        size_t k = 0;
        for (size_t i = 0; i < mk->pops.n; i++)
            if (!k || mk->pops.v[k - 1] != mk->pops.v[i]) mk->pops.v[k++] = mk->pops.v[i];
        n->npops = (int32_t)k;
        n->pops = frigg_xmalloc(k * sizeof *n->pops);
        memcpy(n->pops, mk->pops.v, k * sizeof *n->pops);
        mk->bytes += k * sizeof *n->pops;
    }
    n->acc = compress(mk->bits, mk->v->V, mk->W, &mk->bytes);
    mk->bytes += sizeof *n;
    return n;
}

static gnode *level1(frigg_gmasker *mk, int32_t s) {
    if (mk->lvl1[s]) {
        mk->st.hits++;
        return mk->lvl1[s];
    }
    mk->st.misses++;
    memset(mk->bits, 0, (size_t)mk->W * sizeof *mk->bits);
    mk->pops.n = 0;
    gcfg c = {s, GPAR_BASE};
    walk(mk, &c, 1, 0);
    return mk->lvl1[s] = new_node(mk, s);
}

static gnode *child(frigg_gmasker *mk, gnode *n, int32_t r) {
    for (int32_t k = 0; k < n->nk; k++)
        if (n->kids[k]->key == r) {
            mk->st.hits++;
            return n->kids[k];
        }
    /* a pop point at the root means every token runs on in r: r's own level 1 */
    gnode *root_cont = n->npops && n->pops[0] == 0 ? level1(mk, r) : NULL;
    mk->st.misses++;
    mask_or(mk->bits, &n->acc, mk->v->V, mk->W, 1);
    mk->pops.n = 0;
    gcfg c = {r, GPAR_BASE};
    for (int32_t k = 0; k < n->npops; k++)
        if (n->pops[k] != 0) walk(mk, &c, 1, n->pops[k]);
    if (root_cont) {
        mask_or(mk->bits, &root_cont->acc, mk->v->V, mk->W, 0);
        for (int32_t k = 0; k < root_cont->npops; k++) ipush(&mk->pops, root_cont->pops[k]);
    }
    gnode *x = new_node(mk, r);
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
    gpool_init(&mk->pool);
    mk->sets = frigg_xcalloc((size_t)v->max_depth + 2, sizeof *mk->sets);
    mk->W = (v->V + 31) / 32;
    mk->bits = frigg_xcalloc((size_t)(mk->W ? mk->W : 1), sizeof *mk->bits);
    mk->tmp = frigg_xcalloc((size_t)(mk->W ? mk->W : 1), sizeof *mk->tmp);
    return mk;
}

void frigg_gmasker_free(frigg_gmasker *mk) {
    if (!mk) return;
    cache_clear(mk);
    free(mk->lvl1);
    gpool_free(&mk->pool);
    for (int i = 0; i < mk->v->max_depth + 2; i++) free(mk->sets[i].v);
    free(mk->sets);
    free(mk->bits);
    free(mk->tmp);
    free(mk->pops.v);
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
    pthread_mutex_lock(&mk->mu);
    for (int32_t s = 0; s < mk->g->n; s++) level1(mk, s);
    pthread_mutex_unlock(&mk->mu);
    return mk->g->n;
}

void frigg_gmasker_stats(frigg_gmasker *mk, frigg_gmask_stats *st) {
    pthread_mutex_lock(&mk->mu);
    *st = mk->st;
    st->bytes = mk->bytes;
    pthread_mutex_unlock(&mk->mu);
}

void frigg_grammar_apply_mask(float *logits, int vocab, const uint32_t *bits) {
    for (int i = 0; i < vocab; i++)
        if (!((bits[i >> 5] >> (i & 31)) & 1)) logits[i] = -INFINITY;
}
