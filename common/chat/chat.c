/* chat.c — the chat template's main part: the system/tools turn, the message loop with tool
 * calls and tool responses, turn closing, the generation prompt. Value formatting lives in
 * chat_value.c, tool declarations in chat_tools.c. Comments quote the template's decisions. */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "chat_internal.h"
#include "pyfmt.h"
#include "base/util.h"

/* ns.prev_message_type */
typedef enum { PREV_NONE, PREV_TOOL, PREV_TOOL_CALL, PREV_TOOL_RESPONSE, PREV_MEDIA } prev_type;

typedef struct {
    frigg_strbuf out;
    prev_type prev;
} render_state;

static void put_stripped(frigg_strbuf *b, const char *s, size_t n) {
    size_t a, e;
    frigg_py_strip(s, n, &a, &e);
    frigg_sb_put(b, s + a, e - a);
}

/* strip_thinking: drop every `<|channel>…<channel|>` span (an unclosed one runs to the end of its
 * `<channel|>`-piece), then trim. */
static void put_strip_thinking(frigg_strbuf *b, const char *s, size_t n) {
    static const char open[] = "<|channel>", close[] = "<channel|>";
    frigg_strbuf t = FRIGG_STRBUF_INIT;
    const char *end = s + n;
    for (const char *p = s;;) {
        const char *c = memmem(p, (size_t)(end - p), close, sizeof close - 1);
        const char *piece_end = c ? c : end;
        const char *o = memmem(p, (size_t)(piece_end - p), open, sizeof open - 1);
        frigg_sb_put(&t, p, (size_t)((o ? o : piece_end) - p));
        if (!c) break;
        p = c + sizeof close - 1;
    }
    put_stripped(b, t.p ? t.p : "", t.len);
    frigg_sb_free(&t);
}

static const char *role_of(const json_t *m) { return json_string_value(json_object_get(m, "role")); }

/* A string that names something (a role, a part type): its value, or NULL when v is not a string or holds a NUL
 * byte, which no name the template compares with does. */
