/* byte_unicode.c: GPT-2's byte <-> code point map, computed from its three ranges (no tables). */
#include "tokenizer/byte_unicode.h"

/* The bytes that keep their own value: printable Latin-1 except U+00AD (soft hyphen). */
static int is_self_mapped(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t byte_unicode_cpt(uint8_t b) {
    /* The remapped bytes are 0x00..0x20 (33), 0x7F..0xA0 (34) and 0xAD, numbered from U+0100
     * in byte order, as bytes_to_unicode() assigns them. */
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100u + 33u + (uint32_t)(b - 0x7F);
    if (b == 0xAD)
        return 0x100u + 67u;
    return b;
}

size_t byte_unicode_encode(uint8_t b, char out[2]) {
    uint32_t c = byte_unicode_cpt(b);
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | (c >> 6)); /* every mapped code point is below U+0800 */
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

int byte_unicode_decode(const char *s, size_t len, size_t *used) {
    const uint8_t *u = (const uint8_t *)s;
    uint32_t c;
    if (len >= 1 && u[0] < 0x80) {
        c = u[0];
        *used = 1;
    } else if (len >= 2 && (u[0] & 0xE0) == 0xC0 && (u[1] & 0xC0) == 0x80) {
        c = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        *used = 2;
        if (c < 0x80)
            return -1; /* overlong form: not how the map writes it */
    } else {
        return -1;
    }
    if (c < 0x100)
        return is_self_mapped(c) ? (int)c : -1;
    if (c < 0x100 + 33)
        return (int)(c - 0x100);
    if (c < 0x100 + 67)
        return (int)(0x7F + (c - 0x100 - 33));
    if (c == 0x100 + 67)
        return 0xAD;
    return -1;
}
