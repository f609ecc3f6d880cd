/* oai.h — OpenAI's wire format, as frigg-serve speaks it: a /v1/chat/completions or /v1/completions body
 * parsed and validated into what the scheduler runs, and the response bodies and stream chunks built from
 * what it returns. Every field OpenAI documents is either implemented, accepted because it changes nothing
 * observable (user, metadata, store, service_tier, prompt_cache_key, prompt_cache_retention, safety_identifier,
 * verbosity, stream_options.include_obfuscation), or refused with a 400 naming it; null is absent for every
 * optional field; an unknown field is a 400 too, as OpenAI answers (inside a tool's function as well). No I/O and no threads: the server calls it, the tests and the fuzzer call it
 * directly. */
#ifndef FRIGG_OAI_H
#define FRIGG_OAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "seqgen.h"
#include "tokenizer/tokenizer.h"

#define FRIGG_OAI_MAX_N 8         /* choices per request (the scheduler's FRIGG_SCHED_MAX_CHOICES) */
#define FRIGG_OAI_MAX_PROMPTS 64  /* completions: prompts in one request */
#define FRIGG_OAI_MAX_TOP_LOGPROBS 20

/* An error in OpenAI's shape {"error":{"message","type","param","code"}} with its HTTP status. */
typedef struct {
    int status;          /* 400, 401, 404, 413, 429, 500, 503 */
    const char *type;    /* "invalid_request_error", "authentication_error", "not_found_error", ... */
    char param[64];      /* the offending field ("messages[2].content"), or "" */
    char code[48];       /* "context_length_exceeded", "model_not_found", ..., or "" */
    char message[512];
} frigg_oai_error;

