/* arch.c: the architecture descriptors. Each lists only how it differs from Llama; biases,
 * fused QKV, tied output and MoE are recognised from the tensors a file has. */
#include "model/arch.h"

#include "oxidize.h"

#include <stdio.h>
#include <string.h>

static const struct arch_desc architectures[] = {
    {.name = "llama", .swa = true}, /* a sliding_window key makes every layer local (Mistral) */
    {.name = "mistral3", .swa = true},
    {.name = "granite", .logit_scale = LOGIT_SCALE_DIV, .rope_switch = true},
    {.name = "granitemoe", .logit_scale = LOGIT_SCALE_DIV, .rope_switch = true},
    {.name = "minicpm", .logit_scale = LOGIT_SCALE_DIV, .minicpm_scales = true},
    {.name = "exaone4",
     .position = POS_ROPE_NEOX,
     .qk_norm = QK_NORM_HEAD,
     .no_pre_norm = true,
     .post_norms = true,
     .swa = true,
     .swa_period = 4,
     .swa_default_window = 4096,
     .swa_if_layers = 64,
     .nope_unless_swa = true},
    {.name = "qwen2", .position = POS_ROPE_NEOX},
    {.name = "qwen3", .position = POS_ROPE_NEOX, .qk_norm = QK_NORM_HEAD},
    {.name = "qwen3moe", .position = POS_ROPE_NEOX, .qk_norm = QK_NORM_HEAD},
    {.name = "qwen2moe", .position = POS_ROPE_NEOX, .moe_raw_weights = true}, /* + shared expert */
    /* interleaved M-RoPE: for text every section rotates by the token's position, which is NeoX
       rotation (config.c checks the sections leave no pair on the fourth, zero, position) */
    {.name = "qwen35",
     .position = POS_ROPE_NEOX,
     .qk_norm = QK_NORM_HEAD,
     .attn_gate = true,
     .delta_net = true,
     .ffn_norm_named_post_attention = true},
    {.name = "qwen35moe", /* the same, its FFNs routed experts with a shared one */
     .position = POS_ROPE_NEOX,
     .qk_norm = QK_NORM_HEAD,
     .attn_gate = true,
     .delta_net = true,
     .ffn_norm_named_post_attention = true},
    {.name = "gemma2",
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GEGLU,
     .post_norms = true,
     .embd_scale_sqrt = true,
     .q_prescale = true,
     .swa = true,
     .swa_period = 2,
     .swa_default_window = 4096},
    {.name = "gemma3",
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GEGLU,
     .qk_norm = QK_NORM_HEAD,
     .post_norms = true,
     .embd_scale_sqrt = true,
     .q_prescale = true,
     .swa = true,
     .swa_period = 6},
    {.name = "gemma4",
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GEGLU,
     .qk_norm = QK_NORM_HEAD,
     .post_norms = true,
     .embd_scale_sqrt = true,
     .swa = true,
     .attn_unscaled = true,
     .v_norm = true,
     .v_may_be_k = true,
     .rope_freqs_full_only = true},
    {.name = "deepseek2", .mla = true},
    /* GLM-4 (0414): partial RoPE on adjacent pairs, post-norms on both branches, fused SwiGLU */
    {.name = "glm4", .ffn = FFN_SWIGLU_FUSED, .post_norms = true},
    /* GLM-4.5/4.6/4.7: partial NeoX RoPE, q/k norms where the file has them, the FFN's norm named
       post_attention_norm, leading dense layers, then DeepSeek-style sigmoid routing with a
       selection bias beside shared experts */
    {.name = "glm4moe",
     .position = POS_ROPE_NEOX,
     .qk_norm = QK_NORM_HEAD,
     .qk_norm_optional = true,
     .ffn_norm_named_post_attention = true,
     .moe_sigmoid_default = true},
    {.name = "granitehybrid", .logit_scale = LOGIT_SCALE_DIV, .mamba2 = true, .rope_switch = true},
    /* MiniMax-M2: q/k norms across all heads, sigmoid-routed experts with a selection bias */
    {.name = "minimax-m2", .position = POS_ROPE_NEOX, .qk_norm = QK_NORM_WHOLE},
    {.name = "seed_oss", .position = POS_ROPE_NEOX, .ffn_norm_named_post_attention = true},
    {.name = "olmoe", .position = POS_ROPE_NEOX, .qk_norm = QK_NORM_WHOLE, .moe_raw_weights = true},
    {.name = "smollm3", .nope_period = 4},
    {.name = "ernie4_5"}, /* the dense ERNIE 4.5: Llama's layout (its rope sections are VL's) */
    {.name = "phi3", .position = POS_ROPE_NEOX, .ffn = FFN_SWIGLU_FUSED, .q_prescale = true},
    {.name = "phi2",
     .norm = NORM_LAYER,
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GELU,
     .parallel = true,
     .q_prescale = true},
    {.name = "gpt2", .norm = NORM_LAYER, .position = POS_LEARNED, .ffn = FFN_GELU},
    {.name = "falcon",
     .norm = NORM_LAYER,
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GELU,
     .parallel = true},
    {.name = "starcoder2", .norm = NORM_LAYER, .position = POS_ROPE_NEOX, .ffn = FFN_GELU},
    {.name = "command-r", .norm = NORM_LAYER, .parallel = true},
    /* attention sinks (attn_sinks), MoE with biases; experts chosen by logits and weighted by
       their softmax over the chosen, which is the renormalised softmax of the rest */
    {.name = "gpt-oss",
     .position = POS_ROPE_NEOX,
     .ffn = FFN_SWIGLU_OAI,
     .swa = true,
     .swa_period = 2,
     .ffn_norm_named_post_attention = true},
    {.name = "cohere2",
     .norm = NORM_LAYER,
     .parallel = true,
     .swa = true,
     .swa_period = 4,
     .nope_unless_swa = true},
    {.name = "olmo2",
     .position = POS_ROPE_NEOX,
     .qk_norm = QK_NORM_WHOLE,
     .no_pre_norm = true,
     .post_norms = true,
     .swa = true,
     .swa_period = 4},
    /* encoders: BERT with learned positions and a GELU FFN; nomic-bert with NeoX RoPE and SwiGLU */
    {.name = "bert",
     .norm = NORM_LAYER,
     .position = POS_LEARNED,
     .ffn = FFN_GELU,
     .no_pre_norm = true,
     .encoder = true,
     .embd_norm = true,
     .embeddings_only = true,
     .bidirectional = true},
    {.name = "nomic-bert",
     .norm = NORM_LAYER,
     .position = POS_ROPE_NEOX,
     .no_pre_norm = true,
     .encoder = true,
     .embd_norm = true,
     .embeddings_only = true,
     .bidirectional = true},
    /* ModernBERT: pre-norm LayerNorms without biases, fused QKV, a fused GeGLU, every third
       layer full and the rest in a symmetric window with their own RoPE base */
    {.name = "modern-bert",
     .norm = NORM_LAYER,
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GEGLU_FUSED,
     .swa = true,
     .swa_period = 3,
     .swa_dense_first = true,
     .embd_norm = true,
     .embeddings_only = true,
     .bidirectional = true,
     .rank_from_mean = true},
    /* EmbeddingGemma: gemma3's block seeing both ways, its local layers' window symmetric */
    {.name = "gemma-embedding",
     .position = POS_ROPE_NEOX,
     .ffn = FFN_GEGLU,
     .qk_norm = QK_NORM_HEAD,
     .post_norms = true,
     .embd_scale_sqrt = true,
     .q_prescale = true,
     .swa = true,
     .swa_period = 6,
     .bidirectional = true},
};

