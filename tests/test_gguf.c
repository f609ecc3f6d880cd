/* test_gguf.c — the GGUF reader (common/model/gguf.h) on files built here byte by byte: every metadata type and
 * arrays read back, alignment and data offsets, and each way a file can be truncated, misaligned or lie (an error
 * naming the key or tensor and the offset, never a crash: every prefix of a valid file is refused); the hrm_text
 * mapping's refusals; the ggml block formats on blocks whose values are known; and the committed fixture
 * golden/fixtures/tiny-gguf: its BF16 GGUF binds to exactly the weights of its safetensors source.
 *
 *   test_gguf --dump FILE.gguf OUTDIR   writes each tensor's values as frigg dequantizes them (f32, little-endian,
 *                                       GGUF element order) to OUTDIR/<tensor name>.f32, for tests/gguf.sh's
 *                                       comparison with gguf-py's gguf.quants.dequantize */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "harness.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model_writer.h"

/* ---- a GGUF image built in memory ---- */
typedef struct {
    unsigned char *b;
    size_t n, cap;
} buf;
static void put(buf *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->b = realloc(w->b, w->cap);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void u8(buf *w, uint8_t v) { put(w, &v, 1); }
static void u32(buf *w, uint32_t v) {
    for (int i = 0; i < 4; i++) u8(w, (uint8_t)(v >> (8 * i)));
}
static void u64(buf *w, uint64_t v) {
    for (int i = 0; i < 8; i++) u8(w, (uint8_t)(v >> (8 * i)));
}
static void str(buf *w, const char *s) {
    u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void pad_to(buf *w, size_t a) {
    while (w->n % a) u8(w, 0);
}
static void hdr(buf *w, uint64_t nt, uint64_t nkv) {
    put(w, "GGUF", 4);
    u32(w, 3);
    u64(w, nt);
    u64(w, nkv);
}
static void kv_u32(buf *w, const char *k, uint32_t v) {
    str(w, k);
    u32(w, FRIGG_GGUF_UINT32);
    u32(w, v);
}
static void kv_f32(buf *w, const char *k, float v) {
    str(w, k);
    u32(w, FRIGG_GGUF_FLOAT32);
    uint32_t u;
    memcpy(&u, &v, 4);
    u32(w, u);
}
static void kv_str(buf *w, const char *k, const char *v) {
    str(w, k);
    u32(w, FRIGG_GGUF_STRING);
    str(w, v);
}
static void kv_bool(buf *w, const char *k, int v) {
    str(w, k);
    u32(w, FRIGG_GGUF_BOOL);
    u8(w, (uint8_t)v);
}
static void tinfo(buf *w, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(w, name);
    u32(w, (uint32_t)nd);
    for (int i = 0; i < nd; i++) u64(w, ne[i]);
    u32(w, type);
    u64(w, off);
}

static int parse(const buf *w, frigg_gguf *g) { return frigg_gguf_parse(g, w->b, w->n, "mem.gguf"); }

/* One file with every value type, an array of each element type, an array of arrays, and two tensors. */
static buf all_types(uint32_t align) {
    buf w = {0};
    hdr(&w, 2, 17 + (align ? 1 : 0));
    str(&w, "t.u8"), u32(&w, 0), u8(&w, 200);
    str(&w, "t.i8"), u32(&w, 1), u8(&w, 0x80);
    str(&w, "t.u16"), u32(&w, 2), u8(&w, 0x34), u8(&w, 0x12);
    str(&w, "t.i16"), u32(&w, 3), u8(&w, 0xfe), u8(&w, 0xff);
    kv_u32(&w, "t.u32", 4000000000u);
    str(&w, "t.i32"), u32(&w, 5), u32(&w, (uint32_t)-7);
    kv_f32(&w, "t.f32", 0.25f);
    kv_bool(&w, "t.bool", 1);
    kv_str(&w, "t.str", "hello");
    str(&w, "t.u64"), u32(&w, 10), u64(&w, 1ull << 40);
    str(&w, "t.i64"), u32(&w, 11), u64(&w, (uint64_t)-5);
    double d = -1.5;
    uint64_t du;
    memcpy(&du, &d, 8);
    str(&w, "t.f64"), u32(&w, 12), u64(&w, du);
    str(&w, "a.str"), u32(&w, 9), u32(&w, 8), u64(&w, 3), str(&w, "a"), str(&w, ""), str(&w, "ccc");
    str(&w, "a.i32"), u32(&w, 9), u32(&w, 5), u64(&w, 2), u32(&w, (uint32_t)-1), u32(&w, 9);
    str(&w, "a.f32"), u32(&w, 9), u32(&w, 6), u64(&w, 1), u32(&w, 0x40000000u);
    str(&w, "a.bool"), u32(&w, 9), u32(&w, 7), u64(&w, 2), u8(&w, 0), u8(&w, 1);
    /* [[1, 2], ["x"]] */
    str(&w, "a.nested"), u32(&w, 9), u32(&w, 9), u64(&w, 2);
    u32(&w, 4), u64(&w, 2), u32(&w, 1), u32(&w, 2);
    u32(&w, 8), u64(&w, 1), str(&w, "x");
    if (align) kv_u32(&w, "general.alignment", align);
    uint64_t a = align ? align : 32, ne1[2] = {4, 2}, ne2[1] = {32};
    tinfo(&w, "w.f32", 2, ne1, FRIGG_GGML_F32, 0);
    tinfo(&w, "w.q8", 1, ne2, FRIGG_GGML_Q8_0, ((32 + a - 1) / a) * a);
    pad_to(&w, a);
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        uint32_t u;
        memcpy(&u, &f, 4);
        u32(&w, u);
    }
    pad_to(&w, a);
    u8(&w, 0x00), u8(&w, 0x38); /* fp16 0.5 */
    for (int i = 0; i < 32; i++) u8(&w, (uint8_t)(int8_t)(i - 16));
    return w;
}

static void test_roundtrip(void) {
    for (int ai = 0; ai < 2; ai++) {
        uint32_t align = ai ? 64 : 0;
        buf w = all_types(align);
        frigg_gguf g;
        int rc = parse(&w, &g);
        CHECK(rc == 0, "all types (align %u): %s", align, frigg_error());
        if (!rc) {
            const frigg_gguf_kv *k;
            CHECK((k = frigg_gguf_find_kv(&g, "t.u8")) && k->type == FRIGG_GGUF_UINT8 && k->u == 200, "u8");
            CHECK((k = frigg_gguf_find_kv(&g, "t.i8")) && k->i == -128, "i8");
            CHECK((k = frigg_gguf_find_kv(&g, "t.u16")) && k->u == 0x1234, "u16");
            CHECK((k = frigg_gguf_find_kv(&g, "t.i16")) && k->i == -2, "i16");
            CHECK((k = frigg_gguf_find_kv(&g, "t.u32")) && k->u == 4000000000u, "u32");
            CHECK((k = frigg_gguf_find_kv(&g, "t.i32")) && k->i == -7, "i32");
            CHECK((k = frigg_gguf_find_kv(&g, "t.f32")) && k->f == 0.25, "f32");
            CHECK((k = frigg_gguf_find_kv(&g, "t.bool")) && k->type == FRIGG_GGUF_BOOL && k->u == 1, "bool");
            CHECK((k = frigg_gguf_find_kv(&g, "t.str")) && k->len == 5 && !memcmp(k->str, "hello", 5), "string");
            CHECK((k = frigg_gguf_find_kv(&g, "t.u64")) && k->u == 1ull << 40, "u64");
            CHECK((k = frigg_gguf_find_kv(&g, "t.i64")) && k->i == -5, "i64");
            CHECK((k = frigg_gguf_find_kv(&g, "t.f64")) && k->f == -1.5, "f64");
            k = frigg_gguf_find_kv(&g, "a.str");
            CHECK(k && k->type == FRIGG_GGUF_ARRAY && k->atype == FRIGG_GGUF_STRING && k->n == 3, "string array");
            if (k) {
                const unsigned char *p = k->adata;
                const char *s;
                uint64_t l;
                frigg_gguf_arr_next(k, &p, &s, &l, NULL, NULL, NULL);
                CHECK(l == 1 && s[0] == 'a', "a.str[0]");
                frigg_gguf_arr_next(k, &p, &s, &l, NULL, NULL, NULL);
                CHECK(l == 0, "a.str[1] empty");
                frigg_gguf_arr_next(k, &p, &s, &l, NULL, NULL, NULL);
                CHECK(l == 3 && !memcmp(s, "ccc", 3), "a.str[2]");
            }
            k = frigg_gguf_find_kv(&g, "a.i32");
            if (k) {
                const unsigned char *p = k->adata;
                int64_t i0, i1;
                frigg_gguf_arr_next(k, &p, NULL, NULL, NULL, &i0, NULL);
                frigg_gguf_arr_next(k, &p, NULL, NULL, NULL, &i1, NULL);
                CHECK(i0 == -1 && i1 == 9, "i32 array %lld %lld", (long long)i0, (long long)i1);
            }
            CHECK((k = frigg_gguf_find_kv(&g, "a.nested")) && k->atype == FRIGG_GGUF_ARRAY && k->n == 2, "nested");
            CHECK(g.alignment == (align ? align : 32) && g.data_offset % g.alignment == 0, "alignment %llu",
                  (unsigned long long)g.alignment);
            const frigg_gguf_tensor *t = frigg_gguf_find_tensor(&g, "w.f32"), *q = frigg_gguf_find_tensor(&g, "w.q8");
            CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && t->nbytes == 32 && t->nelem == 8, "f32 tensor info");
            CHECK(q && q->nbytes == 34 && q->nelem == 32, "q8 tensor info");
            if (t && q) {
                float v[32];
                CHECK(!frigg_gguf_dequant_f32(t->type, t->data, 8, v) && v[7] == 7.0f, "f32 data");
                CHECK(!frigg_gguf_dequant_f32(q->type, q->data, 32, v) && v[0] == -8.0f && v[31] == 7.5f,
                      "q8_0 data: %g %g", v[0], v[31]);
            }
        }
        frigg_gguf_close(&g);
        /* Every prefix of the file is refused (the last tensor's data ends the file), with no read past it: run
         * under ASan by make sanitize and the fuzz smoke. */
        int all_refused = 1;
        for (size_t n = 0; n < w.n; n++) {
            frigg_gguf h;
            if (frigg_gguf_parse(&h, w.b, n, "cut.gguf") == 0) all_refused = 0;
            frigg_gguf_close(&h);
        }
        CHECK(all_refused, "every truncation refused");
        free(w.b);
    }
}

