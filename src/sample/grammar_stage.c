/* grammar_stage.c: a GBNF grammar as a sampler stage: candidates whose text cannot continue the
 * parse lose (logit -inf), end-of-generation tokens survive only where the grammar may end,
 * and every accepted token advances the parse. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/grammar.h"
#include "sample.h"

struct grammar_stage {
    struct smp_ext ext; /* first: the chain frees through it */
    const struct ox_vocab *vocab;
    struct gram *g;
    struct gram_state *state;
    int32_t n_vocab;
    char **text;            /* [n_vocab] each token's bytes (no NUL) */
    size_t *len;            /* [n_vocab] */
    bool *eog;              /* [n_vocab] */
    const char **cand_text; /* scratch per call */
    size_t *cand_len;
    bool *allowed;
    size_t *cand_index;
    int32_t *hist; /* the tokens accepted since the reset: its state replays them */
    size_t n_hist, cap_hist;
};

static void apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    (void)s;
    bool can_end = gram_state_can_end(gs->state);
    size_t n = 0;
    for (size_t i = 0; i < c->size; i++) {
        int32_t id = c->data[i].id;
        if (c->data[i].logit == -INFINITY)
            continue;
        if (id < 0 || id >= gs->n_vocab) {
            c->data[i].logit = -INFINITY;
            continue;
        }
        if (gs->eog[id]) {
            if (!can_end)
                c->data[i].logit = -INFINITY;
            continue;
        }
        gs->cand_text[n] = gs->text[id], gs->cand_len[n] = gs->len[id], gs->cand_index[n++] = i;
    }
    /* a resource limit in the matcher: keep nothing rather than guess */
    if (gram_state_filter(gs->state, gs->cand_text, gs->cand_len, n, gs->allowed) != OX_OK)
        memset(gs->allowed, 0, n * sizeof *gs->allowed);
    for (size_t k = 0; k < n; k++)
        if (!gs->allowed[k])
            c->data[gs->cand_index[k]].logit = -INFINITY;
}

static bool allows(struct smp_ext *e, int32_t token) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    if (token < 0 || token >= gs->n_vocab)
        return false;
    if (gs->eog[token])
        return gram_state_can_end(gs->state);
    const char *text = gs->text[token];
    bool ok = false;
    return gram_state_filter(gs->state, &text, &gs->len[token], 1, &ok) == OX_OK && ok;
}

/* Token t through state st; false when the grammar refuses it. */
static bool advance(struct grammar_stage *gs, struct gram_state *st, int32_t token) {
    bool ok = false;
    size_t n_ok;
    return gram_state_accept(st, gs->text[token], gs->len[token], &ok, &n_ok) == OX_OK && ok;
}

static void accept(struct smp_ext *e, int32_t token) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    if (token < 0 || token >= gs->n_vocab || gs->eog[token])
        return;
    if (!advance(gs, gs->state, token)) /* refused: the parse stays where it was */
        return;
    if (gs->n_hist == gs->cap_hist) {
        size_t cap = gs->cap_hist ? 2 * gs->cap_hist : 64;
        int32_t *h = realloc(gs->hist, cap * sizeof *h);
        if (!h)
            return; /* a later save then holds fewer tokens: its load is refused as short */
        gs->hist = h, gs->cap_hist = cap;
    }
    gs->hist[gs->n_hist++] = token;
}

static void reset(struct smp_ext *e) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    struct gram_state *fresh;
    if (gram_state_create(gs->g, &fresh) == OX_OK) {
        gram_state_free(gs->state);
        gs->state = fresh;
        gs->n_hist = 0;
    }
}

static void save(struct smp_ext *e, struct smp_bytes *b) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    uint64_t n = gs->n_hist;
    smp_put(b, &n, sizeof n);
    smp_put(b, gs->hist, gs->n_hist * sizeof *gs->hist);
}

