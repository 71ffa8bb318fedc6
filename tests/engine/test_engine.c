/* test_engine.c: the serving engine against plain decoding: requests run side by side (more
 * than there are slots, prompts longer than a batch) give each the greedy tokens it gives
 * alone, also when they arrive from another thread mid-generation; prefix reuse, cancelling,
 * the context limit and bad requests; the logits callback, statistics and slot views; steps
 * decoded in several forward passes. The KV cache
 * is f32: an f16 one rounds its attention sums in the order of the cells, which a slot's reuse of
 * freed cells changes (llama.cpp's CPU flash attention does the same). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <time.h>

#include "oxidize.h"
#include "test.h"

enum { MAX_GEN = 64 };

static struct ox_model *model;
static int n_vocab;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static void random_prompt(ox_token *t, int n) {
    for (int i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        t[i] = (ox_token)(rng % (uint64_t)n_vocab);
    }
}

static int argmax(const float *x, float *margin) {
    int best = 0, second = -1;
    for (int i = 1; i < n_vocab; i++) {
        if (x[i] > x[best])
            second = best, best = i;
        else if (second < 0 || x[i] > x[second])
            second = i;
    }
    *margin = x[best] - x[second];
    return best;
}

/* The greedy continuation of a prompt decoded alone, one token at a time after the prompt,
 * with each step's top-2 margin (a near tie may round either way in another batch). */
struct reference {
    ox_token tok[MAX_GEN];
    float margin[MAX_GEN];
    int n;
    bool stopped; /* ended by an end-of-generation token */
};

static void greedy_alone(const ox_token *prompt, int n_prompt, int max, struct reference *r) {
    struct ox_context_params cp = ox_context_params_default();
    cp.n_ctx = (uint32_t)(n_prompt + max + 1), cp.n_threads = 2, cp.kv_type = OX_DTYPE_F32;
    struct ox_context *c = NULL;
    memset(r, 0, sizeof *r);
    CHECK_MSG(ox_context_create(model, &cp, &c) == OX_OK, "%s", ox_last_error());
    struct ox_batch b = {.n_tokens = n_prompt, .token = prompt};
    const struct ox_vocab *v = ox_model_vocab(model);
    for (int g = 0; c && ox_decode(c, &b) == OX_OK && g < max; g++) {
        ox_token t = (ox_token)argmax(ox_get_logits(c, b.n_tokens - 1), &r->margin[g]);
        if (ox_vocab_is_eog(v, t)) {
            r->stopped = true;
            break;
        }
        r->tok[r->n++] = t;
        b = (struct ox_batch){.n_tokens = 1, .token = &r->tok[g]};
    }
    ox_context_free(c);
}

/* One request's side: what it was sent and what came back. */
struct client {
    ox_token prompt[128];
    int n_prompt, max, stop_after; /* stop_after > 0: on_token says stop after that many */
    int draft_max;                 /* the request's (0: the engine's) */
    struct ox_sampler *sampler;
    ox_token got[MAX_GEN];
    int n_got, n_done;
    enum ox_finish reason;
    int32_t n_generated;
};

/* callbacks_aside for the engines made from here on; where on_token ran without it (on the
 * stepping thread) and with it (on the engine's own) */
static bool aside_mode;
static pthread_t stepper;
static int tokens_on_stepper, tokens_aside;

static bool on_token(void *user, ox_token t) {
    struct client *cl = user;
    if (pthread_equal(pthread_self(), stepper))
        __atomic_add_fetch(&tokens_on_stepper, 1, __ATOMIC_SEQ_CST);
    else
        __atomic_add_fetch(&tokens_aside, 1, __ATOMIC_SEQ_CST);
    if (cl->n_got < MAX_GEN)
        cl->got[cl->n_got] = t;
    cl->n_got++;
    return cl->stop_after <= 0 || cl->n_got < cl->stop_after;
}

static void on_done(void *user, enum ox_finish reason, int32_t n_generated) {
    struct client *cl = user;
    cl->reason = reason, cl->n_generated = n_generated;
    /* atomic: check_threaded watches it while the engine's thread may call this */
    __atomic_add_fetch(&cl->n_done, 1, __ATOMIC_SEQ_CST);
}

