/* sampler.c: the sampler chain (ox_sampler_*), stage for stage as llama.cpp's samplers. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

enum stage_kind {
    STAGE_GREEDY,
    STAGE_DIST,
    STAGE_TEMP,
    STAGE_TOP_K,
    STAGE_TOP_P,
    STAGE_MIN_P,
    STAGE_EXT /* a stage with its own state, defined in its own file */
};

struct stage {
    enum stage_kind kind;
    float f;                 /* temp, or p of top-p / min-p */
    int32_t k;               /* top-k */
    size_t min_keep;         /* top-p / min-p */
    uint32_t seed;           /* dist */
    struct smp_mt19937 *rng; /* dist only: its own stream (2.5 KiB), reseeded by reset */
    struct smp_ext *ext;     /* STAGE_EXT only */
};

struct ox_sampler {
    struct stage *stages;
    int n_stages, cap_stages;
    struct smp_cand *cur;       /* [cap] candidates of the current call */
    struct smp_scratch scratch; /* [cap] sort scratch, sized with cur */
};

/* ---- stages ------------------------------------------------------------------------------ */

/* Argmax; the first of equal maxima wins (strict >), as llama.cpp. The maximum stays in a
 * register: read back through c->selected, a 128k vocabulary took 0.5 ms. */
static void stage_greedy(struct smp_array *c) {
    size_t best = 0;
    float max = c->data[0].logit;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > max)
            max = c->data[i].logit, best = i;
    c->selected = (ptrdiff_t)best;
}

/* Largest logit, written as std::max folds (a NaN is kept only if it comes first). */
static float max_logit(const struct smp_array *c) {
    float m = c->data[0].logit;
    if (!c->sorted)
        for (size_t i = 1; i < c->size; i++)
            if (m < c->data[i].logit)
                m = c->data[i].logit;
    return m;
}

/* Softmax in the candidates' order, then one uniform double u: the pick is the first index
 * whose running (unnormalized) sum reaches u * total, the sums kept in double as llama.cpp
 * does. A single candidate is picked without drawing, so the stream does not advance. */
static void stage_dist(struct smp_array *c, struct smp_mt19937 *rng) {
    if (c->size == 0) {
        c->selected = -1;
        return;
    }
    c->selected = 0;
    if (c->size == 1) {
        c->data[0].p = 1.0f;
        return;
    }
    const float max_l = max_logit(c);
    double sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    const double target = sum * smp_mt_canonical_double(rng);
    double run = 0.0;
    bool found = false;
    for (size_t i = 0; i < c->size; i++) {
        if (!found) {
            run += c->data[i].p;
            if (run >= target) {
                c->selected = (ptrdiff_t)i;
                found = true;
            }
        }
        c->data[i].p = (float)(c->data[i].p / sum);
    }
    if (!found) /* only reachable with NaN logits */
        c->selected = (ptrdiff_t)c->size - 1;
}

/* t <= 0: keep only the first maximum (the others become -inf, the size stays); else
 * divide every logit by t. */
