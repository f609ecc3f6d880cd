/* gram_json.c — JSON's own pieces as NFA fragments (RFC 8259): whitespace, string characters, numbers,
 * integers within bounds, and the rules of any string and any value, which every schema position without a
 * narrower type shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

/* One byte from ranges written "a-zA-Z" (a single byte is "x-x"). */
static gfrag ranges(gnfa *a, const char *spec) {
    gfrag alts[16];
    int n = 0;
    for (size_t i = 0; spec[i] && spec[i + 1] && spec[i + 2] && n < 16; i += 3)
        alts[n++] = gf_range(a, (uint8_t)spec[i], (uint8_t)spec[i + 2]);
    return n == 1 ? alts[0] : gf_alt(a, alts, n);
}

/* Whitespace where JSON allows it, bounded as llama.cpp's JSON grammars bound it: nothing, one space, or a newline
 * and up to GJ_WS_INDENT spaces or tabs. Unbounded whitespace lets a model pad without end (a small one writes
 * newline after newline until max_tokens), and no generator's JSON needs more. */
#define GJ_WS_INDENT 20
static int32_t find_rule(const gnfa *a, const char *name);
static void rule_body(gnfa *a, int32_t r, gfrag f);
/* The non-empty whitespace is one rule, called where JSON allows whitespace: in place, its GJ_WS_INDENT
 * counted positions were as many DFA states at each of the four places a member has one. */
gfrag gj_ws(gnfa *a) {
    int32_t r = find_rule(a, "whitespace");
    if (r < 0) {
        r = gnfa_rule(a, "whitespace");
        gfrag nl = gf_lit(a, "\n", 1);
        for (int i = 0; i < GJ_WS_INDENT; i++) nl = gf_seq(a, nl, gf_opt(a, ranges(a, "\t-\t - ")));
        gfrag alts[2] = {gf_lit(a, " ", 1), nl};
        rule_body(a, r, gf_alt(a, alts, 2));
    }
    return gf_opt(a, gf_call(a, r));
}

/* \uXXXX outside D800-DFFF: a lone surrogate is no character, and a pair is written as UTF-8 instead */
static gfrag hex4_no_surrogate(gnfa *a) {
    const char *H = "0-9A-Fa-f";
    gfrag alts[3];
    alts[0] = gf_seq(a, ranges(a, "0-9A-Ca-c"), gf_seq(a, ranges(a, H), gf_seq(a, ranges(a, H), ranges(a, H))));
    alts[1] = gf_seq(a, ranges(a, "D-Dd-d"), gf_seq(a, ranges(a, "0-7"), gf_seq(a, ranges(a, H), ranges(a, H))));
    alts[2] = gf_seq(a, ranges(a, "E-Fe-f"), gf_seq(a, ranges(a, H), gf_seq(a, ranges(a, H), ranges(a, H))));
    return gf_alt(a, alts, 3);
}

static gfrag escape(gnfa *a) {
    gfrag alts[2];
    alts[0] = gf_seq(a, gf_lit(a, "\\", 1), ranges(a, "\"-\"\\-\\/-/b-bf-fn-nr-rt-t"));
    alts[1] = gf_seq(a, gf_lit(a, "\\u", 2), hex4_no_surrogate(a));
    return gf_alt(a, alts, 2);
}

gfrag gj_quote(gnfa *a) { return a->mimir ? gf_lit(a, GJ_MIMIR_Q, strlen(GJ_MIMIR_Q)) : gf_lit(a, "\"", 1); }

gfrag gj_string_char(gnfa *a) {
    if (a->mimir) { /* raw text: any character but '<' (so that no string holds the <|"|> that ends it) */
        gfrag m[2] = {ranges(a, "\t-\n\r-\r -;=-\x7f"), gf_utf8_range(a, 0x80, 0x10FFFF)};
        return gf_alt(a, m, 2);
    }
    gfrag alts[3];
    alts[0] = ranges(a, " -!#-[]-\x7f");
    alts[1] = gf_utf8_range(a, 0x80, 0x10FFFF);
    alts[2] = escape(a);
    return gf_alt(a, alts, 3);
}