enum { N_ARCH = sizeof architectures / sizeof architectures[0] };

const struct arch_desc *arch_find(const char *name, size_t len) {
    for (int i = 0; i < N_ARCH; i++)
        if (strlen(architectures[i].name) == len && !memcmp(architectures[i].name, name, len))
            return &architectures[i];
    return NULL;
}

const char *arch_nearest(const char *name, size_t len) {
    const char *best = architectures[0].name;
    size_t best_prefix = 0, best_gap = (size_t)-1;
    for (int i = 0; i < N_ARCH; i++) {
        const char *a = architectures[i].name;
        size_t n = strlen(a), prefix = 0;
        while (prefix < n && prefix < len && a[prefix] == name[prefix])
            prefix++;
        size_t gap = n > len ? n - len : len - n;
        bool later = gap == best_gap && strcmp(a, best) > 0; /* gemma5: gemma4, not gemma2 */
        if (prefix > best_prefix || (prefix == best_prefix && (gap < best_gap || later)))
            best = a, best_prefix = prefix, best_gap = gap;
    }
    return best;
}

const char *arch_supported_names(void) {
    static char names[4096]; /* written once; the table is constant */
    if (!names[0]) {
        size_t at = 0;
        for (int i = 0; i < N_ARCH && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                                   architectures[i].name);
    }
    return names;
}

