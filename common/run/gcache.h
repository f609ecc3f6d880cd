/* gcache.h — the grammars of structured output (response_format, forced tool calls) as the generation path uses
 * them: one vocabulary (grammar.h's frigg_gvocab: every token's bytes in a trie, built once, on first use, since
 * at 262,144 tokens it is the costly part) and a small cache of compiled grammars with their maskers keyed by
 * kind and text, so a repeated schema is neither compiled again nor starts with a cold mask cache.
 *
 *   c = frigg_gcache_new(tok, vocab, end_ids, n_end);   once per tokenizer (a session, a server)
 *   g = frigg_gcache_get(c, FRIGG_GK_SCHEMA, text, len); a reference (NULL + frigg_error() naming the problem)
 *   params.grammar = g; frigg_seqgen_new(...)            the seqgen takes a reference of its own
 *   frigg_gref_release(g);
 *
 * Thread-safe: frigg_gcache_get from any thread (a mutex guards the cache; a schema compiles outside it, so a slow one
 * holds up no other request), a gref's masker serves every sequence
 * of its grammar at once (grammar.h). Every gref must be released before frigg_gcache_free (they point at its
 * vocabulary). */
#ifndef FRIGG_GCACHE_H
#define FRIGG_GCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

typedef enum {
    FRIGG_GK_JSON_OBJECT = 1, /* any JSON object (text unused) */
    FRIGG_GK_SCHEMA = 2,      /* a JSON Schema's text */
    FRIGG_GK_REGEX = 3,       /* the whole text matches a regular expression (grammar.h's subset) */
    FRIGG_GK_TOOLCALL = 4,    /* a forced tool call (frigg_grammar_mimir_calls): text a JSON array of [name, parameters
                                 schema] pairs; its vocabulary also has the special tokens of the call syntax, <|"|> and
                                 <tool_call|>, by their text */
    FRIGG_GK_TOOLCALLS = 5,   /* one or more tool calls back to back (parallel calls), the same text; the vocabulary
                                 also has <|tool_call> by its text */
    FRIGG_GK_TOOLCALL_LAZY = 6,  /* FRIGG_GK_TOOLCALL from after a generated <|tool_call> (its "call:" first): the
                                    grammar of a call the model chose to make (tool_choice auto) */
    FRIGG_GK_TOOLCALLS_LAZY = 7, /* FRIGG_GK_TOOLCALLS likewise */
} frigg_gkind;

/* Compiled grammars the cache keeps (the least recently used goes first; one still in use lives on until it is
 * released). */
#define FRIGG_GCACHE_ENTRIES 32

typedef struct frigg_gcache frigg_gcache;
typedef struct frigg_gref frigg_gref;

/* tok and its vocabulary size as the model sees it (ids past the tokenizer's are never allowed); end_ids: the
 * model's end-of-sequence ids, allowed where the grammar may end. tok must outlive the cache. */
/* NULL + frigg_error() where FRIGG_GRAMMAR_PRECOMPUTE holds something other than 0 or 1. */
frigg_gcache *frigg_gcache_new(const frigg_tokenizer *tok, int vocab, const int32_t *end_ids, int n_end);
void frigg_gcache_free(frigg_gcache *c);
/* A new reference to the compiled grammar of (kind, text), compiled now unless cached. NULL + frigg_error(). */
frigg_gref *frigg_gcache_get(frigg_gcache *c, frigg_gkind kind, const char *text, size_t len);
/* Cache figures: grammars held, lookups answered from the cache, compilations. */
void frigg_gcache_stats(frigg_gcache *c, int *entries, long *hits, long *compiles);

frigg_gref *frigg_gref_retain(frigg_gref *g);
void frigg_gref_release(frigg_gref *g); /* NULL: nothing */
const frigg_grammar *frigg_gref_grammar(const frigg_gref *g);
frigg_gmasker *frigg_gref_masker(const frigg_gref *g);
const frigg_gvocab *frigg_gref_vocab(const frigg_gref *g);

#endif
