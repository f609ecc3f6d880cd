/* gsm8k.c — see gsm8k.h for the rules. */
#include "gsm8k.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }
/* A letter or digit for the sign rule; any non-ASCII byte (a UTF-8 letter such as 'ø') counts as one. */
static int is_word(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* A number starting exactly at k: 1 with out and *end, else 0. */
static int number_at(const char *s, size_t len, size_t k, char out[FRIGG_GSM8K_NUM_MAX], size_t *end) {
    size_t j = k;
    int neg = 0;
    if (j < len && s[j] == '-') {
        if (k > 0 && (is_word((unsigned char)s[k - 1]) || s[k - 1] == '.')) return 0;
        neg = 1, j++;
    }
    if (j < len && s[j] == '$') {
        j++;
        if (!neg && j < len && s[j] == '-') neg = 1, j++;
    }
    /* integer part, with thousands groups */
    size_t i0 = j;
    while (j < len && is_digit(s[j])) j++;
    size_t lead = j - i0;
    char ip[FRIGG_GSM8K_NUM_MAX];
    size_t ni = 0;
    if (lead == 0 && !(j + 1 < len && s[j] == '.' && is_digit(s[j + 1]))) return 0;
    for (size_t t = i0; t < j; t++) {
        if (ni + 1 >= sizeof ip) return 0;
        ip[ni++] = s[t];
    }
    if (lead >= 1 && lead <= 3)
        while (j + 3 < len && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) && is_digit(s[j + 3]) &&
               !(j + 4 < len && is_digit(s[j + 4]))) {
            if (ni + 4 >= sizeof ip) return 0;
            memcpy(ip + ni, s + j + 1, 3);
            ni += 3;
            j += 4;
        }
    /* fraction */
    char fp[FRIGG_GSM8K_NUM_MAX];
    size_t nf = 0;
    if (j + 1 < len && s[j] == '.' && is_digit(s[j + 1])) {
        j++;
        while (j < len && is_digit(s[j])) {
            if (nf + 1 >= sizeof fp) return 0;
            fp[nf++] = s[j++];
        }
    }
    /* normalise */
    size_t a = 0;
    while (a + 1 < ni && ip[a] == '0') a++;
    while (nf && fp[nf - 1] == '0') nf--;
    size_t o = 0;
    int zero = (ni == 0 || (ni - a == 1 && ip[a] == '0')) && nf == 0;
    if (neg && !zero) out[o++] = '-';
    if (ni == 0) out[o++] = '0';
    else {
        if (o + (ni - a) + 1 > FRIGG_GSM8K_NUM_MAX) return 0;
        memcpy(out + o, ip + a, ni - a);
        o += ni - a;
    }
    if (nf) {
        if (o + 1 + nf + 1 > FRIGG_GSM8K_NUM_MAX) return 0;
        out[o++] = '.';
        memcpy(out + o, fp, nf);
        o += nf;
    }
    out[o] = 0;
    *end = j;
    return 1;
}

int frigg_gsm8k_next_number(const char *s, size_t len, size_t *pos, char out[FRIGG_GSM8K_NUM_MAX], size_t *start,
                            size_t *end) {
    for (size_t i = *pos; i < len; i++) {
        char c = s[i];
        if (!(is_digit(c) || c == '-' || c == '$' || c == '.')) continue;
        size_t e;
        if (number_at(s, len, i, out, &e)) {
            if (start) *start = i;
            if (end) *end = e;
            *pos = e;
            return 1;
        }
        /* a digit run too long to be a number: skip the whole run */
        if (is_digit(c))
            while (i + 1 < len && (is_digit(s[i + 1]) || s[i + 1] == ',' || s[i + 1] == '.')) i++;
    }
    *pos = len;
    out[0] = 0;
    return 0;
}

int frigg_gsm8k_normalize(const char *s, size_t len, char out[FRIGG_GSM8K_NUM_MAX]) {
    size_t e;
    if (len && number_at(s, len, 0, out, &e) && e == len) return 0;
    out[0] = 0;
    return -1;
}

/* The first number after "####" at p (spaces and tabs skipped): 1 with out, else 0. */
static int after_hashes(const char *s, size_t len, size_t p, char out[FRIGG_GSM8K_NUM_MAX]) {
    size_t k = p + 4, e;
    while (k < len && (s[k] == ' ' || s[k] == '\t')) k++;
    return number_at(s, len, k, out, &e);
}

static const char *find(const char *s, size_t len, size_t from, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = from; i + n <= len; i++)
        if (!memcmp(s + i, needle, n)) return s + i;
    return NULL;
}

int frigg_gsm8k_gold(const char *answer, char out[FRIGG_GSM8K_NUM_MAX]) {
    size_t len = strlen(answer);
    const char *last = NULL;
    for (const char *p = find(answer, len, 0, "####"); p; p = find(answer, len, (size_t)(p - answer) + 1, "####"))
        last = p;
    if (last && after_hashes(answer, len, (size_t)(last - answer), out)) return 0;
    out[0] = 0;
    return -1;
}

int frigg_gsm8k_extract(const char *text, size_t len, frigg_gsm8k_mode mode, char out[FRIGG_GSM8K_NUM_MAX]) {
    if (mode == FRIGG_GSM8K_HASH_OR_LAST)
        for (const char *p = find(text, len, 0, "####"); p; p = find(text, len, (size_t)(p - text) + 1, "####"))
            if (after_hashes(text, len, (size_t)(p - text), out)) return 1;
    char num[FRIGG_GSM8K_NUM_MAX];
    size_t pos = 0;
    int found = 0;
    while (frigg_gsm8k_next_number(text, len, &pos, num, NULL, NULL)) {
        memcpy(out, num, sizeof num);
        found = 1;
    }
    if (!found) out[0] = 0;
    return found ? 2 : 0;
}

char *frigg_gsm8k_clean_solution(const char *answer) {
    frigg_strbuf b = FRIGG_STRBUF_INIT;
    const char *p = answer;
    for (;;) {
        const char *o = strstr(p, "<<");
        const char *c = o ? strstr(o + 2, ">>") : NULL;
        if (!c) break;
        frigg_sb_put(&b, p, (size_t)(o - p));
        p = c + 2;
    }
    frigg_sb_puts(&b, p);
    return frigg_sb_take(&b);
}

char *frigg_gsm8k_prompt(const char *const *shot_q, const char *const *shot_a, int nshots, const char *question) {
    frigg_strbuf b = FRIGG_STRBUF_INIT;
    for (int i = 0; i < nshots; i++) {
        char *a = frigg_gsm8k_clean_solution(shot_a[i]);
        frigg_sb_printf(&b, "Question: %s\nAnswer: %s\n\n", shot_q[i], a);
        free(a);
    }
    frigg_sb_printf(&b, "Question: %s\nAnswer:", question);
    return frigg_sb_take(&b);
}

void frigg_wilson(long k, long n, double z, double *lo, double *hi) {
    if (n <= 0) {
        *lo = 0, *hi = 1;
        return;
    }
    double p = (double)k / (double)n, z2 = z * z, nn = (double)n;
    double den = 1 + z2 / nn, centre = (p + z2 / (2 * nn)) / den;
    double half = z * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / den;
    *lo = k <= 0 ? 0 : fmax(0, centre - half); /* the exact ends, not 1 - 1e-16 */
    *hi = k >= n ? 1 : fmin(1, centre + half);
}
