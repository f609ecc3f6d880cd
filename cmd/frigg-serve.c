/* frigg-serve — an OpenAI-compatible HTTP server (libmicrohttpd) over the core's scheduler: /v1/chat/completions,
 * /v1/completions (streamed as OpenAI streams, or not), /v1/models, /health, /metrics (Prometheus text),
 * /tokenize, /detokenize. One engine and scheduler per replica (a GPU of --devices, or a CPU engine of
 * --replicas), each driven by its own thread; a request goes to the least-loaded replica. The wire format
 * is common/run/oai.c's; this file is HTTP, threads, cancellation, limits and metrics.
 *
 * Threads: libmicrohttpd runs --http-threads event loops over epoll (so thousands of idle connections cost no
 * thread each and no select() set limit applies). A connection's loop parses the body, submits to a replica's
 * scheduler (thread-safe) and then suspends the connection (MHD_suspend_connection) instead of blocking the loop:
 * the replica's driver thread steps the scheduler, its callbacks fill the job (under the job's mutex) and resume
 * the connection, whose loop then sends the whole response or the stream's next bytes. A housekeeping thread
 * watches the sockets of suspended connections (libmicrohttpd does not): a client that hangs up cancels its job,
 * and the scheduler frees the slots by the next step. It also closes connections that sent no request headers
 * within --header-timeout-s and prints the transport's summaries (refused connections) at most every 10 s. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/backend.h"
#include "run/cli.h"
#include "model/model.h"
#include "run/oai.h"
#include "run/scheduler.h"
#include "base/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"
#ifdef FRIGG_CUDA
#include "engine/cuda_backend.h"
#endif

#define MAX_REPLICAS 16

/* ---------------------------------------------------------------- metrics */

/* A Prometheus histogram with fixed bucket bounds (seconds). */
#define NBUCKETS 14
static const double bucket_le[NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
typedef struct {
    uint64_t counts[NBUCKETS + 1]; /* the last: +Inf */
    double sum;
    uint64_t n;
} histogram;

static void hist_add(histogram *h, double v) {
    int i = 0;
    while (i < NBUCKETS && v > bucket_le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->n++;
}

typedef struct {
    histogram ttft, tpot, e2e, queue;
    uint64_t prompt_tokens, generation_tokens;
    uint64_t finish[4]; /* stop, length, tool_calls, cancelled */
} replica_metrics;

static const char *const finish_names[4] = {"stop", "length", "tool_calls", "cancelled"};

/* ---------------------------------------------------------------- replicas */

typedef struct replica {
    int index;
    char label[32];            /* "cuda:0", "cpu:1" */
    frigg_backend *b;
    frigg_sched *sched;
    pthread_t thread;
    pthread_mutex_t mu;        /* wakes the driver */
    pthread_cond_t cv;
    int stop;
    atomic_int load;           /* jobs submitted and not ended: the least-loaded choice */
    replica_metrics m;         /* under the server's metrics mutex */
} replica;

/* A TCP connection from its accept to its close (libmicrohttpd's socket context): while its first request's
 * headers are not in, it sits on the server's list of unheard connections, oldest first, so that the
 * housekeeping thread can close it at its header deadline. */
typedef struct peer {
    int fd;
    double deadline_ms;        /* frigg_now_ms() by which the first request's headers must be in */
    int listed;                /* on the unheard list */
    struct peer *prev, *next;
} peer;

/* The HTTP transport's options and shared state. */
typedef struct {
    const char *cors_origin;   /* --cors-origin: Access-Control-Allow-Origin on every response; NULL: no CORS */
    double header_timeout_s;   /* --header-timeout-s: accept to the first request's headers */
    unsigned idle_timeout_s;   /* --timeout-s: inactivity once a request was read (whole seconds) */
    unsigned max_conns, max_conns_per_ip, threads;
    int verbose;               /* --verbose: print the connection-level messages of libmicrohttpd too */
    pthread_mutex_t mu;        /* guards sleepers (taken after a job's mutex where both are) */
    struct job *sleepers;      /* jobs whose connection is suspended, waiting for the driver */
    pthread_mutex_t peers_mu;  /* guards the unheard list */
    peer *unheard, *unheard_tail;
    int watch_fd;              /* epoll: hang-ups of the sleepers' sockets */
    pthread_t housekeeper;
    int housekeeper_up;
    atomic_int stop;
    atomic_uint_fast64_t serial; /* names a sleeping job in watch_fd's events */
    atomic_int open_conns;
    atomic_uint_fast64_t refused, header_timeouts; /* totals, for /metrics */
    atomic_uint_fast64_t refused_unreported, timeouts_unreported, log_dropped; /* since the last summary */
    atomic_int log_lines;      /* libmicrohttpd lines printed in the current 10 s window */
} http_state;

typedef struct server {
    char *dir;
    char *model_name;
    frigg_model *model;
    frigg_tokenizer *tok;
    frigg_oai_env env;
    replica rep[MAX_REPLICAS];
    int nrep;
    int slots, ctx;
    int max_queue;             /* jobs waiting + running over all replicas before 429 */
    size_t max_body;
    char *api_key;
    atomic_int ready;          /* weights loaded, engines up */
    atomic_int stopping;       /* SIGTERM/SIGINT: 503 for new requests */
    atomic_int responding;     /* generation requests whose response is not yet sent in full (see on_completed) */
    pthread_mutex_t metrics_mu;
    struct { int code; uint64_t n; } statuses[32];
    int nstatuses;
    int threads_out; /* the HTTP daemon, or driver threads, may still use the server: main must not free it */
    http_state http;
} server;

static void count_status(server *s, int code) {
    pthread_mutex_lock(&s->metrics_mu);
    int i = 0;
    while (i < s->nstatuses && s->statuses[i].code != code) i++;
    if (i == s->nstatuses && s->nstatuses < 32) s->statuses[s->nstatuses++].code = code;
    if (i < 32) s->statuses[i].n++;
    pthread_mutex_unlock(&s->metrics_mu);
}

static void *driver(void *arg) {
    replica *r = arg;
#ifdef FRIGG_CUDA
    /* every CUDA call of this engine runs on this thread; the engine sets its device per call */
#endif
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->stop && frigg_sched_pending(r->sched) == 0) pthread_cond_wait(&r->cv, &r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop && frigg_sched_pending(r->sched) == 0) break;
        if (frigg_sched_step(r->sched) < 0) fprintf(stderr, "frigg-serve: %s: engine step failed: %s\n", r->label, frigg_error());
    }
    return NULL;
}

static void wake(replica *r) {
    pthread_mutex_lock(&r->mu);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* ---------------------------------------------------------------- jobs */

/* One generation request between its submit and its response. Two owners: the connection and the
 * scheduler (one reference per submitted prompt); freed by the last. */
typedef struct job {
    pthread_mutex_t mu;
    atomic_int refs;            /* atomic: the housekeeping thread takes one without the job's mutex */
    server *srv;
    replica *rep;
    frigg_oai_req req;
    char id[48];
    long long created;
    double t_arrival;
    uint64_t handles[FRIGG_OAI_MAX_PROMPTS];
    int nsub, subs_done;
    frigg_oai_choice *choices;  /* [n_prompts * n] */
    frigg_oai_stream *streams;  /* [n_prompts * n] when streaming */
    frigg_oai_error err;        /* why the job failed: the engine (500), or a choice it cannot answer (400) */
    int failed, finished, cancelled;
    frigg_strbuf out;           /* SSE bytes ready to send */
    size_t out_sent;
    /* The connection waiting on the job: suspended while asleep (under the server's http.mu), resumed by
     * job_wake when the driver produced something; valid while asleep, when libmicrohttpd cannot close it. */
    struct MHD_Connection *conn;
    int fd;
    int asleep;
    uint64_t serial;
    struct job *sleep_prev, *sleep_next;
} job;

typedef struct {
    job *j;
    int prompt;                 /* which prompt of the request this scheduler request is */
} sub;

static void job_unref(job *j) {
    if (atomic_fetch_sub(&j->refs, 1) != 1) return;
    int nc = j->req.n_prompts * j->req.n;
    for (int i = 0; i < nc; i++) {
        frigg_oai_choice_free(&j->choices[i]);
        if (j->streams) frigg_oai_stream_free(&j->streams[i]);
    }
    free(j->choices);
    free(j->streams);
    frigg_oai_req_free(&j->req);
    frigg_sb_free(&j->out);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* Suspend the connection waiting on j until job_wake (j->mu held, so that no wake of the driver's is lost between
 * the waiter's look at the job and its sleep). Its socket joins the housekeeper's watch (one-shot: a hang-up is
 * reported once per sleep), since libmicrohttpd does not notice a client that hangs up on a suspended
 * connection. */
static void job_sleep(job *j) {
    http_state *h = &j->srv->http;
    pthread_mutex_lock(&h->mu);
    j->asleep = 1;
    j->serial = atomic_fetch_add(&h->serial, 1) + 1;
    j->sleep_prev = NULL;
    j->sleep_next = h->sleepers;
    if (h->sleepers) h->sleepers->sleep_prev = j;
    h->sleepers = j;
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = j->serial};
    /* a socket that cannot be watched (no memory for epoll's entry) still wakes with the job: its hang-up is
     * then found by the next write */
    if (j->fd >= 0) (void)epoll_ctl(h->watch_fd, EPOLL_CTL_ADD, j->fd, &ev);
    MHD_suspend_connection(j->conn);
    pthread_mutex_unlock(&h->mu);
}

/* Resume the connection if it sleeps on j (j->mu held): the driver produced bytes, or the job ended. The watch
 * ends first, while the socket is still the connection's (libmicrohttpd may close it once resumed). */
static void job_wake(job *j) {
    http_state *h = &j->srv->http;
    pthread_mutex_lock(&h->mu);
    if (j->asleep) {
        j->asleep = 0;
        if (j->sleep_prev) j->sleep_prev->sleep_next = j->sleep_next;
        else h->sleepers = j->sleep_next;
        if (j->sleep_next) j->sleep_next->sleep_prev = j->sleep_prev;
        if (j->fd >= 0) (void)epoll_ctl(h->watch_fd, EPOLL_CTL_DEL, j->fd, NULL);
        MHD_resume_connection(j->conn);
    }
    pthread_mutex_unlock(&h->mu);
}

/* SSE: one event per chunk. */
static void sse_chunks(job *j, json_t *chunks) {
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        char *s = json_dumps(c, JSON_COMPACT);
        frigg_sb_puts(&j->out, "data: ");
        frigg_sb_puts(&j->out, s);
        frigg_sb_puts(&j->out, "\n\n");
        free(s);
    }
    json_decref(chunks);
}

static void on_text(void *ctx, int choice, const char *piece, size_t n, const frigg_seqgen_result *now) {
    sub *sb = ctx;
    job *j = sb->j;
    if (!j->req.stream) return;
    int idx = sb->prompt * j->req.n + choice;
    pthread_mutex_lock(&j->mu);
    sse_chunks(j, frigg_oai_stream_text(&j->streams[idx], &j->req, &j->srv->env, j->id, j->created, j->srv->model_name,
                                        piece, n, now));
    job_wake(j);
    pthread_mutex_unlock(&j->mu);
}

static int finish_index(const char *reason) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(reason, finish_names[i])) return i;
    return 0;
}