static void stage_temp(struct smp_array *c, float t) {
    if (c->size == 0)
        return;
    if (t <= 0.0f) {
        size_t max_i = 0;
        float max_l = c->data[0].logit;
        for (size_t i = 1; i < c->size; i++) {
            if (c->data[i].logit > max_l) {
                c->data[max_i].logit = -INFINITY;
                max_i = i;
                max_l = c->data[i].logit;
            } else {
                c->data[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->size; i++)
        c->data[i].logit /= t;
}

void smp_top_k(struct smp_array *c, int32_t k, struct smp_scratch *s) {
    if (k <= 0)
        return; /* 0 = no limit */
    size_t n = (size_t)k < c->size ? (size_t)k : c->size;
    if (!c->sorted) {
        smp_partial_sort_inplace(c->data, c->size, n, s);
        c->sorted = true;
    }
    c->size = n;
}

/* Probabilities in float (llama_sampler_softmax_impl); do_sort first sorts everything. */
void smp_softmax(struct smp_array *c, bool do_sort, struct smp_scratch *s) {
    if (do_sort && !c->sorted) {
        smp_partial_sort_inplace(c->data, c->size, c->size, s);
        c->sorted = true;
    }
    const float max_l = max_logit(c);
    float sum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < c->size; i++)
        c->data[i].p /= sum;
}

/* Keep the shortest prefix (by descending logit) whose probability reaches p, and at least
 * min_keep. Large unsorted arrays first sort only their top 256 (into scratch) and sort
 * everything only when the prefix outgrows it; the tie order of each sort matters, so the
 * same sorts as llama.cpp run on the same inputs. */
static void stage_top_p(struct smp_array *c, float p, size_t min_keep, struct smp_scratch *s) {
    if (p >= 1.0f || c->size == 0)
        return;
    smp_softmax(c, false, s);
    size_t k = c->size;
    const struct smp_cand *pd = c->data;
    if (!c->sorted && c->size > 1024) {
        k = 256;
        smp_bucket_partial_sort(c->data, c->size, k, s);
        pd = s->tmp;
    } else if (!c->sorted) {
        smp_partial_sort_inplace(c->data, c->size, k, s);
        c->sorted = true;
    }
    float cum = 0.0f;
    size_t last = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += pd[i].p;
        if (cum >= p && i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
        if (!c->sorted && i == k - 1) { /* outgrew the top 256: sort everything */
            k = c->size;
            smp_bucket_partial_sort(c->data, c->size, k, s);
            pd = s->tmp;
        }
    }
    if (!c->sorted) {
        memcpy(c->data, s->tmp, last * sizeof *c->data);
        c->sorted = true;
    }
    c->size = last;
}

/* Keep candidates with logit >= max + log(p) (p_i >= p * p_max) in their order; when that
 * leaves fewer than min_keep, sort and keep the longer prefix that satisfies min_keep. */
static void stage_min_p(struct smp_array *c, float p, size_t min_keep, struct smp_scratch *s) {
    if (p <= 0.0f || c->size == 0)
        return;
    if (!c->sorted) {
        float max_l = -3.40282347e+38f; /* -FLT_MAX, as llama.cpp starts its fold */
        for (size_t i = 0; i < c->size; i++)
            if (max_l < c->data[i].logit)
                max_l = c->data[i].logit;
        const float min_logit = max_l + logf(p);
        size_t n_ok = 0;
        for (size_t i = 0; i < c->size; i++)
            n_ok += c->data[i].logit >= min_logit;
        if (n_ok > 0 && n_ok >= min_keep) {
            size_t j = 0; /* stable in-place compaction: no per-token allocation */
            for (size_t i = 0; i < c->size; i++)
                if (c->data[i].logit >= min_logit)
                    c->data[j++] = c->data[i];
            c->size = n_ok;
            return;
        }
        smp_partial_sort_inplace(c->data, c->size, c->size, s);
        c->sorted = true;
    }
    const float min_logit = c->data[0].logit + logf(p);
    size_t i = 1; /* the first candidate always stays */
    for (; i < c->size; i++)
        if (c->data[i].logit < min_logit && i >= min_keep)
            break;
    c->size = i;
}

/* ---- chain ------------------------------------------------------------------------------- */

enum ox_status ox_sampler_create(struct ox_sampler **out) {
    if (!out)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: create needs an out pointer");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    return OX_OK;
}

void ox_sampler_free(struct ox_sampler *s) {
    if (!s)
        return;
    for (int i = 0; i < s->n_stages; i++) {
        free(s->stages[i].rng);
        if (s->stages[i].ext)
            s->stages[i].ext->free(s->stages[i].ext);
    }
    free(s->stages);
    free(s->cur);
    free(s->scratch.tmp);
    free(s->scratch.bucket);
    free(s);
}

static enum ox_status push_stage(struct ox_sampler *s, struct stage st) {
    if (s->n_stages == s->cap_stages) {
        int cap = s->cap_stages ? s->cap_stages * 2 : 8;
        struct stage *p = realloc(s->stages, (size_t)cap * sizeof *p);
        if (!p) {
            free(st.rng);
            if (st.ext)
                st.ext->free(st.ext);
            return ox_fail(OX_ERR_OOM, "sampler: out of memory");
        }
        s->stages = p;
        s->cap_stages = cap;
    }
    s->stages[s->n_stages++] = st;
    return OX_OK;
}

enum ox_status ox_sampler_add_greedy(struct ox_sampler *s) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_greedy on a NULL sampler");
    return push_stage(s, (struct stage){.kind = STAGE_GREEDY});
}

/* Every seed is used as given (llama.cpp's LLAMA_DEFAULT_SEED = "pick one at random" has no
 * counterpart here: callers that want randomness pass their own seed). */
enum ox_status ox_sampler_add_dist(struct ox_sampler *s, uint32_t seed) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_dist on a NULL sampler");
    struct stage st = {.kind = STAGE_DIST, .seed = seed, .rng = malloc(sizeof(struct smp_mt19937))};
    if (!st.rng)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    smp_mt_seed(st.rng, seed);
    return push_stage(s, st);
}

