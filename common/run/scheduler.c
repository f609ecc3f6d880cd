/* scheduler.c — see scheduler.h. */
#include "scheduler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

typedef struct req {
    uint64_t handle;
    frigg_sched_req r;
    int32_t *ids;
    frigg_seqgen *g[FRIGG_SCHED_MAX_CHOICES];
    int slot[FRIGG_SCHED_MAX_CHOICES];
    unsigned char finished[FRIGG_SCHED_MAX_CHOICES];
    int prefilled;
    int pf_done;                 /* layer steps of its prompt run so far, while it is prefilled by slices */
    float *logits;               /* score requests: the prefill's n * vocab logits, from admission to on_logits */
    int scored;                  /* score requests: on_logits was called */
    double t_queued, t_admit;
    struct req *next;
} req;

struct frigg_sched {
    frigg_backend *b;
    const frigg_tokenizer *tok;
    int max_running;             /* sequence slots this scheduler uses */
    pthread_mutex_t mu;          /* guards queue, cancels, next_handle, pending */
    req *queue, *queue_tail;     /* waiting, FIFO */
    uint64_t *cancels;
    int ncancel, capcancel;
    uint64_t next_handle;
    int pending;                 /* queued + running */
    int pub_running, pub_slots;  /* nrunning and slots_in_use as of the last step's end, for other threads */
    /* driver thread only: */
    req **running;
    int nrunning;
    unsigned char *slot_used;
    int slots_in_use;
    /* Two row buffers: the step queued on the engine, and the one queued behind it when greedy decoding runs
     * two deep (the engine's max_inflight >= 2). */
    frigg_row *rows[2];
    req **row_req[2];            /* the request and choice each row belongs to; NULL: its choice ended */
    int *row_choice[2];
    int32_t *gid[2];             /* GREEDY rows' ids */
    int nrows[2];
    int cur, queued;             /* buffer of the step queued on the engine; whether one is */
    /* Prefill beside decode (frigg_sched_set_prefill_share): the prompt prefilled a slice of layers per step, and
     * what a step costs, learnt from the time between collects: a decode step of each size (EMA, ms) and a
     * prefill token-layer (EMA, ms). Each step's prompts and slice are chosen to add at most prefill_share x the
     * decode step's time. */
    double prefill_share;
    int prefill_tokens;          /* frigg_sched_set_prefill_tokens: prompt tokens a step takes (0: no limit) */
    req *slicing;
    double t_prev, tl_ms;
    int tl_pure;                 /* tl_ms was learnt from a step of prefill rows alone */
    double *decode_ms;           /* [max_running + 1]: a decode step of that many rows, 0 while unknown */
    double step_tl[2];           /* prefill token-layers of the step in each row buffer */
    int step_decode[2];          /* decode rows of the step in each row buffer */
    req **order;                 /* [max_running]: build_rows's order of the running requests */
    int *defer, ndefer;          /* slots of ended choices still in the queued step, freed after its collect */
    uint64_t steps, ahead;       /* steps run; of them queued behind another (frigg_sched_steps_ahead) */
    uint64_t pf_whole, pf_slices, pf_slice_layers; /* frigg_sched_prefill_stats */
};

