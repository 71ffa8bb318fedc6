/* sha256.h: SHA-256 (FIPS 180-4), for pull's download checks and the server's model digests. */
#ifndef OX_APPS_COMMON_SHA256_H
#define OX_APPS_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t used;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL. */
void sha256_hex(struct sha256 *s, char out[65]);

#endif
