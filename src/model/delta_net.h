/* delta_net.h: gated delta-net layers (Qwen 3.5's linear attention): their per-sequence
 * recurrent state beside the KV cache, and the layer's forward step. */
#ifndef OX_MODEL_DELTA_NET_H
#define OX_MODEL_DELTA_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct ox_context;

/* One state slot per sequence (n_seq_max), for every recurrent layer: the convolution's last
 * d_conv - 1 input rows and the delta rule's matrices; plus the layer's buffers for n_batch
 * tokens. Host memory: these layers run on the CPU. */
struct delta_net_state {
    int32_t n_slots, n_layers;      /* sequences, recurrent layers */
    size_t conv_floats, ssm_floats; /* one slot of one layer */
    float *conv, *ssm;              /* [slot][recurrent layer][...] */
    float *qkv, *z, *beta, *alpha, *conv_out, *y;
};

/* The state and buffers for a context of a model with recurrent layers (NULL out otherwise). */
enum ox_status delta_net_create(const struct ox_model *m, uint32_t n_seq_max, uint32_t n_batch,
                                struct delta_net_state **out);
void delta_net_free(struct delta_net_state *s);
/* Sequence seq's state back to zeros, as before its first token (seq < 0: every sequence). */
void delta_net_reset(struct delta_net_state *s, int32_t seq);
/* Sequence dst's state made a copy of src's. */
void delta_net_copy(struct delta_net_state *s, int32_t src, int32_t dst);

/* Layer il (recurrent) over the batch's n tokens: reads act.x, leaves the branch's output (the
 * ssm_out projection) in act.proj. */
void delta_net_layer(struct ox_context *ctx, const struct layer_weights *l, int il, int n);

#endif
