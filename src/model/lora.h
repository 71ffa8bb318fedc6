/* lora.h: LoRA adapters inside the library (lora.c, lora_export.c): the API is in oxidize.h. */
#ifndef OX_MODEL_LORA_H
#define OX_MODEL_LORA_H

#include "model/model.h"

struct ox_context;

/* One weight an adapter targets: A [rank][n_in] and B [n_out][rank] as floats. */
struct lora_pair {
    struct weight *target;
    int64_t rank;
    float *a, *b;
};

struct ox_lora {
    struct ox_model *model;
    float alpha;
    int n_pairs;
    struct lora_pair *pairs;
    struct ox_lora *next; /* the model's other adapters (freed with it) */
};

/* What B A x is multiplied by for pair p of l applied at scale: scale * alpha / rank, or scale
 * where the adapter has no alpha (llama.cpp's get_scale). */
float lora_pair_scale(const struct ox_lora *l, const struct lora_pair *p, float scale);

/* ox_lora_load of a parsed file (the fuzzer's way in): g may be freed after. */
enum ox_status lora_from_gguf(struct ox_model *model, const struct ox_gguf *g,
                              struct ox_lora **out);
/* Free every adapter loaded for m (ox_model_free). */
void model_free_loras(struct ox_model *m);
/* Drop the context's adapter bindings and the memory they took (ox_context_free). */
void context_lora_release(struct ox_context *ctx);

#endif
