/* byte_unicode.h: GPT-2's reversible map between the 256 byte values and printable code points. */
#ifndef OX_TOKENIZER_BYTE_UNICODE_H
#define OX_TOKENIZER_BYTE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Byte-level BPE vocabularies (GPT-2's bytes_to_unicode, used by every "gpt2" tokenizer) store
 * token text with each raw byte replaced by one printable code point, so that no token holds
 * whitespace or control characters. The printable ranges '!'..'~', U+00A1..U+00AC and
 * U+00AE..U+00FF map to themselves; the other 68 bytes, in increasing order, map to U+0100,
 * U+0101, ... (so ' ' is U+0120 "Ġ" and '\n' is U+010A "Ċ"). */

/* The code point byte b maps to (below U+0144). */
uint32_t byte_unicode_cpt(uint8_t b);

/* Write the UTF-8 encoding of byte b's code point to out; returns its length (1 or 2). */
size_t byte_unicode_encode(uint8_t b, char out[2]);

/* Map the code point at the start of s (len bytes) back to its byte. Returns the byte value,
 * with *used set to the bytes consumed, or -1 when s does not start with one of the 256 code
 * points of the map. */
int byte_unicode_decode(const char *s, size_t len, size_t *used);

#endif
