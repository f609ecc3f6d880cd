/* tok_map.c — the tokenizer's containers (byte buffers, hash maps) and UTF-8 helpers.
 * Hand-written open addressing rather than jansson objects: a 262k-entry vocab and 515k merges are
 * looked up once per character and per merge candidate, so the lookup cost is the encoder's cost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

void tok_buf_put(tok_buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = frigg_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tok_buf_put_cp(tok_buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    tok_buf_put(b, u, n);
}

char *tok_buf_take(tok_buf *b, size_t *len) {
    if (!b->p) tok_buf_put(b, "", 0);
    char *p = b->p;
    if (len) *len = b->n;
    b->p = NULL;
    b->n = b->cap = 0;
    return p;
}

void tok_ivec_push(tok_ivec *a, int32_t x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = frigg_xrealloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = x;
}

/* ---- hashing ---- */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0x100000001b3ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return mix64(h ^ w ^ ((uint64_t)n << 56));
}

static size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
}

/* ---- string map ---- */
void tok_strmap_init(tok_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = expected ? expected : 16;
    m->e = frigg_xmalloc(m->cap * sizeof *m->e);
    size_t ns = pow2_at_least(m->cap * 2);
    m->slots = frigg_xcalloc(ns, sizeof *m->slots);
    m->slot_mask = ns - 1;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->arena);
    free(m->e);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static inline uint32_t slot_tag(uint64_t h) { return (uint32_t)(h >> 32); }

static void strmap_rehash(tok_strmap *m) {
    size_t ns = (m->slot_mask + 1) * 2;
    uint64_t *slots = frigg_xcalloc(ns, sizeof *slots);
    for (size_t i = 0; i <= m->slot_mask; i++) {
        uint64_t s = m->slots[i];
        if (!s) continue;
        /* the slot index came from the low hash bits, which the tag does not keep: rehash the key */
        const tok_strmap_entry *en = &m->e[(uint32_t)s - 1];
        uint64_t h = hash_bytes(m->arena + en->off, en->len);
        size_t j = h & (ns - 1);
        while (slots[j]) j = (j + 1) & (ns - 1);
        slots[j] = s;
    }
    free(m->slots);
    m->slots = slots;
    m->slot_mask = ns - 1;
}

static long strmap_find(const tok_strmap *m, const char *k, size_t len, uint64_t h, size_t *slot) {
    size_t i = h & m->slot_mask;
    uint32_t tag = slot_tag(h);
    for (;;) {
        uint64_t s = m->slots[i];
        if (!s) {
            *slot = i;
            return -1;
        }
        if ((uint32_t)(s >> 32) == tag) {
            size_t e = (uint32_t)s - 1;
            if (m->e[e].len == len && memcmp(m->arena + m->e[e].off, k, len) == 0) return (long)e;
        }
        i = (i + 1) & m->slot_mask;
    }
}

size_t tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t val) {
    uint64_t h = hash_bytes(k, len);
    size_t slot;
    long e = strmap_find(m, k, len, h, &slot);
    if (e >= 0) {
        m->e[e].val = val;
        return (size_t)e;
    }
    if (m->n == m->cap) {
        m->cap *= 2;
        m->e = frigg_xrealloc(m->e, m->cap * sizeof *m->e);
    }
    if (m->arena_n + len + 1 > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_n + len + 1) cap *= 2;
        m->arena = frigg_xrealloc(m->arena, cap);
        m->arena_cap = cap;
    }
    memcpy(m->arena + m->arena_n, k, len);
    m->arena[m->arena_n + len] = 0; /* keys double as C strings where they hold no NUL */
    size_t ne = m->n++;
    m->e[ne] = (tok_strmap_entry){m->arena_n, (uint32_t)len, val};
    m->arena_n += len + 1;
    m->slots[slot] = ((uint64_t)slot_tag(h) << 32) | (uint64_t)(ne + 1);
    if (m->n * 2 > m->slot_mask + 1) strmap_rehash(m);
    return ne;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len) {
    if (!m->slots) return -1;
    size_t slot;
    long e = strmap_find(m, k, len, hash_bytes(k, len), &slot);
    return e >= 0 ? m->e[e].val : -1;
}

/* ---- pair map ---- */
void tok_pairmap_init(tok_pairmap *m, size_t expected) {
    size_t ns = pow2_at_least(expected * 2 + 1);
    m->slot = frigg_xmalloc(ns * sizeof *m->slot);
    for (size_t i = 0; i < ns; i++) m->slot[i].key = UINT64_MAX;
    m->n = 0;
    m->mask = ns - 1;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static void pairmap_grow(tok_pairmap *m) {
    tok_pairmap g;
    tok_pairmap_init(&g, (m->mask + 1));
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slot[i].key != UINT64_MAX)
            tok_pairmap_put(&g, (uint32_t)(m->slot[i].key >> 32), (uint32_t)m->slot[i].key, m->slot[i].rank,
                            m->slot[i].val);
    tok_pairmap_free(m);
    *m = g;
}

void tok_pairmap_put(tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, int32_t val) {
    uint64_t k = ((uint64_t)a << 32) | b;
    size_t i = mix64(k) & m->mask;
    while (m->slot[i].key != UINT64_MAX && m->slot[i].key != k) i = (i + 1) & m->mask;
    if (m->slot[i].key == UINT64_MAX) {
        m->slot[i].key = k;
        m->n++;
    }
    m->slot[i].rank = rank;
    m->slot[i].val = val;
    if (m->n * 2 > m->mask + 1) pairmap_grow(m);
}

void tok_pairmap_prefetch(const tok_pairmap *m, uint32_t a, uint32_t b) {
    if (m->slot) __builtin_prefetch(&m->slot[mix64(((uint64_t)a << 32) | b) & m->mask]);
}

int tok_pairmap_get(const tok_pairmap *m, uint32_t a, uint32_t b, uint32_t *rank, int32_t *val) {
    if (!m->slot) return 0;
    uint64_t k = ((uint64_t)a << 32) | b;
    size_t i = mix64(k) & m->mask;
    for (;;) {
        const tok_pair_slot *s = &m->slot[i];
        if (s->key == k) {
            if (rank) *rank = s->rank;
            if (val) *val = s->val;
            return 1;
        }
        if (s->key == UINT64_MAX) return 0;
        i = (i + 1) & m->mask;
    }
}

/* ---- UTF-8 ---- */
size_t tok_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t min, cp;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
            min = 0x80;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            min = 0x800;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            min = 0x10000;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (i + n > len) return i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n;
    }
    return len;
}

uint32_t tok_utf8_next(const char *str, size_t n, size_t *adv) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    size_t k = tok_utf8_len((unsigned char)c);
    if (k > n) k = n; /* only on invalid input, which callers have rejected */
    *adv = k;
    if (k == 1) return c;
    uint32_t cp = c & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < k; i++) cp = (cp << 6) | (s[i] & 0x3F);
    return cp;
}

int tok_is_white_space(uint32_t c) {
    /* Unicode's White_Space property (stable since Unicode 6.3), which Rust's regex \s uses. */
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}
