/* progress.c — see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/util.h"

void frigg_progress_start(frigg_progress *p, const char *prog, const char *what, const char *unit, long total, int forced) {
    pthread_mutex_init(&p->mu, NULL);
    p->prog = prog, p->what = what, p->unit = unit, p->total = total, p->done = 0, p->printed = 0;
    p->t0 = p->last = frigg_now_ms();
    p->tty = isatty(STDERR_FILENO);
    p->live = p->tty || forced;
    if (p->live) {
        p->every_ms = p->tty ? 200 : 1000;
    } else {
        const char *e = getenv("FRIGG_PROGRESS_PERIOD_S");
        char *end = NULL;
        double s = e && *e ? strtod(e, &end) : 30;
        p->every_ms = (end && *end) || s < 0 ? 30000 : s * 1000;
    }
}

static void print_line(frigg_progress *p, double now, int last) {
    double s = (now - p->t0) / 1000;
    char of[160] = "", pct[32] = "";
    if (p->total >= 0) {
        snprintf(of, sizeof of, " of %ld", p->total);
        snprintf(pct, sizeof pct, ", %.0f %%", p->total ? 100.0 * p->done / p->total : 100.0);
    }
    char eta[64] = "";
    if (!last && p->total > 0 && p->done > 0 && p->done < p->total)
        snprintf(eta, sizeof eta, ", about %.0f s left", s * (p->total - p->done) / p->done);
    fprintf(stderr, "%s%s: %s: %ld%s %s%s, %.1f s%s%s", p->tty ? "\r" : "", p->prog, p->what, p->done, of, p->unit, pct, s, eta,
            p->tty ? (last ? "\033[K\n" : "\033[K") : "\n");
    fflush(stderr);
    p->last = now;
    p->printed = 1;
}

void frigg_progress_add(frigg_progress *p, long n) {
    pthread_mutex_lock(&p->mu);
    p->done += n;
    double now = frigg_now_ms();
    if (now - p->last >= p->every_ms && !(p->total >= 0 && p->done >= p->total)) print_line(p, now, 0);
    pthread_mutex_unlock(&p->mu);
}

void frigg_progress_end(frigg_progress *p) {
    pthread_mutex_lock(&p->mu);
    if (p->live || p->printed) print_line(p, frigg_now_ms(), 1);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
}
