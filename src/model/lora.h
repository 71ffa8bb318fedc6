/* lora.h: LoRA adapters inside the library (lora.c, lora_export.c): the API is in oxidize.h. */
#ifndef OX_MODEL_LORA_H
#define OX_MODEL_LORA_H

#include "model/model.h"

struct ox_context;

/* One weight an adapter targets: A [rank][n_in] and B [n_out][rank] as floats; or, for the
 * token embedding (rows), A [n_vocab][rank] and B [n_embd][rank] (llama.cpp's layout). */
struct lora_pair {
    struct weight *target;
    int64_t rank;
    float *a, *b;
    bool rows;
};

/* A's rows and B's rows of pair p. */
static inline int64_t lora_a_rows(const struct lora_pair *p) {
    return p->rows ? p->target->ne[1] : p->rank;
}
static inline int64_t lora_b_rows(const struct lora_pair *p) {
    return p->rows ? p->target->ne[0] : p->target->ne[1];
}

struct ox_lora {
    struct ox_model *model;
    float alpha;
    int n_pairs;
    struct lora_pair *pairs;
    struct ox_lora *next; /* the model's other adapters (freed with it) */
    uint64_t id;          /* unique in the process (an address may be reused once freed) */
    uint64_t share_of;    /* a rank's share (split_lora.c): the id of the whole's adapter */
    uint64_t origin;      /* a process's copy of rank 0's adapter (split_lora.c): its id there */
    bool wired;           /* rank 0's, sent to the ranks of other processes */
};

/* A new adapter's id. */
uint64_t lora_next_id(void);

/* What B A x is multiplied by for pair p of l applied at scale: scale * alpha / rank, or scale
 * where the adapter has no alpha (llama.cpp's get_scale). */
float lora_pair_scale(const struct ox_lora *l, const struct lora_pair *p, float scale);

/* ox_lora_load of a parsed file (the fuzzer's way in): g may be freed after. */
enum ox_status lora_from_gguf(struct ox_model *model, const struct ox_gguf *g,
                              struct ox_lora **out);
/* The adapter as the GGUF file ox_lora_load reads (f32 halves), in *buf (malloc'd): how a
 * split model's rank 0 hands it to ranks of other processes. */
enum ox_status lora_gguf_bytes(const struct ox_lora *l, uint8_t **buf, size_t *size);
/* Free every adapter loaded for m (ox_model_free). */
void model_free_loras(struct ox_model *m);
/* Drop the context's adapter bindings and the memory they took (ox_context_free). */
void context_lora_release(struct ox_context *ctx);

#endif
