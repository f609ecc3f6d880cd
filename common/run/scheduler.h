/* scheduler.h — continuous batching over one engine (vLLM's scheduler, llama.cpp's server slots, in small).
 * Requests wait in a FIFO queue; one is admitted when it has a free sequence slot for each of its
 * choices; every engine step carries every running sequence (a new request's prefill rides beside the
 * running ones' decode rows, so it never waits for them to finish); the n choices of a request share one
 * prefill (the engine forks the cache into their slots); a request can be cancelled at any time, and its
 * slots are free by the next step. Each choice is a frigg_seqgen: its own sampler and random stream, so a
 * request's output is the same alone or beside any others. A score request (score = 1) generates nothing: its
 * prompt's prefill returns every row's logits, handed to on_logits (frigg-eval's nll runs this way).
 *
 * Threads: frigg_sched_submit, frigg_sched_cancel and frigg_sched_pending may be called from any thread
 * (a mutex guards the queue). frigg_sched_step and frigg_sched_free belong to one driver thread, the only
 * one that touches the engine; the callbacks run on it, with no lock held, and may call submit/cancel. */
#ifndef FRIGG_SCHEDULER_H
#define FRIGG_SCHEDULER_H

#include <stdint.h>

#include "engine/backend.h"
#include "seqgen.h"

#define FRIGG_SCHED_MAX_CHOICES 8

typedef struct frigg_sched frigg_sched;

/* The final result of a request: one seqgen result per choice (borrowed, valid during the callback), or an
 * error (error != NULL; then choices is NULL). A score request's one choice has no ids and finish_reason
 * "score" once on_logits was called ("cancelled" when it was cancelled before its step). */
typedef struct {
    uint64_t handle;
    const char *error;
    int n_choices;
    const frigg_seqgen_result *const *choices;
} frigg_sched_result;

typedef struct {
    const int32_t *ids;            /* the prompt (copied at submit) */
    int n;
    int prefix_len;                /* tokens [0, prefix_len) are the bidirectional prefix */
    int n_choices;                 /* 1..FRIGG_SCHED_MAX_CHOICES; choice i samples with seed + i */
    frigg_seqgen_params gen;
    /* Streaming: after every id a choice draws, the text it releases (n may be 0: held back by a stop string
     * or an unfinished UTF-8 sequence) and the choice's result so far (now: ids, logprobs of the ids drawn;
     * borrowed, valid during the call); may be NULL. */
    void (*on_text)(void *ctx, int choice, const char *piece, size_t n, const frigg_seqgen_result *now);
    /* The end: always called exactly once per submitted request (finished, failed or cancelled). */
    void (*on_done)(void *ctx, const frigg_sched_result *r);
    /* Score requests (score = 1): the prompt is prefilled wanting every row's logits (FRIGG_WANT_ALL_LOGITS)
     * and nothing is generated. on_logits (required for them, refused on other requests) receives the
     * n * vocab logits, row t predicting token t + 1, borrowed for the call, on the driver thread after the
     * step; on_done follows. The rule: n_choices must be 1 and gen all zero (as `{0}` leaves it: a score
     * has nothing to generate, so a parameter set is a mistake, refused at submit); on_text is never called.
     * Memory: the scheduler allocates the n * vocab floats when it admits the request and frees them after
     * on_logits, within one frigg_sched_step; at most max_running score requests run at once, so the
     * max_running the caller picks bounds it (at Mimir's vocabulary of 262,144, 1 MiB per prompt token). */
    int score;
    void (*on_logits)(void *ctx, const float *logits_all, int n, int vocab);
    void *ctx;
} frigg_sched_req;

/* max_running: sequences the scheduler runs at once (0 = all the engine can: min(max_seqs, max_rows)); more
 * than the engine can is an error (NULL with frigg_error()). tok may be NULL (no text, no stop strings). */
