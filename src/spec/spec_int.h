/* spec_int.h: speculative decoding's parts: the token history, the two drafters (prompt lookup,
 * a draft model) and the state ox_spec keeps between steps. */
#ifndef OX_SPEC_SPEC_INT_H
#define OX_SPEC_SPEC_INT_H

#include <stddef.h>

#include "oxidize.h"

/* The tokens a sequence holds in the target, in order (grown by doubling). */
struct token_list {
    ox_token *t;
    size_t n, cap;
};
enum ox_status token_list_push(struct token_list *l, const ox_token *t, size_t n);

/* A draft model's context, holding the sequence as far as it has decoded it. */
struct draft_model {
    struct ox_context *ctx;
    const struct ox_vocab *vocab;
    int32_t n_vocab;    /* tokens it may draft: those the target's vocabulary has too */
    size_t n_decoded;   /* history tokens in its cache, in order */
    int32_t last_batch; /* tokens in its last ox_decode: the logits are the last one's */
};
/* Its context (n_ctx cells, like the target's), once the vocabularies are found to agree. */
enum ox_status draft_model_init(struct draft_model *d, struct ox_model *model,
                                const struct ox_model *target, uint32_t n_ctx, int n_threads);
void draft_model_free(struct draft_model *d);
/* Up to max greedy tokens after h[0, n_h), stopping at one the draft gives less than p_min;
 * h's tokens past n_decoded are decoded first. Returns how many went into out. */
enum ox_status draft_model_draft(struct draft_model *d, const ox_token *h, size_t n_h, int max,
                                 float p_min, ox_token *out, int *n_out);
/* The draft's cache keeps h[0, n_keep) only (what the target kept of a checked draft). */
void draft_model_keep(struct draft_model *d, size_t n_keep);

struct ox_spec {
    struct ox_context *target;
    int32_t seq;
    struct ox_spec_params p;
    struct token_list history; /* what the target's sequence holds */
    struct draft_model draft;  /* draft.ctx NULL: prompt lookup */
    ox_token *batch;           /* the token and its draft: draft_max + 1 */
    int32_t *pos, *seqs;       /* its positions and sequence */
    bool *want;
    struct ox_spec_stats stats;
    int cap; /* the next draft's most tokens: draft_max, less after drafts that failed early */
};

#endif
