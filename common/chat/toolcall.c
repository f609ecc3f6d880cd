/* toolcall.c — see toolcall.h. */
#include "toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyfmt.h"
#include "base/strbuf.h"
#include "base/util.h"

#define OPEN "<|tool_call>"
#define CLOSE "<tool_call|>"
#define Q "<|\"|>"
#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t n, pos;
    frigg_strbuf json; /* the arguments, re-written as JSON */
    int call_index;
} parser;

static int fail(parser *p, const char *what) {
    frigg_set_error("tool call %d: %s at byte %zu", p->call_index, what, p->pos);
    return -1;
}

static int at(const parser *p, const char *lit) {
    size_t l = strlen(lit);
    return p->n - p->pos >= l && !memcmp(p->s + p->pos, lit, l);
}

static void skip_ws(parser *p) {
    while (p->pos < p->n && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos]) p->pos++;
}

/* JSON string literal of raw bytes; the bytes must be valid UTF-8. */
static int put_json_string(parser *p, const char *s, size_t n) {
    frigg_sb_putc(&p->json, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = frigg_utf8_decode(s + i, n - i, &cp);
        if (!l) return fail(p, "invalid UTF-8 in a string or key");
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            frigg_sb_putc(&p->json, '\\');
            frigg_sb_putc(&p->json, (char)c);
        } else if (c == '\n') {
            frigg_sb_puts(&p->json, "\\n");
        } else if (c == '\t') {
            frigg_sb_puts(&p->json, "\\t");
        } else if (c == '\r') {
            frigg_sb_puts(&p->json, "\\r");
        } else if (c < 0x20) {
            frigg_sb_printf(&p->json, "\\u%04x", c);
        } else {
            frigg_sb_put(&p->json, s + i, (size_t)l);
        }
        i += (size_t)l;
    }
    frigg_sb_putc(&p->json, '"');
    return 0;
}

/* <|"|>raw<|"|> at p->pos. */
static int parse_string(parser *p) {
    size_t start = p->pos + strlen(Q);
    const char *end = memmem(p->s + start, p->n - start, Q, strlen(Q));
    if (!end) return fail(p, "unterminated <|\"|> string");
    p->pos = start;
    if (put_json_string(p, p->s + start, (size_t)(end - (p->s + start)))) return -1;
    p->pos = (size_t)(end - p->s) + strlen(Q);
    return 0;
}

static int is_delim(const parser *p) {
    return p->pos >= p->n || (p->s[p->pos] && strchr(",}] \t\r\n", p->s[p->pos]));
}

/* A JSON-grammar number (Python's str() of an int or a finite float is one), copied verbatim. */
static int parse_number(parser *p) {
    const char *s = p->s;
    size_t i = p->pos, n = p->n;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return fail(p, "expected a value (<|\"|>string<|\"|>, number, true, false, None, {…} or […])");
    }
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return fail(p, "malformed number");
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return fail(p, "malformed number");
    }
    frigg_sb_put(&p->json, s + p->pos, i - p->pos);
    p->pos = i;
    if (!is_delim(p)) return fail(p, "malformed number");
    return 0;
}

static int parse_value(parser *p, int depth);

/* {key:value,…} at p->pos (the '{'). */
static int parse_object(parser *p, int depth) {
    p->pos++;
    frigg_sb_putc(&p->json, '{');
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
        frigg_sb_putc(&p->json, '}');
        return 0;
    }
    for (int first = 1;; first = 0) {
        if (!first) frigg_sb_putc(&p->json, ',');
        skip_ws(p);
        if (at(p, Q)) { /* format_argument's escaped-key form */
            if (parse_string(p)) return -1;
            skip_ws(p);
        } else {
            size_t k = p->pos;
            while (p->pos < p->n && !strchr(":{}[],", p->s[p->pos]) && p->s[p->pos]) p->pos++;
            if (p->pos >= p->n || p->s[p->pos] != ':') return fail(p, "expected key:value");
            size_t save = p->pos, e = save;
            while (e > k && strchr(" \t\r\n", p->s[e - 1])) e--;
            p->pos = k;
            if (put_json_string(p, p->s + k, e - k)) return -1;
            p->pos = save;
        }
        if (p->pos >= p->n || p->s[p->pos] != ':') return fail(p, "expected ':' after a key");
        p->pos++;
        frigg_sb_putc(&p->json, ':');
        if (parse_value(p, depth + 1)) return -1;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == '}') {
            p->pos++;
            frigg_sb_putc(&p->json, '}');
            return 0;
        }
        return fail(p, p->pos >= p->n ? "unterminated {" : "expected ',' or '}'");
    }
}

static int parse_array(parser *p, int depth) {
    p->pos++;
    frigg_sb_putc(&p->json, '[');
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
        frigg_sb_putc(&p->json, ']');
        return 0;
    }
    for (int first = 1;; first = 0) {
        if (!first) frigg_sb_putc(&p->json, ',');
        if (parse_value(p, depth + 1)) return -1;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == ']') {
            p->pos++;
            frigg_sb_putc(&p->json, ']');
            return 0;
        }
        return fail(p, p->pos >= p->n ? "unterminated [" : "expected ',' or ']'");
    }
}