frigg_sched *frigg_sched_new(frigg_backend *b, const frigg_tokenizer *tok, int max_running);
/* Frees the scheduler; every request still queued or running ends as cancelled (on_done called). */
void frigg_sched_free(frigg_sched *s);
/* Prefill beside decode. 0 (the default): a prompt is prefilled whole in the step after its admission, so
 * the sequences decoding meanwhile wait for it (the most tokens per second). share > 0: each step's prefill
 * work is held to about share x the time of a decode step, as learnt from the steps so far; a prompt that
 * does not fit is prefilled a slice of its layers per step (frigg_row.prefill_layers; a PrefixLM prompt
 * cannot be split by tokens), so running sequences keep their time per token within about 1 + share of
 * what it is without arrivals, and long prompts take longer to their first token. */
void frigg_sched_set_prefill_share(frigg_sched *s, double share);
/* Prompt tokens one step prefills. 0 (the default): no limit, every admitted prompt that the prefill share
 * lets in runs in the same step. tokens > 0: prompts join a step, oldest first, while their tokens together
 * stay within the limit (the first always runs, a longer one alone); the others wait for a later step. A
 * step's rows are collected together, so without a limit a burst of prompts all reach their first token only
 * when the last of them is prefilled, and sequences admitted together stay in step for their whole lives;
 * with one, the first tokens of a burst arrive as its prompts are prefilled. With a limit, the prefill share
 * applies only to prompts longer than the limit; shorter ones run whole. */
void frigg_sched_set_prefill_tokens(frigg_sched *s, int tokens);

/* Queue a request; returns its handle (> 0), or 0 with frigg_error() when it can never run (prompt +
 * max_tokens beyond a sequence's context, more choices than slots, bad parameters, a score request that
 * breaks the rule above); on_done is then not called. A score request whose logits cannot be allocated
 * when it is admitted ends with an error (on_done). */
uint64_t frigg_sched_submit(frigg_sched *s, const frigg_sched_req *r);
/* Cancel a queued or running request: it ends as "cancelled" (on_done with what it had) at the start of
 * the next frigg_sched_step (or, when a step was queued ahead, at the end of it, after that step's ids), and
 * its slots are free for the step after. 0 (also for a request that already
 * ended: nothing happens), or -1 when the handle was never issued. */
int frigg_sched_cancel(frigg_sched *s, uint64_t handle);
/* One engine step over every running sequence, admitting what fits first. When the engine can hold two
 * steps (max_inflight >= 2) and every running row is a greedy decode row, with no cancellation asked for
 * and no queued request that would fit, the next step (the same rows, each taking the greedy id the step
 * produces) is queued before this one is collected, so the engine never waits for the host; a sequence
 * that ends then has one token decoded past its end, which is thrown away with its slot. A cancellation
 * asked for meanwhile stops the running ahead: the step already queued is collected (its ids delivered)
 * and the cancellation applied before this call returns. Returns the
 * number of requests still queued or running after it (0: idle), or -1 with frigg_error() when the engine
 * failed (every running request then ended with the error). */
int frigg_sched_step(frigg_sched *s);
/* Requests queued or running. */
int frigg_sched_pending(frigg_sched *s);
/* From any thread (metrics): requests waiting in the queue, requests running, and slots in use, as of the end
 * of the last step (a request submitted since counts as waiting). */
void frigg_sched_counts(frigg_sched *s, int *waiting, int *running, int *slots);
/* Sequence slots in use by running requests (driver thread only: for tests). */
int frigg_sched_slots_in_use(frigg_sched *s);
/* Driver thread, or after the last step: steps run, prompts prefilled whole in one step, prefill slices run
 * (the last slice of a sliced prompt, which finishes it, counted as one) and their layer steps, and the
 * learnt cost of a prompt token-layer in ms (0 while unknown). */
void frigg_sched_prefill_stats(frigg_sched *s, uint64_t *steps, uint64_t *whole, uint64_t *slices, uint64_t *slice_layers,
                               double *tl_ms);
/* Engine steps queued behind another one so far: greedy decoding two deep (see frigg_sched_step). */
uint64_t frigg_sched_steps_ahead(frigg_sched *s);

#endif