frigg_sched *frigg_sched_new(frigg_backend *b, const frigg_tokenizer *tok, int max_running) {
    int cap = b->max_seqs < b->max_rows ? b->max_seqs : b->max_rows; /* each running choice is at most one row */
    if (max_running < 0 || max_running > cap) {
        frigg_set_error("%d sequences at once: this %s engine runs at most %d (%d slots, %d rows per step)", max_running,
                        b->name, cap, b->max_seqs, b->max_rows);
        return NULL;
    }
    frigg_sched *s = frigg_xcalloc(1, sizeof *s);
    s->b = b;
    s->tok = tok;
    s->max_running = max_running ? max_running : cap;
    pthread_mutex_init(&s->mu, NULL);
    s->next_handle = 1;
    s->running = frigg_xcalloc((size_t)s->max_running, sizeof *s->running);
    s->slot_used = frigg_xcalloc((size_t)b->max_seqs, 1);
    for (int k = 0; k < 2; k++) {
        s->rows[k] = frigg_xcalloc((size_t)s->max_running, sizeof *s->rows[k]);
        s->row_req[k] = frigg_xcalloc((size_t)s->max_running, sizeof *s->row_req[k]);
        s->row_choice[k] = frigg_xcalloc((size_t)s->max_running, sizeof *s->row_choice[k]);
        s->gid[k] = frigg_xcalloc((size_t)s->max_running, sizeof *s->gid[k]);
    }
    s->defer = frigg_xcalloc((size_t)s->max_running, sizeof *s->defer);
    s->decode_ms = frigg_xcalloc((size_t)s->max_running + 1, sizeof *s->decode_ms);
    s->order = frigg_xcalloc((size_t)s->max_running, sizeof *s->order);
    return s;
}

static void req_free(req *q) {
    for (int c = 0; c < q->r.n_choices; c++) frigg_seqgen_free(q->g[c]);
    free(q->logits);
    free(q->ids);
    free(q);
}

/* The request's end: on_done, then it is gone. */
static void req_end(frigg_sched *s, req *q, const char *error) {
    if (s->slicing == q) s->slicing = NULL; /* the engine drops its part-way prompt when the slot is reused */
    const frigg_seqgen_result *res[FRIGG_SCHED_MAX_CHOICES];
    for (int c = 0; c < q->r.n_choices; c++) res[c] = q->g[c] ? frigg_seqgen_result_of(q->g[c]) : NULL;
    frigg_seqgen_result scored;
    if (q->scored && res[0]) { /* a score: no ids, its own finish reason */
        scored = *res[0];
        scored.finish_reason = "score";
        res[0] = &scored;
    }
    frigg_sched_result r = {.handle = q->handle, .error = error, .n_choices = error ? 0 : q->r.n_choices,
                            .choices = error ? NULL : res};
    if (q->r.on_done) q->r.on_done(q->r.ctx, &r);
    req_free(q);
    pthread_mutex_lock(&s->mu);
    s->pending--;
    pthread_mutex_unlock(&s->mu);
}

static void emit(req *q, int c, const char *piece, size_t n) {
    if (q->r.on_text) q->r.on_text(q->r.ctx, c, piece, n, frigg_seqgen_result_of(q->g[c]));
}

static void release_slot(frigg_sched *s, int slot) {
    s->b->seq_reset(s->b, slot);
    s->slot_used[slot] = 0;
    s->slots_in_use--;
}

/* A choice's end: its text flushed and streamed, its slot free — or, when the step queued on the engine
 * still carries its row, that row marked dead and the slot freed once that step is collected. */
static void choice_end(frigg_sched *s, req *q, int c, int cancelled) {
    if (q->finished[c]) return;
    const char *piece;
    size_t n;
    frigg_seqgen_finish(q->g[c], cancelled, &piece, &n);
    emit(q, c, piece, n);
    q->finished[c] = 1;
    if (q->slot[c] < 0) return;
    int held = 0;
    if (s->queued)
        for (int i = 0; i < s->nrows[s->cur]; i++)
            if (s->row_req[s->cur][i] == q && s->row_choice[s->cur][i] == c) {
                s->row_req[s->cur][i] = NULL;
                held = 1;
            }
    if (held) s->defer[s->ndefer++] = q->slot[c];
    else release_slot(s, q->slot[c]);
    q->slot[c] = -1;
}

/* A choice whose accept said done: it ends; when it failed (its row was not finite), so does every other choice
 * of the request, which then ends with that error. */
static void accepted_end(frigg_sched *s, req *q, int c) {
    if (!frigg_seqgen_error(q->g[c])) {
        choice_end(s, q, c, 0);
        return;
    }
    for (int j = 0; j < q->r.n_choices; j++) choice_end(s, q, j, 0);
}

