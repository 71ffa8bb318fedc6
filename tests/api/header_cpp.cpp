// header_cpp.cpp: include/oxidize.h alone, compiled as C++11, linked to the shared library.
#include "oxidize.h"

#include <cstdio>
#include <cstring>

int main() {
    ox_gguf *g = nullptr;
    ox_status s = ox_gguf_open("/nonexistent.gguf", &g);
    bool ok = s == OX_ERR_IO && g == nullptr && std::strstr(ox_last_error(), "nonexistent") &&
              ox_dtype_block_size(OX_DTYPE_Q8_0) == 32 && ox_dtype_type_size(OX_DTYPE_Q8_0) == 34;
    std::printf("header_cpp: 1 checks, %d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
    return ok ? 0 : 1;
}
