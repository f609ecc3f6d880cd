/* gram_schema.c — JSON Schema to grammar rules. The subset, keyword by keyword:
 *
 *   true / {} / a schema without type keywords   any JSON value
 *   type: a name or a list ("null", "boolean", "integer", "number", "string", "array", "object"); without
 *         "type" the type is the one the other keywords are about (properties -> object, ...)
 *   nullable: true (OpenAPI)                      adds null
 *   enum, const                                  exactly those values, written compactly (json_dumps)
 *   anyOf, oneOf                                 any of the branches (oneOf's "exactly one" is not checked:
 *                                                a value two branches accept is still generated)
 *   allOf with one schema                        that schema
 *   $ref "#", "#/..." (JSON pointer)             a rule of its own, so recursion works; a cycle that can never
 *                                                end, or that calls itself before a byte, is an error
 *   object: properties (in their order; the ones "required" names must come), required (a name not in
 *           properties is required with additionalProperties' value: any value when that is true or absent, an
 *           error when it is false), additionalProperties (false by default: see grammar.h;
 *           true or a schema: further members after the listed ones)
 *   array:  prefixItems, items (a schema, false, or the old tuple form with additionalItems), minItems,
 *           maxItems, uniqueItems false
 *   string: minLength, maxLength (characters: a literal character or one escape each), pattern
 *           (gram_regex.c), format date, time, date-time (days that exist, seconds to 59: format_regex), email,
 *           uuid, ipv4
 *   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft 4's booleans)
 *   annotations (title, description, examples, default, $comment, $schema, $id, deprecated, readOnly,
 *           writeOnly) and $defs / definitions are read past.
 * Anything else is an error naming the keyword and where it is, as are keywords beside one another that would
 * need an intersection of languages (pattern with maxLength, $ref with type, anyOf with properties). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/strbuf.h"
#include "base/util.h"

#define GS_MAX_RULES 1000
/* A string length range up to this many characters is built inline, a longer one as a rule of its own
 * (gj_string_len_rule); an array's item schema whose automaton has more than GS_INLINE_ITEM_STATES NFA states,
 * where the array repeats it, as a rule too (item_as_rule). Both bound the DFA: unrolled in place, todo-list.json (6
 * items, each with an 80-character string) was 40,110 DFA states and 1.26 s to compile
 * (benchmarks/cpu-2026-12-07/grammar/). */
#define GS_INLINE_STRING_CHARS 8
#define GS_INLINE_ITEM_STATES 200

/* A rule of the schema's own, compiled after the root: a $ref target, or an array's repeated item schema. */
typedef struct {
    char ptr[256];      /* the JSON pointer of node: the $ref, or the path it was met at */
    json_t *node;
    int32_t rule;
} gsref;

/* An array item schema's size, probed once (item_as_rule): nested arrays would otherwise probe their items again
 * in every copy of every enclosing probe, doubling the NFA with each level. */
typedef struct {
    json_t *node;
    int as_rule;
} gsprobe;

typedef struct {
    gnfa *a;
    json_t *root;
    char err[1024];
    int failed, depth;
    char path[512];
    gsref *refs;
    int nrefs, caprefs;
    gsprobe *probes;
    int nprobes, capprobes;
} gsc;

static void gs_fail(gsc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gs_fail(gsc *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "schema at %s: %s", c->path[0] ? c->path : "#", msg);
}

/* Append "/seg" (JSON pointer escaping) to the path; returns the length to restore. */
static size_t path_push(gsc *c, const char *seg) {
    size_t mark = strlen(c->path), n = mark;
    if (n + 2 < sizeof c->path) c->path[n++] = '/';
    for (const char *s = seg; *s && n + 3 < sizeof c->path; s++) {
        if (*s == '~' || *s == '/') {
            c->path[n++] = '~';
            c->path[n++] = *s == '~' ? '0' : '1';
        } else {
            c->path[n++] = *s;
        }
    }
    c->path[n] = 0;
    return mark;
}
static size_t path_push_i(gsc *c, size_t i) {
    char b[24];
    snprintf(b, sizeof b, "%zu", i);
    return path_push(c, b);
}
static void path_pop(gsc *c, size_t mark) { c->path[mark] = 0; }

static const char *const annotations[] = {"title",    "description", "$comment",  "examples",  "default", "$schema",
                                          "$id",      "deprecated",  "readOnly",  "writeOnly", "$defs",   "definitions",
                                          NULL};
static const char *const kw_object[] = {"properties", "required", "additionalProperties", NULL};
static const char *const kw_array[] = {"items", "prefixItems", "minItems", "maxItems", "additionalItems", "uniqueItems", NULL};
static const char *const kw_string[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const kw_numeric[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
static const char *const kw_general[] = {"$ref", "allOf", "anyOf", "oneOf", "const", "enum", "type", "nullable", NULL};

static int in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };
static const char *const type_names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};

