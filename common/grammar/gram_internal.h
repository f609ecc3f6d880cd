/* gram_internal.h — the grammar room's internal types, shared by its gram_*.c files only.
 * Layout: gram_nfa.c (NFA fragments, UTF-8 ranges), gram_regex.c (the pattern subset), gram_schema.c
 * (JSON Schema -> rules), gram_json.c (JSON's own pieces: strings, numbers, integer ranges, any value),
 * gram_dfa.c (rules -> DFAs, trimming, the checks), gram_match.c (the recogniser), gram_vocab.c (the token
 * trie), gram_mask.c (masks and their cache), grammar.c (the public constructors). */
#ifndef FRIGG_GRAM_INTERNAL_H
#define FRIGG_GRAM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"

/* ---- NFA under construction ----
 * One NFA holds every rule; a state belongs to one rule. Edges: a byte range, epsilon, or a call of a rule
 * (taken by consuming a whole match of that rule). */
enum { GE_BYTE, GE_EPS, GE_CALL };
typedef struct {
    int32_t to, next, rule;
    uint8_t kind, lo, hi;
} gnfa_edge;

typedef struct {
    int32_t start, end;
    char name[96];      /* for messages: "#/$defs/node", "string", "value" */
} grule;

typedef struct {
    int32_t *head;      /* state -> first edge (-1 none) */
    size_t n, cap;
    gnfa_edge *e;
    size_t ne, ecap;
    int overflow;       /* a limit was passed: building goes on into a sink, the compile then fails */
    grule *rules;
    int32_t nrules, caprules;
    int mimir;          /* DFM-Mimir's tool-call syntax instead of JSON: strings (and keys) are raw text between
                           <|"|> tokens (GJ_MIMIR_Q), with no escapes and no '<' inside (toolcall.h) */
} gnfa;
#define GJ_MIMIR_Q "<|\"|>"

typedef struct {
    int32_t s, e;       /* a fragment: start state, end state (the end has no edges of its own yet) */
} gfrag;

void gnfa_free(gnfa *);
int32_t gnfa_state(gnfa *);
void gnfa_edge_add(gnfa *, int32_t from, int kind, int lo, int hi, int32_t to, int32_t rule);
int32_t gnfa_rule(gnfa *, const char *name); /* a new rule with fresh start and end states */
gfrag gf_empty(gnfa *);
gfrag gf_lit(gnfa *, const char *s, size_t n);
gfrag gf_range(gnfa *, int lo, int hi);
gfrag gf_seq(gnfa *, gfrag a, gfrag b);
gfrag gf_alt(gnfa *, const gfrag *alts, int n);
gfrag gf_opt(gnfa *, gfrag a);
gfrag gf_star(gnfa *, gfrag a);
gfrag gf_plus(gnfa *, gfrag a);
gfrag gf_call(gnfa *, int32_t rule);
void gf_join(gnfa *, int32_t from, int32_t to); /* epsilon */
/* The UTF-8 encodings of the code points lo..hi (surrogates left out), as alternatives. */
gfrag gf_utf8_range(gnfa *, uint32_t lo, uint32_t hi);

/* ---- sets of code points (the regex classes) ---- */
typedef struct {
    uint32_t lo, hi;
} gcp_range;
typedef struct {
    gcp_range *r;
    int n, cap;
} gcpset;
void gcp_add(gcpset *, uint32_t lo, uint32_t hi);
void gcp_norm(gcpset *);                 /* sort and merge */
void gcp_negate(gcpset *);               /* complement in [0, 0x10FFFF] */
void gcp_free(gcpset *);

/* ---- JSON's pieces (gram_json.c) ---- */
gfrag gj_ws(gnfa *);
gfrag gj_quote(gnfa *);                  /* a string's quote: '"', or <|"|> in the mimir syntax */
gfrag gj_string_char(gnfa *);            /* one character inside a JSON string: literal UTF-8 or an escape */
/* one code point of a set as a generator writes it inside a JSON string: `"` and `\` escaped, control
 * characters by their short escape or \u00XX, everything else as UTF-8 */
gfrag gj_cpset_in_string(gnfa *, const gcpset *);
gfrag gj_number(gnfa *);
/* a JSON string (with its quotes) whose content is none of keys[0..n) (UTF-8): until it differs from every key
 * each character is in its canonical spelling (no "\u0061" for "a"), so no spelling of a key gets through */
gfrag gj_string_except(gnfa *, const char *const *keys, int n);
/* integers in [lo, hi]; has_lo/has_hi 0: unbounded on that side */
gfrag gj_integer(gnfa *, int has_lo, int64_t lo, int has_hi, int64_t hi);
int32_t gj_string_rule(gnfa *);          /* the rule of any JSON string (made once, found by name after) */
int32_t gj_value_rule(gnfa *);           /* the rule of any JSON value */
/* the rule of a JSON string of mn..mx characters (mx -1: no upper bound), one per length range: a schema that
 * uses a length range in several places (array items, several members) builds its unrolled automaton once */
