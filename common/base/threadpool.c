/* threadpool.c — workers wait on a generation counter; the caller runs chunk 0 itself. */
#include "threadpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

struct frigg_pool {
    int nthreads;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen;
    int pending, quit;
    int n;
    frigg_range_fn fn;
    void *ctx;
};

typedef struct {
    frigg_pool *p;
    int index;
} worker_arg;

static void run_chunk(frigg_pool *p, int t) {
    long lo = (long)p->n * t / p->nthreads, hi = (long)p->n * (t + 1) / p->nthreads;
    if (hi > lo) p->fn(p->ctx, (int)lo, (int)hi, t);
}

static void *worker(void *arg) {
    worker_arg *wa = arg;
    frigg_pool *p = wa->p;
    int t = wa->index;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        run_chunk(p, t);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

frigg_pool *frigg_pool_create(int threads) {
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    frigg_pool *p = frigg_xcalloc(1, sizeof *p);
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = frigg_xcalloc(threads, sizeof *p->tid);
    for (int i = 1; i < threads; i++) {
        worker_arg *wa = frigg_xmalloc(sizeof *wa);
        wa->p = p;
        wa->index = i;
        int e = pthread_create(&p->tid[i], NULL, worker, wa);
        if (e) {
            free(wa);
            p->nthreads = i; /* the ones started: destroy joins exactly those */
            frigg_pool_destroy(p);
            frigg_set_error("cannot start CPU worker thread %d of %d: %s", i + 1, threads, strerror(e));
            return NULL;
        }
    }
    return p;
}

int frigg_pool_size(const frigg_pool *p) { return p->nthreads; }

void frigg_pool_run(frigg_pool *p, int n, frigg_range_fn fn, void *ctx) {
    if (p->nthreads == 1 || n < 2) {
        if (n > 0) fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->n = n;
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->nthreads - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_chunk(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void frigg_pool_destroy(frigg_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->nthreads; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}