static int type_bit(const char *name) {
    for (int i = 0; i < 7; i++)
        if (!strcmp(name, type_names[i])) return 1 << i;
    return 0;
}

static gfrag compile(gsc *c, json_t *s);

static gfrag nothing(gnfa *a) { return gf_alt(a, NULL, 0); }

static gfrag any_value(gsc *c) { return gf_call(c->a, gj_value_rule(c->a)); }

/* The compact JSON text of a value, as a generator writes it: reals in the fewest digits (15) that still read
 * back as the same value, else 17. malloc'd. */
static char *dump_value(json_t *v) {
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    char *s = json_dumps(v, flags | JSON_REAL_PRECISION(15));
    if (!s) return NULL;
    json_t *back = json_loads(s, JSON_DECODE_ANY, NULL);
    int same = back && json_equal(back, v);
    json_decref(back);
    if (same) return s;
    free(s);
    return json_dumps(v, flags | JSON_REAL_PRECISION(17));
}

/* A value as DFM-Mimir's chat template writes a tool call's arguments (toolcall.h): strings as raw text between
 * <|"|> tokens, keys quoted the same way (the parser's escaped-key form), the rest as JSON. NULL when a string
 * holds '<' (a raw string cannot: see gj_string_char) or a value cannot be written. */
static int mimir_put(frigg_strbuf *b, json_t *v) {
    if (json_is_string(v)) {
        if (memchr(json_string_value(v), '<', json_string_length(v))) return -1;
        frigg_sb_put(b, GJ_MIMIR_Q, strlen(GJ_MIMIR_Q));
        frigg_sb_put(b, json_string_value(v), json_string_length(v));
        frigg_sb_put(b, GJ_MIMIR_Q, strlen(GJ_MIMIR_Q));
        return 0;
    }
    if (json_is_array(v)) {
        frigg_sb_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) frigg_sb_put(b, ",", 1);
            if (mimir_put(b, json_array_get(v, i))) return -1;
        }
        frigg_sb_put(b, "]", 1);
        return 0;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        int first = 1;
        frigg_sb_put(b, "{", 1);
        json_object_foreach(v, k, m) {
            if (!first) frigg_sb_put(b, ",", 1);
            first = 0;
            json_t *ks = json_string(k);
            int rc = mimir_put(b, ks);
            json_decref(ks);
            frigg_sb_put(b, ":", 1);
            if (rc || mimir_put(b, m)) return -1;
        }
        frigg_sb_put(b, "}", 1);
        return 0;
    }
    char *s = dump_value(v);
    if (!s) return -1;
    frigg_sb_put(b, s, strlen(s));
    free(s);
    return 0;
}

static gfrag literal(gsc *c, json_t *v) {
    if (c->a->mimir) {
        frigg_strbuf b = {0};
        if (mimir_put(&b, v)) {
            frigg_sb_free(&b);
            gs_fail(c, "a value that a tool call's arguments cannot hold (a string with '<')");
            return nothing(c->a);
        }
        gfrag f = gf_lit(c->a, b.p ? b.p : "", b.len);
        frigg_sb_free(&b);
        return f;
    }
    char *s = dump_value(v);
    if (!s) {
        gs_fail(c, "a value that cannot be written as JSON");
        return nothing(c->a);
    }
    gfrag f = gf_lit(c->a, s, strlen(s));
    free(s);
    return f;
}

static int json_type_bit(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE: case JSON_FALSE: return T_BOOL;
    case JSON_INTEGER: return T_INT | T_NUM;
    case JSON_REAL: {
        double d = json_real_value(v);
        return d == floor(d) && fabs(d) < 9e15 ? T_INT | T_NUM : T_NUM;
    }
    case JSON_STRING: return T_STR;
    case JSON_ARRAY: return T_ARR;
    default: return T_OBJ;
    }
}

/* A non-negative integer keyword (minItems, maxLength, ...): -1 when absent, -2 on error (reported). */
static long count_kw(gsc *c, json_t *s, const char *k) {
    json_t *v = json_object_get(s, k);
    if (!v) return -1;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (!json_is_number(v) || d < 0 || d != floor(d)) {
        gs_fail(c, "'%s' must be a non-negative integer", k);
        return -2;
    }
    if (d > 100000) {
        gs_fail(c, "'%s' is %.0f: counts above 100000 are not supported", k, d);
        return -2;
    }
    return (long)d;
}

