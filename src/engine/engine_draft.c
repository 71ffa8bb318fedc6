/* engine_draft.c: speculative decoding's draft model in the engine: one context whose sequence i
 * follows slot i. Before a step it catches up on each drafting slot's new tokens and guesses
 * greedily on from there, the slots side by side: every batch takes each one's next inputs (the
 * rest of its catch-up, or its last guess), so a prompt far behind and a guess cost one pass. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "engine/engine_int.h"

enum ox_status engine_draft_init(struct ox_engine *e, const struct ox_engine_params *p) {
    struct engine_draft *d = &e->draft;
    memset(d, 0, sizeof *d);
    const struct ox_model *m = p->spec ? p->spec->draft_model : NULL;
    if (!m)
        return OX_OK;
    OX_TRY(ox_spec_draft_fits(e->model, m));
    if (!ox_model_has_logits(m) || ox_model_is_recurrent(m))
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "engine: a draft model needs an output head and no recurrent layers");
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = p->n_ctx, cp.n_batch = (uint32_t)e->n_ubatch, cp.n_threads = p->n_threads;
    cp.n_seq_max = (uint32_t)e->n_slots, cp.kv_type = p->kv_type;
    OX_TRY(ox_context_create(m, &cp, &d->ctx));
    d->n_batch = e->n_ubatch;
    int32_t nd = ox_model_n_vocab(m);
    d->n_vocab = nd < e->n_vocab ? nd : e->n_vocab;
    d->n_decoded = calloc((size_t)e->n_slots, sizeof *d->n_decoded);
    d->last_row = calloc((size_t)e->n_slots, sizeof *d->last_row);
    d->b_tok = malloc((size_t)d->n_batch * sizeof *d->b_tok);
    d->b_pos = malloc((size_t)d->n_batch * sizeof *d->b_pos);
    d->b_seq = malloc((size_t)d->n_batch * sizeof *d->b_seq);
    d->b_logits = malloc((size_t)d->n_batch * sizeof *d->b_logits);
    if (!d->n_decoded || !d->last_row || !d->b_tok || !d->b_pos || !d->b_seq || !d->b_logits)
        return ox_fail(OX_ERR_OOM, "engine: out of memory for the draft model's batches");
    return OX_OK;
}

void engine_draft_free(struct ox_engine *e) {
    struct engine_draft *d = &e->draft;
    ox_context_free(d->ctx);
    free(d->n_decoded), free(d->last_row);
    free(d->b_tok), free(d->b_pos), free(d->b_seq), free(d->b_logits);
    memset(d, 0, sizeof *d);
}

void engine_draft_forget(struct ox_engine *e, int32_t i, int32_t keep) {
    struct engine_draft *d = &e->draft;
    if (!d->ctx || d->n_decoded[i] <= keep)
        return;
    keep = keep > 0 ? keep : 0;
    ox_kv_seq_rm(d->ctx, i, keep, -1);
    d->n_decoded[i] = keep;
}

/* Slot i's next input: its token at n_decoded (catch-up), or its last guess. */
static ox_token next_input(const struct ox_engine *e, int32_t i) {
    const struct slot *s = &e->slots[i];
    int32_t at = e->draft.n_decoded[i];
    return at < s->n_tokens ? s->tokens[at] : s->draft[at - s->n_tokens];
}

enum ox_status engine_draft_make(struct ox_engine *e, const int32_t *most) {
    struct engine_draft *d = &e->draft;
    const struct ox_vocab *v = ox_model_vocab(e->model);
    bool going[OX_SEQ_MAX] = {false};
    int32_t n_going = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        struct slot *s = &e->slots[i];
        s->n_draft = 0;
        if (most[i] <= 0)
            continue;
        if (d->n_decoded[i] >= s->n_tokens) /* its last token again, for its logits */
            engine_draft_forget(e, i, s->n_tokens - 1);
        going[i] = true, n_going++;
    }
    while (n_going > 0) {
        /* each going slot's inputs up to its latest (catch-up chunks as the batch allows) */
        int32_t n = 0;
        for (int32_t i = 0; i < e->n_slots; i++) {
            d->last_row[i] = -1;
            const struct slot *s = &e->slots[i];
            while (going[i] && n < d->n_batch) {
                int32_t at = d->n_decoded[i];
                d->b_tok[n] = next_input(e, i), d->b_pos[n] = at, d->b_seq[n] = i;
                d->b_logits[n] = at + 1 == s->n_tokens + s->n_draft;
                d->n_decoded[i]++;
                if (d->b_logits[n++]) {
                    d->last_row[i] = n - 1;
                    break;
                }
            }
        }
        struct ox_batch b = {n, d->b_tok, d->b_pos, d->b_seq, d->b_logits};
        enum ox_status st = ox_decode(d->ctx, &b);
        if (st != OX_OK) { /* no drafts this step; the sequences start again next time */
            for (int32_t i = 0; i < e->n_slots; i++)
                if (going[i])
                    engine_draft_forget(e, i, 0), e->slots[i].n_draft = 0;
            return st;
        }
        for (int32_t i = 0; i < e->n_slots; i++) {
            struct slot *s = &e->slots[i];
            if (!going[i] || d->last_row[i] < 0)
                continue;
            float p;
            ox_token t = ox_spec_top(ox_get_logits(d->ctx, d->last_row[i]), d->n_vocab, &p);
            if (p >= e->spec_p.draft_p_min)
                s->draft[s->n_draft++] = t;
            if (p < e->spec_p.draft_p_min || s->n_draft == most[i] || ox_vocab_is_eog(v, t))
                going[i] = false, n_going--;
        }
    }
    return OX_OK;
}
