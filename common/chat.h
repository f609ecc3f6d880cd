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
 * As in the template (and unlike the training script's message normalisation), a tool call's
 * string `arguments` is inserted raw: callers holding OpenAI JSON-string arguments should parse
 * them into objects first, as training did (frigg_chat_normalize_messages). */
char *frigg_chat_render(const json_t *messages, const json_t *tools, int add_generation_prompt);

/* The training script's message normalisation that matters for requests (HRM-Text
 * scripts/tokenize_chat_template.py): a tool call's `arguments` given as a JSON string holding an
 * object becomes that object. Returns a new reference (a deep copy when anything changed). */
json_t *frigg_chat_normalize_messages(const json_t *messages);

#endif