/* ---- $ref ---- */
static json_t *resolve_pointer(gsc *c, const char *ref) {
    if (ref[0] != '#') {
        gs_fail(c, "'$ref' '%s': only references inside this schema (\"#...\") are supported", ref);
        return NULL;
    }
    json_t *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') {
        gs_fail(c, "'$ref' '%s': anchors are not supported (use a JSON pointer, \"#/$defs/name\")", ref);
        return NULL;
    }
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof seg) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                seg[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else if (p[0] == '%' && p[1] && p[2]) {
                char hex[3] = {p[1], p[2], 0};
                char *end;
                long v = strtol(hex, &end, 16);
                if (*end) {
                    seg[n++] = *p++;
                    continue;
                }
                seg[n++] = (char)v;
                p += 3;
            } else {
                seg[n++] = *p++;
            }
        }
        seg[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(seg, &end, 10);
            cur = *seg && !*end && i >= 0 ? json_array_get(cur, (size_t)i) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur) {
            gs_fail(c, "'$ref' '%s' points at nothing in the schema", ref);
            return NULL;
        }
    }
    return cur;
}

/* A new rule for node, named ptr (shorter than gsref.ptr), its body compiled after the root; a call of it. */
static gfrag new_rule(gsc *c, const char *ptr, json_t *node) {
    if (c->nrefs >= GS_MAX_RULES) {
        gs_fail(c, "more than %d rules ('$ref' targets and repeated array items)", GS_MAX_RULES);
        return nothing(c->a);
    }
    if (c->nrefs == c->caprefs) {
        c->caprefs = c->caprefs ? c->caprefs * 2 : 8;
        c->refs = frigg_xrealloc(c->refs, (size_t)c->caprefs * sizeof *c->refs);
    }
    gsref *r = &c->refs[c->nrefs++];
    snprintf(r->ptr, sizeof r->ptr, "%s", ptr);
    r->node = node;
    r->rule = gnfa_rule(c->a, ptr);
    return gf_call(c->a, r->rule);
}

static gfrag ref_call(gsc *c, const char *ref) {
    if (!strcmp(ref, "#")) return gf_call(c->a, 0);
    if (strlen(ref) >= sizeof c->refs[0].ptr) {
        gs_fail(c, "'$ref' is longer than %zu bytes", sizeof c->refs[0].ptr - 1);
        return nothing(c->a);
    }
    for (int i = 0; i < c->nrefs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) return gf_call(c->a, c->refs[i].rule);
    json_t *target = resolve_pointer(c, ref);
    if (!target) return nothing(c->a);
    return new_rule(c, ref, target);
}

/* ---- strings ---- */
/* Dates are days that exist (30-day months, February's 28 and a leap year's 29th, years 0001 to 9999) and seconds
 * stop at 59: RFC 3339 also has year 0000 and a leap second 60 (only where one was inserted, which a grammar
 * cannot know), which strict validators (Python's jsonschema with rfc3339-validator, datetime.date) refuse, so a
 * generated value is valid for every one of them. */
#define YEAR "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
#define LEAP_YEAR "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
#define MONTH_DAY "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
static const char *format_regex(const char *f) {
#define DATE "(" YEAR "-" MONTH_DAY "|" LEAP_YEAR "-02-29)"
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define OCTET "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#define LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    if (!strcmp(f, "date")) return "^" DATE "$";
    if (!strcmp(f, "time")) return "^" TIME "$";
    if (!strcmp(f, "date-time")) return "^" DATE "T" TIME "$";
    if (!strcmp(f, "email")) return "^" ATOM "(\\." ATOM ")*@" LABEL "(\\." LABEL ")+$";
    if (!strcmp(f, "uuid")) return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
    if (!strcmp(f, "ipv4")) return "^(" OCTET "\\.){3}" OCTET "$";
    return NULL;
#undef DATE
#undef TIME
#undef YEAR
#undef LEAP_YEAR
#undef MONTH_DAY
#undef OCTET
#undef ATOM
#undef LABEL
}

static gfrag quoted_regex(gsc *c, const char *re, size_t len, const char *what) {
    char err[300];
    gfrag body;
    if (grx_compile(c->a, re, len, c->a->mimir ? 0 : GRX_IN_STRING, &body, err, sizeof err)) {
        gs_fail(c, "'%s': %s", what, err);
        return nothing(c->a);
    }
    return gf_seq(c->a, gj_quote(c->a), gf_seq(c->a, body, gj_quote(c->a)));
}

