/* model.h: a loaded model: hyper-parameters, architecture traits and bound weights. */
#ifndef OX_MODEL_MODEL_H
#define OX_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "oxidize.h"

#define MODEL_MAX_LAYERS       512
#define MODEL_MAX_EXPERTS_USED 64 /* experts one token runs: the router keeps them on the stack */

/* One layer's attention and FFN widths. Most models have one shape for every layer; gemma4's
 * sliding-window layers have their own head size, kv heads and rotary dims, its last layers a
 * wider FFN and no cache of their own. */
struct layer_shape {
    int32_t n_head_kv, head_dim_k, head_dim_v, n_ff;
    int32_t kv_layer;  /* the layer whose cached keys and values this one attends over: itself,
                          an earlier layer (attention.shared_kv_layers), or -1 (recurrent) */
    int32_t shard_kv0; /* a rank's shard (shard.c): its first kv head among the whole's; else 0 */
};

/* Hyper-parameters from the GGUF keys "<arch>.*". */
struct model_config {
    const struct arch_desc *arch;
    /* n_head_kv, n_ff and the head sizes are the largest of the layers' (what buffers take) */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff;
    int32_t head_dim_k, head_dim_v; /* attention.key_length / value_length */
    int32_t n_rot;                  /* rope.dimension_count */
    int32_t n_expert, n_expert_used, n_ff_exp;
    int32_t n_ff_shexp;          /* a shared expert's width (expert_shared_feed_forward_length) */
    struct rope_params rope;     /* freq_factors is bound with the weights (rope_freqs.weight) */
    struct rope_params rope_swa; /* sliding-window layers: their own frequency base */
    float norm_eps;
    float attn_scale;                  /* applied to q.k (or to q, for q_prescale archs) */
    float attn_softcap, final_softcap; /* cap * tanh(x / cap); 0: none */
    float embd_scale, residual_scale, logit_scale; /* granite / command-r multipliers; 0: none */
    float attn_temp_scale; /* mistral3: q grows with log(position / attn_temp_floor) */
    int32_t attn_temp_floor;
    int32_t swa_window;             /* sliding window in tokens; 0: none */
    bool is_swa[MODEL_MAX_LAYERS];  /* the layers that use it */
    bool no_rope[MODEL_MAX_LAYERS]; /* layers without rotary embedding (arch nope_period) */
    /* gated delta-net layers (arch delta_net): the ssm.* keys, and which layers they are */
    int32_t dn_conv, dn_state, dn_k_heads, dn_v_heads; /* conv_kernel, state_size, group_count,
                                                          time_step_rank */
    int32_t ssm_inner, ssm_heads, ssm_groups; /* Mamba-2 layers' (arch mamba2): the inner width,
                                                 its heads and B/C groups; their conv_kernel and
                                                 state_size are dn_conv and dn_state */
    int32_t n_recurrent;                      /* how many layers are recurrent */
    bool is_recurrent[MODEL_MAX_LAYERS];
    int32_t n_embd_per_layer; /* per-layer embeddings' width (per_layer_embd.c); 0: none */
    /* a rank's shard (shard.c): its first query head and first Mamba-2 head among the whole's;
     * else 0 */
    int32_t shard_head0, shard_ssm_head0;
    /* multi-head latent attention (arch mla, mla.c): q's bottleneck rank (0: none), the keys'
     * and values' latent rank, and each head's key (no-rope + rope) and value sizes before
     * absorption; the attention itself runs over head_dim_k = kv_rank + n_rot keys, one head */
    int32_t mla_q_rank, mla_kv_rank, mla_head_k, mla_head_v;
    float yarn_log_mul; /* llama.cpp's rope_yarn_log_mul (mla's attention scale reads it) */
    /* MoE routing: the first n_dense_lead layers have a dense FFN; scores are the router's
     * softmax or sigmoid, experts chosen by score (plus exp_probs_b) within the best
     * n_group_used of n_expert_groups groups, weighted by their scores renormalised or not, times
     * expert_weights_scale */
    int32_t n_dense_lead, n_expert_groups, n_group_used;
    bool moe_sigmoid, moe_norm_weights;
    float moe_weights_scale;
    bool causal;     /* attention.causal: a token sees only earlier ones (false: its whole
                        sequence in the batch, as encoders do) */
    int32_t pooling; /* pooling_type: the enum ox_pooling the file asks embeddings to take */
    struct layer_shape layer[MODEL_MAX_LAYERS];
};

