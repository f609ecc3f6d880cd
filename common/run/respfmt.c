/* respfmt.c — see respfmt.h. */
#include "respfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static int fail(char *param, const char *p, const char *fmt, const char *arg) {
    if (param) snprintf(param, 64, "%s", p);
    frigg_set_error(fmt, arg);
    return -1;
}

/* A JSON string equal to lit, NUL bytes compared too. */
static int str_is(const json_t *v, const char *lit) {
    return json_is_string(v) && json_string_length(v) == strlen(lit) && !strcmp(json_string_value(v), lit);
}

int frigg_respfmt_parse(const json_t *v, frigg_respfmt *out, char *param) {
    memset(out, 0, sizeof *out);
    if (param) param[0] = 0;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v))
        return fail(param, "response_format", "%s must be an object {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}",
                    "\"response_format\"");
    const json_t *type = json_object_get(v, "type");
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m) if (strcmp(k, "type") && strcmp(k, "json_schema"))
        return fail(param, "response_format", "\"response_format\" has an unknown member \"%s\" (it takes type and json_schema)", k);
    if (json_is_string(type) && strlen(json_string_value(type)) != json_string_length(type))
        return fail(param, "response_format.type", "%s holds a NUL byte (\\u0000)", "\"response_format.type\"");
    if (str_is(type, "text") || str_is(type, "json_object")) {
        if (json_object_get(v, "json_schema"))
            return fail(param, "response_format.json_schema", "%s is only for \"type\": \"json_schema\"",
                        "\"response_format.json_schema\"");
        out->kind = str_is(type, "text") ? 0 : FRIGG_GK_JSON_OBJECT;
        return 0;
    }
    if (!str_is(type, "json_schema"))
        return fail(param, "response_format.type",
                    "%s must be \"text\", \"json_object\" or \"json_schema\"", "\"response_format.type\"");
    const json_t *js = json_object_get(v, "json_schema");
    if (!json_is_object(js))
        return fail(param, "response_format.json_schema", "%s must be an object {\"name\": ..., \"schema\": {...}}",
                    "\"response_format.json_schema\"");
    json_object_foreach((json_t *)js, k, m) if (strcmp(k, "name") && strcmp(k, "schema") && strcmp(k, "strict") &&
                                                strcmp(k, "description"))
        return fail(param, "response_format.json_schema",
                    "\"response_format.json_schema\" has an unknown member \"%s\" (it takes name, schema, strict, "
                    "description)", k);
    const json_t *name = json_object_get(js, "name");
    int ok = json_is_string(name) && json_string_length(name) >= 1 && json_string_length(name) <= 64;
    for (size_t i = 0; ok && i < json_string_length(name); i++) {
        char c = json_string_value(name)[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    }
    if (!ok)
        return fail(param, "response_format.json_schema.name", "%s must be a string of 1 to 64 characters a-z, A-Z, 0-9, _ or -",
                    "\"response_format.json_schema.name\"");
    const json_t *strict = json_object_get(js, "strict"), *desc = json_object_get(js, "description");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return fail(param, "response_format.json_schema.strict", "%s must be a boolean",
                    "\"response_format.json_schema.strict\"");
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return fail(param, "response_format.json_schema.description", "%s must be a string",
                    "\"response_format.json_schema.description\"");
    const json_t *schema = json_object_get(js, "schema");
    if (schema && !json_is_object(schema) && !json_is_boolean(schema))
        return fail(param, "response_format.json_schema.schema", "%s must be a JSON Schema (an object or a boolean)",
                    "\"response_format.json_schema.schema\"");
    out->kind = FRIGG_GK_SCHEMA;
    /* compact, members in their order (jansson keeps it): the order properties are generated in */
    out->schema = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : frigg_xstrdup("{}");
    if (!out->schema) return fail(param, "response_format.json_schema.schema", "%s cannot be written as JSON",
                                  "\"response_format.json_schema.schema\"");
    out->schema_len = strlen(out->schema);
    return 0;
}

void frigg_respfmt_free(frigg_respfmt *f) {
    free(f->schema);
    memset(f, 0, sizeof *f);
}

frigg_gref *frigg_respfmt_grammar(const frigg_respfmt *f, frigg_gcache *c, int *failed) {
    *failed = 0;
    if (!f->kind) return NULL;
    if (!c) {
        *failed = 1;
        frigg_set_error("\"response_format\" needs the model's tokenizer.json (structured output masks its tokens)");
        return NULL;
    }
    frigg_gref *g = frigg_gcache_get(c, f->kind, f->schema, f->schema_len);
    if (!g) {
        *failed = 1;
        char why[1100];
        snprintf(why, sizeof why, "%s", frigg_error());
        frigg_set_error("\"response_format.%s\": %s", f->kind == FRIGG_GK_SCHEMA ? "json_schema.schema" : "type", why);
    }
    return g;
}