static gfrag string_frag(gsc *c, json_t *s) {
    gnfa *a = c->a;
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    long mn = count_kw(c, s, "minLength"), mx = count_kw(c, s, "maxLength");
    if (c->failed) return nothing(a);
    int lens = mn >= 0 || mx >= 0;
    if (pat && (fmt || lens)) {
        gs_fail(c, "'pattern' beside '%s' is not supported (it would need an intersection)", fmt ? "format" : lens ? (mn >= 0 ? "minLength" : "maxLength") : "");
        return nothing(a);
    }
    if (fmt && lens) {
        gs_fail(c, "'format' beside '%s' is not supported", mn >= 0 ? "minLength" : "maxLength");
        return nothing(a);
    }
    if (pat) {
        if (!json_is_string(pat)) {
            gs_fail(c, "'pattern' must be a string");
            return nothing(a);
        }
        return quoted_regex(c, json_string_value(pat), json_string_length(pat), "pattern");
    }
    if (fmt) {
        const char *re = json_is_string(fmt) ? format_regex(json_string_value(fmt)) : NULL;
        if (!re) {
            if (json_is_string(fmt)) gs_fail(c, "format '%s' is not supported (date, time, date-time, email, uuid, ipv4 are)", json_string_value(fmt));
            else gs_fail(c, "'format' must be a string");
            return nothing(a);
        }
        return quoted_regex(c, re, strlen(re), "format");
    }
    if (!lens) return gf_call(a, gj_string_rule(a));
    if (mn < 0) mn = 0;
    if (mx >= 0 && mx < mn) {
        gs_fail(c, "'maxLength' %ld is below 'minLength' %ld", mx, mn);
        return nothing(a);
    }
    /* short ranges inline: a call costs the masks (a token across the string's end needs the caller's state)
     * and saves nothing there */
    if ((mx < 0 ? mn : mx) > GS_INLINE_STRING_CHARS) return gf_call(a, gj_string_len_rule(a, mn, mx));
    return gj_string_len(a, mn, mx);
}

/* ---- integers and numbers ---- */
/* One bound: *has 0 when absent; inclusive integer value in *v. lower: round up. -1 on error. */
static int int_bound(gsc *c, json_t *s, int lower, int *has, int64_t *v) {
    const char *kin = lower ? "minimum" : "maximum", *kex = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    json_t *inc = json_object_get(s, kin), *ex = json_object_get(s, kex);
    *has = 0;
    double best = 0;
    int have = 0, best_ex = 0;
    if (inc) {
        if (!json_is_number(inc)) return gs_fail(c, "'%s' must be a number", kin), -1;
        best = json_number_value(inc);
        have = 1;
    }
    if (ex && (json_is_true(ex) || json_is_false(ex))) { /* draft 4: a flag on minimum / maximum */
        if (json_is_true(ex)) {
            if (!inc) return gs_fail(c, "'%s': true needs '%s'", kex, kin), -1;
            best_ex = 1;
        }
    } else if (ex) {
        if (!json_is_number(ex)) return gs_fail(c, "'%s' must be a number", kex), -1;
        double e = json_number_value(ex);
        if (!have || (lower ? e >= best : e <= best)) {
            best = e;
            best_ex = 1;
            have = 1;
        }
    }
    if (!have) return 0;
    if (!isfinite(best) || fabs(best) > 9.0e18) return gs_fail(c, "'%s' is out of the range of 64-bit integers", best_ex ? kex : kin), -1;
    double r = lower ? ceil(best) : floor(best);
    if (best_ex && r == best) r += lower ? 1 : -1;
    *has = 1;
    *v = (int64_t)r;
    return 0;
}

static gfrag integer_frag(gsc *c, json_t *s) {
    int hl, hh;
    int64_t lo = 0, hi = 0;
    if (int_bound(c, s, 1, &hl, &lo) || int_bound(c, s, 0, &hh, &hi)) return nothing(c->a);
    if (hl && hh && lo > hi) {
        gs_fail(c, "no integer lies between the minimum and the maximum");
        return nothing(c->a);
    }
    return gj_integer(c->a, hl, lo, hh, hi);
}

/* ---- objects ---- */
static gfrag comma_ws(gnfa *a) { return gf_seq(a, gf_lit(a, ",", 1), gj_ws(a)); }

