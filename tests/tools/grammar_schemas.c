/* grammar_schemas.c — the project's structured-output test set (tests/grammar-schemas/) through the grammar core
 * (common/grammar), without a model; tests/grammar-schemas.sh runs it, and scripts/grammar-check.py uses its
 * --prefix mode. Not a test_* program: its check needs the set's folder, and its documents go on to Python.
 *   grammar_schemas --check DIR [--docs N] [--seed S] [--docs-out FILE]
 *       1. every .json file of DIR (at least 200) compiles;
 *       2. every schema of DIR/bad/expected.tsv (FILE<TAB>the text its error must hold[<TAB>frigg-run's]) is
 *          refused with that message, and so is a 1.1 MB schema made here (the size limit);
 *       3. N (default 8) random documents of each schema — walks over a vocabulary of the 256 single bytes and an
 *          end id, each step through the masker (frigg_gmasker_fill) as a model's tokens would be — end (never a
 *          state with no way on), are whole JSON texts by the RFC 8259 recogniser below (strict UTF-8, no lone
 *          surrogate escapes; written apart from the grammar code so that it can disagree), and are accepted again
 *          from the start. With --docs-out they are written there as SCHEMA<TAB>HEX lines, for
 *          `scripts/grammar-check.py --docs FILE`, which validates them with the Python jsonschema package.
 *       Ends with "grammar_schemas: N passed, N failed"; exit 1 when any failed.
 *   grammar_schemas --compile FILE...         "OK FILE STATES RULES CPU_MS" (DFA states, rules, the compile's
 *                                             CPU time) or "ERROR FILE MESSAGE", a line each; exit 1 when any
 *                                             was refused
 *   grammar_schemas --sample N SEED FILE...   N random documents of each: "FILE<TAB>HEX" (the bytes in hex)
 *   grammar_schemas --prefix FILE             for each line of stdin (hex bytes): "continues" when the bytes are a
 *                                             proper prefix of a document of FILE's grammar, "whole" when a whole
 *                                             document, else "no" */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "grammar/grammar.h"
#include "base/util.h"

/* ---- an RFC 8259 recogniser, independent of the grammar ---- */
typedef struct {
    const unsigned char *s;
    size_t n, i;
    int depth;
} jr;