/* temp <= 0 is valid (keep only the maximum, as llama.cpp); NaN and infinities are not. */
enum ox_status ox_sampler_add_temp(struct ox_sampler *s, float temp) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_temp on a NULL sampler");
    if (!isfinite(temp))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: temperature %g is not finite", (double)temp);
    return push_stage(s, (struct stage){.kind = STAGE_TEMP, .f = temp});
}

/* k = 0 means no limit (llama.cpp's "empty" top-k); k > n_vocab keeps everything. */
enum ox_status ox_sampler_add_top_k(struct ox_sampler *s, int32_t k) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_top_k on a NULL sampler");
    if (k < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: top-k %d is negative", (int)k);
    return push_stage(s, (struct stage){.kind = STAGE_TOP_K, .k = k});
}

static enum ox_status check_p(struct ox_sampler *s, const char *what, float p) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_%s on a NULL sampler", what);
    if (!(p >= 0.0f && p <= 1.0f)) /* also rejects NaN */
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: %s p = %g is outside [0, 1]", what, (double)p);
    return OX_OK;
}

/* p = 1 keeps everything (llama.cpp's empty top-p); p = 0 keeps max(1, min_keep). */
enum ox_status ox_sampler_add_top_p(struct ox_sampler *s, float p, size_t min_keep) {
    OX_TRY(check_p(s, "top_p", p));
    return push_stage(s, (struct stage){.kind = STAGE_TOP_P, .f = p, .min_keep = min_keep});
}

/* p = 0 keeps everything (llama.cpp's empty min-p); p = 1 keeps the maximal logits. */
enum ox_status ox_sampler_add_min_p(struct ox_sampler *s, float p, size_t min_keep) {
    OX_TRY(check_p(s, "min_p", p));
    return push_stage(s, (struct stage){.kind = STAGE_MIN_P, .f = p, .min_keep = min_keep});
}

/* Candidate and scratch buffers grow only when n_vocab does, so steady decoding never
 * allocates. */
static bool reserve(struct ox_sampler *s, size_t n) {
    if (n <= s->scratch.cap)
        return true;
    struct smp_cand *cur = realloc(s->cur, n * sizeof *cur);
    if (cur)
        s->cur = cur;
    struct smp_cand *tmp = realloc(s->scratch.tmp, n * sizeof *tmp);
    if (tmp)
        s->scratch.tmp = tmp;
    int32_t *bucket = realloc(s->scratch.bucket, n * sizeof *bucket);
    if (bucket)
        s->scratch.bucket = bucket;
    if (!cur || !tmp || !bucket)
        return false;
    s->scratch.cap = n;
    return true;
}

