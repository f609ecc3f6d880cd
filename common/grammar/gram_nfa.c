/* gram_nfa.c — the NFA every rule is built in (Thompson fragments), sets of code points, and the UTF-8
 * encodings of a code point range as byte-range sequences (the construction of RE2 and regex-automata). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

void gnfa_free(gnfa *a) {
    free(a->head);
    free(a->e);
    free(a->rules);
    memset(a, 0, sizeof *a);
}

/* Past the limit every new state is state 0 and no edge is added: the build runs to its end cheaply and the
 * compile reports the overflow. */
int32_t gnfa_state(gnfa *a) {
    if (a->n >= FRIGG_GRAMMAR_MAX_NFA_STATES) {
        a->overflow = 1;
        return 0;
    }
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 1024;
        a->head = frigg_xrealloc(a->head, a->cap * sizeof *a->head);
    }
    a->head[a->n] = -1;
    return (int32_t)a->n++;
}

void gnfa_edge_add(gnfa *a, int32_t from, int kind, int lo, int hi, int32_t to, int32_t rule) {
    if (a->overflow) return;
    if (a->ne >= 4 * (size_t)FRIGG_GRAMMAR_MAX_NFA_STATES) {
        a->overflow = 1;
        return;
    }
    if (a->ne == a->ecap) {
        a->ecap = a->ecap ? a->ecap * 2 : 4096;
        a->e = frigg_xrealloc(a->e, a->ecap * sizeof *a->e);
    }
    gnfa_edge *e = &a->e[a->ne];
    e->to = to;
    e->rule = rule;
    e->kind = (uint8_t)kind;
    e->lo = (uint8_t)lo;
    e->hi = (uint8_t)hi;
    e->next = a->head[from];
    a->head[from] = (int32_t)a->ne++;
}

int32_t gnfa_rule(gnfa *a, const char *name) {
    if (a->nrules == a->caprules) {
        a->caprules = a->caprules ? a->caprules * 2 : 16;
        a->rules = frigg_xrealloc(a->rules, (size_t)a->caprules * sizeof *a->rules);
    }
    grule *r = &a->rules[a->nrules];
    r->start = gnfa_state(a);
    r->end = gnfa_state(a);
    snprintf(r->name, sizeof r->name, "%s", name);
    return a->nrules++;
}

void gf_join(gnfa *a, int32_t from, int32_t to) { gnfa_edge_add(a, from, GE_EPS, 0, 0, to, -1); }

gfrag gf_empty(gnfa *a) {
    int32_t s = gnfa_state(a);
    return (gfrag){s, s};
}

gfrag gf_lit(gnfa *a, const char *s, size_t n) {
    gfrag f = gf_empty(a);
    for (size_t i = 0; i < n; i++) {
        int32_t t = gnfa_state(a);
        gnfa_edge_add(a, f.e, GE_BYTE, (uint8_t)s[i], (uint8_t)s[i], t, -1);
        f.e = t;
    }
    return f;
}

gfrag gf_range(gnfa *a, int lo, int hi) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    gnfa_edge_add(a, f.s, GE_BYTE, lo, hi, f.e, -1);
    return f;
}

gfrag gf_seq(gnfa *a, gfrag x, gfrag y) {
    gf_join(a, x.e, y.s);
    return (gfrag){x.s, y.e};
}

gfrag gf_alt(gnfa *a, const gfrag *alts, int n) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    for (int i = 0; i < n; i++) {
        gf_join(a, f.s, alts[i].s);
        gf_join(a, alts[i].e, f.e);
    }
    return f;
}

gfrag gf_opt(gnfa *a, gfrag x) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    gf_join(a, f.s, x.s);
    gf_join(a, x.e, f.e);
    gf_join(a, f.s, f.e);
    return f;
}

