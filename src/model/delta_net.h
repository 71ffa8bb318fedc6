/* delta_net.h: gated delta-net layers (Qwen 3.5's linear attention): their per-sequence
 * recurrent state beside the KV cache (which Mamba-2 layers keep here too: mamba2.c), and the
 * layer's forward step. */
#ifndef OX_MODEL_DELTA_NET_H
#define OX_MODEL_DELTA_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct ox_context;
struct backend;
struct stage;

/* A stage's buffers for n_batch tokens of a delta-net layer, in its backend's memory. */
struct delta_net_bufs {
    struct backend *owner;
    float *qkv, *z, *beta, *alpha, *conv_out, *y;
};

/* One state slot per sequence (n_seq_max) for every recurrent layer: the convolution's last
 * d_conv - 1 input rows and the delta rule's matrices, each layer's in the memory of the stage
 * that runs it. */
struct delta_net_state {
    int32_t n_slots, n_layers;      /* sequences, recurrent layers */
    size_t conv_floats, ssm_floats; /* one slot of one layer */
    int32_t *index;                 /* [n_layer]: a layer's place among the recurrent ones, or -1 */
    float **conv, **ssm;            /* [recurrent layer]: [slot][...] */
    struct backend **owner;         /* [recurrent layer]: the backend whose memory holds them */
    struct delta_net_bufs bufs[2];  /* per stage (struct ox_context's stages) */
};

/* ctx->dn for a context whose stages are made, when its model has recurrent layers (else it
 * stays NULL); delta_net_free runs before the stages go, since their backends hold its memory. */
enum ox_status delta_net_create(struct ox_context *ctx);
void delta_net_free(struct delta_net_state *s);
/* Sequence seq's state back to zeros, as before its first token (seq < 0: every sequence). */
void delta_net_reset(struct delta_net_state *s, int32_t seq);
/* Sequence dst's state made a copy of src's. */
void delta_net_copy(struct delta_net_state *s, int32_t src, int32_t dst);

/* Layer il (recurrent) over the batch's n tokens: reads act.x, leaves the branch's output (the
 * ssm_out projection) in act.proj. */
void delta_net_layer(struct ox_context *ctx, struct stage *s, const struct layer_weights *l, int il,
                     int n);

#endif
