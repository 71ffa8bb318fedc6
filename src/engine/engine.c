/* engine.c: ox_engine: generation requests side by side on one context, one batch per step
 * (continuous batching), each request in a slot whose KV sequence outlives it for prefix reuse. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "engine/engine_int.h"

/* Set s with lora at scale: replaced in place, appended, or (scale 0) taken out. */
static bool lora_put(struct lora_set *s, struct ox_lora *lora, float scale) {
    int32_t i = 0;
    while (i < s->n && s->use[i].lora != lora)
        i++;
    if (scale == 0.0f) {
        if (i < s->n)
            memmove(&s->use[i], &s->use[i + 1], (size_t)(s->n - i - 1) * sizeof s->use[0]), s->n--;
        return true;
    }
    if (i == s->n && s->n == 8)
        return false;
    s->use[i] = (struct ox_lora_use){lora, scale};
    s->n += i == s->n;
    return true;
}

static bool lora_same(const struct lora_set *a, const struct lora_set *b) {
    if (a->n != b->n)
        return false;
    for (int32_t i = 0; i < a->n; i++)
        if (a->use[i].lora != b->use[i].lora || a->use[i].scale != b->use[i].scale)
            return false;
    return true;
}

/* The context takes set s (between steps, no slot running). */
static enum ox_status lora_apply(struct ox_engine *e, const struct lora_set *s) {
    ox_context_clear_lora(e->ctx);
    e->lora_active = (struct lora_set){0};
    e->lora_gen++;
    for (int32_t i = 0; i < s->n; i++)
        OX_TRY(ox_context_set_lora(e->ctx, s->use[i].lora, s->use[i].scale));
    e->lora_active = *s;
    return OX_OK;
}

struct ox_engine_params ox_engine_params_default(void) {
    return (struct ox_engine_params){
        .n_parallel = 4, .n_ctx = 4096, .n_batch = 512, .kv_type = OX_DTYPE_F16};
}

void engine_free_job(struct job *j) {
    if (j)
        free(j->prompt);
    free(j);
}

/* Under the lock: the snapshot ox_engine_stats reads, taken after each step and at each
 * request's end. */
static void take_snapshot(struct ox_engine *e) {
    e->stats = e->live;
    e->stats.n_queued = e->n_queued, e->stats.n_running = 0, e->stats.kv_used = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        const struct slot *s = &e->slots[i];
        e->slot_view[i] = (struct ox_engine_slot){
            .request_id = s->job ? s->job->id : 0,
            .n_ctx = e->slot_ctx,
            .n_past = s->n_past,
            .n_prompt = s->job ? s->job->req.n_prompt : 0,
            .n_generated = s->job ? s->n_generated : 0,
        };
        e->stats.n_running += s->job != NULL;
        e->stats.kv_used += s->n_past;
    }
}

/* The request's end: the slot is free (its tokens stay for reuse), then its callback. The job
 * leaves the slot under the lock, as ox_engine_cancel looks at it from other threads. */
static void finish(struct ox_engine *e, struct slot *s, enum ox_finish reason) {
    pthread_mutex_lock(&e->lock);
    struct job *j = s->job;
    s->job = NULL;
    take_snapshot(e); /* a client told of the end sees it in the statistics */
    pthread_mutex_unlock(&e->lock);
    s->row = -1;
    if (j->aside) {
        engine_deliver(e, j, -1, true, reason);
        return;
    }
    if (j->req.on_done)
        j->req.on_done(j->req.user, reason, s->n_generated);
    engine_free_job(j);
}

