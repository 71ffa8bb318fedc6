/* layer_ops.h: the small steps every layer kind's file takes through the backend: a weight as
 * the backend sees it, a norm's or bias's floats, and y = W x + b. */
#ifndef OX_MODEL_LAYER_OPS_H
#define OX_MODEL_LAYER_OPS_H

#include "backend/backend.h"
#include "backend/compose.h"
#include "model/model.h"

/* A weight as backend b sees it: a device reads its own copy, whose rows follow each other
 * (a shard's column slice is strided in the file: shard.c); the host the file's rows, and its
 * packed copy beside them where it made one. */
static inline struct mat as_mat(const struct backend *b, const struct weight *w) {
    const void *copy = w->copy_of == b->ops ? w->copy : NULL;
    bool dev = b->ops->device;
    const struct mat_lora *lora = w->lora_slot && b->lora ? b->lora[w->lora_slot - 1] : NULL;
    size_t dense = (size_t)(w->ne[0] / ox_dtype_block_size(w->type)) * ox_dtype_type_size(w->type);
    return (struct mat){w->type,  dev ? copy : w->data,       w->ne[1],
                        w->ne[0], dev ? dense : w->row_bytes, dev ? NULL : copy,
                        lora};
}

/* Matrix i of a 3-D weight (an expert's, a head's): its rows as_mat's apart (a device copy of
 * a shard's column slice has them closer than the file). */
static inline struct mat slice_mat(const struct backend *b, const struct weight *w, int i) {
    struct mat m = as_mat(b, w);
    m.data = (const uint8_t *)m.data + (size_t)i * (size_t)w->ne[1] * m.row_bytes;
    m.packed = NULL; /* only 2-D weights are packed */
    m.lora = NULL;   /* and take adapters (lora.c refuses 3-D targets) */
    return m;
}

static inline const float *vec(const struct backend *b, const struct weight *w) {
    if (!w) /* norms and biases are f32 (checked at load) */
        return NULL;
    return (const float *)(b->ops->device ? w->copy : w->data);
}

/* y = W x (+ bias) for n tokens. */
static inline void linear(struct backend *b, const struct weight *w, const struct weight *bias,
                          const float *x, float *y, int n) {
    struct mat m = as_mat(b, w);
    compose_matmul(b, &m, x, y, n);
    if (bias)
        b->ops->add_row(b, y, vec(b, bias), n, (int)m.n_rows);
}

#endif