/* ---- a string that is none of a set of keys ---- */
typedef struct {
    uint32_t *cp;
    int n;
} ukey;

static int cmp_ukey(const void *x, const void *y) {
    const ukey *a = x, *b = y;
    for (int i = 0; i < a->n && i < b->n; i++)
        if (a->cp[i] != b->cp[i]) return a->cp[i] < b->cp[i] ? -1 : 1;
    return (a->n > b->n) - (a->n < b->n);
}

/* keys k[lo..hi) share their first d code points, read up to state S: the closing quote where none ends here,
 * each key's next character to its own subtree, any other character on into the free rest F. Until the name
 * has left every key, each character is read in its one canonical spelling (gj_cpset_in_string: UTF-8, with
 * only '"', '\\' and control characters escaped), so that "n\u0061me" cannot pass for a name other than
 * "name"; in F any spelling is free, since the text already differs from every key. */
static void except_node(gnfa *a, const ukey *k, int lo, int hi, int d, int32_t S, int32_t F, int32_t END) {
    int is_key = 0;
    gcpset C = {0};
    for (int i = lo; i < hi; i++) {
        if (k[i].n == d) is_key = 1;
        else gcp_add(&C, k[i].cp[d], k[i].cp[d]);
    }
    if (!is_key) gnfa_edge_add(a, S, GE_BYTE, '"', '"', END, -1);
    for (int i = lo; i < hi;) {
        if (k[i].n == d) {
            i++;
            continue;
        }
        uint32_t c = k[i].cp[d];
        int j = i;
        while (j < hi && k[j].n > d && k[j].cp[d] == c) j++;
        gcpset one = {0};
        gcp_add(&one, c, c);
        gfrag f = gj_cpset_in_string(a, &one);
        gcp_free(&one);
        int32_t child = gnfa_state(a);
        gf_join(a, S, f.s);
        gf_join(a, f.e, child);
        except_node(a, k, i, j, d + 1, child, F, END);
        i = j;
    }
    gcp_negate(&C);
    if (C.n) {
        gfrag f = gj_cpset_in_string(a, &C);
        gf_join(a, S, f.s);
        gf_join(a, f.e, F);
    }
    gcp_free(&C);
}

gfrag gj_string_except(gnfa *a, const char *const *keys, int n) {
    ukey *k = frigg_xcalloc((size_t)(n ? n : 1), sizeof *k);
    for (int i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)keys[i];
        size_t len = strlen(keys[i]);
        k[i].cp = frigg_xmalloc((len + 1) * sizeof *k[i].cp);
        for (size_t j = 0; j < len;) { /* keys come from jansson: valid UTF-8 */
            uint32_t c = s[j];
            int l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (j + (size_t)l > len) l = 1;
            if (l == 2) c = (c & 0x1F) << 6 | (s[j + 1] & 0x3F);
            else if (l == 3) c = (c & 0x0F) << 12 | (s[j + 1] & 0x3F) << 6 | (s[j + 2] & 0x3F);
            else if (l == 4) c = (c & 0x07) << 18 | (s[j + 1] & 0x3F) << 12 | (s[j + 2] & 0x3F) << 6 | (s[j + 3] & 0x3F);
            k[i].cp[k[i].n++] = c;
            j += (size_t)l;
        }
    }
    qsort(k, (size_t)n, sizeof *k, cmp_ukey);
    gfrag open = gf_lit(a, "\"", 1);
    int32_t F = gnfa_state(a), END = gnfa_state(a);
    gfrag ch = gj_string_char(a);
    gf_join(a, F, ch.s);
    gf_join(a, ch.e, F);
    gnfa_edge_add(a, F, GE_BYTE, '"', '"', END, -1);
    except_node(a, k, 0, n, 0, open.e, F, END);
    for (int i = 0; i < n; i++) free(k[i].cp);
    free(k);
    return (gfrag){open.s, END};
}