static enum ox_status submit(struct ox_engine *e, struct client *cl, uint64_t *id) {
    if (!cl->sampler) {
        CHECK(ox_sampler_create(&cl->sampler) == OX_OK);
        CHECK(ox_sampler_add_greedy(cl->sampler) == OX_OK);
    }
    struct ox_request r = {.prompt = cl->prompt,
                           .n_prompt = cl->n_prompt,
                           .max_tokens = cl->max,
                           .sampler = cl->sampler,
                           .on_token = on_token,
                           .on_done = on_done,
                           .user = cl,
                           .draft_max = cl->draft_max};
    return ox_engine_submit(e, &r, id);
}

static void run_until_idle(struct ox_engine *e) {
    int32_t busy = 1;
    for (int steps = 0; busy > 0 && steps < 10000; steps++)
        CHECK_MSG(ox_engine_step(e, &busy) == OX_OK, "step: %s", ox_last_error());
    CHECK_EQ(busy, 0);
}

/* Top-2 margins below this may round either way in another batch. */
static float tie_margin = 1e-3f;

/* The client got what its prompt gives alone, up to a near tie where the two may part. */
static void check_against_alone(const struct client *cl, const char *what) {
    struct reference ref;
    greedy_alone(cl->prompt, cl->n_prompt, cl->max, &ref);
    int same = 0;
    while (same < ref.n && same < cl->n_got && ref.tok[same] == cl->got[same])
        same++;
    bool tie = same < ref.n && same < cl->n_got && ref.margin[same] < tie_margin;
    CHECK_MSG(tie || (same == ref.n && cl->n_got == ref.n),
              "%s: %d of %d tokens as alone (got %d; margin there %g)", what, same, ref.n,
              cl->n_got, same < ref.n ? ref.margin[same] : 0.0);
    CHECK_MSG(cl->n_done == 1, "%s: on_done called %d times", what, cl->n_done);
    if (!tie)
        CHECK_MSG(cl->reason == (ref.stopped ? OX_FINISH_STOP : OX_FINISH_LENGTH) &&
                      cl->n_generated == cl->n_got,
                  "%s: finished with %d after %d", what, cl->reason, cl->n_generated);
}

/* An engine of f32 KV; n_ubatch 0: forward passes of a whole step. */
static struct ox_engine *new_engine_ub(int slots, int n_ctx, int n_batch, int n_ubatch) {
    struct ox_engine_params p = ox_engine_params_default();
    p.n_parallel = slots, p.n_ctx = (uint32_t)n_ctx, p.n_batch = (uint32_t)n_batch;
    p.n_ubatch = (uint32_t)n_ubatch, p.n_threads = 2, p.kv_type = OX_DTYPE_F32;
    p.callbacks_aside = aside_mode;
    struct ox_engine *e = NULL;
    CHECK_MSG(ox_engine_create(model, &p, &e) == OX_OK, "%s", ox_last_error());
    return e;
}

static struct ox_engine *new_engine(int slots, int n_ctx, int n_batch) {
    return new_engine_ub(slots, n_ctx, n_batch, 0);
}

/* n requests of random prompts (lens[i] tokens, gens[i] to generate) submitted at once and run
 * to the end: each gives what it gives alone. The samplers stay for the caller to free. */
static void run_side_by_side(struct ox_engine *e, struct client *cl, int n, const int *lens,
                             const int *gens, const char *label) {
    for (int i = 0; e && i < n; i++) {
        cl[i].n_prompt = lens[i], cl[i].max = gens[i];
        random_prompt(cl[i].prompt, lens[i]);
        CHECK_EQ(submit(e, &cl[i], NULL), OX_OK);
    }
    if (e)
        run_until_idle(e);
    char what[96];
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s: request %d", label, i);
        check_against_alone(&cl[i], what);
    }
}

/* Seven requests on four slots, batches of 16 tokens: three wait in the queue, the long
 * prompts take several steps while the others generate; then a prompt extending the first
 * one's reuses its slot's cache. */
