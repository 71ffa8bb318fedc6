/* header_c.c: include/oxidize.h alone, compiled as strict C11, linked to the shared library. */
#include "oxidize.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    struct ox_gguf *g = NULL;
    enum ox_status s = ox_gguf_open("/nonexistent.gguf", &g);
    int ok = s == OX_ERR_IO && g == NULL && strstr(ox_last_error(), "nonexistent") &&
             strcmp(ox_status_name(s), "OX_ERR_IO") == 0 &&
             strcmp(ox_dtype_name(OX_DTYPE_Q4_K), "q4_K") == 0 && !ox_dtype_valid(4);
    ox_gguf_free(NULL);
    printf("header_c: 1 checks, %d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