/* A control character: its short escape where JSON has one, else \u00XX (either case of hex letters). */
static gfrag control_char(gnfa *a, uint32_t c) {
    const char *shorts = NULL;
    switch (c) {
    case '\b': shorts = "\\b"; break;
    case '\f': shorts = "\\f"; break;
    case '\n': shorts = "\\n"; break;
    case '\r': shorts = "\\r"; break;
    case '\t': shorts = "\\t"; break;
    default: break;
    }
    if (shorts) return gf_lit(a, shorts, 2);
    const char *hex = "0123456789abcdef";
    gfrag f = gf_lit(a, "\\u00", 4);
    f = gf_seq(a, f, gf_lit(a, &hex[c >> 4], 1));
    char lo = hex[c & 15];
    if (lo >= 'a') {
        gfrag both[2] = {gf_lit(a, &lo, 1), gf_lit(a, (char[]){(char)(lo - 'a' + 'A')}, 1)};
        return gf_seq(a, f, gf_alt(a, both, 2));
    }
    return gf_seq(a, f, gf_lit(a, &lo, 1));
}

gfrag gj_cpset_in_string(gnfa *a, const gcpset *cs) {
    int cap = cs->n + 40, n = 0;
    gfrag *alts = frigg_xmalloc((size_t)cap * sizeof *alts);
    for (int i = 0; i < cs->n; i++) {
        uint32_t lo = cs->r[i].lo, hi = cs->r[i].hi;
        for (uint32_t c = lo; c <= hi && c < 0x20; c++) alts[n++] = control_char(a, c);
        if (lo < 0x20) lo = 0x20;
        /* " and \ are escaped; the rest of the range is its own UTF-8 */
        const uint32_t special[2] = {'"', '\\'};
        for (int k = 0; k < 2 && lo <= hi; k++) {
            uint32_t sp = special[k];
            if (sp < lo || sp > hi) continue;
            if (sp > lo) alts[n++] = gf_utf8_range(a, lo, sp - 1);
            alts[n++] = gf_lit(a, sp == '"' ? "\\\"" : "\\\\", 2);
            lo = sp + 1;
        }
        if (lo <= hi) alts[n++] = gf_utf8_range(a, lo, hi);
        if (n > cap - 40) {
            cap *= 2;
            alts = frigg_xrealloc(alts, (size_t)cap * sizeof *alts);
        }
    }
    gfrag f = gf_alt(a, alts, n);
    free(alts);
    return f;
}

static gfrag digits(gnfa *a, int n) {
    gfrag f = gf_empty(a);
    for (int i = 0; i < n; i++) f = gf_seq(a, f, gf_range(a, '0', '9'));
    return f;
}

/* one to n digits */
static gfrag digits_upto(gnfa *a, int n) {
    gfrag f = gf_range(a, '0', '9');
    for (int i = 1; i < n; i++) f = gf_seq(a, f, gf_opt(a, gf_range(a, '0', '9')));
    return f;
}

/* -?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,3})?: JSON's number with its digits bounded as
 * llama.cpp's JSON grammars bound them (a double holds about 16 significant digits, and its exponent three), so
 * that a model cannot write digits without end. */
gfrag gj_number(gnfa *a) {
    gfrag intpart[2] = {gf_lit(a, "0", 1), gf_seq(a, gf_range(a, '1', '9'), gf_opt(a, digits_upto(a, 15)))};
    gfrag f = gf_seq(a, gf_opt(a, gf_lit(a, "-", 1)), gf_alt(a, intpart, 2));
    f = gf_seq(a, f, gf_opt(a, gf_seq(a, gf_lit(a, ".", 1), digits_upto(a, 16))));
    gfrag e = gf_seq(a, ranges(a, "E-Ee-e"), gf_opt(a, ranges(a, "+-+---")));
    e = gf_seq(a, e, digits_upto(a, 3));
    return gf_seq(a, f, gf_opt(a, e));
}

/* Strings of L digits between lo and hi (both L digits, lo <= hi), digit by digit: the first digit equal to
 * lo's (then the rest at least lo's), strictly between (then any), or equal to hi's (then at most hi's). */
