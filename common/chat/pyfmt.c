/* pyfmt.c — see pyfmt.h. */
#include "pyfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"

/* ---- float repr ---------------------------------------------------------------------------- */

/* Shortest decimal mantissa M (no trailing zeros) and exponent E with M * 10^E == v after
 * strtod. The correctly rounded p-digit value is tried first for p = 1..17; when it misses the
 * round-trip interval (possible at powers of two, where the interval is lopsided) its neighbour
 * on the other side of v may still hit it, and Python's dtoa would then return that neighbour. */
static void shortest_digits(double v, unsigned long long *mant, int *exp10) {
    char buf[48];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        char *e = strchr(buf, 'e');
        int ex = atoi(e + 1);
        unsigned long long m = 0;
        for (char *q = buf; q < e; q++)
            if (*q >= '0' && *q <= '9') m = m * 10 + (unsigned long long)(*q - '0');
        int E = ex - (p - 1);
        unsigned long long cand[3] = {m, m + 1, m - 1};
        for (int k = 0; k < 3; k++) {
            if (cand[k] == 0) continue;
            char t[48];
            snprintf(t, sizeof t, "%llue%d", cand[k], E);
            if (strtod(t, NULL) == v) {
                unsigned long long c = cand[k];
                int E2 = E;
                while (c % 10 == 0) {
                    c /= 10;
                    E2++;
                }
                *mant = c;
                *exp10 = E2;
                return;
            }
        }
    }
    /* %.16e always round-trips, so this is unreachable; keep a defined result anyway. */
    *mant = 0;
    *exp10 = 0;
}

int frigg_py_float_repr(double v, char out[32]) {
    if (isnan(v)) return snprintf(out, 32, "nan");
    if (isinf(v)) return snprintf(out, 32, v < 0 ? "-inf" : "inf");
    char *o = out;
    if (signbit(v)) {
        *o++ = '-';
        v = -v;
    }
    if (v == 0) {
        strcpy(o, "0.0");
        return (int)(o - out) + 3;
    }
    unsigned long long mant;
    int e10;
    shortest_digits(v, &mant, &e10);
    char dig[24];
    int nd = snprintf(dig, sizeof dig, "%llu", mant);
    int decpt = nd + e10; /* value = 0.DIGITS * 10^decpt */
    if (decpt <= -4 || decpt > 16) {
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        o += sprintf(o, "e%+03d", decpt - 1);
    } else if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++) *o++ = '0';
        memcpy(o, dig, (size_t)nd);
        o += nd;
    } else if (decpt < nd) {
        memcpy(o, dig, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, dig + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    } else {
        memcpy(o, dig, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    }
    *o = 0;
    return (int)(o - out);
}

/* ---- UTF-8, whitespace ----------------------------------------------------------------------- */

int frigg_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    int len;
    uint32_t c, min;
    if ((u[0] & 0xE0) == 0xC0) {
        len = 2, c = u[0] & 0x1F, min = 0x80;
    } else if ((u[0] & 0xF0) == 0xE0) {
        len = 3, c = u[0] & 0x0F, min = 0x800;
    } else if ((u[0] & 0xF8) == 0xF0) {
        len = 4, c = u[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (u[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int frigg_py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

void frigg_py_strip(const char *s, size_t n, size_t *start, size_t *end) {
    size_t a = 0;
    while (a < n) {
        uint32_t cp;
        int l = frigg_utf8_decode(s + a, n - a, &cp);
        if (!l || !frigg_py_isspace(cp)) break;
        a += (size_t)l;
    }
    size_t b = n;
    while (b > a) {
        size_t k = b - 1; /* back up to the lead byte of the last code point */
        while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80 && b - k < 4) k--;
        uint32_t cp;
        int l = frigg_utf8_decode(s + k, b - k, &cp);
        if (!l || (size_t)l != b - k || !frigg_py_isspace(cp)) break;
        b = k;
    }
    *start = a;
    *end = b;
}

/* ---- lower ------------------------------------------------------------------------------------ */

static uint32_t lower_cp(uint32_t c) {
    int lo = 0, hi = frigg_lower_nruns - 1;
    while (lo <= hi) { /* the last run starting at or before c */
        int mid = (lo + hi) / 2;
        if (frigg_lower_runs[mid].first <= c) lo = mid + 1;
        else hi = mid - 1;
    }
    if (hi < 0) return c;
    const frigg_lower_run *r = &frigg_lower_runs[hi];
    uint32_t off = c - r->first;
    if (off % (uint32_t)r->stride == 0 && off / (uint32_t)r->stride < (uint32_t)r->count)
        return (uint32_t)((int32_t)c + r->delta);
    return c;
}

static void put_utf8(frigg_strbuf *b, uint32_t c) {
    char t[4];
    int n;
    if (c < 0x80) {
        t[0] = (char)c, n = 1;
    } else if (c < 0x800) {
        t[0] = (char)(0xC0 | (c >> 6)), t[1] = (char)(0x80 | (c & 0x3F)), n = 2;
    } else if (c < 0x10000) {
        t[0] = (char)(0xE0 | (c >> 12)), t[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        t[2] = (char)(0x80 | (c & 0x3F)), n = 3;
    } else {
        t[0] = (char)(0xF0 | (c >> 18)), t[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((c >> 6) & 0x3F)), t[3] = (char)(0x80 | (c & 0x3F)), n = 4;
    }
    frigg_sb_put(b, t, (size_t)n);
}

int frigg_py_lower(const char *s, size_t n, char **out, size_t *out_len) {
    frigg_strbuf b = FRIGG_STRBUF_INIT;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = frigg_utf8_decode(s + i, n - i, &c);
        if (!l) {
            frigg_sb_free(&b);
            frigg_set_error("invalid UTF-8 at byte %zu", i);
            return -1;
        }
        i += (size_t)l;
        if (c == 0x3A3) {
            frigg_sb_free(&b);
            frigg_set_error("contains U+03A3 (Greek capital sigma), whose Python lower-casing depends "
                            "on context; sorting such keys is not implemented");
            return -1;
        }
        if (c == 0x130) { /* the one code point str.lower() maps to two: "i" + U+0307 */
            put_utf8(&b, 'i');
            put_utf8(&b, 0x307);
            continue;
        }
        put_utf8(&b, lower_cp(c));
    }
    *out_len = b.len;
    *out = frigg_sb_take(&b);
    return 0;
}
