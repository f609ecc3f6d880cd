/* tok_internal.h — the tokenizer's internal types, shared by the tokenizer*.c / tok_*.c files only.
 * Layout: tok_map.c (hash maps, byte buffers), tokenizer_load.c (tokenizer.json → this struct),
 * tok_load_pipeline.c + tok_load_util.c + tok_json.c (its parts), tok_regex_delta.c (generated),
 * tok_added.c (added-token splitting), tok_pretok.c (normalizers, pre-tokenizers),
 * tok_bpe.c (the BPE model), tok_decode.c (decoders, streaming), tokenizer.c (the public API). */
#ifndef FRIGG_TOK_INTERNAL_H
#define FRIGG_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"


/* A growable byte buffer; p is always NUL-terminated when non-NULL. */
typedef struct {
    char *p;
    size_t n, cap;
} tok_buf;
void tok_buf_put(tok_buf *b, const void *s, size_t n);
static inline void tok_buf_putc(tok_buf *b, char c) { tok_buf_put(b, &c, 1); }
void tok_buf_put_cp(tok_buf *b, uint32_t cp); /* UTF-8 of one code point */
char *tok_buf_take(tok_buf *b, size_t *len); /* hands the (NUL-terminated) bytes to the caller */

/* A growable int32 vector. limit (0 = none): the encoder stops once n passes it (tok_bpe_word and the
 * pre-tokenizer steps return TOK_OVER_LIMIT), so a text far longer than a context is not encoded whole. */
typedef struct {
    int32_t *v;
    size_t n, cap;
    size_t limit;
} tok_ivec;
#define TOK_OVER_LIMIT 1
void tok_ivec_push(tok_ivec *a, int32_t x);

/* String → int32 map (open addressing). Keys are byte strings and may contain NUL; a put of an
 * existing key overwrites its value, like serde's map (last duplicate wins). */
typedef struct {
    size_t off;   /* key bytes in the arena */
    uint32_t len;
    int32_t val;
} tok_strmap_entry;
typedef struct {
    char *arena;
    size_t arena_n, arena_cap;
    tok_strmap_entry *e;
    size_t n, cap;    /* entries */
    uint64_t *slots;  /* high 32 bits: hash tag; low 32: entry index + 1 (0 = empty) */
    size_t slot_mask;
} tok_strmap;
void tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
size_t tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t val); /* returns entry index */
int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len);       /* -1 if absent */
static inline const char *tok_strmap_key(const tok_strmap *m, size_t e, size_t *len) {
    *len = m->e[e].len;
    return m->arena + m->e[e].off;
}

/* (uint32, uint32) → (uint32 rank, int32 value) map: BPE merges and trie edges. */
typedef struct {
    uint64_t key; /* UINT64_MAX = empty */
    uint32_t rank;
    int32_t val;
} tok_pair_slot; /* one 16-byte slot: a lookup touches one cache line */
typedef struct {
    tok_pair_slot *slot;
    size_t n, mask;
} tok_pairmap;
void tok_pairmap_init(tok_pairmap *m, size_t expected);
void tok_pairmap_free(tok_pairmap *m);
void tok_pairmap_put(tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, int32_t val); /* overwrites */
/* Returns 1 and fills rank/val when present. */
int tok_pairmap_get(const tok_pairmap *m, uint32_t a, uint32_t b, uint32_t *rank, int32_t *val);
/* Start loading the slot of (a, b) into cache: lookups of many pairs overlap their misses. */
void tok_pairmap_prefetch(const tok_pairmap *m, uint32_t a, uint32_t b);

/* UTF-8 helpers. tok_utf8_valid returns the offset of the first invalid byte, or len if valid. */
size_t tok_utf8_valid(const char *s, size_t len);
/* Decode one code point of valid UTF-8 at s (n bytes left); *adv = its length. */
uint32_t tok_utf8_next(const char *s, size_t n, size_t *adv);
static inline size_t tok_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}
int tok_is_white_space(uint32_t cp); /* Unicode White_Space (Rust regex \s) */

/* ---- components ---- */
enum { TOK_NORM_REPLACE, TOK_NORM_PREPEND };
typedef struct {
    int kind;
    char *pat, *content; /* literal pattern (Replace), content (Replace/Prepend) */
    size_t pat_len, content_len;
} tok_norm;

enum { TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT, TOK_SPLIT_CONTIGUOUS };
enum { TOK_PRE_SPLIT, TOK_PRE_METASPACE };
enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };
typedef struct {
    int kind;
    /* Split: a literal pattern, or a regex compiled with PCRE2 (UTF+UCP) when re is set. */
    char *pat;
    size_t pat_len;
    pcre2_code *re;
    int behavior, invert;
    /* Metaspace */
    uint32_t repl_cp;
    char repl[5];
    size_t repl_len;
    int prepend_scheme, split;
} tok_pretok;

enum { TOK_DEC_REPLACE, TOK_DEC_BYTE_FALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP, TOK_DEC_METASPACE };
typedef struct {
    int kind;
    char *pat, *content; /* Replace: literal pattern → content */
    size_t pat_len, content_len;
    uint32_t cp;         /* Strip: the stripped char; Metaspace: the replacement char */
    size_t start, stop;  /* Strip */
    int prepend_scheme;  /* Metaspace */
} tok_dec;

typedef struct {
    char *content, *norm; /* norm: the normalized content when it differs (normalized tokens) */
    size_t content_len, norm_len;
    int single_word, lstrip, rstrip, normalized, special;
    int32_t id;
} tok_added;