static void on_done(void *ctx, const frigg_sched_result *res) {
    sub *sb = ctx;
    job *j = sb->j;
    server *s = j->srv;
    replica *r = j->rep;
    pthread_mutex_lock(&j->mu);
    if (res->error) {
        if (!j->failed) frigg_oai_error_set(&j->err, 500, "server_error", NULL, NULL, "%s", res->error);
        j->failed = 1;
    } else {
        for (int c = 0; c < res->n_choices; c++)
            frigg_oai_choice_take(&j->choices[sb->prompt * j->req.n + c], res->choices[c], j->req.gen.logprobs);
        /* A choice that cannot be answered (a forced tool call the model left unfinished) fails the request, as
         * a whole, before any choice's end is streamed: an error in place of the response, or as the stream's
         * error event. */
        for (int c = 0; c < res->n_choices && !j->failed; c++)
            if (frigg_oai_choice_error(&j->req, &j->choices[sb->prompt * j->req.n + c], &j->err)) j->failed = 1;
        for (int c = 0; c < res->n_choices; c++) {
            int idx = sb->prompt * j->req.n + c;
            if (j->req.stream && !j->failed) {
                char pre[96];
                snprintf(pre, sizeof pre, "%s_%d", j->id, idx);
                sse_chunks(j, frigg_oai_stream_finish(&j->streams[idx], &j->req, &s->env, j->id, j->created,
                                                      s->model_name, &j->choices[idx], pre));
            }
            /* metrics of this choice */
            const frigg_oai_choice *ch = &j->choices[idx];
            pthread_mutex_lock(&s->metrics_mu);
            r->m.generation_tokens += (uint64_t)ch->n;
            if (c == 0) {
                r->m.prompt_tokens += (uint64_t)ch->prompt_tokens;
                hist_add(&r->m.queue, ch->queue_ms / 1e3);
            }
            if (ch->n > 0) hist_add(&r->m.ttft, (ch->queue_ms + ch->first_token_ms) / 1e3);
            if (ch->n > 1) hist_add(&r->m.tpot, ch->decode_ms / 1e3 / (ch->n - 1));
            pthread_mutex_unlock(&s->metrics_mu);
        }
    }
    j->subs_done++;
    if (j->subs_done == j->nsub) {
        if (j->req.stream) {
            if (j->failed) { /* after the stream began: an error event, then [DONE] */
                json_t *a = json_array();
                json_array_append_new(a, frigg_oai_error_json(&j->err));
                sse_chunks(j, a);
            } else if (j->req.include_usage) {
                int pt = 0, ct = 0;
                frigg_oai_usage_counts(&j->req, j->choices, &pt, &ct);
                json_t *a = json_array();
                json_array_append_new(a, frigg_oai_usage_chunk(&j->req, j->id, j->created, s->model_name, pt, ct));
                sse_chunks(j, a);
            }
            frigg_sb_puts(&j->out, "data: [DONE]\n\n");
        }
        j->finished = 1;
        pthread_mutex_lock(&s->metrics_mu);
        hist_add(&r->m.e2e, (frigg_now_ms() - j->t_arrival) / 1e3);
        int nc = j->req.n_prompts * j->req.n;
        for (int i = 0; i < nc && !j->failed; i++) {
            int fi = finish_index(j->choices[i].finish_reason);
            if (j->req.tools && fi != 3) { /* a call found: reported as tool_calls, as the response reports it */
                char *content = NULL;
                size_t content_len = 0;
                json_t *calls = NULL;
                frigg_oai_finish_tools(&j->req, &j->choices[i], &content, &content_len, &calls, "m");
                if (calls) fi = 2;
                free(content);
                json_decref(calls);
            }
            r->m.finish[fi]++;
        }
        pthread_mutex_unlock(&s->metrics_mu);
        atomic_fetch_sub(&r->load, 1);
    }
    job_wake(j);
    pthread_mutex_unlock(&j->mu);
    free(sb);
    job_unref(j);
}

static replica *least_loaded(server *s) {
    replica *best = &s->rep[0];
    for (int i = 1; i < s->nrep; i++)
        if (atomic_load(&s->rep[i].load) < atomic_load(&best->load)) best = &s->rep[i];
    return best;
}

static int total_load(server *s) {
    int n = 0;
    for (int i = 0; i < s->nrep; i++) n += atomic_load(&s->rep[i].load);
    return n;
}

static void job_cancel(job *j) {
    pthread_mutex_lock(&j->mu);
    int done = j->finished;
    if (!done) j->cancelled = 1; /* a job that ended before its client left keeps its answer */
    pthread_mutex_unlock(&j->mu);
    if (done) return;
    for (int i = 0; i < j->nsub; i++) frigg_sched_cancel(j->rep->sched, j->handles[i]);
    wake(j->rep);
}

/* Submit every prompt of the request; on failure (*e set) nothing stays submitted. */
static job *job_submit(server *s, frigg_oai_req *req, frigg_oai_error *e) {
    job *j = frigg_xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    j->srv = s;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->created = (long long)time(NULL);
    j->t_arrival = frigg_now_ms();
    unsigned char rnd[12];
    randombytes_buf(rnd, sizeof rnd);
    char hex[25];
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    snprintf(j->id, sizeof j->id, "%s-%s", j->req.kind == FRIGG_OAI_CHAT ? "chatcmpl" : "cmpl", hex);
    int nc = j->req.n_prompts * j->req.n;
    j->choices = frigg_xcalloc((size_t)nc, sizeof *j->choices);
    if (j->req.stream) {
        j->streams = frigg_xcalloc((size_t)nc, sizeof *j->streams);
        for (int i = 0; i < nc; i++) frigg_oai_stream_init(&j->streams[i], i);
    }
    j->refs = 1;
    replica *r = least_loaded(s);
    j->rep = r;
    atomic_fetch_add(&r->load, 1);
    /* The job's mutex is held across the submits: a prompt that ends (or is cancelled) at the driver's next
     * step must not find the job complete before its later prompts are in (on_done waits for the lock). */
    int failed_at = -1;
    pthread_mutex_lock(&j->mu);
    j->nsub = j->req.n_prompts;
    for (int p = 0; p < j->req.n_prompts; p++) {
        sub *sb = frigg_xcalloc(1, sizeof *sb);
        sb->j = j;
        sb->prompt = p;
        frigg_sched_req q = {.ids = j->req.prompts[p].ids, .n = j->req.prompts[p].n,
                             .prefix_len = j->req.prompts[p].prefix_len, .n_choices = j->req.n, .gen = j->req.gen,
                             .on_text = on_text, .on_done = on_done, .ctx = sb};
        /* choices differ by seed + i (scheduler.h); prompts of one request by prompt * n on top */
        q.gen.sampling.seed += (uint64_t)p * (uint64_t)j->req.n;
        uint64_t h = frigg_sched_submit(r->sched, &q);
        if (!h) {
            const char *why = frigg_error(), *param = !strncmp(why, "n = ", 4) ? "n" /* more choices than slots */
                                                   : j->req.kind == FRIGG_OAI_CHAT ? "messages" : "prompt";
            frigg_oai_error_set(e, 400, "invalid_request_error", param,
                                strstr(why, "context") ? "context_length_exceeded" : NULL, "%s", why);
            free(sb);
            j->nsub = p; /* the prompts submitted before end through on_done, which then completes the job */
            failed_at = p;
            break;
        }
        j->refs++; /* the scheduler's, dropped by on_done */
        j->handles[p] = h;
    }
    pthread_mutex_unlock(&j->mu);
    if (failed_at >= 0) {
        if (failed_at > 0) job_cancel(j);
        else atomic_fetch_sub(&r->load, 1); /* nothing was submitted: no on_done will ever count it down */
        job_unref(j);
        return NULL;
    }
    wake(r);
    return j;
}

/* ---------------------------------------------------------------- HTTP */

typedef struct {
    frigg_strbuf body;
    int too_large;
    int fd;
    int responding;             /* counted in server.responding until on_completed */
    job *job;                   /* a non-streamed generation the connection waits for (its reference) */
} conn;

/* Every response goes out through here: the CORS header when --cors-origin is set, the status counted. A response
 * libmicrohttpd refuses to queue is an internal error, and said so (the access handler's MHD_NO that follows
 * closes the connection, and libmicrohttpd's own line for it is not printed: see http_log). */
static enum MHD_Result queue_response(server *s, struct MHD_Connection *c, int status, struct MHD_Response *r) {
    if (s->http.cors_origin) MHD_add_response_header(r, "Access-Control-Allow-Origin", s->http.cors_origin);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok != MHD_YES) fprintf(stderr, "frigg-serve: internal error: a %d response could not be queued\n", status);
    count_status(s, status);
    return ok;
}

static enum MHD_Result send_json(server *s, struct MHD_Connection *c, int status, json_t *o) {
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    size_t n = strlen(body);
    char *withnl = frigg_xmalloc(n + 2);
    memcpy(withnl, body, n);
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    free(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(n + 1, withnl, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (status == 429) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == 415) MHD_add_response_header(r, "Accept-Encoding", "gzip, deflate"); /* RFC 7694 */
    return queue_response(s, c, status, r);
}

static enum MHD_Result send_error(server *s, struct MHD_Connection *c, const frigg_oai_error *e) {
    return send_json(s, c, e->status, frigg_oai_error_json(e));
}

static enum MHD_Result send_err(server *s, struct MHD_Connection *c, int status, const char *type, const char *code,
                                const char *msg) {
    frigg_oai_error e;
    frigg_oai_error_set(&e, status, type, NULL, code, "%s", msg);
    return send_error(s, c, &e);
}

static enum MHD_Result send_text(server *s, struct MHD_Connection *c, int status, const char *ctype, char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", ctype);
    return queue_response(s, c, status, r);
}

/* A streaming response's reader state, owned by the response (freed by stream_free). Not the conn: MHD calls
 * on_completed, which frees the conn, before it destroys the response and calls stream_free. */
typedef struct {
    job *j;                     /* the reader's reference */
} stream_ctx;

/* The streaming body: SSE bytes as the driver produces them. With none ready, the connection sleeps (returning 0
 * to a suspended connection is how libmicrohttpd's event loop waits without spinning) until on_text or on_done
 * wakes it, or the housekeeper, seeing the client hang up, cancels the job. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    job *j = sc->j;
    pthread_mutex_lock(&j->mu);
    size_t avail = j->out.len - j->out_sent;
    ssize_t ret;
    if (j->cancelled) {
        ret = MHD_CONTENT_READER_END_WITH_ERROR; /* its client is gone: close the connection */
    } else if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, j->out.p + j->out_sent, n);
        j->out_sent += n;
        ret = (ssize_t)n;
    } else if (j->finished) {
        ret = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        job_sleep(j);
        ret = 0;
    }
    pthread_mutex_unlock(&j->mu);
    return ret;
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    job *j = sc->j;
    free(sc);
    pthread_mutex_lock(&j->mu);
    int done = j->finished;
    pthread_mutex_unlock(&j->mu);
    if (!done) job_cancel(j); /* the connection ended before the response did: the client went away */
    job_unref(j);
}

