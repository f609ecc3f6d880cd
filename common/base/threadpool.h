/* threadpool.h — a fixed set of pthreads that split index ranges; the CPU engine's only parallelism. */
#ifndef FRIGG_THREADPOOL_H
#define FRIGG_THREADPOOL_H

typedef struct frigg_pool frigg_pool;

/* fn(ctx, begin, end, thread_index) is called on disjoint chunks covering [0, n). */
typedef void (*frigg_range_fn)(void *ctx, int begin, int end, int thread);

/* threads <= 0: number of online CPUs. NULL with frigg_error() when a worker thread cannot be started (the
 * ones started are joined first): a pool short of its threads would wait for them forever. */
frigg_pool *frigg_pool_create(int threads);
int frigg_pool_size(const frigg_pool *p);
void frigg_pool_run(frigg_pool *p, int n, frigg_range_fn fn, void *ctx);
void frigg_pool_destroy(frigg_pool *p);

#endif
