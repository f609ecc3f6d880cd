/* chat_value.c — how the chat template turns JSON values into text: Python str(), the upper
 * filter, format_argument, dictsort; see chat_internal.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_internal.h"
#include "pyfmt.h"
#include "base/util.h"

json_t *chat_get(const json_t *obj, const char *key) {
    return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

int chat_truthy(const json_t *v) {
    if (!v) return 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_TRUE: return 1;
    default: return 0; /* false, null */
    }
}

void chat_error_prefix(const char *fmt, ...) {
    char old[1024], comp[256];
    snprintf(old, sizeof old, "%s", frigg_error());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comp, sizeof comp, fmt, ap);
    va_end(ap);
    /* ": msg", "[i]…" and ".key…" attach directly; a bare key path gets a dot. */
    const char *sep = (old[0] == ':' || old[0] == '[' || old[0] == '.') ? "" : ".";
    frigg_set_error("%s%s%s", comp, sep, old);
}

static void put_scalar(frigg_strbuf *b, const json_t *v) {
    char t[32];
    switch (json_typeof(v)) {
    case JSON_NULL: frigg_sb_puts(b, "None"); break;
    case JSON_TRUE: frigg_sb_puts(b, "True"); break;
    case JSON_FALSE: frigg_sb_puts(b, "False"); break;
    case JSON_INTEGER: frigg_sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL:
        frigg_py_float_repr(json_real_value(v), t);
        frigg_sb_puts(b, t);
        break;
    default: break;
    }
}

/* Python repr() of a string, for the printable-ASCII subset where its quoting rule is simple:
 * single quotes unless the text holds a single quote and no double quote. */
static int put_str_repr(frigg_strbuf *b, const char *s, size_t n) {
    int has_sq = 0, has_dq = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7E || c == '\\') {
            frigg_set_error(": a string inside a list or dict would be rendered with Python repr(); only "
                            "printable ASCII without backslashes is supported there");
            return -1;
        }
        has_sq |= c == '\'';
        has_dq |= c == '"';
    }
    if (has_sq && has_dq) {
        frigg_set_error(": a string with both quote kinds inside a list or dict would need Python's "
                        "repr() escaping, which is not implemented");
        return -1;
    }
    char q = has_sq ? '"' : '\'';
    frigg_sb_putc(b, q);
    frigg_sb_put(b, s, n);
    frigg_sb_putc(b, q);
    return 0;
}

static int put_repr(frigg_strbuf *b, const json_t *v, int depth) {
    if (depth > CHAT_MAX_DEPTH) {
        frigg_set_error(": nested deeper than %d levels", CHAT_MAX_DEPTH);
        return -1;
    }
    if (json_is_string(v)) return put_str_repr(b, json_string_value(v), json_string_length(v));
    if (json_is_array(v)) {
        frigg_sb_putc(b, '[');
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i) frigg_sb_puts(b, ", ");
            if (put_repr(b, e, depth + 1)) return -1;
        }
        frigg_sb_putc(b, ']');
        return 0;
    }
    if (json_is_object(v)) { /* Python dicts print in insertion order */
        frigg_sb_putc(b, '{');
        const char *k;
        json_t *e;
        int first = 1;
        json_object_foreach((json_t *)v, k, e) {
            if (!first) frigg_sb_puts(b, ", ");
            first = 0;
            if (put_str_repr(b, k, strlen(k)) || (frigg_sb_puts(b, ": "), put_repr(b, e, depth + 1)))
                return -1;
        }
        frigg_sb_putc(b, '}');
        return 0;
    }
    put_scalar(b, v);
    return 0;
}

int chat_py_str(frigg_strbuf *b, const json_t *v) {
    if (!v) return 0;
    if (json_is_string(v)) {
        frigg_sb_put(b, json_string_value(v), json_string_length(v));
        return 0;
    }
    return put_repr(b, v, 0);
}