/* A non-streamed generation's connection, at its submit and at every wake: asleep until the job ends, then its
 * answer, or (its client hung up, the job cancelled) the connection closed. */
static enum MHD_Result answer_generate(server *s, struct MHD_Connection *c, conn *cn) {
    job *j = cn->job;
    pthread_mutex_lock(&j->mu);
    if (!j->finished) {
        job_sleep(j);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
    }
    int gone = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    cn->job = NULL;
    if (gone) {
        job_unref(j);
        count_status(s, 499); /* nginx's "client closed request" */
        return MHD_NO;        /* closes the connection (not an error: http_log keeps libmicrohttpd's line quiet) */
    }
    enum MHD_Result ok;
    if (j->failed) ok = send_error(s, c, &j->err);
    else ok = send_json(s, c, 200, frigg_oai_response(&j->req, &s->env, j->id, j->created, s->model_name, j->choices));
    job_unref(j);
    return ok;
}

static enum MHD_Result handle_generate(server *s, struct MHD_Connection *c, conn *cn, frigg_oai_kind kind) {
    frigg_oai_error e;
    frigg_oai_req req;
    cn->responding = 1;
    atomic_fetch_add(&s->responding, 1);
    if (frigg_oai_parse(&req, kind, cn->body.p ? cn->body.p : "", cn->body.len, &s->env, &e)) {
        frigg_oai_req_free(&req);
        return send_error(s, c, &e);
    }
    if (total_load(s) >= s->max_queue) {
        frigg_oai_req_free(&req);
        return send_err(s, c, 429, "rate_limit_error", "queue_full",
                        "the server's queue is full; retry after the time in Retry-After");
    }
    job *j = job_submit(s, &req, &e);
    if (!j) return send_error(s, c, &e);
    pthread_mutex_lock(&j->mu); /* the driver may already be producing: it reads conn only once the job sleeps */
    j->conn = c;
    j->fd = cn->fd;
    pthread_mutex_unlock(&j->mu);
    if (j->req.stream) {
        stream_ctx *sc = frigg_xcalloc(1, sizeof *sc);
        sc->j = j;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, sc, stream_free);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass each event on */
        return queue_response(s, c, 200, r);
    }
    cn->job = j;
    return answer_generate(s, c, cn);
}

static enum MHD_Result handle_models(server *s, struct MHD_Connection *c, const char *url) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", s->model_name, "object", "model", "created", (json_int_t)0,
                          "owned_by", "frigg", "max_model_len", s->ctx);
    if (!strcmp(url, "/v1/models")) return send_json(s, c, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
    const char *want = url + strlen("/v1/models/");
    if (!strcmp(want, s->model_name)) return send_json(s, c, 200, m);
    json_decref(m);
    char msg[300];
    snprintf(msg, sizeof msg, "The model '%.200s' does not exist", want);
    return send_err(s, c, 404, "invalid_request_error", "model_not_found", msg);
}

/* /tokenize {"prompt": text} or {"messages": [...]} (with "add_generation_prompt" and "tools"), as vLLM answers:
 * {"count", "max_model_len", "tokens"}. /detokenize {"tokens": [...]} -> {"prompt"}. */
static enum MHD_Result handle_tokenize(server *s, struct MHD_Connection *c, conn *cn, int detok) {
    if (!s->tok) return send_err(s, c, 400, "invalid_request_error", NULL, "this model has no tokenizer");
    json_error_t je;
    /* JSON_ALLOW_NUL: "\u0000" is valid JSON; a prompt and message text are tokenized with their NUL bytes */
    json_t *o = json_loadb(cn->body.p ? cn->body.p : "", cn->body.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return send_err(s, c, 400, "invalid_request_error", NULL, "the body must be a JSON object");
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = detok ? !strcmp(k, "tokens") || !strcmp(k, "model")
                       : !strcmp(k, "prompt") || !strcmp(k, "messages") || !strcmp(k, "model") ||
                             !strcmp(k, "add_generation_prompt") || /* add_special_tokens is not implemented: refused */
                             !strcmp(k, "tools");
        if (!ok) {
            char msg[200];
            snprintf(msg, sizeof msg, "Unrecognized request argument supplied: %.100s", k);
            json_decref(o);
            frigg_oai_error e;
            frigg_oai_error_set(&e, 400, "invalid_request_error", k, NULL, "%s", msg);
            return send_error(s, c, &e);
        }
    }
    json_t *model = json_object_get(o, "model");
    if (model && json_is_string(model) && memchr(json_string_value(model), 0, json_string_length(model))) {
        json_decref(o);
        frigg_oai_error e;
        frigg_oai_error_set(&e, 400, "invalid_request_error", "model", NULL, "'model' must not hold a NUL byte (\\u0000)");
        return send_error(s, c, &e);
    }
    if (model && (!json_is_string(model) || strcmp(json_string_value(model), s->model_name))) {
        json_decref(o);
        return send_err(s, c, 404, "invalid_request_error", "model_not_found", "The model does not exist");
    }
    if (detok) {
        json_t *t = json_object_get(o, "tokens");
        size_t n = json_array_size(t), i;
        if (!json_is_array(t)) {
            json_decref(o);
            return send_err(s, c, 400, "invalid_request_error", NULL, "'tokens' must be an array of token ids");
        }
        int32_t *ids = frigg_xmalloc((n ? n : 1) * sizeof(int32_t));
        json_array_foreach(t, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= frigg_tokenizer_vocab_size(s->tok)) {
                free(ids);
                json_decref(o);
                return send_err(s, c, 400, "invalid_request_error", NULL, "'tokens' must hold token ids inside the vocabulary");
            }
            ids[i] = (int32_t)json_integer_value(v);
        }
        size_t len = 0;
        char *text = frigg_tokenizer_decode(s->tok, ids, n, &len);
        free(ids);
        json_decref(o);
        size_t cl;
        char *clean = frigg_oai_utf8_clean(text ? text : "", text ? len : 0, &cl);
        free(text);
        enum MHD_Result ok = send_json(s, c, 200, json_pack("{s:s%}", "prompt", clean, cl));
        free(clean);
        return ok;
    }
    char *text = NULL;
    size_t text_len = 0; /* text may hold NUL bytes */
    json_t *msgs = json_object_get(o, "messages"), *prompt = json_object_get(o, "prompt");
    json_t *tools = json_object_get(o, "tools");
    if (!!msgs == !!prompt) {
        json_decref(o);
        return send_err(s, c, 400, "invalid_request_error", NULL, "send exactly one of 'prompt' and 'messages'");
    }
    if (tools && !json_is_null(tools) && !msgs) {
        json_decref(o);
        frigg_oai_error e;
        frigg_oai_error_set(&e, 400, "invalid_request_error", "tools", NULL,
                            "'tools' go into the chat template's prompt: send them with 'messages'");
        return send_error(s, c, &e);
    }
    if (prompt) {
        if (!json_is_string(prompt)) {
            json_decref(o);
            return send_err(s, c, 400, "invalid_request_error", NULL, "'prompt' must be a string");
        }
        text_len = json_string_length(prompt);
        text = frigg_xmalloc(text_len + 1);
        memcpy(text, json_string_value(prompt), text_len);
        text[text_len] = 0;
    } else {
        /* the same rendering as /v1/chat/completions: its checks of the messages and tools, its template (the
         * tools as tool_choice auto or required renders them; a forced call's start counts as the answer's) */
        json_t *agp = json_object_get(o, "add_generation_prompt");
        frigg_oai_error e;
        text = frigg_oai_chat_prompt(msgs, tools, agp ? json_is_true(agp) : 1, &text_len, &e);
        if (!text) {
            json_decref(o);
            return send_error(s, c, &e);
        }
    }
    json_decref(o);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = frigg_tokenizer_encode(s->tok, text, text_len, &ids, &n);
    free(text);
    if (rc) return send_err(s, c, 400, "invalid_request_error", NULL, frigg_error());
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    free(ids);
    return send_json(s, c, 200, json_pack("{s:I,s:i,s:o}", "count", (json_int_t)n, "max_model_len", s->ctx, "tokens", a));
}