static void release_deferred(frigg_sched *s) {
    for (int i = 0; i < s->ndefer; i++) release_slot(s, s->defer[i]);
    s->ndefer = 0;
}

static int all_finished(const req *q) {
    for (int c = 0; c < q->r.n_choices; c++)
        if (!q->finished[c]) return 0;
    return 1;
}

/* The error a choice of q ended with (frigg_seqgen_error: its logits were not finite), or NULL. */
static const char *req_error(const req *q) {
    for (int c = 0; c < q->r.n_choices; c++)
        if (q->g[c] && frigg_seqgen_error(q->g[c])) return frigg_seqgen_error(q->g[c]);
    return NULL;
}

static void remove_running(frigg_sched *s, int i) {
    s->running[i] = s->running[--s->nrunning];
}

/* A score request's generation parameters: all zero (scheduler.h). */
static int gen_is_zero(const frigg_seqgen_params *p) {
    const frigg_sampler_params *sp = &p->sampling;
    return p->max_tokens == 0 && p->n_stop_ids == 0 && p->n_stop == 0 && p->logprobs == 0 && !p->parse_tools &&
           sp->temperature == 0 && sp->top_k == 0 && sp->top_p == 0 && sp->repetition_penalty == 0 && sp->seed == 0 &&
           sp->frequency_penalty == 0 && sp->presence_penalty == 0 && sp->n_logit_bias == 0;
}

uint64_t frigg_sched_submit(frigg_sched *s, const frigg_sched_req *r) {
    int V = s->b->model->cfg.vocab_size;
    if (frigg_seqgen_check_prompt(s->b, r->ids, r->n, r->gen.max_tokens, r->prefix_len)) return 0;
    if (!r->score != !r->on_logits) {
        frigg_set_error(r->score ? "a score request needs on_logits" : "on_logits is for score requests only");
        return 0;
    }
    if (r->score && (r->n_choices != 1 || !gen_is_zero(&r->gen))) {
        frigg_set_error("a score request takes n = 1 choice and no generation parameters (n = %d, max_tokens %d)",
                        r->n_choices, r->gen.max_tokens);
        return 0;
    }
    if (r->n_choices < 1 || r->n_choices > FRIGG_SCHED_MAX_CHOICES || r->n_choices > s->max_running) {
        frigg_set_error("n = %d choices (1..%d here: %d sequence slots)", r->n_choices,
                        s->max_running < FRIGG_SCHED_MAX_CHOICES ? s->max_running : FRIGG_SCHED_MAX_CHOICES,
                        s->max_running);
        return 0;
    }
    req *q = frigg_xcalloc(1, sizeof *q);
    q->r = *r;
    q->ids = frigg_xmalloc(sizeof(int32_t) * (size_t)r->n);
    memcpy(q->ids, r->ids, sizeof(int32_t) * (size_t)r->n);
    q->r.ids = q->ids;
    for (int c = 0; c < r->n_choices; c++) {
        frigg_seqgen_params gp = r->gen;
        gp.sampling.seed += (uint64_t)c; /* each choice its own stream, reproducible from the seed */
        q->g[c] = frigg_seqgen_new(&gp, r->n, V, s->tok);
        q->slot[c] = -1;
        if (!q->g[c]) {
            req_free(q);
            return 0;
        }
    }
    q->t_queued = frigg_now_ms();
    pthread_mutex_lock(&s->mu);
    q->handle = s->next_handle++;
    if (s->queue_tail) s->queue_tail->next = q;
    else s->queue = q;
    s->queue_tail = q;
    s->pending++;
    uint64_t h = q->handle;
    pthread_mutex_unlock(&s->mu);
    return h;
}