static gfrag eq_len_range(gnfa *a, const char *lo, const char *hi, int L) {
    if (L == 0) return gf_empty(a);
    if (lo[0] == hi[0]) return gf_seq(a, gf_lit(a, lo, 1), eq_len_range(a, lo + 1, hi + 1, L - 1));
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    gfrag alts[3];
    int n = 0;
    alts[n++] = gf_seq(a, gf_lit(a, lo, 1), eq_len_range(a, lo + 1, nines, L - 1));
    if (lo[0] + 1 <= hi[0] - 1) alts[n++] = gf_seq(a, gf_range(a, lo[0] + 1, hi[0] - 1), digits(a, L - 1));
    alts[n++] = gf_seq(a, gf_lit(a, hi, 1), eq_len_range(a, zeros, hi + 1, L - 1));
    return gf_alt(a, alts, n);
}

static int ndigits(uint64_t x) {
    int n = 1;
    while (x >= 10) {
        x /= 10;
        n++;
    }
    return n;
}

static uint64_t pow10u(int n) {
    uint64_t p = 1;
    while (n-- > 0) p *= 10;
    return p;
}

/* Digits of an integer without an upper bound on its magnitude: 16, as llama.cpp's JSON grammars allow (a double
 * holds about 16 significant digits), so that a model cannot write digits without end. */
#define GJ_INT_DIGITS 16

/* Non-negative integers in [lo, hi] (has_hi 0: [lo, ...) of at most GJ_INT_DIGITS digits, or lo's and one more
 * when it has as many), without leading zeros. */
static gfrag nonneg_range(gnfa *a, uint64_t lo, int has_hi, uint64_t hi) {
    gfrag alts[24];
    int n = 0, Llo = ndigits(lo), Lhi = has_hi ? ndigits(hi) : Llo;
    for (int L = Llo; L <= Lhi; L++) {
        uint64_t l = L == Llo ? lo : pow10u(L - 1);
        uint64_t h = has_hi && L == Lhi ? hi : (L == 20 ? UINT64_MAX : pow10u(L) - 1);
        if (l > h) continue;
        char ls[24], hs[24];
        snprintf(ls, sizeof ls, "%llu", (unsigned long long)l);
        snprintf(hs, sizeof hs, "%llu", (unsigned long long)h);
        alts[n++] = eq_len_range(a, ls, hs, L);
    }
    if (!has_hi) { /* every number of more digits than lo has, up to GJ_INT_DIGITS (lo's and one more past them) */
        gfrag more = gf_empty(a);
        for (int i = Llo + 1; i < GJ_INT_DIGITS; i++) more = gf_seq(a, more, gf_opt(a, gf_range(a, '0', '9')));
        alts[n++] = gf_seq(a, gf_range(a, '1', '9'), gf_seq(a, digits(a, Llo), more));
    }
    return n == 1 ? alts[0] : gf_alt(a, alts, n);
}

static uint64_t magnitude(int64_t x) { return x < 0 ? (uint64_t)(-(x + 1)) + 1 : (uint64_t)x; }

gfrag gj_integer(gnfa *a, int has_lo, int64_t lo, int has_hi, int64_t hi) {
    gfrag alts[2];
    int n = 0;
    if (!has_lo || lo < 0) { /* the negative part, as a minus and a magnitude; -0 is not written */
        int64_t top = has_hi && hi < -1 ? hi : -1;
        if (!has_lo || top >= lo)
            alts[n++] = gf_seq(a, gf_lit(a, "-", 1), nonneg_range(a, magnitude(top), has_lo, has_lo ? magnitude(lo) : 0));
    }
    if (!has_hi || hi >= 0) alts[n++] = nonneg_range(a, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0);
    if (n == 0) return gf_alt(a, NULL, 0);
    return n == 1 ? alts[0] : gf_alt(a, alts, n);
}

static int32_t find_rule(const gnfa *a, const char *name) {
    for (int32_t r = 0; r < a->nrules; r++)
        if (!strcmp(a->rules[r].name, name)) return r;
    return -1;
}

static void rule_body(gnfa *a, int32_t r, gfrag f) {
    gf_join(a, a->rules[r].start, f.s);
    gf_join(a, f.e, a->rules[r].end);
}