static gfrag object_frag(gsc *c, json_t *s) {
    gnfa *a = c->a;
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return gs_fail(c, "'properties' must be an object"), nothing(a);
    if (req && !json_is_array(req)) return gs_fail(c, "'required' must be an array of names"), nothing(a);
    size_t nreq = req ? json_array_size(req) : 0;
    for (size_t i = 0; i < nreq; i++)
        if (!json_is_string(json_array_get(req, i))) return gs_fail(c, "'required' must be an array of names"), nothing(a);
    /* the members in order: properties, then required names properties does not list */
    size_t np = props ? json_object_size(props) : 0, k = 0;
    const char **keys = frigg_xcalloc(np + nreq + 1, sizeof *keys);
    json_t **sch = frigg_xcalloc(np + nreq + 1, sizeof *sch);
    int *isreq = frigg_xcalloc(np + nreq + 1, sizeof *isreq);
    const char *key;
    json_t *v;
    if (props) json_object_foreach(props, key, v) {
            keys[k] = key;
            sch[k] = v;
            k++;
        }
    for (size_t i = 0; i < nreq; i++) {
        const char *r = json_string_value(json_array_get(req, i));
        size_t j = 0;
        while (j < k && strcmp(keys[j], r)) j++;
        if (j == k) {
            /* a name properties does not list is an additional member: its value is additionalProperties' (any
             * value when that is true or absent), and where that is false no document can have it */
            if (json_is_false(addl)) {
                gs_fail(c, "'required' names '%s', which 'properties' does not list and 'additionalProperties' false "
                           "forbids: no document can have it", r);
                break;
            }
            keys[k] = r;
            sch[k] = json_is_object(addl) ? addl : NULL; /* NULL: any value */
            k++;
        }
        isreq[j] = 1;
    }
    gfrag open = gf_seq(a, gf_lit(a, "{", 1), gj_ws(a));
    int32_t (*N)[2] = frigg_xmalloc((k + 1) * sizeof *N);
    for (size_t i = 0; i <= k; i++) N[i][0] = gnfa_state(a), N[i][1] = gnfa_state(a);
    gf_join(a, open.e, N[0][0]);
    for (size_t i = 0; i < k && !c->failed; i++) {
        json_t *ks = json_string(keys[i]);
        gfrag m = literal(c, ks);
        json_decref(ks);
        m = gf_seq(a, m, gf_seq(a, gj_ws(a), gf_seq(a, gf_lit(a, ":", 1), gj_ws(a))));
        size_t mark = path_push(c, "properties");
        size_t mark2 = path_push(c, keys[i]);
        gfrag val = sch[i] ? compile(c, sch[i]) : any_value(c);
        path_pop(c, mark2);
        path_pop(c, mark);
        m = gf_seq(a, m, gf_seq(a, val, gj_ws(a)));
        gf_join(a, N[i][0], m.s);
        gfrag cm = comma_ws(a);
        gf_join(a, N[i][1], cm.s);
        gf_join(a, cm.e, m.s);
        gf_join(a, m.e, N[i + 1][1]);
        if (!isreq[i]) {
            gf_join(a, N[i][0], N[i + 1][0]);
            gf_join(a, N[i][1], N[i + 1][1]);
        }
    }
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        gs_fail(c, "'additionalProperties' must be a boolean or a schema");
    if (addl && !json_is_false(addl) && !c->failed) {
        size_t mark = path_push(c, "additionalProperties");
        gfrag val = json_is_true(addl) ? any_value(c) : compile(c, addl);
        path_pop(c, mark);
        /* a further member's name is none of the listed ones (each may appear once) */
        gfrag name = k && !a->mimir ? gj_string_except(a, (const char *const *)keys, (int)k) : gf_call(a, gj_string_rule(a));
        gfrag m = gf_seq(a, name, gf_seq(a, gj_ws(a), gf_seq(a, gf_lit(a, ":", 1), gj_ws(a))));
        m = gf_seq(a, m, gf_seq(a, val, gj_ws(a)));
        gf_join(a, N[k][0], m.s);
        gfrag cm = comma_ws(a);
        gf_join(a, N[k][1], cm.s);
        gf_join(a, cm.e, m.s);
        gf_join(a, m.e, N[k][1]);
    }
    int32_t end = gnfa_state(a);
    gnfa_edge_add(a, N[k][0], GE_BYTE, '}', '}', end, -1);
    gnfa_edge_add(a, N[k][1], GE_BYTE, '}', '}', end, -1);
    free(N);
    free(keys);
    free(sch);
    free(isreq);
    return (gfrag){open.s, end};
}

/* ---- arrays ---- */
/* A rule whose body is the schema s at the current path (compiled after the root, as a $ref target is): an
 * array's item schema that the array repeats. */
static gfrag sub_rule(gsc *c, json_t *s) {
    for (int i = 0; i < c->nrefs; i++)
        if (c->refs[i].node == s && !strcmp(c->refs[i].ptr, c->path)) return gf_call(c->a, c->refs[i].rule);
    if (strlen(c->path) >= sizeof c->refs[0].ptr) return compile(c, s); /* too deep to name: inline */
    return new_rule(c, c->path, s);
}

/* Whether an array that builds its rest schema es (at the current path) `copies` times should call it as one
 * rule instead: where one copy's automaton is large (a probe compiled here, left unreachable: the DFA is built
 * from the rules' starts). */
static int item_as_rule(gsc *c, json_t *es, long copies) {
    if (copies < 2 || !es || json_is_true(es)) return 0;
    for (int i = 0; i < c->nprobes; i++)
        if (c->probes[i].node == es) return c->probes[i].as_rule;
    size_t before = c->a->n;
    compile(c, es);
    int as_rule = !c->failed && c->a->n - before > GS_INLINE_ITEM_STATES;
    if (c->nprobes == c->capprobes) {
        c->capprobes = c->capprobes ? c->capprobes * 2 : 8;
        c->probes = frigg_xrealloc(c->probes, (size_t)c->capprobes * sizeof *c->probes);
    }
    c->probes[c->nprobes++] = (gsprobe){es, as_rule};
    return as_rule;
}