static void run_stage(struct ox_sampler *s, const struct stage *st, struct smp_array *c) {
    switch (st->kind) {
    case STAGE_GREEDY: stage_greedy(c); break;
    case STAGE_DIST: stage_dist(c, st->rng); break;
    case STAGE_TEMP:
        if (st->f != 1.0f) /* llama.cpp makes temp 1 an empty stage */
            stage_temp(c, st->f);
        break;
    case STAGE_TOP_K: smp_top_k(c, st->k, &s->scratch); break;
    case STAGE_TOP_P: stage_top_p(c, st->f, st->min_keep, &s->scratch); break;
    case STAGE_MIN_P: stage_min_p(c, st->f, st->min_keep, &s->scratch); break;
    case STAGE_EXT: st->ext->apply(st->ext, c, &s->scratch); break;
    }
}

static bool is_constraint(const struct stage *st) {
    return st->kind == STAGE_EXT && st->ext->allows;
}

/* Where a chain that is only after its pick can skip the candidates array: the stages before
 * the first that changes anything leave it as the logits are, so a greedy or top-k (k <= 128,
 * smp_partial_sort's range) stage there can read the logits straight away. A 128k vocabulary's
 * array took about 0.15 ms a sample to write and cut, which a server's 128 streams paid every
 * step. Returns the index of the first stage still to run (0: the array as usual). */
static int direct_start(struct ox_sampler *s, const float *logits, int32_t n_vocab,
                        bool skip_constraints, struct smp_array *c) {
    int i = 0;
    for (; i < s->n_stages; i++) {
        const struct stage *st = &s->stages[i];
        bool passes = (skip_constraints && is_constraint(st)) ||
                      (st->kind == STAGE_EXT && st->ext->inert && st->ext->inert(st->ext)) ||
                      (st->kind == STAGE_TOP_K && st->k <= 0);
        if (!passes)
            break;
    }
    if (i == s->n_stages)
        return 0;
    const struct stage *st = &s->stages[i];
    if (st->kind == STAGE_GREEDY) { /* stage_greedy's argmax: the first of equal maxima */
        int32_t best = 0;
        for (int32_t t = 1; t < n_vocab; t++)
            if (logits[t] > logits[best])
                best = t;
        s->cur[0] = (struct smp_cand){.id = best, .logit = logits[best], .p = 0.0f};
        *c = (struct smp_array){.data = s->cur, .size = 1, .selected = 0};
        return i + 1;
    }
    if (st->kind == STAGE_TOP_K && st->k <= 128 && st->k < n_vocab) {
        smp_top_k_direct(logits, (size_t)n_vocab, (size_t)st->k, s->cur);
        *c = (struct smp_array){
            .data = s->cur, .size = (size_t)st->k, .selected = -1, .sorted = true};
        return i + 1;
    }
    return 0;
}

/* Like llama_sampler_sample: candidates (id, logit, 0) in id order, unsorted, then every
 * stage in turn (constraint stages too, unless skip_constraints). direct: the candidates
 * another stage never sees may be left out (direct_start), for callers that want the pick. */
static enum ox_status apply_chain(struct ox_sampler *s, const float *logits, int32_t n_vocab,
                                  bool skip_constraints, bool direct, const struct smp_cand **cands,
                                  size_t *n_cands, ptrdiff_t *selected) {
    if (!s || !logits || n_vocab < 1)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: need a sampler, logits and n_vocab >= 1");
    if (!reserve(s, (size_t)n_vocab))
        return ox_fail(OX_ERR_OOM, "sampler: out of memory for %d candidates", (int)n_vocab);
    struct smp_array c = {.data = s->cur, .size = (size_t)n_vocab, .selected = -1};
    int first = direct ? direct_start(s, logits, n_vocab, skip_constraints, &c) : 0;
    if (first == 0)
        for (int32_t i = 0; i < n_vocab; i++)
            s->cur[i] = (struct smp_cand){.id = i, .logit = logits[i], .p = 0.0f};
    for (int i = first; i < s->n_stages; i++)
        if (!skip_constraints || !is_constraint(&s->stages[i]))
            run_stage(s, &s->stages[i], &c);
    *cands = c.data;
    *n_cands = c.size;
    *selected = c.selected;
    return OX_OK;
}

