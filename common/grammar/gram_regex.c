/* gram_regex.c — the regular-expression subset of JSON Schema's "pattern" (ECMA-262 syntax) compiled to an
 * NFA fragment over code points: literals, ".", classes ([...], [^...], ranges, \d \w \s and their negations),
 * groups ((...), (?:...), (?<name>...)), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms match
 * the same language), escapes \t \n \r \f \v \0 \xHH \uHHHH \u{H...} \cX and escaped punctuation. "^" and "$"
 * are taken at the start and end of a top-level alternative; an alternative without them may be surrounded by
 * anything, as "pattern" matches anywhere in the string. Refused with an error naming the construct:
 * backreferences, lookaround, word boundaries, Unicode property escapes, anchors elsewhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

#define RX_MAX_REPEAT 1000
#define RX_MAX_COST 200000 /* code point sets after expanding every counted repetition */

enum { RX_SET, RX_CAT, RX_ALT, RX_REP };
typedef struct rxn {
    int kind;
    int min, max;    /* RX_REP; max -1: no bound */
    gcpset set;      /* RX_SET */
    struct rxn **k;
    int nk, capk;
} rxn;

typedef struct {
    const char *s;
    size_t n, i;
    char *err;
    size_t errsz;
    int failed, depth, full;
} rxp;

static rxn *node(int kind) {
    rxn *x = frigg_xcalloc(1, sizeof *x);
    x->kind = kind;
    return x;
}

static void add_kid(rxn *x, rxn *k) {
    if (x->nk == x->capk) {
        x->capk = x->capk ? x->capk * 2 : 4;
        x->k = frigg_xrealloc(x->k, (size_t)x->capk * sizeof *x->k);
    }
    x->k[x->nk++] = k;
}

static void node_free(rxn *x) {
    if (!x) return;
    for (int i = 0; i < x->nk; i++) node_free(x->k[i]);
    free(x->k);
    gcp_free(&x->set);
    free(x);
}

static int fail(rxp *p, const char *msg) {
    if (!p->failed) snprintf(p->err, p->errsz, "%s (at offset %zu of the pattern)", msg, p->i);
    p->failed = 1;
    return -1;
}

static int at_end(const rxp *p) { return p->i >= p->n; }
static int peek(const rxp *p) { return at_end(p) ? -1 : (unsigned char)p->s[p->i]; }