static const char *plain_str(const json_t *v) {
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

/* The system turn's content: a string, or a list of {text} parts each trimmed and followed by a
 * space. */
static int put_system_content(frigg_strbuf *b, const json_t *content) {
    if (!content || json_is_null(content)) return 0;
    if (json_is_string(content)) {
        put_stripped(b, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (!json_is_array(content)) {
        frigg_set_error(".content: must be a string, an array of parts or null");
        return -1;
    }
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const json_t *text = chat_get(part, "text");
        if (!json_is_object(part) || (text && !json_is_string(text))) {
            frigg_set_error(".content[%zu]: must be an object whose \"text\" is a string", i);
            return -1;
        }
        if (text) put_stripped(b, json_string_value(text), json_string_length(text));
        frigg_sb_putc(b, ' ');
    }
    return 0;
}

/* format_tool_response_block(tool_name, response) */
static int put_tool_response(frigg_strbuf *b, const char *name, size_t name_len, const json_t *response) {
    frigg_sb_puts(b, "<|tool_response>response:");
    frigg_sb_put(b, name, name_len);
    frigg_sb_putc(b, '{');
    if (json_is_object(response)) {
        size_t n;
        chat_kv *kv = chat_dictsort(response, &n);
        if (!kv) return -1;
        for (size_t i = 0; i < n; i++) {
            if (i) frigg_sb_putc(b, ',');
            frigg_sb_printf(b, "%s:", kv[i].key);
            if (chat_format_argument(b, kv[i].value, 0, 1)) {
                chat_error_prefix("%s", kv[i].key);
                free(kv);
                return -1;
            }
        }
        free(kv);
    } else {
        frigg_sb_puts(b, "value:");
        if (chat_format_argument(b, response, 0, 1)) return -1;
    }
    frigg_sb_puts(b, "}<tool_response|>");
    return 0;
}

/* `<|tool_call>call:NAME{ARGS}<tool_call|>` for each call. */
static int put_tool_calls(frigg_strbuf *b, const json_t *calls) {
    if (!json_is_array(calls)) {
        frigg_set_error(".tool_calls: must be an array");
        return -1;
    }
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc) {
        const json_t *fn = chat_get(tc, "function");
        const json_t *name = chat_get(fn, "name");
        if (!json_is_string(name)) {
            frigg_set_error(".tool_calls[%zu].function.name: must be a string", i);
            return -1;
        }
        frigg_sb_puts(b, "<|tool_call>call:");
        frigg_sb_put(b, json_string_value(name), json_string_length(name));
        frigg_sb_putc(b, '{');
        const json_t *args = json_object_get(fn, "arguments");
        if (json_is_object(args)) {
            size_t n;
            chat_kv *kv = chat_dictsort(args, &n);
            if (!kv) return chat_error_prefix(".tool_calls[%zu].function.arguments", i), -1;
            for (size_t k = 0; k < n; k++) {
                if (k) frigg_sb_putc(b, ',');
                frigg_sb_printf(b, "%s:", kv[k].key);
                if (chat_format_argument(b, kv[k].value, 0, 1)) {
                    chat_error_prefix(".tool_calls[%zu].function.arguments.%s", i, kv[k].key);
                    free(kv);
                    return -1;
                }
            }
            free(kv);
        } else if (json_is_string(args)) { /* inserted raw, as the template does */
            frigg_sb_put(b, json_string_value(args), json_string_length(args));
        } /* any other arguments value renders nothing, as in the template */
        frigg_sb_puts(b, "}<tool_call|>");
    }
    return 0;
}

/* Legacy `tool_responses` embedded in a message (Google's native form). */
static int put_embedded_tool_responses(render_state *st, const json_t *trs) {
    if (!json_is_array(trs)) {
        frigg_set_error(".tool_responses: must be an array");
        return -1;
    }
    size_t i;
    json_t *tr;
    json_array_foreach(trs, i, tr) {
        const json_t *name = chat_get(tr, "name"), *resp = chat_get(tr, "response");
        if (!json_is_object(tr) || (name && !json_is_string(name)) || !resp) {
            frigg_set_error(".tool_responses[%zu]: must be an object with a \"response\" and an "
                            "optional string \"name\"", i);
            return -1;
        }
        if (put_tool_response(&st->out, name ? json_string_value(name) : "unknown",
                              name ? json_string_length(name) : strlen("unknown"), resp))
            return chat_error_prefix(".tool_responses[%zu].response", i), -1;
        st->prev = PREV_TOOL_RESPONSE;
    }
    return 0;
}

/* Python `a == b` for tc.get('id') == follow.get('tool_call_id'): missing and null are None. */
static int ids_equal(const json_t *a, const json_t *b) {
    int an = !a || json_is_null(a), bn = !b || json_is_null(b);
    if (an || bn) return an && bn;
    return json_is_string(a) && json_is_string(b) && json_equal((json_t *)a, (json_t *)b);
}

static int check_id(const json_t *v) { return !v || json_is_null(v) || json_is_string(v); }

/* The OpenAI form: the `role:"tool"` messages right after message idx answer its calls. */
static int put_following_tool_messages(render_state *st, const json_t *msgs, size_t idx, size_t n,
                                       const json_t *calls, size_t offset) {
    for (size_t k = idx + 1; k < n; k++) {
        const json_t *follow = json_array_get(msgs, k);
        if (strcmp(role_of(follow), "tool")) break;
        const json_t *name = json_object_get(follow, "name");
        const json_t *call_id = json_object_get(follow, "tool_call_id");
        if (!check_id(call_id)) {
            frigg_set_error("messages[%zu].tool_call_id: must be a string", k + offset);
            return -1;
        }
        size_t j;
        json_t *tc;
        json_array_foreach(calls, j, tc) {
            const json_t *id = json_object_get(tc, "id");
            if (!check_id(id)) {
                frigg_set_error("messages[%zu].tool_calls[%zu].id: must be a string", idx + offset, j);
                return -1;
            }
            if (ids_equal(id, call_id)) name = json_object_get(json_object_get(tc, "function"), "name");
        }
        if (!json_is_string(name)) {
            frigg_set_error("messages[%zu]: a tool message needs a string \"name\" or a \"tool_call_id\" "
                            "matching an \"id\" in the preceding tool_calls",
                            k + offset);
            return -1;
        }
        const json_t *body = json_object_get(follow, "content");
        int rc;
        if (json_is_array(body)) { /* the text parts, concatenated untrimmed */
            frigg_strbuf txt = FRIGG_STRBUF_INIT;
            size_t p;
            json_t *part;
            rc = 0;
            json_array_foreach(body, p, part) {
                const json_t *type = chat_get(part, "type"), *text = chat_get(part, "text");
                if (!json_is_object(part) || (plain_str(type) && !strcmp(plain_str(type), "text") &&
                                              !json_is_string(text))) {
                    frigg_set_error("messages[%zu].content[%zu]: must be an object; a text part needs a "
                                    "string \"text\"", k + offset, p);
                    rc = -1;
                    break;
                }
                if (plain_str(type) && !strcmp(plain_str(type), "text"))
                    frigg_sb_put(&txt, json_string_value(text), json_string_length(text));
            }
            if (!rc) {
                json_t *s = json_stringn(txt.p ? txt.p : "", txt.len);
                rc = put_tool_response(&st->out, json_string_value(name), json_string_length(name), s);
                json_decref(s);
            }
            frigg_sb_free(&txt);
        } else if (json_is_object(body)) {
            frigg_set_error("messages[%zu].content: a tool result must be a string, an array of text parts "
                            "or a scalar (the template fails on objects here)", k + offset);
            return -1;
        } else {
            json_t *none = body ? NULL : json_null();
            rc = put_tool_response(&st->out, json_string_value(name), json_string_length(name), body ? body : none);
            json_decref(none);
        }
        if (rc) return chat_error_prefix("messages[%zu].content", k + offset), -1;
        st->prev = PREV_TOOL_RESPONSE;
    }
    return 0;
}

/* The captured content of a non-tool message (before turn closing). */
static int put_content(render_state *st, frigg_strbuf *b, const json_t *content, int is_model) {
    if (!content || json_is_null(content)) return 0;
    if (json_is_string(content)) {
        if (is_model) put_strip_thinking(b, json_string_value(content), json_string_length(content));
        else put_stripped(b, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (!json_is_array(content)) {
        frigg_set_error(".content: must be a string, an array of parts or null");
        return -1;
    }
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = plain_str(chat_get(part, "type"));
        const json_t *text = chat_get(part, "text");
        if (!type) {
            frigg_set_error(".content[%zu]: must be an object with a string \"type\"", i);
            return -1;
        }
        if (!strcmp(type, "text")) {
            if (!json_is_string(text)) {
                frigg_set_error(".content[%zu].text: must be a string", i);
                return -1;
            }
            if (is_model) put_strip_thinking(b, json_string_value(text), json_string_length(text));
            else put_stripped(b, json_string_value(text), json_string_length(text));
        } else if (!strcmp(type, "image") || !strcmp(type, "audio") || !strcmp(type, "video")) {
            frigg_sb_printf(b, "<|%s|>", type);
            st->prev = PREV_MEDIA;
        } else {
            /* The template would drop the part silently; frigg refuses rather than ignore input. */
            frigg_set_error(".content[%zu].type: \"%.40s\" is not supported (text, image, audio, video)", i, type);
            return -1;
        }
    }
    return 0;
}

static int render_message(render_state *st, const json_t *msgs, size_t i, size_t n, size_t offset,
                          long last_user_idx) {
    const json_t *m = json_array_get(msgs, i);
    const char *raw_role = role_of(m);
    st->prev = PREV_NONE;
    const char *role = strcmp(raw_role, "assistant") ? raw_role : "model";
    /* Continuation: a model message right after an assistant one (tool messages between them do
     * not count) stays in the same turn. */
    const char *prev_role = NULL;
    for (size_t j = i; j-- > 0;) {
        const char *r = role_of(json_array_get(msgs, j));
        if (strcmp(r, "tool")) {
            prev_role = r;
            break;
        }
    }
    if (!(!strcmp(role, "model") && prev_role && !strcmp(prev_role, "assistant")))
        frigg_sb_printf(&st->out, "<|turn>%s\n", role);

    const json_t *calls = json_object_get(m, "tool_calls");
    const json_t *thinking = json_object_get(m, "reasoning");
    if (!chat_truthy(thinking)) thinking = json_object_get(m, "reasoning_content");
    if (chat_truthy(thinking) && (long)i > last_user_idx && chat_truthy(calls)) {
        if (!json_is_string(thinking)) {
            frigg_set_error("messages[%zu].reasoning: must be a string", i + offset);
            return -1;
        }
        frigg_sb_puts(&st->out, "<|channel>thought\n");
        frigg_sb_put(&st->out, json_string_value(thinking), json_string_length(thinking));
        frigg_sb_puts(&st->out, "\n<channel|>");
    }
    if (chat_truthy(calls)) {
        if (put_tool_calls(&st->out, calls)) return chat_error_prefix("messages[%zu]", i + offset), -1;
        st->prev = PREV_TOOL_CALL;
    }
    size_t before = st->out.len;
    const json_t *embedded = json_object_get(m, "tool_responses");
    if (chat_truthy(embedded)) {
        if (put_embedded_tool_responses(st, embedded)) return chat_error_prefix("messages[%zu]", i + offset), -1;
    } else if (chat_truthy(calls)) {
        if (put_following_tool_messages(st, msgs, i, n, calls, offset)) return -1;
    }
    int responded = st->out.len > before;

    frigg_strbuf content = FRIGG_STRBUF_INIT;
    if (put_content(st, &content, json_object_get(m, "content"), !strcmp(role, "model"))) {
        frigg_sb_free(&content);
        return chat_error_prefix("messages[%zu]", i + offset), -1;
    }
    size_t a, e;
    frigg_py_strip(content.p ? content.p : "", content.len, &a, &e);
    int has_content = e > a;
    frigg_sb_put(&st->out, content.p ? content.p : "", content.len);
    frigg_sb_free(&content);

    if (st->prev == PREV_TOOL_CALL && !responded)
        frigg_sb_puts(&st->out, "<|tool_response>"); /* a pending call: the tool's answer comes next */
    else if (!(responded && !has_content))
        frigg_sb_puts(&st->out, "<turn|>\n"); /* after tool responses with no text the turn stays open */
    return 0;
}

static int validate_messages(const json_t *messages) {
    if (!json_is_array(messages) || json_array_size(messages) == 0) {
        frigg_set_error("messages: must be a non-empty array");
        return -1;
    }
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (!json_is_object(m) || !plain_str(json_object_get(m, "role"))) {
            frigg_set_error("messages[%zu]: must be an object with a string \"role\" (without NUL bytes)", i);
            return -1;
        }
    }
    return 0;
}

char *frigg_chat_render(const json_t *messages, const json_t *tools, int add_generation_prompt) {
    return frigg_chat_render_n(messages, tools, add_generation_prompt, NULL);
}

char *frigg_chat_render_n(const json_t *messages, const json_t *tools, int add_generation_prompt, size_t *len) {
    if (len) *len = 0;
    if (validate_messages(messages)) return NULL;
    if (tools && !json_is_array(tools) && !json_is_null(tools)) {
        frigg_set_error("tools: must be an array");
        return NULL;
    }
    int have_tools = json_is_array(tools) && json_array_size(tools) > 0;
    render_state st = {FRIGG_STRBUF_INIT, PREV_NONE};
    frigg_sb_puts(&st.out, "<bos>");

    const json_t *first = json_array_get(messages, 0);
    const char *first_role = role_of(first);
    int has_system = !strcmp(first_role, "system") || !strcmp(first_role, "developer");
    if (have_tools || has_system) {
        frigg_sb_puts(&st.out, "<|turn>system\n");
        if (has_system && put_system_content(&st.out, json_object_get(first, "content"))) {
            chat_error_prefix("messages[0]");
            goto fail;
        }
        if (have_tools) {
            size_t i;
            json_t *tool;
            json_array_foreach(tools, i, tool) {
                frigg_sb_puts(&st.out, "<|tool>");
                if (chat_format_tool_declaration(&st.out, tool)) {
                    chat_error_prefix("tools[%zu]", i);
                    goto fail;
                }
                frigg_sb_puts(&st.out, "<tool|>");
            }
            st.prev = PREV_TOOL;
        }
        frigg_sb_puts(&st.out, "<turn|>\n");
    }

    /* loop_messages: messages[1:] when the first was the system turn. Indices below are into it;
     * `offset` maps them back for error messages. */
    size_t offset = has_system ? 1 : 0;
    size_t n = json_array_size(messages) - offset;
    json_t *loop = json_array();
    for (size_t i = 0; i < n; i++) json_array_append(loop, json_array_get(messages, i + offset));
    long last_user_idx = -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(role_of(json_array_get(loop, i)), "user")) last_user_idx = (long)i;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(role_of(json_array_get(loop, i)), "tool")) continue; /* rendered with its call */
        if (render_message(&st, loop, i, n, offset, last_user_idx)) {
            json_decref(loop);
            goto fail;
        }
    }
    json_decref(loop);

    if (add_generation_prompt && st.prev != PREV_TOOL_RESPONSE && st.prev != PREV_TOOL_CALL)
        frigg_sb_puts(&st.out, "<|turn>model\n");
    if (len) *len = st.out.len;
    return frigg_sb_take(&st.out);