/* A file with one F32 tensor [4] named "w" at data offset `off`, `dbytes` data bytes, alignment key `align`. */
static buf one_tensor(uint64_t off, size_t dbytes, int64_t align, uint64_t ne0, uint32_t type) {
    buf w = {0};
    hdr(&w, 1, align >= 0 ? 1 : 0);
    if (align >= 0) kv_u32(&w, "general.alignment", (uint32_t)align);
    uint64_t ne[1] = {ne0};
    tinfo(&w, "w", 1, ne, type, off);
    pad_to(&w, align > 0 && !(align & (align - 1)) ? (size_t)align : 32);
    for (size_t i = 0; i < dbytes; i++) u8(&w, 0);
    return w;
}

static void expect_err(buf w, const char *needle, const char *what) {
    frigg_gguf g;
    int rc = parse(&w, &g);
    CHECK(rc == -1, "%s: accepted", what);
    if (rc == -1) CHECK(strstr(frigg_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, frigg_error(), needle);
    frigg_gguf_close(&g);
    free(w.b);
}

static void test_refusals(void) {
    buf w = {0};
    put(&w, "GGUX", 4), u32(&w, 3), u64(&w, 0), u64(&w, 0);
    expect_err(w, "no \"GGUF\" magic", "bad magic");
    w = (buf){0};
    put(&w, "GGUF", 4), u32(&w, 1), u64(&w, 0), u64(&w, 0);
    expect_err(w, "version 1", "v1");
    w = (buf){0};
    put(&w, "GGUF", 4), u32(&w, 0x03000000u), u64(&w, 0), u64(&w, 0);
    expect_err(w, "big-endian", "big-endian");
    w = (buf){0};
    hdr(&w, 0, 1000000);
    expect_err(w, "kv_count 1000000", "lying kv count");
    w = (buf){0};
    hdr(&w, 1u << 30, 0);
    expect_err(w, "tensor_count", "lying tensor count");
    w = (buf){0};
    hdr(&w, 0, 1), u64(&w, 1000), put(&w, "k", 1), u64(&w, 0), u64(&w, 0);
    expect_err(w, "runs past the end", "lying key length");
    w = (buf){0};
    hdr(&w, 0, 1), str(&w, "big.array"), u32(&w, 9), u32(&w, 4), u64(&w, 1ull << 40);
    expect_err(w, "\"big.array\"", "lying array count");
    w = (buf){0};
    hdr(&w, 0, 1), str(&w, "s.array"), u32(&w, 9), u32(&w, 8), u64(&w, 2), str(&w, "ok"), u64(&w, 99);
    expect_err(w, "array element 1 of key \"s.array\"", "lying string in an array");
    w = (buf){0};
    hdr(&w, 0, 1), str(&w, "bad.type"), u32(&w, 13);
    expect_err(w, "value type 13", "unknown value type");
    w = (buf){0};
    hdr(&w, 0, 1), str(&w, "b"), u32(&w, 7), u8(&w, 2);
    expect_err(w, "bool value 2", "bool 2");
    w = (buf){0};
    hdr(&w, 0, 2), kv_u32(&w, "dup", 1), kv_u32(&w, "dup", 2);
    expect_err(w, "\"dup\" appears twice", "duplicate key");
    w = (buf){0};
    hdr(&w, 0, 1), u64(&w, 3), put(&w, "a\0b", 3), u32(&w, 4), u32(&w, 0);
    expect_err(w, "NUL", "NUL in a key");
    w = (buf){0};
    hdr(&w, 0, 1);
    str(&w, "deep"), u32(&w, 9), u32(&w, 9), u64(&w, 1);
    for (int i = 0; i < 12; i++) u32(&w, 9), u64(&w, 1); /* arrays of arrays of ... */
    expect_err(w, "nested deeper", "deep nesting");
    expect_err(one_tensor(16, 64, 32, 4, FRIGG_GGML_F32), "not a multiple of the alignment", "misaligned tensor");
    expect_err(one_tensor(0, 8, 32, 4, FRIGG_GGML_F32), "\"w\"", "tensor past the end");
    expect_err(one_tensor(1ull << 62, 64, 32, 4, FRIGG_GGML_F32), "run past the end", "huge offset");
    expect_err(one_tensor(0, 64, 48, 4, FRIGG_GGML_F32), "not a power of two", "alignment 48");
    expect_err(one_tensor(0, 64, 32, 4, 31), "ggml type 31", "removed ggml type");
    expect_err(one_tensor(0, 64, 32, 33, FRIGG_GGML_Q8_0), "not a multiple of Q8_0's block of 32", "partial block");
    expect_err(one_tensor(0, 64, 32, 1ull << 41, FRIGG_GGML_F32), "2^40", "too many elements");
    /* general.alignment of another type */
    w = (buf){0};
    hdr(&w, 0, 1), str(&w, "general.alignment"), u32(&w, 10), u64(&w, 32);
    expect_err(w, "expected UINT32", "alignment u64");
    /* overlapping and duplicate tensors, n_dims 0 */
    uint64_t ne[1] = {8};
    w = (buf){0};
    hdr(&w, 2, 0), tinfo(&w, "a", 1, ne, 0, 0), tinfo(&w, "b", 1, ne, 0, 0);
    pad_to(&w, 32);
    for (int i = 0; i < 64; i++) u8(&w, 0);
    expect_err(w, "overlap", "overlapping tensors");
    w = (buf){0};
    hdr(&w, 2, 0), tinfo(&w, "a", 1, ne, 0, 0), tinfo(&w, "a", 1, ne, 0, 32);
    pad_to(&w, 32);
    for (int i = 0; i < 64; i++) u8(&w, 0);
    expect_err(w, "tensor \"a\" appears twice", "duplicate tensor");
    w = (buf){0};
    hdr(&w, 1, 0), tinfo(&w, "z", 0, ne, 0, 0), u64(&w, 0), u64(&w, 0);
    expect_err(w, "n_dims 0", "0 dims");
    /* The tensor's error names it and the offset */
    w = one_tensor(0, 8, 32, 4, FRIGG_GGML_F32);
    frigg_gguf g;
    parse(&w, &g);
    CHECK(strstr(frigg_error(), "offset") && strstr(frigg_error(), "tensor \"w\""), "error names tensor and offset: %s",
          frigg_error());
    frigg_gguf_close(&g);
    free(w.b);
}

/* ---- the ggml blocks on values known by construction ---- */
static void test_blocks(void) {
    unsigned char b[256];
    float y[256];
    /* Q4_0: d = 1.0 (fp16 0x3c00); nibble j low = j, high = 15 - j: values (j - 8) and (7 - j) */
    memset(b, 0, sizeof b);
    b[0] = 0x00, b[1] = 0x3c;
    for (int j = 0; j < 16; j++) b[2 + j] = (unsigned char)(j | (15 - j) << 4);
    frigg_gguf_dequant_f32(FRIGG_GGML_Q4_0, b, 32, y);
    int ok = 1;
    for (int j = 0; j < 16; j++) ok &= y[j] == (float)(j - 8) && y[16 + j] == (float)(7 - j);
    CHECK(ok, "q4_0 nibble order");
    /* Q4_K: d = 1, dmin = 0.5 (0x3800), sub-block j scale j+1 and min 2 (j < 4 only: the low 6 bits), q = l % 16 */
    memset(b, 0, sizeof b);
    b[0] = 0x00, b[1] = 0x3c, b[2] = 0x00, b[3] = 0x38;
    for (int j = 0; j < 4; j++) b[4 + j] = (unsigned char)(j + 1), b[8 + j] = 2;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b[16 + c * 32 + l] = (unsigned char)((l % 16) | ((l % 16) << 4));
    frigg_gguf_dequant_f32(FRIGG_GGML_Q4_K, b, 256, y);
    ok = 1;
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) ok &= y[j * 32 + l] == (float)((j + 1) * (l % 16)) - 1.0f;
    for (int e = 128; e < 256; e++) ok &= y[e] == 0.0f; /* sub-blocks 4..7: scale and min 0 */
    CHECK(ok, "q4_k scales and mins");
    /* Q6_K: d = 1, scales 1, ql/qh = 0: every value -32 */
    memset(b, 0, sizeof b);
    for (int k = 0; k < 16; k++) b[192 + k] = 1;
    b[208] = 0x00, b[209] = 0x3c;
    frigg_gguf_dequant_f32(FRIGG_GGML_Q6_K, b, 256, y);
    CHECK(y[0] == -32.0f && y[255] == -32.0f, "q6_k offset 32");
    CHECK(frigg_gguf_dequant_f32(FRIGG_GGML_Q8_K, b, 256, y) == -1 && strstr(frigg_error(), "Q8_K"), "q8_k refused");
}