static void check_side_by_side(void) {
    struct ox_engine *e = new_engine(4, 4 * 128, 16);
    static const int lens[] = {5, 40, 17, 3, 29, 11, 64}, gens[] = {12, 6, 9, 16, 7, 10, 8};
    struct client cl[8] = {0};
    run_side_by_side(e, cl, 7, lens, gens, "side by side");
    /* request 0's prompt and its output, and more: the slot keeps that prefix */
    struct client *x = &cl[7];
    memcpy(x->prompt, cl[0].prompt, (size_t)lens[0] * sizeof(ox_token));
    memcpy(x->prompt + lens[0], cl[0].got, 8 * sizeof(ox_token));
    random_prompt(x->prompt + lens[0] + 8, 4);
    x->n_prompt = lens[0] + 12, x->max = 10;
    if (e) {
        CHECK_EQ(submit(e, x, NULL), OX_OK);
        run_until_idle(e);
    }
    check_against_alone(x, "a prompt reusing a slot's prefix");
    for (int i = 0; i < 8; i++)
        ox_sampler_free(cl[i].sampler);
    ox_engine_free(e);
}

/* Cancelling a queued request, a running one, and on_token asking to stop. */
static void check_cancel(void) {
    struct ox_engine *e = new_engine(1, 256, 32);
    struct client a = {.n_prompt = 6, .max = 20}, b = {.n_prompt = 4, .max = 5};
    struct client c = {.n_prompt = 7, .max = 20, .stop_after = 2};
    random_prompt(a.prompt, 6), random_prompt(b.prompt, 4), random_prompt(c.prompt, 7);
    uint64_t ida = 0, idb = 0;
    if (e) {
        CHECK_EQ(submit(e, &a, &ida), OX_OK);
        CHECK_EQ(submit(e, &b, &idb), OX_OK);
        CHECK_EQ(submit(e, &c, NULL), OX_OK);
        ox_engine_cancel(e, idb); /* still queued behind a */
        int32_t busy = 0;
        for (int i = 0; i < 3; i++)
            CHECK_EQ(ox_engine_step(e, &busy), OX_OK);
        ox_engine_cancel(e, ida); /* running */
        run_until_idle(e);
        ox_engine_cancel(e, ida); /* finished: ignored */
    }
    CHECK_MSG(b.n_done == 1 && b.reason == OX_FINISH_CANCELLED && b.n_got == 0, "queued cancel");
    CHECK_MSG(a.n_done == 1 && a.reason == OX_FINISH_CANCELLED && a.n_got >= 2 && a.n_got < 20,
              "running cancel: %d tokens, reason %d", a.n_got, a.reason);
    CHECK_MSG(c.n_done == 1 && c.reason == OX_FINISH_CANCELLED && c.n_got == 2 &&
                  c.n_generated == 2,
              "on_token stop: %d tokens, reason %d", c.n_got, c.reason);
    ox_sampler_free(a.sampler), ox_sampler_free(b.sampler), ox_sampler_free(c.sampler);
    ox_engine_free(e);
}

/* A slot's share of the context bounds a request; bad requests are refused up front; requests
 * still queued when the engine is freed end cancelled. */
static void check_limits(void) {
    struct ox_engine *e = new_engine(2, 64, 16); /* 32 cells a slot */
    struct client full = {.n_prompt = 20, .max = -1}, big = {.n_prompt = 33, .max = 4};
    struct client left = {.n_prompt = 3, .max = 4}, none = {.n_prompt = 5, .max = 0};
    random_prompt(full.prompt, 20), random_prompt(big.prompt, 33), random_prompt(left.prompt, 3);
    random_prompt(none.prompt, 5);
    if (e) {
        CHECK_EQ(submit(e, &big, NULL), OX_ERR_CONTEXT_FULL);
        CHECK_EQ(submit(e, &full, NULL), OX_OK);
        CHECK_EQ(submit(e, &none, NULL), OX_OK);
        run_until_idle(e);
        struct ox_request bad = {.prompt = full.prompt,
                                 .n_prompt = 0,
                                 .max_tokens = 4,
                                 .sampler = full.sampler,
                                 .on_token = on_token,
                                 .on_done = on_done,
                                 .user = &full};
        CHECK_EQ(ox_engine_submit(e, &bad, NULL), OX_ERR_INVALID_ARG);
        ox_token oov = (ox_token)n_vocab;
        bad.prompt = &oov, bad.n_prompt = 1;
        CHECK_EQ(ox_engine_submit(e, &bad, NULL), OX_ERR_INVALID_ARG);
        bad.prompt = full.prompt, bad.sampler = NULL;
        CHECK_EQ(ox_engine_submit(e, &bad, NULL), OX_ERR_INVALID_ARG);
        CHECK_EQ(submit(e, &left, NULL), OX_OK);
    }
    /* tokens until the slot's 32 cells hold the prompt and all but the last one generated */
    CHECK_MSG(full.n_done == 1 && full.reason == OX_FINISH_LENGTH && full.n_got == 32 - 20 + 1,
              "context limit: %d tokens, reason %d", full.n_got, full.reason);
    CHECK_MSG(none.n_done == 1 && none.reason == OX_FINISH_LENGTH && none.n_got == 0,
              "max_tokens 0: %d tokens, reason %d", none.n_got, none.reason);
    ox_engine_free(e);
    CHECK_MSG(left.n_done == 1 && left.reason == OX_FINISH_CANCELLED, "freed while queued");
    ox_sampler_free(full.sampler), ox_sampler_free(big.sampler), ox_sampler_free(left.sampler);
    ox_sampler_free(none.sampler);
    struct ox_engine_params p = ox_engine_params_default();
    p.n_parallel = 0;
    CHECK_EQ(ox_engine_create(model, &p, &e), OX_ERR_INVALID_ARG);
    CHECK(e == NULL);
}