static int jr_peek(jr *p) { return p->i < p->n ? p->s[p->i] : -1; }
static void jr_ws(jr *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}
static int jr_lit(jr *p, const char *w) {
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k)) return 0;
    p->i += k;
    return 1;
}
static int hexv(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
static long jr_u4(jr *p) { /* the 4 hex digits after \u */
    if (p->n - p->i < 4) return -1;
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexv(p->s[p->i + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    p->i += 4;
    return v;
}
/* one UTF-8 character, well formed (no overlong form, no surrogate, at most U+10FFFF) */
static int jr_utf8(jr *p) {
    unsigned c = p->s[p->i];
    int k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (k < 0 || p->n - p->i < (size_t)k + 1) return 0;
    uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1F : k == 2 ? c & 0x0F : c & 0x07;
    for (int j = 1; j <= k; j++) {
        unsigned d = p->s[p->i + j];
        if ((d & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (d & 0x3F);
    }
    static const uint32_t minv[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < minv[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    p->i += (size_t)k + 1;
    return 1;
}
static int jr_string(jr *p) {
    if (!jr_lit(p, "\"")) return 0;
    for (;;) {
        int c = jr_peek(p);
        if (c < 0 || c < 0x20) return 0;
        if (c == '"') {
            p->i++;
            return 1;
        }
        if (c == '\\') {
            p->i++;
            c = jr_peek(p);
            if (c < 0) return 0;
            p->i++;
            if (c == 'u') {
                long u = jr_u4(p);
                if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return 0;
                if (u >= 0xD800 && u <= 0xDBFF) { /* a pair, or no character */
                    if (!jr_lit(p, "\\u")) return 0;
                    long l = jr_u4(p);
                    if (l < 0xDC00 || l > 0xDFFF) return 0;
                }
            } else if (!strchr("\"\\/bfnrt", c)) {
                return 0;
            }
        } else if (!jr_utf8(p)) {
            return 0;
        }
    }
}
static int jr_digits(jr *p) {
    size_t i0 = p->i;
    while (jr_peek(p) >= '0' && jr_peek(p) <= '9') p->i++;
    return p->i > i0;
}
static int jr_number(jr *p) {
    if (jr_peek(p) == '-') p->i++;
    if (jr_peek(p) == '0') p->i++;
    else if (!jr_digits(p)) return 0;
    if (jr_peek(p) == '.') {
        p->i++;
        if (!jr_digits(p)) return 0;
    }
    if (jr_peek(p) == 'e' || jr_peek(p) == 'E') {
        p->i++;
        if (jr_peek(p) == '+' || jr_peek(p) == '-') p->i++;
        if (!jr_digits(p)) return 0;
    }
    return 1;
}
static int jr_value(jr *p) {
    if (++p->depth > 5000) return 0;
    jr_ws(p);
    int c = jr_peek(p), ok = 0;
    if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        p->i++;
        jr_ws(p);
        if (jr_peek(p) == close) {
            p->i++;
            ok = 1;
        } else {
            for (;;) {
                if (close == '}') {
                    jr_ws(p);
                    if (!jr_string(p)) break;
                    jr_ws(p);
                    if (!jr_lit(p, ":")) break;
                }
                if (!jr_value(p)) break;
                jr_ws(p);
                if (jr_peek(p) == ',') {
                    p->i++;
                    continue;
                }
                ok = jr_peek(p) == close;
                p->i++;
                break;
            }
        }
    } else if (c == '"') {
        ok = jr_string(p);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = jr_number(p);
    } else {
        ok = jr_lit(p, "true") || jr_lit(p, "false") || jr_lit(p, "null");
    }
    p->depth--;
    return ok;
}
/* 1 when the bytes are one JSON text (RFC 8259: a value with optional whitespace around it) */
static int is_json_text(const char *s, size_t n) {
    jr p = {(const unsigned char *)s, n, 0, 0};
    if (!jr_value(&p)) return 0;
    jr_ws(&p);
    return p.i == n;
}

/* ---- files ---- */
static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *b = frigg_xmalloc(cap);
    size_t k;
    while ((k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) b = frigg_xrealloc(b, cap *= 2);
    }
    fclose(f);
    b[len < cap ? len : cap - 1] = 0;
    *n = len;
    return b;
}

static frigg_grammar *compile_file(const char *path) {
    size_t n;
    char *text = read_all(path, &n);
    if (!text) {
        frigg_set_error("cannot read %s", path);
        return NULL;
    }
    frigg_grammar *g = frigg_grammar_from_schema(text, n);
    free(text);
    return g;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the *.json files of dir, sorted; *n of them; free each and the list */
static char **list_json(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (k < 6 || strcmp(e->d_name + k - 5, ".json")) continue;
        if (*n == cap) v = frigg_xrealloc(v, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *v);
        v[(*n)++] = frigg_xstrdup(e->d_name);
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

/* ---- random documents ---- */
static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct {
    frigg_gvocab *v;
    const char *bytes[257];
    size_t lens[257];
    char b[256];
} bytevocab;

#define END_ID 256
static void bytevocab_init(bytevocab *bv) {
    for (int i = 0; i < 256; i++) {
        bv->b[i] = (char)i;
        bv->bytes[i] = &bv->b[i];
        bv->lens[i] = 1;
    }
    bv->bytes[END_ID] = "";
    bv->lens[END_ID] = 0;
    int32_t end = END_ID;
    bv->v = frigg_gvocab_from_bytes(bv->bytes, bv->lens, 257, &end, 1);
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* One random document of g into doc (malloc'd, *len bytes): `budget` bytes of free choice (mostly printable
 * ASCII, some whitespace and other bytes, an end taken now and then where allowed), then the shortest way out
 * it can see: the end, else (three times in four) a closing quote or else bracket, else printable ASCII. 0; -1 with why filled when a state
 * allows nothing and is not ended (a dead end the grammar should never reach) or no end came in 50000 bytes. */
static int random_doc(const frigg_grammar *g, frigg_gmasker *mk, const frigg_gvocab *v, uint64_t *seed, int budget,
                      char **doc, size_t *len, char *why, size_t whysz) {
    frigg_gmatcher *m = frigg_gmatcher_new(g);
    uint32_t bits[(257 + 31) / 32];
    size_t cap = 256, n = 0;
    char *d = frigg_xmalloc(cap);
    int rc = -1;
    for (;;) {
        int na = frigg_gmasker_fill(mk, m, bits);
        if (!na) {
            snprintf(why, whysz, "no token allowed after %zu bytes and the document has not ended", n);
            break;
        }
        int allowed[257], k = 0, pref[257], np = 0;
        for (int id = 0; id < 257; id++)
            if (bits[id >> 5] >> (id & 31) & 1) allowed[k++] = id;
        int end_ok = (bits[END_ID >> 5] >> (END_ID & 31)) & 1;
        int free_phase = (int)n < budget;
        int pick = -1;
        if (end_ok && (!free_phase || rng(seed) % 6 == 0)) pick = END_ID;
        if (pick < 0 && !free_phase && rng(seed) % 4) { /* a quote first, else a bracket; now and then neither */
            for (int i = 0; i < k; i++)
                if (allowed[i] == '"') pref[np++] = allowed[i];
            for (int i = 0; i < k && !np; i++)
                if (allowed[i] == '}' || allowed[i] == ']') pref[np++] = allowed[i];
        }
        if (pick < 0 && !np) {
            uint64_t r = rng(seed) % 10;
            for (int i = 0; i < k; i++) {
                int c = allowed[i];
                if (c == END_ID) continue;
                int printable = c > 0x20 && c < 0x7f;
                if ((free_phase && r >= 8) ? !printable : printable) pref[np++] = c;
            }
        }
        if (pick < 0) {
            if (!np)
                for (int i = 0; i < k; i++)
                    if (allowed[i] != END_ID && (!is_ws(allowed[i]) || k == 1)) pref[np++] = allowed[i];
            if (!np) pref[np++] = allowed[0];
            pick = pref[rng(seed) % (uint64_t)np];
        }
        if (frigg_gmatcher_advance_token(m, v, pick)) {
            snprintf(why, whysz, "the masker allowed token %d after %zu bytes, the matcher refused it", pick, n);
            break;
        }
        if (pick == END_ID) {
            rc = 0;
            break;
        }
        if (n + 1 >= cap) d = frigg_xrealloc(d, cap *= 2);
        d[n++] = (char)pick;
        if (n > 50000) {
            snprintf(why, whysz, "no end after %zu bytes", n);
            break;
        }
    }
    d[n] = 0;
    frigg_gmatcher_free(m);
    *doc = d;
    *len = n;
    return rc;
}

static int accepts_whole(const frigg_grammar *g, const char *s, size_t n) {
    frigg_gmatcher *m = frigg_gmatcher_new(g);
    int ok = frigg_gmatcher_advance(m, s, n) == 0 && frigg_gmatcher_can_end(m);
    frigg_gmatcher_free(m);
    return ok;
}

static void print_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

/* ---- tool modes ---- */
static int tool_compile(int argc, char **argv) {
    int bad = 0;
    for (int i = 0; i < argc; i++) {
        clock_t t0 = clock();
        frigg_grammar *g = compile_file(argv[i]);
        double ms = (double)(clock() - t0) * 1000.0 / CLOCKS_PER_SEC;
        if (g) printf("OK %s %d %d %.1f\n", argv[i], frigg_grammar_n_states(g), frigg_grammar_n_rules(g), ms);
        else printf("ERROR %s %s\n", argv[i], frigg_error()), bad = 1;
        frigg_grammar_free(g);
    }
    return bad;
}

static int tool_sample(int count, uint64_t seed, int argc, char **argv) {
    bytevocab bv;
    bytevocab_init(&bv);
    int bad = 0;
    if (!seed) seed = 1;
    for (int i = 0; i < argc; i++) {
        frigg_grammar *g = compile_file(argv[i]);
        if (!g) {
            fprintf(stderr, "%s: %s\n", argv[i], frigg_error());
            bad = 1;
            continue;
        }
        frigg_gmasker *mk = frigg_gmasker_new(g, bv.v);
        for (int k = 0; k < count; k++) {
            char *doc, why[200];
            size_t n;
            if (random_doc(g, mk, bv.v, &seed, 8 + (int)(rng(&seed) % 120), &doc, &n, why, sizeof why)) {
                fprintf(stderr, "%s: %s\n", argv[i], why);
                bad = 1;
            } else {
                printf("%s\t", argv[i]);
                print_hex(doc, n);
                putchar('\n');
            }
            free(doc);
        }
        frigg_gmasker_free(mk);
        frigg_grammar_free(g);
    }
    frigg_gvocab_free(bv.v);
    return bad;
}

static int tool_prefix(const char *path) {
    frigg_grammar *g = compile_file(path);
    if (!g) {
        fprintf(stderr, "%s: %s\n", path, frigg_error());
        return 1;
    }
    char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        size_t L = strcspn(line, "\r\n"), n = 0;
        char *b = frigg_xmalloc(L / 2 + 1);
        int ok = L % 2 == 0;
        for (size_t i = 0; ok && i < L; i += 2) {
            int h = hexv(line[i]), l = hexv(line[i + 1]);
            ok = h >= 0 && l >= 0;
            b[n++] = (char)(h * 16 + l);
        }
        frigg_gmatcher *m = frigg_gmatcher_new(g);
        const char *r = !ok || frigg_gmatcher_advance(m, b, n) ? "no" : frigg_gmatcher_can_end(m) ? "whole" : "continues";
        puts(r);
        frigg_gmatcher_free(m);
        free(b);
    }
    frigg_grammar_free(g);
    return 0;
}

/* ---- the test ---- */
static void check_corpus(const char *dir, int docs, uint64_t seed, FILE *out) {
    int n;
    char **files = list_json(dir, &n);
    CHECK(n >= 200, "%s holds %d schemas, at least 200 expected", dir, n);
    bytevocab bv;
    bytevocab_init(&bv);
    long total_docs = 0, total_bytes = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        frigg_grammar *g = compile_file(path);
        CHECK(g != NULL, "%s compiles: %s", files[i], g ? "" : frigg_error());
        if (g) {
            frigg_gmasker *mk = frigg_gmasker_new(g, bv.v);
            int ok = 1;
            for (int k = 0; k < docs && ok; k++) {
                char *doc, why[200];
                size_t len;
                int rc = random_doc(g, mk, bv.v, &seed, 8 + (int)(rng(&seed) % 120), &doc, &len, why, sizeof why);
                ok = rc == 0 && is_json_text(doc, len) && accepts_whole(g, doc, len);
                CHECK(ok, "%s: random document %d (%zu bytes) %s: %.300s", files[i], k, len,
                      rc ? why : !is_json_text(doc, len) ? "is not JSON" : "is not accepted again", doc);
                total_docs += ok;
                if (ok && out) {
                    fprintf(out, "%s\t", path);
                    for (size_t b = 0; b < len; b++) fprintf(out, "%02x", (unsigned char)doc[b]);
                    fputc('\n', out);
                }
                total_bytes += (long)len;
                free(doc);
            }
            frigg_gmasker_free(mk);
        }
        frigg_grammar_free(g);
        free(files[i]);
    }
    free(files);
    frigg_gvocab_free(bv.v);
    fprintf(stderr, "  %d schemas, %ld random documents (%ld bytes) checked\n", n, total_docs, total_bytes);
}

static void check_bad(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.tsv", dir);
    size_t n;
    char *tsv = read_all(path, &n);
    CHECK(tsv != NULL, "%s exists", path);
    if (!tsv) return;
    int cases = 0;
    for (char *line = tsv, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (!*line || *line == '#') continue;
        char *tab = strchr(line, '\t');
        CHECK(tab != NULL, "expected.tsv line '%s' has FILE<TAB>MESSAGE", line);
        if (!tab) continue;
        *tab = 0;
        char *third = strchr(tab + 1, '\t'); /* frigg-run's own text (scripts/grammar-check.py) */
        if (third) *third = 0;
        snprintf(path, sizeof path, "%s/%s", dir, line);
        frigg_grammar *g = compile_file(path);
        CHECK(g == NULL, "bad/%s is refused", line);
        if (!g) CHECK(strstr(frigg_error(), tab + 1) != NULL, "bad/%s: the error '%s' should hold '%s'", line, frigg_error(), tab + 1);
        frigg_grammar_free(g);
        cases++;
    }
    free(tsv);
    int nf;
    char **files = list_json(dir, &nf);
    CHECK(nf == cases, "bad/ holds %d schemas, expected.tsv names %d", nf, cases);
    for (int i = 0; i < nf; i++) free(files[i]);
    free(files);
    /* 1.1 MB: a valid schema but for its size */
    size_t big = (11u << 20) / 10;
    char *s = frigg_xmalloc(big + 1);
    memset(s, 'x', big);
    memcpy(s, "{\"description\":\"", 16);
    memcpy(s + big - 2, "\"}", 2);
    s[big] = 0;
    frigg_grammar *g = frigg_grammar_from_schema(s, big);
    CHECK(g == NULL && strstr(frigg_error(), "more than the 1048576 allowed"), "a 1.1 MB schema is refused by its size: %s",
          g ? "compiled" : frigg_error());
    frigg_grammar_free(g);
    free(s);
}

static int usage(void) {
    fprintf(stderr, "usage: grammar_schemas --check DIR [--docs N] [--seed S] [--docs-out FILE] | --compile FILE... | "
                    "--sample N SEED FILE... | --prefix FILE\n");
    return 2;
}

int main(int argc, char **argv) {
    TEST_MAIN_BEGIN("grammar_schemas");
    if (argc >= 2 && !strcmp(argv[1], "--compile")) return tool_compile(argc - 2, argv + 2);
    if (argc >= 4 && !strcmp(argv[1], "--sample")) return tool_sample(atoi(argv[2]), strtoull(argv[3], NULL, 10), argc - 4, argv + 4);
    if (argc == 3 && !strcmp(argv[1], "--prefix")) return tool_prefix(argv[2]);
    if (argc < 3 || strcmp(argv[1], "--check")) return usage();
    const char *dir = argv[2], *out_path = NULL;
    int docs = 8;
    uint64_t seed = 45;
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--docs")) docs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--docs-out")) out_path = argv[i + 1];
        else return usage();
    }
    FILE *out = NULL;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "grammar_schemas: cannot write %s\n", out_path);
        return 2;
    }
    check_corpus(dir, docs, seed ? seed : 1, out);
    if (out) fclose(out);
    char *bad = frigg_xmalloc(strlen(dir) + 8);
    sprintf(bad, "%s/bad", dir);
    check_bad(bad);
    free(bad);
    TEST_MAIN_END();
}
