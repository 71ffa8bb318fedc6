/* transformer.c: THE forward pass, written once against the backend op table: embeddings, then
 * per layer its kind's block (attention.c, mla.c inside it, or a recurrent layer: mamba2.c,
 * delta_net.c) and the FFN (ffn.c), then the output. An architecture changes it only through
 * its descriptor (struct arch_desc, arch.c) and the tensors it has. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/compose.h"
#include "model/attention.h"
#include "model/block.h"
#include "model/context.h"
#include "model/delta_net.h"
#include "model/encoder.h"
#include "model/ffn.h"
#include "model/layer_ops.h"
#include "model/mamba2.h"
#include "model/per_layer_embd.h"
#include "model/pipeline.h"

/* Keep only the rows whose logits were asked for (out_row >= 0), in order, as llama.cpp does
 * before the last layer's FFN: nothing after that mixes tokens. Returns how many remain. */
static int keep_output_rows(struct ox_context *ctx, struct stage *s, const struct batch_view *batch,
                            int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t d = (size_t)c->n_embd, p = (size_t)c->n_embd_per_layer;
    float *rows[] = {a->x, a->xn, a->proj}, *ple = per_layer_input(ctx, s, c->n_layer - 1);
    int kept = 0;
    for (int t = 0; t < n; t++) {
        if (batch->out_row[t] < 0)
            continue;
        for (size_t i = 0; kept != t && i < sizeof rows / sizeof rows[0]; i++)
            b->ops->copy_rows(b, rows[i] + kept * d, d, rows[i] + t * d, d, 1, (int)d);
        if (kept != t && ple) /* and the last layer's per-layer inputs */
            b->ops->copy_rows(b, ple + kept * p, p, ple + t * p, p, 1, (int)p);
        kept++;
    }
    return kept;
}

/* Token (and learned position) embeddings of n tokens into act.x, with the architecture's
 * scaling. */
static void embed(struct ox_context *ctx, struct stage *s, int n) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    struct backend *b = &s->be;
    struct activations *a = &s->act;
    size_t all = (size_t)n * c->n_embd;
    struct mat emb = as_mat(b, m->tok_embd);
    compose_get_rows(b, &emb, a->b_tok, a->x, n);
    if (c->arch->embd_scale_sqrt)
        b->ops->scale(b, a->x, sqrtf((float)c->n_embd), all);
    if (c->embd_scale != 0.0f)
        b->ops->scale(b, a->x, c->embd_scale, all);
    if (m->pos_embd) {
        struct mat pe = as_mat(b, m->pos_embd);
        b->ops->get_rows(b, &pe, a->b_pos, a->proj, n);
        b->ops->add(b, a->x, a->proj, all);
    }
    if (c->arch->embd_norm)
        encoder_input(ctx, s, n);
    per_layer_inputs(ctx, s, n);
}

/* Final norm (into the same rows of act.xn, where the embeddings are read) for rows
 * [r0, r0 + rows) of act.x, then, unless only the embeddings are wanted, the output projection
 * and logit shaping into the first rows of b_logits. */
static void output_block(struct ox_context *ctx, struct stage *s, int r0, int rows) {
    const struct ox_model *m = ctx->model;
    const struct model_config *c = &m->cfg;
    struct backend *b = &s->be;
    size_t all = (size_t)rows * c->n_vocab, at = (size_t)r0 * (size_t)c->n_embd;
    if (m->output_norm)
        block_norm(ctx, s, s->act.x + at, m->output_norm, m->output_norm_b, s->act.xn + at, rows);
    else /* an encoder's last layer normed its output already */
        b->ops->copy_rows(b, s->act.xn + at, (size_t)c->n_embd, s->act.x + at, (size_t)c->n_embd,
                          rows, c->n_embd);
    if (ctx->embd_only || !m->output)
        return;
    linear(b, m->output, m->output_b, s->act.xn + at, ctx->b_logits, rows);
    if (c->final_softcap != 0.0f)
        b->ops->softcap(b, ctx->b_logits, c->final_softcap, all);
    if (c->logit_scale != 0.0f)
        b->ops->scale(
            b, ctx->b_logits,
            c->arch->logit_scale == LOGIT_SCALE_DIV ? 1.0f / c->logit_scale : c->logit_scale, all);
}

/* Output rows [r0, r0 + rows) to the host: with params.embeddings their normed hidden states
 * from act.xn, and (unless embd_only) their logits from b_logits. The status of every op so
 * far. */
static enum ox_status output_rows(struct ox_context *ctx, struct stage *s, int r0, int rows) {
    struct backend *b = &s->be;
    size_t v = (size_t)ctx->model->cfg.n_vocab, e = (size_t)ctx->model->cfg.n_embd;
    if (ctx->embd) {
        enum ox_status st =
            b->ops->download(b, ctx->embd + (size_t)r0 * e, s->act.xn + (size_t)r0 * e,
                             (size_t)rows * e * sizeof(float));
        if (st != OX_OK || ctx->embd_only || !ctx->logits)
            return st;
    }
    return b->ops->download(b, ctx->logits + (size_t)r0 * v, ctx->b_logits,
                            (size_t)rows * v * sizeof(float));
}