static gfrag array_frag(gsc *c, json_t *s) {
    gnfa *a = c->a;
    json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    json_t *addi = json_object_get(s, "additionalItems"), *uniq = json_object_get(s, "uniqueItems");
    const char *rest_name = "items";
    json_t *rest = items; /* NULL: any value */
    if (uniq && !json_is_false(uniq)) return gs_fail(c, "'uniqueItems' true is not supported"), nothing(a);
    if (json_is_array(items)) { /* the tuple form of drafts 4 to 2019-09 */
        if (prefix) return gs_fail(c, "'items' as an array beside 'prefixItems'"), nothing(a);
        prefix = items;
        rest = addi;
        rest_name = "additionalItems";
    } else if (addi) {
        return gs_fail(c, "'additionalItems' needs 'items' as an array"), nothing(a);
    }
    if (prefix && !json_is_array(prefix)) return gs_fail(c, "'prefixItems' must be an array of schemas"), nothing(a);
    if (rest && !json_is_boolean(rest) && !json_is_object(rest))
        return gs_fail(c, "'%s' must be a schema", rest_name), nothing(a);
    long k = prefix ? (long)json_array_size(prefix) : 0;
    long m = count_kw(c, s, "minItems"), M = count_kw(c, s, "maxItems");
    if (c->failed) return nothing(a);
    if (m < 0) m = 0;
    if (json_is_false(rest) && (M < 0 || M > k)) M = k;
    if (M >= 0 && m > M)
        return gs_fail(c, "'minItems' %ld is more than the %ld items allowed", m, M), nothing(a);
    long U = m > k ? m : k;
    if (U == 0 && M != 0) U = 1;
    if (M >= 0 && U > M) U = M;
    long last = M < 0 ? U : M;
    long rest_copies = (last > k ? last - k : 0) + (M < 0); /* places the rest schema is built at */
    size_t rmark = path_push(c, rest_name);
    int rest_rule = item_as_rule(c, rest, rest_copies);
    path_pop(c, rmark);
    gfrag open = gf_seq(a, gf_lit(a, "[", 1), gj_ws(a));
    int32_t *A = frigg_xmalloc((size_t)(last + 1) * sizeof *A);
    for (long j = 0; j <= last; j++) A[j] = gnfa_state(a);
    gf_join(a, open.e, A[0]);
    for (long j = 0; j < last && !c->failed && !a->overflow; j++) {
        json_t *es = j < k ? json_array_get(prefix, (size_t)j) : rest;
        size_t mark = j < k ? path_push(c, "prefixItems") : path_push(c, rest_name);
        size_t mark2 = j < k ? path_push_i(c, (size_t)j) : strlen(c->path);
        gfrag e = j >= k && rest_rule ? sub_rule(c, es) : es && !json_is_true(es) ? compile(c, es) : any_value(c);
        path_pop(c, mark2);
        path_pop(c, mark);
        e = gf_seq(a, e, gj_ws(a));
        if (j) e = gf_seq(a, comma_ws(a), e);
        gf_join(a, A[j], e.s);
        gf_join(a, e.e, A[j + 1]);
    }
    if (M < 0 && !c->failed) { /* further items of the rest schema, each after a comma */
        size_t mark = path_push(c, rest_name);
        gfrag e = rest_rule ? sub_rule(c, rest) : rest && !json_is_true(rest) ? compile(c, rest) : any_value(c);
        path_pop(c, mark);
        e = gf_seq(a, comma_ws(a), gf_seq(a, e, gj_ws(a)));
        gf_join(a, A[U], e.s);
        gf_join(a, e.e, A[U]);
    }
    int32_t end = gnfa_state(a);
    for (long j = m; j <= last; j++) gnfa_edge_add(a, A[j], GE_BYTE, ']', ']', end, -1);
    free(A);
    return (gfrag){open.s, end};
}

/* ---- one schema ---- */
static int only_annotations_beside(gsc *c, json_t *s, const char *kw, const char *const *also) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!strcmp(k, kw) || in_list(annotations, k) || (also && in_list(also, k))) continue;
        gs_fail(c, "'%s' beside '%s' is not supported", kw, k);
        return 0;
    }
    return 1;
}

static gfrag alternatives(gsc *c, json_t *arr, const char *kw, int add_null) {
    gnfa *a = c->a;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return gs_fail(c, "'%s' must be a non-empty array of schemas", kw), nothing(a);
    size_t n = json_array_size(arr);
    gfrag *alts = frigg_xmalloc((n + 1) * sizeof *alts);
    for (size_t i = 0; i < n && !c->failed; i++) {
        size_t mark = path_push(c, kw);
        path_push_i(c, i);
        alts[i] = compile(c, json_array_get(arr, i));
        path_pop(c, mark);
    }
    if (add_null) alts[n++] = gf_lit(a, "null", 4);
    gfrag f = c->failed ? nothing(a) : gf_alt(a, alts, (int)n);
    free(alts);
    return f;
}

