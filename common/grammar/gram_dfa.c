/* gram_dfa.c — the rules of an NFA made into DFAs over byte classes (subset construction, one rule at a time;
 * a call edge of an NFA state becomes a call of the DFA state, its return the DFA state of the union of the
 * returns), then checked and trimmed:
 *   - live states: those from which the rule can still end, counting a call only where the called rule can end
 *     at all. Every transition or call into a dead state is dropped, so a recogniser never enters a state it
 *     cannot finish from: "a token is allowed" and "its bytes advance the recogniser" are the same thing.
 *   - a rule that is called but can never end (a $ref recursion with no base case) is an error;
 *   - so is a rule that calls itself, through calls at rule starts, before any byte (it would recurse forever);
 *   - and a called rule that matches the empty string (the recogniser pops only after a byte). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

typedef struct {
    int32_t *v;
    size_t n, cap;
} ivec;

static void ipush(ivec *x, int32_t v) {
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        x->v = frigg_xrealloc(x->v, x->cap * sizeof *x->v);
    }
    x->v[x->n++] = v;
}

typedef struct {
    const gnfa *a;
    int ncls;
    uint8_t cls[256];
    /* DFA states: their NFA sets in an arena */
    ivec arena;
    size_t *set_off, *set_len;
    int32_t n, cap;
    int32_t *trans, *rule_of;
    uint8_t *accept;
    /* hash of sets -> DFA state (+1; 0 empty) */
    int32_t *slot;
    size_t smask;
    /* closure scratch */
    uint32_t *stamp;
    uint32_t epoch;
    ivec stack;
    /* calls found, per state: (rule, ret) */
    ivec call_rule, call_ret, call_off;
    int overflow;       /* 1: past FRIGG_GRAMMAR_MAX_DFA_STATES; 2: past FRIGG_GRAMMAR_MAX_DFA_WORK */
    uint64_t work;      /* NFA states gone through in closures */
    int32_t costly;     /* with overflow 2: the rule being built then */
    /* the DFA state each byte transition's kernel (its targets before the closure: sorted, no repeats) led to,
     * per rule: many states of a rule move on a class to the same targets (every state inside a string to the
     * same character loop), whose closure and lookup the kernel's hit skips */
    ivec karena, kscratch;
    size_t *koff;
    int32_t *klen, *kstate, *krule, kn, kcap;
    int32_t *kslot;
    size_t kmask;
} dctx;