/* The batch's tokens, positions, sequences and cells, and the cache's cell positions and
 * sequence masks, into the stage's copies (the same arrays on the CPU: nothing moves); for a
 * device, each sequence's span of cells too, which its decode attention keeps to. */
static void upload_batch(struct ox_context *ctx, struct stage *s, const struct batch_view *batch) {
    struct backend *b = &s->be;
    struct activations *a = &s->act;
    struct kv_cache *kv = &ctx->kv;
    size_t ints = (size_t)batch->n * sizeof(int32_t), cells = (size_t)kv->used_end;
    b->ops->upload(b, a->b_tok, batch->tokens, ints);
    b->ops->upload(b, a->b_pos, batch->pos, ints);
    b->ops->upload(b, a->b_seq, batch->seq, ints);
    b->ops->upload(b, a->b_cell, batch->cell, ints);
    b->ops->upload(b, s->kv_pos, kv->pos, cells * sizeof *kv->pos);
    b->ops->upload(b, s->kv_seq, kv->seq, cells * SEQ_WORDS * sizeof *kv->seq);
    b->ops->upload(b, s->kv_used, &kv->used_end, sizeof kv->used_end);
    if (s->kv_span) {
        kv_spans(kv);
        b->ops->upload(b, s->kv_span, kv->span, sizeof kv->span);
    }
}

/* Whether a decode step of n tokens may be recorded as a graph by the last stage's backend:
 * up to its graph_max_tokens tokens, each with logits (a step of several sequences' next
 * tokens; prompts are few launches per token anyway, and ox_embed's steps skip the output
 * matrix a recording holds), and no op that reads the host mid-way (MoE routing there: single
 * tokens, unless the last one went without) or depends on the position on the host (attention
 * temperature). */
static bool graphable(const struct ox_context *ctx, const struct backend *b,
                      const struct batch_view *batch) {
    /* a split model's ranks record their steps too where a lost rank still ends them (below):
     * on two H100s 8B Q4_K_M tg128 302 -> 338 t/s by rows (NCCL's sums then); OX_SPLIT_GRAPHS=0
     * not */
    static int split_graphs = -1;
    if (split_graphs < 0) {
        const char *env = getenv("OX_SPLIT_GRAPHS");
        split_graphs = !env || strcmp(env, "0") != 0;
    }
    int n = batch->n;
    const struct model_config *c = &ctx->model->cfg;
    bool moe = false; /* DeepSeek's first layers are dense */
    for (int32_t il = 0; il < c->n_layer; il++)
        moe |= ctx->model->layers[il].ffn_gate_inp != NULL;
    bool many_seqs = batch->one_per_seq && n <= b->ops->graph_max_seqs && n <= ctx->logit_rows;
    if (n < 1 || (n > b->ops->graph_max_tokens && !many_seqs) || ctx->embd_only || !ctx->logits ||
        ((ctx->group || ctx->pipe) && !split_graphs) || (moe && (n > 1 || !ctx->moe_graphable)) ||
        c->attn_temp_scale != 0.0f)
        return false;
    /* a split's step is recorded only where a lost rank still ends it: not a pipeline's
     * hand-overs, nor sums the group's recordings could not end */
    size_t widest = (size_t)c->n_embd > (size_t)c->n_head * (size_t)c->head_dim_k
                        ? (size_t)c->n_embd
                        : (size_t)c->n_head * (size_t)c->head_dim_k;
    if (ctx->pipe || (ctx->group && !(b->ops->group_recordable &&
                                      b->ops->group_recordable(ctx->group, (size_t)n * widest))))
        return false;
    for (int t = 0; t < n; t++)
        if (batch->out_row[t] < 0)
            return false;
    return true;
}

/* A recurrent layer's branch (Mamba-2 or gated delta-net) into act.proj, with the residual
 * scale the attention's branch takes too. */
static void recurrent_block(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                            int il, int n) {
    const struct model_config *c = &ctx->model->cfg;
    if (c->arch->mamba2)
        mamba2_layer(ctx, s, l, il, n);
    else
        delta_net_layer(ctx, s, l, il, n);
    if (c->residual_scale != 0.0f)
        s->be.ops->scale(&s->be, s->act.proj, c->residual_scale, (size_t)n * (size_t)c->n_embd);
}

/* The stage's layers over n tokens; returns the rows left (keep_output_rows drops those whose
 * logits nobody asked for before the model's last FFN). */
