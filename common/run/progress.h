/* progress.h — a progress line on stderr for long work (frigg-eval nll and kl, frigg-quantize --check, each
 * frigg-bench measurement), so a run of minutes is not silent until its end.
 *
 * Where stderr is a terminal, or the program was given --progress, the line is kept current: rewritten in place
 * on a terminal (at most 5 times a second), else one line at most every second; a last line at the end. Otherwise
 * (stderr is a log or a pipe) one line every FRIGG_PROGRESS_PERIOD_S seconds (default 30) while the work lasts, so
 * a short run adds nothing to its log and a long one shows it is alive. Thread-safe. */
#ifndef FRIGG_PROGRESS_H
#define FRIGG_PROGRESS_H

#include <pthread.h>

typedef struct {
    pthread_mutex_t mu;
    const char *prog, *what, *unit; /* "frigg-eval", "nll", "sequences": kept, not copied */
    long total;                     /* units in all, or -1 where unknown (a stream on stdin) */
    long done;
    double t0, last, every_ms; /* start, last line printed, the least time between lines */
    int tty, live;             /* rewrite in place; a line at every update (terminal or --progress) */
    int printed;               /* a line was printed (so the end prints the last one) */
} frigg_progress;

/* forced: --progress was given. */
void frigg_progress_start(frigg_progress *p, const char *prog, const char *what, const char *unit, long total, int forced);
/* n more units done; prints when a line is due. */
void frigg_progress_add(frigg_progress *p, long n);
/* The last line where lines are kept current (or any was printed), ended by a newline. */
void frigg_progress_end(frigg_progress *p);

#endif
