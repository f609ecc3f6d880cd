/* pyfmt.h — the few Python behaviours the chat template's output depends on: str() of a float
 * (shortest round-trip repr), str.strip() whitespace, and str.lower() as dictsort uses it.
 * Jinja renders values with Python's str(), so frigg must produce the same bytes. */
#ifndef FRIGG_PYFMT_H
#define FRIGG_PYFMT_H

#include <stddef.h>
#include <stdint.h>

/* Python's repr(float) / str(float): shortest digits that round-trip, fixed notation for
 * 1e-4 <= |v| < 1e16 ("0.5", "100.0"), otherwise "1e-05", "1.5e+16"; "inf", "nan" as Python.
 * Writes at most 32 bytes including the NUL; returns the length. */
int frigg_py_float_repr(double v, char out[32]);

/* Python str.isspace() for one code point (what str.strip() removes). */
int frigg_py_isspace(uint32_t cp);
/* str.strip(): the [*start, *end) byte range of s[0..n) without leading/trailing Python
 * whitespace. s must be valid UTF-8. */
void frigg_py_strip(const char *s, size_t n, size_t *start, size_t *end);

/* str.lower() of a UTF-8 string into a malloc'd UTF-8 string (*out, *out_len). Returns -1 (with
 * frigg_error) for invalid UTF-8 and for U+03A3, whose Python lower-casing depends on the
 * neighbouring letters (final sigma) and is not implemented. */
int frigg_py_lower(const char *s, size_t n, char **out, size_t *out_len);

/* Decode one UTF-8 code point at s[0..n); returns its length (1..4) or 0 when invalid. */
int frigg_utf8_decode(const char *s, size_t n, uint32_t *cp);

typedef struct {
    uint32_t first;
    int32_t count, stride, delta;
} frigg_lower_run;
extern const frigg_lower_run frigg_lower_runs[];
extern const int frigg_lower_nruns;

#endif