enum ox_status smp_sampler_apply(struct ox_sampler *s, const float *logits, int32_t n_vocab,
                                 const struct smp_cand **cands, size_t *n_cands,
                                 ptrdiff_t *selected) {
    return apply_chain(s, logits, n_vocab, false, false, cands, n_cands, selected);
}

static bool has_constraints(const struct ox_sampler *s) {
    for (int i = 0; i < s->n_stages; i++)
        if (is_constraint(&s->stages[i]))
            return true;
    return false;
}

/* Whether every constraint stage allows token. */
static bool constraints_allow(struct ox_sampler *s, int32_t token) {
    for (int i = 0; i < s->n_stages; i++)
        if (is_constraint(&s->stages[i]) && !s->stages[i].ext->allows(s->stages[i].ext, token))
            return false;
    return true;
}

/* The header's contract is stricter than llama.cpp's (which asserts on a missing pick and
 * would return whatever index a picker left behind before later filters): the last stage
 * must be the picker, else -1. */
ox_token ox_sampler_sample(struct ox_sampler *s, const float *logits, int32_t n_vocab) {
    if (!s || !logits || n_vocab < 1 || s->n_stages == 0)
        return -1;
    const struct stage *last = &s->stages[s->n_stages - 1];
    if (last->kind != STAGE_GREEDY && last->kind != STAGE_DIST &&
        !(last->kind == STAGE_EXT && last->ext->picks))
        return -1;
    const struct smp_cand *cands;
    size_t n;
    ptrdiff_t sel;
    bool constrained = has_constraints(s);
    if (constrained) { /* constraints cost far more than the rest: try without them first */
        if (apply_chain(s, logits, n_vocab, true, true, &cands, &n, &sel) != OX_OK)
            return -1;
        if (sel >= 0 && (size_t)sel < n && constraints_allow(s, cands[sel].id))
            return cands[sel].id;
    }
    if (apply_chain(s, logits, n_vocab, false, true, &cands, &n, &sel) != OX_OK)
        return -1;
    if (sel < 0 || (size_t)sel >= n)
        return -1;
    return cands[sel].id;
}

void ox_sampler_reset(struct ox_sampler *s) {
    if (!s)
        return;
    for (int i = 0; i < s->n_stages; i++) {
        if (s->stages[i].kind == STAGE_DIST)
            smp_mt_seed(s->stages[i].rng, s->stages[i].seed);
        if (s->stages[i].ext && s->stages[i].ext->reset)
            s->stages[i].ext->reset(s->stages[i].ext);
    }
}

/* Every stage that keeps a history sees the token (llama_sampler_accept on the chain); a
 * prompt token skips the constraints (llama.cpp's accept_grammar = false). */
static enum ox_status accept(struct ox_sampler *s, ox_token token, bool constraints) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: accept on a NULL sampler");
    if (token < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: accept of negative token %d", (int)token);
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].ext && s->stages[i].ext->accept &&
            (constraints || !is_constraint(&s->stages[i])))
            s->stages[i].ext->accept(s->stages[i].ext, token);
    return OX_OK;
}

enum ox_status ox_sampler_accept(struct ox_sampler *s, ox_token token) {
    return accept(s, token, true);
}

enum ox_status ox_sampler_accept_prompt(struct ox_sampler *s, ox_token token) {
    return accept(s, token, false);
}

/* Takes ownership of e (freed here on failure). */
enum ox_status smp_sampler_push_ext(struct ox_sampler *s, struct smp_ext *e) {
    return push_stage(s, (struct stage){.kind = STAGE_EXT, .ext = e});
}

/* ---- state ------------------------------------------------------------------------------- */

/* "OXSS", a version, the stage count, then per stage its kind, its name (a stage with state),
 * and its state's bytes behind their count. */
static const uint32_t STATE_MAGIC = 0x5353584fu, STATE_VERSION = 1;