size_t arch_describe(const struct arch_desc *a, char *buf, size_t cap) {
    static const char *const norms[] = {"RMSNorm", "LayerNorm"};
    static const char *const positions[] = {"RoPE", "NeoX RoPE", "learned positions"};
    static const char *const ffns[] = {"SwiGLU", "GeGLU",          "fused SwiGLU",
                                       "GELU",   "clamped SwiGLU", "fused GeGLU"};
    static const char *const qk[] = {"", ", q/k norm per head", ", q/k norm"};
    char swa[96] = "";
    if (a->swa && a->swa_if_layers > 0)
        snprintf(swa, sizeof swa, ", in %d-layer files a sliding window on %d of every %d layers",
                 a->swa_if_layers, a->swa_period - 1, a->swa_period);
    else if (a->swa && a->swa_period > 0)
        snprintf(swa, sizeof swa, ", sliding window on %d of every %d layers", a->swa_period - 1,
                 a->swa_period);
    else if (a->swa)
        snprintf(swa, sizeof swa, ", sliding window by the file's pattern (else all layers)");
    char nope[64] = "";
    if (a->nope_period > 0)
        snprintf(nope, sizeof nope, ", no RoPE on every %dth layer", a->nope_period);
    else if (a->nope_unless_swa)
        snprintf(nope, sizeof nope,
                 a->swa_if_layers ? ", RoPE on those only"
                                  : ", RoPE on sliding-window layers only");
    int n = snprintf(
        buf, cap, "%s, %s, %s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s", norms[a->norm],
        positions[a->position], ffns[a->ffn], qk[a->qk_norm], a->parallel ? ", parallel block" : "",
        a->no_pre_norm ? ", no pre-norm" : "", a->post_norms ? ", post-norms" : "",
        a->embd_scale_sqrt ? ", embeddings x sqrt(n_embd)" : "",
        a->q_prescale ? ", q scaled before attention" : "", swa,
        a->attn_gate ? ", gated attention output" : "",
        a->delta_net ? ", gated delta-net layers between full attention" : "",
        a->moe_raw_weights ? ", experts weighted by raw probabilities" : "", nope,
        a->attn_unscaled ? ", q.k unscaled" : "", a->v_norm ? ", values RMS-normed" : "",
        a->mla ? ", multi-head latent attention" : "",
        a->mamba2 ? ", Mamba-2 layers where head_count_kv is 0" : "",
        a->encoder ? ", BERT's post-norm residuals" : "",
        a->embeddings_only ? ", embeddings only" : "",
        a->bidirectional ? ", attention both ways" : "");
    return n < 0 ? 0 : (size_t)n;
}

size_t ox_arch_traits(const char *arch, char *buf, size_t cap) {
    const struct arch_desc *a = arch ? arch_find(arch, strlen(arch)) : NULL;
    return a ? arch_describe(a, buf, cap) : 0;
}

const char *ox_arch_supported(void) {
    return arch_supported_names();
}