int32_t gj_string_rule(gnfa *a) {
    int32_t r = find_rule(a, "string");
    if (r >= 0) return r;
    r = gnfa_rule(a, "string");
    gfrag f = gf_seq(a, gj_quote(a), gf_seq(a, gf_star(a, gj_string_char(a)), gj_quote(a)));
    rule_body(a, r, f);
    return r;
}

/* A counted string's characters are written out in place, escapes included (about 70 DFA states a position:
 * movie-review.json in benchmarks/cpu-2026-12-07/grammar/). An escape as a call of a shared rule would have fewer
 * states, but a mask's trie walk from a state with a call is slower (visit() tries the callee at every byte),
 * and a string walks a new state at every position. */
gfrag gj_string_len(gnfa *a, long mn, long mx) {
    gfrag f = gj_quote(a);
    for (long i = 0; i < mn && !a->overflow; i++) f = gf_seq(a, f, gj_string_char(a));
    if (mx < 0) return gf_seq(a, gf_seq(a, f, gf_star(a, gj_string_char(a))), gj_quote(a));
    /* each further position may go straight to the closing quote: one epsilon to it, not a chain of nested
     * optionals, whose closures grew with the position (quadratic in the length) */
    gfrag close = gj_quote(a);
    for (long i = mn; i < mx && !a->overflow; i++) {
        gf_join(a, f.e, close.s);
        f = gf_seq(a, f, gj_string_char(a));
    }
    gf_join(a, f.e, close.s);
    return (gfrag){f.s, close.e};
}

int32_t gj_string_len_rule(gnfa *a, long mn, long mx) {
    char name[96];
    if (mx < 0) snprintf(name, sizeof name, "string of at least %ld characters", mn);
    else snprintf(name, sizeof name, "string of %ld to %ld characters", mn, mx);
    int32_t r = find_rule(a, name);
    if (r >= 0) return r;
    r = gnfa_rule(a, name);
    rule_body(a, r, gj_string_len(a, mn, mx));
    return r;
}

/* '{' ws ( string ws ':' ws value ws ( ',' ws string ws ':' ws value ws )* )? '}' */
gfrag gj_any_object(gnfa *a) {
    int32_t vr = gj_value_rule(a), sr = gj_string_rule(a);
    gfrag member = gf_seq(a, gf_call(a, sr), gf_seq(a, gj_ws(a), gf_lit(a, ":", 1)));
    member = gf_seq(a, member, gf_seq(a, gj_ws(a), gf_seq(a, gf_call(a, vr), gj_ws(a))));
    gfrag more = gf_seq(a, gf_lit(a, ",", 1), gf_seq(a, gj_ws(a), member));
    gfrag body = gf_opt(a, gf_seq(a, member, gf_star(a, more)));
    return gf_seq(a, gf_seq(a, gf_lit(a, "{", 1), gj_ws(a)), gf_seq(a, body, gf_lit(a, "}", 1)));
}

static gfrag any_array(gnfa *a, int32_t vr) {
    gfrag elem = gf_seq(a, gf_call(a, vr), gj_ws(a));
    gfrag more = gf_seq(a, gf_lit(a, ",", 1), gf_seq(a, gj_ws(a), elem));
    gfrag body = gf_opt(a, gf_seq(a, elem, gf_star(a, more)));
    return gf_seq(a, gf_seq(a, gf_lit(a, "[", 1), gj_ws(a)), gf_seq(a, body, gf_lit(a, "]", 1)));
}

int32_t gj_value_rule(gnfa *a) {
    int32_t r = find_rule(a, "value");
    if (r >= 0) return r;
    r = gnfa_rule(a, "value");
    gfrag alts[7];
    alts[0] = gf_call(a, gj_string_rule(a));
    alts[1] = gj_number(a);
    alts[2] = gf_lit(a, "true", 4);
    alts[3] = gf_lit(a, "false", 5);
    alts[4] = gf_lit(a, "null", 4);
    alts[5] = gj_any_object(a);
    alts[6] = any_array(a, r);
    rule_body(a, r, gf_alt(a, alts, 7));
    return r;
}