static gfrag compile_object_schema(gsc *c, json_t *s) {
    gnfa *a = c->a;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (in_list(annotations, k) || in_list(kw_general, k) || in_list(kw_object, k) || in_list(kw_array, k) ||
            in_list(kw_string, k) || in_list(kw_numeric, k))
            continue;
        gs_fail(c, "unsupported keyword '%s'", k);
        return nothing(a);
    }
    json_t *nullable = json_object_get(s, "nullable");
    if (nullable && !json_is_boolean(nullable)) return gs_fail(c, "'nullable' must be a boolean"), nothing(a);
    int add_null = json_is_true(nullable);
    const char *const nl[] = {"nullable", NULL};
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        if (!json_is_string(ref)) return gs_fail(c, "'$ref' must be a string"), nothing(a);
        if (!only_annotations_beside(c, s, "$ref", nl)) return nothing(a);
        gfrag f = ref_call(c, json_string_value(ref));
        if (add_null) {
            gfrag alts[2] = {f, gf_lit(a, "null", 4)};
            f = gf_alt(a, alts, 2);
        }
        return f;
    }
    json_t *all = json_object_get(s, "allOf");
    if (all) {
        if (!json_is_array(all) || json_array_size(all) != 1)
            return gs_fail(c, "'allOf' with %zu schemas is not supported (only one)", json_is_array(all) ? json_array_size(all) : 0),
                   nothing(a);
        if (!only_annotations_beside(c, s, "allOf", NULL)) return nothing(a);
        size_t mark = path_push(c, "allOf");
        path_push(c, "0");
        gfrag f = compile(c, json_array_get(all, 0));
        path_pop(c, mark);
        return f;
    }
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (any && one) return gs_fail(c, "'anyOf' beside 'oneOf' is not supported"), nothing(a);
    if (any || one) {
        const char *kw = any ? "anyOf" : "oneOf";
        if (!only_annotations_beside(c, s, kw, nl)) return nothing(a);
        return alternatives(c, any ? any : one, kw, add_null);
    }
    /* the types: "type", or those the other keywords are about */
    int types = 0;
    json_t *type = json_object_get(s, "type");
    if (type) {
        size_t n = json_is_array(type) ? json_array_size(type) : 1;
        if (json_is_array(type) && n == 0) return gs_fail(c, "'type' is an empty list"), nothing(a);
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_is_array(type) ? json_array_get(type, i) : type;
            int b = json_is_string(t) ? type_bit(json_string_value(t)) : 0;
            if (!b) {
                if (json_is_string(t)) gs_fail(c, "'type' '%s' is not a JSON Schema type", json_string_value(t));
                else gs_fail(c, "'type' must be a type name or a list of them");
                return nothing(a);
            }
            types |= b;
        }
    }
    json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    if (cst || en) {
        const char *kw = cst ? "const" : "enum";
        if (cst && en) return gs_fail(c, "'const' beside 'enum' is not supported"), nothing(a);
        const char *const tl[] = {"type", "nullable", NULL};
        if (!only_annotations_beside(c, s, kw, tl)) return nothing(a);
        if (en && (!json_is_array(en) || !json_array_size(en))) return gs_fail(c, "'enum' must be a non-empty array"), nothing(a);
        size_t n = cst ? 1 : json_array_size(en);
        gfrag *alts = frigg_xmalloc((n + 1) * sizeof *alts);
        int m = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *v2 = cst ? cst : json_array_get(en, i);
            /* with a type, a value of another type could never validate: left out */
            if (types && !(json_type_bit(v2) & (types | (add_null ? T_NULL : 0)))) continue;
            alts[m++] = literal(c, v2);
        }
        if (add_null && !(types & T_NULL)) {
            int has_null = 0;
            for (size_t i = 0; i < n; i++) has_null |= json_is_null(cst ? cst : json_array_get(en, i));
            if (!has_null && types) alts[m++] = gf_lit(a, "null", 4);
        }
        gfrag f = gf_empty(a);
        if (!m) gs_fail(c, "no '%s' value is of the type the schema names", kw);
        else f = gf_alt(a, alts, m);
        free(alts);
        return f;
    }
    int about = 0;
    json_object_foreach(s, k, v) {
        if (in_list(kw_object, k)) about |= T_OBJ;
        if (in_list(kw_array, k)) about |= T_ARR;
        if (in_list(kw_string, k)) about |= T_STR;
        if (in_list(kw_numeric, k)) about |= T_NUM | T_INT;
    }
    if (!types) {
        if (!about) {
            if (!add_null) return any_value(c);
            types = T_ALL;
        } else {
            types = about & (T_NUM | T_INT) ? (about & ~T_INT) : about;
        }
    }
    /* a keyword about a type the schema does not allow would be ignored by a validator; here it is refused */
    json_object_foreach(s, k, v) {
        int t = in_list(kw_object, k) ? T_OBJ : in_list(kw_array, k) ? T_ARR : in_list(kw_string, k) ? T_STR
              : in_list(kw_numeric, k) ? (T_NUM | T_INT) : 0;
        if (t && !(t & types)) return gs_fail(c, "'%s' does not apply to the types the schema allows", k), nothing(a);
    }
    if (add_null) types |= T_NULL;
    if (types == T_ALL && !about) return any_value(c);
    gfrag alts[7];
    int n = 0;
    if (types & T_NULL) alts[n++] = gf_lit(a, "null", 4);
    if (types & T_BOOL) {
        gfrag b[2] = {gf_lit(a, "true", 4), gf_lit(a, "false", 5)};
        alts[n++] = gf_alt(a, b, 2);
    }
    if (types & T_NUM) {
        for (int i = 0; kw_numeric[i]; i++)
            if (json_object_get(s, kw_numeric[i]))
                return gs_fail(c, "'%s' on type number is not supported (only on integers)", kw_numeric[i]), nothing(a);
        alts[n++] = gj_number(a); /* integers are numbers too */
    } else if (types & T_INT) {
        alts[n++] = integer_frag(c, s);
    }
    if (types & T_STR) alts[n++] = string_frag(c, s);
    if (types & T_ARR) alts[n++] = array_frag(c, s);
    if (types & T_OBJ) alts[n++] = object_frag(c, s);
    if (c->failed) return nothing(a);
    return n == 1 ? alts[0] : gf_alt(a, alts, n);
}

