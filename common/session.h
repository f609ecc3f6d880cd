/* session.h — a loaded model + backend (+ tokenizer) that turns request objects into response objects.
 * frigg-run feeds it JSON lines; frigg-serve will feed it HTTP bodies. */
#ifndef FRIGG_SESSION_H
#define FRIGG_SESSION_H

#include <jansson.h>

typedef struct {
    const char *model_dir;      /* NULL: frigg_default_model_dir() */
    const char *backend;        /* NULL: auto */
    int threads, device;
    int default_max_tokens;
    int hf_regex;
    int tokenizer_only;         /* --tokenize / --detokenize: do not load weights */
} frigg_session_opts;

typedef struct frigg_session frigg_session;

frigg_session *frigg_session_open(const frigg_session_opts *o);
void frigg_session_close(frigg_session *s);
/* mode 0: generate; 'T': tokenize; 'D': detokenize. Always returns a new object: a response, or
 * {"error":{"message":...}} (with "id" when the request had one). */
json_t *frigg_session_handle(frigg_session *s, const json_t *req, int mode);

#endif
