/* tok_load.h — helpers shared by the tokenizer.json loader files (tokenizer_load.c: model, added
 * tokens, the document; tok_load_pipeline.c: normalizers, pre-tokenizers, decoders). */
#ifndef FRIGG_TOK_LOAD_H
#define FRIGG_TOK_LOAD_H

#include <jansson.h>

#include "tok_internal.h"

typedef struct {
    const char *name; /* the file, for messages */
} tok_ctx;

/* Sets "<file>: <message>" as the error; returns -1. */
int tok_fail(const tok_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *tok_dup(const char *s, size_t n); /* NUL-terminated copy of n bytes */
/* A string member as bytes; -1 when absent or not a string. */
int tok_jstr(json_t *o, const char *key, const char **s, size_t *n);
const char *tok_jtype(json_t *o); /* the "type" member, or NULL */
/* "pattern": {"String": s} or {"Regex": r}; *is_regex tells which. */
int tok_jpattern(const tok_ctx *c, json_t *o, const char *what, const char **s, size_t *n, int *is_regex);
int tok_single_char(const tok_ctx *c, const char *s, size_t n, const char *what, uint32_t *cp);
/* PCRE2 with UTF + UCP, JIT-compiled when the library can. */
int tok_compile_regex(const tok_ctx *c, const char *src, size_t n, pcre2_code **out);

/* tok_load_pipeline.c: each appends its steps to the tokenizer (Sequences flattened). */
int tok_load_normalizer(const tok_ctx *c, frigg_tokenizer *tk, json_t *o);
int tok_load_pretok(const tok_ctx *c, frigg_tokenizer *tk, json_t *o);
int tok_load_decoder(const tok_ctx *c, frigg_tokenizer *tk, json_t *o);
/* transformers' fix_mistral_regex rewrite of the loaded pre-tokenizers (pre: its JSON). */
int tok_apply_hf_regex(const tok_ctx *c, frigg_tokenizer *tk, json_t *pre);

#endif