static uint64_t set_hash(const int32_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint32_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static void grow_slots(dctx *d) {
    size_t cap = d->smask ? (d->smask + 1) * 2 : 1024;
    int32_t *slot = frigg_xcalloc(cap, sizeof *slot);
    for (int32_t i = 0; i < d->n; i++) {
        size_t h = set_hash(d->arena.v + d->set_off[i], d->set_len[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = i + 1;
    }
    free(d->slot);
    d->slot = slot;
    d->smask = cap - 1;
}

/* Ascending order without qsort's call per comparison (a closure is sorted for every DFA transition): insertion
 * sort for short runs, else quicksort. */
static void sort_i32(int32_t *v, size_t n) {
    while (n > 16) {
        int32_t p = v[n / 2];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i] < p) i++;
            while (v[j] > p) j--;
            if (i >= j) break;
            int32_t t = v[i];
            v[i++] = v[j];
            v[j--] = t;
        }
        /* [0, j] <= p <= [j + 1, n): recurse on the smaller part, loop on the larger */
        size_t left = j + 1;
        if (left < n - left) {
            sort_i32(v, left);
            v += left;
            n -= left;
        } else {
            sort_i32(v + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        int32_t x = v[i];
        size_t j = i;
        while (j && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* The epsilon closure of the states in in[0..n), sorted, into out. */
static void closure(dctx *d, const int32_t *in, size_t n, ivec *out) {
    out->n = 0;
    if (++d->epoch == 0) {
        memset(d->stamp, 0, d->a->n * sizeof *d->stamp);
        d->epoch = 1;
    }
    d->stack.n = 0;
    for (size_t i = 0; i < n; i++)
        if (d->stamp[in[i]] != d->epoch) {
            d->stamp[in[i]] = d->epoch;
            ipush(&d->stack, in[i]);
        }
    while (d->stack.n) {
        int32_t q = d->stack.v[--d->stack.n];
        ipush(out, q);
        for (int32_t e = d->a->head[q]; e >= 0; e = d->a->e[e].next)
            if (d->a->e[e].kind == GE_EPS && d->stamp[d->a->e[e].to] != d->epoch) {
                d->stamp[d->a->e[e].to] = d->epoch;
                ipush(&d->stack, d->a->e[e].to);
            }
    }
    sort_i32(out->v, out->n);
    d->work += out->n;
}

/* The DFA state of an NFA set (made if new). -1 past the state limit. */
static int32_t state_of(dctx *d, const ivec *set, int32_t rule) {
    if ((size_t)(d->n + 1) * 2 > d->smask + 1) grow_slots(d);
    size_t h = set_hash(set->v, set->n) & d->smask;
    while (d->slot[h]) {
        int32_t i = d->slot[h] - 1;
        if (d->set_len[i] == set->n && !memcmp(d->arena.v + d->set_off[i], set->v, set->n * sizeof *set->v) &&
            d->rule_of[i] == rule)
            return i;
        h = (h + 1) & d->smask;
    }
    if (d->n >= FRIGG_GRAMMAR_MAX_DFA_STATES) {
        d->overflow = 1;
        return -1;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 256;
        d->set_off = frigg_xrealloc(d->set_off, (size_t)d->cap * sizeof *d->set_off);
        d->set_len = frigg_xrealloc(d->set_len, (size_t)d->cap * sizeof *d->set_len);
        d->trans = frigg_xrealloc(d->trans, (size_t)d->cap * d->ncls * sizeof *d->trans);
        d->rule_of = frigg_xrealloc(d->rule_of, (size_t)d->cap * sizeof *d->rule_of);
        d->accept = frigg_xrealloc(d->accept, (size_t)d->cap);
    }
    int32_t i = d->n++;
    d->set_off[i] = d->arena.n;
    d->set_len[i] = set->n;
    for (size_t k = 0; k < set->n; k++) ipush(&d->arena, set->v[k]);
    d->rule_of[i] = rule;
    d->slot[h] = i + 1;
    return i;
}

static void grow_kslots(dctx *d) {
    size_t cap = d->kmask ? (d->kmask + 1) * 2 : 1024;
    int32_t *slot = frigg_xcalloc(cap, sizeof *slot);
    for (int32_t i = 0; i < d->kn; i++) {
        size_t h = (set_hash(d->karena.v + d->koff[i], (size_t)d->klen[i]) ^ (uint32_t)d->krule[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = i + 1;
    }
    free(d->kslot);
    d->kslot = slot;
    d->kmask = cap - 1;
}

/* The DFA state that the targets in[0..n) (any order, repeats allowed) lead to in rule `rule`: the state of their
 * closure, made if new; a kernel seen before gives its state without a closure. The work a closure would have
 * counted is counted either way, so FRIGG_GRAMMAR_MAX_DFA_WORK refuses the same grammars. */
static int32_t target_of(dctx *d, const int32_t *in, size_t n, int32_t rule, ivec *set) {
    ivec *k = &d->kscratch;
    k->n = 0;
    for (size_t i = 0; i < n; i++) ipush(k, in[i]);
    sort_i32(k->v, k->n);
    size_t u = 0;
    for (size_t i = 0; i < k->n; i++)
        if (!u || k->v[u - 1] != k->v[i]) k->v[u++] = k->v[i];
    k->n = u;
    if ((size_t)(d->kn + 1) * 2 > d->kmask + 1) grow_kslots(d);
    size_t h = (set_hash(k->v, k->n) ^ (uint32_t)rule) & d->kmask;
    while (d->kslot[h]) {
        int32_t i = d->kslot[h] - 1;
        if (d->krule[i] == rule && (size_t)d->klen[i] == k->n &&
            !memcmp(d->karena.v + d->koff[i], k->v, k->n * sizeof *k->v)) {
            d->work += d->set_len[d->kstate[i]];
            return d->kstate[i];
        }
        h = (h + 1) & d->kmask;
    }
    closure(d, k->v, k->n, set);
    int32_t t = state_of(d, set, rule);
    if (t < 0) return t;
    if (d->kn == d->kcap) {
        d->kcap = d->kcap ? d->kcap * 2 : 256;
        d->koff = frigg_xrealloc(d->koff, (size_t)d->kcap * sizeof *d->koff);
        d->klen = frigg_xrealloc(d->klen, (size_t)d->kcap * sizeof *d->klen);
        d->kstate = frigg_xrealloc(d->kstate, (size_t)d->kcap * sizeof *d->kstate);
        d->krule = frigg_xrealloc(d->krule, (size_t)d->kcap * sizeof *d->krule);
    }
    int32_t i = d->kn++;
    d->koff[i] = d->karena.n;
    d->klen[i] = (int32_t)k->n;
    d->kstate[i] = t;
    d->krule[i] = rule;
    for (size_t j = 0; j < k->n; j++) ipush(&d->karena, k->v[j]);
    d->kslot[h] = i + 1;
    return t;
}

typedef struct {
    int32_t rule, to;
} rcall;

static int cmp_rcall(const void *a, const void *b) {
    const rcall *x = a, *y = b;
    if (x->rule != y->rule) return x->rule < y->rule ? -1 : 1;
    return x->to < y->to ? -1 : x->to > y->to;
}

static void determinize(dctx *d, int32_t *rule_start) {
    const gnfa *a = d->a;
    ivec set = {0}, seed = {0};
    ivec *bucket = frigg_xcalloc((size_t)d->ncls, sizeof *bucket);
    rcall *rc = NULL;
    size_t nrc = 0, caprc = 0;
    for (int32_t r = 0; r < a->nrules && !d->overflow; r++) {
        int32_t st = a->rules[r].start;
        closure(d, &st, 1, &set);
        rule_start[r] = state_of(d, &set, r);
    }
    for (int32_t i = 0; i < d->n && !d->overflow; i++) {
        int32_t r = d->rule_of[i], end = a->rules[r].end;
        if (d->work > FRIGG_GRAMMAR_MAX_DFA_WORK) {
            d->overflow = 2;
            d->costly = r;
            break;
        }
        size_t len = d->set_len[i];
        d->accept[i] = 0;
        for (int c = 0; c < d->ncls; c++) bucket[c].n = 0;
        nrc = 0;
        for (size_t k = 0; k < len; k++) {
            int32_t q = d->arena.v[d->set_off[i] + k];
            if (q == end) d->accept[i] = 1;
            for (int32_t e = a->head[q]; e >= 0; e = a->e[e].next) {
                const gnfa_edge *ed = &a->e[e];
                if (ed->kind == GE_BYTE) {
                    for (int c = d->cls[ed->lo]; c <= d->cls[ed->hi]; c++) ipush(&bucket[c], ed->to);
                } else if (ed->kind == GE_CALL) {
                    if (nrc == caprc) {
                        caprc = caprc ? caprc * 2 : 16;
                        rc = frigg_xrealloc(rc, caprc * sizeof *rc);
                    }
                    rc[nrc++] = (rcall){ed->rule, ed->to};
                }
            }
        }
        for (int c = 0; c < d->ncls; c++) {
            int32_t t = -1;
            /* a byte range spans classes in a row, which then have the same targets (UTF-8 continuation bytes,
             * any-character ranges): one closure for the run */
            if (c && bucket[c].n && bucket[c].n == bucket[c - 1].n &&
                !memcmp(bucket[c].v, bucket[c - 1].v, bucket[c].n * sizeof *bucket[c].v)) {
                t = d->trans[(size_t)i * d->ncls + c - 1];
            } else if (bucket[c].n) {
                t = target_of(d, bucket[c].v, bucket[c].n, r, &set);
            }
            d->trans[(size_t)i * d->ncls + c] = t;
        }
        /* calls of one rule from this set: one call, returning to the union of their returns */
        if (nrc) qsort(rc, nrc, sizeof *rc, cmp_rcall); /* rc is NULL while no call was seen (qsort wants a pointer) */
        ipush(&d->call_off, (int32_t)d->call_rule.n);
        for (size_t k = 0; k < nrc;) {
            size_t j = k;
            seed.n = 0;
            while (j < nrc && rc[j].rule == rc[k].rule) ipush(&seed, rc[j++].to);
            closure(d, seed.v, seed.n, &set);
            int32_t ret = state_of(d, &set, r);
            ipush(&d->call_rule, rc[k].rule);
            ipush(&d->call_ret, ret);
            k = j;
        }
    }
    ipush(&d->call_off, (int32_t)d->call_rule.n);
    for (int c = 0; c < d->ncls; c++) free(bucket[c].v);
    free(bucket);
    free(rc);
    free(set.v);
    free(seed.v);
}

/* Live states (the rule can end from there) by a worklist on reversed edges. */
static uint8_t *live_states(const dctx *d, const int32_t *rule_start, int32_t nrules) {
    int32_t n = d->n;
    uint8_t *live = frigg_xcalloc((size_t)n, 1);
    /* reversed transitions and calls, as (target -> sources) lists */
    int32_t *rt_off = frigg_xcalloc((size_t)n + 1, sizeof *rt_off);
    for (int32_t i = 0; i < n; i++)
        for (int c = 0; c < d->ncls; c++) {
            int32_t t = d->trans[(size_t)i * d->ncls + c];
            if (t >= 0) rt_off[t + 1]++;
        }
    for (int32_t i = 0; i < n; i++) rt_off[i + 1] += rt_off[i];
    int32_t *rt = frigg_xmalloc((size_t)rt_off[n] * sizeof *rt + 1);
    int32_t *fill = frigg_xmalloc(((size_t)n + 1) * sizeof *fill);
    memcpy(fill, rt_off, ((size_t)n + 1) * sizeof *fill);
    for (int32_t i = 0; i < n; i++)
        for (int c = 0; c < d->ncls; c++) {
            int32_t t = d->trans[(size_t)i * d->ncls + c];
            if (t >= 0) rt[fill[t]++] = i;
        }
    /* calls by return state and by callee: call k is (source, rule, ret) */
    size_t nc = d->call_rule.n;
    int32_t *csrc = frigg_xmalloc((nc + 1) * sizeof *csrc);
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = d->call_off.v[i]; k < d->call_off.v[i + 1]; k++) csrc[k] = i;
    int32_t *byret_off = frigg_xcalloc((size_t)n + 1, sizeof *byret_off);
    int32_t *byrule_off = frigg_xcalloc((size_t)nrules + 1, sizeof *byrule_off);
    for (size_t k = 0; k < nc; k++) byret_off[d->call_ret.v[k] + 1]++, byrule_off[d->call_rule.v[k] + 1]++;
    for (int32_t i = 0; i < n; i++) byret_off[i + 1] += byret_off[i];
    for (int32_t i = 0; i < nrules; i++) byrule_off[i + 1] += byrule_off[i];
    int32_t *byret = frigg_xmalloc((nc + 1) * sizeof *byret), *byrule = frigg_xmalloc((nc + 1) * sizeof *byrule);
    int32_t *f1 = frigg_xmalloc(((size_t)n + 1) * sizeof *f1), *f2 = frigg_xmalloc(((size_t)nrules + 1) * sizeof *f2);
    memcpy(f1, byret_off, ((size_t)n + 1) * sizeof *f1);
    memcpy(f2, byrule_off, ((size_t)nrules + 1) * sizeof *f2);
    for (size_t k = 0; k < nc; k++) byret[f1[d->call_ret.v[k]]++] = (int32_t)k, byrule[f2[d->call_rule.v[k]]++] = (int32_t)k;
    int32_t *start_of = frigg_xmalloc(((size_t)n + 1) * sizeof *start_of);
    for (int32_t i = 0; i < n; i++) start_of[i] = -1;
    for (int32_t r = 0; r < nrules; r++) start_of[rule_start[r]] = r;
    ivec work = {0};
    for (int32_t i = 0; i < n; i++)
        if (d->accept[i]) {
            live[i] = 1;
            ipush(&work, i);
        }
    while (work.n) {
        int32_t s = work.v[--work.n];
        for (int32_t k = rt_off[s]; k < rt_off[s + 1]; k++)
            if (!live[rt[k]]) live[rt[k]] = 1, ipush(&work, rt[k]);
        /* s as a return: its call lives where the callee can end */
        for (int32_t k = byret_off[s]; k < byret_off[s + 1]; k++) {
            int32_t c = byret[k], src = csrc[c];
            if (!live[src] && live[rule_start[d->call_rule.v[c]]]) live[src] = 1, ipush(&work, src);
        }
        /* s as a rule's start: every call of that rule whose return lives */
        int32_t r = start_of[s];
        if (r >= 0) {
            for (int32_t k = byrule_off[r]; k < byrule_off[r + 1]; k++) {
                int32_t c = byrule[k], src = csrc[c];
                if (!live[src] && live[d->call_ret.v[c]]) live[src] = 1, ipush(&work, src);
            }
        }
    }
    free(work.v);
    free(start_of);
    free(rt_off);
    free(rt);
    free(fill);
    free(csrc);
    free(byret_off);
    free(byrule_off);
    free(byret);
    free(byrule);
    free(f1);
    free(f2);
    return live;
}

/* A cycle of rules calling one another from their start states: 1 and the path in msg. */
static int start_cycle(const frigg_grammar *g, int32_t r, uint8_t *color, int32_t *path, int depth, char *msg, size_t n) {
    color[r] = 1;
    path[depth] = r;
    int32_t st = g->rule_start[r];
    for (int32_t k = g->call_off[st]; k < g->call_off[st + 1]; k++) {
        int32_t x = g->calls[k].rule;
        if (color[x] == 1) {
            size_t o = 0;
            int from = 0;
            while (path[from] != x) from++;
            for (int i = from; i <= depth && o + 4 < n; i++)
                o += (size_t)snprintf(msg + o, n - o, "%s -> ", g->rule_name[path[i]]);
            if (o < n) snprintf(msg + o, n - o, "%s", g->rule_name[x]);
            return 1;
        }
        if (!color[x] && start_cycle(g, x, color, path, depth + 1, msg, n)) return 1;
    }
    color[r] = 2;
    return 0;
}

/* Can rule r reach a call of itself (through any calls)? For the message of a rule that never ends. */
static int calls_itself(const frigg_grammar *g, int32_t r, const int32_t *orig_off, const gcall *orig) {
    uint8_t *seen = frigg_xcalloc((size_t)g->nrules, 1);
    int32_t *st = frigg_xmalloc((size_t)g->nrules * sizeof *st);
    int n = 0, found = 0;
    st[n++] = r;
    seen[r] = 1;
    while (n && !found) {
        int32_t x = st[--n];
        for (int32_t s = 0; s < g->n && !found; s++) {
            if (g->rule_of[s] != x) continue;
            for (int32_t k = orig_off[s]; k < orig_off[s + 1]; k++) {
                int32_t y = orig[k].rule;
                if (y == r) found = 1;
                else if (!seen[y]) seen[y] = 1, st[n++] = y;
            }
        }
    }
    free(seen);
    free(st);
    return found;
}

void frigg_grammar_free(frigg_grammar *g) {
    if (!g) return;
    free(g->trans);
    free(g->accept);
    free(g->has_out);
    free(g->call_off);
    free(g->calls);
    free(g->rule_of);
    free(g->rule_start);
    free(g->rule_name);
    free(g);
}

frigg_grammar *gdfa_build(const gnfa *a) {
    dctx d = {.a = a};
    uint8_t mark[257] = {0};
    for (size_t e = 0; e < a->ne; e++)
        if (a->e[e].kind == GE_BYTE) mark[a->e[e].lo] = 1, mark[a->e[e].hi + 1] = 1;
    int c = -1;
    for (int b = 0; b < 256; b++) {
        if (b == 0 || mark[b]) c++;
        d.cls[b] = (uint8_t)c;
    }
    d.ncls = c + 1;
    d.stamp = frigg_xcalloc(a->n ? a->n : 1, sizeof *d.stamp);
    int32_t *rule_start = frigg_xmalloc((size_t)(a->nrules ? a->nrules : 1) * sizeof *rule_start);
    determinize(&d, rule_start);
    frigg_grammar *g = NULL;
    if (d.overflow == 2) {
        frigg_set_error("the schema is too complex: building the automaton of %s took more than %d steps without "
                        "finishing (a pattern such as \".*a.{60}\" needs exponentially many states)",
                        a->rules[d.costly].name, FRIGG_GRAMMAR_MAX_DFA_WORK);
        goto out;
    }
    if (d.overflow) {
        frigg_set_error("the schema is too large: its automata need more than %d states", FRIGG_GRAMMAR_MAX_DFA_STATES);
        goto out;
    }
    uint8_t *live = live_states(&d, rule_start, a->nrules);
    g = frigg_xcalloc(1, sizeof *g);
    g->ncls = d.ncls;
    memcpy(g->cls, d.cls, sizeof g->cls);
    g->n = d.n;
    g->trans = d.trans;
    d.trans = NULL;
    g->accept = d.accept;
    d.accept = NULL;
    g->rule_of = d.rule_of;
    d.rule_of = NULL;
    g->nrules = a->nrules;
    g->rule_start = rule_start;
    rule_start = NULL;
    g->rule_name = frigg_xmalloc((size_t)g->nrules * sizeof *g->rule_name);
    for (int32_t r = 0; r < g->nrules; r++) memcpy(g->rule_name[r], a->rules[r].name, sizeof g->rule_name[r]);
    /* trim: drop what enters a dead state; calls of rules that cannot end */
    for (size_t i = 0; i < (size_t)g->n * g->ncls; i++)
        if (g->trans[i] >= 0 && !live[g->trans[i]]) g->trans[i] = -1;
    g->call_off = frigg_xmalloc(((size_t)g->n + 1) * sizeof *g->call_off);
    g->calls = frigg_xmalloc((d.call_rule.n + 1) * sizeof *g->calls);
    gcall *orig = frigg_xmalloc((d.call_rule.n + 1) * sizeof *orig);
    size_t m = 0;
    for (int32_t i = 0; i < g->n; i++) {
        g->call_off[i] = (int32_t)m;
        for (int32_t k = d.call_off.v[i]; k < d.call_off.v[i + 1]; k++) {
            orig[k] = (gcall){d.call_rule.v[k], d.call_ret.v[k]};
            if (live[d.call_ret.v[k]] && live[g->rule_start[d.call_rule.v[k]]]) g->calls[m++] = orig[k];
        }
    }
    g->call_off[g->n] = (int32_t)m;
    /* checks, on the rules the root can reach */
    uint8_t *reached = frigg_xcalloc((size_t)g->nrules, 1);
    char msg[512] = "";
    int bad = 0;
    for (int32_t i = 0; i < g->n; i++)
        for (int32_t k = d.call_off.v[i]; k < d.call_off.v[i + 1]; k++) reached[orig[k].rule] = 1;
    for (int32_t r = 1; r < g->nrules && !bad; r++)
        if (reached[r] && !live[g->rule_start[r]]) {
            frigg_set_error("'$ref' '%s' can never end: %s", g->rule_name[r],
                            calls_itself(g, r, d.call_off.v, orig) ? "its recursion has no base case"
                                                                     : "it matches no JSON value");
            bad = 1;
        }
    if (!bad && !live[g->rule_start[0]]) {
        frigg_set_error("the grammar matches nothing%s",
                        calls_itself(g, 0, d.call_off.v, orig) ? " (its recursion has no base case)" : "");
        bad = 1;
    }
    for (int32_t r = 0; r < g->nrules && !bad; r++)
        if (reached[r] && g->accept[g->rule_start[r]]) {
            frigg_set_error("'%s' matches the empty text, which a rule that is called may not", g->rule_name[r]);
            bad = 1;
        }
    if (!bad) {
        uint8_t *color = frigg_xcalloc((size_t)g->nrules, 1);
        int32_t *path = frigg_xmalloc((size_t)g->nrules * sizeof *path);
        for (int32_t r = 0; r < g->nrules && !bad; r++)
            if (!color[r] && start_cycle(g, r, color, path, 0, msg, sizeof msg)) {
                frigg_set_error("a '$ref' cycle that never reads a byte (it would recurse forever): %s", msg);
                bad = 1;
            }
        free(color);
        free(path);
    }
    g->has_out = frigg_xcalloc((size_t)g->n, 1);
    for (int32_t i = 0; i < g->n; i++) {
        int out = g->call_off[i + 1] > g->call_off[i];
        for (int k = 0; k < g->ncls && !out; k++) out = g->trans[(size_t)i * g->ncls + k] >= 0;
        g->has_out[i] = (uint8_t)out;
    }
    free(reached);
    free(orig);
    free(live);
    if (bad) {
        frigg_grammar_free(g);
        g = NULL;
    }
out:
    free(rule_start);
    free(d.arena.v);
    free(d.set_off);
    free(d.set_len);
    free(d.trans);
    free(d.rule_of);
    free(d.accept);
    free(d.slot);
    free(d.karena.v);
    free(d.kscratch.v);
    free(d.koff);
    free(d.klen);
    free(d.kstate);
    free(d.krule);
    free(d.kslot);
    free(d.stamp);
    free(d.stack.v);
    free(d.call_rule.v);
    free(d.call_ret.v);
    free(d.call_off.v);
    return g;
}
