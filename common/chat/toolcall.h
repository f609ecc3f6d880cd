/* toolcall.h — tool calls in DFM-Mimir's generated text, as the chat template writes them:
 * `<|tool_call>call:NAME{key:value,…}<tool_call|>`, keys bare (or <|"|>-quoted), strings as raw
 * text between <|"|> tokens, numbers as Python prints them, true/false, None, nested {} and [].
 * Parsed with a small recursive parser (not by rewriting to JSON, which breaks on strings that
 * hold quotes) into OpenAI-style tool_calls. */
#ifndef FRIGG_TOOLCALL_H
#define FRIGG_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>

/* Returns a new JSON array of OpenAI tool_calls
 * ([{"id":"call_0","type":"function","function":{"name":..,"arguments":"<JSON string>"}}]),
 * empty when the text has none. *content_out (when not NULL) gets the text with the calls
 * removed (malloc'd). Malformed call syntax -> NULL + frigg_error() saying what and where.
 * ASCII whitespace is allowed around keys and values (and trimmed from bare keys); the
 * arguments JSON keeps each number's digits as written (0.1 stays "0.1"). A string holding the
 * <|"|> token itself cannot be told apart from its end: the template has no escape for it. */
json_t *frigg_parse_tool_calls(const char *text, char **content_out);
/* The same on n bytes of text, which may hold NUL bytes (a string value keeps them, as \u0000 in the arguments
 * JSON); *content_len (when not NULL) gets the content's length. */
json_t *frigg_parse_tool_calls_n(const char *text, size_t n, char **content_out, size_t *content_len);

#endif
