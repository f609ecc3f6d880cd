/* bench_tokenizer.c — frigg's side of scripts/bench-tokenizer: time loading a tokenizer.json and
 * encoding every line of the corpus files, one line per call (as a server tokenizes requests).
 * usage: bench_tokenizer TOKENIZER_JSON HF_REGEX(0|1) REPEATS CORPUS_FILE...
 * Prints one JSON line per measurement; times are wall-clock ms (median, min, max of REPEATS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "base/util.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s TOKENIZER_JSON HF_REGEX REPEATS CORPUS_FILE...\n", argv[0]);
        return 2;
    }
    int hf = atoi(argv[2]), reps = atoi(argv[3]);
    if (reps < 1) reps = 1;
    double *t = calloc((size_t)reps, sizeof *t);
    frigg_tokenizer *tk = NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = frigg_now_ms();
        frigg_tokenizer *x = frigg_tokenizer_load(argv[1], hf);
        t[r] = frigg_now_ms() - t0;
        if (!x) {
            fprintf(stderr, "bench_tokenizer: %s\n", frigg_error());
            return 1;
        }
        if (tk) frigg_tokenizer_free(tk);
        tk = x;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    printf("{\"bench\":\"tokenizer_load\",\"impl\":\"frigg\",\"file\":\"%s\",\"hf_regex\":%d,\"ms_median\":%.1f,"
           "\"ms_min\":%.1f,\"ms_max\":%.1f,\"repeats\":%d}\n", argv[1], hf, t[reps / 2], t[0], t[reps - 1], reps);

    /* corpus: all lines of all files in memory first */
    size_t nlines = 0, cap = 1024, bytes = 0;
    char **line = malloc(cap * sizeof *line);
    size_t *len = malloc(cap * sizeof *len);
    char **texts = malloc((size_t)argc * sizeof *texts);
    for (int f = 4; f < argc; f++) {
        size_t n;
        char *s = frigg_read_file(argv[f], &n);
        if (!s) {
            fprintf(stderr, "bench_tokenizer: %s\n", frigg_error());
            return 1;
        }
        texts[f] = s;
        for (char *p = s, *end = s + n; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl) nl = end;
            if (nlines == cap) {
                cap *= 2;
                line = realloc(line, cap * sizeof *line);
                len = realloc(len, cap * sizeof *len);
            }
            line[nlines] = p;
            len[nlines++] = (size_t)(nl - p);
            bytes += (size_t)(nl - p);
            p = nl + 1;
        }
    }
    size_t tokens = 0;
    for (int r = 0; r < reps; r++) {
        tokens = 0;
        double t0 = frigg_now_ms();
        for (size_t i = 0; i < nlines; i++) {
            int32_t *ids;
            size_t n;
            if (frigg_tokenizer_encode(tk, line[i], len[i], &ids, &n)) {
                fprintf(stderr, "bench_tokenizer: line %zu: %s\n", i + 1, frigg_error());
                return 1;
            }
            tokens += n;
            free(ids);
        }
        t[r] = frigg_now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    printf("{\"bench\":\"tokenizer_encode_corpus\",\"impl\":\"frigg\",\"file\":\"%s\",\"hf_regex\":%d,\"lines\":%zu,"
           "\"bytes\":%zu,\"tokens\":%zu,\"threads\":1,\"ms_median\":%.1f,\"ms_min\":%.1f,\"ms_max\":%.1f,"
           "\"MB_per_s\":%.2f,\"repeats\":%d}\n", argv[1], hf, nlines, bytes, tokens, t[reps / 2], t[0],
           t[reps - 1], bytes / 1e3 / t[reps / 2], reps);
    frigg_tokenizer_free(tk);
    for (int f = 4; f < argc; f++) free(texts[f]);
    free(texts);
    free(line);
    free(len);
    free(t);
    return 0;
}