fail:
    frigg_sb_free(&st.out);
    return NULL;
}

/* ---- training-time message normalisation -------------------------------------------------------- */

/* Python truthiness of a present-or-missing field, for `if not out.get("name")`. */
static int field_truthy(const json_t *m, const char *key) { return chat_truthy(json_object_get(m, key)); }

json_t *frigg_chat_normalize_messages(const json_t *messages) {
    json_t *out = json_deep_copy(messages);
    if (!json_is_array(out)) return out;
    size_t i;
    json_t *m;
    json_array_foreach(out, i, m) {
        if (!json_is_object(m)) continue;
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "environment")) json_object_set_new(m, "role", json_string("tool"));
        json_t *content = json_object_get(m, "content");
        if (!content || json_is_null(content)) json_object_set_new(m, "content", json_string(""));
        role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "tool")) {
            if (!field_truthy(m, "name")) json_object_set_new(m, "name", json_string("tool"));
            if (!field_truthy(m, "tool_call_id")) json_object_set_new(m, "tool_call_id", json_string("call_0"));
        }
        json_t *calls = json_object_get(m, "tool_calls");
        size_t j;
        json_t *tc;
        if (!json_is_array(calls)) continue;
        json_array_foreach(calls, j, tc) {
            json_t *fn = json_object_get(tc, "function");
            json_t *sargs = json_object_get(fn, "arguments");
            if (!json_is_string(sargs)) continue;
            /* read with its length and \u0000 allowed, as Python's json.loads reads it (a raw NUL byte is no
             * JSON to either) */
            json_t *parsed = json_loadb(json_string_value(sargs), json_string_length(sargs),
                                        JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
            if (json_is_object(parsed)) json_object_set(fn, "arguments", parsed);
            json_decref(parsed);
        }
    }
    return out;
}