enum ox_status ox_engine_create(const struct ox_model *model, const struct ox_engine_params *params,
                                struct ox_engine **out) {
    if (!model || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_engine_create: NULL argument");
    *out = NULL;
    struct ox_engine_params p = params ? *params : ox_engine_params_default();
    if (p.n_parallel < 1 || p.n_parallel > OX_SEQ_MAX || p.n_batch < (uint32_t)p.n_parallel ||
        p.n_ctx < (uint32_t)p.n_parallel * 2)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "engine: %d slots need 1 to %d slots, a batch of at least one token per "
                       "slot (n_batch %u) and two cells per slot (n_ctx %u)",
                       p.n_parallel, OX_SEQ_MAX, p.n_batch, p.n_ctx);
    if (p.spec &&
        (p.spec->draft_max < 1 || p.spec->draft_max > 256 || p.spec->draft_min < 0 ||
         p.spec->draft_min > p.spec->draft_max || p.spec->ngram_min < 1 ||
         p.spec->ngram_max < p.spec->ngram_min || p.spec->ngram_max > 64 || p.spec->max_slots < 0))
        return ox_fail(OX_ERR_INVALID_ARG,
                       "engine: speculative decoding takes draft_max 1..256, draft_min 0.."
                       "draft_max, ngram 1..64");
    struct ox_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ox_fail(OX_ERR_OOM, "engine: out of memory");
    if (p.spec)
        e->spec = true, e->spec_p = *p.spec;
    struct ox_context_params cp = ox_context_params_default();
    uint32_t ubatch = p.n_ubatch > 0 && p.n_ubatch < p.n_batch ? p.n_ubatch : p.n_batch;
    cp.n_ctx = p.n_ctx, cp.n_batch = ubatch, cp.n_threads = p.n_threads, cp.kv_type = p.kv_type;
    cp.n_seq_max = (uint32_t)p.n_parallel;
    e->model = model, e->n_slots = p.n_parallel, e->n_batch = (int32_t)p.n_batch;
    e->n_ubatch = (int32_t)ubatch;
    e->slot_ctx = (int32_t)(p.n_ctx / (uint32_t)p.n_parallel);
    e->n_vocab = ox_model_n_vocab(model), e->next_id = 1;
    pthread_mutex_init(&e->lock, NULL);
    enum ox_status st = ox_context_create(model, &cp, &e->ctx);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->b_tok = malloc(p.n_batch * sizeof *e->b_tok);
    e->b_pos = malloc(p.n_batch * sizeof *e->b_pos);
    e->b_seq = malloc(p.n_batch * sizeof *e->b_seq);
    e->b_logits = malloc(p.n_batch * sizeof *e->b_logits);
    e->slot_view = calloc((size_t)e->n_slots, sizeof *e->slot_view);
    e->ready = calloc((size_t)e->n_slots, sizeof *e->ready);
    if (st == OX_OK) /* drafts within a step the device records, where it records steps */
        e->draft_rows = ox_context_recorded_tokens(e->ctx) > 1
                            ? (int32_t)ox_context_recorded_tokens(e->ctx)
                            : e->n_ubatch;
    e->draft_rows = e->draft_rows < e->n_ubatch ? e->draft_rows : e->n_ubatch;
    if (st == OX_OK)
        st = engine_draft_init(e, &p);
    if (st == OX_OK && p.callbacks_aside) /* a step's tokens at most, and every slot's end */
        st = engine_deliver_init(e, e->n_slots * ((e->spec ? e->spec_p.draft_max : 0) + 2));
    if (st == OX_OK && e->n_slots > 1) /* the host's cores, idle while a step samples */
        st = threadpool_create(p.n_threads > 0 ? p.n_threads : threadpool_default_threads(),
                               &e->pool);
    e->live.n_slots = e->n_slots, e->live.kv_cells = e->n_slots * e->slot_ctx;
    bool ok =
        e->slots && e->b_tok && e->b_pos && e->b_seq && e->b_logits && e->slot_view && e->ready;
    int32_t most = (e->spec ? e->spec_p.draft_max : 0) + 1; /* a step's tokens of one slot */
    for (int32_t i = 0; ok && i < e->n_slots; i++) {
        struct slot *sl = &e->slots[i];
        sl->tokens = malloc((size_t)e->slot_ctx * sizeof(ox_token));
        sl->next = malloc((size_t)most * sizeof(ox_token));
        sl->draft = malloc((size_t)most * sizeof(ox_token));
        ok = sl->tokens && sl->next && sl->draft;
    }
    if (st == OX_OK && !ok)
        st = ox_fail(OX_ERR_OOM, "engine: out of memory");
    if (st == OX_OK)
        take_snapshot(e);
    if (st != OX_OK) {
        ox_engine_free(e);
        return st;
    }
    *out = e;
    return OX_OK;
}

