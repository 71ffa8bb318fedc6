/* arch.h: architecture descriptors: how each supported architecture differs from Llama
 * (DESIGN.md section 3). The forward pass reads only these traits, never the name. */
#ifndef OX_MODEL_ARCH_H
#define OX_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>

enum arch_norm {
    NORM_RMS,   /* x / rms(x) * w */
    NORM_LAYER, /* (x - mean) / std(x) * w + b */
};

enum arch_position {
    POS_ROPE,      /* rotate adjacent pairs (i, i+1) */
    POS_ROPE_NEOX, /* rotate halves (i, i + n_rot/2) */
    POS_LEARNED,   /* position_embd rows added to the token embeddings */
};

enum arch_ffn {
    FFN_SWIGLU,       /* down(silu(gate x) * up x) */
    FFN_GEGLU,        /* down(gelu(gate x) * up x) */
    FFN_SWIGLU_FUSED, /* ffn_up holds the gate half, then the up half */
    FFN_GELU,         /* down(gelu(up x)) */
    FFN_SWIGLU_OAI,   /* down(swiglu_oai(gate x, up x)): gpt-oss's clamped SwiGLU (MoE) */
    FFN_GEGLU_FUSED,  /* ffn_up holds the gate half, then the up half; GELU (ModernBERT) */
};

enum arch_qk_norm {
    QK_NORM_NONE,
    QK_NORM_HEAD,  /* RMS norm of each head (attn_q_norm is head_dim wide) */
    QK_NORM_WHOLE, /* RMS norm of all heads together (attn_q_norm is n_head*head_dim wide) */
};

enum arch_logit_scale {
    LOGIT_SCALE_MUL, /* logits * logit_scale (command-r) */
    LOGIT_SCALE_DIV, /* logits / logit_scale (granite) */
};

struct arch_desc {
    const char *name;
    enum arch_norm norm;
    enum arch_position position;
    enum arch_ffn ffn;
    enum arch_qk_norm qk_norm;
    enum arch_logit_scale logit_scale;
    bool parallel;          /* attention and FFN both read the attention norm: x + attn + ffn */
    bool no_pre_norm;       /* no norm before attention / FFN (olmo2: post-norms only) */
    bool post_norms;        /* post_attention_norm / post_ffw_norm on each branch's output */
    bool embd_scale_sqrt;   /* token embeddings times sqrt(n_embd) (gemma) */
    bool q_prescale;        /* q is scaled before attention rather than the scores (rounds apart) */
    bool swa;               /* reads attention.sliding_window (and _pattern) */
    int swa_period;         /* default pattern, as llama.cpp: in each run of swa_period layers all
                               but the last are local; 0: every layer */
    int swa_default_window; /* window when the file sets none (gemma2: 4096), 0: no window */
    bool attn_gate;         /* q's rows hold each head's query then a gate of the same width: the
                               attention's output is multiplied by sigmoid(gate) (qwen35) */
    bool delta_net;         /* all but every full_attention_interval-th layer are gated delta-net
                               layers (delta_net.c), reading the ssm.* keys */
    bool ffn_norm_named_post_attention; /* the FFN's pre-norm is post_attention_norm (qwen35) */
    bool moe_raw_weights;               /* experts weighted by their probabilities as they are, not
                                           renormalised over the chosen (olmoe) */
    int nope_period;           /* every nope_period-th layer has no rotary embedding (smollm3: 4);
                                  0: every layer rotates */
    bool nope_unless_swa;      /* only sliding-window layers rotate, when the model has a window
                                  (cohere2, exaone4) */
    int swa_if_layers;         /* the window only for files of this many layers (exaone4: 64, its
                                  32B, as llama.cpp decides); 0: any */
    bool rope_switch;          /* rope.scaling.finetuned false turns RoPE off (granite's family) */
    bool minicpm_scales;       /* embedding, residual and logit scales default to MiniCPM's 12,
                                  1.4 / sqrt(n_layer) and 256 / n_embd */
    bool attn_unscaled;        /* q.k is not scaled: the q/k norms stand in for it (gemma4) */
    bool v_norm;               /* values are RMS-normed per head, without a weight (gemma4) */
    bool v_may_be_k;           /* a layer without attn_v uses its keys' projection as values */
    bool rope_freqs_full_only; /* rope_freqs applies to full-attention layers only: gemma4's
                                  "proportional" rotation of part of the head */
    bool mamba2;  /* the layers whose head_count_kv is 0 are Mamba-2 layers (mamba2.c), reading
                     the ssm.* keys */
    bool mla;     /* multi-head latent attention (mla.c) and DeepSeek's MoE routing keys; the file's
                     yarn_log_multiplier is a tenth of llama.cpp's */
    bool encoder; /* BERT's block (encoder.c): token_types row 0 on the input, each
                     residual sum normed (attn_output_norm, layer_output_norm) in place
                     of pre-norms */
    bool embd_norm;       /* the embeddings are LayerNormed (token_embd_norm); the first layer's
                             own attention norm may then be absent (ModernBERT) */
    bool embeddings_only; /* no LM head: embeddings (and a classifier's scores) only */
    bool bidirectional;   /* attention sees the whole sequence (a sliding window both ways) unless
                             attention.causal says otherwise; nothing is kept between batches */
    bool swa_dense_first; /* in each run of swa_period layers the first is full, the rest local */
    bool rank_from_mean;  /* rank pooling takes the mean, through cls, GELU and cls.norm before
                             cls.output (ModernBERT's head; else the first token, cls and tanh) */
    bool qk_norm_optional; /* the q/k norms of qk_norm where a file has them (GLM-4.5) */
    bool moe_sigmoid_default; /* experts scored by sigmoid unless expert_gating_func says
                                 otherwise (GLM-4.5) */
};

/* The descriptor for a GGUF general.architecture value, or NULL. */
const struct arch_desc *arch_find(const char *name, size_t len);

/* The supported architecture nearest to an unsupported name: the longest common prefix, then
 * the closest length, then the later name (gemma3n -> gemma3, gemma5 -> gemma4). */
const char *arch_nearest(const char *name, size_t len);

/* The supported architecture names, comma separated. */
const char *arch_supported_names(void);

/* One line naming the traits of an architecture (for `oxidize info`). */
size_t arch_describe(const struct arch_desc *a, char *buf, size_t cap);

#endif
