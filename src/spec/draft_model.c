/* draft_model.c: drafting with a small model of the target's vocabulary: greedy tokens from its
 * own context, which follows the target's sequence. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "spec/spec_int.h"

/* As llama.cpp's check of a draft model: sizes within 128 tokens, the same specials, and the
 * same text for every token both have. */
#define VOCAB_SIZE_SLACK 128

enum ox_status ox_spec_draft_fits(const struct ox_model *target, const struct ox_model *draft) {
    if (!target || !draft)
        return ox_fail(OX_ERR_INVALID_ARG, "speculative: no model");
    const struct ox_vocab *d = ox_model_vocab(draft), *t = ox_model_vocab(target);
    int32_t nd = ox_vocab_n_tokens(d), nt = ox_vocab_n_tokens(t);
    if (abs(nd - nt) > VOCAB_SIZE_SLACK)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "speculative: the draft model has %d tokens, the target %d: not one "
                       "vocabulary",
                       nd, nt);
    if (ox_vocab_bos(d) != ox_vocab_bos(t) || ox_vocab_eos(d) != ox_vocab_eos(t))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "speculative: the draft model's BOS/EOS (%d/%d) are not the target's "
                       "(%d/%d)",
                       ox_vocab_bos(d), ox_vocab_eos(d), ox_vocab_bos(t), ox_vocab_eos(t));
    for (int32_t i = 0; i < (nd < nt ? nd : nt); i++) {
        const char *a = ox_vocab_token_text(d, i), *b = ox_vocab_token_text(t, i);
        if (strcmp(a ? a : "", b ? b : "") != 0)
            return ox_fail(OX_ERR_INVALID_ARG,
                           "speculative: token %d is '%s' in the draft model and '%s' in the "
                           "target: not one vocabulary",
                           i, a ? a : "", b ? b : "");
    }
    return OX_OK;
}

enum ox_status draft_model_init(struct draft_model *d, struct ox_model *model,
                                const struct ox_model *target, uint32_t n_ctx, int n_threads) {
    memset(d, 0, sizeof *d);
    if (!ox_model_has_logits(model) || ox_model_is_recurrent(model))
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "speculative: a draft model needs an output head and no recurrent layers");
    OX_TRY(ox_spec_draft_fits(target, model));
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = n_ctx, cp.n_threads = n_threads;
    OX_TRY(ox_context_create(model, &cp, &d->ctx));
    d->vocab = ox_model_vocab(model);
    int32_t nd = ox_model_n_vocab(model), nt = ox_model_n_vocab(target);
    d->n_vocab = nd < nt ? nd : nt;
    return OX_OK;
}

void draft_model_free(struct draft_model *d) {
    ox_context_free(d->ctx);
    d->ctx = NULL;
}

/* Decode tokens into the draft's sequence 0 in batches; when its cache is full it drops half
 * of what it holds (a draft only needs the recent text) and goes on. */
static enum ox_status feed(struct draft_model *d, const ox_token *t, size_t n) {
    uint32_t n_batch = ox_context_n_batch(d->ctx);
    for (size_t i = 0; i < n;) {
        size_t k = n - i < n_batch ? n - i : n_batch;
        struct ox_batch b = {.n_tokens = (int32_t)k, .token = t + i};
        enum ox_status st = ox_decode(d->ctx, &b);
        if (st == OX_ERR_CONTEXT_FULL && ox_kv_seq_shift(d->ctx, 0, 0) > 0)
            continue;
        OX_TRY(st);
        i += k, d->last_batch = (int32_t)k;
    }
    return OX_OK;
}

ox_token ox_spec_top(const float *l, int32_t n_vocab, float *prob) {
    if (!l || n_vocab < 1)
        return -1;
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        best = l[i] > l[best] ? i : best;
    double sum = 0;
    for (int32_t i = 0; prob && i < n_vocab; i++)
        sum += exp((double)(l[i] - l[best]));
    if (prob)
        *prob = (float)(1.0 / sum);
    return best;
}

enum ox_status draft_model_draft(struct draft_model *d, const ox_token *h, size_t n_h, int max,
                                 float p_min, ox_token *out, int *n_out) {
    *n_out = 0;
    if (max <= 0)
        return OX_OK;
    if (d->n_decoded >= n_h) /* the last token again, for its logits */
        draft_model_keep(d, n_h - 1);
    OX_TRY(feed(d, h + d->n_decoded, n_h - d->n_decoded));
    d->n_decoded = n_h;
    for (int i = 0; i < max; i++) {
        float p;
        ox_token t = ox_spec_top(ox_get_logits(d->ctx, d->last_batch - 1), d->n_vocab, &p);
        if (p < p_min)
            break;
        out[(*n_out)++] = t;
        if (i + 1 == max || ox_vocab_is_eog(d->vocab, t))
            break;
        OX_TRY(feed(d, &t, 1)); /* the draft's cache now runs ahead of h */
        d->n_decoded++;
    }
    return OX_OK;
}

void draft_model_keep(struct draft_model *d, size_t n_keep) {
    if (d->n_decoded <= n_keep)
        return;
    /* the cache's positions may sit below the history's after a shift: drop from the end */
    int32_t end = ox_kv_seq_pos_max(d->ctx, 0) + 1;
    int32_t drop = (int32_t)(d->n_decoded - n_keep);
    ox_kv_seq_rm(d->ctx, 0, end - drop > 0 ? end - drop : 0, -1);
    d->n_decoded = n_keep;
}