/* Steps of 24 tokens decoded in forward passes of 7 (n_ubatch): the same answers. */
static void check_ubatch(void) {
    struct ox_engine *e = new_engine_ub(3, 3 * 96, 24, 7);
    static const int lens[] = {30, 12, 5, 19}, gens[] = {9, 14, 11, 6};
    struct client cl[4] = {0};
    run_side_by_side(e, cl, 4, lens, gens, "ubatch");
    for (int i = 0; i < 4; i++)
        ox_sampler_free(cl[i].sampler);
    ox_engine_free(e);
}

/* Twelve sequences decoding side by side: a GPU takes such steps in pieces it records. */
static void check_many_slots(void) {
    struct ox_engine *e = new_engine(12, 12 * 32, 64);
    int lens[12], gens[12];
    for (int i = 0; i < 12; i++)
        lens[i] = 3 + i % 4, gens[i] = 6 + i % 5;
    struct client cl[12] = {0};
    run_side_by_side(e, cl, 12, lens, gens, "one of twelve");
    for (int i = 0; i < 12; i++)
        ox_sampler_free(cl[i].sampler);
    ox_engine_free(e);
}

/* on_logits sees the row each token was sampled from (greedy: its largest logit). */
static int logits_seen, logits_wrong;
static void on_logits(void *user, const float *logits, int32_t n, ox_token t) {
    (void)user;
    float margin;
    logits_seen++;
    logits_wrong += n != n_vocab || argmax(logits, &margin) != t;
}

/* The logits callback, the statistics and slot views, a fresh request that reuses no prefix,
 * and cancelling everything at once. */