/* ---- hrm_text metadata ---- */
typedef struct {
    const char *drop, *extra_key;
    uint32_t kvh, blocks;
    const char *arch;
} hcase;

/* A complete hrm_text GGUF of vocab 8, hidden 4 (2 heads x 2), intermediate 4, 1 layer per stack, H 1, L 1 (2 slots). */
static buf hrm_file(const hcase *c) {
    static const char *const kinds[] = {"attn_gate", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                        "ffn_down"};
    int nkv = 14 - (c->drop ? 1 : 0) + (c->extra_key ? 1 : 0);
    buf w = {0};
    hdr(&w, 3 + 16, (uint64_t)nkv);
#define K(name, stmt) if (!c->drop || strcmp(c->drop, name)) { stmt; }
    K("general.architecture", kv_str(&w, "general.architecture", c->arch ? c->arch : "hrm_text"));
    K("hrm_text.block_count", kv_u32(&w, "hrm_text.block_count", c->blocks ? c->blocks : 2));
    K("hrm_text.context_length", kv_u32(&w, "hrm_text.context_length", 64));
    K("hrm_text.embedding_length", kv_u32(&w, "hrm_text.embedding_length", 4));
    K("hrm_text.feed_forward_length", kv_u32(&w, "hrm_text.feed_forward_length", 4));
    K("hrm_text.attention.head_count", kv_u32(&w, "hrm_text.attention.head_count", 2));
    K("hrm_text.attention.head_count_kv", kv_u32(&w, "hrm_text.attention.head_count_kv", c->kvh ? c->kvh : 2));
    K("hrm_text.rope.freq_base", kv_f32(&w, "hrm_text.rope.freq_base", 10000.0f));
    K("hrm_text.attention.layer_norm_rms_epsilon", kv_f32(&w, "hrm_text.attention.layer_norm_rms_epsilon", 1e-6f));
    K("hrm_text.embedding_scale", kv_f32(&w, "hrm_text.embedding_scale", 16.0f));
    K("hrm_text.hrm.layers_per_stack", kv_u32(&w, "hrm_text.hrm.layers_per_stack", 1));
    K("hrm_text.hrm.h_cycles", kv_u32(&w, "hrm_text.hrm.h_cycles", 1));
    K("hrm_text.hrm.l_cycles", kv_u32(&w, "hrm_text.hrm.l_cycles", 1));
    K("hrm_text.hrm.prefix_lm", kv_bool(&w, "hrm_text.hrm.prefix_lm", 1));
#undef K
    if (c->extra_key) kv_u32(&w, c->extra_key, 1);
    uint64_t off = 0, emb[2] = {4, 8}, z[1] = {4}, sq[2] = {4, 4};
    tinfo(&w, "token_embd.weight", 2, emb, FRIGG_GGML_F32, off), off += 128;
    tinfo(&w, "output.weight", 2, emb, FRIGG_GGML_F32, off), off += 128;
    tinfo(&w, "hrm.z_l_init", 1, z, FRIGG_GGML_F32, off), off += 32;
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 8; k++) {
            char n[64];
            snprintf(n, sizeof n, "blk.%d.%s.weight", b, kinds[k]);
            tinfo(&w, n, 2, sq, FRIGG_GGML_F32, off), off += 64;
        }
    pad_to(&w, 32);
    for (uint64_t i = 0; i < off / 4; i++) {
        float f = (float)((i * 37) % 11) / 16.0f - 0.3f;
        uint32_t u;
        memcpy(&u, &f, 4);
        u32(&w, u);
    }
    return w;
}

