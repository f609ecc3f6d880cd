/* stopstr.c — see stopstr.h.
 *
 * Invariant: `held` is the longest suffix of the text seen so far that is a proper prefix of some
 * stop string. Everything before it has been emitted and provably starts no stop string: a stop
 * starting there would either lie wholly inside the text seen (found as a full match) or run past
 * its end (then that position would start a held suffix). Held text is at most the longest stop
 * minus one byte, so each push costs O((held + piece) * total stop length). */
#include "stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "util.h"

struct frigg_stopstr {
    char *stops[FRIGG_STOPSTR_MAX];
    size_t lens[FRIGG_STOPSTR_MAX];
    int n;
    int stopped;
    frigg_strbuf held;
};

frigg_stopstr *frigg_stopstr_new(const char *const *stops, int n) {
    if (n < 0 || n > FRIGG_STOPSTR_MAX) {
        frigg_set_error("stop: at most %d stop strings (got %d)", FRIGG_STOPSTR_MAX, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!stops || !stops[i] || !stops[i][0]) {
            frigg_set_error("stop[%d]: must be a non-empty string", i);
            return NULL;
        }
    }
    frigg_stopstr *s = frigg_xcalloc(1, sizeof *s);
    for (int i = 0; i < n; i++) {
        s->stops[i] = frigg_xstrdup(stops[i]);
        s->lens[i] = strlen(stops[i]);
    }
    s->n = n;
    return s;
}

static void give(const char *p, size_t n, char **out, size_t *out_len) {
    char *o = frigg_xmalloc(n + 1);
    if (n) memcpy(o, p, n);
    o[n] = 0;
    *out = o;
    *out_len = n;
}

int frigg_stopstr_push(frigg_stopstr *s, const char *piece, size_t len, char **out, size_t *out_len) {
    if (s->stopped) {
        give("", 0, out, out_len);
        return 1;
    }
    frigg_sb_put(&s->held, piece, len);
    const char *t = s->held.p ? s->held.p : "";
    size_t n = s->held.len;

    size_t first = n; /* earliest start of a complete stop string */
    for (int k = 0; k < s->n; k++) {
        const char *m = memmem(t, n, s->stops[k], s->lens[k]);
        if (m && (size_t)(m - t) < first) first = (size_t)(m - t);
    }
    if (first < n) {
        give(t, first, out, out_len);
        s->stopped = 1;
        frigg_sb_free(&s->held);
        return 1;
    }
    size_t keep_from = n; /* earliest position whose suffix is a proper prefix of a stop */
    for (int k = 0; k < s->n; k++) {
        size_t maxl = s->lens[k] - 1 < n ? s->lens[k] - 1 : n;
        for (size_t l = maxl; l > 0; l--) {
            if (n - l >= keep_from) break; /* a shorter suffix cannot start earlier */
            if (!memcmp(t + n - l, s->stops[k], l)) {
                keep_from = n - l;
                break;
            }
        }
    }
    give(t, keep_from, out, out_len);
    memmove(s->held.p ? s->held.p : (char *)t, t + keep_from, n - keep_from);
    s->held.len = n - keep_from;
    if (s->held.p) s->held.p[s->held.len] = 0;
    return 0;
}

void frigg_stopstr_flush(frigg_stopstr *s, char **out, size_t *out_len) {
    if (s->stopped || !s->held.p) {
        give("", 0, out, out_len);
    } else {
        give(s->held.p, s->held.len, out, out_len);
    }
    frigg_sb_free(&s->held);
}

void frigg_stopstr_free(frigg_stopstr *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->stops[i]);
    frigg_sb_free(&s->held);
    free(s);
}
