/* chat.h — DFM-Mimir's chat template (gemma4_native_chat.jinja, the one it was trained with),
 * rendered in C byte for byte as jinja2 renders it with enable_thinking=false, bos "<bos>".
 * See ../shared/docs/TOKENIZER.md §6 for the rules; golden/chat/conversations.jsonl for proof. */
#ifndef FRIGG_CHAT_H
#define FRIGG_CHAT_H

#include <jansson.h>

/* Render an OpenAI-style messages array and optional tools array (NULL or [] for none).
 * add_generation_prompt 1/0. Returns malloc'd UTF-8, or NULL + frigg_error() naming the field
 * for invalid input, and for inputs on which jinja2 itself fails or where frigg would have to
 * imitate Python's repr() beyond printable ASCII (see chat_internal.h).
 *
 * As in the template, a tool call's string `arguments` is inserted raw: requests should go through
 * frigg_chat_normalize_messages first, as training data did. */
char *frigg_chat_render(const json_t *messages, const json_t *tools, int add_generation_prompt);
/* The same, with the rendered length in *len (when not NULL): a string value holding a NUL byte (\u0000) is
 * rendered whole, so the text may hold NUL bytes before its end. */
char *frigg_chat_render_n(const json_t *messages, const json_t *tools, int add_generation_prompt, size_t *len);

/* The training script's message normalisation (HRM-Text scripts/tokenize_chat_template.py
 * normalize_message), applied to every conversation before DFM-Mimir saw it rendered:
 *   - role "environment" becomes "tool";
 *   - a missing or null content becomes "" (a tool result then renders <|"|><|"|>, not None);
 *   - a tool message without a (truthy) name gets "tool", without a tool_call_id gets "call_0";
 *   - a tool call's arguments given as a JSON string holding an object become that object
 *     (OpenAI clients send them that way; rendered raw they would read `{{"a":1}}`).
 * Returns a new reference: a deep copy of messages with those changes (invalid input is copied
 * unchanged for frigg_chat_render to reject). */
json_t *frigg_chat_normalize_messages(const json_t *messages);

#endif