void ox_engine_free(struct ox_engine *e) {
    if (!e)
        return;
    for (int32_t i = 0; e->slots && i < e->n_slots; i++) {
        if (e->slots[i].job)
            finish(e, &e->slots[i], OX_FINISH_CANCELLED);
        free(e->slots[i].tokens), free(e->slots[i].next), free(e->slots[i].draft);
    }
    engine_deliver_free(e); /* after what the slots' ends queued */
    for (struct job *j = e->head, *next; j; j = next) {
        next = j->next;
        if (j->req.on_done)
            j->req.on_done(j->req.user, OX_FINISH_CANCELLED, 0);
        engine_free_job(j);
    }
    engine_draft_free(e);
    ox_context_free(e->ctx);
    pthread_mutex_destroy(&e->lock);
    free(e->slots), free(e->b_tok), free(e->b_pos), free(e->b_seq), free(e->b_logits);
    free(e->slot_view), free(e->ready);
    threadpool_free(e->pool);
    free(e);
}

enum ox_status ox_engine_submit(struct ox_engine *e, const struct ox_request *req, uint64_t *id) {
    if (!e || !req || !req->prompt || req->n_prompt < 1 || !req->sampler || !req->on_token)
        return ox_fail(OX_ERR_INVALID_ARG, "engine: a request needs a prompt, a sampler and "
                                           "on_token");
    if (req->n_prompt > e->slot_ctx)
        return ox_fail(OX_ERR_CONTEXT_FULL,
                       "engine: a prompt of %d tokens does not fit a slot's %d cells",
                       req->n_prompt, e->slot_ctx);
    for (int32_t i = 0; i < req->n_prompt; i++)
        if (req->prompt[i] < 0 || req->prompt[i] >= e->n_vocab)
            return ox_fail(OX_ERR_INVALID_ARG,
                           "engine: prompt token %d at %d is not in the vocabulary of %d",
                           req->prompt[i], i, e->n_vocab);
    struct job *j = calloc(1, sizeof *j);
    ox_token *copy = malloc((size_t)req->n_prompt * sizeof *copy);
    if (!j || !copy) {
        free(j), free(copy);
        return ox_fail(OX_ERR_OOM, "engine: out of memory");
    }
    memcpy(copy, req->prompt, (size_t)req->n_prompt * sizeof *copy);
    j->req = *req, j->prompt = copy, j->req.prompt = copy;
    for (int32_t i = 0; req->lora && i < req->n_lora; i++)
        if (!req->lora[i].lora || !lora_put(&j->lora, req->lora[i].lora, req->lora[i].scale)) {
            free(j), free(copy);
            return ox_fail(OX_ERR_INVALID_ARG, "engine: a request's adapters: at most 8, none "
                                               "NULL");
        }
    j->req.lora = NULL, j->req.n_lora = 0; /* the request's array is not kept */
    pthread_mutex_lock(&e->lock);
    if (!req->lora)
        j->lora = e->lora_default;
    j->id = e->next_id++;
    if (e->tail)
        e->tail->next = j;
    else
        e->head = j;
    e->tail = j;
    e->n_queued++;
    pthread_mutex_unlock(&e->lock);
    if (id)
        *id = j->id;
    return OX_OK;
}

void ox_engine_cancel(struct ox_engine *e, uint64_t id) {
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    for (struct job *j = e->head; j; j = j->next)
        j->cancel |= j->id == id || id == 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        if (e->slots[i].job && (e->slots[i].job->id == id || id == 0))
            e->slots[i].job->cancel = true;
    pthread_mutex_unlock(&e->lock);
}

/* How many leading tokens a slot's sequence shares with a prompt. */
static int32_t common_prefix(const struct slot *s, const struct job *j) {
    int32_t n = 0;
    while (n < s->n_past && n < j->req.n_prompt && s->tokens[n] == j->prompt[n])
        n++;
    return n;
}

/* Start a request in a free slot: the KV keeps the prefix it shares with the slot's last
 * sequence (at least the last prompt token is decoded again, for its logits). */