int32_t gj_string_len_rule(gnfa *, long mn, long mx);
gfrag gj_string_len(gnfa *, long mn, long mx); /* the same string in place */
gfrag gj_any_object(gnfa *);             /* any JSON object */

/* ---- regex (gram_regex.c) ----
 * GRX_IN_STRING: the characters as a JSON string's content (escaped as gj_cpset_in_string does); else as raw
 * UTF-8. Unanchored ends match anything, as JSON Schema's "pattern" does, unless GRX_FULL: the whole text
 * matches. 0, or -1 with err filled. */
enum { GRX_IN_STRING = 1, GRX_FULL = 2 };
int grx_compile(gnfa *, const char *re, size_t len, int flags, gfrag *out, char *err, size_t errsz);

/* ---- JSON Schema (gram_schema.c): rule 0 the root. 0, or -1 with frigg_error(). ---- */
int gschema_compile(gnfa *, const char *text, size_t len);
/* The schema as a rule of its own (its $refs resolved inside it), called by *out. 0, or -1 with frigg_error(). */
int gschema_compile_call(gnfa *, const char *text, size_t len, gfrag *out);

/* ---- the compiled grammar ---- */
typedef struct {
    int32_t rule, ret; /* call rule; on its match, continue in DFA state ret (of the caller's rule) */
} gcall;

struct frigg_grammar {
    int ncls;
    uint8_t cls[256];  /* byte -> class */
    int32_t n;         /* DFA states of all rules */
    int32_t *trans;    /* [n * ncls]: next state, -1 none */
    uint8_t *accept;   /* [n]: the state's rule may end here */
    uint8_t *has_out;  /* [n]: some byte or call leaves the state */
    int32_t *call_off; /* [n + 1] into calls */
    gcall *calls;
    int32_t *rule_of;  /* [n] */
    int32_t nrules;
    int32_t *rule_start; /* [nrules]: the DFA state a call enters */
    char (*rule_name)[96];
};

/* Determinize, trim and check the rules of an NFA (rule 0 is the root). NULL + frigg_error(). */
frigg_grammar *gdfa_build(const gnfa *);

/* ---- stacks ----
 * A configuration is a top DFA state and the frame below it. Frames are hash-consed (equal stacks have equal
 * ids), so stacks are compared by id. par: a frame id, GPAR_END (the bottom of the document) or GPAR_BASE (the
 * bottom of a mask walk: what lies below is not known yet). */
#define GPAR_END (-1)
#define GPAR_BASE (-2)
typedef struct {
    int32_t s, par;
} gcfg;
typedef struct {
    int32_t *fs, *fp;  /* frame -> DFA state (the return state), frame below */
    size_t n, cap;
    int32_t *slot;     /* hash: frame id + 1, 0 empty */
    size_t mask;
} gpool;
void gpool_init(gpool *);
void gpool_free(gpool *);
void gpool_clear(gpool *);
int32_t gpool_frame(gpool *, int32_t s, int32_t par);

typedef struct {
    gcfg *v;
    int n, cap;
} gcfgv;
void gcfgv_push_unique(gcfgv *, gcfg c);
/* One byte from every configuration of in, into out (cleared first): the byte edge of the top state, every
 * call out of it (pushing the return state), and, where the top may end its rule over a known frame, the
 * frame below. */
void gstep(const frigg_grammar *, gpool *, const gcfg *in, int nin, uint8_t byte, gcfgv *out);
/* 1 when some configuration's rule and every one below it may end down to `bottom` (GPAR_END or GPAR_BASE). */
int gcan_pop_to(const frigg_grammar *, const gpool *, const gcfg *in, int nin, int32_t bottom);

/* The matcher's configurations and their pool, read-only (gram_mask.c). */
const gcfg *gmatcher_cfgs(const frigg_gmatcher *, int *n, const gpool **pool, int *ended);

/* ---- the vocabulary's trie (preorder; node 0 the root) ---- */
struct frigg_gvocab {
    int V;
    char *bytes;       /* every allowed token's bytes */
    size_t *off;       /* [V + 1] */
    uint8_t *is_end;   /* [V] */
    int32_t *end_ids;
    int n_end;
    int32_t nn;        /* trie nodes */
    uint8_t *tb;       /* [nn] byte into the node */
    uint16_t *td;      /* [nn] depth */
    int32_t *tend;     /* [nn] one past the node's subtree */
    int32_t *ttok;     /* [nn + 1] tokens of node i: ids[ttok[i] .. ttok[i + 1]) */
    int32_t *ids;
    int max_depth;
};

#endif