int frigg_sched_cancel(frigg_sched *s, uint64_t handle) {
    pthread_mutex_lock(&s->mu);
    int known = handle > 0 && handle < s->next_handle;
    if (known) {
        if (s->ncancel == s->capcancel) {
            s->capcancel = s->capcancel ? 2 * s->capcancel : 16;
            s->cancels = realloc(s->cancels, sizeof *s->cancels * (size_t)s->capcancel);
            if (!s->cancels) abort();
        }
        s->cancels[s->ncancel++] = handle;
    }
    pthread_mutex_unlock(&s->mu);
    if (!known) frigg_set_error("cancel: no request %llu", (unsigned long long)handle);
    return known ? 0 : -1;
}

int frigg_sched_pending(frigg_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->pending;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int frigg_sched_slots_in_use(frigg_sched *s) { return s->slots_in_use; }

/* Cancellations asked for since the last step: a queued request leaves the queue, a running one its
 * slots; both end as "cancelled". A handle that already ended is ignored. */
static void apply_cancels(frigg_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->ncancel;
    uint64_t *h = n ? frigg_xmalloc(sizeof *h * (size_t)n) : NULL;
    if (n) memcpy(h, s->cancels, sizeof *h * (size_t)n);
    s->ncancel = 0;
    req *gone = NULL;
    for (int i = 0; i < n; i++) {
        req **pp = &s->queue, *prev = NULL;
        while (*pp && (*pp)->handle != h[i]) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            req *q = *pp;
            *pp = q->next;
            if (s->queue_tail == q) s->queue_tail = prev;
            q->next = gone;
            gone = q;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (gone) {
        req *q = gone;
        gone = q->next;
        for (int c = 0; c < q->r.n_choices; c++) choice_end(s, q, c, 1);
        req_end(s, q, NULL);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->nrunning; j++)
            if (s->running[j]->handle == h[i]) {
                req *q = s->running[j];
                for (int c = 0; c < q->r.n_choices; c++) choice_end(s, q, c, 1);
                remove_running(s, j);
                req_end(s, q, NULL);
                break;
            }
    free(h);
}

/* Admit queued requests, first come first served, while the head has a free slot for each choice. */
static void admit(frigg_sched *s) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        req *q = s->queue;
        int fits = q && s->max_running - s->slots_in_use >= q->r.n_choices;
        if (fits) {
            s->queue = q->next;
            if (!s->queue) s->queue_tail = NULL;
            q->next = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        if (!fits) return;
        if (q->r.score) { /* its logits, freed after on_logits (this step) */
            int V = s->b->model->cfg.vocab_size;
            q->logits = malloc(sizeof(float) * (size_t)q->r.n * (size_t)V);
            if (!q->logits) {
                char msg[128];
                snprintf(msg, sizeof msg, "out of memory for the %d x %d logits of a score request", q->r.n, V);
                choice_end(s, q, 0, 0);
                req_end(s, q, msg);
                continue;
            }
        }
        for (int c = 0, slot = 0; c < q->r.n_choices; c++) {
            while (s->slot_used[slot]) slot++;
            s->slot_used[slot] = 1;
            s->slots_in_use++;
            q->slot[c] = slot;
        }
        q->t_admit = frigg_now_ms();
        s->running[s->nrunning++] = q;
    }
}

/* How many layer steps of q's prompt the next step runs: 0 = the rest at once, -1 = none this step. Without
 * a prefill share, with no decode rows to protect, or (with a token limit) for a prompt within the limit that
 * has not begun by slices, the prompt runs whole: the prompts that freeze running streams are the long ones
 * (114 ms for 4,096 tokens), while under the share 64 streams of 512-token prompts, none of which fits a share
 * of a decode step, all queued through the one part-way prompt and waited up to 6 s for their first token
 * (TTFT p95 5,955 ms against 182 ms with share 0; benchmarks/h200-2026-12-03/load64/). Otherwise prompts run whole
 * while their estimated cost fits the budget (prefill_share x a decode step), and one prompt, the part-way
 * one first, takes a slice of what is left (at least one layer step, so every prompt moves). */
static int plan_prefill(frigg_sched *s, const req *q, int decode_rows, double *budget, int *partial) {
    const frigg_config *c = &s->b->model->cfg;
    int total = frigg_num_runs(c) * c->layers_per_stack, rest = total - q->pf_done;
    if (s->prefill_share <= 0 || !decode_rows) return 0;
    if (s->prefill_tokens > 0 && q->r.n <= s->prefill_tokens && !q->pf_done) return 0;
    if (!s->decode_ms[decode_rows]) return -1; /* this step learns what a decode step of this size costs */
    double per_layer = s->tl_ms * q->r.n; /* ms per layer step of this prompt, 0 while unknown */
    if (per_layer > 0 && per_layer * rest <= *budget) {
        *budget -= per_layer * rest;
        return 0;
    }
    if (*partial) return -1;
    *partial = 1;
    int n = per_layer > 0 ? (int)(*budget / per_layer) : 1;
    *budget = 0;
    return n < 1 ? 1 : n >= rest ? 0 : n;
}

/* The rows of the next step into buffer k: a prefill (or a slice of one, plan_prefill) for each request
 * admitted and not yet prefilled, a decode row for every running choice that is not finished. */
static int build_rows(frigg_sched *s, int k) {
    int nrows = 0, decode_rows = 0, partial = 0, pf_rows = 0, pf_tokens = 0;
    for (int i = 0; i < s->nrunning; i++)
        if (s->running[i]->prefilled)
            for (int c = 0; c < s->running[i]->r.n_choices; c++) decode_rows += !s->running[i]->finished[c];
    double budget = s->prefill_share * s->decode_ms[decode_rows];
    const frigg_config *cfg = &s->b->model->cfg;
    int total = frigg_num_runs(cfg) * cfg->layers_per_stack;
    s->step_tl[k] = 0;
    s->step_decode[k] = decode_rows;
    /* The part-way prompt first: it takes the slice; then the other prompts oldest first (each runs whole
     * if it fits, else the first of them takes the slice when there is none, else it waits), so a prompt
     * is not passed over by later ones; then the decode rows. */
    req **order = s->order;
    int no = 0, nwait = 0;
    if (s->slicing) order[no++] = s->slicing;
    for (int i = 0; i < s->nrunning; i++)
        if (!s->running[i]->prefilled && s->running[i] != s->slicing) {
            req *q = s->running[i];
            int j = no + nwait++;
            while (j > no && order[j - 1]->t_admit > q->t_admit) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = q;
        }
    no += nwait;
    for (int i = 0; i < s->nrunning; i++)
        if (s->running[i]->prefilled) order[no++] = s->running[i];
    for (int i = 0; i < no; i++) {
        req *q = order[i];
        int layers = 0;
        if (!q->prefilled) {
            if (q->finished[0]) continue;
            /* the token limit: the first prompt of a step always runs (a longer prompt alone); later ones
             * wait for a step they fit, oldest first */
            if (s->prefill_tokens > 0 && pf_rows > 0 && pf_tokens + q->r.n > s->prefill_tokens) continue;
            layers = plan_prefill(s, q, decode_rows, &budget, &partial);
            if (layers < 0) continue;
            pf_rows++;
            pf_tokens += q->r.n;
            if (layers || q->pf_done) {
                s->pf_slices++;
                s->pf_slice_layers += (uint64_t)(layers ? layers : total - q->pf_done);
            } else
                s->pf_whole++;
            s->step_tl[k] += (double)q->r.n * (layers ? layers : total - q->pf_done);
        }
        for (int c = 0; c < (q->prefilled ? q->r.n_choices : 1); c++) {
            if (q->finished[c]) continue;
            frigg_row *r = &s->rows[k][nrows];
            memset(r, 0, sizeof *r);
            r->seq = q->slot[c];
            if (!q->prefilled) {
                r->prefill = 1;
                r->ids = q->ids;
                r->n = q->r.n;
                r->prefix_len = q->r.prefix_len;
                r->prefill_layers = layers;
            } else {
                r->n = 1;
                r->token = frigg_seqgen_last(q->g[c]);
            }
            frigg_seqgen_row(q->g[c], r); /* after prefill is set: a masked sequence's prefill row wants its logits */
            r->out_id = &s->gid[k][nrows];
            if (q->r.score) {
                r->want = FRIGG_WANT_ALL_LOGITS;
                r->out_logits = q->logits;
                r->mask = NULL;
            }
            s->row_req[k][nrows] = q;
            s->row_choice[k][nrows++] = c;
        }
    }
    return nrows;
}

/* What the step just collected (row buffer k) says about costs: a step without prefill rows is a decode
 * step; one with prefill rows costs its decode step plus its token-layers. */
static void learn_costs(frigg_sched *s, int k, double now) {
    double dt = s->t_prev > 0 ? now - s->t_prev : 0;
    s->t_prev = now;
    if (dt <= 0) return;
    double *d = &s->decode_ms[s->step_decode[k]];
    if (!s->step_tl[k]) {
        if (s->step_decode[k]) *d = *d > 0 ? 0.8 * *d + 0.2 * dt : dt;
        return;
    }
    double pf = dt - *d;
    if (pf <= 0) return;
    double tl = pf / s->step_tl[k];
    /* A step with decode rows beside its prefill also pays for what the prefill row costs the decode rows
     * (no step queued ahead, a round trip to the host), which a small slice would charge to its few
     * token-layers, shrinking the next slice in turn: once a step of prefill alone was seen, only such steps
     * teach the cost. */
    if (s->step_decode[k] && s->tl_pure) return;
    if (!s->step_decode[k] && !s->tl_pure) {
        s->tl_pure = 1;
        s->tl_ms = tl;
        return;
    }
    s->tl_ms = s->tl_ms > 0 ? 0.7 * s->tl_ms + 0.3 * tl : tl;
}

/* Greedy and engine-sampled decoding run two deep when the engine can: every row of the queued step is a decode
 * row that wants the greedy id or the engine's draw (FRIGG_WANT_SAMPLE) without a mask, and nothing would change the
 * next step's rows (no cancellation asked for, no queued request that would be admitted). The next step is then the
 * same rows, each taking the id the queued step will produce (FRIGG_TOKEN_LAST_GREEDY), queued before that id
 * reaches the host; a sampled row takes its sequence's next uniform (frigg_seqgen_row_ahead). */
static int can_run_ahead(frigg_sched *s) {
    int k = s->cur;
    if (s->b->max_inflight < 2 || !s->nrows[k]) return 0;
    for (int i = 0; i < s->nrows[k]; i++)
        if (s->rows[k][i].prefill ||
            (s->rows[k][i].want != FRIGG_WANT_GREEDY && s->rows[k][i].want != FRIGG_WANT_SAMPLE) || !s->row_req[k][i] ||
            s->rows[k][i].mask || /* the next mask needs this step's id on the host */
            frigg_seqgen_lazy_waiting(s->row_req[k][i]->g[s->row_choice[k][i]]))
            return 0;
    pthread_mutex_lock(&s->mu);
    int calm = s->ncancel == 0 && !(s->queue && s->max_running - s->slots_in_use >= s->queue->r.n_choices);
    pthread_mutex_unlock(&s->mu);
    return calm;
}

/* The engine failed: every running request ends with the error. */
static int fail_all(frigg_sched *s) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", frigg_error());
    s->queued = 0;
    release_deferred(s);
    for (int i = s->nrunning - 1; i >= 0; i--) {
        req *q = s->running[i];
        for (int c = 0; c < q->r.n_choices; c++) choice_end(s, q, c, 0);
        remove_running(s, i);
        req_end(s, q, msg);
    }
    frigg_set_error("%s", msg);
    return -1;
}

