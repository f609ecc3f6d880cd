/* tok_json.c — a small strict JSON scanner for the two big members of tokenizer.json, model.vocab
 * (262k entries) and model.merges (515k), which jansson would turn into a million heap objects: that
 * parse alone took longer than HF's whole load. The scanner validates the whole document, finds
 * those two values (the last occurrence of each key, as jansson and serde keep), and decodes them
 * straight into the tokenizer's maps; the rest of the file, with the two values blanked, still goes
 * through jansson. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

#define MAX_DEPTH 256 /* deeper nesting is refused rather than risking the stack */

typedef struct {
    const char *p, *end, *start;
    const char *err;
} scan;

static int bad(scan *s, const char *msg) {
    if (!s->err) {
        s->err = msg;
        /* report the offset the scan stopped at */
        frigg_set_error("invalid JSON at byte %zu: %s", (size_t)(s->p - s->start), msg);
    }
    return -1;
}

static void ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static int hex4(scan *s, uint32_t *v) {
    if (s->end - s->p < 4) return bad(s, "short \\u escape");
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        char c = s->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return bad(s, "bad \\u escape");
        x = x * 16 + (uint32_t)d;
    }
    s->p += 4;
    *v = x;
    return 0;
}

/* A string at s->p (the opening quote); decoded into out when out is not NULL. */
static int str(scan *s, tok_buf *out) {
    if (s->p >= s->end || *s->p != '"') return bad(s, "expected a string");
    s->p++;
    if (out) out->n = 0;
    for (;;) {
        const char *q = s->p;
        while (q < s->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
        if (q >= s->end) return bad(s, "unterminated string");
        if ((unsigned char)*q < 0x20) {
            s->p = q;
            return bad(s, "control character in string");
        }
        size_t run = (size_t)(q - s->p);
        if (run) {
            size_t ok = tok_utf8_valid(s->p, run);
            if (ok != run) {
                s->p += ok;
                return bad(s, "invalid UTF-8 in string");
            }
            if (out) tok_buf_put(out, s->p, run);
        }
        s->p = q + 1;
        if (*q == '"') {
            if (out && !out->p) tok_buf_put(out, "", 0);
            return 0;
        }
        if (s->p >= s->end) return bad(s, "unterminated escape");
        char e = *s->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char val[] = "\"\\/\b\f\n\r\t";
            if (out) tok_buf_putc(out, val[simple - "\"\\/bfnrt"]);
            continue;
        }
        if (e != 'u') return bad(s, "unknown escape");
        uint32_t cp;
        if (hex4(s, &cp) < 0) return -1;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return bad(s, "lone trailing surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u') return bad(s, "lone leading surrogate in \\u escape");
            s->p += 2;
            if (hex4(s, &lo) < 0) return -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return bad(s, "invalid surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (out) tok_buf_put_cp(out, cp);
    }
}

/* A number; *is_uint and *val describe a plain non-negative integer that fits 2^53. */
static int num(scan *s, int *is_uint, uint64_t *val) {
    const char *p = s->p;
    int neg = 0, frac = 0;
    uint64_t v = 0;
    int big = 0;
    if (p < s->end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= s->end || *p < '0' || *p > '9') return bad(s, "bad number");
    if (*p == '0' && p + 1 < s->end && p[1] >= '0' && p[1] <= '9') return bad(s, "leading zero in number");
    while (p < s->end && *p >= '0' && *p <= '9') {
        if (v > (1ull << 53)) big = 1;
        else v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p < s->end && *p == '.') {
        frac = 1;
        p++;
        if (p >= s->end || *p < '0' || *p > '9') return bad(s, "bad fraction");
        while (p < s->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < s->end && (*p == 'e' || *p == 'E')) {
        frac = 1;
        p++;
        if (p < s->end && (*p == '+' || *p == '-')) p++;
        if (p >= s->end || *p < '0' || *p > '9') return bad(s, "bad exponent");
        while (p < s->end && *p >= '0' && *p <= '9') p++;
    }
    s->p = p;
    if (is_uint) *is_uint = !neg && !frac && !big;
    if (val) *val = v;
    return 0;
}

static int value(scan *s, int depth);

static int lit(scan *s, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n)) return bad(s, "unexpected character");
    s->p += n;
    return 0;
}

/* Skip (and validate) one value. */
static int value(scan *s, int depth) {
    if (depth > MAX_DEPTH) return bad(s, "nesting too deep");
    ws(s);
    if (s->p >= s->end) return bad(s, "unexpected end");
    switch (*s->p) {
    case '"':
        return str(s, NULL);
    case '{':
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return 0;
        }
        for (;;) {
            ws(s);
            if (str(s, NULL) < 0) return -1;
            ws(s);
            if (s->p >= s->end || *s->p != ':') return bad(s, "expected ':'");
            s->p++;
            if (value(s, depth + 1) < 0) return -1;
            ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == '}') {
                s->p++;
                return 0;
            }
            return bad(s, "expected ',' or '}'");
        }
    case '[':
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return 0;
        }
        for (;;) {
            if (value(s, depth + 1) < 0) return -1;
            ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == ']') {
                s->p++;
                return 0;
            }
            return bad(s, "expected ',' or ']'");
        }
    case 't':
        return lit(s, "true");
    case 'f':
        return lit(s, "false");
    case 'n':
        return lit(s, "null");
    default:
        return num(s, NULL, NULL);
    }
}