static void start(struct ox_engine *e, struct slot *s, struct job *j) {
    int32_t seq = (int32_t)(s - e->slots);
    int32_t keep = j->req.fresh || s->lora_gen != e->lora_gen ? 0 : common_prefix(s, j);
    s->lora_gen = e->lora_gen;
    keep = keep < j->req.n_prompt ? keep : j->req.n_prompt - 1;
    ox_kv_seq_rm(e->ctx, seq, keep, -1);
    if (ox_kv_seq_pos_max(e->ctx, seq) < 0) /* a recurrent model's sequence goes whole */
        keep = 0;
    engine_draft_forget(e, seq, keep);
    memcpy(s->tokens, j->prompt, (size_t)j->req.n_prompt * sizeof *s->tokens);
    s->job = j, s->n_past = keep, s->n_tokens = j->req.n_prompt, s->n_generated = 0, s->row = -1;
    s->n_draft = 0, s->draft_cap = e->spec_p.draft_max;
    j->aside = e->deliver.on && !j->req.on_logits; /* on_logits reads this step's logits */
    ox_sampler_reset(j->req.sampler);
    for (int32_t i = 0; i < j->req.n_prompt; i++)
        ox_sampler_accept_prompt(j->req.sampler, j->prompt[i]);
}

/* Under the lock: queued requests into free slots, each into the free slot sharing the longest
 * prefix with it; cancelled ones leave the queue into *dropped. */
static void admit(struct ox_engine *e, struct job **dropped) {
    struct job **link = &e->head;
    bool blocked = false; /* a request waits for the running ones' adapters to end: so do the
                             ones after it */
    int32_t running = 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        running += e->slots[i].job != NULL;
    while (*link) {
        struct job *j = *link;
        struct slot *best = NULL;
        int32_t best_len = -1;
        if (!j->cancel && !blocked && !lora_same(&j->lora, &e->lora_active)) {
            if (running) {
                blocked = true;
            } else if (lora_apply(e, &j->lora) != OX_OK) { /* no slot runs: switch */
                j->cancel = j->failed = true;
                lora_apply(e, &(struct lora_set){0});
            }
        }
        for (int32_t i = 0; !j->cancel && !blocked && i < e->n_slots; i++) {
            int32_t len = e->slots[i].job ? -1 : common_prefix(&e->slots[i], j);
            if (len > best_len)
                best = &e->slots[i], best_len = len;
        }
        if (!j->cancel && !best) { /* every slot busy: it waits */
            link = &j->next;
            continue;
        }
        *link = j->next, e->n_queued--;
        if (j->cancel) {
            j->next = *dropped, *dropped = j;
        } else {
            j->next = NULL;
            start(e, best, j);
            running++;
        }
    }
    e->tail = NULL;
    for (struct job *j = e->head; j; j = j->next)
        e->tail = j;
}

/* Slots with a token to decode and nothing else: the ones that would draft. */
static int32_t generating_slots(const struct ox_engine *e) {
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        n += e->slots[i].job && e->slots[i].n_tokens - e->slots[i].n_past == 1;
    return n;
}

/* How long slot s's draft may be this step: as its request, its last drafts and its cells allow
 * (no context shift may fall inside a checked draft); 0 for a slot not generating. */
static int32_t draft_most(const struct ox_engine *e, const struct slot *s) {
    const struct ox_request *r = s->job ? &s->job->req : NULL;
    if (!e->draft_now || !r || s->n_tokens - s->n_past != 1 || r->draft_max < 0 ||
        r->max_tokens == 0)
        return 0;
    int32_t max = r->draft_max > 0 && r->draft_max < s->draft_cap ? r->draft_max : s->draft_cap;
    if (r->max_tokens > 0 && r->max_tokens - s->n_generated - 1 < max)
        max = r->max_tokens - s->n_generated - 1;
    max = e->slot_ctx - s->n_tokens - 1 < max ? e->slot_ctx - s->n_tokens - 1 : max;
    return max > 0 ? max : 0;
}

/* Slot s's draft in room rows of the batch: the draft model's (made before the step, cut to
 * the room), or prompt lookup over what the slot holds; none shorter than draft_min. */
static int32_t draft_for(struct ox_engine *e, struct slot *s, int32_t room) {
    int32_t max = draft_most(e, s), k;
    max = room < max ? room : max;
    if (max <= 0)
        return 0;
    if (e->draft.ctx)
        k = s->n_draft < max ? s->n_draft : max;
    else
        k = ox_spec_lookup(s->tokens, (size_t)s->n_tokens, e->spec_p.ngram_min, e->spec_p.ngram_max,
                           max, s->draft);
    return k < e->spec_p.draft_min ? 0 : k;
}