/* The parse of the saved tokens, made anew in a state of its own, then in place of this one. */
static bool load(struct smp_ext *e, struct smp_bytes *b) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    uint64_t n;
    if (!smp_get(b, &n, sizeof n) || n > (b->in_n - b->at) / sizeof(int32_t))
        return false;
    int32_t *hist = malloc((n ? n : 1) * sizeof *hist);
    struct gram_state *fresh = NULL;
    bool ok =
        hist && smp_get(b, hist, n * sizeof *hist) && gram_state_create(gs->g, &fresh) == OX_OK;
    for (uint64_t i = 0; ok && i < n; i++)
        ok = hist[i] >= 0 && hist[i] < gs->n_vocab && !gs->eog[hist[i]] &&
             advance(gs, fresh, hist[i]);
    if (!ok) {
        free(hist);
        gram_state_free(fresh);
        return false;
    }
    gram_state_free(gs->state);
    free(gs->hist);
    gs->state = fresh, gs->hist = hist, gs->n_hist = gs->cap_hist = n;
    return true;
}

static void stage_free(struct smp_ext *e) {
    struct grammar_stage *gs = (struct grammar_stage *)e;
    for (int32_t i = 0; gs->text && i < gs->n_vocab; i++)
        free(gs->text[i]);
    free(gs->text), free(gs->len), free(gs->eog);
    free(gs->cand_text), free(gs->cand_len), free(gs->allowed), free(gs->cand_index);
    free(gs->hist);
    gram_state_free(gs->state);
    gram_free(gs->g);
    free(gs);
}

/* Every token's text once, as the grammar will see it (control tokens render as nothing and
 * so can never be produced inside the grammar). */
static enum ox_status load_texts(struct grammar_stage *gs) {
    size_t n = (size_t)gs->n_vocab;
    gs->text = calloc(n, sizeof *gs->text);
    gs->len = calloc(n, sizeof *gs->len);
    gs->eog = calloc(n, sizeof *gs->eog);
    gs->cand_text = calloc(n, sizeof *gs->cand_text);
    gs->cand_len = calloc(n, sizeof *gs->cand_len);
    gs->allowed = calloc(n, sizeof *gs->allowed);
    gs->cand_index = calloc(n, sizeof *gs->cand_index);
    if (!gs->text || !gs->len || !gs->eog || !gs->cand_text || !gs->cand_len || !gs->allowed ||
        !gs->cand_index)
        return ox_fail(OX_ERR_OOM, "grammar: out of memory for %zu token texts", n);
    for (int32_t t = 0; t < gs->n_vocab; t++) {
        int32_t need = ox_token_to_piece(gs->vocab, t, NULL, 0, 0, false);
        gs->text[t] = malloc(need > 0 ? (size_t)need : 1);
        if (!gs->text[t])
            return ox_fail(OX_ERR_OOM, "grammar: out of memory for token texts");
        gs->len[t] =
            need > 0 ? (size_t)ox_token_to_piece(gs->vocab, t, gs->text[t], (size_t)need, 0, false)
                     : 0;
        gs->eog[t] = ox_vocab_is_eog(gs->vocab, t);
    }
    return OX_OK;
}

enum ox_status ox_sampler_add_grammar(struct ox_sampler *s, const struct ox_vocab *vocab,
                                      const char *gbnf, size_t len) {
    if (!s || !vocab || !gbnf)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_sampler_add_grammar: NULL argument");
    struct grammar_stage *gs = calloc(1, sizeof *gs);
    if (!gs)
        return ox_fail(OX_ERR_OOM, "grammar: out of memory");
    gs->ext = (struct smp_ext){.apply = apply,
                               .accept = accept,
                               .reset = reset,
                               .free = stage_free,
                               .allows = allows,
                               .save = save,
                               .load = load,
                               .name = "grammar"};
    gs->vocab = vocab;
    gs->n_vocab = ox_vocab_n_tokens(vocab);
    enum ox_status st = gram_parse(gbnf, len, &gs->g);
    if (st == OX_OK)
        st = gram_state_create(gs->g, &gs->state);
    if (st == OX_OK)
        st = load_texts(gs);
    if (st != OX_OK) {
        stage_free(&gs->ext);
        return st;
    }
    return smp_sampler_push_ext(s, &gs->ext);
}
