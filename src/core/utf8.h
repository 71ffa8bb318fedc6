/* utf8.h: UTF-8 decoding the lenient way llama.cpp reads text, and encoding. */
#ifndef OX_CORE_UTF8_H
#define OX_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* One code point as llama.cpp's unicode_cpts_from_utf8 reads it: the lead byte alone decides
 * the length, continuation bytes must be 10xxxxxx and present; overlong forms and surrogates
 * pass. Returns the bytes used, or 0 when s (n > 0 bytes) does not start a sequence (a stray
 * continuation byte, F8..FF, a short or broken tail). Never reads past n. */
static inline size_t utf8_decode_lax(const uint8_t *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xC0 || s[0] >= 0xF8)
        return 0;
    size_t need = s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    if (n < need)
        return 0;
    uint32_t c = s[0] & (0x7Fu >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3Fu);
    }
    *cp = c;
    return need;
}

/* The UTF-8 bytes of cp (at most U+1FFFFF) into out, which has room for 4; returns the count. */
static inline size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