static gfrag compile(gsc *c, json_t *s) {
    if (c->failed) return nothing(c->a);
    if (c->a->overflow) {
        gs_fail(c, "the schema is too large: more than %d automaton states", FRIGG_GRAMMAR_MAX_NFA_STATES);
        return nothing(c->a);
    }
    if (json_is_true(s)) return any_value(c);
    if (json_is_false(s)) {
        gs_fail(c, "the schema false matches nothing");
        return nothing(c->a);
    }
    if (!json_is_object(s)) {
        gs_fail(c, "a schema must be an object or a boolean");
        return nothing(c->a);
    }
    if (++c->depth > FRIGG_GRAMMAR_MAX_DEPTH) {
        gs_fail(c, "the schema nests deeper than %d levels", FRIGG_GRAMMAR_MAX_DEPTH);
        c->depth--;
        return nothing(c->a);
    }
    gfrag f = compile_object_schema(c, s);
    c->depth--;
    return f;
}

/* Into a: rule 0 the root, a rule per $ref target (and the string and value rules where used). 0, or -1
 * with frigg_error(). */
static int compile_rule(gnfa *a, const char *text, size_t len, int32_t r0);

int gschema_compile(gnfa *a, const char *text, size_t len) { return compile_rule(a, text, len, -1); }

int gschema_compile_call(gnfa *a, const char *text, size_t len, gfrag *out) {
    int32_t r = gnfa_rule(a, "#");
    if (compile_rule(a, text, len, r)) return -1;
    *out = gf_call(a, r);
    return 0;
}

/* The schema into rule r0 (-1: a new rule "#"), its $refs into rules of their own. */
static int compile_rule(gnfa *a, const char *text, size_t len, int32_t r0) {
    if (len > FRIGG_GRAMMAR_MAX_SCHEMA_BYTES) {
        frigg_set_error("schema: %zu bytes, more than the %u allowed", len, FRIGG_GRAMMAR_MAX_SCHEMA_BYTES);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        frigg_set_error("schema: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return -1;
    }
    gsc c = {.a = a, .root = root, .path = "#"};
    if (r0 < 0) r0 = gnfa_rule(a, "#");
    gfrag f = compile(&c, root);
    if (!c.failed) {
        gf_join(a, a->rules[r0].start, f.s);
        gf_join(a, f.e, a->rules[r0].end);
    }
    for (int i = 0; i < c.nrefs && !c.failed; i++) {
        gsref *r = &c.refs[i];
        snprintf(c.path, sizeof c.path, "%s", r->ptr);
        c.depth = 0;
        gfrag g = compile(&c, r->node);
        if (c.failed) break;
        gf_join(a, a->rules[r->rule].start, g.s);
        gf_join(a, g.e, a->rules[r->rule].end);
    }
    if (!c.failed && a->overflow) {
        c.path[0] = 0;
        gs_fail(&c, "the schema is too large: more than %d automaton states", FRIGG_GRAMMAR_MAX_NFA_STATES);
    }
    free(c.refs);
    free(c.probes);
    json_decref(root);
    if (c.failed) {
        frigg_set_error("%s", c.err);
        return -1;
    }
    return 0;
}
