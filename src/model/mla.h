/* mla.h: multi-head latent attention (DeepSeek V2/V3, Kimi K2), with the absorbed matrices. */
#ifndef OX_MODEL_MLA_H
#define OX_MODEL_MLA_H

#include "model/model.h"

struct ox_context;
struct stage;

/* From the layer input act.x, n tokens' queries (act.q: each head's latent part and rotated
 * part, kv_rank + n_rot), the shared key (act.k, the same layout, one head) and value
 * (act.v, the latent, kv_rank): an attention over one kv head, ready for the cache. */
void mla_project_qkv(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int n);

/* The attention's per-head latent outputs (act.attn) through each head's v_b: the rows the
 * output projection takes, n_head x value_length_mla each. */
const float *mla_heads_out(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                           int n);

#endif