gfrag gf_star(gnfa *a, gfrag x) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    gf_join(a, f.s, x.s);
    gf_join(a, x.e, x.s);
    gf_join(a, x.e, f.e);
    gf_join(a, f.s, f.e);
    return f;
}

gfrag gf_plus(gnfa *a, gfrag x) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    gf_join(a, f.s, x.s);
    gf_join(a, x.e, x.s);
    gf_join(a, x.e, f.e);
    return f;
}

gfrag gf_call(gnfa *a, int32_t rule) {
    gfrag f = {gnfa_state(a), gnfa_state(a)};
    gnfa_edge_add(a, f.s, GE_CALL, 0, 0, f.e, rule);
    return f;
}

/* ---- code point sets ---- */
void gcp_add(gcpset *c, uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->r = frigg_xrealloc(c->r, (size_t)c->cap * sizeof *c->r);
    }
    c->r[c->n++] = (gcp_range){lo, hi};
}

static int cmp_range(const void *x, const void *y) {
    const gcp_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

void gcp_norm(gcpset *c) {
    if (c->n < 2) return;
    qsort(c->r, (size_t)c->n, sizeof *c->r, cmp_range);
    int k = 0;
    for (int i = 1; i < c->n; i++) {
        if (c->r[i].lo <= c->r[k].hi + 1) {
            if (c->r[i].hi > c->r[k].hi) c->r[k].hi = c->r[i].hi;
        } else {
            c->r[++k] = c->r[i];
        }
    }
    c->n = k + 1;
}

void gcp_negate(gcpset *c) {
    gcp_norm(c);
    gcpset o = {0};
    uint32_t next = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->r[i].lo > next) gcp_add(&o, next, c->r[i].lo - 1);
        next = c->r[i].hi + 1;
    }
    if (next <= 0x10FFFF) gcp_add(&o, next, 0x10FFFF);
    free(c->r);
    *c = o;
}

void gcp_free(gcpset *c) {
    free(c->r);
    memset(c, 0, sizeof *c);
}

/* ---- UTF-8 ---- */
static int utf8_enc(uint32_t cp, uint8_t *b) {
    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (uint8_t)(0xC0 | cp >> 6);
        b[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (uint8_t)(0xE0 | cp >> 12);
        b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (uint8_t)(0xF0 | cp >> 18);
    b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* lo..hi of one encoded length, split until each byte position ranges independently (every code point between
 * the encodings of lo and hi, position by position, is in the range), then one byte-range sequence each. */
static void utf8_same_len(gnfa *a, uint32_t lo, uint32_t hi, gfrag *alts, int *n, int cap) {
    if (*n >= cap) {
        a->overflow = 1;
        return;
    }
    uint8_t bl[4], bh[4];
    int len = utf8_enc(lo, bl);
    for (int i = 1; i < len; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_same_len(a, lo, lo | m, alts, n, cap);
                utf8_same_len(a, (lo | m) + 1, hi, alts, n, cap);
                return;
            }
            if ((hi & m) != m) {
                utf8_same_len(a, lo, (hi & ~m) - 1, alts, n, cap);
                utf8_same_len(a, hi & ~m, hi, alts, n, cap);
                return;
            }
        }
    }
    utf8_enc(hi, bh);
    gfrag f = gf_empty(a);
    for (int i = 0; i < len; i++) f = gf_seq(a, f, gf_range(a, bl[i], bh[i]));
    alts[(*n)++] = f;
}

gfrag gf_utf8_range(gnfa *a, uint32_t lo, uint32_t hi) {
    gfrag alts[64];
    int n = 0;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    const uint32_t bounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
    for (int k = 0; k < 5; k++) {
        uint32_t l = lo > bounds[k][0] ? lo : bounds[k][0], h = hi < bounds[k][1] ? hi : bounds[k][1];
        if (l <= h) utf8_same_len(a, l, h, alts, &n, 64);
    }
    if (n == 1) return alts[0];
    return gf_alt(a, alts, n);
}
