/* speculative.c: ox_spec: a step decodes the sampled token with a draft after it in one batch of
 * the target, then samples each position from the target's logits with the caller's sampler
 * while the samples agree with the draft, so the text is what plain decoding would make. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "spec/spec_int.h"

struct ox_spec_params ox_spec_params_default(void) {
    return (struct ox_spec_params){.draft_max = 16,
                                   .draft_min = 0,
                                   .draft_p_min = 0.75f,
                                   .ngram_min = 1,
                                   .ngram_max = 3,
                                   .max_slots = 4};
}

enum ox_status token_list_push(struct token_list *l, const ox_token *t, size_t n) {
    if (n == 0)
        return OX_OK;
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->n + n)
            cap *= 2;
        ox_token *grown = realloc(l->t, cap * sizeof *grown);
        if (!grown)
            return ox_fail(OX_ERR_OOM, "speculative: out of memory for %zu tokens", cap);
        l->t = grown, l->cap = cap;
    }
    memcpy(l->t + l->n, t, n * sizeof *t);
    l->n += n;
    return OX_OK;
}

static enum ox_status check_params(const struct ox_spec_params *p) {
    if (p->draft_max < 1 || p->draft_max > 256 || p->draft_min < 0 || p->draft_min > p->draft_max ||
        !(p->draft_p_min >= 0 && p->draft_p_min <= 1) || p->ngram_min < 1 ||
        p->ngram_max < p->ngram_min || p->ngram_max > 64)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "speculative: draft_max %d (1..256), draft_min %d (0..draft_max), "
                       "draft_p_min %g (0..1) or ngram %d..%d (1..64) out of range",
                       p->draft_max, p->draft_min, (double)p->draft_p_min, p->ngram_min,
                       p->ngram_max);
    return OX_OK;
}

enum ox_status ox_spec_create(struct ox_context *target, int32_t seq_id,
                              const struct ox_spec_params *params, struct ox_spec **out) {
    if (!out || !target || !params)
        return ox_fail(OX_ERR_INVALID_ARG, "speculative: NULL argument");
    *out = NULL;
    const struct ox_model *model = ox_context_model(target);
    OX_TRY(check_params(params));
    if (ox_model_is_recurrent(model))
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "speculative: the model has recurrent layers, whose state cannot give a "
                       "rejected draft back");
    if (!ox_model_has_logits(model))
        return ox_fail(OX_ERR_UNSUPPORTED, "speculative: the model has no output head");
    struct ox_spec *s = calloc(1, sizeof *s);
    int cap = params->draft_max + 1;
    if (s) {
        s->batch = malloc((size_t)cap * sizeof *s->batch);
        s->pos = malloc((size_t)cap * sizeof *s->pos);
        s->seqs = malloc((size_t)cap * sizeof *s->seqs);
        s->want = malloc((size_t)cap * sizeof *s->want);
        /* a whole context of history up front: steps then allocate nothing (until a context
         * shift lets the history outgrow it) */
        s->history.cap = (size_t)ox_context_n_ctx(target) + (size_t)cap;
        s->history.t = malloc(s->history.cap * sizeof *s->history.t);
    }
    if (!s || !s->batch || !s->pos || !s->seqs || !s->want || !s->history.t) {
        ox_spec_free(s);
        return ox_fail(OX_ERR_OOM, "speculative: out of memory");
    }
    s->target = target, s->seq = seq_id, s->p = *params;
    enum ox_status st = OX_OK;
    if (params->draft_model)
        st = draft_model_init(&s->draft, params->draft_model, model, ox_context_n_ctx(target),
                              params->n_threads);
    if (st != OX_OK) {
        ox_spec_free(s);
        return st;
    }
    *out = s;
    return OX_OK;
}

void ox_spec_free(struct ox_spec *s) {
    if (!s)
        return;
    draft_model_free(&s->draft);
    free(s->history.t);
    free(s->batch);
    free(s->pos);
    free(s->seqs);
    free(s->want);
    free(s);
}

enum ox_status ox_spec_begin(struct ox_spec *s, const ox_token *tokens, size_t n) {
    if (!s || (!tokens && n))
        return ox_fail(OX_ERR_INVALID_ARG, "speculative: NULL argument");
    s->history.n = 0, s->cap = s->p.draft_max;
    if (s->draft.ctx) {
        ox_kv_clear(s->draft.ctx);
        s->draft.n_decoded = 0;
    }
    return token_list_push(&s->history, tokens, n);
}

