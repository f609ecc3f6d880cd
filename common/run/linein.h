/* linein.h — the lines of an input stream read on a thread of their own, so that a program that runs an engine
 * step between lines (frigg-run, frigg-eval nll) never waits in read() while requests it already has could be
 * stepped and answered: with the reading on the stepping thread, a request was answered only once the next line
 * or the end of the input arrived (an interactive client, a pipe fed one request at a time, waited for ever).
 *
 * The reader thread reads ahead up to a bound (lines and bytes), then waits for the consumer to take some: a
 * fast producer cannot make the program hold more than that. A line longer than max_line bytes is read past
 * without being held (its first max_line bytes are kept, its full length reported), as frigg-run's
 * --max-line-bytes promises. */
#ifndef FRIGG_LINEIN_H
#define FRIGG_LINEIN_H

#include <stdio.h>

typedef struct frigg_linein frigg_linein;

/* Starts reading f (which the reader owns from now on, until frigg_linein_free) on a new thread. max_line: the
 * bytes of a line that are kept; max_queued: lines read ahead of the consumer (at least 1); reading also pauses
 * while the lines queued hold more than max_queued_bytes (one line is always let in). NULL with frigg_error()
 * when the thread cannot start. */
frigg_linein *frigg_linein_start(FILE *f, long max_line, int max_queued, long max_queued_bytes);
/* The next line, without its newline, NUL-terminated: 1 with *line (malloc'd, the caller's) and *len (its full
 * length, more than max_line when it was cut); 0 when wait is 0 and no line is queued yet; -1 at the end of the
 * input (or a read error, frigg_linein_error then non-NULL). wait 1 blocks until a line or the end arrives. */
int frigg_linein_next(frigg_linein *r, int wait, char **line, long *len);
/* The read error that ended the input (strerror), or NULL at a clean end of input. */
const char *frigg_linein_error(const frigg_linein *r);
/* Stops the reader (cancelling a read still waiting) and frees what it holds. NULL is a no-op. */
void frigg_linein_free(frigg_linein *r);

#endif