/* This step's batch: first the one token each generating slot has to decode (and its draft,
 * within the first forward pass, leaving a row for every other generating slot), then chunks of
 * the prompts still being read while there is room (n_batch >= n_slots). Returns its length; a
 * slot's row is set where its logits are wanted, slot i's added[i] tokens start at start[i]. */
static int32_t fill_batch(struct ox_engine *e, int32_t *added, int32_t *start) {
    int32_t n = 0, generating = 0;
    for (int32_t i = 0; i < e->n_slots; i++)
        generating += e->slots[i].job && e->slots[i].n_tokens - e->slots[i].n_past == 1;
    e->drafted = false;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < e->n_slots; i++) {
            struct slot *s = &e->slots[i];
            int32_t left = s->job ? s->n_tokens - s->n_past : 0;
            if (left < 1 || (left > 1) != (pass == 1))
                continue;
            int32_t take = left < e->n_batch - n ? left : e->n_batch - n;
            added[i] = take, start[i] = n;
            for (int32_t t = 0; t < take; t++, n++) {
                e->b_tok[n] = s->tokens[s->n_past + t], e->b_pos[n] = s->n_past + t;
                e->b_seq[n] = i, e->b_logits[n] = s->n_past + t == s->n_tokens - 1;
                if (e->b_logits[n])
                    s->row = n;
            }
            s->n_draft = pass == 0 ? draft_for(e, s, e->draft_rows - n - --generating) : 0;
            for (int32_t d = 0; d < s->n_draft; d++, n++) {
                e->b_tok[n] = s->draft[d], e->b_pos[n] = s->n_past + 1 + d;
                e->b_seq[n] = i, e->b_logits[n] = true;
            }
            added[i] += s->n_draft;
            e->drafted |= s->n_draft > 0;
        }
    return n;
}

/* One part of sample_ready: every nth ready slot from the ith draws its next token from its
 * logits row with its own sampler (slots share nothing there, so parts run side by side), and
 * the tokens after it from its draft's rows while the draft agrees. */
static void sample_part(void *arg, int ith, int nth) {
    struct ox_engine *e = arg;
    const struct ox_vocab *v = ox_model_vocab(e->model);
    for (int32_t j = ith; j < e->n_ready; j += nth) {
        struct slot *s = e->ready[j];
        const struct ox_request *r = &s->job->req;
        s->n_next = 0;
        if (r->max_tokens == 0) /* the prompt only: nothing to draw */
            continue;
        for (int32_t i = 0; i <= s->n_draft; i++) {
            const float *logits = ox_get_logits(e->ctx, s->row + i);
            ox_token t = logits ? ox_sampler_sample(r->sampler, logits, e->n_vocab) : -1;
            s->next[s->n_next++] = t;
            if (t >= 0)
                ox_sampler_accept(r->sampler, t);
            if (t < 0 || i == s->n_draft || t != s->draft[i] || ox_vocab_is_eog(v, t))
                break;
        }
    }
}

/* The ready slots' next tokens, drawn on the engine's pool: a sampler's pass over a 128k
 * vocabulary takes about 0.1 ms, which 128 streams made 13 ms of every step on one thread. */
static void sample_ready(struct ox_engine *e) {
    if (e->pool && e->n_ready > 1)
        threadpool_run_n(e->pool, sample_part, e, e->n_ready);
    else
        sample_part(e, 0, 1);
}

/* Pass slot s's next token (sample_ready's) on, or end the request. */
/* Context shift: the slot's sequence keeps its first tokens (the request's n_keep, and a
 * leading BOS), loses half of the rest, and the tokens after move down to follow them (their
 * keys rotated to the new positions: ox_kv_seq_add). False where nothing can go, or the model's
 * recurrent state cannot give tokens back (the sequence went whole: it ends there). */