static int sched_step(frigg_sched *s);
int frigg_sched_step(frigg_sched *s) {
    int rc = sched_step(s);
    pthread_mutex_lock(&s->mu);
    s->pub_running = s->nrunning;
    s->pub_slots = s->slots_in_use;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void frigg_sched_counts(frigg_sched *s, int *waiting, int *running, int *slots) {
    pthread_mutex_lock(&s->mu);
    int r = s->pub_running < s->pending ? s->pub_running : s->pending;
    *waiting = s->pending - r;
    *running = r;
    *slots = s->pub_slots;
    pthread_mutex_unlock(&s->mu);
}

static int sched_step(frigg_sched *s) {
    frigg_backend *b = s->b;
    if (!s->queued) {
        apply_cancels(s);
        admit(s);
        s->nrows[s->cur] = build_rows(s, s->cur);
        if (!s->nrows[s->cur]) {
            s->t_prev = 0; /* idle: the next interval between collects is not a step's cost */
            return frigg_sched_pending(s);
        }
        if (b->submit(b, s->rows[s->cur], s->nrows[s->cur])) return fail_all(s);
        /* Out of idle, the step's cost runs from now: the first step of a burst, prefill alone, is the one that
         * teaches learn_costs what a token-layer costs (tl_pure). Skipping it left the cost to be learnt from
         * steps beside decode rows, whose small slices overcharge it, so that slices shrink in turn (the spiral
         * learn_costs describes; benchmarks/h200-2026-12-03/tcq/: 64 streams of 512-token prompts, which never
         * see a step of prefill alone after the first, had a TTFT p99 of 12.2 s). */
        if (!s->t_prev) s->t_prev = frigg_now_ms();
        s->queued = 1;
    }
    int k = s->cur, ahead = can_run_ahead(s);
    if (ahead) {
        int n = s->nrows[k], nx = k ^ 1;
        for (int i = 0; i < n; i++) {
            s->rows[nx][i] = (frigg_row){.seq = s->rows[k][i].seq, .n = 1, .token = FRIGG_TOKEN_LAST_GREEDY,
                                         .want = s->rows[k][i].want, .out_id = &s->gid[nx][i]};
            s->row_req[nx][i] = s->row_req[k][i];
            s->row_choice[nx][i] = s->row_choice[k][i];
            frigg_seqgen_row_ahead(s->row_req[k][i]->g[s->row_choice[k][i]], &s->rows[nx][i]);
        }
        s->nrows[nx] = n;
        s->step_tl[nx] = 0;
        s->step_decode[nx] = n;
        if (b->submit(b, s->rows[nx], n)) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", frigg_error());
            b->collect(b);
            frigg_set_error("%s", msg);
            return fail_all(s);
        }
        s->ahead++;
    }
    s->steps++;
    if (b->collect(b)) {
        if (ahead) b->collect(b);
        return fail_all(s);
    }
    release_deferred(s); /* the slots of choices that ended before this step: it no longer holds them */
    /* From here on, choice_end marks rows of the step queued behind (buffer cur after the switch). */
    s->cur = ahead ? k ^ 1 : k;
    s->queued = ahead;
    double now = frigg_now_ms();
    learn_costs(s, k, now);
    for (int i = 0; i < s->nrows[k]; i++) {
        req *q = s->row_req[k][i];
        if (!q) continue; /* its choice ended while this step was queued */
        const frigg_row *r = &s->rows[k][i];
        const char *piece;
        size_t n;
        if (r->prefill && r->pending) { /* a slice of its layers ran: the next step continues it */
            q->pf_done += r->prefill_layers;
            s->slicing = q;
            continue;
        }
        if (r->prefill) {
            q->prefilled = 1;
            if (s->slicing == q) s->slicing = NULL;
            if (q->r.score) {
                q->r.on_logits(q->r.ctx, q->logits, q->r.n, b->model->cfg.vocab_size);
                q->scored = 1;
                free(q->logits);
                q->logits = NULL;
            }
            /* The other choices share this prefill: the cache forked into their slots, the row's output
             * copied into their seqgens. */
            for (int c = 1; c < q->r.n_choices; c++) {
                if (b->seq_fork(b, q->slot[0], q->slot[c], q->r.n)) {
                    char msg[1024];
                    snprintf(msg, sizeof msg, "%s", frigg_error());
                    for (int j = 0; j < q->r.n_choices; j++) choice_end(s, q, j, 0);
                    for (int j = 0; j < s->nrunning; j++)
                        if (s->running[j] == q) remove_running(s, j);
                    req_end(s, q, msg);
                    goto next_row;
                }
            }
            for (int c = 0; c < q->r.n_choices; c++) {
                frigg_row rc = *r;
                if (c > 0) { /* its own copy of the output (a penalty changes logits in place) */
                    frigg_seqgen_take_output(q->g[c], q->g[0]);
                    frigg_seqgen_row(q->g[c], &rc);
                    rc.out_id = r->out_id;
                    rc.prefill = 1;
                }
                frigg_seqgen_mark(q->g[c], q->t_queued, q->t_admit, now);
                int done = frigg_seqgen_accept(q->g[c], &rc, &piece, &n);
                emit(q, c, piece, n);
                if (done) accepted_end(s, q, c);
            }
        } else {
            int c = s->row_choice[k][i];
            int done = frigg_seqgen_accept(q->g[c], r, &piece, &n);
            emit(q, c, piece, n);
            if (done) accepted_end(s, q, c);
        }
    next_row:;
    }
    for (int i = s->nrunning - 1; i >= 0; i--)
        if (all_finished(s->running[i])) {
            req *q = s->running[i];
            remove_running(s, i);
            req_end(s, q, req_error(q));
        }
    if (s->queued) { /* a step queued ahead whose every sequence ended: retire it, free their slots */
        int live = 0;
        for (int i = 0; i < s->nrows[s->cur]; i++) live |= s->row_req[s->cur][i] != NULL;
        if (!live) {
            s->queued = 0;
            if (b->collect(b)) return fail_all(s);
            release_deferred(s);
        }
    }
    if (!s->queued) apply_cancels(s); /* a cancellation that waited for the step queued ahead: now */
    return frigg_sched_pending(s);
}

