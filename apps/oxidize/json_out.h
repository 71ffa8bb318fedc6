/* json_out.h: a tiny JSON writer for the CLI: escaped strings and round-trip floats. */
#ifndef OX_APP_JSON_OUT_H
#define OX_APP_JSON_OUT_H

#include <stddef.h>
#include <stdio.h>

/* Write s[0..n) as a quoted JSON string. Control bytes, '"' and '\' are escaped; bytes that are
 * not well-formed UTF-8 become U+FFFD (one per maximal ill-formed subpart, as Python's
 * errors="replace" does), so the output is always valid JSON whatever the file held. */
void json_write_string(FILE *f, const char *s, size_t n);

/* The same escaping without the quotes: text mode uses it to keep any string on one line. */
void json_write_escaped(FILE *f, const char *s, size_t n);

/* Shortest-safe round-trip forms: "%.9g" for f32, "%.17g" for f64; NaN and +-Inf have no JSON
 * spelling and are written as null. */
void json_write_f32(FILE *f, float x);
void json_write_f64(FILE *f, double x);

/* Length of the longest prefix of s[0..n) of at most max bytes that does not cut a UTF-8
 * sequence in two (so truncating for display does not itself create a U+FFFD). */
size_t json_utf8_prefix(const char *s, size_t n, size_t max);

#endif
