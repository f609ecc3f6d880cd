/* stopstr.c — see stopstr.h.
 *
 * Invariant: `held` is the longest suffix of the text seen so far that is a proper prefix of some
 * stop string (it may also contain a complete, later-starting match that is not yet decided).
 * Everything before it has been emitted and provably starts no stop string: a stop starting there
 * would either lie wholly inside the text seen (found as a full match) or run past its end (then
 * that position would start a held suffix). Held text is shorter than the longest stop, so each
 * push costs O((held + piece) * total stop length). */
#include "stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"

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

/* Earliest start of a complete stop string in t[0..n), or n. */
static size_t first_match(const frigg_stopstr *s, const char *t, size_t n) {
    size_t first = n;
    for (int k = 0; k < s->n; k++) {
        const char *m = memmem(t, n, s->stops[k], s->lens[k]);
        if (m && (size_t)(m - t) < first) first = (size_t)(m - t);
    }
    return first;
}

/* Earliest position whose suffix t[pos..n) is a proper prefix of some stop string, or n. */
static size_t first_partial(const frigg_stopstr *s, const char *t, size_t n) {
    size_t keep_from = n;
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
    return keep_from;
}

int frigg_stopstr_push(frigg_stopstr *s, const char *piece, size_t len, char **out, size_t *out_len) {
    if (s->stopped) {
        give("", 0, out, out_len);
        return 1;
    }
    frigg_sb_put(&s->held, piece, len);
    const char *t = s->held.p ? s->held.p : "";
    size_t n = s->held.len;
    size_t first = first_match(s, t, n), keep_from = first_partial(s, t, n);
    /* A complete match decides the cut only when no longer stop string could still complete
     * starting earlier (stops "<" and "a<><" on text "a<"): until then everything from the
     * earliest partial match stays held. */
    if (first < n && first <= keep_from) {
        give(t, first, out, out_len);
        s->stopped = 1;
        frigg_sb_free(&s->held);
        return 1;
    }
    give(t, keep_from, out, out_len);
    memmove(s->held.p, t + keep_from, n - keep_from);
    s->held.len = n - keep_from;
    s->held.p[s->held.len] = 0;
    return 0;
}

void frigg_stopstr_flush(frigg_stopstr *s, char **out, size_t *out_len) {
    if (s->stopped || !s->held.p) {
        give("", 0, out, out_len);
    } else { /* no more text can come: a complete match inside the held tail now decides */
        size_t first = first_match(s, s->held.p, s->held.len);
        if (first < s->held.len) s->stopped = 1;
        give(s->held.p, first, out, out_len);
    }
    frigg_sb_free(&s->held);
}

int frigg_stopstr_matched(const frigg_stopstr *s) { return s->stopped; }

void frigg_stopstr_free(frigg_stopstr *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->stops[i]);
    frigg_sb_free(&s->held);
    free(s);
}