static void check_stats(void) {
    struct ox_engine *e = new_engine(2, 2 * 64, 16);
    struct client a = {.n_prompt = 20, .max = 5}, b = {.n_prompt = 20, .max = 5};
    random_prompt(a.prompt, 20);
    memcpy(b.prompt, a.prompt, sizeof a.prompt);
    struct ox_engine_stats st = {0};
    struct ox_engine_slot view[2];
    logits_seen = logits_wrong = 0;
    if (!e)
        return;
    CHECK(ox_sampler_create(&a.sampler) == OX_OK && ox_sampler_add_greedy(a.sampler) == OX_OK);
    struct ox_request r = {.prompt = a.prompt,
                           .n_prompt = 20,
                           .max_tokens = 5,
                           .sampler = a.sampler,
                           .on_token = on_token,
                           .on_done = on_done,
                           .user = &a,
                           .on_logits = on_logits};
    CHECK_EQ(ox_engine_submit(e, &r, NULL), OX_OK);
    run_until_idle(e);
    ox_engine_stats(e, &st, view);
    CHECK_MSG(logits_seen == a.n_got && logits_wrong == 0,
              "on_logits: %d calls for %d tokens, %d "
              "not the argmax",
              logits_seen, a.n_got, logits_wrong);
    CHECK_MSG(st.n_slots == 2 && st.n_running == 0 && st.n_queued == 0 && st.kv_cells == 128 &&
                  st.n_prompt_tokens == 20 && st.n_generated_tokens == (uint64_t)a.n_got,
              "stats: %d slots, %d running, %d queued, %d cells, %llu prompt, %llu generated",
              st.n_slots, st.n_running, st.n_queued, st.kv_cells,
              (unsigned long long)st.n_prompt_tokens, (unsigned long long)st.n_generated_tokens);
    int slot = view[0].n_past > 0 ? 0 : 1;
    CHECK_MSG(view[slot].request_id == 0 && view[slot].n_ctx == 64 &&
                  view[slot].n_past == 20 + a.n_got - 1 && st.kv_used == view[slot].n_past,
              "slot view: request %llu, %d of %d cells", (unsigned long long)view[slot].request_id,
              view[slot].n_past, view[slot].n_ctx);
    /* the same prompt again reuses all but its last token; a fresh one reads it all */
    CHECK_EQ(submit(e, &b, NULL), OX_OK);
    run_until_idle(e);
    uint64_t before = st.n_prompt_tokens;
    ox_engine_stats(e, &st, NULL);
    CHECK_MSG(st.n_prompt_tokens - before == 1, "prefix reuse: %llu prompt tokens decoded",
              (unsigned long long)(st.n_prompt_tokens - before));
    r.fresh = true, before = st.n_prompt_tokens, a.n_got = 0;
    CHECK_EQ(ox_engine_submit(e, &r, NULL), OX_OK);
    run_until_idle(e);
    ox_engine_stats(e, &st, NULL);
    CHECK_MSG(st.n_prompt_tokens - before == 20, "fresh: %llu prompt tokens decoded",
              (unsigned long long)(st.n_prompt_tokens - before));
    /* id 0 cancels the running and the queued alike */
    struct client c[3] = {
        {.n_prompt = 4, .max = 30}, {.n_prompt = 5, .max = 30}, {.n_prompt = 6, .max = 30}};
    for (int i = 0; i < 3; i++) {
        random_prompt(c[i].prompt, c[i].n_prompt);
        CHECK_EQ(submit(e, &c[i], NULL), OX_OK);
    }
    int32_t busy = 0;
    CHECK_EQ(ox_engine_step(e, &busy), OX_OK);
    CHECK_EQ(busy, 3);
    ox_engine_stats(e, &st, view);
    CHECK_MSG(st.n_running == 2 && st.n_queued == 1 && view[0].request_id && view[1].request_id,
              "busy snapshot: %d running, %d queued", st.n_running, st.n_queued);
    ox_engine_cancel(e, 0);
    run_until_idle(e);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(c[i].n_done == 1 && c[i].reason == OX_FINISH_CANCELLED && c[i].n_got < 30,
                  "cancel all: request %d ended %d after %d tokens", i, c[i].reason, c[i].n_got);
        ox_sampler_free(c[i].sampler);
    }
    ox_sampler_free(a.sampler), ox_sampler_free(b.sampler);
    ox_engine_free(e);
}

/* Requests submitted from another thread while this one steps, as a server's HTTP threads do. */
enum { N_THREADED = 8 };
struct producer {
    struct ox_engine *e;
    struct client *cl;
    int submitted; /* read after the join */
};

static void *produce(void *arg) {
    struct producer *p = arg;
    for (int i = 0; i < N_THREADED; i++) {
        struct timespec pause = {0, 2000000}; /* 2 ms: some arrive mid-generation */
        nanosleep(&pause, NULL);
        p->submitted += submit(p->e, &p->cl[i], NULL) == OX_OK;
    }
    return NULL;
}

