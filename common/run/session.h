/* session.h — a loaded model + backend (+ tokenizer) that turns request objects into response objects.
 * frigg-run feeds it JSON lines; frigg-serve will feed it HTTP bodies. */
#ifndef FRIGG_SESSION_H
#define FRIGG_SESSION_H

#include <jansson.h>

#include "model/model.h" /* frigg_dtype */

typedef struct {
    const char *model_dir;      /* NULL: frigg_default_model_dir() */
    const char *backend;        /* NULL: auto */
    int threads, device;
    int default_max_tokens;
    int hf_regex;
    int tokenizer_only;         /* --tokenize / --detokenize: do not load weights */
    int slots;                  /* sequence slots: requests run at once (0 = FRIGG_SESSION_DEFAULT_SLOTS) */
    int ctx;                    /* tokens per sequence (0 = the model's max_position_embeddings) */
    int batch_invariant;        /* frigg_backend_opts.batch_invariant */
    frigg_dtype kv_dtype;       /* frigg_backend_opts.kv_dtype (0: bf16) */
    int dequant_rows;           /* frigg_backend_opts.dequant_rows (0: the default) */
    double prefill_share;       /* frigg_sched_set_prefill_share (0: whole prompts) */
    int prefill_tokens;         /* frigg_sched_set_prefill_tokens (0: no limit) */
    const char *mem_lower;      /* the options to lower when the engine does not fit in memory (run/memcheck.h),
                                   named in the error; NULL: "the slots or the context" */
} frigg_session_opts;

#define FRIGG_SESSION_DEFAULT_SLOTS 8

typedef struct frigg_session frigg_session;

frigg_session *frigg_session_open(const frigg_session_opts *o);
void frigg_session_close(frigg_session *s);
/* The response to one request: a new object, a response or {"error":{"message":...}} (with "id" when the
 * request had one), handed to cb, which owns it. */
typedef void (*frigg_session_cb)(void *ctx, json_t *resp);
/* mode 0: generate; 'T': tokenize; 'D': detokenize. Tokenize, detokenize and every error answer at once
 * (cb before this returns); a generation request is queued on the session's scheduler and answered by a
 * later frigg_session_step. One thread drives a session. */
void frigg_session_submit(frigg_session *s, const json_t *req, int mode, frigg_session_cb cb, void *ctx);
/* One engine step over every queued or running request (scheduler.h): the requests still pending after it,
 * or -1 with frigg_error() when the engine failed (the requests of that step were answered with the error). */
int frigg_session_step(frigg_session *s);
int frigg_session_pending(frigg_session *s);
/* submit, then step until this request is answered (others queued meanwhile are stepped too). */
json_t *frigg_session_handle(frigg_session *s, const json_t *req, int mode);

#endif