/* The next code point of the (valid UTF-8) pattern. */
static uint32_t next_cp(rxp *p) {
    const unsigned char *s = (const unsigned char *)p->s + p->i;
    size_t left = p->n - p->i;
    uint32_t c = s[0];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if ((size_t)len > left) len = 1;
    if (len == 2) c = (c & 0x1F) << 6 | (s[1] & 0x3F);
    else if (len == 3) c = (c & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    else if (len == 4) c = (c & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    p->i += (size_t)len;
    return c;
}

static rxn *set_node(uint32_t lo, uint32_t hi) {
    rxn *x = node(RX_SET);
    gcp_add(&x->set, lo, hi);
    return x;
}

static void class_escape_set(gcpset *c, int e) {
    switch (e) {
    case 'd': case 'D': gcp_add(c, '0', '9'); break;
    case 'w': case 'W':
        gcp_add(c, '0', '9');
        gcp_add(c, 'A', 'Z');
        gcp_add(c, '_', '_');
        gcp_add(c, 'a', 'z');
        break;
    default: /* s, S: ECMA-262 WhiteSpace and LineTerminator */
        gcp_add(c, 9, 13);
        gcp_add(c, ' ', ' ');
        gcp_add(c, 0xA0, 0xA0);
        gcp_add(c, 0x1680, 0x1680);
        gcp_add(c, 0x2000, 0x200A);
        gcp_add(c, 0x2028, 0x2029);
        gcp_add(c, 0x202F, 0x202F);
        gcp_add(c, 0x205F, 0x205F);
        gcp_add(c, 0x3000, 0x3000);
        gcp_add(c, 0xFEFF, 0xFEFF);
        break;
    }
    if (e == 'D' || e == 'W' || e == 'S') gcp_negate(c);
}

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex(rxp *p, int n, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < n; k++) {
        int h = hexv(peek(p));
        if (h < 0) return fail(p, "a \\x or \\u escape needs hexadecimal digits");
        *v = *v * 16 + (uint32_t)h;
        p->i++;
    }
    return 0;
}

/* After a backslash: a character (*cp) or a class (*set filled, returns 1). in_class: \b is backspace there.
 * 0 for a character, 1 for a class, -1 on error. */
static int parse_escape(rxp *p, int in_class, uint32_t *cp, gcpset *set) {
    if (at_end(p)) return fail(p, "the pattern ends with a lone backslash");
    int e = peek(p);
    p->i++;
    switch (e) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': class_escape_set(set, e); return 1;
    case 't': *cp = '\t'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0':
        if (peek(p) >= '0' && peek(p) <= '9') return fail(p, "octal escapes are not supported");
        *cp = 0;
        return 0;
    case 'x': return read_hex(p, 2, cp) ? -1 : 0;
    case 'u':
        if (peek(p) == '{') {
            p->i++;
            uint32_t v = 0;
            int nd = 0;
            while (hexv(peek(p)) >= 0 && nd < 7) {
                v = v * 16 + (uint32_t)hexv(peek(p));
                p->i++;
                nd++;
            }
            if (peek(p) != '}' || nd == 0 || v > 0x10FFFF) return fail(p, "a \\u{...} escape needs 1 to 6 hex digits up to 10FFFF");
            p->i++;
            *cp = v;
            return 0;
        }
        if (read_hex(p, 4, cp)) return -1;
        if (*cp >= 0xD800 && *cp <= 0xDBFF && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
            size_t save = p->i;
            p->i += 2;
            uint32_t lo;
            if (read_hex(p, 4, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
                return 0;
            }
            p->failed = 0;
            p->i = save;
        }
        if (*cp >= 0xD800 && *cp <= 0xDFFF) return fail(p, "a lone surrogate escape matches no character");
        return 0;
    case 'c': {
        int l = peek(p);
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return fail(p, "\\c needs a letter");
        p->i++;
        *cp = (uint32_t)(l % 32);
        return 0;
    }
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return fail(p, "word boundaries (\\b) are not supported");
    case 'B': return fail(p, "word boundaries (\\B) are not supported");
    case 'p': case 'P': return fail(p, "Unicode property escapes (\\p, \\P) are not supported");
    case 'k': return fail(p, "named backreferences (\\k) are not supported");
    default:
        if (e >= '1' && e <= '9') return fail(p, "backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || e >= 0x80)
            return fail(p, "an unknown escape");
        *cp = (uint32_t)e; /* escaped punctuation stands for itself */
        return 0;
    }
}

static rxn *parse_class(rxp *p) {
    rxn *x = node(RX_SET);
    int neg = 0;
    if (peek(p) == '^') {
        neg = 1;
        p->i++;
    }
    for (;;) {
        if (at_end(p)) {
            fail(p, "an unterminated character class");
            node_free(x);
            return NULL;
        }
        if (peek(p) == ']') {
            p->i++;
            break;
        }
        uint32_t a;
        int kind = 0;
        if (peek(p) == '\\') {
            p->i++;
            kind = parse_escape(p, 1, &a, &x->set);
            if (kind < 0) {
                node_free(x);
                return NULL;
            }
        } else {
            a = next_cp(p);
        }
        if (kind == 1) continue;
        if (peek(p) == '-' && p->i + 1 < p->n && p->s[p->i + 1] != ']') {
            p->i++;
            uint32_t b;
            gcpset tmp = {0};
            int kb = 0;
            if (peek(p) == '\\') {
                p->i++;
                kb = parse_escape(p, 1, &b, &tmp);
            } else {
                b = next_cp(p);
            }
            gcp_free(&tmp);
            if (kb != 0 || b < a) {
                if (kb >= 0) fail(p, kb == 1 ? "a class escape cannot end a range" : "a range out of order");
                node_free(x);
                return NULL;
            }
            gcp_add(&x->set, a, b);
        } else {
            gcp_add(&x->set, a, a);
        }
    }
    if (neg) gcp_negate(&x->set);
    gcp_norm(&x->set);
    return x;
}

/* {n}, {n,}, {n,m}: 1 and the bounds when the text at p is one (consumed), 0 when it is not (a literal '{'). */
static int parse_braces(rxp *p, int *mn, int *mx) {
    size_t j = p->i + 1;
    long a = 0, b = -1;
    int nd = 0;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && nd < 8) a = a * 10 + (p->s[j++] - '0'), nd++;
    if (!nd) return 0;
    if (j < p->n && p->s[j] == ',') {
        j++;
        int nd2 = 0;
        long v = 0;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && nd2 < 8) v = v * 10 + (p->s[j++] - '0'), nd2++;
        b = nd2 ? v : -1;
    } else {
        b = a;
    }
    if (j >= p->n || p->s[j] != '}') return 0;
    p->i = j + 1;
    *mn = (int)(a > RX_MAX_REPEAT + 1 ? RX_MAX_REPEAT + 1 : a);
    *mx = b < 0 ? -1 : (int)(b > RX_MAX_REPEAT + 1 ? RX_MAX_REPEAT + 1 : b);
    return 1;
}