static void check_threaded(void) {
    struct ox_engine *e = new_engine(3, 3 * 96, 24);
    struct client cl[N_THREADED] = {0};
    for (int i = 0; i < N_THREADED; i++) {
        cl[i].n_prompt = 4 + 5 * i, cl[i].max = 6 + i;
        random_prompt(cl[i].prompt, cl[i].n_prompt);
        CHECK(ox_sampler_create(&cl[i].sampler) == OX_OK); /* before the thread starts */
        CHECK(ox_sampler_add_greedy(cl[i].sampler) == OX_OK);
    }
    struct producer p = {e, cl, 0};
    pthread_t th;
    bool started = e && pthread_create(&th, NULL, produce, &p) == 0;
    int done = 0;
    for (int steps = 0; started && done < N_THREADED && steps < 100000; steps++) {
        int32_t busy = 0;
        CHECK_MSG(ox_engine_step(e, &busy) == OX_OK, "step: %s", ox_last_error());
        done = 0;
        for (int i = 0; i < N_THREADED; i++)
            done += __atomic_load_n(&cl[i].n_done, __ATOMIC_SEQ_CST);
        if (busy == 0) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
    }
    if (started)
        pthread_join(th, NULL);
    CHECK_EQ(p.submitted, N_THREADED);
    char what[64];
    for (int i = 0; i < N_THREADED; i++) {
        snprintf(what, sizeof what, "threaded request %d", i);
        check_against_alone(&cl[i], what);
        ox_sampler_free(cl[i].sampler);
    }
    ox_engine_free(e);
}

/* Speculative decoding in every slot (prompt lookup, or a draft model: draft is its file in the
 * test data, or NULL): requests whose prompts repeat a pattern (so drafts are made and some
 * hold), beside ones that opt out, one that stops itself inside a draft, and ones whose slots
 * fill up: each gives its greedy tokens alone, the drafts are counted. */
static void check_speculative(const char *draft) {
    struct ox_spec_params sp = ox_spec_params_default();
    sp.draft_max = 6, sp.draft_p_min = 0.0f;
    struct ox_model *dm = NULL;
    if (draft) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s", test_data_dir(), draft);
        struct ox_model_params mp = test_model_params();
        CHECK_MSG(ox_model_load(path, &mp, &dm) == OX_OK, "%s", ox_last_error());
        if (!dm)
            return;
        sp.draft_model = dm;
    }
    struct ox_engine_params p = ox_engine_params_default();
    p.n_parallel = 4, p.n_ctx = 4 * 96, p.n_batch = 32, p.n_threads = 2;
    p.kv_type = OX_DTYPE_F32, p.spec = &sp, p.callbacks_aside = aside_mode;
    struct ox_engine *e = NULL;
    CHECK_MSG(ox_engine_create(model, &p, &e) == OX_OK, "%s", ox_last_error());
    /* a GPU checks a draft through its batch kernels, which round their own way: further apart
     * than a step of one token per sequence */
    tie_margin = strcmp(ox_model_backend(model), "CPU") ? 0.05f : 1e-3f;
    struct client cl[8] = {0};
    static const int gens[] = {40, 30, 60, 12, 50, 25, 45, 64};
    for (int i = 0; e && i < 8; i++) {
        int period = 3 + i % 4;
        random_prompt(cl[i].prompt, period);
        for (int j = period; j < 24; j++)
            cl[i].prompt[j] = cl[i].prompt[j - period];
        cl[i].n_prompt = 24, cl[i].max = gens[i];
        cl[i].draft_max = i == 3 ? -1 : i == 5 ? 2 : 0;
        cl[i].stop_after = i == 6 ? 9 : 0;
        CHECK_EQ(submit(e, &cl[i], NULL), OX_OK);
    }
    if (e)
        run_until_idle(e);
    for (int i = 0; i < 8; i++) {
        char what[96];
        snprintf(what, sizeof what, "speculative (%s): request %d", draft ? draft : "lookup", i);
        if (cl[i].stop_after) {
            struct reference ref;
            greedy_alone(cl[i].prompt, cl[i].n_prompt, cl[i].stop_after, &ref);
            CHECK_MSG(cl[i].n_got == cl[i].stop_after && cl[i].reason == OX_FINISH_CANCELLED &&
                          !memcmp(cl[i].got, ref.tok, sizeof(ox_token) * (size_t)ref.n),
                      "%s: stopped after %d", what, cl[i].n_got);
        } else {
            check_against_alone(&cl[i], what);
        }
        ox_sampler_free(cl[i].sampler);
    }
    struct ox_engine_stats st;
    ox_engine_stats(e, &st, NULL);
    CHECK_MSG(st.n_drafted > 0 && st.n_draft_accepted > 0 && st.n_draft_accepted <= st.n_drafted,
              "%s: %llu drafted, %llu taken", draft ? draft : "lookup",
              (unsigned long long)st.n_drafted, (unsigned long long)st.n_draft_accepted);
    ox_engine_free(e);
    ox_model_free(dm);
    tie_margin = 1e-3f;
}

