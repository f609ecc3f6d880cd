/* strbuf.c — see strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void reserve(frigg_strbuf *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        fprintf(stderr, "frigg: out of memory growing a string to %zu bytes\n", cap);
        abort();
    }
    b->p = p;
    b->cap = cap;
}

void frigg_sb_put(frigg_strbuf *b, const char *s, size_t n) {
    reserve(b, n);
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void frigg_sb_puts(frigg_strbuf *b, const char *s) { frigg_sb_put(b, s, strlen(s)); }

void frigg_sb_putc(frigg_strbuf *b, char c) { frigg_sb_put(b, &c, 1); }

void frigg_sb_printf(frigg_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *frigg_sb_take(frigg_strbuf *b) {
    char *p = b->p ? b->p : frigg_xstrdup("");
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void frigg_sb_free(frigg_strbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