static void hist_text(frigg_strbuf *b, const char *name, const histogram *h, const char *label) {
    uint64_t cum = 0;
    for (int i = 0; i <= NBUCKETS; i++) {
        cum += h->counts[i];
        if (i < NBUCKETS) frigg_sb_printf(b, "%s_bucket{replica=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, label, bucket_le[i], cum);
        else frigg_sb_printf(b, "%s_bucket{replica=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, label, cum);
    }
    frigg_sb_printf(b, "%s_sum{replica=\"%s\"} %.6f\n%s_count{replica=\"%s\"} %" PRIu64 "\n", name, label, h->sum, name,
                    label, h->n);
}

static enum MHD_Result handle_metrics(server *s, struct MHD_Connection *c) {
    frigg_strbuf b = FRIGG_STRBUF_INIT;
    static const struct { const char *name, *help; size_t off; } hs[] = {
        {"frigg_time_to_first_token_seconds", "Time from arrival to the first generated token", offsetof(replica_metrics, ttft)},
        {"frigg_time_per_output_token_seconds", "Decode time per output token after the first", offsetof(replica_metrics, tpot)},
        {"frigg_e2e_request_latency_seconds", "Time from arrival to the last token", offsetof(replica_metrics, e2e)},
        {"frigg_request_queue_time_seconds", "Time a request waited for a free slot", offsetof(replica_metrics, queue)},
    };
    pthread_mutex_lock(&s->metrics_mu);
    for (size_t k = 0; k < sizeof hs / sizeof hs[0]; k++) {
        frigg_sb_printf(&b, "# HELP %s %s.\n# TYPE %s histogram\n", hs[k].name, hs[k].help, hs[k].name);
        for (int i = 0; i < s->nrep; i++)
            hist_text(&b, hs[k].name, (const histogram *)((const char *)&s->rep[i].m + hs[k].off), s->rep[i].label);
    }
    frigg_sb_puts(&b, "# HELP frigg_prompt_tokens_total Prompt tokens prefilled.\n# TYPE frigg_prompt_tokens_total counter\n");
    for (int i = 0; i < s->nrep; i++)
        frigg_sb_printf(&b, "frigg_prompt_tokens_total{replica=\"%s\"} %" PRIu64 "\n", s->rep[i].label, s->rep[i].m.prompt_tokens);
    frigg_sb_puts(&b, "# HELP frigg_generation_tokens_total Tokens generated.\n# TYPE frigg_generation_tokens_total counter\n");
    for (int i = 0; i < s->nrep; i++)
        frigg_sb_printf(&b, "frigg_generation_tokens_total{replica=\"%s\"} %" PRIu64 "\n", s->rep[i].label,
                        s->rep[i].m.generation_tokens);
    frigg_sb_puts(&b, "# HELP frigg_request_success_total Choices finished, by finish reason.\n"
                      "# TYPE frigg_request_success_total counter\n");
    for (int i = 0; i < s->nrep; i++)
        for (int f = 0; f < 4; f++)
            frigg_sb_printf(&b, "frigg_request_success_total{replica=\"%s\",finish_reason=\"%s\"} %" PRIu64 "\n",
                            s->rep[i].label, finish_names[f], s->rep[i].m.finish[f]);
    frigg_sb_puts(&b, "# HELP frigg_http_responses_total HTTP responses, by status code.\n"
                      "# TYPE frigg_http_responses_total counter\n");
    for (int i = 0; i < s->nstatuses; i++)
        frigg_sb_printf(&b, "frigg_http_responses_total{code=\"%d\"} %" PRIu64 "\n", s->statuses[i].code, s->statuses[i].n);
    pthread_mutex_unlock(&s->metrics_mu);
    static const char *const gauges[3][2] = {{"frigg_requests_waiting", "Requests queued for a slot"},
                                            {"frigg_requests_running", "Requests running"},
                                            {"frigg_slots_in_use", "Sequence slots in use"}};
    int vals[MAX_REPLICAS][3];
    for (int i = 0; i < s->nrep; i++) frigg_sched_counts(s->rep[i].sched, &vals[i][0], &vals[i][1], &vals[i][2]);
    for (int g = 0; g < 3; g++) {
        frigg_sb_printf(&b, "# HELP %s %s.\n# TYPE %s gauge\n", gauges[g][0], gauges[g][1], gauges[g][0]);
        for (int i = 0; i < s->nrep; i++)
            frigg_sb_printf(&b, "%s{replica=\"%s\"} %d\n", gauges[g][0], s->rep[i].label, vals[i][g]);
    }
    frigg_sb_puts(&b, "# HELP frigg_slots_total Sequence slots.\n# TYPE frigg_slots_total gauge\n");
    for (int i = 0; i < s->nrep; i++) frigg_sb_printf(&b, "frigg_slots_total{replica=\"%s\"} %d\n", s->rep[i].label, s->slots);
    const http_state *h = &s->http;
    frigg_sb_printf(&b, "# HELP frigg_http_connections_open TCP connections open.\n# TYPE frigg_http_connections_open gauge\n"
                        "frigg_http_connections_open %d\n", atomic_load(&h->open_conns));
    frigg_sb_printf(&b, "# HELP frigg_http_connections_refused_total Connections closed at accept: over --max-conns-per-ip or --max-conns (libmicrohttpd reports the two alike).\n"
                        "# TYPE frigg_http_connections_refused_total counter\nfrigg_http_connections_refused_total %" PRIu64 "\n",
                    (uint64_t)atomic_load(&h->refused));
    frigg_sb_printf(&b, "# HELP frigg_http_header_timeouts_total Connections closed with no request headers within "
                        "--header-timeout-s.\n# TYPE frigg_http_header_timeouts_total counter\n"
                        "frigg_http_header_timeouts_total %" PRIu64 "\n", (uint64_t)atomic_load(&h->header_timeouts));
    return send_text(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", frigg_sb_take(&b));
}

static int authorized(server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    const char *key = h + 7;
    size_t a = strlen(key), b = strlen(s->api_key);
    /* constant time in the key's bytes (sodium_memcmp); lengths differ only for a wrong key */
    if (a != b) return 0;
    return sodium_memcmp(key, s->api_key, b) == 0;
}

/* ---------------------------------------------------------------- HTTP transport: framing, encodings, CORS */

static const char *termination_name(enum MHD_RequestTerminationCode toe) {
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "completed";
    case MHD_REQUEST_TERMINATED_WITH_ERROR: return "closed: the client hung up or a write failed";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "closed: idle past the timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "closed: the server stopped";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "closed: the client reset the connection";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return "closed: the client hung up mid-request";
    default: return "closed";
    }
}

typedef struct {
    int content_length, transfer_encoding;
    const char *te;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, "Content-Length")) f->content_length++;
    if (!strcasecmp(key, "Transfer-Encoding")) f->transfer_encoding++, f->te = value ? value : "";
    return MHD_YES;
}

/* The request's framing, checked before any of its body is read: libmicrohttpd frames by Transfer-Encoding when it
 * is present and ignores Content-Length, while a proxy in front may frame by Content-Length, so a request with
 * both (or two Content-Lengths) could smuggle a second request past the proxy inside its body (RFC 9112, 6.1 and
 * 6.3): refused with 400 and the connection closed. A transfer coding other than chunked would be read until the
 * client closes: 501 (RFC 9112, 6.1). Returns 0 or the status, with the message in msg. */
static int framing_error(struct MHD_Connection *c, char *msg, size_t len) {
    framing f = {0, 0, NULL};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    if (f.content_length && f.transfer_encoding) {
        snprintf(msg, len, "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112, 6.1)");
        return 400;
    }
    if (f.content_length > 1) {
        snprintf(msg, len, "a request with more than one Content-Length is refused (RFC 9112, 6.3)");
        return 400;
    }
    if (f.transfer_encoding > 1 || (f.te && strcasecmp(f.te, "chunked"))) {
        snprintf(msg, len, "Transfer-Encoding \"%.60s\" is not implemented: only chunked", f.transfer_encoding > 1 ? "(twice)" : f.te);
        return 501;
    }
    return 0;
}

/* A deflate body in zlib's format (RFC 1950, what HTTP's "deflate" names) starts with a header whose check bits
 * make it a multiple of 31; some clients send raw deflate (RFC 1951) instead, which is told apart by that. */
static int zlib_header(const frigg_strbuf *b) {
    if (b->len < 2) return 1;
    const unsigned char b0 = (unsigned char)b->p[0], b1 = (unsigned char)b->p[1];
    return (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0;
}

/* Inflate *body in place to at most cap bytes (windowBits as zlib takes them: 15 zlib, -15 raw, 31 gzip, where
 * further gzip members are appended as RFC 1952 allows). A body that inflates past cap is a 413 as soon as it
 * passes it, so a small bomb takes no more memory than an honest body at the limit. Returns 0 or the status. */
static int inflate_body(frigg_strbuf *body, int wbits, size_t cap, char *msg, size_t len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, wbits) != Z_OK) {
        snprintf(msg, len, "internal error: zlib did not start");
        return 500;
    }
    frigg_strbuf out = FRIGG_STRBUF_INIT;
    z.next_in = (Bytef *)body->p;
    z.avail_in = (uInt)body->len; /* at most --max-body-bytes, 1 GiB */
    unsigned char buf[16384];
    int status = 0;
    for (;;) {
        z.next_out = buf;
        z.avail_out = sizeof buf;
        int rc = inflate(&z, Z_NO_FLUSH);
        size_t got = sizeof buf - z.avail_out;
        if (out.len + got > cap) {
            snprintf(msg, len, "the decoded request body is larger than the limit of %zu bytes", cap);
            status = 413;
            break;
        }
        frigg_sb_put(&out, (const char *)buf, got);
        if (rc == Z_STREAM_END && z.avail_in == 0) break;
        if (rc == Z_STREAM_END && wbits > 15) { /* another gzip member */
            inflateReset(&z);
            continue;
        }
        if (rc != Z_OK) { /* corrupt, truncated (Z_BUF_ERROR: no input left), or bytes after the stream's end */
            snprintf(msg, len, "the request body does not decode as its Content-Encoding says (zlib: %s)",
                     rc == Z_STREAM_END ? "bytes after the end of the stream" : z.msg ? z.msg : "truncated");
            status = 400;
            break;
        }
    }
    inflateEnd(&z);
    if (status) {
        frigg_sb_free(&out);
        return status;
    }
    frigg_sb_free(body);
    *body = out;
    return 0;
}

/* The body decoded by its Content-Encoding: none or identity as sent; gzip (x-gzip) and deflate inflated to at
 * most --max-body-bytes; any other coding, or a list of codings, 415 (with Accept-Encoding: send_json). */
static int decode_body(server *s, struct MHD_Connection *c, conn *cn, char *msg, size_t len) {
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    if (!ce) return 0;
    /* the whole value, less the spaces around it, is one coding's name (compared in full: a long value is not
     * cut down to a name it merely starts with) */
    while (*ce == ' ' || *ce == '\t') ce++;
    size_t n = strlen(ce);
    while (n && (ce[n - 1] == ' ' || ce[n - 1] == '\t')) n--;
#define IS(name) (n == sizeof name - 1 && !strncasecmp(ce, name, n))
    if (!n || IS("identity")) return 0;
    if (IS("gzip") || IS("x-gzip")) return inflate_body(&cn->body, 15 + 16, s->max_body, msg, len);
    if (IS("deflate")) return inflate_body(&cn->body, zlib_header(&cn->body) ? 15 : -15, s->max_body, msg, len);
#undef IS
    snprintf(msg, len, "Content-Encoding \"%.40s\" is not supported: gzip, deflate or identity", ce);
    return 415;
}

/* A CORS preflight (--cors-origin): 204 with what a browser needs to send the real request (its method, the
 * Authorization and Content-Type headers), cached by it for a day. Answered without the API key, since browsers
 * send none with a preflight. */
static enum MHD_Result send_preflight(server *s, struct MHD_Connection *c, int want_post) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", want_post ? "POST, OPTIONS" : "GET, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    return queue_response(s, c, 204, r);
}

static enum MHD_Result send_405(server *s, struct MHD_Connection *c, const char *url, const char *method, int want_post) {
    char msg[200];
    snprintf(msg, sizeof msg, "%.100s takes %s, not %.8s", url, want_post ? "POST" : "GET", method);
    frigg_oai_error e;
    frigg_oai_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%s", msg);
    json_t *ej = frigg_oai_error_json(&e);
    char *body = json_dumps(ej, JSON_COMPACT);
    json_decref(ej);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    const char *allow = want_post ? (s->http.cors_origin ? "POST, OPTIONS" : "POST")
                                  : (s->http.cors_origin ? "GET, OPTIONS" : "GET");
    MHD_add_response_header(r, "Allow", allow);
    return queue_response(s, c, 405, r);
}

