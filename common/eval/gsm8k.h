/* gsm8k.h — GSM8K prompts, answer extraction and scoring (frigg-eval gsm8k; tests/test_gsm8k.c).
 *
 * NUMBERS. A number in a text is the longest match of
 *     [sign] ['$'] digits ( ',' ddd )* [ '.' digits ]        or   [sign] ['$'] '.' digits
 * where a comma is taken as a thousands separator only when exactly three digits follow it and no fourth
 * ("1,234,567" is one number; "1,23" and "3,4" are two), '.' is always the decimal point (a period not
 * followed by a digit ends the number: "18." is 18), and the sign '-' counts only when the character
 * before it is not a letter, digit or '.' ("16-3" is 16 and 3; "= -5", "-$5" and "$-5" are -5). Whatever
 * follows the digits (units, '%', "kr.", a period) is not part of the number.
 * NORMALISED FORM (what is compared): commas and '$' dropped, leading zeros dropped ("007" -> "7",
 * ".5" -> "0.5"), trailing zeros of the fraction and then a bare '.' dropped ("18.00" -> "18",
 * "2.50" -> "2.5"), and "-0" -> "0". Two answers match when their normalised forms are equal strings, so
 * 18, 18.0, $18, "18 dollars", "#### 18." and "018" all match a gold 18, and 1,000 matches 1000.
 *
 * GOLD. The GSM8K answer field ends with a line "#### N"; the gold is the number after the last "####"
 * (normalised; golds in the test split are integers, 14 of them with thousands separators).
 *
 * EXTRACTION from a model's output (the generated text, already cut at the stop string):
 *   FRIGG_GSM8K_HASH_OR_LAST (few-shot and zero-shot completion prompts): the first number after the first
 *     "####" that has one (spaces and tabs between them skipped), by "####"; else the last number anywhere
 *     in the output, by "last"; else none (invalid).
 *   FRIGG_GSM8K_LAST (--chat): the last number in the output, by "last"; else none.
 * "Strict" accuracy counts only answers found by "####".
 *
 * PROMPTS (completion form, the layout of lm-evaluation-harness's gsm8k task, whose exemplars keep the
 * annotations; man/frigg-eval.1 says where the two differ): each exemplar is
 * "Question: " + question + "\nAnswer: " + answer + "\n\n", the answer being the GSM8K solution with its
 * calculator annotations "<<...>>" removed and its "#### N" final line kept; then "Question: " + question +
 * "\nAnswer:". */
#ifndef FRIGG_GSM8K_H
#define FRIGG_GSM8K_H

#include <stddef.h>

#define FRIGG_GSM8K_NUM_MAX 64 /* bytes of a normalised number, NUL included; longer numbers are not numbers */

typedef enum { FRIGG_GSM8K_HASH_OR_LAST = 0, FRIGG_GSM8K_LAST = 1 } frigg_gsm8k_mode;

/* The next number in s[0..len) at or after *pos: 1 with out (normalised, NUL-terminated) and *start, *end
 * (byte offsets of the match) set and *pos moved past it; 0 when there is none. */
int frigg_gsm8k_next_number(const char *s, size_t len, size_t *pos, char out[FRIGG_GSM8K_NUM_MAX], size_t *start,
                            size_t *end);
/* Normalise one number's text (a whole match as above, e.g. "$1,234.50"): 0 with out set, or -1 when the
 * text is not exactly one number. */
int frigg_gsm8k_normalize(const char *s, size_t len, char out[FRIGG_GSM8K_NUM_MAX]);
/* The gold number of an answer field: 0 with out set, or -1 when it has no "####" followed by a number. */
int frigg_gsm8k_gold(const char *answer, char out[FRIGG_GSM8K_NUM_MAX]);
/* Extract the answer of an output: 1 by "####", 2 by the last number, 0 none (out is then ""). */
int frigg_gsm8k_extract(const char *text, size_t len, frigg_gsm8k_mode mode, char out[FRIGG_GSM8K_NUM_MAX]);
/* The solution text of an exemplar: the answer with every "<<...>>" annotation removed (a "<<" without a
 * closing ">>" is kept as it is). A new string. */
char *frigg_gsm8k_clean_solution(const char *answer);
/* The completion prompt: the exemplars (nshots pairs of question/answer; answers cleaned here) and then
 * the question. A new string. */
char *frigg_gsm8k_prompt(const char *const *shot_q, const char *const *shot_a, int nshots, const char *question);
/* Wilson score interval of k successes in n trials at z (1.959963984540054 for 95 %); n = 0 gives [0, 1]. */
void frigg_wilson(long k, long n, double z, double *lo, double *hi);

#endif