/* Above max_slots generating slots the engine drafts nothing (a full step gains nothing from
 * drafts); at or below it, it does. */
static void check_speculative_max_slots(void) {
    struct ox_spec_params sp = ox_spec_params_default();
    sp.max_slots = 2, sp.ngram_min = 1;
    struct ox_engine_params p = ox_engine_params_default();
    /* every prompt in the first step: from the second on, all of them generate */
    p.n_parallel = 4, p.n_ctx = 4 * 64, p.n_batch = 64, p.n_threads = 2;
    p.kv_type = OX_DTYPE_F32, p.spec = &sp;
    for (int busy = 1; busy <= 4; busy += 3) {
        struct ox_engine *e = NULL;
        CHECK_MSG(ox_engine_create(model, &p, &e) == OX_OK, "%s", ox_last_error());
        struct client cl[4] = {0};
        for (int i = 0; e && i < busy; i++) {
            random_prompt(cl[i].prompt, 4);
            for (int j = 4; j < 16; j++) /* every token so far seen before: lookup always drafts */
                cl[i].prompt[j] = cl[i].prompt[j - 4];
            cl[i].n_prompt = 16, cl[i].max = 20;
            CHECK_EQ(submit(e, &cl[i], NULL), OX_OK);
        }
        if (e)
            run_until_idle(e);
        struct ox_engine_stats st;
        ox_engine_stats(e, &st, NULL);
        CHECK_MSG((st.n_drafted > 0) == (busy <= 2), "%d slots busy: %llu drafted", busy,
                  (unsigned long long)st.n_drafted);
        for (int i = 0; i < busy; i++)
            ox_sampler_free(cl[i].sampler);
        ox_engine_free(e);
    }
}

/* A draft model of another vocabulary, or bad draft lengths: refused. */
static void check_speculative_refusals(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/kjv-15m-q4_k_m.gguf", test_data_dir());
    struct ox_model_params mp = test_model_params();
    struct ox_model *kjv = NULL;
    CHECK(ox_model_load(path, &mp, &kjv) == OX_OK);
    struct ox_spec_params sp = ox_spec_params_default();
    sp.draft_model = kjv;
    struct ox_engine_params p = ox_engine_params_default();
    p.spec = &sp, p.n_threads = 2;
    struct ox_engine *e = (struct ox_engine *)1;
    CHECK(kjv && ox_engine_create(model, &p, &e) == OX_ERR_INVALID_ARG && e == NULL);
    CHECK_MSG(strstr(ox_last_error(), "vocabulary") != NULL, "%s", ox_last_error());
    sp = ox_spec_params_default(), sp.draft_min = sp.draft_max + 1;
    CHECK(ox_engine_create(model, &p, &e) == OX_ERR_INVALID_ARG);
    ox_model_free(kjv);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama-q8_0.gguf", test_data_dir());
    struct ox_model_params mp = test_model_params();
    CHECK_MSG(ox_model_load(path, &mp, &model) == OX_OK, "%s", ox_last_error());
    if (!model)
        return test_finish("test_engine");
    n_vocab = ox_model_n_vocab(model);
    stepper = pthread_self();
    /* every request's callbacks on the stepping thread, then beside the steps (the threaded
     * check's steps run here too, its producer only submits) */
    const uint64_t seed = rng;
    for (int pass = 0; pass < 2; pass++) {
        rng = seed; /* the same prompts: the checks after the loop get the ones they always had */
        aside_mode = pass == 1;
        tokens_on_stepper = tokens_aside = 0;
        check_side_by_side();
        check_cancel();
        check_limits();
        check_stats();
        check_ubatch();
        check_many_slots();
        check_threaded();
        check_speculative(NULL);
        /* check_stats' first request has on_logits, whose callbacks stay on the stepper */
        CHECK_MSG(aside_mode ? tokens_aside > 100 && tokens_on_stepper <= 10
                             : tokens_aside == 0 && tokens_on_stepper > 100,
                  "callbacks_aside %d: %d tokens on the stepping thread, %d aside", aside_mode,
                  tokens_on_stepper, tokens_aside);
    }
    check_speculative("llama-q4_0.gguf");
    check_speculative_refusals();
    check_speculative_max_slots();
    ox_model_free(model);
    return test_finish("test_engine");
}