/* The first request's headers are in: the connection leaves the unheard list (the housekeeper no longer holds it
 * to the header deadline), and the long inactivity timeout (--timeout-s) replaces the header timeout that
 * libmicrohttpd applied to it until now. Later requests on the connection keep the long one. */
static void connection_heard(server *s, struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    peer *p = ci ? ci->socket_context : NULL;
    if (!p) return;
    http_state *h = &s->http;
    pthread_mutex_lock(&h->peers_mu);
    const int first = p->listed;
    if (p->listed) {
        if (p->prev) p->prev->next = p->next;
        else h->unheard = p->next;
        if (p->next) p->next->prev = p->prev;
        else h->unheard_tail = p->prev;
        p->listed = 0;
    }
    pthread_mutex_unlock(&h->peers_mu);
    if (first) MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, h->idle_timeout_s);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *s = cls;
    conn *cn = *con_cls;
    if (!cn) { /* headers in: the first call */
        cn = frigg_xcalloc(1, sizeof *cn);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        cn->fd = ci ? ci->connect_fd : -1;
        *con_cls = cn;
        connection_heard(s, c);
        char msg[160];
        const int bad = framing_error(c, msg, sizeof msg);
        if (bad) return send_err(s, c, bad, "invalid_request_error", NULL, msg); /* the body is never read */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) cn->too_large = 1;
        return MHD_YES;
    }
    if (*upload_size) { /* body bytes */
        if (!cn->too_large && cn->body.len + *upload_size > s->max_body) cn->too_large = 1;
        if (!cn->too_large) frigg_sb_put(&cn->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->job) return answer_generate(s, c, cn); /* woken: the request was checked and submitted before */
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    enum { R_NONE, R_HEALTH, R_MODELS, R_CHAT, R_COMPL, R_METRICS, R_TOK, R_DETOK } route = R_NONE;
    int want_post = 0;
    if (!strcmp(url, "/health")) route = R_HEALTH;
    else if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) route = R_MODELS;
    else if (!strcmp(url, "/metrics")) route = R_METRICS;
    else if (!strcmp(url, "/v1/chat/completions")) route = R_CHAT, want_post = 1;
    else if (!strcmp(url, "/v1/completions")) route = R_COMPL, want_post = 1;
    else if (!strcmp(url, "/tokenize")) route = R_TOK, want_post = 1;
    else if (!strcmp(url, "/detokenize")) route = R_DETOK, want_post = 1;
    if (route == R_NONE) {
        char msg[300];
        snprintf(msg, sizeof msg, "no route %.8s %.200s", method, url);
        return send_err(s, c, 404, "invalid_request_error", "not_found", msg);
    }
    if (s->http.cors_origin && !strcmp(method, "OPTIONS")) return send_preflight(s, c, want_post);
    if (want_post ? !post : !get) return send_405(s, c, url, method, want_post);
    if (route == R_HEALTH) {
        if (atomic_load(&s->stopping))
            return send_err(s, c, 503, "server_error", "shutting_down", "the server is shutting down");
        if (!atomic_load(&s->ready)) return send_err(s, c, 503, "server_error", "loading", "the model is loading");
        return send_json(s, c, 200, json_pack("{s:s}", "status", "ok"));
    }
    if (!authorized(s, c))
        return send_err(s, c, 401, "invalid_request_error", "invalid_api_key",
                        "Incorrect or missing API key: send 'Authorization: Bearer <key>'");
    if (cn->too_large) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes", s->max_body);
        return send_err(s, c, 413, "invalid_request_error", "request_too_large", msg);
    }
    if (want_post) {
        char msg[200];
        const int bad = decode_body(s, c, cn, msg, sizeof msg);
        if (bad) return send_err(s, c, bad, "invalid_request_error", bad == 413 ? "request_too_large"
                                                                   : bad == 415 ? "unsupported_media_type" : NULL, msg);
    }
    if (atomic_load(&s->stopping)) return send_err(s, c, 503, "server_error", "shutting_down", "the server is shutting down");
    if (!atomic_load(&s->ready)) return send_err(s, c, 503, "server_error", "loading", "the model is loading");
    switch (route) {
    case R_MODELS: return handle_models(s, c, url);
    case R_METRICS: return handle_metrics(s, c);
    case R_CHAT: return handle_generate(s, c, cn, FRIGG_OAI_CHAT);
    case R_COMPL: return handle_generate(s, c, cn, FRIGG_OAI_COMPLETION);
    case R_TOK: return handle_tokenize(s, c, cn, 0);
    case R_DETOK: return handle_tokenize(s, c, cn, 1);
    default: return MHD_NO;
    }
}

/* The request ended: its answer went out, or the connection closed. A non-streamed job still waited for (the
 * daemon stopping, or the connection closed between two wakes) is given up. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    (void)c;
    conn *cn = *con_cls;
    if (!cn) return;
    if (s->http.verbose && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        fprintf(stderr, "frigg-serve: http: a request ended early: %s\n", termination_name(toe));
    if (cn->job) {
        job_cancel(cn->job);
        job_unref(cn->job);
    }
    if (cn->responding) atomic_fetch_sub(&s->responding, 1); /* its last byte went out, or the client is gone */
    frigg_sb_free(&cn->body);
    free(cn);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- HTTP transport: connections, logging */

/* libmicrohttpd's socket context: each accepted connection is held to the header deadline until connection_heard;
 * closed, it is freed (before libmicrohttpd closes the socket, so that the housekeeper never shuts down a socket
 * number another connection reuses). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode what) {
    server *s = cls;
    http_state *h = &s->http;
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        peer *p = frigg_xcalloc(1, sizeof *p);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        p->fd = ci ? ci->connect_fd : -1;
        p->deadline_ms = frigg_now_ms() + h->header_timeout_s * 1e3;
        pthread_mutex_lock(&h->peers_mu);
        p->listed = 1;
        p->prev = h->unheard_tail;
        if (h->unheard_tail) h->unheard_tail->next = p;
        else h->unheard = p;
        h->unheard_tail = p;
        pthread_mutex_unlock(&h->peers_mu);
        *socket_context = p;
        atomic_fetch_add(&h->open_conns, 1);
        return;
    }
    peer *p = *socket_context;
    if (!p) return;
    pthread_mutex_lock(&h->peers_mu);
    if (p->listed) {
        if (p->prev) p->prev->next = p->next;
        else h->unheard = p->next;
        if (p->next) p->next->prev = p->prev;
        else h->unheard_tail = p->prev;
    }
    pthread_mutex_unlock(&h->peers_mu);
    free(p);
    *socket_context = NULL;
    atomic_fetch_sub(&h->open_conns, 1);
}

/* Connections past their header deadline are shut down (not closed: the socket stays libmicrohttpd's, whose loop
 * then reads the end and closes it). The unheard list is in accept order, so the expired ones are at its head. */
static void expire_unheard(server *s, double now) {
    http_state *h = &s->http;
    pthread_mutex_lock(&h->peers_mu);
    while (h->unheard && h->unheard->deadline_ms <= now) {
        peer *p = h->unheard;
        h->unheard = p->next;
        if (h->unheard) h->unheard->prev = NULL;
        else h->unheard_tail = NULL;
        p->listed = 0;
        p->next = p->prev = NULL;
        if (p->fd >= 0) shutdown(p->fd, SHUT_RDWR);
        atomic_fetch_add(&h->header_timeouts, 1);
        atomic_fetch_add(&h->timeouts_unreported, 1);
    }
    pthread_mutex_unlock(&h->peers_mu);
}

/* A sleeping job's client hung up (the watch's event names the job by its serial: a job woken meanwhile is not
 * found, and its next sleep's watch reports the hang-up again). */
static void on_hangup(server *s, uint64_t serial) {
    http_state *h = &s->http;
    pthread_mutex_lock(&h->mu);
    job *j = h->sleepers;
    while (j && j->serial != serial) j = j->sleep_next;
    if (j) atomic_fetch_add(&j->refs, 1); /* a sleeper's connection holds its reference: it is alive */
    pthread_mutex_unlock(&h->mu);
    if (!j) return;
    job_cancel(j); /* on_done, at the driver's next step, wakes the connection, which then closes */
    job_unref(j);
}

/* At most every 10 s: what the transport refused or closed since the last summary, one line each, instead of a
 * line per connection (a flood of connections would otherwise flood the log). */
static void report_http(server *s) {
    http_state *h = &s->http;
    const uint64_t refused = atomic_exchange(&h->refused_unreported, 0);
    const uint64_t expired = atomic_exchange(&h->timeouts_unreported, 0);
    const uint64_t dropped = atomic_exchange(&h->log_dropped, 0);
    atomic_store(&h->log_lines, 0);
    if (refused)
        fprintf(stderr, "frigg-serve: http: %" PRIu64 " connection(s) refused in the last 10 s: over --max-conns-per-ip %u "
                        "(or --max-conns %u)\n", refused, h->max_conns_per_ip, h->max_conns);
    if (expired)
        fprintf(stderr, "frigg-serve: http: %" PRIu64 " connection(s) closed in the last 10 s: no request headers within "
                        "--header-timeout-s %g\n", expired, h->header_timeout_s);
    if (dropped) fprintf(stderr, "frigg-serve: http: %" PRIu64 " more libmicrohttpd message(s) in the last 10 s not printed\n", dropped);
}

static void *housekeeper(void *arg) {
    server *s = arg;
    http_state *h = &s->http;
    struct epoll_event ev[64];
    double next_report = frigg_now_ms() + 10e3;
    while (!atomic_load(&h->stop)) {
        const int n = epoll_wait(h->watch_fd, ev, 64, 100);
        for (int i = 0; i < n; i++) on_hangup(s, ev[i].data.u64);
        const double now = frigg_now_ms();
        expire_unheard(s, now);
        if (now >= next_report) {
            report_http(s);
            next_report = now + 10e3;
        }
    }
    report_http(s);
    return NULL;
}

/* libmicrohttpd's messages, by what they mean here:
 *  - a connection refused at a limit: counted, and summarized by report_http instead of a line each;
 *  - what follows the access handler's MHD_NO or the stream reader's error: here only ever a client that left
 *    (libmicrohttpd calls it an "internal error"); never printed, since on_completed says what happened with
 *    --verbose, and a real internal error of ours is printed where it happens (queue_response);
 *  - a client that went away (hung up, reset, a write that failed) or sent a malformed request: normal traffic,
 *    printed only with --verbose;
 *  - anything else: printed, at most 20 lines per 10 s (report_http counts the rest). */
static int starts(const char *line, const char *const *prefixes) {
    for (; *prefixes; prefixes++)
        if (!strncmp(line, *prefixes, strlen(*prefixes))) return 1;
    return 0;
}