static int run_layers(struct ox_context *ctx, struct stage *s, const struct batch_view *batch) {
    int n = batch->n;
    const struct ox_model *m = ctx->model;
    for (int il = s->layer_begin; il < s->layer_end; il++) {
        bool attn_added = false; /* a recurrent layer leaves its branch in act.proj */
        if (m->cfg.is_recurrent[il])
            recurrent_block(ctx, s, &m->layers[il], il, n);
        else
            attn_added = attention_block(ctx, s, batch, &m->layers[il], il);
        if (il == m->cfg.n_layer - 1 && (n = keep_output_rows(ctx, s, batch, n)) == 0)
            return 0;
        ffn_block(ctx, s, &m->layers[il], n, attn_added);
        if (m->layers[il].layer_out_norm) /* an encoder's x = norm(x + ffn) */
            encoder_norm_residual(ctx, s, m->layers[il].layer_out_norm,
                                  m->layers[il].layer_out_norm_b, n);
        per_layer_embd_add(ctx, s, &m->layers[il], il, n);
    }
    return n;
}

/* The stages before the last run on the host: the embeddings and the first layers, whose
 * hidden state the last stage then takes. */
static void run_host_stages(struct ox_context *ctx, const struct batch_view *batch) {
    int n = batch->n;
    struct stage *last = &ctx->stages[ctx->n_stages - 1];
    for (int32_t i = 0; i < ctx->n_stages - 1; i++) {
        struct stage *s = &ctx->stages[i];
        upload_batch(ctx, s, batch);
        if (i == 0)
            embed(ctx, s, n);
        run_layers(ctx, s, batch);
    }
    const struct stage *host = last - 1; /* the last of them made the hidden state */
    const struct model_config *c = &ctx->model->cfg;
    size_t bytes = (size_t)n * (size_t)c->n_embd * sizeof(float);
    last->be.ops->upload(&last->be, last->act.x, host->act.x, bytes);
    size_t ple_bytes = (size_t)n * (size_t)c->n_embd_per_layer * sizeof(float);
    for (int il = last->layer_begin; last->act.ple && il < last->layer_end; il++)
        last->be.ops->upload(&last->be, per_layer_input(ctx, last, il),
                             per_layer_input(ctx, host, il), ple_bytes); /* made here */
}

static enum ox_status forward(struct ox_context *ctx, const struct batch_view *batch) {
    int n = batch->n;
    struct stage *last = &ctx->stages[ctx->n_stages - 1];
    struct backend *b = &last->be;
    bool graph = graphable(ctx, b, batch);
    int n_in = n;
    ctx->moe_on_host = false;
    if (ctx->n_stages > 1)
        run_host_stages(ctx, batch);
    upload_batch(ctx, last, batch);
    /* a recording is exact for one batch size, order of sums and set of LoRA adapters; the
     * cells in use it reads from kv_used (a long context's apart where the backend asks) */
    int long_cells = b->ops->graph_long_cells;
    bool long_ctx = long_cells > 0 && ctx->kv.used_end >= long_cells;
    uint64_t key = (uint64_t)n | (uint64_t)b->one_token_order << 16 | (uint64_t)long_ctx << 17 |
                   (uint64_t)ctx->lora_gen << 32;
    if (graph && compose_graph_begin(b, key))
        return pipeline_takes(ctx) ? b->ops->download(b, NULL, NULL, 0) /* no output here */
                                   : output_rows(ctx, last, 0, n);
    if (pipeline_takes(ctx)) /* a pipeline's rank after the first: the state so far */
        pipeline_take(ctx, last, n);
    else if (ctx->n_stages == 1)
        embed(ctx, last, n);
    if ((n = run_layers(ctx, last, batch)) == 0)
        return b->ops->download(b, NULL, NULL, 0); /* the batch's status */
    if (ctx->pipe && (n = pipeline_pass(ctx, last, batch, n)) == 0) {
        if (graph)
            compose_graph_end(b);
        return b->ops->download(b, NULL, NULL, 0); /* a rank that makes no logits */
    }
    if (n_in == 1 && batch->out_row[0] >= 0) /* a step graphable() would take, but for MoE */
        ctx->moe_graphable = !ctx->moe_on_host;
    if (n <= ctx->logit_rows) {
        output_block(ctx, last, 0, n);
        if (graph)
            compose_graph_end(b);
        return output_rows(ctx, last, 0, n);
    }
    for (int r0 = 0; r0 < n; r0 += ctx->logit_rows) { /* b_logits holds logit_rows at a time */
        int rows = n - r0 < ctx->logit_rows ? n - r0 : ctx->logit_rows;
        output_block(ctx, last, r0, rows);
        OX_TRY(output_rows(ctx, last, r0, rows));
    }
    return OX_OK;
}

enum ox_status transformer_forward(struct ox_context *ctx, const struct batch_view *batch) {
    ctx->batch_err = OX_OK;
    enum ox_status st = forward(ctx, batch);
    return st != OX_OK ? st : ctx->batch_err; /* a download midway failed, which it cleared */
}
