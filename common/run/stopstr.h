/* stopstr.h — stop strings (a request's "stop", up to 4) over streamed text. The output never
 * contains a stop string; text that could be the start of one is held back until it is known
 * not to be; streaming in any piece sizes gives exactly the text a whole-output cut gives
 * (everything before the earliest occurrence of any stop string). Matching is on bytes. */
#ifndef FRIGG_STOPSTR_H
#define FRIGG_STOPSTR_H

#include <stddef.h>

#define FRIGG_STOPSTR_MAX 4

typedef struct frigg_stopstr frigg_stopstr;

/* NULL + error on n > 4, n < 0, or an empty/NULL string. n == 0 passes everything through. */
frigg_stopstr *frigg_stopstr_new(const char *const *stops, int n);
/* Appends `piece`; writes the newly safe text to *out (malloc'd, NUL-terminated, possibly empty)
 * and its length to *out_len; returns 1 if a stop string completed (the emitted text then ends
 * right before it, and later pushes emit nothing and return 1), else 0. A complete stop string
 * is reported only once no stop that starts earlier can still complete. */
int frigg_stopstr_push(frigg_stopstr *s, const char *piece, size_t len, char **out, size_t *out_len);
/* End of generation: releases the held-back tail (nothing after a stop). A stop string can be
 * completed but still undecided at the end (stops "<" and "a<><", text ending "a<": a push could
 * not yet rule out the longer, earlier one); flush then cuts there and frigg_stopstr_matched
 * turns 1, so check it after flushing to set finish_reason "stop". */
void frigg_stopstr_flush(frigg_stopstr *s, char **out, size_t *out_len);
/* 1 once a stop string has cut the output (by push or flush). */
int frigg_stopstr_matched(const frigg_stopstr *s);
void frigg_stopstr_free(frigg_stopstr *s);

#endif
