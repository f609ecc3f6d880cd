/* respfmt.h — OpenAI's response_format, one reading for frigg-run's request lines and frigg-serve's bodies:
 *   {"type": "text"}                 plain text (what every response is without it)
 *   {"type": "json_object"}          any JSON object
 *   {"type": "json_schema", "json_schema": {"name": N, "schema": {...}, "strict": bool, "description": D}}
 * name: 1 to 64 of a-z A-Z 0-9 _ - (as OpenAI requires); schema absent: any JSON value; strict and description
 * change nothing (every keyword the compiler knows is enforced, and one it does not know is an error whatever
 * strict says: gram_schema.c lists them). Unknown members are errors naming them. */
#ifndef FRIGG_RESPFMT_H
#define FRIGG_RESPFMT_H

#include <jansson.h>
#include <stddef.h>

#include "gcache.h"

typedef struct {
    frigg_gkind kind;  /* 0: text (no grammar) */
    char *schema;      /* FRIGG_GK_SCHEMA: the schema as compact JSON (member order kept: it is the output's) */
    size_t schema_len;
} frigg_respfmt;

/* v absent or JSON null: text. 0, or -1 with frigg_error() naming the member ("response_format.json_schema.name
 * ...") and *param (when not NULL, 64 bytes) the member's path. */
int frigg_respfmt_parse(const json_t *v, frigg_respfmt *out, char *param);
void frigg_respfmt_free(frigg_respfmt *f);
/* The compiled grammar from c (NULL for text), or NULL with frigg_error() naming what in the schema is wrong,
 * prefixed "response_format...: ". *failed is set when it failed. */
frigg_gref *frigg_respfmt_grammar(const frigg_respfmt *f, frigg_gcache *c, int *failed);

#endif