static int parse_value(parser *p, int depth) {
    if (depth > MAX_DEPTH) return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->pos >= p->n) return fail(p, "unexpected end of text");
    if (at(p, Q)) return parse_string(p);
    char c = p->s[p->pos];
    if (c == '{') return parse_object(p, depth);
    if (c == '[') return parse_array(p, depth);
    static const struct { const char *word, *json; } lits[] = {
        {"true", "true"}, {"false", "false"}, {"True", "true"}, {"False", "false"},
        {"None", "null"}, {"null", "null"}};
    for (size_t i = 0; i < sizeof lits / sizeof *lits; i++) {
        if (at(p, lits[i].word)) {
            p->pos += strlen(lits[i].word);
            if (!is_delim(p)) return fail(p, "unquoted text where a value was expected");
            frigg_sb_puts(&p->json, lits[i].json);
            return 0;
        }
    }
    return parse_number(p);
}

/* One call starting at p->pos (at OPEN); appends its tool_calls entry to calls. */
static int parse_call(parser *p, json_t *calls) {
    p->pos += strlen(OPEN);
    if (!at(p, "call:")) return fail(p, "expected \"call:\" after <|tool_call>");
    p->pos += 5;
    size_t name_start = p->pos;
    while (p->pos < p->n && p->s[p->pos] != '{') {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c <= ' ' || strchr("<>}[]:,\"", c)) return fail(p, "invalid character in the function name");
        p->pos++;
    }
    if (p->pos >= p->n) return fail(p, "expected '{' after the function name");
    if (p->pos == name_start) return fail(p, "empty function name");
    size_t name_end = p->pos;
    uint32_t cp;
    for (size_t i = name_start; i < name_end;) { /* the name goes into JSON: it must be UTF-8 */
        int l = frigg_utf8_decode(p->s + i, name_end - i, &cp);
        if (!l) return fail(p, "invalid UTF-8 in the function name");
        i += (size_t)l;
    }
    frigg_sb_free(&p->json);
    if (parse_object(p, 0)) return -1;
    if (!at(p, CLOSE)) return fail(p, "expected <tool_call|> after the arguments");
    p->pos += strlen(CLOSE);

    json_error_t jerr; /* proves the rewrite is valid JSON (and catches out-of-range integers) */
    json_t *check = json_loadb(p->json.p, p->json.len, JSON_ALLOW_NUL, &jerr);
    if (!check) return fail(p, jerr.text);
    json_decref(check);

    json_t *fn = json_object();
    json_object_set_new(fn, "name", json_stringn(p->s + name_start, name_end - name_start));
    json_object_set_new(fn, "arguments", json_stringn(p->json.p, p->json.len));
    json_t *entry = json_object();
    char id[32];
    snprintf(id, sizeof id, "call_%d", p->call_index);
    json_object_set_new(entry, "id", json_string(id));
    json_object_set_new(entry, "type", json_string("function"));
    json_object_set_new(entry, "function", fn);
    json_array_append_new(calls, entry);
    return 0;
}

json_t *frigg_parse_tool_calls(const char *text, char **content_out) {
    return frigg_parse_tool_calls_n(text, text ? strlen(text) : 0, content_out, NULL);
}

json_t *frigg_parse_tool_calls_n(const char *text, size_t n, char **content_out, size_t *content_len) {
    if (content_out) *content_out = NULL;
    if (content_len) *content_len = 0;
    if (!text) {
        frigg_set_error("tool call parser: no text");
        return NULL;
    }
    parser p = {text, n, 0, FRIGG_STRBUF_INIT, 0};
    json_t *calls = json_array();
    frigg_strbuf content = FRIGG_STRBUF_INIT;
    while (p.pos < p.n) {
        const char *o = memmem(p.s + p.pos, p.n - p.pos, OPEN, strlen(OPEN));
        const char *seg_end = o ? o : p.s + p.n;
        const char *stray = memmem(p.s + p.pos, (size_t)(seg_end - (p.s + p.pos)), CLOSE, strlen(CLOSE));
        if (stray) {
            p.pos = (size_t)(stray - p.s);
            fail(&p, "<tool_call|> without an opening <|tool_call>");
            goto bad;
        }
        frigg_sb_put(&content, p.s + p.pos, (size_t)(seg_end - (p.s + p.pos)));
        if (!o) break;
        p.pos = (size_t)(o - p.s);
        if (parse_call(&p, calls)) goto bad;
        p.call_index++;
    }
    frigg_sb_free(&p.json);
    if (content_len) *content_len = content.len;
    if (content_out) *content_out = frigg_sb_take(&content);
    frigg_sb_free(&content);
    return calls;
bad:
    frigg_sb_free(&p.json);
    frigg_sb_free(&content);
    json_decref(calls);
    return NULL;
}
