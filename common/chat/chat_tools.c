/* chat_tools.c — tool declarations inside the system turn: the template's
 * format_function_declaration and format_parameters macros, field for field. */
#include <stdlib.h>
#include <string.h>

#include "chat_internal.h"
#include "base/util.h"

static const char *const standard_keys[] = {"description", "type", "properties", "required", "nullable"};

static int is_standard_key(const char *k) {
    for (size_t i = 0; i < sizeof standard_keys / sizeof *standard_keys; i++)
        if (!strcmp(k, standard_keys[i])) return 1;
    return 0;
}

/* `{% if add_comma %},{% else %}{% set add_comma = true %}{% endif %}` */
static void comma(frigg_strbuf *b, int *add_comma) {
    if (*add_comma) frigg_sb_putc(b, ',');
    *add_comma = 1;
}

/* `<|"|>a<|"|>,<|"|>b<|"|>` for a required list. Jinja would iterate a string's characters or a
 * dict's keys too; only a list is accepted. */
static int put_required(frigg_strbuf *b, const json_t *req) {
    if (!json_is_array(req)) {
        frigg_set_error(": must be an array");
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(req, i, e) {
        if (i) frigg_sb_putc(b, ',');
        frigg_sb_puts(b, CHAT_Q);
        if (chat_py_str(b, e)) {
            chat_error_prefix("[%zu]", i);
            return -1;
        }
        frigg_sb_puts(b, CHAT_Q);
    }
    return 0;
}

static int format_parameters(frigg_strbuf *b, const json_t *props, int filter_keys, int depth);

/* `items:{…}` of an ARRAY-typed property. */
static int format_items(frigg_strbuf *b, const json_t *items, int depth) {
    size_t n;
    chat_kv *kv = chat_dictsort(items, &n);
    if (!kv) return -1;
    int found_first = 0, rc = 0;
    frigg_sb_puts(b, "items:{");
    for (size_t i = 0; i < n && !rc; i++) {
        const char *k = kv[i].key;
        const json_t *v = kv[i].value;
        if (json_is_null(v)) continue;
        if (found_first) frigg_sb_putc(b, ',');
        found_first = 1;
        if (!strcmp(k, "properties")) {
            frigg_sb_puts(b, "properties:{");
            if (json_is_object(v)) rc = format_parameters(b, v, 0, depth + 1);
            frigg_sb_putc(b, '}');
        } else if (!strcmp(k, "required")) {
            frigg_sb_puts(b, "required:[");
            rc = put_required(b, v);
            frigg_sb_putc(b, ']');
        } else if (!strcmp(k, "type")) {
            frigg_sb_puts(b, "type:");
            if (json_is_string(v)) { /* format_argument(item_value | upper) */
                frigg_sb_puts(b, CHAT_Q);
                rc = chat_py_upper(b, v);
                frigg_sb_puts(b, CHAT_Q);
            } else if (json_is_array(v)) { /* format_argument(item_value | map('upper') | list) */
                frigg_sb_putc(b, '[');
                size_t j;
                json_t *e;
                json_array_foreach(v, j, e) {
                    if (j) frigg_sb_putc(b, ',');
                    frigg_sb_puts(b, CHAT_Q);
                    if ((rc = chat_py_upper(b, e))) {
                        chat_error_prefix("[%zu]", j);
                        break;
                    }
                    frigg_sb_puts(b, CHAT_Q);
                }
                frigg_sb_putc(b, ']');
            } else {
                frigg_set_error(": must be a string or an array of strings");
                rc = -1;
            }
        } else {
            frigg_sb_printf(b, "%s:", k);
            rc = chat_format_argument(b, v, 1, depth + 1);
        }
        if (rc) chat_error_prefix("%s", k);
    }
    frigg_sb_putc(b, '}');
    free(kv);
    return rc;
}

/* The upper-cased type equals lit, by length too (a type string may hold a NUL byte). */
static int type_is(const frigg_strbuf *type, const char *lit) {
    return type->len == strlen(lit) && type->p && !memcmp(type->p, lit, type->len);
}

/* One property `name:{description…,enum…,items…,nullable…,properties…,required…,type…}`. */
static int format_property(frigg_strbuf *b, const json_t *value, int depth) {
    int add_comma = 0;
    const json_t *desc = chat_get(value, "description");
    if (chat_truthy(desc)) {
        frigg_sb_puts(b, "description:" CHAT_Q);
        if (chat_py_str(b, desc)) return chat_error_prefix("description"), -1;
        frigg_sb_puts(b, CHAT_Q);
        add_comma = 1;
    }
    frigg_strbuf type = FRIGG_STRBUF_INIT; /* value['type'] | upper */
    if (chat_py_upper(&type, chat_get(value, "type"))) {
        frigg_sb_free(&type);
        return chat_error_prefix("type"), -1;
    }
    const char *t = type.p ? type.p : "";
    int rc = 0;
    if (type_is(&type, "STRING")) {
        const json_t *en = chat_get(value, "enum");
        if (chat_truthy(en)) {
            comma(b, &add_comma);
            frigg_sb_puts(b, "enum:");
            if ((rc = chat_format_argument(b, en, 1, depth + 1))) chat_error_prefix("enum");
        }
    } else if (type_is(&type, "ARRAY")) {
        const json_t *items = chat_get(value, "items");
        if (json_is_object(items) && json_object_size(items)) {
            comma(b, &add_comma);
            if ((rc = format_items(b, items, depth + 1))) chat_error_prefix("items");
        }
    }
    if (!rc && chat_truthy(chat_get(value, "nullable"))) {
        comma(b, &add_comma);
        frigg_sb_puts(b, "nullable:true");
    }
    if (!rc && type_is(&type, "OBJECT")) {
        const json_t *props = chat_get(value, "properties");
        comma(b, &add_comma); /* one of the two branches below always runs: value is a mapping */
        frigg_sb_puts(b, "properties:{");
        if (json_is_object(props)) {
            if ((rc = format_parameters(b, props, 0, depth + 1))) chat_error_prefix("properties");
        } else {
            rc = format_parameters(b, value, 1, depth + 1);
        }
        frigg_sb_putc(b, '}');
        const json_t *req = chat_get(value, "required");
        if (!rc && chat_truthy(req)) {
            comma(b, &add_comma);
            frigg_sb_puts(b, "required:[");
            if ((rc = put_required(b, req))) chat_error_prefix("required");
            frigg_sb_putc(b, ']');
        }
    }
    if (!rc) {
        comma(b, &add_comma);
        frigg_sb_puts(b, "type:" CHAT_Q);
        frigg_sb_put(b, t, type.len);
        frigg_sb_puts(b, CHAT_Q "}");
    }
    frigg_sb_free(&type);
    return rc;
}

/* format_parameters(properties, required, filter_keys): the properties in dictsort order. */
static int format_parameters(frigg_strbuf *b, const json_t *props, int filter_keys, int depth) {
    if (depth > CHAT_MAX_DEPTH) {
        frigg_set_error(": nested deeper than %d levels", CHAT_MAX_DEPTH);
        return -1;
    }
    size_t n;
    chat_kv *kv = chat_dictsort(props, &n);
    if (!kv) return -1;
    int found_first = 0, rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (filter_keys && is_standard_key(kv[i].key)) continue;
        if (found_first) frigg_sb_putc(b, ',');
        found_first = 1;
        frigg_sb_printf(b, "%s:{", kv[i].key);
        if ((rc = format_property(b, kv[i].value, depth))) chat_error_prefix("%s", kv[i].key);
    }
    free(kv);
    return rc;
}

