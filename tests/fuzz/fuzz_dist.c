/* fuzz_dist.c: libFuzzer target for what a multi-GPU group reads from the network and from
 * users: the input's first 32 bytes as a rank's hello, the next 16 as the header of a frame
 * rank 0 sends, the rest (to a NUL) as rank 0's address. Decoders must stay in bounds, and
 * what they accept must be what the encoders write back and within the limits they promise. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dist/dist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= DIST_HELLO_BYTES) {
        struct dist_hello h;
        uint8_t again[DIST_HELLO_BYTES];
        if (dist_hello_decode(data, &h)) {
            dist_hello_encode(&h, again);
            if (memcmp(again, data, DIST_HELLO_BYTES))
                abort(); /* accepted bytes the encoder would not write */
        }
        data += DIST_HELLO_BYTES, size -= DIST_HELLO_BYTES;
    }
    if (size >= DIST_HEADER_BYTES) {
        struct dist_header f;
        if (dist_header_decode(data, &f) &&
            (f.kind < DIST_WELCOME || f.kind > DIST_REPLY ||
             (f.kind == DIST_REFUSAL && f.len > DIST_NOTE_MAX) || (f.kind == DIST_BYE && f.len)))
            abort();
        data += DIST_HEADER_BYTES, size -= DIST_HEADER_BYTES;
    }
    char *addr = malloc(size + 1), host[64];
    memcpy(addr, data, size);
    addr[size] = 0;
    uint16_t port = 0;
    if (dist_parse_addr(addr, host, sizeof host, &port)) {
        size_t n = strlen(host);
        if (port == 0 || n == 0 || n >= sizeof host || strpbrk(host, " \t\r\n"))
            abort();
    }
    free(addr);
    return 0;
}
