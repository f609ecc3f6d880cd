/* test_stopstr.c — stop strings: the emitted text never contains a stop string, a possible
 * partial match is held back (and released when it turns out not to be one, or at flush), and
 * streaming in any split — one byte at a time, every fixed piece size, random splits — gives
 * exactly the whole-output answer: the text before the earliest occurrence of any stop string. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "run/stopstr.h"
#include "base/strbuf.h"
#include "base/util.h"

/* Whole-output reference: cut at the earliest occurrence of any stop string. */
static size_t reference_cut(const char *t, size_t n, const char *const *stops, int ns, int *matched) {
    size_t cut = n;
    *matched = 0;
    for (int k = 0; k < ns; k++) {
        const char *m = memmem(t, n, stops[k], strlen(stops[k]));
        if (m && (size_t)(m - t) < cut) cut = (size_t)(m - t);
        if (m) *matched = 1;
    }
    return cut;
}

/* Stream t in the given piece lengths; returns the emitted text (malloc'd) and *matched. Checks
 * on the way that nothing emitted so far contains a stop and that the emitted prefix plus the
 * held-back part never exceeds what was pushed. */
static char *stream(const char *t, size_t n, const size_t *pieces, int np, const char *const *stops, int ns,
                    int *matched, size_t *out_n) {
    frigg_stopstr *s = frigg_stopstr_new(stops, ns);
    frigg_strbuf acc = FRIGG_STRBUF_INIT;
    size_t pos = 0;
    *matched = 0;
    for (int i = 0; i < np && pos < n; i++) {
        size_t l = pieces[i] < n - pos ? pieces[i] : n - pos;
        char *o;
        size_t ol;
        int m = frigg_stopstr_push(s, t + pos, l, &o, &ol);
        pos += l;
        frigg_sb_put(&acc, o, ol);
        free(o);
        if (m) *matched = 1;
        if (acc.len > pos) th_fail++, fprintf(stderr, "emitted more than pushed\n");
        if (*matched) break;
    }
    if (!*matched) {
        char *o;
        size_t ol;
        frigg_stopstr_flush(s, &o, &ol);
        frigg_sb_put(&acc, o, ol);
        free(o);
        *matched = frigg_stopstr_matched(s);
    }
    frigg_stopstr_free(s);
    *out_n = acc.len;
    return frigg_sb_take(&acc);
}

