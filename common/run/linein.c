/* linein.c — see linein.h. */
#include "linein.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

typedef struct qline {
    struct qline *next;
    char *text;
    long len;
} qline;

struct frigg_linein {
    FILE *f;
    long max_line, max_bytes;
    int max_queued;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t more, room; /* more: a line or the end queued; room: the consumer took one (or stop) */
    qline *head, *tail;
    int queued;
    long queued_bytes;
    int eof, stop;
    char *error;
    char *cur; /* the line being read (freed by frigg_linein_free when the read is cancelled) */
};

/* One line of f into r->cur (at most max_line bytes of it kept): its full length, or -1 at the end of input. */
static long read_one(frigg_linein *r) {
    long len = 0, max = r->max_line;
    size_t cap = 0;
    int c, any = 0;
    while ((c = getc_unlocked(r->f)) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (len < max) {
            if ((size_t)len + 1 >= cap) {
                cap = cap ? cap * 2 : 4096;
                if (cap > (size_t)max + 1) cap = (size_t)max + 1;
                r->cur = frigg_xrealloc(r->cur, cap);
            }
            r->cur[len] = (char)c;
        }
        len++;
    }
    if (!any) return -1;
    if (!r->cur) r->cur = frigg_xmalloc(1);
    r->cur[len < max ? len : max] = 0;
    return len;
}

static void *reader(void *arg) {
    frigg_linein *r = arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    for (;;) {
        /* cancellable only while it waits in read(): frigg_linein_free ends a reader whose input never ends */
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
        errno = 0;
        long len = read_one(r);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        pthread_mutex_lock(&r->mu);
        if (len < 0) {
            if (ferror(r->f)) r->error = frigg_xstrdup(strerror(errno ? errno : EIO));
            r->eof = 1;
            pthread_cond_broadcast(&r->more);
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        qline *q = frigg_xmalloc(sizeof *q);
        *q = (qline){.text = r->cur, .len = len};
        r->cur = NULL;
        if (r->tail) r->tail->next = q;
        else r->head = q;
        r->tail = q;
        r->queued++;
        r->queued_bytes += len < r->max_line ? len : r->max_line;
        pthread_cond_broadcast(&r->more);
        while (!r->stop && (r->queued >= r->max_queued || r->queued_bytes >= r->max_bytes))
            pthread_cond_wait(&r->room, &r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) return NULL;
    }
}

frigg_linein *frigg_linein_start(FILE *f, long max_line, int max_queued, long max_queued_bytes) {
    frigg_linein *r = frigg_xcalloc(1, sizeof *r);
    r->f = f;
    r->max_line = max_line > 0 ? max_line : 1;
    r->max_queued = max_queued > 0 ? max_queued : 1;
    r->max_bytes = max_queued_bytes > 0 ? max_queued_bytes : 1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->more, NULL);
    pthread_cond_init(&r->room, NULL);
    int e = pthread_create(&r->th, NULL, reader, r);
    if (e) {
        frigg_set_error("the input's reader thread did not start: %s", strerror(e));
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->more);
        pthread_cond_destroy(&r->room);
        free(r);
        return NULL;
    }
    return r;
}

int frigg_linein_next(frigg_linein *r, int wait, char **line, long *len) {
    pthread_mutex_lock(&r->mu);
    while (wait && !r->head && !r->eof) pthread_cond_wait(&r->more, &r->mu);
    int rc;
    qline *q = r->head;
    if (q) {
        r->head = q->next;
        if (!r->head) r->tail = NULL;
        r->queued--;
        r->queued_bytes -= q->len < r->max_line ? q->len : r->max_line;
        *line = q->text;
        *len = q->len;
        free(q);
        pthread_cond_broadcast(&r->room);
        rc = 1;
    } else {
        rc = r->eof ? -1 : 0;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

const char *frigg_linein_error(const frigg_linein *r) { return r->error; }

void frigg_linein_free(frigg_linein *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    int done = r->eof;
    pthread_cond_broadcast(&r->room);
    pthread_mutex_unlock(&r->mu);
    if (!done) pthread_cancel(r->th); /* a no-op once the thread has returned */
    pthread_join(r->th, NULL);
    for (qline *q = r->head, *n; q; q = n) {
        n = q->next;
        free(q->text);
        free(q);
    }
    free(r->cur);
    free(r->error);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->more);
    pthread_cond_destroy(&r->room);
    free(r);
}
