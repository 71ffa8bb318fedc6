/* dry.c: DRY ("don't repeat yourself"): penalize tokens that would extend a repeat of the
 * recent context, growing exponentially with the repeat's length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sample/sample.h"

/* A sequence breaker: a head token and the tail that must follow it (often empty). */
struct breaker {
    int32_t head;
    size_t off, len; /* tail = pool[off .. off + len) */
};

struct tok_len {
    int32_t tok;
    int len;
};

struct dry {
    struct smp_ext base;
    float mult, dbase;
    int32_t allowed, last_n;
    struct smp_ring hist;
    struct breaker *br; /* [n_br] sorted by head */
    size_t n_br;
    int32_t *pool;
    int *repeat;            /* [last_n] suffix-repeat length ending at each position */
    struct tok_len *maxrep; /* [last_n] longest repeat each next token would extend */
};

static int cmp_breaker(const void *a, const void *b) {
    int32_t x = ((const struct breaker *)a)->head, y = ((const struct breaker *)b)->head;
    return (x > y) - (x < y);
}

static int cmp_tok_len(const void *a, const void *b) {
    const struct tok_len *x = a, *y = b;
    if (x->tok != y->tok)
        return (x->tok > y->tok) - (x->tok < y->tok);
    return (x->len < y->len) - (x->len > y->len); /* longest first */
}

/* The breakers whose head is t: [*lo, return). */
static size_t breakers_of(const struct dry *d, int32_t t, size_t *lo) {
    size_t l = 0, h = d->n_br;
    while (l < h) {
        size_t mid = l + (h - l) / 2;
        if (d->br[mid].head < t)
            l = mid + 1;
        else
            h = mid;
    }
    *lo = l;
    while (h < d->n_br && d->br[h].head == t)
        h++;
    return h;
}

/* Step 1: the nearest breaker in the context caps how far back a repeat may reach. */
static int rep_limit_of(const struct dry *d, int n) {
    for (int i = 0; i < n; i++) {
        size_t lo, hi = breakers_of(d, smp_ring_rat(&d->hist, (size_t)i), &lo);
        int longest = -1;
        for (size_t b = lo; b < hi; b++) {
            const int seq_len = (int)d->br[b].len;
            if (seq_len <= longest || seq_len > i)
                continue;
            bool match = true; /* the tail precedes the head in time order */
            for (int o = 0; o < seq_len && match; o++)
                match = d->pool[d->br[b].off + (size_t)o] ==
                        smp_ring_rat(&d->hist, (size_t)(i - o - 1));
            if (match)
                longest = seq_len;
        }
        if (longest >= 0)
            return i - longest;
    }
    return n;
}

/* Step 2, the Z-algorithm run backwards: repeat[last - k] = how many of the newest tokens
 * also occur ending k tokens earlier (capped at rep_limit). Linear in n. */
static void repeat_counts(struct dry *d, int n, int rep_limit) {
    const struct smp_ring *h = &d->hist;
    const int last = n - 1;
    int rt = 0, lt = 0;
    memset(d->repeat, 0, (size_t)n * sizeof *d->repeat);
    for (int k = 1; k < n; k++) {
        if (k > rt) { /* outside the current Z-box: compare naively */
            int m = 0;
            while (m + k < n && smp_ring_rat(h, (size_t)m) == smp_ring_rat(h, (size_t)(m + k)))
                m++;
            d->repeat[last - k] = m < rep_limit ? m : rep_limit;
            if (m > 0) {
                lt = k;
                rt = k + m - 1;
            }
        } else { /* inside: reuse the pair's value unless it reaches the box's edge */
            const int p = k - lt, right_len = rt - k + 1;
            if (d->repeat[last - p] < right_len) {
                const int m = d->repeat[last - p];
                d->repeat[last - k] = m < rep_limit ? m : rep_limit;
            } else {
                int i = rt + 1;
                while (i < n && smp_ring_rat(h, (size_t)i) == smp_ring_rat(h, (size_t)(i - k)))
                    i++;
                d->repeat[last - k] = i - k < rep_limit ? i - k : rep_limit;
                lt = k;
                rt = i - 1;
            }
        }
    }
}

/* Step 3: each repeat of allowed length or more would be extended by the token that followed
 * it; keep the longest per token, sorted by token for lookup. Returns how many tokens. */
static size_t max_repeats(struct dry *d, int n) {
    size_t m = 0;
    for (int i = 0; i < n - 1; i++)
        if (d->repeat[i] >= d->allowed)
            d->maxrep[m++] =
                (struct tok_len){smp_ring_rat(&d->hist, (size_t)(n - 2 - i)), d->repeat[i]};
    qsort(d->maxrep, m, sizeof *d->maxrep, cmp_tok_len);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (u == 0 || d->maxrep[u - 1].tok != d->maxrep[i].tok)
            d->maxrep[u++] = d->maxrep[i];
    return u;
}

static const struct tok_len *find_rep(const struct tok_len *a, size_t n, int32_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid].tok < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo].tok == t ? &a[lo] : NULL;
}

/* Step 4: logit -= mult * base^(len - allowed), the exponent capped so the power stays a
 * finite float; single-token breakers are never penalized. The power is taken in double and
 * the product rounded to float, as llama.cpp's std::pow(float, int). */
