/* json_out.c: JSON string escaping (with UTF-8 repair) and float formatting for the CLI. */
#include "json_out.h"

#include <math.h>

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when it is ill-formed; then *skip
 * is the length of its maximal subpart (Unicode ch. 3 "U+FFFD substitution of maximal
 * subparts"), which is what Python and browsers replace by one U+FFFD. The narrowed ranges of
 * the second byte reject overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_seq(const unsigned char *p, size_t n, size_t *skip) {
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        *skip = 1;
        return 0;
    }
    for (size_t k = 1; k < len; k++) {
        if (k >= n || p[k] < lo || p[k] > hi) {
            *skip = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return len;
}

static void write_escaped_byte(FILE *f, unsigned char c) {
    switch (c) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\r': fputs("\\r", f); break;
    case '\t': fputs("\\t", f); break;
    case '\b': fputs("\\b", f); break;
    case '\f': fputs("\\f", f); break;
    default:
        /* DEL is legal raw JSON, but escaping it keeps terminals and text mode clean. */
        if (c < 0x20 || c == 0x7F)
            fprintf(f, "\\u%04x", c);
        else
            putc(c, f);
    }
}

void json_write_escaped(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t skip = 0, len = utf8_seq(p + i, n - i, &skip);
        if (len == 0) {
            fputs("\xEF\xBF\xBD", f); /* U+FFFD REPLACEMENT CHARACTER */
            i += skip;
        } else if (len == 1) {
            write_escaped_byte(f, p[i++]);
        } else {
            fwrite(p + i, 1, len, f);
            i += len;
        }
    }
}

void json_write_string(FILE *f, const char *s, size_t n) {
    putc('"', f);
    json_write_escaped(f, s, n);
    putc('"', f);
}

/* fmt is "%.9g" or "%.17g". Negative zero would print as "-0", which many readers take for the
 * integer 0; "-0.0" keeps the sign through a round trip. */
static void write_number(FILE *f, double x, const char *fmt) {
    if (!isfinite(x))
        fputs("null", f);
    else if (x == 0 && signbit(x))
        fputs("-0.0", f);
    else
        fprintf(f, fmt, x);
}

void json_write_f32(FILE *f, float x) {
    write_number(f, (double)x, "%.9g");
}

void json_write_f64(FILE *f, double x) {
    write_number(f, x, "%.17g");
}

size_t json_utf8_prefix(const char *s, size_t n, size_t max) {
    if (n <= max)
        return n;
    size_t k = max;
    /* Back up over at most 3 continuation bytes to the start of the sequence that max cuts. */
    while (k > 0 && max - k < 3 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return k;
}
