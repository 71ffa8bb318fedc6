/* fuzz_split_wire.c: libFuzzer target for what a rank of a model split across processes reads
 * from rank 0 (a call: src/model/split_wire.c) and rank 0 from it (an answer); the first byte
 * picks which. Decoders must stay in bounds, and a call they accept must be what the encoder
 * writes back, byte for byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/split.h"

static void call(const uint8_t *data, size_t size) {
    struct split_call c;
    struct split_wire_room room = {0}, out = {0};
    size_t len = 0;
    if (split_wire_read_call(data, size, &c, &room) == OX_OK) {
        const uint8_t *again = split_wire_call(&c, 0, &out, &len);
        if (!again || len != size || memcmp(again, data, size))
            abort(); /* accepted bytes the encoder would not write */
    }
    split_wire_free(&room), split_wire_free(&out);
}

static void answer(const uint8_t *data, size_t size) {
    enum ox_status st;
    const char *msg;
    const uint8_t *bytes;
    size_t msg_len, n;
    uint64_t value;
    if (split_wire_read_answer(data, size, &st, &msg, &msg_len, &value, &bytes, &n) != OX_OK)
        return;
    if (msg < (const char *)data || msg + msg_len > (const char *)data + size ||
        bytes + n != data + size)
        abort(); /* the parts must lie within the answer */
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < msg_len; i++)
        sink ^= (uint8_t)msg[i];
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    if (data[0] & 1)
        answer(data + 1, size - 1);
    else
        call(data + 1, size - 1);
    return 0;
}