static int format_declaration(frigg_strbuf *b, const json_t *fn) {
    const json_t *name = chat_get(fn, "name");
    if (!json_is_string(name)) {
        frigg_set_error("name: must be a string");
        return -1;
    }
    frigg_sb_puts(b, "declaration:");
    frigg_sb_put(b, json_string_value(name), json_string_length(name));
    frigg_sb_puts(b, "{description:" CHAT_Q);
    if (chat_py_str(b, chat_get(fn, "description"))) return chat_error_prefix("description"), -1;
    frigg_sb_puts(b, CHAT_Q);
    const json_t *params = chat_get(fn, "parameters");
    if (chat_truthy(params)) {
        if (!json_is_object(params)) {
            frigg_set_error("parameters: must be an object");
            return -1;
        }
        frigg_sb_puts(b, ",parameters:{");
        const json_t *props = chat_get(params, "properties");
        if (chat_truthy(props)) {
            if (!json_is_object(props)) {
                frigg_set_error("parameters.properties: must be an object");
                return -1;
            }
            frigg_sb_puts(b, "properties:{");
            if (format_parameters(b, props, 0, 1)) return chat_error_prefix("parameters.properties"), -1;
            frigg_sb_puts(b, "},");
        }
        const json_t *req = chat_get(params, "required");
        if (chat_truthy(req)) {
            frigg_sb_puts(b, "required:[");
            if (put_required(b, req)) return chat_error_prefix("parameters.required"), -1;
            frigg_sb_puts(b, "],");
        }
        const json_t *type = chat_get(params, "type");
        if (chat_truthy(type)) { /* the template closes `parameters:{` only here */
            frigg_sb_puts(b, "type:" CHAT_Q);
            if (chat_py_upper(b, type)) return chat_error_prefix("parameters.type"), -1;
            frigg_sb_puts(b, CHAT_Q "}");
        }
    }
    if (json_object_get(fn, "response")) { /* `'response' in function`: present, even null */
        const json_t *resp = json_object_get(fn, "response");
        frigg_sb_puts(b, ",response:{");
        const json_t *desc = chat_get(resp, "description");
        if (chat_truthy(desc)) {
            frigg_sb_puts(b, "description:" CHAT_Q);
            if (chat_py_str(b, desc)) return chat_error_prefix("response.description"), -1;
            frigg_sb_puts(b, CHAT_Q ",");
        }
        frigg_strbuf type = FRIGG_STRBUF_INIT;
        if (chat_py_upper(&type, chat_get(resp, "type"))) {
            frigg_sb_free(&type);
            return chat_error_prefix("response.type"), -1;
        }
        if (type.p && !strcmp(type.p, "OBJECT")) frigg_sb_puts(b, "type:" CHAT_Q "OBJECT" CHAT_Q "}");
        frigg_sb_free(&type);
    }
    frigg_sb_putc(b, '}');
    return 0;
}

int chat_format_tool_declaration(frigg_strbuf *b, const json_t *tool) {
    const json_t *fn = chat_get(tool, "function");
    if (!json_is_object(fn)) {
        frigg_set_error(json_is_object(tool) ? ".function: must be an object" : ": must be an object");
        return -1;
    }
    if (format_declaration(b, fn)) {
        chat_error_prefix("function");
        return -1;
    }
    return 0;
}
