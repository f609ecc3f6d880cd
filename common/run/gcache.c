/* gcache.c — see gcache.h. */
#include "gcache.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

#define GJ_TOOL_Q "<|\"|>" /* the tool-call syntax's string quote (toolcall.h) */

struct frigg_gref {
    atomic_int refs;
    frigg_grammar *g;
    frigg_gmasker *mk;
    const frigg_gvocab *v;
};

typedef struct {
    frigg_gkind kind;
    char *text;
    size_t len;
    frigg_gref *ref; /* the cache's own reference */
    uint64_t used;   /* the lookup that last used it (LRU) */
} entry;

struct frigg_gcache {
    const frigg_tokenizer *tok;
    int vocab;
    int32_t *end_ids;
    int n_end;
    pthread_mutex_t mu; /* guards everything below (compiling runs without it) */
    frigg_gvocab *v;    /* built on the first lookup; constant after */
    frigg_gvocab *vt;   /* the tool-call vocabulary (FRIGG_GK_TOOLCALL), likewise */
    entry e[FRIGG_GCACHE_ENTRIES];
    int n;
    uint64_t clock;
    long hits, compiles;
    /* The precompute worker (precompute_main): each newly compiled grammar's masks of every stack top, computed
     * beside the requests after the compile, so that the cold walks (milliseconds each at 262,144 tokens) leave
     * the decode steps of the grammar's first requests as soon as they are done. Guarded by mu. */
    int pre_threads;    /* the walks' threads (precompute_threads); 0: no worker (FRIGG_GRAMMAR_PRECOMPUTE=0) */
    pthread_t worker;
    int worker_on;
    pthread_cond_t cv;
    frigg_gref *todo[FRIGG_GCACHE_ENTRIES];
    int ntodo;
    atomic_int stop;
};

/* Half the machine's cores, 1 to 8: the walks are the first requests' latency, and on a GPU host the cores are
 * otherwise idle; on a CPU engine's host the other half keeps decoding. */
static int precompute_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN) / 2;
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

static void *precompute_main(void *arg) {
    frigg_gcache *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->ntodo && !atomic_load(&c->stop)) pthread_cond_wait(&c->cv, &c->mu);
        if (atomic_load(&c->stop)) break;
        frigg_gref *r = c->todo[0];
        memmove(c->todo, c->todo + 1, (size_t)--c->ntodo * sizeof *c->todo);
        pthread_mutex_unlock(&c->mu);
        frigg_gmasker_precompute_until(r->mk, &c->stop, c->pre_threads);
        frigg_gref_release(r);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Under mu: r's masks to the worker (started on first use; none with FRIGG_GRAMMAR_PRECOMPUTE=0). A full queue
 * drops the oldest: its grammar's masks are then made as its sequences need them, as without the worker. */
static void precompute_later(frigg_gcache *c, frigg_gref *r) {
    if (!c->pre_threads) return;
    if (!c->worker_on) {
        if (pthread_create(&c->worker, NULL, precompute_main, c)) return;
        c->worker_on = 1;
    }
    if (c->ntodo == FRIGG_GCACHE_ENTRIES) {
        frigg_gref_release(c->todo[0]); /* the queue's reference: the grammar lives on where the cache or a request
                                             holds it */
        memmove(c->todo, c->todo + 1, (size_t)--c->ntodo * sizeof *c->todo);
    }
    c->todo[c->ntodo++] = frigg_gref_retain(r);
    pthread_cond_signal(&c->cv);
}

frigg_gcache *frigg_gcache_new(const frigg_tokenizer *tok, int vocab, const int32_t *end_ids, int n_end) {
    const char *env = getenv("FRIGG_GRAMMAR_PRECOMPUTE");
    if (env && *env && strcmp(env, "0") && strcmp(env, "1")) {
        frigg_set_error("FRIGG_GRAMMAR_PRECOMPUTE is '%s': 0 (no precompute thread) or 1 (the default)", env);
        return NULL;
    }
    frigg_gcache *c = frigg_xcalloc(1, sizeof *c);
    c->pre_threads = env && !strcmp(env, "0") ? 0 : precompute_threads();
    c->tok = tok;
    c->vocab = vocab;
    c->end_ids = frigg_xmalloc(sizeof(int32_t) * (size_t)(n_end > 0 ? n_end : 1));
    if (n_end > 0) memcpy(c->end_ids, end_ids, sizeof(int32_t) * (size_t)n_end);
    c->n_end = n_end > 0 ? n_end : 0;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    atomic_init(&c->stop, 0);
    return c;
}

