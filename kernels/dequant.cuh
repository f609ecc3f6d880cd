/* dequant.cuh — quantized weights as the kernels read them (model.h's frigg_mat layout, the compressed-tensors
 * pack-quantized bytes): the 8-weight chunk, its load, where its scale is, and the chunk turned into the 8 bf16
 * weights the CPU spec defines, w = bf16(q * scale) (model.h: frigg_mat_row). gemv_q.cu (the CUDA-core GEMV and
 * the dequantization for the prefill GEMM) and gemv_tc.cu (the tensor-core GEMV) make their weights with the
 * same dq_chunk, so each gives bit for bit what it gives on the dequantized bf16 matrix.
 *
 * dq_chunk works on bf16 pairs: the stored codes are placed in the mantissa of a bf16 128 (0x4300 | code), one
 * exact subtraction leaves q in bf16 (|q| <= 128 is exact there), and one bf16 multiply by the scale rounds
 * the exact product q * scale once to nearest even: the same bits as the CPU's fp32 product (exact: 8 bits
 * times 8 bits) rounded to bf16. Both steps are fma.rn.bf16x2 (sm_80 and later; a - b as a * 1 + (-b), the
 * product as q * s + (-0)): about 2.5 operations per int8 weight and 2 per int4 weight, where converting each
 * weight through fp32 cost about 7 and bounded the GEMV by issue rate, not by bandwidth. */
#ifndef FRIGG_KERNELS_DEQUANT_CUH
#define FRIGG_KERNELS_DEQUANT_CUH

#include "common.cuh"
#include "model/model.h"

/* Bytes of one 8-weight chunk, and the word type that holds it. */
template <int DT> struct qword;
template <> struct qword<FRIGG_DT_INT8> {
    typedef uint2 T;
    static constexpr int bytes = 8;
};
template <> struct qword<FRIGG_DT_INT4> {
    typedef uint32_t T;
    static constexpr int bytes = 4;
};

/* Weights are read once per pass: keep them out of L1 (as gemv_common.cuh's ld_stream). */
__device__ __forceinline__ uint2 ld_stream_q(const uint2 *p) {
    uint2 r;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
__device__ __forceinline__ uint32_t ld_stream_q(const uint32_t *p) {
    uint32_t r;
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ uint2 qzero(uint2) { return make_uint2(0, 0); }
__device__ __forceinline__ uint32_t qzero(uint32_t) { return 0; }

/* Where a row's scales are: scale of chunk c (weights 8c..8c+7) is srow[c / cpg], cpg = chunks per group
 * (group / 8, or K / 8 for one scale per row); shift = log2(cpg) when cpg is a power of two, else -1. */
struct qgeom {
    int ng, cpg, shift;
};
__device__ __forceinline__ int q_group(int c, const qgeom &g) { return g.shift >= 0 ? c >> g.shift : c / g.cpg; }
/* A scale as a bf16 pair (s, s), the multiplier of dq_chunk. Scales are weights too (written once, at upload):
 * read like the weight stream, the only non-coherent loads tests/nc-loads.sh allows. Not volatile, so that a
 * row's repeated scale stays in a register. */
__device__ __forceinline__ uint32_t ld_scale2(const uint16_t *p) {
    unsigned short v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return (uint32_t)v * 0x10001u;
}

/* A scale's bf16 bits alone (gemv_tc.cu packs two steps' scales into one register). */
__device__ __forceinline__ uint32_t ld_scale16(const uint16_t *p) {
    unsigned short v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

/* a * b + c on bf16 pairs, rounded once to nearest even. */
__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#define BF2_ONE 0x3F803F80u  /* (1, 1) */
#define BF2_NZERO 0x80008000u /* (-0, -0): q * s + (-0) is q * s, whatever its sign */

/* int8: the bf16 pair (w_a, w_b) of the codes in bytes a, b of `word` (sel = a | 4 << 4 | b << 8 | 4 << 12).
 * Code u = q + 128. r's halves are 0x43uu; clearing bit 7 leaves 0x4300 | (u & 127) = 128 + (u & 127), and
 * q = that - 128 when u >= 128, - 256 when not: 0x4300 (128) or 0x4380 (256), the exponent bit being ~u's bit 7,
 * negated (0xC3..). */
__device__ __forceinline__ uint32_t q8_pair(uint32_t word, uint32_t sel, uint32_t s2) {
    const uint32_t r = __byte_perm(word, 0x43434343u, sel);
    const uint32_t m = r & 0xFF7FFF7Fu, negc = (~r & 0x00800080u) | 0xC300C300u;
    return fma_bf16x2(fma_bf16x2(m, BF2_ONE, negc), s2, BF2_NZERO);
}
/* int4: the pair of nibbles 2k, 2k+1 of `word` (t = word >> 4; sel = k | (4 + k) << 8 puts byte k of word and
 * of t, whose low nibbles those are, in the low bytes of the two halves). Code n = q + 8: 0x4300 | n = 128 + n,
 * minus 136 (0xC308 negated). */
__device__ __forceinline__ uint32_t q4_pair(uint32_t word, uint32_t t, uint32_t sel, uint32_t s2) {
    const uint32_t m = (__byte_perm(word, t, sel) & 0x000F000Fu) | 0x43004300u;
    return fma_bf16x2(fma_bf16x2(m, BF2_ONE, 0xC308C308u), s2, BF2_NZERO);
}

/* The 8 weights of one chunk as bf16, memory order (value i of the chunk in bits 16*(i%2) of word i/2):
 * bf16(q_i * s). int8: value i is byte i of the 8 bytes (little-endian words); int4: value i is nibble i of
 * the word (bits 4i..4i+3: the low nibble of byte i/2 for even i, the high for odd). s2: ld_scale2's pair. */
__device__ __forceinline__ uint4 dq_chunk(uint2 w, uint32_t s2) {
    return make_uint4(q8_pair(w.x, 0x4140u, s2), q8_pair(w.x, 0x4342u, s2), q8_pair(w.y, 0x4140u, s2),
                      q8_pair(w.y, 0x4342u, s2));
}
__device__ __forceinline__ uint4 dq_chunk(uint32_t w, uint32_t s2) {
    const uint32_t t = w >> 4;
    return make_uint4(q4_pair(w, t, 0x0400u, s2), q4_pair(w, t, 0x0501u, s2), q4_pair(w, t, 0x0602u, s2),
                      q4_pair(w, t, 0x0703u, s2));
}

#endif