/* A weight: type, shape and its bytes in the mapped file. */
struct weight {
    const char *name;
    enum ox_dtype type;
    int64_t ne[4];
    const uint8_t *data;
    size_t row_bytes; /* bytes of one ne[0] row */
    /* The copy the backend that runs it made at load (prepare_weight: device memory, or the
     * CPU kernels' layout), owned and freed through copy_of; NULL: the file's bytes serve. */
    const void *copy;
    const struct backend_ops *copy_of;
    uint32_t lora_slot; /* 1 + its index among the weights LoRA adapters target (lora.c), 0:
                           none does */
};

/* A layer's tensors; any may be NULL where the architecture or the file has none. */
struct layer_weights {
    const struct weight *attn_norm, *attn_norm_b;
    const struct weight *wqkv, *bqkv, *wq, *bq, *wk, *bk, *wv, *bv; /* fused or separate */
    const struct weight *q_norm, *k_norm;
    const struct weight *wo, *bo, *attn_post_norm;
    const struct weight *attn_sinks; /* [n_head] logits joining each softmax (gpt-oss) */
    const struct weight *ffn_norm, *ffn_norm_b;
    const struct weight *ffn_gate, *ffn_gate_b, *ffn_up, *ffn_up_b, *ffn_down, *ffn_down_b;
    const struct weight *ffn_post_norm;
    const struct weight *ffn_gate_inp, *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps; /* MoE */
    const struct weight *ffn_gate_inp_b, *ffn_gate_exps_b, *ffn_up_exps_b, *ffn_down_exps_b;
    const struct weight *ffn_exp_probs_b; /* the experts' selection bias (deepseek2) */
    /* multi-head latent attention's (mla.c): q's bottleneck and its norm (or wq alone), the
     * latent keys and values with the shared rotary part, its norm, and the per-head
     * absorbed key and value matrices (3-D, a head each) */
    const struct weight *wq_a, *q_a_norm, *wq_b, *wkv_a, *kv_a_norm, *wk_b, *wv_b;
    /* gemma4's router: its input's scale, and each expert's output scale */
    const struct weight *ffn_gate_inp_s, *ffn_down_exps_s;
    /* a dense FFN beside the experts (dense_moe.c): the experts' own pre- and post-norm, and
     * the dense FFN's post-norm */
    const struct weight *ffn_pre_norm_2, *ffn_post_norm_2, *ffn_post_norm_1;
    /* a MoE's shared expert (shared_expert.c), its gate optional */
    const struct weight *ffn_gate_shexp, *ffn_up_shexp, *ffn_down_shexp, *ffn_gate_inp_shexp;
    /* a gated delta-net layer's (delta_net.c): in_qkv is attn_qkv, z attn_gate */
    const struct weight *dn_qkv, *dn_z, *dn_conv, *dn_dt_bias, *dn_a, *dn_beta, *dn_alpha;
    const struct weight *dn_norm, *dn_out;
    /* a Mamba-2 layer's (mamba2.c): its projection in, convolution (dn_conv) bias, dt bias, A, D,
     * grouped norm and projection out */
    const struct weight *ssm_in, *ssm_conv_b, *ssm_dt_b, *ssm_a, *ssm_d, *ssm_norm, *ssm_out;
    /* per-layer embeddings (gemma4, per_layer_embd.c): gate, projection and its norm */
    const struct weight *ple_gate, *ple_proj, *ple_post_norm;
    /* an encoder's (arch encoder): the norms of the residual after attention and after the FFN */
    const struct weight *attn_out_norm, *attn_out_norm_b, *layer_out_norm, *layer_out_norm_b;
    float out_scale; /* the layer's output times this (layer_output_scale); 0: none */
    /* The norm's weight is multiplied into the device copies of the matrices that read its
     * output (weights_gpu.c, the backend's fold_norm): the norm before them scales only. */
    bool attn_norm_folded, ffn_norm_folded;
};

