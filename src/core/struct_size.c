/* struct_size.c: ox_struct_size, the sizes of oxidize.h's public structs by their tags. */
#include <string.h>

#include "oxidize.h"

/* Every struct oxidize.h defines. */
#define OX_PUBLIC_STRUCTS(X)                                                                       \
    X(ox_tensor_type_override)                                                                     \
    X(ox_quantize_progress)                                                                        \
    X(ox_quantize_params)                                                                          \
    X(ox_quantize_result)                                                                          \
    X(ox_model_params)                                                                             \
    X(ox_context_params)                                                                           \
    X(ox_batch)                                                                                    \
    X(ox_lora_use)                                                                                 \
    X(ox_logit_bias)                                                                               \
    X(ox_spec_params)                                                                              \
    X(ox_spec_stats)                                                                               \
    X(ox_chat_message)                                                                             \
    X(ox_engine_params)                                                                            \
    X(ox_request)                                                                                  \
    X(ox_engine_stats)                                                                             \
    X(ox_engine_slot)                                                                              \
    X(ox_gguf_value)                                                                               \
    X(ox_tensor_info)

size_t ox_struct_size(const char *name) {
#define OX_X_(tag)                                                                                 \
    if (name && strcmp(name, #tag) == 0)                                                           \
        return sizeof(struct tag);
    OX_PUBLIC_STRUCTS(OX_X_)
#undef OX_X_
    return 0;
}
