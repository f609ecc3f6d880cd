/* tok_load_util.c — small JSON and error helpers for the tokenizer.json loader (see tok_load.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_load.h"
#include "base/util.h"

int tok_fail(const tok_ctx *c, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    frigg_set_error("%s: %s", c->name, msg);
    return -1;
}

char *tok_dup(const char *s, size_t n) {
    char *p = frigg_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* A JSON string member (by key) as bytes; -1 when absent or not a string. */
int tok_jstr(json_t *o, const char *key, const char **s, size_t *n) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) return -1;
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

const char *tok_jtype(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* pattern: {"String": s} or {"Regex": r}; *is_regex tells which. */
int tok_jpattern(const tok_ctx *c, json_t *o, const char *what, const char **s, size_t *n, int *is_regex) {
    json_t *p = json_object_get(o, "pattern");
    const char *v;
    if (json_is_object(p) && json_object_size(p) == 1) {
        if (!tok_jstr(p, "String", &v, n)) {
            *is_regex = 0;
            *s = v;
            return 0;
        }
        if (!tok_jstr(p, "Regex", &v, n)) {
            *is_regex = 1;
            *s = v;
            return 0;
        }
    }
    return tok_fail(c, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
}

int tok_single_char(const tok_ctx *c, const char *s, size_t n, const char *what, uint32_t *cp) {
    size_t adv;
    if (n == 0 || tok_utf8_valid(s, n) != n || (tok_utf8_next(s, n, &adv), adv != n))
        return tok_fail(c, "%s must be a single character", what);
    *cp = tok_utf8_next(s, n, &adv);
    return 0;
}

int tok_compile_regex(const tok_ctx *c, const char *src, size_t n, pcre2_code **out) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, n, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return tok_fail(c, "regex does not compile at offset %zu: %s", (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* a speed-up only: the interpreter is the fallback */
    *out = re;
    return 0;
}