static rxn *parse_alt(rxp *p, int top);

static rxn *parse_atom(rxp *p) {
    int c = peek(p);
    if (c == '(') {
        p->i++;
        if (peek(p) == '?') {
            p->i++;
            int d = peek(p);
            if (d == ':') {
                p->i++;
            } else if (d == '=' || d == '!') {
                fail(p, "lookahead is not supported");
                return NULL;
            } else if (d == '<') {
                p->i++;
                if (peek(p) == '=' || peek(p) == '!') {
                    fail(p, "lookbehind is not supported");
                    return NULL;
                }
                while (!at_end(p) && peek(p) != '>') p->i++;
                if (at_end(p)) {
                    fail(p, "an unterminated group name");
                    return NULL;
                }
                p->i++;
            } else {
                fail(p, "an unsupported group kind (?...)");
                return NULL;
            }
        }
        if (++p->depth > FRIGG_GRAMMAR_MAX_DEPTH) {
            fail(p, "groups nested too deep");
            return NULL;
        }
        rxn *x = parse_alt(p, 0);
        p->depth--;
        if (!x) return NULL;
        if (peek(p) != ')') {
            node_free(x);
            fail(p, "an unterminated group");
            return NULL;
        }
        p->i++;
        return x;
    }
    if (c == '[') {
        p->i++;
        return parse_class(p);
    }
    if (c == '.') {
        p->i++;
        rxn *x = node(RX_SET);
        gcp_add(&x->set, '\n', '\n');
        gcp_add(&x->set, '\r', '\r');
        gcp_add(&x->set, 0x2028, 0x2029);
        gcp_negate(&x->set);
        return x;
    }
    if (c == '\\') {
        p->i++;
        rxn *x = node(RX_SET);
        uint32_t cp;
        int k = parse_escape(p, 0, &cp, &x->set);
        if (k < 0) {
            node_free(x);
            return NULL;
        }
        if (k == 0) gcp_add(&x->set, cp, cp);
        gcp_norm(&x->set);
        return x;
    }
    if (c == '^' || c == '$') {
        fail(p, "an anchor (^ or $) is supported only at the start or end of a top-level alternative");
        return NULL;
    }
    if (c == ')') {
        fail(p, "an unmatched ')'");
        return NULL;
    }
    if (c == '*' || c == '+' || c == '?') {
        fail(p, "a quantifier with nothing to repeat");
        return NULL;
    }
    if (c == '{') {
        int mn, mx;
        size_t save = p->i;
        if (parse_braces(p, &mn, &mx)) {
            p->i = save;
            fail(p, "a quantifier with nothing to repeat");
            return NULL;
        }
    }
    uint32_t cp = next_cp(p);
    return set_node(cp, cp);
}

/* One alternative: atoms with their quantifiers, up to '|', ')' or the end. top: a top-level alternative, where
 * a leading '^' and a trailing '$' are anchors (flags 1 and 2 of *anch). */
static rxn *parse_cat(rxp *p, int top, int *anch) {
    rxn *x = node(RX_CAT);
    if (top && peek(p) == '^') {
        p->i++;
        *anch |= 1;
    }
    while (!at_end(p) && peek(p) != '|' && peek(p) != ')') {
        if (top && peek(p) == '$' && (p->i + 1 == p->n || p->s[p->i + 1] == '|')) {
            p->i++;
            *anch |= 2;
            break;
        }
        rxn *a = parse_atom(p);
        if (!a) {
            node_free(x);
            return NULL;
        }
        int mn = -2, mx = -1, c = peek(p);
        if (c == '*') mn = 0, mx = -1, p->i++;
        else if (c == '+') mn = 1, mx = -1, p->i++;
        else if (c == '?') mn = 0, mx = 1, p->i++;
        else if (c == '{' && parse_braces(p, &mn, &mx)) {
        } else mn = -2;
        if (mn != -2) {
            if (peek(p) == '?') p->i++; /* lazy: the same language */
            if (mn > RX_MAX_REPEAT || mx > RX_MAX_REPEAT) {
                node_free(a);
                node_free(x);
                fail(p, "a repetition count above 1000");
                return NULL;
            }
            if (mx >= 0 && mx < mn) {
                node_free(a);
                node_free(x);
                fail(p, "a repetition {n,m} with m < n");
                return NULL;
            }
            rxn *r = node(RX_REP);
            r->min = mn;
            r->max = mx;
            add_kid(r, a);
            a = r;
        }
        add_kid(x, a);
    }
    return x;
}