/* A byte trie for leftmost-longest matching of added tokens. */
typedef struct {
    tok_pairmap edges;   /* (node, byte) → child node */
    int32_t *term;       /* node → index into tokenizer.added, or -1 */
    size_t n_nodes, cap_nodes;
    uint8_t first[256];  /* bytes that start some pattern */
    int empty;
} tok_trie;

struct frigg_tokenizer {
    /* BPE model */
    tok_strmap vocab;
    int64_t *id_entry;   /* id → vocab entry (last key in file order for that id), -1 none */
    size_t id_cap;       /* max id + 1 */
    tok_pairmap merges;  /* (left id, right id) → (rank, merged id) */
    char *unk_token;     /* NULL when unk_token is null */
    int32_t unk_id;      /* -1 when absent from vocab (an error only if an unknown char needs it) */
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256];
    int32_t *bmp_id;     /* code point < 0x10000 → vocab id or -1: the per-char lookup, precomputed */
    /* The longest vocab string in bytes, when every id has one string (0 otherwise): no BPE token covers more
     * bytes of a word, which bounds a word's token count from below (tok_bpe_word's early stop). */
    size_t max_token_bytes;

    tok_norm *norm;
    size_t n_norm;
    tok_pretok *pre;
    size_t n_pre;
    int has_decoder;
    tok_dec *dec;
    size_t n_dec;

    tok_added *added;    /* one per id (HF's added_tokens_map_r) */
    size_t n_added;
    tok_strmap added_map; /* content → id (HF's added_tokens_map) */
    tok_trie trie_raw, trie_norm;
    pcre2_code *word_re; /* Rust regex \w for single_word, compiled only when a token needs it */

    int hf_regex;
};

/* tok_added.c */
void tok_trie_build(tok_trie *t, const frigg_tokenizer *tk, int normalized);
void tok_trie_free(tok_trie *t);
/* One piece of input after added-token extraction: either an added token (id >= 0) or text. */
typedef struct {
    size_t start, end;
    int32_t id;
} tok_span;
/* HF AddedVocabulary::find_matches on s[0..n]: appends spans covering matches and the gaps. */
void tok_added_find(const frigg_tokenizer *tk, const tok_trie *t, const char *s, size_t n,
                    tok_span **out, size_t *n_out, size_t *cap_out);

/* tok_pretok.c */
void tok_normalize(const frigg_tokenizer *tk, const char *s, size_t n, tok_buf *out);
/* Encode one normalized text segment: pre-tokenize, then BPE each piece, appending ids.
 * at_origin: the segment starts at offset 0 of the original input (Metaspace "first").
 * 0, -1 on error, TOK_OVER_LIMIT when ids->limit is passed (no more pieces are encoded). */
int tok_pretok_and_bpe(const frigg_tokenizer *tk, const char *s, size_t n, int at_origin,
                       pcre2_match_data **md, tok_ivec *ids);
/* The number of pieces the pre-tokenizers alone make of s (no normalizer, no model); -1 on error. */
long tok_pretok_count(const frigg_tokenizer *tk, const char *s, size_t n);

/* tok_bpe.c: BPE one word (valid UTF-8, non-empty), appending ids. 0 ok, -1 error, TOK_OVER_LIMIT when ids->limit
 * is set and the word would take ids->n past it (the word's ids are then not all appended). */
int tok_bpe_word(const frigg_tokenizer *tk, const char *s, size_t n, tok_ivec *ids);

/* 1 when the BPE of the text s (valid UTF-8) surely makes more than room tokens, by the bound of a token's bytes
 * (max_token_bytes); 0 when it may not (or there is no bound). Linear, with no allocation. */
int tok_bpe_exceeds(const frigg_tokenizer *tk, const char *s, size_t n, size_t room);

/* tok_decode.c */
const char *tok_id_to_token(const frigg_tokenizer *tk, int32_t id, size_t *len);
/* HF byte_fallback.rs: the byte a "<0xHH>" token stands for, or -1 when s is not one. */
int tok_byte_token(const char *s, size_t n);

/* tok_json.c: the fast path for model.vocab and model.merges (spans into the JSON text). */
typedef struct {
    const char *vocab, *vocab_end, *merges, *merges_end; /* NULL when absent */
} tok_json_parts;
int tok_json_split(const char *json, size_t len, tok_json_parts *parts); /* validates the document */
int tok_json_vocab(const tok_json_parts *parts, const char *base, tok_strmap *vocab, int64_t *max_id);
/* b == NULL: a legacy "a b" merge string in a. Returns -1 to stop with an error. */
typedef int (*tok_merge_fn)(void *ctx, size_t index, const char *a, size_t an, const char *b, size_t bn);
int tok_json_merges(const tok_json_parts *parts, const char *base, tok_merge_fn fn, void *ctx);

/* tokenizer_load.c */
void tok_free_components(frigg_tokenizer *tk);
/* fix_mistral_regex source text (TOKENIZER.md §3), exactly as transformers writes it. */
extern const char tok_mistral_regex[];
/* tok_regex_delta.c (generated): PCRE2 class fragments bringing its Unicode tables to HF's. */
extern const char tok_delta_pcre2_version[], tok_delta_add_L[], tok_delta_add_N[], tok_delta_add_U[],
    tok_delta_add_W[], tok_delta_space[];

#endif
