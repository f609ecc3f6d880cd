/* tokenizer.h — HF `tokenizer.json` tokenizers of the SentencePiece-BPE family (Gemma, Llama-2),
 * encoding id-for-id like HF tokenizers 0.23 (`Tokenizer.from_file(...).encode(text,
 * add_special_tokens=False)`) and decoding like `decode(ids, skip_special_tokens=False)`.
 * Spec: ../shared/docs/TOKENIZER.md. Every component the loader does not implement is refused by
 * name, so a file either tokenizes exactly like HF or does not load. */
#ifndef FRIGG_TOKENIZER_H
#define FRIGG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct frigg_tokenizer frigg_tokenizer;

/* hf_regex: 1 = transformers' fix_mistral_regex rewrite (PCRE2, UTF+UCP); 0 = training-faithful. */
frigg_tokenizer *frigg_tokenizer_load(const char *tokenizer_json_path, int hf_regex); /* NULL + frigg_error() */
/* The same from JSON text in memory (the fuzz target and tests use it); name is for messages. */
frigg_tokenizer *frigg_tokenizer_load_json(const char *json, size_t len, const char *name, int hf_regex);
void frigg_tokenizer_free(frigg_tokenizer *);
/* HF's get_vocab_size(with_added_tokens=true). */
int frigg_tokenizer_vocab_size(const frigg_tokenizer *);
int frigg_tokenizer_hf_regex(const frigg_tokenizer *);
/* Encode text (no BOS added; added/special tokens matched like HF). *ids malloc'd. 0 ok, -1 error.
 * The text must be valid UTF-8 (an error names the first bad byte otherwise); NUL bytes are text. */
int frigg_tokenizer_encode(const frigg_tokenizer *, const char *text, size_t len, int32_t **ids, size_t *n);
/* The same, stopping once the text is known to encode to more than max_ids tokens (max_ids 0: no limit): then
 * returns 1 with *ids NULL and *n = max_ids + 1, having encoded little more than max_ids tokens' worth of the
 * text (a long BPE word is bounded below by its length and skipped). A prompt far longer than a context is so
 * refused in time proportional to the context, not to the text. 0 ok, -1 error, 1 over the limit. */
int frigg_tokenizer_encode_max(const frigg_tokenizer *, const char *text, size_t len, size_t max_ids, int32_t **ids,
                               size_t *n);
/* Decode like HF decode(skip_special_tokens=false): unknown ids are dropped, as HF does.
 * Returns malloc'd NUL-terminated UTF-8 (NULL + frigg_error() only on an internal error). */
char *frigg_tokenizer_decode(const frigg_tokenizer *, const int32_t *ids, size_t n, size_t *len_out);
int32_t frigg_tokenizer_token_to_id(const frigg_tokenizer *, const char *token); /* -1 if absent */
const char *frigg_tokenizer_id_to_token(const frigg_tokenizer *, int32_t id);   /* NULL if absent */

/* What one id adds to the decoded text when it follows other tokens: the bytes constrained decoding
 * (common/grammar) matches a token by. FRIGG_TOKEN_TEXT: *out holds the token's text after the decoder's
 * per-token steps (Replace); FRIGG_TOKEN_BYTE: a byte-fallback token, *out holds its one byte (a run of them
 * decodes to those bytes when they make valid UTF-8); FRIGG_TOKEN_SPECIAL: an added special token (text no
 * grammar should match); FRIGG_TOKEN_NONE: no token has the id. *out is malloc'd (NUL-terminated; NULL for
 * SPECIAL and NONE), *len its length. -1 with frigg_error() when the decoder chain makes a token's text depend
 * on its neighbours (Strip, Metaspace, no decoder: tokens joined by spaces), which this cannot express. */
enum { FRIGG_TOKEN_NONE, FRIGG_TOKEN_TEXT, FRIGG_TOKEN_BYTE, FRIGG_TOKEN_SPECIAL };
int frigg_tokenizer_token_bytes(const frigg_tokenizer *, int32_t id, char **out, size_t *len);

/* Streaming decoder: push ids one at a time, get back only complete UTF-8 (never a partial
 * sequence). The pieces concatenate to exactly frigg_tokenizer_decode() of all the ids: a run of
 * byte-fallback tokens is held back until it ends, because HF turns a whole run into U+FFFDs when
 * any byte of it is invalid. NULL + frigg_error() for a decoder pipeline it cannot stream. */
typedef struct frigg_detok_stream frigg_detok_stream;
frigg_detok_stream *frigg_detok_stream_new(const frigg_tokenizer *);
/* *out receives the newly completed text as a fresh malloc'd NUL-terminated string (may be "",
 * caller frees), *out_len its length; returns 0/-1. */
int frigg_detok_stream_push(frigg_detok_stream *, int32_t id, char **out, size_t *out_len);
int frigg_detok_stream_finish(frigg_detok_stream *, char **out, size_t *out_len); /* flush (U+FFFD for invalid) */
void frigg_detok_stream_free(frigg_detok_stream *);

#endif
