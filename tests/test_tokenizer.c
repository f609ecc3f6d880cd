/* test_tokenizer.c — the tokenizer against HF tokenizers 0.23.2 (the Python binding from PyPI), id for id.
 *  1. golden/tokenizer/NAME.jsonl.gz (scripts/tokenizer-oracle/gen_golden.py): every corpus line and
 *     10,000 generated hostile strings per tokenizer and mode; encode must give HF's ids, decode of
 *     HF's ids must give HF's text, and the streaming decoder must give the same text in pieces that
 *     are each valid UTF-8. Also 2,000 random id sequences per file (byte-fallback runs, invalid
 *     UTF-8, unknown ids): decode must equal HF's decode, streamed and whole. FRIGG_TOK_VECTORS=FILE[:FILE...] checks those files instead (the live
 *     comparison of scripts/tokenizer-live-check).
 *  2. The DFM-Mimir training audit: all 19 training_tokens from their rendered text in the default
 *     mode; the "bundled" (fix_mistral_regex) ids with hf_regex, and the two modes must differ on
 *     exactly the audit's 4 mismatching cases.
 *  3. Unsupported components are refused by name; invalid UTF-8 input is an error. */
#include <dirent.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "harness.h"
#include "tokenizer/tok_internal.h" /* tok_pretok_count, for the per-code-point regex check */
#include "tokenizer/tokenizer.h"
#include "base/util.h"

/* ---- helpers ---- */
static char *gz_line(gzFile f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = frigg_xmalloc(cap);
    for (;;) {
        if (!gzgets(f, buf + n, (int)(cap - n))) {
            if (n == 0) {
                free(buf);
                return NULL;
            }
            break;
        }
        n += strlen(buf + n);
        if (n && buf[n - 1] == '\n') break;
        if (cap - n < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    *len = n;
    return buf;
}

/* The corpus files as arrays of lines (read once). */
typedef struct {
    char *text;
    char **line;
    size_t *len;
    size_t n;
} lines;

static int read_lines(const char *path, lines *L) {
    size_t n;
    L->text = frigg_read_file(path, &n);
    if (!L->text) return -1;
    size_t cap = 1024;
    L->line = malloc(cap * sizeof *L->line);
    L->len = malloc(cap * sizeof *L->len);
    L->n = 0;
    char *p = L->text, *end = L->text + n;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if (L->n == cap) {
            cap *= 2;
            L->line = realloc(L->line, cap * sizeof *L->line);
            L->len = realloc(L->len, cap * sizeof *L->len);
        }
        L->line[L->n] = p;
        L->len[L->n++] = (size_t)(nl - p);
        p = nl + 1;
    }
    return 0;
}

static void ids_hash(const int32_t *ids, size_t n, char hex[17]) {
    unsigned char *b = malloc(n * 4 + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        b[4 * i] = (unsigned char)v;
        b[4 * i + 1] = (unsigned char)(v >> 8);
        b[4 * i + 2] = (unsigned char)(v >> 16);
        b[4 * i + 3] = (unsigned char)(v >> 24);
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, b, n * 4);
    for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
    free(b);
}

static int file_sha256(const char *path, char hex[65]) {
    size_t n;
    char *t = frigg_read_file(path, &n);
    if (!t) return -1;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (unsigned char *)t, n);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
    free(t);
    return 0;
}