void frigg_oai_error_set(frigg_oai_error *e, int status, const char *type, const char *param, const char *code,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The error's JSON body (a new reference). */
json_t *frigg_oai_error_json(const frigg_oai_error *e);

typedef enum { FRIGG_OAI_CHAT = 1, FRIGG_OAI_COMPLETION = 2 } frigg_oai_kind;

/* What a request is checked against (all borrowed). */
typedef struct {
    const char *model_name;      /* the served name: any other "model" is a 404 model_not_found */
    const frigg_tokenizer *tok;  /* NULL: prompts must be token ids, and no text comes back */
    const frigg_config *cfg;     /* vocabulary and the default stop ids */
    int max_ctx;                 /* tokens per sequence: prompt + max_tokens must fit */
    frigg_gcache *gcache;        /* structured output's grammars (gcache.h); NULL: response_format json_object and
                                    json_schema are a 400 */
} frigg_oai_env;

typedef struct {
    int32_t *ids;
    int n;
    int prefix_len;              /* tokens [0, prefix_len) are the bidirectional prefix */
} frigg_oai_prompt;

typedef struct {
    frigg_oai_kind kind;
    int stream, include_usage;
    int n;                       /* choices per prompt */
    int n_prompts;               /* completions: one entry per prompt; chat: 1 */
    frigg_oai_prompt *prompts;
    frigg_seqgen_params gen;     /* max_tokens, sampling, stop ids and strings, logprobs, parse_tools */
    int seed_given;
    int logprobs;                /* chat: "logprobs": true; completions: "logprobs": k given (k may be 0) */
    int top_logprobs;            /* alternatives per token: chat top_logprobs, completions logprobs k */
    int tools;                   /* tool calls are parsed out of the text (tools given, tool_choice not "none") */
    int parallel_tool_calls;     /* 0: only the first call is kept */
    char *forced;                /* text the answer is made to start with (tool_choice "required" or a named
                                    function): appended to the rendered prompt, prepended to the generated text */
    int forced_tokens;           /* its tokens, the last of every prompt's ids: in usage the answer's, not the
                                    prompt's (frigg_oai_usage_counts), and counted against max_tokens */
    /* response_format json_object / json_schema: gen.grammar holds the request's reference to the compiled grammar
     * (released by frigg_oai_req_free); the scheduler's seqgens take their own. */
} frigg_oai_req;

/* The grammar cache a server's env holds: tok's vocabulary as cfg sizes it, the model's default end ids allowed where a
 * grammar may end. NULL without a tokenizer, or with frigg_error() (frigg_gcache_new). Free it (frigg_gcache_free)
 * after every request is. */
frigg_gcache *frigg_oai_gcache_new(const frigg_tokenizer *tok, const frigg_config *cfg);

/* Parse and check one body (response_format compiled through env->gcache: a schema the compiler refuses is a 400
 * naming the keyword and where it is, param response_format). 0, or -1 with *err filled (the request is then empty: free it anyway). A string may
 * hold NUL bytes (\u0000): prompts and message text are tokenized with them, as HF tokenizers does; a string that
 * names something (model, role, name, tool_call_id, a part's type, a tool's or a call's name, id and type,
 * tool_choice, response_format.type) or a stop string holding one is a 400 naming the field. */
int frigg_oai_parse(frigg_oai_req *r, frigg_oai_kind kind, const char *body, size_t len, const frigg_oai_env *env,
                    frigg_oai_error *err);
void frigg_oai_req_free(frigg_oai_req *r);

/* The text a chat request prompts the model with: the messages checked as frigg_oai_parse checks them (roles, NUL
 * bytes, content parts joined, developer as system), normalized (frigg_chat_normalize_messages) and rendered with
 * tools (NULL or JSON null: none; checked as frigg_oai_parse checks them). Returns it malloc'd, *len bytes that may hold NUL bytes, or NULL with *err filled. */
char *frigg_oai_chat_prompt(const json_t *messages, const json_t *tools, int add_generation_prompt, size_t *len,
                            frigg_oai_error *err);

/* One finished choice, copied out of the scheduler's result (which is only valid during its callback). */
typedef struct {
    int32_t *ids;
    int n;
    char *text;                  /* the generated text (forced prefix not included) */
    size_t text_len;
    char finish_reason[16];      /* "stop", "length", "cancelled", "tool_calls" is decided by the builders */
    json_t *tool_calls;          /* the scheduler's parse (NULL: none); see frigg_oai_finish_tools */
    float *token_logprob;        /* [n] when logprobs */
    int32_t *top_ids;            /* [n][k] */
    float *top_lps;
    int k;
    int prompt_tokens;
    double first_token_ms, decode_ms, queue_ms, prefill_ms;
} frigg_oai_choice;

/* Copy a scheduler result into c (k: the request's gen.logprobs). */
void frigg_oai_choice_take(frigg_oai_choice *c, const frigg_seqgen_result *g, int k);
void frigg_oai_choice_free(frigg_oai_choice *c);

/* With tools: the calls and the content left around them, from the forced prefix + the text. *content (new
 * malloc'd string of *content_len bytes, NUL bytes of the text kept) and *calls (a new array, or NULL when none).
 * A text that looked like calls but did not parse is kept as content, except after a forced prefix: then the
 * content is empty and there are no calls (frigg_oai_choice_error says why). Without tools: the text, no calls. */
void frigg_oai_finish_tools(const frigg_oai_req *r, const frigg_oai_choice *c, char **content, size_t *content_len,
                            json_t **calls, const char *call_id_prefix);

/* 0, or -1 with *e filled when the choice cannot be answered: a forced call (tool_choice "required" or a named
 * function) whose forced start and generated text do not parse into whole calls, because the model ended its answer
 * or reached max_tokens inside the call. A 400 (code invalid_tool_call, param tool_choice) that the server sends in
 * place of the response, or as a stream's error event; tool-call markup is never returned as content. */
int frigg_oai_choice_error(const frigg_oai_req *r, const frigg_oai_choice *c, frigg_oai_error *e);

/* usage over choices[n_prompts * n]: the forced tokens count as completion tokens of each choice, not as prompt
 * tokens. */
void frigg_oai_usage_counts(const frigg_oai_req *r, const frigg_oai_choice *choices, int *prompt_tokens,
                            int *completion_tokens);

/* The whole non-streamed response: choices[n_prompts * n], index = prompt * n + j. */
json_t *frigg_oai_response(const frigg_oai_req *r, const frigg_oai_env *env, const char *id, long long created,
                           const char *model, const frigg_oai_choice *choices);

/* Streaming. One frigg_oai_stream per choice holds what has been sent. Each call returns the chunks to send
 * now as a JSON array (possibly empty; a new reference), in order. */
typedef struct {
    int index;
    int started;                 /* the role chunk went out */
    size_t sent;                 /* bytes of text sent as content */
    int tokens_sent;             /* logprob entries sent */
    char *text;                  /* everything received so far */
    size_t len, cap;
} frigg_oai_stream;

void frigg_oai_stream_init(frigg_oai_stream *s, int index);
void frigg_oai_stream_free(frigg_oai_stream *s);
/* New text of the choice (piece) and its result so far (its ids and logprobs), while it runs. */
json_t *frigg_oai_stream_text(frigg_oai_stream *s, const frigg_oai_req *r, const frigg_oai_env *env, const char *id,
                              long long created, const char *model, const char *piece, size_t n,
                              const frigg_seqgen_result *now);
/* The choice's end: the rest of its content, its tool calls, the finish chunk. */
json_t *frigg_oai_stream_finish(frigg_oai_stream *s, const frigg_oai_req *r, const frigg_oai_env *env, const char *id,
                                long long created, const char *model, const frigg_oai_choice *c,
                                const char *call_id_prefix);
/* The usage chunk (choices: []) after every choice finished: totals over the request. */
json_t *frigg_oai_usage_chunk(const frigg_oai_req *r, const char *id, long long created, const char *model,
                              int prompt_tokens, int completion_tokens);

/* Valid UTF-8 of bytes (each invalid sequence becomes U+FFFD), malloc'd, NUL-terminated; *out_len its length. */
char *frigg_oai_utf8_clean(const char *s, size_t n, size_t *out_len);

#endif
