/* chat_internal.h — helpers shared by the chat-template renderer's files (chat.c, chat_tools.c,
 * chat_value.c); not part of the public API.
 *
 * Jinja semantics modelled here: a missing key is Jinja's Undefined (a NULL json_t*), which is
 * falsy and renders as ""; values render with Python's str(); dicts iterate in dictsort order
 * (case-insensitive key, stable). Errors name a path: the innermost call sets ": what is wrong"
 * and each caller prepends its path component with chat_error_prefix. */
#ifndef FRIGG_CHAT_INTERNAL_H
#define FRIGG_CHAT_INTERNAL_H

#include <jansson.h>

#include "base/strbuf.h"

/* Deeper nesting than this in tools or arguments is refused rather than risking the C stack. */
#define CHAT_MAX_DEPTH 64

/* The template's string delimiter token. */
#define CHAT_Q "<|\"|>"

/* obj[key] the way Jinja looks it up: NULL (Undefined) when obj is not an object or lacks key. */
json_t *chat_get(const json_t *obj, const char *key);
/* Python truthiness; NULL (Undefined) is false. */
int chat_truthy(const json_t *v);
/* Python str(v) appended to b: strings raw, None, True/False, ints, float repr; lists and dicts
 * only when every string in them is printable ASCII (Python's repr quoting is not implemented
 * beyond that). NULL renders "". -1 with an error otherwise. */
int chat_py_str(frigg_strbuf *b, const json_t *v);
/* str(v).upper() (Jinja's upper filter); only ASCII text is supported. */
int chat_py_upper(frigg_strbuf *b, const json_t *v);
/* The template's format_argument macro. */
int chat_format_argument(frigg_strbuf *b, const json_t *v, int escape_keys, int depth);

typedef struct {
    const char *key;
    json_t *value;
} chat_kv;
/* Jinja's dictsort: the object's entries ordered by key.lower(), ties in insertion order.
 * Returns a malloc'd array (*n entries; free it) or NULL with an error. */
chat_kv *chat_dictsort(const json_t *obj, size_t *n);

/* Prepend a path component to the current error message ("tools[0]" + ".function: ..."). */
void chat_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Tool declarations block content: format_function_declaration(tool). */
int chat_format_tool_declaration(frigg_strbuf *b, const json_t *tool);

#endif