struct ox_model {
    struct ox_gguf *gguf;
    struct ox_vocab *vocab;
    struct model_config cfg;
    struct weight *weights; /* one per tensor of the file */
    const struct weight *tok_embd, *pos_embd, *output_norm, *output_norm_b, *output, *output_b;
    /* per-layer embeddings: a token's row of every layer's, and their projection from x */
    const struct weight *ple_tok_embd, *ple_model_proj, *ple_proj_norm;
    /* an encoder's input norm and token-type rows (all its tokens are type 0: type_row0 is that
     * row as floats, malloc'd), and a classifier head: tanh(cls x + b), then cls_out's scores */
    const struct weight *embd_norm, *embd_norm_b, *type_embd, *cls, *cls_b, *cls_out, *cls_out_b;
    const struct weight *cls_norm; /* ModernBERT's head: its norm after cls and GELU */
    float *type_row0;
    /* sentence-transformers' dense modules after pooling (EmbeddingGemma): n_embd -> dense_2's
     * width (+ bias) -> n_embd */
    const struct weight *dense_2, *dense_2_b, *dense_3;
    struct layer_weights *layers;
    uint64_t n_params;
    char *chat_template;     /* tokenizer.chat_template, NUL-terminated, or NULL */
    bool on_gpu;             /* weights uploaded: contexts run (some of) the model on the GPU */
    int32_t gpu_layer_begin; /* on_gpu: layers from this one on, and the output, run there */
    const struct backend_ops *gpu;      /* on_gpu: the device backend (backend_device()) */
    struct backend_weights gpu_weights; /* what its copies take, and what contexts size for */
    char backend_desc[32];              /* "CPU", "CUDA", "CPU+CUDA" (ox_model_backend) */
    uint32_t n_lora_slots;              /* weights LoRA adapters target (struct weight's
                                           lora_slot) */
    struct ox_lora *loras;              /* the adapters loaded for it (lora.c), freed with it */
    const struct ox_model *whole; /* a rank's shard (shard.c): the model whose bytes it views and
                                     whose file, vocabulary and copies it borrows; else NULL */
    struct model_split *split;    /* its shards when split over GPUs (split.c), or NULL */
    uint8_t **shard_rows;         /* a shard's own copies of fused matrices' rows (shard.c), */
    int n_shard_rows;             /* where its share is not one span of the whole's */
    struct shard_gather *gathers; /* which spans of the whole's those matrices hold, for */
    int n_gathers;                /* LoRA's shares (split_lora.c) */
    /* a pipeline rank's model (pipeline.c): it runs layers [layer_begin, layer_end), and is
     * rank pipe_rank of pipe_world (rank 0 also embeds the tokens and makes the logits);
     * pipe_world 0 for any other model */
    int32_t layer_begin, layer_end, pipe_rank, pipe_world;
};

enum ox_status model_config_load(const struct ox_gguf *g, struct model_config *cfg);
enum ox_status model_bind_weights(struct ox_model *m);
/* Copy the matrices the CPU kernels read faster in their own layout (those the CPU runs); frees
 * with the model. */
void model_pack_weights(struct ox_model *m);
/* The same for layers [begin, end) and the ends the CPU runs (a pipeline rank's host layers). */
void model_pack_layers(struct ox_model *m, int32_t begin, int32_t end);
/* Weight w of the model as its file has it, for a backend's prepare_weight. */
struct backend_tensor model_file_tensor(const struct ox_model *m, const struct weight *w);
/* Copy weights to the device backend (weights_gpu.c) when n_gpu_layers asks for it (< 0: all when a
 * GPU is present and runs every type, else the CPU with a warning; >= n_layer: all; in between, the
 * last n_gpu_layers layers and the output; an error such as OX_ERR_UNSUPPORTED for a type the
 * GPU kernels lack when layers were asked for). */
enum ox_status model_upload_weights(struct ox_model *m, int32_t n_gpu_layers);
void model_free_gpu_weights(struct ox_model *m);
/* Copy the weights of layers [begin, end) to the device backend (a pipeline rank's: with ends,
 * the embeddings and the output too); an error where the GPU does not run them. */
enum ox_status model_upload_layers(struct ox_model *m, int32_t begin, int32_t end, bool ends);
/* The device's copy of the rope frequency factors (rope_freqs.weight), or NULL. */
const float *model_gpu_freq_factors(const struct ox_model *m);

#endif