static void dry_penalize(struct dry *d, struct smp_array *c, size_t n_rep) {
    int max_exp = 0;
    if (d->dbase > 1.000001f)
        max_exp = (int)(88.7228391f / logf(d->dbase));
    for (size_t i = 0; i < c->size; i++) {
        const struct tok_len *r = find_rep(d->maxrep, n_rep, c->data[i].id);
        if (!r)
            continue;
        size_t lo, hi = breakers_of(d, c->data[i].id, &lo);
        bool single = false;
        for (size_t b = lo; b < hi && !single; b++)
            single = d->br[b].len == 0;
        if (single)
            continue;
        int e = r->len - d->allowed;
        if (max_exp > 0 && e > max_exp)
            e = max_exp;
        const float penalty = (float)((double)d->mult * pow((double)d->dbase, (double)e));
        c->data[i].logit -= penalty;
    }
}

static void dry_apply(struct smp_ext *e, struct smp_array *c, struct smp_scratch *s) {
    (void)s;
    struct dry *d = (struct dry *)e;
    if (d->mult == 0.0f || d->dbase < 1.0f || d->last_n == 0)
        return;
    const int n = (int)d->hist.n < d->last_n ? (int)d->hist.n : d->last_n;
    if (n <= d->allowed)
        return;
    const int rep_limit = rep_limit_of(d, n);
    if (rep_limit < d->allowed)
        return;
    repeat_counts(d, n, rep_limit);
    dry_penalize(d, c, max_repeats(d, n));
    c->sorted = false;
}

static void dry_accept(struct smp_ext *e, int32_t token) {
    struct dry *d = (struct dry *)e;
    if (d->mult == 0.0f || d->dbase < 1.0f || d->last_n == 0)
        return;
    smp_ring_push(&d->hist, token);
}

static void dry_reset(struct smp_ext *e) {
    struct dry *d = (struct dry *)e;
    d->hist.n = 0;
    d->hist.first = 0;
}

static void dry_free(struct smp_ext *e) {
    struct dry *d = (struct dry *)e;
    free(d->hist.tok);
    free(d->br);
    free(d->pool);
    free(d->repeat);
    free(d->maxrep);
    free(d);
}

static enum ox_status check_dry(struct ox_sampler *s, float mult, float base, int32_t allowed,
                                int32_t last_n) {
    if (!s)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: add_dry on a NULL sampler");
    if (!(mult >= 0.0f) || !isfinite(mult) || !isfinite(base))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: dry multiplier %g / base %g is invalid",
                       (double)mult, (double)base);
    if (allowed < 0 || last_n < 0)
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: dry allowed_length %d / last_n %d < 0",
                       (int)allowed, (int)last_n);
    return OX_OK;
}

/* Copies the breakers (head, tail...) into one pool sorted by head; empty ones are skipped. */
static bool copy_breakers(struct dry *d, const int32_t *const *br, const size_t *lens, size_t n) {
    size_t n_pool = 0;
    for (size_t i = 0; i < n; i++)
        n_pool += lens[i] ? lens[i] - 1 : 0;
    d->br = malloc((n ? n : 1) * sizeof *d->br);
    d->pool = malloc((n_pool ? n_pool : 1) * sizeof *d->pool);
    if (!d->br || !d->pool)
        return false;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (!lens[i])
            continue;
        d->br[d->n_br++] = (struct breaker){.head = br[i][0], .off = off, .len = lens[i] - 1};
        memcpy(d->pool + off, br[i] + 1, (lens[i] - 1) * sizeof *d->pool);
        off += lens[i] - 1;
    }
    qsort(d->br, d->n_br, sizeof *d->br, cmp_breaker);
    return true;
}

/* Its state is the history: the repeat tables are worked out anew on every call. */
static void dry_save(struct smp_ext *e, struct smp_bytes *b) {
    smp_ring_save(&((struct dry *)e)->hist, b);
}

static bool dry_load(struct smp_ext *e, struct smp_bytes *b) {
    return smp_ring_load(&((struct dry *)e)->hist, b);
}

enum ox_status smp_sampler_add_dry_tokens(struct ox_sampler *s, float multiplier, float base,
                                          int32_t allowed_length, int32_t penalty_last_n,
                                          const int32_t *const *breakers, const size_t *lens,
                                          size_t n_breakers) {
    OX_TRY(check_dry(s, multiplier, base, allowed_length, penalty_last_n));
    if (n_breakers && (!breakers || !lens))
        return ox_fail(OX_ERR_INVALID_ARG, "sampler: dry breakers list is NULL");
    for (size_t i = 0; i < n_breakers; i++)
        if (lens[i] && !breakers[i])
            return ox_fail(OX_ERR_INVALID_ARG, "sampler: dry breaker %zu is NULL", i);
    struct dry *d = calloc(1, sizeof *d);
    if (!d)
        return ox_fail(OX_ERR_OOM, "sampler: out of memory");
    d->base = (struct smp_ext){.apply = dry_apply,
                               .accept = dry_accept,
                               .reset = dry_reset,
                               .free = dry_free,
                               .save = dry_save,
                               .load = dry_load,
                               .name = "dry"};
    d->mult = multiplier;
    d->dbase = base;
    d->allowed = allowed_length;
    d->last_n = penalty_last_n;
    const size_t cap = penalty_last_n ? (size_t)penalty_last_n : 1;
    d->repeat = malloc(cap * sizeof *d->repeat);
    d->maxrep = malloc(cap * sizeof *d->maxrep);
    if (!d->repeat || !d->maxrep || !smp_ring_init(&d->hist, (size_t)penalty_last_n) ||
        !copy_breakers(d, breakers, lens, n_breakers)) {
        dry_free(&d->base);
        return ox_fail(OX_ERR_OOM, "sampler: out of memory for dry");
    }
    return smp_sampler_push_ext(s, &d->base);
}