uint64_t frigg_sched_steps_ahead(frigg_sched *s) { return s->ahead; }

void frigg_sched_set_prefill_share(frigg_sched *s, double share) { s->prefill_share = share > 0 ? share : 0; }
void frigg_sched_set_prefill_tokens(frigg_sched *s, int tokens) { s->prefill_tokens = tokens > 0 ? tokens : 0; }
void frigg_sched_prefill_stats(frigg_sched *s, uint64_t *steps, uint64_t *whole, uint64_t *slices, uint64_t *slice_layers,
                               double *tl_ms) {
    *steps = s->steps;
    *whole = s->pf_whole;
    *slices = s->pf_slices;
    *slice_layers = s->pf_slice_layers;
    *tl_ms = s->tl_ms;
}

void frigg_sched_free(frigg_sched *s) {
    if (!s) return;
    if (s->queued) s->b->collect(s->b); /* its outputs are of no one now */
    s->queued = 0;
    release_deferred(s);
    while (s->nrunning) {
        req *q = s->running[s->nrunning - 1];
        for (int c = 0; c < q->r.n_choices; c++) choice_end(s, q, c, 1);
        s->nrunning--;
        req_end(s, q, NULL);
    }
    while (s->queue) {
        req *q = s->queue;
        s->queue = q->next;
        for (int c = 0; c < q->r.n_choices; c++) choice_end(s, q, c, 1);
        req_end(s, q, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->cancels);
    free(s->running);
    free(s->slot_used);
    for (int k = 0; k < 2; k++) {
        free(s->rows[k]);
        free(s->row_req[k]);
        free(s->row_choice[k]);
        free(s->gid[k]);
    }
    free(s->defer);
    free(s->decode_ms);
    free(s->order);
    free(s);
}