void frigg_gcache_free(frigg_gcache *c) {
    if (!c) return;
    if (c->worker_on) {
        pthread_mutex_lock(&c->mu);
        atomic_store(&c->stop, 1);
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->worker, NULL);
    }
    for (int i = 0; i < c->ntodo; i++) frigg_gref_release(c->todo[i]);
    pthread_cond_destroy(&c->cv);
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].text);
        frigg_gref_release(c->e[i].ref);
    }
    frigg_gvocab_free(c->v);
    frigg_gvocab_free(c->vt);
    pthread_mutex_destroy(&c->mu);
    free(c->end_ids);
    free(c);
}

frigg_gref *frigg_gref_retain(frigg_gref *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void frigg_gref_release(frigg_gref *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    frigg_gmasker_free(g->mk);
    frigg_grammar_free(g->g);
    free(g);
}

const frigg_grammar *frigg_gref_grammar(const frigg_gref *g) { return g->g; }
frigg_gmasker *frigg_gref_masker(const frigg_gref *g) { return g->mk; }
const frigg_gvocab *frigg_gref_vocab(const frigg_gref *g) { return g->v; }

/* The tokenizer's vocabulary with the tool-call syntax's special tokens (<|"|>, <tool_call|>, <|tool_call>) matched
 * by their text,
 * as the detokenized answer the tool-call parser reads holds them. */
static frigg_gvocab *tool_vocab(const frigg_gcache *c) {
    int V = c->vocab;
    char **b = frigg_xcalloc((size_t)(V ? V : 1), sizeof *b);
    size_t *l = frigg_xcalloc((size_t)(V ? V : 1), sizeof *l);
    frigg_gvocab *v = NULL;
    for (int32_t i = 0; i < V; i++) {
        int kind = frigg_tokenizer_token_bytes(c->tok, i, &b[i], &l[i]);
        if (kind < 0) goto out;
        if (kind == FRIGG_TOKEN_SPECIAL) {
            size_t n = 0;
            char *t = frigg_tokenizer_decode(c->tok, &i, 1, &n);
            if (t && ((n == strlen(GJ_TOOL_Q) && !memcmp(t, GJ_TOOL_Q, n)) ||
                      (n == strlen("<tool_call|>") && !memcmp(t, "<tool_call|>", n)) ||
                      (n == strlen("<|tool_call>") && !memcmp(t, "<|tool_call>", n)))) {
                b[i] = t;
                l[i] = n;
                continue;
            }
            free(t);
            l[i] = 0;
        } else if (kind != FRIGG_TOKEN_TEXT && kind != FRIGG_TOKEN_BYTE) {
            l[i] = 0;
        }
    }
    v = frigg_gvocab_from_bytes((const char *const *)b, l, V, c->end_ids, c->n_end);
out:
    for (int i = 0; i < V; i++) free(b[i]);
    free(b);
    free(l);
    return v;
}

/* FRIGG_GK_TOOLCALL's and FRIGG_GK_TOOLCALLS's text: [[name, schema], ...]. */
static frigg_grammar *tool_grammar(const char *text, size_t len, int mode) {
    json_t *a = json_loadb(text, len, 0, NULL);
    size_t n = json_array_size(a);
    const char **names = frigg_xcalloc(n ? n : 1, sizeof *names), **schemas = frigg_xcalloc(n ? n : 1, sizeof *schemas);
    size_t *lens = frigg_xcalloc(n ? n : 1, sizeof *lens);
    frigg_grammar *g = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(a, i);
        names[i] = json_string_value(json_array_get(p, 0));
        schemas[i] = json_string_value(json_array_get(p, 1));
        if (!names[i] || !schemas[i]) {
            frigg_set_error("tool call: not a list of [name, schema] pairs");
            goto out;
        }
        lens[i] = json_string_length(json_array_get(p, 1));
    }
    if (n) g = frigg_grammar_mimir_calls(names, schemas, lens, (int)n, mode);
    else frigg_set_error("tool call: no function to call");
out:
    free(names);
    free(schemas);
    free(lens);
    json_decref(a);
    return g;
}