static bool shift(struct ox_engine *e, struct slot *s) {
    const struct ox_request *r = &s->job->req;
    int32_t seq = (int32_t)(s - e->slots);
    int32_t keep = r->n_keep < 0 || r->n_keep > r->n_prompt ? r->n_prompt : r->n_keep;
    if (keep == 0 && s->n_past > 0 && s->tokens[0] == ox_vocab_bos(ox_model_vocab(e->model)))
        keep = 1;
    int32_t drop = ox_kv_seq_shift(e->ctx, seq, keep);
    engine_draft_forget(e, seq, 0); /* the draft's sequence reads the shifted tokens anew */
    if (drop == 0) {
        if (ox_kv_seq_pos_max(e->ctx, seq) < 0)
            s->n_past = 0;
        return false;
    }
    memmove(s->tokens + keep, s->tokens + keep + drop,
            (size_t)(s->n_tokens - keep - drop) * sizeof *s->tokens);
    s->n_past -= drop, s->n_tokens -= drop;
    return true;
}

/* One drawn token of slot s (sampled from its row + i): passed on, or the request's end.
 * Returns whether the request goes on. */
static bool take_token(struct ox_engine *e, struct slot *s, int32_t i) {
    const struct ox_request *r = &s->job->req;
    ox_token t = s->next[i];
    if (t < 0) {
        ox_fail(OX_ERR_INVALID_ARG, "engine: the sampler picked no token");
        finish(e, s, OX_FINISH_ERROR);
        return false;
    }
    if (ox_vocab_is_eog(ox_model_vocab(e->model), t)) {
        finish(e, s, OX_FINISH_STOP);
        return false;
    }
    if (r->on_logits)
        r->on_logits(r->user, ox_get_logits(e->ctx, s->row + i), e->n_vocab, t);
    s->n_generated++;
    e->live.n_generated_tokens++;
    if (s->job->aside) {
        engine_deliver(e, s->job, t, false, OX_FINISH_STOP);
    } else if (!r->on_token(r->user, t)) {
        finish(e, s, OX_FINISH_CANCELLED);
        return false;
    }
    bool room = s->n_tokens < e->slot_ctx; /* the token must be decoded next step */
    if (!room && r->context_shift && !(r->max_tokens >= 0 && s->n_generated >= r->max_tokens))
        room = shift(e, s);
    if ((r->max_tokens >= 0 && s->n_generated >= r->max_tokens) || !room) {
        finish(e, s, OX_FINISH_LENGTH);
        return false;
    }
    s->tokens[s->n_tokens++] = t;
    return true;
}

/* Slot s's drawn tokens passed on in order. Its cache keeps its token and the draft's rows up
 * to the first the samples did not take; what the slot holds never runs past its tokens. */