static void http_log(void *cls, const char *fmt, va_list ap) {
    server *s = cls;
    http_state *h = &s->http;
    static const char *const refused[] = {"Server reached connection limit", NULL};
    static const char *const ours[] = {"Application reported internal error",
                                       "Closing connection (application error generating response)", NULL};
    static const char *const client[] = {
        "Failed to send ", "Socket has been disconnected", "Connection socket is closed",
        "Connection was closed by remote side", "Error processing request" /* a malformed request, answered 4xx */,
        "Received HTTP/1.1 request without `Host'", "Too large value of 'Content-Length'",
        "Failed to parse `Content-Length'", "Not enough memory in pool" /* headers past the connection's 64 KiB */,
        NULL};
    /* classified by the message, not the format: some arrive as "%s\n" with the message as the argument */
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    if (starts(line, refused)) {
        atomic_fetch_add(&h->refused, 1);
        atomic_fetch_add(&h->refused_unreported, 1);
        return;
    }
    if (starts(line, ours)) return;
    const int normal = starts(line, client);
    if (normal && !h->verbose) return;
    if (!normal && atomic_fetch_add(&h->log_lines, 1) >= 20) {
        atomic_fetch_add(&h->log_dropped, 1);
        return;
    }
    fprintf(stderr, "frigg-serve: http: %s\n", line);
}

/* ---------------------------------------------------------------- main */

static int sigpipe_fd[2] = {-1, -1}; /* the signal handler's self-pipe: main waits on it (see main) */
static void on_signal(int sig) {
    char b = (char)sig;
    if (write(sigpipe_fd[1], &b, 1) < 0) { /* nothing to do: main is woken by the next signal */
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-serve [options]\n"
            "  -m, --model DIR          model directory (default: $FRIGG_MODEL or the bundled model)\n"
            "      --served-model-name N the name clients send as \"model\" (default: the directory's name)\n"
            "  -b, --backend NAME       cpu or cuda (default: cuda when a GPU is present)\n"
            "      --host ADDR          address to bind (default 127.0.0.1; anything else needs an API key)\n"
            "  -p, --port N             TCP port (default 8000; 0: any free port, printed at start)\n"
            "      --slots N|auto       sequences each replica runs at once (default auto: as many of --ctx tokens as\n"
            "                           fit in 90%% of the free memory, at most 64 on a GPU and 8 on the CPU)\n"
            "      --ctx N              tokens per sequence (default: the model's max_position_embeddings)\n"
            "      --devices LIST       CUDA devices, one replica each (e.g. 0,1; default 0)\n"
            "      --replicas N         CPU engines (default 1), each with --threads / N threads\n"
            "  -t, --threads N          CPU worker threads in all (default: all cores)\n"
            "      --api-key KEY        require Authorization: Bearer KEY (also $FRIGG_API_KEY, --api-key-file)\n"
            "      --api-key-file F     the key from a file (its first line)\n"
            "      --max-queue N        requests waiting or running before 429 (default 256)\n"
            "      --max-body-bytes N   request body limit, 413 beyond (default 4194304)\n"
            "      --drain-s S          on SIGTERM/SIGINT: let running requests finish for up to S s (default 30)\n"
            "      --timeout-s S        a connection's inactivity timeout once its first request's headers are in:\n"
            "                           between requests, a slow body, a client not reading (default 600)\n"
            "      --header-timeout-s S a new connection's first request headers must be in within S s (default 10)\n"
            "      --max-conns N        open connections; more wait in the listen queue (default 10000, at most\n"
            "                           the open-files limit less 256)\n"
            "      --max-conns-per-ip N open connections from one address; more are refused (default 1024; 0: any)\n"
            "      --http-threads N     HTTP event loops over epoll (default 4)\n"
            "      --cors-origin O      CORS: answer preflights (OPTIONS) and send Access-Control-Allow-Origin: O\n"
            "                           on every response (default: off, OPTIONS is a 405)\n"
            "      --verbose            also print requests that end early (client gone, reset, timeout)\n"
            "      --prefill-share F    prompts longer than --max-prefill-tokens that arrive beside running decodes\n"
            "                           add at most about F x a decode step's time to each step, prefilled a slice\n"
            "                           of layers per step (default 0.5; 0: every prompt whole at once)\n"
            "      --max-prefill-tokens N  prompt tokens one engine step prefills: prompts beyond wait for the next\n"
            "                           step, so a burst's first tokens arrive as its prompts are prefilled, not\n"
            "                           all after the last; prompts within it run whole (default 2048; a longer\n"
            "                           prompt runs alone or, beside decodes, by --prefill-share; 0: no limit)\n"
            "      --batch-invariant    each response's bits independent of what runs beside it (see frigg-run(1))\n"
            "      --kv-dtype T         KV-cache elements: bf16 (default) or int8 (see frigg-run(1))\n"
            "      --dequant-rows N|off a quantized build on a GPU: steps of N rows or more on a bf16 copy of its\n"
            "                           weights (default %d for int8 builds, %d for int4; off: none; frigg-run(1))\n"
            "      --hf-regex           tokenize with HF's regex instead of the training mode (see frigg-run(1))\n"
            "  -h, --help, --version\n",
            FRIGG_DEQUANT_ROWS_INT8, FRIGG_DEQUANT_ROWS_INT4);
}

static int parse_devices(const char *arg, int *dev, int *n) {
    *n = 0;
    char *dup = frigg_xstrdup(arg), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || v > 255 || *n == MAX_REPLICAS) {
            free(dup);
            return -1;
        }
        dev[(*n)++] = (int)v;
    }
    free(dup);
    return *n ? 0 : -1;
}

static char *read_key_file(const char *path) {
    size_t n = 0;
    char *k = frigg_read_file(path, &n);
    if (!k) return NULL;
    k[strcspn(k, "\r\n")] = 0;
    return k;
}

/* What a replica needs: weights (bf16), the KV cache of one slot (K and V of every virtual layer: bf16 on the
 * CUDA engine, fp32 on the CPU engine, or int8 with its scales: frigg_kv_seq_bytes), and the work buffers
 * (activations for a whole prompt, logits). */
static void budget(const frigg_config *c, int ctx, int cuda, frigg_dtype kv_dtype, double *weights, double *kv_slot,
                   double *work) {
    double D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double per_layer = 4 * D * D + D * D + 2 * I * D + D * I;
    *weights = 2.0 * (2 * V * D + 2.0 * c->layers_per_stack * per_layer);
    *kv_slot = frigg_kv_seq_bytes(c, cuda ? "cuda" : "cpu", kv_dtype, ctx);
    *work = (double)ctx * (10 * D + 3 * I) * 4 + 64.0 * V * 6 + (64 << 20);
#ifdef FRIGG_CUDA
    /* the CUDA engine's own count of its buffers (a grouped prefill's rows included), and the same slack */
    if (cuda) *work = (double)frigg_cuda_work_bytes(c, ctx, kv_dtype) + (64 << 20);
#endif
}

static double available_bytes(int cuda, int device);

/* --slots auto: the most slots of --ctx tokens whose KV cache, beside the weights and the work buffers, fits in
 * AUTO_SLOTS_SHARE of the free memory of every replica's device (CPU replicas share the host's), at most
 * AUTO_SLOTS_MAX_GPU on a GPU (the CUDA engine's rows per decode step) and AUTO_SLOTS_MAX_CPU on the CPU (the
 * fixed default this replaced; a CPU step of many rows is slow anyway). Where the free memory cannot be read,
 * AUTO_SLOTS_MAX_CPU. Fewer than one slot is an error naming the numbers. Why a share: the CUDA context, cuBLAS's
 * workspace and the allocator's rounding take memory the budget does not count. */
#define AUTO_SLOTS_SHARE 0.9
#define AUTO_SLOTS_MAX_GPU 64
#define AUTO_SLOTS_MAX_CPU 8
static int auto_slots(server *s, int is_cuda, const int *devices, double wb, double kvb, double workb) {
    const double G = 1073741824.0;
    const int cap = is_cuda ? AUTO_SLOTS_MAX_GPU : AUTO_SLOTS_MAX_CPU, nrep = s->nrep;
    int slots = cap;
    double least = -1;
    for (int i = 0; i < (is_cuda ? nrep : 1); i++) {
        const double avail = available_bytes(is_cuda, is_cuda ? devices[i] : 0);
        if (avail < 0) {
            slots = AUTO_SLOTS_MAX_CPU;
            continue;
        }
        /* per replica: its weights (CPU: mapped from the file, not counted) and work, then its slots */
        const double per = is_cuda ? avail : avail / nrep, room = AUTO_SLOTS_SHARE * per - (is_cuda ? wb : 0) - workb;
        const double fit = kvb > 0 ? room / kvb : cap;
        if (least < 0 || avail < least) least = avail;
        if (fit < slots) slots = fit < 0 ? 0 : (int)fit;
    }
    if (slots < 1) {
        fprintf(stderr,
                "frigg-serve: --slots auto: not one slot of %d tokens fits (KV %.3f GiB per slot, weights %.2f GiB, work "
                "%.2f GiB, %.0f%% of %.2f GiB free%s): lower --ctx\n",
                s->ctx, kvb / G, is_cuda ? wb / G : 0.0, workb / G, AUTO_SLOTS_SHARE * 100, least / G,
                !is_cuda && nrep > 1 ? ", shared by the replicas" : "");
        return -1;
    }
    s->slots = slots;
    char mem[96];
    if (least < 0) snprintf(mem, sizeof mem, "the free memory could not be read");
    else snprintf(mem, sizeof mem, "%.0f%% of %.2f GiB free", AUTO_SLOTS_SHARE * 100, least / G);
    fprintf(stderr, "frigg-serve: --slots auto: %d slots of %d tokens (at most %d on %s; %s)\n", slots, s->ctx, cap,
            is_cuda ? "a GPU" : "the CPU", mem);
    return 0;
}