static int utf8_ok(const char *s, size_t n) {
    /* a tiny independent validator (not the tokenizer's own) */
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* Stream-decode ids; returns 1 when every piece is valid UTF-8 and they join to want. */
static int stream_ok(const frigg_tokenizer *tk, const int32_t *ids, size_t n, const char *want, size_t want_len) {
    frigg_detok_stream *st = frigg_detok_stream_new(tk);
    if (!st) return 0;
    char *all = frigg_xmalloc(1);
    size_t an = 0;
    int ok = 1;
    for (size_t i = 0; i <= n; i++) {
        char *piece;
        size_t pl;
        int rc = i < n ? frigg_detok_stream_push(st, ids[i], &piece, &pl) : frigg_detok_stream_finish(st, &piece, &pl);
        if (rc) {
            ok = 0;
            break;
        }
        if (!utf8_ok(piece, pl)) ok = 0;
        all = realloc(all, an + pl + 1);
        memcpy(all + an, piece, pl);
        an += pl;
        free(piece);
    }
    frigg_detok_stream_free(st);
    ok = ok && an == want_len && memcmp(all, want, an) == 0;
    free(all);
    return ok;
}

static void show_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* ---- 1. golden vector files ---- */
static lines g_corpus[2];
static int g_corpus_loaded;

static void check_vector_file(const char *path) {
    gzFile f = gzopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    size_t len;
    char *line = gz_line(f, &len);
    json_error_t err;
    json_t *hdr = line ? json_loads(line, 0, &err) : NULL;
    free(line);
    CHECK(hdr != NULL, "%s: no header line", path);
    if (!hdr) {
        gzclose(f);
        return;
    }
    const char *ref = json_string_value(json_object_get(hdr, "tokenizer"));
    const char *mode = json_string_value(json_object_get(hdr, "mode"));
    const char *sha = json_string_value(json_object_get(hdr, "sha256"));
    int hf_regex = mode && !strcmp(mode, "hf_regex");
    char *tok_path = NULL;
    if (ref && !strncmp(ref, "shared:", 7)) tok_path = th_path(th_shared(), ref + 7);
    else if (ref && !strncmp(ref, "root:", 5)) tok_path = th_path(th_root(), ref + 5);
    else if (ref) tok_path = frigg_xstrdup(ref);
    CHECK(tok_path && mode && sha, "%s: header lacks tokenizer/mode/sha256", path);
    if (!tok_path || !mode || !sha) goto done;
    if (!frigg_file_exists(tok_path)) {
        if (!strncmp(ref, "shared:", 7)) SKIP("%s: %s is not here (set FRIGG_SHARED)", path, tok_path);
        else CHECK(0, "%s: tokenizer %s is missing", path, tok_path);
        goto done;
    }
    char hex[65];
    CHECK(file_sha256(tok_path, hex) == 0 && !strcmp(hex, sha), "%s: %s is not the file the vectors were made from",
          path, tok_path);
    frigg_tokenizer *tk = frigg_tokenizer_load(tok_path, hf_regex);
    CHECK(tk != NULL, "%s: load failed: %s", tok_path, frigg_error());
    if (!tk) goto done;
    CHECK(frigg_tokenizer_hf_regex(tk) == hf_regex, "hf_regex flag not reported");
    CHECK(frigg_tokenizer_vocab_size(tk) == json_integer_value(json_object_get(hdr, "vocab_size")),
          "%s: vocab size %d, HF %lld", path, frigg_tokenizer_vocab_size(tk),
          (long long)json_integer_value(json_object_get(hdr, "vocab_size")));

    size_t cases = 0, enc_bad = 0, dec_bad = 0, stream_bad = 0, shown = 0, full = 0, bad_cases = 0, no_corpus = 0;
    while ((line = gz_line(f, &len))) {
        json_t *c = json_loadb(line, len, JSON_ALLOW_NUL, &err);
        free(line);
        if (!c) {
            CHECK(0, "%s: bad case line: %s", path, err.text);
            break;
        }
        const char *src = json_string_value(json_object_get(c, "src"));
        const char *text = NULL;
        size_t text_len = 0;
        if (src && !strcmp(src, "gen")) {
            json_t *t = json_object_get(c, "text");
            text = json_string_value(t);
            text_len = json_string_length(t);
        } else if (src && (!strcmp(src, "da") || !strcmp(src, "en"))) {
            if (!g_corpus_loaded) {
                char *da = th_path(th_shared(), "data/corpus/da.txt"), *en = th_path(th_shared(), "data/corpus/en.txt");
                g_corpus_loaded = (read_lines(da, &g_corpus[0]) == 0 && read_lines(en, &g_corpus[1]) == 0) ? 1 : -1;
                free(da);
                free(en);
            }
            if (g_corpus_loaded != 1) { /* a fresh clone has no ../shared: these cases are skipped, said below */
                no_corpus++;
                json_decref(c);
                continue;
            }
            size_t ln = (size_t)json_integer_value(json_object_get(c, "line"));
            lines *L = &g_corpus[src[0] == 'e'];
            if (g_corpus_loaded == 1 && ln >= 1 && ln <= L->n) {
                text = L->line[ln - 1];
                text_len = L->len[ln - 1];
            }
        }
        if (src && !strcmp(src, "ids")) { /* decode only */
            cases++;
            json_t *want = json_object_get(c, "ids"), *dj = json_object_get(c, "dec");
            size_t wn = json_array_size(want), dl;
            int32_t *wids = frigg_xmalloc((wn + 1) * sizeof *wids);
            for (size_t i = 0; i < wn; i++) wids[i] = (int32_t)json_integer_value(json_array_get(want, i));
            char *d = frigg_tokenizer_decode(tk, wids, wn, &dl);
            int good = d && json_is_string(dj) && dl == json_string_length(dj) && !memcmp(d, json_string_value(dj), dl);
            if (!good) {
                dec_bad++;
                bad_cases++;
                if (shown++ < 5) {
                    fprintf(stderr, "  %s: decode mismatch on id case %zu:\n    frigg: %s\n    HF:    %s\n", path, cases,
                            d ? d : "(null)", json_string_value(dj));
                    show_ids("ids", wids, wn);
                }
            } else if (!stream_ok(tk, wids, wn, d, dl)) {
                stream_bad++;
                bad_cases++;
                if (shown++ < 5) fprintf(stderr, "  %s: stream decode differs on id case %zu\n", path, cases);
            }
            free(d);
            free(wids);
            json_decref(c);
            continue;
        }
        if (!text) {
            CHECK(0, "%s: a case without text (src \"%s\", or a corpus line past the end)", path, src ? src : "none");
            json_decref(c);
            break;
        }
        cases++;
        size_t bad_before = enc_bad + dec_bad + stream_bad;
        int32_t *ids;
        size_t n;
        int rc = frigg_tokenizer_encode(tk, text, text_len, &ids, &n);
        json_t *want = json_object_get(c, "ids");
        int32_t *wids = NULL;
        size_t wn = 0;
        int good;
        if (want) {
            full++;
            wn = json_array_size(want);
            wids = frigg_xmalloc((wn + 1) * sizeof *wids);
            for (size_t i = 0; i < wn; i++) wids[i] = (int32_t)json_integer_value(json_array_get(want, i));
            good = rc == 0 && n == wn && !memcmp(ids, wids, n * sizeof *ids);
        } else {
            char hex[17];
            if (rc == 0) ids_hash(ids, n, hex);
            good = rc == 0 && (json_int_t)n == json_integer_value(json_object_get(c, "n")) &&
                   !strcmp(hex, json_string_value(json_object_get(c, "h")));
        }
        if (!good) {
            enc_bad++;
            if (shown++ < 5) {
                fprintf(stderr, "  %s: encode mismatch on %s case %zu: %.*s\n", path, src, cases,
                        (int)(text_len < 200 ? text_len : 200), text);
                if (rc == 0) show_ids("frigg", ids, n);
                else fprintf(stderr, "    frigg error: %s\n", frigg_error());
                if (wids) show_ids("HF", wids, wn);
            }
        }
        /* decode HF's ids when stored (else ours, which matched HF's hash when good) */
        const int32_t *dids = wids ? wids : ids;
        size_t dn = wids ? wn : n;
        if (rc == 0 || wids) {
            json_t *dj = json_object_get(c, "dec");
            const char *wd = json_is_string(dj) ? json_string_value(dj) : text;
            size_t wdl = json_is_string(dj) ? json_string_length(dj) : text_len;
            size_t dl;
            char *d = frigg_tokenizer_decode(tk, dids, dn, &dl);
            if (!d || dl != wdl || memcmp(d, wd, dl)) {
                dec_bad++;
                if (shown++ < 5)
                    fprintf(stderr, "  %s: decode mismatch on case %zu:\n    frigg: %s\n    HF:    %s\n", path, cases,
                            d ? d : "(null)", wd);
            }
            if (!stream_ok(tk, dids, dn, wd, wdl)) {
                stream_bad++;
                if (shown++ < 5) fprintf(stderr, "  %s: stream decode differs on case %zu\n", path, cases);
            }
            free(d);
        }
        if (rc == 0) free(ids);
        free(wids);
        json_decref(c);
        if (enc_bad + dec_bad + stream_bad != bad_before) bad_cases++;
    }
    if (no_corpus)
        SKIP("%s: %zu corpus cases need %s/data/corpus/da.txt and en.txt, which are missing (set FRIGG_SHARED)", path,
             no_corpus, th_shared());
    printf("%s: %zu cases (%zu with full ids), %zu encode / %zu decode / %zu stream mismatches; cases: %zu passed, "
           "%zu failed\n", path, cases, full, enc_bad, dec_bad, stream_bad, cases - bad_cases, bad_cases);
    CHECK(cases > 0, "%s: no cases", path);
    CHECK(enc_bad == 0, "%s: %zu of %zu encodings differ from HF", path, enc_bad, cases);
    CHECK(dec_bad == 0, "%s: %zu of %zu decodings differ from HF", path, dec_bad, cases);
    CHECK(stream_bad == 0, "%s: %zu of %zu streamed decodings differ or split UTF-8", path, stream_bad, cases);
    frigg_tokenizer_free(tk);
done:
    free(tok_path);
    json_decref(hdr);
    gzclose(f);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void check_golden_dir(void) {
    char *dir = th_path(th_root(), "golden/tokenizer");
    DIR *d = opendir(dir);
    CHECK(d != NULL, "no %s", dir);
    if (d) {
        struct dirent *e;
        char **names = NULL;
        size_t n = 0;
        while ((e = readdir(d)))
            if (ends_with(e->d_name, ".jsonl.gz")) {
                names = realloc(names, (n + 1) * sizeof *names);
                names[n++] = frigg_path_join(dir, e->d_name);
            }
        closedir(d);
        CHECK(n >= 3, "expected at least 3 golden vector files in %s, found %zu", dir, n);
        for (size_t i = 0; i < n; i++) {
            check_vector_file(names[i]);
            free(names[i]);
        }
        free(names);
    }
    free(dir);
}

/* ---- 2. the training audit ---- */
static json_t *ids_json_eq(const int32_t *ids, size_t n, json_t *want, int *eq) {
    *eq = json_array_size(want) == n;
    for (size_t i = 0; *eq && i < n; i++) *eq = json_integer_value(json_array_get(want, i)) == ids[i];
    return want;
}

static void check_audit(void) {
    char *tp = th_path(th_shared(), "data/tokenizers/mimir-equivalent.tokenizer.json");
    char *ap = th_path(th_shared(), "data/mimir/training-tokenizer-audit.json");
    if (!frigg_file_exists(tp) || !frigg_file_exists(ap)) {
        SKIP("audit: %s or %s missing", tp, ap);
        free(tp);
        free(ap);
        return;
    }
    frigg_tokenizer *def = frigg_tokenizer_load(tp, 0), *hf = frigg_tokenizer_load(tp, 1);
    CHECK(def && hf, "mimir-equivalent load: %s", frigg_error());
    json_error_t err;
    json_t *audit = json_load_file(ap, 0, &err);
    CHECK(audit != NULL, "audit json: %s", err.text);
    if (def && hf && audit) {
        json_t *bundled = json_object_get(json_object_get(audit, "models"), "bundled");
        json_t *results = json_object_get(bundled, "results");
        CHECK(json_array_size(results) == 19, "expected 19 audit cases, got %zu", json_array_size(results));
        int n_train = 0, n_hf = 0, n_diff = 0, n_mismatch = 0;
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r) {
            json_t *rt = json_object_get(r, "rendered");
            const char *text = json_string_value(rt);
            size_t tl = json_string_length(rt);
            int matches = json_is_true(json_object_get(r, "matches"));
            n_mismatch += !matches;
            int32_t *a, *b;
            size_t na, nb;
            int ra = frigg_tokenizer_encode(def, text, tl, &a, &na), rb = frigg_tokenizer_encode(hf, text, tl, &b, &nb);
            CHECK(ra == 0 && rb == 0, "audit %zu: encode failed: %s", i, frigg_error());
            if (ra || rb) continue;
            int eq_train, eq_bundled;
            ids_json_eq(a, na, json_object_get(r, "training_tokens"), &eq_train);
            ids_json_eq(b, nb, json_object_get(r, "gguf_tokens"), &eq_bundled);
            int modes_differ = na != nb || memcmp(a, b, na * sizeof *a);
            CHECK(eq_train, "audit %zu: default mode does not reproduce training_tokens", i);
            CHECK(eq_bundled, "audit %zu: hf_regex does not reproduce the bundled (fix_mistral_regex) ids", i);
            CHECK(modes_differ == !matches, "audit %zu: modes %s but the audit says matches=%d", i,
                  modes_differ ? "differ" : "agree", matches);
            n_train += eq_train;
            n_hf += eq_bundled;
            n_diff += modes_differ;
            free(a);
            free(b);
        }
        printf("audit: default = training_tokens on %d/19; hf_regex = bundled on %d/19; modes differ on %d (audit: %d)\n",
               n_train, n_hf, n_diff, n_mismatch);
        CHECK(n_mismatch == 4 && n_diff == 4, "expected the 4 bundled mismatches, got %d/%d", n_mismatch, n_diff);
    }
    json_decref(audit);
    frigg_tokenizer_free(def);
    frigg_tokenizer_free(hf);
    free(tp);
    free(ap);
}

/* ---- 2b. the hf_regex character classes, code point by code point ----
 * golden/tokenizer/hf-regex-probes.txt.gz holds how HF's fix_mistral_regex pre-tokenizer splits
 * "!!"+c, c+"Aa", "a"+c+"a", c+c and "!"+c+"a" for every code point of planes 0-3 and 14 (the piece
 * counts reveal which of the regex's classes c is in). frigg's pre-tokenizer must split them alike:
 * this is what the Unicode-version delta in tok_regex_delta.c is for. */
static void check_hf_regex_classes(void) {
    char *tp = th_path(th_root(), "golden/default/tokenizer.json");
    char *gp = th_path(th_root(), "golden/tokenizer/hf-regex-probes.txt.gz");
    frigg_tokenizer *tk = frigg_tokenizer_load(tp, 1);
    gzFile f = gzopen(gp, "rb");
    CHECK(tk && f, "hf_regex probe check needs %s and %s (%s)", tp, gp, frigg_error());
    size_t cps = 0, bad = 0, len;
    char *line;
    while (tk && f && (line = gz_line(f, &len))) {
        unsigned lo, hi;
        char want[8];
        if (line[0] == '#' || sscanf(line, "%x %x %7s", &lo, &hi, want) != 3) {
            free(line);
            continue;
        }
        free(line);
        for (unsigned cp = lo; cp <= hi; cp++) {
            char c[4], b[16];
            size_t cn;
            if (cp < 0x80) {
                c[0] = (char)cp;
                cn = 1;
            } else if (cp < 0x800) {
                c[0] = (char)(0xC0 | (cp >> 6));
                c[1] = (char)(0x80 | (cp & 0x3F));
                cn = 2;
            } else if (cp < 0x10000) {
                c[0] = (char)(0xE0 | (cp >> 12));
                c[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                c[2] = (char)(0x80 | (cp & 0x3F));
                cn = 3;
            } else {
                c[0] = (char)(0xF0 | (cp >> 18));
                c[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                c[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                c[3] = (char)(0x80 | (cp & 0x3F));
                cn = 4;
            }
            const char *pre[5] = {"!!", "", "a", "", "!"}, *post[5] = {"", "Aa", "a", "", "a"};
            char got[8];
            for (int k = 0; k < 5; k++) {
                size_t n = 0, pl = strlen(pre[k]), ql = strlen(post[k]);
                memcpy(b, pre[k], pl);
                n += pl;
                memcpy(b + n, c, cn);
                n += cn;
                if (k == 3) {
                    memcpy(b + n, c, cn);
                    n += cn;
                }
                memcpy(b + n, post[k], ql);
                n += ql;
                long pieces = tok_pretok_count(tk, b, n);
                got[k] = (char)('0' + (pieces >= 0 && pieces < 10 ? pieces : 9));
            }
            got[5] = 0;
            cps++;
            if (strcmp(got, want)) {
                if (bad++ < 5) fprintf(stderr, "  hf_regex classes: U+%04X splits as %s, HF as %s\n", cp, got, want);
            }
        }
    }
    printf("hf_regex classes: %zu code points probed, %zu split differently from HF\n", cps, bad);
    CHECK(cps > 260000, "only %zu code points probed", cps);
    CHECK(bad == 0, "%zu code points are classed differently from HF by the hf_regex pre-tokenizer", bad);
    if (f) gzclose(f);
    frigg_tokenizer_free(tk);
    free(tp);
    free(gp);
}

/* ---- 3. refusals and bad input ---- */
#define BASE_MODEL                                                                                            \
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":false," \
    "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"ab\":3},\"merges\":[\"a b\"]}"

static void expect_refusal(const char *json, const char *needle, int hf_regex) {
    frigg_tokenizer *tk = frigg_tokenizer_load_json(json, strlen(json), "t.json", hf_regex);
    CHECK(tk == NULL, "accepted a tokenizer that should be refused (%s)", needle);
    if (tk) {
        frigg_tokenizer_free(tk);
        return;
    }
    CHECK(strstr(frigg_error(), needle) != NULL, "error '%s' does not name '%s'", frigg_error(), needle);
}

static void check_refusals(void) {
    char buf[2048];
    const struct {
        const char *key, *value, *needle;
    } cases[] = {
        {"normalizer", "{\"type\":\"NFKC\"}", "NFKC"},
        {"normalizer", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}", "Lowercase"},
        {"normalizer", "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"_\"}", "Regex"},
        {"pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false}", "ByteLevel"},
        {"pre_tokenizer", "{\"type\":\"Whitespace\"}", "Whitespace"},
        {"pre_tokenizer", "{\"type\":\"Metaspace\",\"replacement\":\"_\",\"add_prefix_space\":false}", "add_prefix_space"},
        {"decoder", "{\"type\":\"WordPiece\",\"prefix\":\"##\"}", "WordPiece"},
        {"decoder", "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteLevel\"}]}", "ByteLevel"},
        {"post_processor", "{\"type\":\"BertProcessing\"}", "BertProcessing"},
        {"truncation", "{\"max_length\":8}", "truncation"},
        {"padding", "{\"strategy\":\"BatchLongest\"}", "padding"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(buf, sizeof buf, "{\"version\":\"1.0\",\"added_tokens\":[],\"%s\":%s," BASE_MODEL "}", cases[i].key,
                 cases[i].value);
        expect_refusal(buf, cases[i].needle, 0);
    }
    const char *models[][2] = {
        {"{\"type\":\"WordPiece\",\"vocab\":{}}", "WordPiece"},
        {"{\"type\":\"Unigram\",\"vocab\":[]}", "Unigram"},
        {"{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{\"a\":0},\"merges\":[]}", "dropout"},
        {"{\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\",\"vocab\":{\"a\":0},\"merges\":[]}", "continuing_subword_prefix"},
        {"{\"type\":\"BPE\",\"end_of_word_suffix\":\"</w>\",\"vocab\":{\"a\":0},\"merges\":[]}", "end_of_word_suffix"},
        {"{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}", "'ab' is not in the vocab"},
        {"{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b c\"]}", "two tokens"},
        {"{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",[\"a\",\"b\"]]}", "mix"},
        {"{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}", "id must be"},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        snprintf(buf, sizeof buf, "{\"version\":\"1.0\",\"added_tokens\":[],\"model\":%s}", models[i][0]);
        expect_refusal(buf, models[i][1], 0);
    }
    expect_refusal("{\"model\": {", "invalid JSON", 0);
    expect_refusal("{\"version\":\"2.0\"," BASE_MODEL "}", "version", 0);
    expect_refusal("{\"added_tokens\":[{\"id\":5,\"content\":\"<x>\"}]," BASE_MODEL "}", "single_word", 0);
    /* hf_regex: refused where transformers would not or could not apply it */
    expect_refusal("{\"pre_tokenizer\":null," BASE_MODEL "}", "no pre_tokenizer", 1);
    expect_refusal("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"}," BASE_MODEL "}", "ByteLevel", 1);

    /* a minimal valid file loads, encodes, and refuses invalid UTF-8 input */
    snprintf(buf, sizeof buf, "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":"
                              "\"Isolated\",\"invert\":false}," BASE_MODEL "}");
    frigg_tokenizer *tk = frigg_tokenizer_load_json(buf, strlen(buf), "t.json", 0);
    CHECK(tk != NULL, "minimal tokenizer: %s", frigg_error());
    if (tk) {
        int32_t *ids;
        size_t n;
        CHECK(frigg_tokenizer_encode(tk, "abxa", 4, &ids, &n) == 0 && n == 3 && ids[0] == 3 && ids[1] == 0 && ids[2] == 1,
              "minimal encode of 'abxa' should be [3 0 1]");
        if (n) free(ids);
        CHECK(frigg_tokenizer_encode(tk, "a\xC3(", 3, &ids, &n) < 0 && strstr(frigg_error(), "UTF-8"),
              "invalid UTF-8 must be refused: %s", frigg_error());
        CHECK(frigg_tokenizer_token_to_id(tk, "ab") == 3 && frigg_tokenizer_token_to_id(tk, "zz") == -1, "token_to_id");
        CHECK(frigg_tokenizer_id_to_token(tk, 2) && !strcmp(frigg_tokenizer_id_to_token(tk, 2), "b") &&
                  frigg_tokenizer_id_to_token(tk, 99) == NULL && frigg_tokenizer_id_to_token(tk, -1) == NULL,
              "id_to_token");
        frigg_tokenizer_free(tk);
    }
    /* a tokenizer with no decoder streams too (tokens joined by spaces, like HF) */
}

int main(void) {
    TEST_MAIN_BEGIN("test_tokenizer");
    if (sodium_init() < 0) {
        CHECK(0, "sodium_init");
        TEST_MAIN_END();
    }
    check_refusals();
    const char *extra = getenv("FRIGG_TOK_VECTORS");
    if (extra && *extra) {
        char *list = frigg_xstrdup(extra), *save = NULL;
        for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) check_vector_file(p);
        free(list);
    } else {
        check_golden_dir();
        check_audit();
        check_hf_regex_classes();
    }
    for (int i = 0; i < 2; i++) {
        free(g_corpus[i].text);
        free(g_corpus[i].line);
        free(g_corpus[i].len);
    }
    TEST_MAIN_END();
}