static void test_basic(void) {
    const char *stops[] = {"STOP"};
    frigg_stopstr *s = frigg_stopstr_new(stops, 1);
    char *o;
    size_t ol;
    CHECK(frigg_stopstr_push(s, "Hello ST", 8, &o, &ol) == 0 && ol == 6 && !strcmp(o, "Hello "),
          "partial match must be held back, got \"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "ar", 2, &o, &ol) == 0 && !strcmp(o, "STar"), "released when not a stop: \"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, " S", 2, &o, &ol) == 0 && !strcmp(o, " "), "\"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "TOP and more", 12, &o, &ol) == 1 && ol == 0, "stop completes: \"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "after", 5, &o, &ol) == 1 && ol == 0, "nothing after a stop: \"%s\"", o);
    free(o);
    frigg_stopstr_flush(s, &o, &ol);
    CHECK(ol == 0, "flush after a stop emits nothing: \"%s\"", o);
    free(o);
    frigg_stopstr_free(s);

    s = frigg_stopstr_new(stops, 1);
    CHECK(frigg_stopstr_push(s, "tail STO", 8, &o, &ol) == 0 && !strcmp(o, "tail "), "\"%s\"", o);
    free(o);
    frigg_stopstr_flush(s, &o, &ol);
    CHECK(!strcmp(o, "STO"), "flush releases the held tail: \"%s\"", o);
    free(o);
    frigg_stopstr_free(s);

    /* overlapping stops: the earliest start wins, whichever stop it is */
    const char *ov[] = {"abcd", "bc"};
    s = frigg_stopstr_new(ov, 2);
    CHECK(frigg_stopstr_push(s, "xab", 3, &o, &ol) == 0 && !strcmp(o, "x"), "\"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "cd", 2, &o, &ol) == 1 && ol == 0, "\"%s\"", o);
    free(o);
    frigg_stopstr_free(s);

    /* a short stop completes inside a longer one that started earlier: wait for the longer */
    const char *nest[] = {"a<><", "<"};
    s = frigg_stopstr_new(nest, 2);
    CHECK(frigg_stopstr_push(s, "xa<", 3, &o, &ol) == 0 && !strcmp(o, "x"), "undecided: \"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "><", 2, &o, &ol) == 1 && ol == 0, "longer stop wins: \"%s\"", o);
    free(o);
    frigg_stopstr_free(s);
    s = frigg_stopstr_new(nest, 2);
    CHECK(frigg_stopstr_push(s, "xa<", 3, &o, &ol) == 0 && !strcmp(o, "x"), "\"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, ">b", 2, &o, &ol) == 1 && !strcmp(o, "a"), "shorter stop decides: \"%s\"", o);
    free(o);
    frigg_stopstr_free(s);
    s = frigg_stopstr_new(nest, 2);
    CHECK(frigg_stopstr_push(s, "xa<", 3, &o, &ol) == 0 && !strcmp(o, "x"), "\"%s\"", o);
    free(o);
    CHECK(!frigg_stopstr_matched(s), "not decided before flush");
    frigg_stopstr_flush(s, &o, &ol);
    CHECK(!strcmp(o, "a") && frigg_stopstr_matched(s), "flush cuts at the complete stop: \"%s\"", o);
    free(o);
    frigg_stopstr_free(s);

    /* multi-byte UTF-8 stop */
    const char *u[] = {"\xc3\xb8l"};
    s = frigg_stopstr_new(u, 1);
    CHECK(frigg_stopstr_push(s, "god \xc3", 5, &o, &ol) == 0 && !strcmp(o, "god "), "\"%s\"", o);
    free(o);
    CHECK(frigg_stopstr_push(s, "\xb8l!", 3, &o, &ol) == 1 && ol == 0, "\"%s\"", o);
    free(o);
    frigg_stopstr_free(s);

    /* no stops: everything passes at once */
    s = frigg_stopstr_new(NULL, 0);
    CHECK(s && frigg_stopstr_push(s, "abc", 3, &o, &ol) == 0 && !strcmp(o, "abc"), "pass-through");
    free(o);
    frigg_stopstr_free(s);

    const char *five[] = {"a", "b", "c", "d", "e"}, *empty[] = {"x", ""};
    CHECK(frigg_stopstr_new(five, 5) == NULL && strstr(frigg_error(), "at most 4"), "5 stops: %s", frigg_error());
    CHECK(frigg_stopstr_new(empty, 2) == NULL && strstr(frigg_error(), "stop[1]"), "empty stop: %s", frigg_error());
    CHECK(frigg_stopstr_new(five, -1) == NULL, "negative count");
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* Random texts over a small alphabet (so stops occur and overlap often, including multi-byte
 * characters), random stop sets, every split strategy. */
static void test_random(void) {
    static const char *atoms[] = {"a", "b", "c", "\xc3\xa6", "\xf0\x9f\x98\x8a", "<", "|", ">"};
    const int natoms = 8, cases = 4000;
    int disagree = 0, contains = 0, runs = 0, matched_cases = 0;
    for (int c = 0; c < cases; c++) {
        char stopbuf[4][32];
        const char *stops[4];
        int ns = 1 + (int)rnd(4);
        for (int k = 0; k < ns; k++) {
            stopbuf[k][0] = 0;
            int len = 1 + (int)rnd(4);
            for (int j = 0; j < len; j++) strcat(stopbuf[k], atoms[rnd(natoms)]);
            stops[k] = stopbuf[k];
        }
        char text[512] = "";
        int tl = (int)rnd(60);
        for (int j = 0; j < tl; j++) strcat(text, atoms[rnd(natoms)]);
        size_t n = strlen(text);
        int want_m;
        size_t cut = reference_cut(text, n, stops, ns, &want_m);
        matched_cases += want_m;
        size_t pieces[512];
        for (int mode = 0; mode < 12; mode++) {
            int np = 0;
            if (mode < 10) { /* fixed sizes 1..10 */
                for (size_t p = 0; p < n + 1; p += (size_t)mode + 1) pieces[np++] = (size_t)mode + 1;
            } else if (mode == 10) { /* random splits */
                for (size_t p = 0; p <= n;) {
                    size_t l = 1 + rnd(8);
                    pieces[np++] = l;
                    p += l;
                }
            } else { /* whole output in one push */
                pieces[np++] = n ? n : 1;
            }
            int got_m;
            size_t gl;
            char *got = stream(text, n, pieces, np, stops, ns, &got_m, &gl);
            runs++;
            if (gl != cut || memcmp(got, text, cut) || got_m != want_m) {
                if (disagree++ < 5)
                    fprintf(stderr, "  text \"%s\" stops \"%s\" \"%s\" \"%s\" \"%s\" (%d) mode %d: got \"%s\" want %zu bytes\n", text, stops[0], ns > 1 ? stops[1] : "", ns > 2 ? stops[2] : "", ns > 3 ? stops[3] : "", ns,
                            mode, got, cut);
            }
            for (int k = 0; k < ns; k++) contains += memmem(got, gl, stops[k], strlen(stops[k])) != NULL;
            free(got);
        }
    }
    CHECK(disagree == 0, "%d of %d streamed runs differ from the whole-output cut", disagree, runs);
    CHECK(contains == 0, "%d outputs contain a stop string", contains);
    CHECK(matched_cases > cases / 4 && matched_cases < cases, "random cases too one-sided (%d/%d matched)",
          matched_cases, cases);
}

int main(void) {
    TEST_MAIN_BEGIN("test_stopstr");
    test_basic();
    test_random();
    TEST_MAIN_END();
}