/* Memory the budget is checked against: the device's free memory, or the host's MemAvailable. */
static double available_bytes(int cuda, int device) {
#ifdef FRIGG_CUDA
    if (cuda) {
        size_t fr = 0, tot = 0;
        return frigg_cuda_mem_info(device, &fr, &tot) ? -1 : (double)fr;
    }
#else
    (void)cuda;
#endif
    (void)device;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* The HTTP transport's options (long only). */
enum { O_HEADER_TIMEOUT = 0x100, O_MAX_CONNS, O_MAX_CONNS_IP, O_HTTP_THREADS, O_CORS, O_VERBOSE };

static int http_option(http_state *h, int ch, const char *arg) {
    double v;
    switch (ch) {
    case O_HEADER_TIMEOUT:
        if (frigg_cli_number("frigg-serve", "--header-timeout-s", arg, 0.1, 86400, 0, &v)) return 2;
        h->header_timeout_s = v;
        return 0;
    case O_MAX_CONNS:
        if (frigg_cli_number("frigg-serve", "--max-conns", arg, 1, 1 << 24, 1, &v)) return 2;
        h->max_conns = (unsigned)v;
        return 0;
    case O_MAX_CONNS_IP:
        if (frigg_cli_number("frigg-serve", "--max-conns-per-ip", arg, 0, 1 << 24, 1, &v)) return 2;
        h->max_conns_per_ip = (unsigned)v;
        return 0;
    case O_HTTP_THREADS:
        if (frigg_cli_number("frigg-serve", "--http-threads", arg, 1, 256, 1, &v)) return 2;
        h->threads = (unsigned)v;
        return 0;
    case O_CORS:
        /* an origin is printable ASCII without spaces (RFC 6454's serialization), or "*": nothing that could end
         * the header line it is sent in */
        for (const char *p = arg; *p; p++)
            if (*p <= ' ' || *p == 0x7f || (unsigned char)*p > 0x7f) {
                fprintf(stderr, "frigg-serve: --cors-origin takes an origin (https://app.example) or *, not \"%s\"\n", arg);
                return 2;
            }
        if (!*arg) {
            fprintf(stderr, "frigg-serve: --cors-origin is empty\n");
            return 2;
        }
        h->cors_origin = arg;
        return 0;
    default: /* O_VERBOSE */
        h->verbose = 1;
        return 0;
    }
}

/* Connections are file descriptors: the soft limit (often 1024) is raised to the hard one, and --max-conns is held
 * to it, less what the process needs beside its connections (model files, epoll, pipes, a GPU driver's). */
#define FD_RESERVE 256
static void fit_connections(http_state *h) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl)) rl.rlim_cur = was;
    }
    const rlim_t room = rl.rlim_cur > FD_RESERVE * 2 ? rl.rlim_cur - FD_RESERVE : rl.rlim_cur / 2;
    if (rl.rlim_cur != RLIM_INFINITY && h->max_conns > room) {
        fprintf(stderr, "frigg-serve: --max-conns %u lowered to %llu: the open-files limit is %llu (ulimit -n)\n",
                h->max_conns, (unsigned long long)room, (unsigned long long)rl.rlim_cur);
        h->max_conns = (unsigned)room;
    }
}

/* The HTTP daemon: --http-threads event loops over epoll (no select() set, whose 1,024 descriptors capped the
 * connections), suspend and resume for connections that wait on the engine, the connection limits, the header
 * timeout as libmicrohttpd's default (each connection gets --timeout-s once its headers are in:
 * connection_heard), and the housekeeping thread. NULL (errno set) when it cannot listen. */
static struct MHD_Daemon *start_http(server *s, const struct sockaddr_in *addr) {
    http_state *h = &s->http;
    fit_connections(h);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->peers_mu, NULL);
    if ((h->watch_fd = epoll_create1(EPOLL_CLOEXEC)) < 0) return NULL;
    struct MHD_OptionItem pool[2] = {{MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)h->threads, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (h->threads < 2) pool[0] = pool[1]; /* one event loop: libmicrohttpd's own thread, no pool */
    /* libmicrohttpd's inactivity timeout, which applies only until connection_heard, a second after the
     * housekeeper's deadline: a backstop, so that a connection closed for want of headers is closed, and counted,
     * by the housekeeper */
    const unsigned header_s = (unsigned)ceil(h->header_timeout_s) + 1;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, http_log, s, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)addr,
        MHD_OPTION_CONNECTION_TIMEOUT, header_s, MHD_OPTION_CONNECTION_LIMIT, h->max_conns,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->max_conns_per_ip, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_ARRAY, pool, MHD_OPTION_END);
    if (!d) return NULL;
    if (pthread_create(&h->housekeeper, NULL, housekeeper, s) == 0) h->housekeeper_up = 1;
    else fprintf(stderr, "frigg-serve: no housekeeping thread: hang-ups of waiting clients and header deadlines go unseen\n");
    return d;
}

/* After the daemon stopped (every connection closed): the housekeeper's last summary, then its end. */
static void stop_http(server *s) {
    http_state *h = &s->http;
    atomic_store(&h->stop, 1);
    if (h->housekeeper_up) pthread_join(h->housekeeper, NULL);
    h->housekeeper_up = 0;
    if (h->watch_fd >= 0) close(h->watch_fd);
    h->watch_fd = -1;
}