static void save_all(const struct ox_sampler *s, struct smp_bytes *b) {
    uint32_t head[3] = {STATE_MAGIC, STATE_VERSION, (uint32_t)s->n_stages};
    smp_put(b, head, sizeof head);
    for (int i = 0; i < s->n_stages; i++) {
        const struct stage *st = &s->stages[i];
        const char *name = st->ext && st->ext->save ? st->ext->name : "";
        uint8_t kind = (uint8_t)st->kind, len = (uint8_t)strlen(name);
        smp_put(b, &kind, 1), smp_put(b, &len, 1), smp_put(b, name, len);
        size_t at = b->n;
        uint64_t n = 0;
        smp_put(b, &n, sizeof n); /* filled in below */
        if (st->kind == STAGE_DIST)
            smp_mt_save(st->rng, b);
        else if (st->ext && st->ext->save)
            st->ext->save(st->ext, b);
        n = b->n - at - sizeof n;
        if (b->buf && b->n <= b->cap)
            memcpy(b->buf + at, &n, sizeof n);
    }
}

/* Each stage's state from b, which must be of this chain's shape; false at the first stage
 * whose bytes are not (the stages before it are loaded already). */
static bool load_all(struct ox_sampler *s, struct smp_bytes *b) {
    uint32_t head[3];
    if (!smp_get(b, head, sizeof head) || head[0] != STATE_MAGIC || head[1] != STATE_VERSION ||
        head[2] != (uint32_t)s->n_stages)
        return false;
    for (int i = 0; i < s->n_stages; i++) {
        struct stage *st = &s->stages[i];
        const char *name = st->ext && st->ext->save ? st->ext->name : "";
        uint8_t kind, len;
        char got[256];
        uint64_t n;
        if (!smp_get(b, &kind, 1) || kind != (uint8_t)st->kind || !smp_get(b, &len, 1) ||
            len != strlen(name) || !smp_get(b, got, len) || memcmp(got, name, len) ||
            !smp_get(b, &n, sizeof n) || n > b->in_n - b->at)
            return false;
        struct smp_bytes one = {.in = b->in + b->at, .in_n = (size_t)n};
        bool ok = st->kind == STAGE_DIST     ? smp_mt_load(st->rng, &one)
                  : st->ext && st->ext->load ? st->ext->load(st->ext, &one)
                                             : true;
        if (!ok || one.at != one.in_n) /* every byte of its state, no more */
            return false;
        b->at += (size_t)n;
    }
    return b->at == b->in_n;
}

size_t ox_sampler_state_size(const struct ox_sampler *s) {
    struct smp_bytes b = {0};
    if (s)
        save_all(s, &b);
    return b.n;
}

enum ox_status ox_sampler_state_save(const struct ox_sampler *s, uint8_t *buf, size_t cap,
                                     size_t *written) {
    if (!s || !buf)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: state_save needs a sampler and a buffer");
    struct smp_bytes b = {.buf = buf, .cap = cap};
    save_all(s, &b);
    if (b.n > cap)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: its state takes %zu bytes, the buffer %zu",
                       b.n, cap);
    if (written)
        *written = b.n;
    return OX_OK;
}

enum ox_status ox_sampler_state_load(struct ox_sampler *s, const uint8_t *buf, size_t size) {
    if (!s || !buf)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: state_load needs a sampler and bytes");
    size_t keep_n = ox_sampler_state_size(s);
    uint8_t *keep = malloc(keep_n); /* the chain as it is, put back if the load fails */
    if (!keep)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    ox_sampler_state_save(s, keep, keep_n, NULL);
    struct smp_bytes b = {.in = buf, .in_n = size};
    bool ok = load_all(s, &b);
    if (!ok) {
        struct smp_bytes back = {.in = keep, .in_n = keep_n};
        load_all(s, &back);
    }
    free(keep);
    return ok ? OX_OK
              : ox_fail(OX_ERR_FORMAT, "sampler: not a state of this sampler chain (its stages, "
                                       "in order, or their bytes differ)");
}