int chat_py_upper(frigg_strbuf *b, const json_t *v) {
    size_t at = b->len;
    if (chat_py_str(b, v)) return -1;
    for (size_t i = at; i < b->len; i++) {
        unsigned char c = (unsigned char)b->p[i];
        if (c >= 0x80) {
            frigg_set_error(": upper-casing non-ASCII text (Python str.upper()) is not implemented");
            return -1;
        }
        if (c >= 'a' && c <= 'z') b->p[i] = (char)(c - 32);
    }
    return 0;
}

typedef struct {
    chat_kv kv;
    char *lower;
    size_t lower_len, index;
} sort_item;

static int cmp_items(const void *pa, const void *pb) {
    const sort_item *a = pa, *b = pb;
    size_t n = a->lower_len < b->lower_len ? a->lower_len : b->lower_len;
    int c = memcmp(a->lower, b->lower, n); /* UTF-8 byte order is code point order */
    if (c) return c;
    if (a->lower_len != b->lower_len) return a->lower_len < b->lower_len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index; /* stable, like Python's sorted() */
}

chat_kv *chat_dictsort(const json_t *obj, size_t *n_out) {
    size_t n = json_object_size(obj), i = 0;
    sort_item *items = frigg_xcalloc(n ? n : 1, sizeof *items);
    const char *k;
    json_t *v;
    int bad = 0;
    json_object_foreach((json_t *)obj, k, v) {
        items[i].kv.key = k;
        items[i].kv.value = v;
        items[i].index = i;
        if (!bad && frigg_py_lower(k, strlen(k), &items[i].lower, &items[i].lower_len)) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", frigg_error());
            frigg_set_error(": key \"%.60s\" %s", k, msg);
            bad = 1;
        }
        i++;
    }
    if (!bad) qsort(items, n, sizeof *items, cmp_items);
    chat_kv *out = frigg_xcalloc(n ? n : 1, sizeof *out);
    for (i = 0; i < n; i++) {
        out[i] = items[i].kv;
        free(items[i].lower);
    }
    free(items);
    if (bad) {
        free(out);
        return NULL;
    }
    *n_out = n;
    return out;
}

int chat_format_argument(frigg_strbuf *b, const json_t *v, int escape_keys, int depth) {
    if (depth > CHAT_MAX_DEPTH) {
        frigg_set_error(": nested deeper than %d levels", CHAT_MAX_DEPTH);
        return -1;
    }
    switch (json_typeof(v)) {
    case JSON_STRING:
        frigg_sb_puts(b, CHAT_Q);
        frigg_sb_put(b, json_string_value(v), json_string_length(v));
        frigg_sb_puts(b, CHAT_Q);
        return 0;
    case JSON_TRUE: frigg_sb_puts(b, "true"); return 0;
    case JSON_FALSE: frigg_sb_puts(b, "false"); return 0;
    case JSON_OBJECT: {
        size_t n;
        chat_kv *kv = chat_dictsort(v, &n);
        if (!kv) return -1;
        frigg_sb_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) frigg_sb_putc(b, ',');
            if (escape_keys) frigg_sb_puts(b, CHAT_Q);
            frigg_sb_puts(b, kv[i].key);
            if (escape_keys) frigg_sb_puts(b, CHAT_Q);
            frigg_sb_putc(b, ':');
            if (chat_format_argument(b, kv[i].value, escape_keys, depth + 1)) {
                chat_error_prefix("%s", kv[i].key);
                free(kv);
                return -1;
            }
        }
        frigg_sb_putc(b, '}');
        free(kv);
        return 0;
    }
    case JSON_ARRAY: {
        frigg_sb_putc(b, '[');
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i) frigg_sb_putc(b, ',');
            if (chat_format_argument(b, e, escape_keys, depth + 1)) {
                chat_error_prefix("[%zu]", i);
                return -1;
            }
        }
        frigg_sb_putc(b, ']');
        return 0;
    }
    default: put_scalar(b, v); return 0;
    }
}
