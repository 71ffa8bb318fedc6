/* lora.h: LoRA adapters' side of the model and context (lora.c): the API is in oxidize.h. */
#ifndef OX_MODEL_LORA_H
#define OX_MODEL_LORA_H

#include "model/model.h"

struct ox_context;

/* Free every adapter loaded for m (ox_model_free). */
void model_free_loras(struct ox_model *m);
/* Drop the context's adapter bindings and the memory they took (ox_context_free). */
void context_lora_release(struct ox_context *ctx);

#endif