/* Walk an object at s->p; for each member whose key is one of keys[k], record the value span
 * (the last occurrence wins). Other values are skipped. */
static int object_spans(scan *s, int depth, const char *const *keys, int nk, const char **b, const char **e) {
    tok_buf key = {0};
    ws(s);
    if (s->p >= s->end || *s->p != '{') {
        free(key.p);
        return bad(s, "expected an object");
    }
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        free(key.p);
        return 0;
    }
    for (;;) {
        ws(s);
        if (str(s, &key) < 0) break;
        ws(s);
        if (s->p >= s->end || *s->p != ':') {
            bad(s, "expected ':'");
            break;
        }
        s->p++;
        ws(s);
        const char *vb = s->p;
        if (value(s, depth + 1) < 0) break;
        for (int k = 0; k < nk; k++)
            if (key.n == strlen(keys[k]) && !memcmp(key.p, keys[k], key.n)) {
                b[k] = vb;
                e[k] = s->p;
            }
        ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            free(key.p);
            return 0;
        }
        bad(s, "expected ',' or '}'");
        break;
    }
    free(key.p);
    return -1;
}

int tok_json_split(const char *json, size_t len, tok_json_parts *parts) {
    memset(parts, 0, sizeof *parts);
    scan s = {json, json + len, json, NULL};
    static const char *const top_keys[] = {"model"};
    const char *mb[1] = {NULL}, *me[1] = {NULL};
    if (object_spans(&s, 0, top_keys, 1, mb, me) < 0) return -1;
    ws(&s);
    if (s.p != s.end) return bad(&s, "trailing characters after the top-level object");
    if (!mb[0] || *mb[0] != '{') return 0; /* no model object: the jansson path reports it */
    scan m = {mb[0], me[0], json, NULL};
    static const char *const model_keys[] = {"vocab", "merges"};
    const char *b[2] = {NULL, NULL}, *e[2] = {NULL, NULL};
    if (object_spans(&m, 1, model_keys, 2, b, e) < 0) return -1;
    parts->vocab = b[0];
    parts->vocab_end = e[0];
    parts->merges = b[1];
    parts->merges_end = e[1];
    return 0;
}

int tok_json_vocab(const tok_json_parts *parts, const char *base, tok_strmap *vocab, int64_t *max_id) {
    scan s = {parts->vocab, parts->vocab_end, base, NULL};
    tok_buf key = {0};
    *max_id = -1;
    int rc = -1;
    if (*s.p != '{') return bad(&s, "model.vocab must be an object");
    s.p++;
    ws(&s);
    if (s.p < s.end && *s.p == '}') return 0;
    for (;;) {
        ws(&s);
        if (str(&s, &key) < 0) break;
        ws(&s);
        if (s.p >= s.end || *s.p != ':') {
            bad(&s, "expected ':'");
            break;
        }
        s.p++;
        ws(&s);
        int is_uint;
        uint64_t v;
        if (num(&s, &is_uint, &v) < 0) break;
        if (!is_uint || v > INT32_MAX - 1) {
            frigg_set_error("vocab entry '%.80s': id must be an integer in [0, 2^31-2]", key.p);
            break;
        }
        tok_strmap_put(vocab, key.p, key.n, (int32_t)v);
        if ((int64_t)v > *max_id) *max_id = (int64_t)v;
        ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
            continue;
        }
        if (s.p < s.end && *s.p == '}') {
            rc = 0;
            break;
        }
        bad(&s, "expected ',' or '}'");
        break;
    }
    free(key.p);
    return rc;
}

int tok_json_merges(const tok_json_parts *parts, const char *base, tok_merge_fn fn, void *ctx) {
    scan s = {parts->merges, parts->merges_end, base, NULL};
    tok_buf a = {0}, b = {0};
    int rc = -1, form = -1; /* 0 = "a b" strings, 1 = [a, b] pairs */
    size_t i = 0;
    if (*s.p != '[') return bad(&s, "model.merges must be a list");
    s.p++;
    ws(&s);
    if (s.p < s.end && *s.p == ']') return 0;
    for (;; i++) {
        ws(&s);
        int f = s.p < s.end && *s.p == '[';
        if (form < 0) form = f;
        if (f != form) {
            frigg_set_error("merges mix the \"a b\" string form and the [a, b] pair form");
            break;
        }
        if (!f) {
            if (str(&s, &a) < 0) break;
            if (fn(ctx, i, a.p, a.n, NULL, 0) < 0) break;
        } else {
            s.p++;
            ws(&s);
            if (str(&s, &a) < 0) break;
            ws(&s);
            if (s.p >= s.end || *s.p != ',') {
                frigg_set_error("merges: entry %zu is neither a string nor a pair of strings", i);
                break;
            }
            s.p++;
            ws(&s);
            if (str(&s, &b) < 0) break;
            ws(&s);
            if (s.p >= s.end || *s.p != ']') {
                frigg_set_error("merges: entry %zu is neither a string nor a pair of strings", i);
                break;
            }
            s.p++;
            if (fn(ctx, i, a.p, a.n, b.p, b.n) < 0) break;
        }
        ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
            continue;
        }
        if (s.p < s.end && *s.p == ']') {
            rc = 0;
            break;
        }
        bad(&s, "expected ',' or ']'");
        break;
    }
    free(a.p);
    free(b.p);
    return rc;
}