static int serve(server *s, int argc, char **argv) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'},      {"served-model-name", 1, 0, 'N'}, {"backend", 1, 0, 'b'},   {"host", 1, 0, 'H'},
        {"port", 1, 0, 'p'},       {"slots", 1, 0, 'S'},             {"ctx", 1, 0, 'C'},       {"devices", 1, 0, 'D'},
        {"replicas", 1, 0, 'R'},   {"threads", 1, 0, 't'},           {"api-key", 1, 0, 'K'},   {"api-key-file", 1, 0, 'F'},
        {"max-queue", 1, 0, 'Q'},  {"max-body-bytes", 1, 0, 'B'},    {"drain-s", 1, 0, 'd'},   {"timeout-s", 1, 0, 'T'},
        {"batch-invariant", 0, 0, 'I'}, {"hf-regex", 0, 0, 'X'},     {"help", 0, 0, 'h'},      {"version", 0, 0, 'V'},
        {"kv-dtype", 1, 0, 'k'},   {"prefill-share", 1, 0, 'P'},     {"max-prefill-tokens", 1, 0, 'L'},
        {"dequant-rows", 1, 0, 'q'},
        {"header-timeout-s", 1, 0, O_HEADER_TIMEOUT}, {"max-conns", 1, 0, O_MAX_CONNS},
        {"max-conns-per-ip", 1, 0, O_MAX_CONNS_IP}, {"http-threads", 1, 0, O_HTTP_THREADS},
        {"cors-origin", 1, 0, O_CORS}, {"verbose", 0, 0, O_VERBOSE}, {0, 0, 0, 0}};
    const char *dir = NULL, *backend = NULL, *host = "127.0.0.1", *name = NULL;
    int port = 8000, threads = 0, replicas = 0, devices[MAX_REPLICAS] = {0}, ndev = 0, batch_inv = 0, hf_regex = 0;
    frigg_dtype kv_dtype = FRIGG_DT_BF16;
    int dequant_rows = 0;
    double drain_s = 30, timeout_s = 600, prefill_share = 0.5;
    int prefill_tokens = 2048;
    s->slots = 0; /* auto: sized to the memory once the model and backend are known */
    s->max_queue = 256;
    s->max_body = 4u << 20;
    s->http = (http_state){.header_timeout_s = 10, .max_conns = 10000, .max_conns_per_ip = 1024, .threads = 4,
                           .watch_fd = -1};
    int ch;
    while ((ch = getopt_long(argc, argv, "m:b:p:t:h", opts, NULL)) != -1) {
        double v;
        switch (ch) {
        case 'm': dir = optarg; break;
        case 'N': name = optarg; break;
        case 'b': backend = optarg; break;
        case 'H': host = optarg; break;
        case 'K': s->api_key = frigg_xstrdup(optarg); break;
        case 'F':
            if (!(s->api_key = read_key_file(optarg))) {
                fprintf(stderr, "frigg-serve: --api-key-file: %s\n", frigg_error());
                return 2;
            }
            break;
        case 'D':
            if (parse_devices(optarg, devices, &ndev)) {
                fprintf(stderr, "frigg-serve: --devices takes a comma-separated list of device numbers, not \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 'I': batch_inv = 1; break;
        case 'X': hf_regex = 1; break;
        case 'P':
            if (frigg_cli_number("frigg-serve", "--prefill-share", optarg, 0, 100, 0, &v)) return 2;
            prefill_share = v;
            break;
        case 'L':
            if (frigg_cli_number("frigg-serve", "--max-prefill-tokens", optarg, 0, 1 << 24, 1, &v)) return 2;
            prefill_tokens = (int)v;
            break;
        case 'k':
            if (frigg_cli_kv_dtype("frigg-serve", optarg, &kv_dtype)) return 2;
            break;
        case 'q':
            if (frigg_cli_dequant_rows("frigg-serve", optarg, &dequant_rows)) return 2;
            break;
        case O_HEADER_TIMEOUT: case O_MAX_CONNS: case O_MAX_CONNS_IP: case O_HTTP_THREADS: case O_CORS: case O_VERBOSE:
            if (http_option(&s->http, ch, optarg)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        case 'V': frigg_print_version("frigg-serve"); return 0;
        case 'S':
            if (!strcmp(optarg, "auto")) {
                s->slots = 0;
                break;
            }
            if (frigg_cli_number("frigg-serve", "--slots", optarg, 1, 1 << 24, 1, &v)) {
                fprintf(stderr, "frigg-serve: --slots takes a number of slots, or auto\n");
                return 2;
            }
            s->slots = (int)v;
            break;
        case 'p': case 'C': case 'R': case 't': case 'Q': case 'B': case 'd': case 'T': {
            const char *o = ch == 'p' ? "--port" : ch == 'C' ? "--ctx" : ch == 'R' ? "--replicas"
                          : ch == 't' ? "--threads" : ch == 'Q' ? "--max-queue" : ch == 'B' ? "--max-body-bytes"
                          : ch == 'd' ? "--drain-s" : "--timeout-s";
            double lo = ch == 'p' || ch == 't' || ch == 'd' ? 0 : 1;
            double hi = ch == 'p' ? 65535 : ch == 'B' ? 1 << 30 : ch == 'R' ? MAX_REPLICAS : 1 << 24;
            if (ch == 't') {
                if (frigg_cli_threads("frigg-serve", optarg, &threads)) return 2;
                break;
            }
            if (frigg_cli_number("frigg-serve", o, optarg, lo, hi, ch != 'd' && ch != 'T', &v)) return 2;
            if (ch == 'p') port = (int)v;
            else if (ch == 'C') s->ctx = (int)v;
            else if (ch == 'R') replicas = (int)v;
            else if (ch == 'Q') s->max_queue = (int)v;
            else if (ch == 'B') s->max_body = (size_t)v;
            else if (ch == 'd') drain_s = v;
            else timeout_s = v;
            break;
        }
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "frigg-serve: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return 2;
    }
    s->http.idle_timeout_s = (unsigned)ceil(timeout_s); /* libmicrohttpd counts whole seconds; 0 would be none */
    if (sodium_init() < 0) {
        fprintf(stderr, "frigg-serve: libsodium failed to initialise\n");
        return 2;
    }
    if (!s->api_key && getenv("FRIGG_API_KEY") && *getenv("FRIGG_API_KEY")) s->api_key = frigg_xstrdup(getenv("FRIGG_API_KEY"));
    if (s->api_key && !*s->api_key) {
        fprintf(stderr, "frigg-serve: the API key is empty\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "frigg-serve: --host \"%s\" is not an IPv4 address\n", host);
        return 2;
    }
    if ((ntohl(addr.sin_addr.s_addr) >> 24) != 127 && !s->api_key) {
        fprintf(stderr, "frigg-serve: binding %s (not a loopback address) needs an API key: --api-key, --api-key-file or "
                        "FRIGG_API_KEY\n", host);
        return 2;
    }
    /* Listen first, so /health answers 503 while the weights load. */
    if (pipe(sigpipe_fd)) {
        perror("frigg-serve: pipe");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pthread_mutex_init(&s->metrics_mu, NULL);
    s->dir = dir ? frigg_xstrdup(dir) : frigg_default_model_dir();
    if (name) {
        s->model_name = frigg_xstrdup(name);
    } else {
        char *d = frigg_xstrdup(s->dir);
        size_t l = strlen(d);
        while (l > 1 && d[l - 1] == '/') d[--l] = 0;
        const char *base = strrchr(d, '/');
        s->model_name = frigg_xstrdup(base ? base + 1 : d);
        free(d);
    }
    struct MHD_Daemon *d = start_http(s, &addr);
    if (!d) {
        fprintf(stderr, "frigg-serve: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
        return 2;
    }
    s->threads_out = 1; /* the daemon's threads have s from here on */
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "frigg-serve: listening on http://%s:%u (loading %s)\n", host, di ? di->port : (unsigned)port, s->dir);
    /* The model, its tokenizer, the engines. */
    char *tj = frigg_model_side_path(s->dir, "tokenizer.json"); /* a GGUF's: beside the file */
    if (frigg_file_exists(tj) && !(s->tok = frigg_tokenizer_load(tj, hf_regex))) {
        fprintf(stderr, "frigg-serve: %s\n", frigg_error());
        return 2;
    }
    free(tj);
    s->model = frigg_model_load(s->dir);
    if (!s->model) {
        fprintf(stderr, "frigg-serve: %s\n", frigg_error());
        return 2;
    }
    const frigg_config *cfg = &s->model->cfg;
    if (!s->ctx) s->ctx = cfg->max_position_embeddings;
    if (s->ctx > cfg->max_position_embeddings) {
        fprintf(stderr, "frigg-serve: --ctx %d is beyond the model's max_position_embeddings %d\n", s->ctx,
                cfg->max_position_embeddings);
        return 2;
    }
    const char *be = backend ? backend : "auto";
#ifdef FRIGG_CUDA
    if (!strcmp(be, "auto")) be = frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
    if (!strcmp(be, "auto")) be = "cpu";
#endif
    int is_cuda = !strcmp(be, "cuda");
    if (ndev && !is_cuda) {
        fprintf(stderr, "frigg-serve: --devices is for the CUDA backend (--replicas runs several CPU engines)\n");
        return 2;
    }
    if (replicas && is_cuda) {
        fprintf(stderr, "frigg-serve: --replicas is for the CPU backend (--devices runs one engine per GPU)\n");
        return 2;
    }
    s->nrep = is_cuda ? (ndev ? ndev : 1) : (replicas ? replicas : 1);
    if (!ndev) devices[0] = 0;
    double wb, kvb, workb;
    budget(cfg, s->ctx, is_cuda, kv_dtype, &wb, &kvb, &workb);
    /* the stored quantized weights beside their bf16 copy (budget() counts the copy as the bf16 weights), unless
     * the engine reads the copy from one row on and frees them (frigg_backend_opts.dequant_rows) */
    if (is_cuda && frigg_dequant_rows(s->model, dequant_rows) > 1) wb += frigg_model_quantized_bytes(s->model);
    const double G = 1073741824.0;
    if (!s->slots && auto_slots(s, is_cuda, devices, wb, kvb, workb)) return 2;
    const double need = (is_cuda ? wb : 0) + kvb * s->slots + workb;
    fprintf(stderr, "frigg-serve: memory per replica: weights %.2f GiB%s + KV %.3f GiB per slot x %d slots + work %.2f "
                    "GiB = %.2f GiB\n", wb / G, is_cuda ? "" : " (mapped from the file)", kvb / G, s->slots, workb / G,
            need / G);
    /* Refuse what does not fit before allocating it (the CPU engine's cache is committed lazily: it would
     * fail only later, under load). CPU replicas share the host's memory. */
    for (int i = 0; i < (is_cuda ? s->nrep : 1); i++) {
        double avail = available_bytes(is_cuda, is_cuda ? devices[i] : 0), total = is_cuda ? need : need * s->nrep;
        if (avail >= 0) {
            fprintf(stderr, "frigg-serve: %s %d: %.2f GiB free, %.2f GiB needed, %.2f GiB headroom\n",
                    is_cuda ? "device" : "host", is_cuda ? devices[i] : 0, avail / G, total / G, (avail - total) / G);
            if (total > avail) {
                fprintf(stderr, "frigg-serve: this configuration does not fit: lower --slots (%d) or --ctx (%d)%s\n",
                        s->slots, s->ctx, is_cuda ? "" : " or --replicas");
                return 2;
            }
        }
    }
    for (int i = 0; i < s->nrep; i++) {
        replica *r = &s->rep[i];
        r->index = i;
        snprintf(r->label, sizeof r->label, "%s:%d", is_cuda ? "cuda" : "cpu", is_cuda ? devices[i] : i);
        frigg_backend_opts bo = {.threads = threads ? (threads / s->nrep > 0 ? threads / s->nrep : 1) : 0,
                                 .device = is_cuda ? devices[i] : 0, .max_seqs = s->slots, .max_ctx = s->ctx,
                                 .batch_invariant = batch_inv, .kv_dtype = kv_dtype,
                                 .dequant_rows = dequant_rows};
        if (!threads && !is_cuda && s->nrep > 1) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            bo.threads = cores / s->nrep > 0 ? (int)(cores / s->nrep) : 1;
        }
        r->b = frigg_backend_create(be, s->model, &bo);
        if (!r->b) {
            /* Memory was checked above: only an allocation failure gets the advice to ask for less of it. */
            const char *err = frigg_error();
            int mem = strstr(err, "memory") || strstr(err, "alloc");
            fprintf(stderr, "frigg-serve: replica %s: %s%s\n", r->label, err,
                    mem ? " (lower --slots or --ctx)" : "");
            return 2;
        }
        r->sched = frigg_sched_new(r->b, s->tok, s->slots);
        if (r->sched) {
            frigg_sched_set_prefill_share(r->sched, prefill_share);
            frigg_sched_set_prefill_tokens(r->sched, prefill_tokens);
        }
        if (!r->sched) {
            fprintf(stderr, "frigg-serve: replica %s: %s\n", r->label, frigg_error());
            return 2;
        }
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
        if (pthread_create(&r->thread, NULL, driver, r)) {
            fprintf(stderr, "frigg-serve: cannot start the driver thread of %s\n", r->label);
            return 2;
        }
    }
    s->env = (frigg_oai_env){.model_name = s->model_name, .tok = s->tok, .cfg = cfg, .max_ctx = s->ctx,
                             .gcache = frigg_oai_gcache_new(s->tok, cfg)};
    if (s->tok && !s->env.gcache) {
        fprintf(stderr, "frigg-serve: %s\n", frigg_error());
        return 2;
    }
    atomic_store(&s->ready, 1);
    fprintf(stderr, "frigg-serve: ready: model \"%s\", %d replica(s) of %s, %d slots of %d tokens each\n", s->model_name,
            s->nrep, be, s->slots, s->ctx);
    const int dq = is_cuda ? frigg_dequant_rows(s->model, dequant_rows) : 0;
    if (dq) /* which weights a quantized build's steps read (frigg_backend_opts.dequant_rows) */
        fprintf(stderr, "frigg-serve: quantized weights: steps of %d row%s or more read their bf16 copy%s (--dequant-rows)\n",
                dq, dq == 1 ? "" : "s", dq == 1 ? ", the stored ones freed" : ", fewer rows the stored ones");
    /* Wait for SIGTERM/SIGINT, then drain. */
    char sig = 0;
    while (read(sigpipe_fd[0], &sig, 1) < 0 && errno == EINTR) {
    }
    atomic_store(&s->stopping, 1);
    fprintf(stderr, "frigg-serve: signal %d: draining (up to %.0f s)\n", sig, drain_s);
    double t0 = frigg_now_ms();
    /* Until every job ended and every generation response went out in full: a job ends (load 0) before its
     * connection's thread has sent the response's last bytes (a stream's finish chunk and [DONE]), and
     * MHD_stop_daemon closes the sockets with whatever is still unsent. */
    while ((total_load(s) > 0 || atomic_load(&s->responding) > 0) && frigg_now_ms() - t0 < drain_s * 1e3)
        usleep(20 * 1000);
    int left = total_load(s);
    for (int i = 0; i < s->nrep; i++) {
        replica *r = &s->rep[i];
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    if (left) fprintf(stderr, "frigg-serve: %d request(s) still running after the drain: cancelled\n", left);
    for (int i = 0; i < s->nrep; i++) {
        replica *r = &s->rep[i];
        if (left) { /* the scheduler ends every request it still holds as cancelled when freed */
        }
        pthread_join(r->thread, NULL);
    }
    MHD_stop_daemon(d); /* no connection sleeps now: every job ended, and its end woke its connection */
    stop_http(s);
    s->threads_out = 0; /* the daemon stopped, every driver joined */
    for (int i = 0; i < s->nrep; i++) {
        uint64_t steps, whole, slices, layers;
        double tl;
        frigg_sched_prefill_stats(s->rep[i].sched, &steps, &whole, &slices, &layers, &tl);
        fprintf(stderr,
                "frigg-serve: replica %s: %" PRIu64 " steps; prompts prefilled whole %" PRIu64 ", by slices %" PRIu64
                " slice(s) of %.1f layer steps on average; a prompt token-layer cost %.3g ms\n",
                s->rep[i].label, steps, whole, slices, slices ? (double)layers / (double)slices : 0.0, tl);
        frigg_sched_free(s->rep[i].sched);
        frigg_backend_destroy(s->rep[i].b);
    }
    fprintf(stderr, "frigg-serve: stopped\n");
    return 0;
}

/* The server is freed on every way out of serve() that leaves no thread holding it: the normal end, --help,
 * --version and every error before the daemon starts (LeakSanitizer counts what an exit leaves). An error after
 * the daemon started returns with its threads still running, and the server stays for the exit. */
int main(int argc, char **argv) {
    server *s = frigg_xcalloc(1, sizeof *s);
    int rc = serve(s, argc, argv);
    if (!s->threads_out) {
        frigg_gcache_free(s->env.gcache); /* after every job: their requests held its grammars */
        frigg_model_free(s->model);
        frigg_tokenizer_free(s->tok);
        free(s->model_name);
        free(s->dir);
        free(s->api_key);
        free(s);
    }
    return rc;
}