static rxn *any_star(void) {
    rxn *any = node(RX_REP);
    any->min = 0;
    any->max = -1;
    add_kid(any, set_node(0, 0x10FFFF));
    return any;
}

/* The alternatives; at the top level each gets its anchoring (an unanchored end matches anything). */
static rxn *parse_alt(rxp *p, int top) {
    rxn *x = node(RX_ALT);
    for (;;) {
        int anch = 0;
        rxn *b = parse_cat(p, top, &anch);
        if (!b) {
            node_free(x);
            return NULL;
        }
        if (top) {
            rxn *wrapped = node(RX_CAT);
            if (!(anch & 1) && !p->full) add_kid(wrapped, any_star());
            add_kid(wrapped, b);
            if (!(anch & 2) && !p->full) add_kid(wrapped, any_star());
            b = wrapped;
        }
        add_kid(x, b);
        if (peek(p) != '|') break;
        p->i++;
    }
    return x;
}

static double cost(const rxn *x) {
    double c = x->kind == RX_SET ? 1 : 0;
    for (int i = 0; i < x->nk; i++) c += cost(x->k[i]);
    if (x->kind == RX_REP) c *= (x->max > 0 ? x->max : x->min > 0 ? x->min : 1);
    return c;
}

static gfrag build(gnfa *a, const rxn *x, int in_string) {
    switch (x->kind) {
    case RX_SET:
        if (in_string) return gj_cpset_in_string(a, &x->set);
        if (x->set.n == 1) return gf_utf8_range(a, x->set.r[0].lo, x->set.r[0].hi);
        {
            gfrag *alts = frigg_xmalloc((size_t)(x->set.n ? x->set.n : 1) * sizeof *alts);
            for (int i = 0; i < x->set.n; i++) alts[i] = gf_utf8_range(a, x->set.r[i].lo, x->set.r[i].hi);
            gfrag f = gf_alt(a, alts, x->set.n);
            free(alts);
            return f;
        }
    case RX_CAT: {
        gfrag f = gf_empty(a);
        for (int i = 0; i < x->nk; i++) f = gf_seq(a, f, build(a, x->k[i], in_string));
        return f;
    }
    case RX_ALT: {
        if (x->nk == 1) return build(a, x->k[0], in_string);
        gfrag *alts = frigg_xmalloc((size_t)x->nk * sizeof *alts);
        for (int i = 0; i < x->nk; i++) alts[i] = build(a, x->k[i], in_string);
        gfrag f = gf_alt(a, alts, x->nk);
        free(alts);
        return f;
    }
    default: { /* RX_REP: min copies, then a star or nested options up to max */
        gfrag f = gf_empty(a);
        for (int i = 0; i < x->min && !a->overflow; i++) f = gf_seq(a, f, build(a, x->k[0], in_string));
        if (x->max < 0) return gf_seq(a, f, gf_star(a, build(a, x->k[0], in_string)));
        gfrag tail = gf_empty(a);
        for (int i = x->min; i < x->max && !a->overflow; i++) tail = gf_opt(a, gf_seq(a, build(a, x->k[0], in_string), tail));
        return gf_seq(a, f, tail);
    }
    }
}

int grx_compile(gnfa *a, const char *re, size_t len, int flags, gfrag *out, char *err, size_t errsz) {
    rxp p = {.s = re, .n = len, .err = err, .errsz = errsz, .full = !!(flags & GRX_FULL)};
    int in_string = !!(flags & GRX_IN_STRING);
    rxn *x = parse_alt(&p, 1);
    if (x && !at_end(&p)) {
        fail(&p, "an unmatched ')'");
        node_free(x);
        x = NULL;
    }
    if (!x) return -1;
    if (cost(x) > RX_MAX_COST) {
        snprintf(err, errsz, "the pattern expands to more than %d characters to match (its repetitions)", RX_MAX_COST);
        node_free(x);
        return -1;
    }
    *out = build(a, x, in_string);
    node_free(x);
    return 0;
}