static char *g_tmp;
static char *write_file(const char *name, const buf *w) {
    char *p = frigg_path_join(g_tmp, name);
    FILE *f = fopen(p, "wb");
    fwrite(w->b, 1, w->n, f);
    fclose(f);
    return p;
}

static void expect_hrm(const hcase *c, const char *needle, const char *what) {
    buf w = hrm_file(c);
    char *p = write_file("h.gguf", &w);
    frigg_model *m = frigg_model_load(p);
    if (!needle) {
        CHECK(m != NULL, "%s: %s", what, frigg_error());
        if (m) {
            CHECK(m->cfg.layers_per_stack == 1 && m->cfg.num_slots == 2 && m->cfg.head_dim == 2 &&
                      m->cfg.vocab_size == 8 && m->cfg.rms_norm_eps == 1e-6 && m->cfg.embedding_scale == 16.0 &&
                      m->cfg.prefix_lm && m->layout == FRIGG_LAYOUT_SPLIT,
                  "%s: config", what);
            /* blk.1.ffn_down (the H stack's layer 0 down_proj) starts at value 72 + 15 * 16 of the data */
            float want = frigg_round_bf16((float)((312 * 37) % 11) / 16.0f - 0.3f);
            CHECK(frigg_bf16_to_f32(((const uint16_t *)m->stack[FRIGG_STACK_H][0].down.w)[0]) == want,
                  "%s: blk.1.ffn_down is the H stack's down_proj", what);
        }
    } else {
        CHECK(m == NULL, "%s: loaded", what);
        if (!m) CHECK(strstr(frigg_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, frigg_error(), needle);
    }
    frigg_model_free(m);
    free(p);
    free(w.b);
}

static void test_hrm(void) {
    expect_hrm(&(hcase){0}, NULL, "complete hrm_text file");
    expect_hrm(&(hcase){.arch = "llama"}, "\"llama\", expected \"hrm_text\"", "another architecture");
    expect_hrm(&(hcase){.drop = "hrm_text.hrm.h_cycles"}, "\"hrm_text.hrm.h_cycles\" is missing", "missing key");
    expect_hrm(&(hcase){.drop = "hrm_text.embedding_scale"}, "\"hrm_text.embedding_scale\" is missing", "no scale");
    expect_hrm(&(hcase){.extra_key = "hrm_text.rope.scaling.factor"}, "\"hrm_text.rope.scaling.factor\"", "unknown key");
    expect_hrm(&(hcase){.extra_key = "foo.bar"}, "\"foo.bar\"", "unknown namespace");
    expect_hrm(&(hcase){.extra_key = "split.count"}, NULL, "split.count 1");
    expect_hrm(&(hcase){.kvh = 1}, "head_count_kv\" = 1", "GQA");
    expect_hrm(&(hcase){.blocks = 3}, "block_count\" = 3", "slot count");
    /* A tensor missing or of another shape is named by its GGUF name. */
    buf w = hrm_file(&(hcase){0});
    unsigned char *at = memmem(w.b, w.n, "blk.1.ffn_down.weight", 21);
    at[0] = 'x'; /* "xlk.1.ffn_down.weight": unknown, and blk.1.ffn_down missing */
    char *p = write_file("h2.gguf", &w);
    frigg_model *m = frigg_model_load(p);
    CHECK(!m && strstr(frigg_error(), "missing tensor \"blk.1.ffn_down.weight\""), "missing tensor: %s", frigg_error());
    frigg_model_free(m);
    free(p);
    free(w.b);
}

/* ---- the fixture: BF16 GGUF == safetensors source, weight for weight ---- */
static int mats_equal(const frigg_mat *a, const frigg_mat *b) {
    return a->rows == b->rows && a->cols == b->cols && a->dtype == FRIGG_DT_BF16 && b->dtype == FRIGG_DT_BF16 &&
           !memcmp(a->w, b->w, (size_t)a->rows * a->cols * 2);
}

static void test_fixture(void) {
    char *dir = th_path(th_root(), "golden/fixtures/tiny-gguf"), *g = th_path(dir, "model-bf16.gguf");
    frigg_model *ms = frigg_model_load(dir), *mg = frigg_model_load(g);
    CHECK(ms && mg, "fixture loads: %s", frigg_error());
    if (ms && mg) {
        const frigg_config *a = &ms->cfg, *b = &mg->cfg;
        CHECK(a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
                  a->intermediate_size == b->intermediate_size && a->layers_per_stack == b->layers_per_stack &&
                  a->num_slots == b->num_slots && a->num_heads == b->num_heads && a->head_dim == b->head_dim &&
                  a->H_cycles == b->H_cycles && a->L_cycles == b->L_cycles &&
                  a->max_position_embeddings == b->max_position_embeddings && a->rms_norm_eps == b->rms_norm_eps &&
                  a->embedding_scale == b->embedding_scale && a->rope_theta == b->rope_theta &&
                  a->prefix_lm == b->prefix_lm && a->bos_token_id == b->bos_token_id &&
                  a->pad_token_id == b->pad_token_id && a->n_eos == b->n_eos &&
                  a->eos_token_ids[0] == b->eos_token_ids[0],
              "GGUF config == config.json");
        int ok = mats_equal(&ms->embed, &mg->embed) && mats_equal(&ms->lm_head, &mg->lm_head) &&
                 !memcmp(ms->z_L_init, mg->z_L_init, (size_t)a->hidden_size * 2);
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < a->layers_per_stack; i++) {
                const frigg_mat *x[FRIGG_LAYER_MATS], *y[FRIGG_LAYER_MATS];
                frigg_layer_mats(&ms->stack[s][i], x);
                frigg_layer_mats(&mg->stack[s][i], y);
                for (int j = 0; j < FRIGG_LAYER_MATS; j++) ok &= mats_equal(x[j], y[j]);
            }
        CHECK(ok, "every weight of the BF16 GGUF is the safetensors' (packed gqkv/gate_up = split GGUF blocks)");
        CHECK(ms->n_params == mg->n_params, "parameter counts");
        CHECK(mg->layout == FRIGG_LAYOUT_SPLIT && ms->layout == FRIGG_LAYOUT_PACKED, "layouts");
        char *t = frigg_model_side_path(g, "tokenizer.json"), *want = th_path(dir, "tokenizer.json");
        CHECK(!strcmp(t, want), "tokenizer beside the GGUF: %s", t);
        free(t);
        free(want);
    }
    frigg_model_free(ms);
    frigg_model_free(mg);
    /* The quantized files load, and their weights are near the source's. */
    static const char *const q[] = {"model-q8_0.gguf", "model-q4_k_m.gguf", "model-q5_k_m.gguf"};
    for (int k = 0; k < 3; k++) {
        char *p = th_path(dir, q[k]);
        frigg_model *m = frigg_model_load(p), *s = frigg_model_load(dir);
        CHECK(m && s, "%s loads: %s", q[k], frigg_error());
        if (m && s) {
            const uint16_t *x = s->stack[0][0].q.w, *y = m->stack[0][0].q.w;
            double e = 0, n = 0;
            for (int i = 0; i < 256 * 256; i++) {
                double d = frigg_bf16_to_f32(x[i]) - frigg_bf16_to_f32(y[i]);
                e += d * d, n += frigg_bf16_to_f32(x[i]) * frigg_bf16_to_f32(x[i]);
            }
            CHECK(e / n < 0.01, "%s: relative squared error %g of q_proj", q[k], e / n);
        }
        frigg_model_free(m);
        frigg_model_free(s);
        free(p);
    }
    free(g);
    free(dir);
}