/* Up to max tokens guessed to follow the history (whose last token is the one being decoded). */
static enum ox_status make_draft(struct ox_spec *s, int max, ox_token *draft, int *n) {
    *n = 0;
    if (max <= 0)
        return OX_OK;
    if (s->draft.ctx)
        OX_TRY(draft_model_draft(&s->draft, s->history.t, s->history.n, max, s->p.draft_p_min,
                                 draft, n));
    else
        *n = ox_spec_lookup(s->history.t, s->history.n, s->p.ngram_min, s->p.ngram_max, max, draft);
    if (*n < s->p.draft_min)
        *n = 0;
    return OX_OK;
}

/* The token and k drafted ones from pos0 on, every row's logits wanted; the batch runs in the
 * one-token kernels' order so that each row is what a step of it alone would give. */
static enum ox_status decode_draft(struct ox_spec *s, int32_t pos0, int k) {
    for (int i = 0; i <= k; i++)
        s->pos[i] = pos0 + i, s->want[i] = true;
    for (int i = 0; i <= k; i++)
        s->seqs[i] = s->seq;
    struct ox_batch b = {
        .n_tokens = k + 1, .token = s->batch, .pos = s->pos, .seq_id = s->seqs, .logits = s->want};
    ox_context_set_one_token_order(s->target, k > 0);
    enum ox_status st = ox_decode(s->target, &b);
    ox_context_set_one_token_order(s->target, false);
    return st;
}

enum ox_status ox_spec_step(struct ox_spec *s, struct ox_sampler *smp, ox_token token,
                            ox_token *out, int32_t max_out, int32_t *n_out) {
    if (!s || !smp || !out || !n_out)
        return ox_fail(OX_ERR_INVALID_ARG, "speculative: NULL argument");
    *n_out = 0;
    if (max_out < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "speculative: room for no token (max_out %d)", max_out);
    const struct ox_model *model = ox_context_model(s->target);
    int32_t n_vocab = ox_model_n_vocab(model), pos0 = ox_kv_seq_pos_max(s->target, s->seq) + 1;
    int max = s->cap < max_out - 1 ? s->cap : max_out - 1;
    /* a check the device replays as a recorded step costs about one step; a wider one costs
     * its kernels' launches (H100, kjv: 1.45x plain at 3-token checks, 0.7-1.2x at 9-17) */
    uint32_t recorded = ox_context_recorded_tokens(s->target);
    int32_t batch_room = (int32_t)(recorded > 1 ? recorded : ox_context_n_batch(s->target)) - 1;
    max = max < batch_room ? max : batch_room;
    OX_TRY(token_list_push(&s->history, &token, 1));
    int k;
    enum ox_status st = make_draft(s, max, s->batch + 1, &k);
    s->batch[0] = token;
    if (st == OX_OK) {
        st = decode_draft(s, pos0, k);
        if (st == OX_ERR_CONTEXT_FULL && k > 0) /* the token alone may still fit */
            st = decode_draft(s, pos0, k = 0);
    }
    if (st != OX_OK) {
        s->history.n--;
        if (s->draft.ctx)
            draft_model_keep(&s->draft, s->history.n);
        return st;
    }
    s->stats.steps++, s->stats.drafted += (uint64_t)k;
    const struct ox_vocab *v = ox_model_vocab(model);
    int agreed = 0;
    for (int i = 0; i <= k; i++) {
        ox_token t = ox_sampler_sample(smp, ox_get_logits(s->target, i), n_vocab);
        out[(*n_out)++] = t;
        if (t < 0 || ox_vocab_is_eog(v, t))
            break;
        OX_TRY(ox_sampler_accept(smp, t));
        if (i == k || t != s->batch[1 + i])
            break;
        agreed++;
    }
    s->stats.accepted += (uint64_t)agreed;
    /* the next draft: twice as long after one that held, one longer than what held of one
     * that did not (drafts past a text's first miss are mostly wasted rows: kjv-15m, dmax 16,
     * text that does not repeat itself 0.38x plain decoding without this, 0.97x with) */
    if (k > 0)
        s->cap = agreed == k ? 2 * s->cap : agreed + 1;
    s->cap = s->cap < s->p.draft_max ? s->cap : s->p.draft_max;
    if (agreed < k) /* the rows of the draft's rejected tail */
        ox_kv_seq_rm(s->target, s->seq, pos0 + 1 + agreed, -1);
    OX_TRY(token_list_push(&s->history, s->batch + 1, (size_t)agreed));
    if (s->draft.ctx)
        draft_model_keep(&s->draft, s->history.n);
    return OX_OK;
}

void ox_spec_stats(const struct ox_spec *s, struct ox_spec_stats *stats) {
    if (stats)
        *stats = s ? s->stats : (struct ox_spec_stats){0};
}