static frigg_grammar *compile(frigg_gkind kind, const char *text, size_t len) {
    switch (kind) {
    case FRIGG_GK_TOOLCALL: return tool_grammar(text, len, 0);
    case FRIGG_GK_TOOLCALLS: return tool_grammar(text, len, FRIGG_GCALLS_MANY);
    case FRIGG_GK_TOOLCALL_LAZY: return tool_grammar(text, len, FRIGG_GCALLS_AFTER_OPEN);
    case FRIGG_GK_TOOLCALLS_LAZY: return tool_grammar(text, len, FRIGG_GCALLS_AFTER_OPEN | FRIGG_GCALLS_MANY);
    case FRIGG_GK_JSON_OBJECT: return frigg_grammar_json_object();
    case FRIGG_GK_SCHEMA: return frigg_grammar_from_schema(text, len);
    case FRIGG_GK_REGEX: {
        if (memchr(text, 0, len)) {
            frigg_set_error("regex: a NUL byte in the expression");
            return NULL;
        }
        char *re = frigg_xmalloc(len + 1);
        memcpy(re, text, len);
        re[len] = 0;
        frigg_grammar *g = frigg_grammar_from_regex(re);
        free(re);
        return g;
    }
    }
    frigg_set_error("grammar kind %d is not one of json_object, schema, regex", (int)kind);
    return NULL;
}

static frigg_gref *lookup(frigg_gcache *c, frigg_gkind kind, const char *text, size_t len) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].kind == kind && c->e[i].len == len && (!len || !memcmp(c->e[i].text, text, len))) {
            c->e[i].used = ++c->clock;
            c->hits++;
            return frigg_gref_retain(c->e[i].ref);
        }
    return NULL;
}

frigg_gref *frigg_gcache_get(frigg_gcache *c, frigg_gkind kind, const char *text, size_t len) {
    if (kind == FRIGG_GK_JSON_OBJECT || !text) len = 0;
    pthread_mutex_lock(&c->mu);
    frigg_gref *r = lookup(c, kind, text, len);
    if (!r && !c->v) c->v = frigg_gvocab_new(c->tok, c->vocab, c->end_ids, c->n_end); /* once, under the lock */
    int tools = kind >= FRIGG_GK_TOOLCALL && kind <= FRIGG_GK_TOOLCALLS_LAZY;
    if (!r && tools && !c->vt) c->vt = tool_vocab(c);
    const frigg_gvocab *v = tools ? c->vt : c->v;
    pthread_mutex_unlock(&c->mu);
    if (r) return r;
    if (!v) return NULL;
    /* Compiled without the lock: a schema that takes long (the compiler's limits bound it, FRIGG_GRAMMAR_MAX_*)
     * holds up no other request's lookup. Two requests with one new schema may both compile it; the first to
     * come back is cached and the other's copy is dropped. */
    frigg_grammar *g = compile(kind, text, len);
    if (!g) return NULL;
    r = frigg_xcalloc(1, sizeof *r);
    atomic_init(&r->refs, 1);
    r->g = g;
    r->v = v;
    r->mk = frigg_gmasker_new(g, v);
    pthread_mutex_lock(&c->mu);
    c->compiles++;
    frigg_gref *other = lookup(c, kind, text, len);
    if (other) {
        c->hits--; /* not a lookup of the request's: its own compile */
        pthread_mutex_unlock(&c->mu);
        frigg_gref_release(r);
        return other;
    }
    int slot = c->n;
    if (c->n == FRIGG_GCACHE_ENTRIES) { /* the least recently used makes room */
        slot = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[slot].used) slot = i;
        free(c->e[slot].text);
        frigg_gref_release(c->e[slot].ref);
    } else {
        c->n++;
    }
    c->e[slot] = (entry){.kind = kind, .len = len, .used = ++c->clock, .ref = frigg_gref_retain(r)};
    c->e[slot].text = frigg_xmalloc(len + 1);
    if (len) memcpy(c->e[slot].text, text, len);
    c->e[slot].text[len] = 0;
    precompute_later(c, r);
    pthread_mutex_unlock(&c->mu);
    return r;
}

void frigg_gcache_stats(frigg_gcache *c, int *entries, long *hits, long *compiles) {
    pthread_mutex_lock(&c->mu);
    if (entries) *entries = c->n;
    if (hits) *hits = c->hits;
    if (compiles) *compiles = c->compiles;
    pthread_mutex_unlock(&c->mu);
}
