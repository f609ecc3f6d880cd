/* quant.h — weight quantization math for frigg-quantize (pure C; the on-disk format is in ctensors.h).
 *
 * Every rule below is deterministic and written so that another implementation (tests/quantize.sh
 * recomputes them with numpy) gets bit-identical q and scales. All arithmetic is IEEE fp32 unless stated;
 * "bf16(x)" is round-to-nearest-even to bfloat16 (frigg_f32_to_bf16); "rne(x)" is round half to even to an
 * integer (torch.round's and numpy.rint's rule, and compressed-tensors' own, quant_args.py).
 *
 * int8, per output channel (row), symmetric:
 *   a = max |w| over the row;  s = bf16(a / 127);  if s == 0 then s = 2^-7
 *   q = rne(clamp(w / s, -127, 127))
 *   Clamping before rounding equals rounding then clamping for integer bounds. Why 127 and not
 *   compressed-tensors' minmax a / 127.5 with [-128, 127] (calculate_qparams: a over half the range
 *   127 - (-128); ctensors.h): a / 127.5 maps a positive row maximum to about 127.5, which clamps to 127
 *   (an error of half a step at the largest weight), and a negative one to about -127.5, which rounds to
 *   -128, so the two signs' extremes are not coded alike; a / 127 represents both (up to the bf16 rounding
 *   of s, which can make |w / s| at most 127.25, still rounding to 127) and leaves -128 unused — a
 *   symmetric code with one step of 1/127 of the row's range. The zero-scale rule is
 *   compressed-tensors' (calculate_qparams: a zero scale becomes the scale dtype's eps, 2^-7 for bf16), so
 *   no consumer divides by zero; q is 0 there and the row dequantizes to exactly 0.
 *   w / s is the correctly rounded fp32 quotient (compressed-tensors evaluates it in the weight's dtype,
 *   bf16, which rounds the quotient to 8 significant bits before rne — a double rounding frigg avoids).
 *
 * int4, per group of g consecutive input columns (g divides the row length, else an error), symmetric,
 * q in [-8, 7] (the whole 4-bit range):
 *   a = max |w| over the group; candidate k = 0..50 (shrink factor f_k = (100 - k) / 100, 1.00 .. 0.50):
 *     s_k = bf16((a * (100 - k)) / 700)          (= bf16(f_k * a / 7); a * (100 - k) is exact in fp32)
 *     if s_k == 0 then s_k = 2^-7
 *     q_k = rne(clamp(w / s_k, -8, 7));  e_k = sum over the group, in order, of (double)(w - q_k * s_k)^2
 *       (w - q_k * s_k is exact in fp32 here; the sum is accumulated in double, left to right)
 *   the search picks the k with the smallest e_k, the smallest k on ties (strict <); --int4-rtn takes k = 0.
 *   k = 0 is plain round-to-nearest with no clipping (a maps to 7), so the search is never worse than RTN
 *   on any group, in the stored bf16 scale. Shrinking clips the tail to buy a finer step for the bulk;
 *   where the group's extreme is negative, -8 * s_k reaches it at f = 7/8. The grid follows
 *   llm-compressor's MSE observer (observers/mse_quant.py: p = 1 - i/100, but it stops at 0.81, weights
 *   |err|^2.4 and stops after 5 steps without improvement; frigg searches the full grid down to 0.50 and
 *   minimises the squared error, with the candidate scale already rounded to bf16).
 *
 * Non-finite weights are refused (an error naming the value), not quantized. */
#ifndef FRIGG_QUANT_H
#define FRIGG_QUANT_H

#include <stdint.h>

#define FRIGG_Q4_GRID 51 /* shrink candidates k = 0..50 */
#define FRIGG_Q_ZERO_SCALE 0x3c00 /* bf16 2^-7 = 0.0078125: the scale stored for an all-zero row/group */

/* rne(x) for |x| <= 2^22 (the adds round in fp32 at the 1.0 position, half to even). */
static inline float frigg_q_rne(float x) {
    const float big = 12582912.0f; /* 1.5 * 2^23: the sum lands in [2^23, 2^24), where the fp32 ulp is 1 */
    return (x + big) - big;          /* never folded to x: frigg builds without -ffast-math */
}

/* int8 per channel: one row of n weights -> q[n], *scale (bf16 bits). 0, or -1 with frigg_error() for a
 * non-finite weight. */
int frigg_q8_row(const float *w, int n, int8_t *q, uint16_t *scale);

/* int4 group-wise: one row of n weights, groups of g -> q[n], scales[n / g] (bf16 bits). search: 1 the
 * clipping search, 0 round-to-nearest (k = 0). chosen_k (may be NULL) receives n / g chosen candidates.
 * 0, or -1 with frigg_error() when g < 1, g does not divide n, or a weight is not finite. */
int frigg_q4_row(const float *w, int n, int g, int search, int8_t *q, uint16_t *scales, uint8_t *chosen_k);

/* The candidate scale s_k of a group whose max |w| is a (bf16 bits), k in [0, FRIGG_Q4_GRID). */
uint16_t frigg_q4_candidate_scale(float a, int k);

/* Squared error sum_i (w_i - q_i * s)^2 of one quantized group, in the rule's order and precision. */
double frigg_q_group_error(const float *w, const int8_t *q, int n, float s);

#endif