static int dump(const char *path, const char *out) {
    frigg_gguf g;
    if (frigg_gguf_open(&g, path)) {
        fprintf(stderr, "test_gguf: %s\n", frigg_error());
        frigg_gguf_close(&g);
        return 1;
    }
    mkdir(out, 0755);
    int rc = 0;
    for (int64_t i = 0; i < g.ntensors && !rc; i++) {
        const frigg_gguf_tensor *t = &g.tensors[i];
        float *v = frigg_xmalloc((size_t)t->nelem * 4 + 4);
        if (frigg_gguf_dequant_f32(t->type, t->data, (size_t)t->nelem, v)) {
            fprintf(stderr, "test_gguf: %s: %s\n", t->name, frigg_error());
            rc = 1;
        } else {
            char *p = frigg_xmalloc(strlen(out) + strlen(t->name) + 8);
            sprintf(p, "%s/%s.f32", out, t->name);
            FILE *f = fopen(p, "wb");
            if (!f || fwrite(v, 4, (size_t)t->nelem, f) != (size_t)t->nelem) rc = 1;
            if (f) fclose(f);
            free(p);
        }
        free(v);
    }
    frigg_gguf_close(&g);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--dump")) return dump(argv[2], argv[3]);
    TEST_MAIN_BEGIN("test_gguf");
    g_tmp = tm_tempdir();
    test_roundtrip();
    test_refusals();
    test_blocks();
    test_hrm();
    test_fixture();
    tm_rmrf(g_tmp);
    free(g_tmp);
    TEST_MAIN_END();
}
