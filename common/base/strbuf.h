/* strbuf.h — a growable byte string. Used where output length is unknown in advance (chat
 * rendering, tool-call JSON, held-back stop-string text); it aborts on out-of-memory like
 * frigg_xmalloc, so callers never check each append. */
#ifndef FRIGG_STRBUF_H
#define FRIGG_STRBUF_H

#include <stddef.h>

typedef struct {
    char *p;        /* always NUL-terminated once anything was appended */
    size_t len, cap;
} frigg_strbuf;

#define FRIGG_STRBUF_INIT {NULL, 0, 0}

void frigg_sb_put(frigg_strbuf *b, const char *s, size_t n);
void frigg_sb_puts(frigg_strbuf *b, const char *s);
void frigg_sb_putc(frigg_strbuf *b, char c);
void frigg_sb_printf(frigg_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes to the caller as a malloc'd NUL-terminated string ("" when empty) and resets b. */
char *frigg_sb_take(frigg_strbuf *b);
void frigg_sb_free(frigg_strbuf *b);

#endif