static void advance(struct ox_engine *e, struct slot *s) {
    int32_t seq = (int32_t)(s - e->slots), agreed = 0;
    while (agreed < s->n_draft && agreed < s->n_next && s->next[agreed] == s->draft[agreed])
        agreed++;
    engine_draft_forget(e, seq, s->n_tokens + agreed); /* its guesses past the first miss */
    if (agreed < s->n_draft) {
        s->n_past -= s->n_draft - agreed;
        ox_kv_seq_rm(e->ctx, seq, s->n_past, -1);
    }
    if (s->n_draft > 0) { /* as ox_spec: the next draft is at most one longer than this held */
        s->draft_cap = agreed == s->n_draft ? 2 * s->draft_cap : agreed + 1;
        s->draft_cap = s->draft_cap < e->spec_p.draft_max ? s->draft_cap : e->spec_p.draft_max;
        e->live.n_drafted += (uint64_t)s->n_draft, e->live.n_draft_accepted += (uint64_t)agreed;
    }
    s->n_draft = 0;
    if (s->job->req.max_tokens == 0) { /* the prompt only (now in the slot's cache) */
        s->row = -1;
        finish(e, s, OX_FINISH_LENGTH);
        return;
    }
    bool going = true;
    for (int32_t i = 0; i < s->n_next && going; i++)
        going = take_token(e, s, i);
    s->row = -1;
    if (s->n_past > s->n_tokens) { /* ended inside the draft: its rows past the end go */
        ox_kv_seq_rm(e->ctx, seq, s->n_tokens, -1);
        s->n_past = s->n_tokens;
    }
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ox_engine_stats(struct ox_engine *e, struct ox_engine_stats *stats,
                     struct ox_engine_slot *slots) {
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    if (stats)
        *stats = e->stats;
    if (slots)
        memcpy(slots, e->slot_view, (size_t)e->n_slots * sizeof *slots);
    pthread_mutex_unlock(&e->lock);
}

/* The batch in forward passes of n_ubatch tokens; each slot samples once the pass holding its
 * logits row is done. A failed pass ends the requests whose tokens it (or a later one) held. */
static enum ox_status decode_batch(struct ox_engine *e, int32_t n, int32_t *added,
                                   const int32_t *start) {
    int32_t n_prompt = 0; /* a slot that has generated nothing yet reads its prompt */
    for (int32_t i = 0; i < e->n_slots; i++)
        n_prompt +=
            e->slots[i].job && e->slots[i].n_generated == 0 ? added[i] - e->slots[i].n_draft : 0;
    enum ox_status st = OX_OK;
    int32_t done = 0; /* tokens decoded */
    double t0 = seconds();
    /* a checked draft's rows as if each were decoded alone: greedy text stays plain decoding's */
    ox_context_set_one_token_order(e->ctx, e->drafted);
    for (int32_t c0 = 0; c0 < n && st == OX_OK; c0 += e->n_ubatch) {
        int32_t c1 = n - c0 < e->n_ubatch ? n : c0 + e->n_ubatch;
        struct ox_batch b = {c1 - c0, e->b_tok + c0, e->b_pos + c0, e->b_seq + c0,
                             e->b_logits + c0};
        if ((st = ox_decode(e->ctx, &b)) != OX_OK)
            break;
        done = c1;
        e->n_ready = 0;
        for (int32_t i = 0; i < e->n_slots; i++) {
            struct slot *s = &e->slots[i];
            if (added[i] && s->row >= c0 && s->row < c1) { /* its last token: all decoded */
                s->n_past += added[i], added[i] = 0;
                s->row -= c0;
                e->ready[e->n_ready++] = s;
            }
        }
        sample_ready(e);
        /* the last step's callbacks have run (so a request stopped there is not given this
         * step's token, and the ring holds one step at most) */
        engine_deliver_wait(e);
        for (int32_t j = 0; j < e->n_ready; j++) /* in slot order, as before */
            advance(e, e->ready[j]);
    }
    ox_context_set_one_token_order(e->ctx, false);
    double dt = seconds() - t0;
    e->live.n_prompt_tokens += st == OX_OK ? (uint64_t)n_prompt : 0;
    e->live.prompt_seconds += n_prompt > 0 ? dt : 0;
    e->live.gen_seconds += n_prompt < n ? dt : 0;
    for (int32_t i = 0; i < e->n_slots; i++) { /* prompt pieces without a logits row */
        struct slot *s = &e->slots[i];
        if (!added[i])
            continue;
        if (start[i] + added[i] <= done) {
            s->n_past += added[i];
            continue;
        }
        ox_kv_seq_rm(e->ctx, i, -1, -1); /* unknown now: start it afresh next time */
        engine_draft_forget(e, i, 0);
        s->n_past = 0;
        finish(e, s, OX_FINISH_ERROR);
    }
    return st;
}

enum ox_status ox_engine_step(struct ox_engine *e, int32_t *n_busy) {
    if (!e)
        return ox_fail(OX_ERR_INVALID_ARG, "ox_engine_step: NULL engine");
    struct job *dropped = NULL;
    pthread_mutex_lock(&e->lock);
    admit(e, &dropped);
    bool cancel[OX_SEQ_MAX] = {false};
    for (int32_t i = 0; i < e->n_slots; i++)
        cancel[i] = e->slots[i].job && e->slots[i].job->cancel;
    pthread_mutex_unlock(&e->lock);
    for (struct job *j = dropped, *next; j; j = next) { /* callbacks outside the lock */
        next = j->next;
        if (j->req.on_done)
            j->req.on_done(j->req.user, j->failed ? OX_FINISH_ERROR : OX_FINISH_CANCELLED, 0);
        engine_free_job(j);
    }
    for (int32_t i = 0; i < e->n_slots; i++)
        if (cancel[i])
            finish(e, &e->slots[i], OX_FINISH_CANCELLED);
    int32_t added[OX_SEQ_MAX] = {0}, start[OX_SEQ_MAX] = {0}, most[OX_SEQ_MAX] = {0};
    bool drafting = false;
    e->draft_now = e->spec && generating_slots(e) <= e->spec_p.max_slots;
    for (int32_t i = 0; e->draft.ctx && i < e->n_slots; i++)
        drafting |= (most[i] = draft_most(e, &e->slots[i])) > 0;
    if (drafting && engine_draft_make(e, most) != OX_OK) /* the step goes on without drafts */
        for (int32_t i = 0; i < e->n_slots; i++)
            e->slots[i].n_draft = 0;
    int32_t n = fill_batch(e, added, start);
    enum ox_status st = n > 0 ? decode_batch(e, n, added, start) : OX_OK;
    if (n == 0) /* nothing to decode: the callbacks' turn */
        engine_deliver_wait(e);
    int32_t ending = engine_deliver_ends(e);
    pthread_mutex_lock(&e->lock);
    take_snapshot(e);
    if (n_busy) /* and the requests that ended, their on_done still to run aside */
        *n_busy = e->stats.n_queued + e->stats.n_running + ending;
    pthread_mutex_unlock(&e->lock);
    return st;
}

/* ---- a slot's saved state ---- */

static enum ox_status idle_slot(struct ox_engine *e, int32_t slot, struct slot **out) {
    if (!e || slot < 0 || slot >= e->n_slots)
        return ox_fail(OX_ERR_INVALID_ARG, "engine: no slot %d", slot);
    pthread_mutex_lock(&e->lock);
    bool busy = e->slots[slot].job != NULL;
    pthread_mutex_unlock(&e->lock);
    if (busy)
        return ox_fail(OX_ERR_ABORTED, "engine: slot %d is busy with a request", slot);
    *out = &e->slots[slot];
    return OX_OK;
}

enum ox_status ox_engine_slot_save(struct ox_engine *e, int32_t slot, const char *path,
                                   size_t *n_tokens) {
    struct slot *s = NULL;
    OX_TRY(idle_slot(e, slot, &s));
    OX_TRY(ox_state_seq_save_file(e->ctx, slot, path, s->tokens, (size_t)s->n_past));
    if (n_tokens)
        *n_tokens = (size_t)s->n_past;
    return OX_OK;
}

enum ox_status ox_engine_slot_restore(struct ox_engine *e, int32_t slot, const char *path,
                                      size_t *n_tokens) {
    struct slot *s = NULL;
    OX_TRY(idle_slot(e, slot, &s));
    size_t n = 0;
    engine_draft_forget(e, slot, 0);
    enum ox_status st =
        ox_state_seq_load_file(e->ctx, slot, path, s->tokens, (size_t)e->slot_ctx, &n);
    if (st == OX_OK)
        s->n_past = s->n_tokens = (int32_t)n;
    else if (ox_kv_seq_pos_max(e->ctx, slot) < 0) /* refused after the sequence went */
        s->n_past = s->n_tokens = 0;
    pthread_mutex_lock(&e->lock);
    take_snapshot(e);
    pthread_mutex_unlock(&e->lock);
    if (st == OX_OK && n_tokens)
        *n_tokens = n;
    return st;
}

enum ox_status ox_engine_slot_erase(struct ox_engine *e, int32_t slot, size_t *n_tokens) {
    struct slot *s = NULL;
    OX_TRY(idle_slot(e, slot, &s));
    if (n_tokens)
        *n_tokens = (size_t)s->n_past;
    ox_kv_seq_rm(e->ctx, slot, -1, -1);
    engine_draft_forget(e, slot, 0);
    s->n_past = s->n_tokens = 0;
    pthread_mutex_lock(&e->lock);
    take_snapshot(e);
    pthread_mutex_unlock(&e->lock);
    return OX_OK;
}

/* ---- LoRA adapters ---- */

enum ox_status ox_engine_set_lora(struct ox_engine *e, struct ox_lora *lora, float scale) {
    if (!e || !lora)
        return ox_fail(OX_ERR_INVALID_ARG, "engine: NULL engine or adapter");
    pthread_mutex_lock(&e->lock);
    bool put = lora_put(&e->lora_default, lora, scale);
    pthread_mutex_unlock(&e->lock);
    return put ? OX_OK : ox_fail(OX_ERR_INVALID_ARG, "engine: at most 8 adapters at once");
}
