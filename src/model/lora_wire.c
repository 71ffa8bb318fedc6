/* lora_wire.c: an adapter written back as the GGUF file it came from (f32 halves), for a split
 * model's ranks in other processes, which read it as ox_lora_load does. */
#include <stdio.h>

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/lora.h"

/* Pair p's A and B as tensors NAME.lora_a / NAME.lora_b, in the shapes bind_pair checks. */
static enum ox_status add_pair(struct gguf_writer *w, const struct lora_pair *p) {
    const struct weight *t = p->target;
    const int64_t ne_a[2] = {p->rows ? p->rank : t->ne[0], p->rows ? t->ne[1] : p->rank};
    const int64_t ne_b[2] = {p->rank, p->rows ? t->ne[0] : t->ne[1]};
    char name[GGUF_MAX_NAME + 8];
    snprintf(name, sizeof name, "%s.lora_a", t->name);
    OX_TRY(gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 2, ne_a, p->a));
    snprintf(name, sizeof name, "%s.lora_b", t->name);
    return gguf_writer_add_tensor(w, name, OX_DTYPE_F32, 2, ne_b, p->b);
}

enum ox_status lora_gguf_bytes(const struct ox_lora *l, uint8_t **buf, size_t *size) {
    struct gguf_writer *w = NULL;
    *buf = NULL, *size = 0;
    OX_TRY(gguf_writer_create(&w));
    enum ox_status st = gguf_writer_set_str(w, "general.type", "adapter");
    if (st == OX_OK)
        st = gguf_writer_set_str(w, "adapter.type", "lora");
    if (st == OX_OK)
        st = gguf_writer_set_str(w, "general.architecture", l->model->cfg.arch->name);
    if (st == OX_OK && l->alpha != 0.0f) /* none: the scale is the user's alone, as loaded */
        st = gguf_writer_set_f32(w, "adapter.lora.alpha", l->alpha);
    for (int i = 0; st == OX_OK && i < l->n_pairs; i++)
        st = add_pair(w, &l->pairs[i]);
    if (st == OX_OK)
        st = gguf_writer_write_mem(w, buf, size);
    gguf_writer_free(w);
    return st;
}
