/* iq_grid_index.c: builds the i-quant grid maps and neighbour lists on first use, and the
 * snap-to-grid scale search shared by the iq2 and iq3 quantizers. */
#define _POSIX_C_SOURCE 200809L
#include "quant/iq_grid_index.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "quant/iq_tables.h"
#include "quant/quantize_util.h"

/* ---- building the index ------------------------------------------------------------------ */

/* Key space: the 2-bit quantizers clamp levels to 0..2, so the largest key is 0xaaaa (ggml
 * sizes its map 43692 and also builds lists for keys holding level 3, which are never looked
 * up; only the 3^8 reachable keys get one here, the same lists). 3-bit keys use all 4096. */
#define KEYS_2BIT 0xaaab
#define KEYS_3BIT 4096

/* Neighbour-list storage, exactly what the fixed grids need (a count + the points, for every
 * reachable key that is not a grid point); build() checks it fills each to the last slot.
 * Static, so building cannot fail; about 1.5 MB in all, touched only for grids in use. */
#define SLOTS_IQ2XXS 119462
#define SLOTS_IQ2XS  187770
#define SLOTS_IQ2S   50253
#define SLOTS_IQ1S   332234
#define SLOTS_IQ3XXS 22825
#define SLOTS_IQ3S   28317

static uint8_t levels_iq2xxs[256 * 8], levels_iq2xs[512 * 8], levels_iq2s[1024 * 8];
static uint8_t levels_iq1s[2048 * 8], levels_iq3xxs[256 * 4], levels_iq3s[512 * 4];
static int32_t map_iq2xxs[KEYS_2BIT], map_iq2xs[KEYS_2BIT], map_iq2s[KEYS_2BIT];
static int32_t map_iq1s[KEYS_2BIT], map_iq3xxs[KEYS_3BIT], map_iq3s[KEYS_3BIT];
static uint16_t nb_iq2xxs[SLOTS_IQ2XXS], nb_iq2xs[SLOTS_IQ2XS], nb_iq2s[SLOTS_IQ2S];
static uint16_t nb_iq1s[SLOTS_IQ1S], nb_iq3xxs[SLOTS_IQ3XXS], nb_iq3s[SLOTS_IQ3S];

/* What each grid is built from. The stored tables hold the decoded magnitudes (iq1s: signed
 * bytes -1/0/+1); value_of_level lists them by level, so a byte's position there is its level. */
struct grid_source {
    const void *table; /* uint64_t[] (dim 8) or uint32_t[] (dim 4) */
    int n_points, dim, bits, n_keys, n_slots;
    int n_nearest; /* distinct nearest distances a neighbour list covers (ggml's nwant) */
    uint8_t value_of_level[8];
    int n_levels;
    uint8_t *levels;
    int32_t *map;
    uint16_t *neighbours;
};

/* One grid per entry: clang-format would put every field on its own line. */
/* clang-format off */
static const struct grid_source sources[IQ_GRID_COUNT] = {
    [IQ_GRID_IQ2XXS] = {iq2xxs_grid, 256, 8, 2, KEYS_2BIT, SLOTS_IQ2XXS, 2, {0x08, 0x19, 0x2b}, 3,
                        levels_iq2xxs, map_iq2xxs, nb_iq2xxs},
    [IQ_GRID_IQ2XS] = {iq2xs_grid, 512, 8, 2, KEYS_2BIT, SLOTS_IQ2XS, 2, {0x08, 0x19, 0x2b}, 3,
                       levels_iq2xs, map_iq2xs, nb_iq2xs},
    [IQ_GRID_IQ2S] = {iq2s_grid, 1024, 8, 2, KEYS_2BIT, SLOTS_IQ2S, 1, {0x08, 0x19, 0x2b}, 3,
                      levels_iq2s, map_iq2s, nb_iq2s},
    [IQ_GRID_IQ1S] = {iq1s_grid, 2048, 8, 2, KEYS_2BIT, SLOTS_IQ1S, 3, {0xff, 0x00, 0x01}, 3,
                      levels_iq1s, map_iq1s, nb_iq1s},
    [IQ_GRID_IQ3XXS] = {iq3xxs_grid, 256, 4, 3, KEYS_3BIT, SLOTS_IQ3XXS, 2,
                        {4, 12, 20, 28, 36, 44, 52, 62}, 8, levels_iq3xxs, map_iq3xxs, nb_iq3xxs},
    [IQ_GRID_IQ3S] = {iq3s_grid, 512, 4, 3, KEYS_3BIT, SLOTS_IQ3S, 3, {1, 3, 5, 7, 9, 11, 13, 15},
                      8, levels_iq3s, map_iq3s, nb_iq3s},
};
/* clang-format on */

static struct iq_grid grids[IQ_GRID_COUNT];

/* Byte e of grid point p, read by shifts (host byte order does not matter). */
static unsigned stored_byte(const struct grid_source *s, int p, int e) {
    if (s->dim == 8)
        return (unsigned)(((const uint64_t *)s->table)[p] >> (8 * e)) & 0xff;
    return (unsigned)(((const uint32_t *)s->table)[p] >> (8 * e)) & 0xff;
}

/* Levels of every point from the stored magnitudes; each point's key maps to it. */
static void build_levels(const struct grid_source *s) {
    for (int k = 0; k < s->n_keys; k++)
        s->map[k] = INT32_MIN; /* unreachable keys keep this; build() lists the others */
    for (int p = 0; p < s->n_points; p++) {
        unsigned key = 0;
        for (int e = 0; e < s->dim; e++) {
            int l = 0;
            while (l < s->n_levels && s->value_of_level[l] != stored_byte(s, p, e))
                l++;
            assert(l < s->n_levels); /* the grids only hold these magnitudes */
            s->levels[p * s->dim + e] = (uint8_t)l;
            key |= (unsigned)l << (s->bits * e);
        }
        s->map[key] = p;
    }
}

/* True when every element of key is a level the quantizers can produce. */
static bool key_reachable(const struct grid_source *s, unsigned key) {
    for (int e = 0; e < s->dim; e++)
        if (((key >> (s->bits * e)) & ((1u << s->bits) - 1)) >= (unsigned)s->n_levels)
            return false;
    return true;
}

/* Writes key's neighbour list at out: every grid point whose distance is one of the
 * n_nearest smallest distinct distances, ordered by (distance, index) as ggml's qsort of
 * (distance, index) pairs orders them. Distances are in level units (ggml's lattice distance
 * is 4x this, the same order). Returns the slots used (count + points). */
static int write_neighbours(const struct grid_source *s, unsigned key, uint16_t *out, int room) {
    uint8_t dist[2048];
    int hist[256] = {0};
    int lk[8];
    for (int e = 0; e < s->dim; e++)
        lk[e] = (int)(key >> (s->bits * e)) & ((1 << s->bits) - 1);
    for (int p = 0; p < s->n_points; p++) {
        const uint8_t *lp = s->levels + p * s->dim;
        int d2 = 0;
        for (int e = 0; e < s->dim; e++)
            d2 += (lp[e] - lk[e]) * (lp[e] - lk[e]);
        dist[p] = (uint8_t)d2;
        hist[d2]++;
    }
    /* the cut-off distance, and where each distance's points start in the list */
    int start[256], n = 0, found = 0, cut = 255;
    for (int d = 0; d < 256; d++) {
        start[d] = n;
        if (hist[d] && found < s->n_nearest) {
            n += hist[d];
            cut = d;
            found++;
        }
    }
    assert(n + 1 <= room);
    (void)room;
    out[0] = (uint16_t)n;
    for (int p = 0; p < s->n_points; p++)
        if (dist[p] <= cut)
            out[1 + start[dist[p]]++] = (uint16_t)p;
    return n + 1;
}

static void build(enum iq_grid_id id) {
    const struct grid_source *s = &sources[id];
    build_levels(s);
    int used = 0;
    for (unsigned key = 0; key < (unsigned)s->n_keys; key++) {
        if (s->map[key] >= 0 || !key_reachable(s, key))
            continue;
        s->map[key] = -(1 + used);
        used += write_neighbours(s, key, s->neighbours + used, s->n_slots - used);
    }
    assert(used == s->n_slots); /* the storage is sized for exactly these grids */
    grids[id] = (struct iq_grid){.n_points = s->n_points,
                                 .dim = s->dim,
                                 .bits = s->bits,
                                 .levels = s->levels,
                                 .map = s->map,
                                 .neighbours = s->neighbours};
}

/* pthread_once takes no argument: one trampoline per grid. */
#define ONCE_(NAME)                                                                                \
    static pthread_once_t once_##NAME = PTHREAD_ONCE_INIT;                                         \
    static void build_##NAME(void) {                                                               \
        build(IQ_GRID_##NAME);                                                                     \
    }
ONCE_(IQ2XXS)
ONCE_(IQ2XS)
ONCE_(IQ2S)
ONCE_(IQ1S)
ONCE_(IQ3XXS)
ONCE_(IQ3S)
#undef ONCE_

const struct iq_grid *iq_grid_get(enum iq_grid_id id) {
    switch (id) {
    case IQ_GRID_IQ2XXS: pthread_once(&once_IQ2XXS, build_IQ2XXS); break;
    case IQ_GRID_IQ2XS: pthread_once(&once_IQ2XS, build_IQ2XS); break;
    case IQ_GRID_IQ2S: pthread_once(&once_IQ2S, build_IQ2S); break;
    case IQ_GRID_IQ1S: pthread_once(&once_IQ1S, build_IQ1S); break;
    case IQ_GRID_IQ3XXS: pthread_once(&once_IQ3XXS, build_IQ3XXS); break;
    case IQ_GRID_IQ3S: pthread_once(&once_IQ3S, build_IQ3S); break;
    default: return NULL;
    }
    return &grids[id];
}

/* ---- searching it ------------------------------------------------------------------------ */

/* Among the neighbours of key, the point nearest to x at this scale by
 * sum w[e] * (scale*(2l+1) - x[e])^2 (first best wins); writes its levels to L, returns it.
 * ggml's iq2_find_best_neighbour / iq3_find_best_neighbour. */
static int grid_nearest(const struct iq_grid *g, unsigned key, const float *x, const float *w,
                        float scale, int8_t *L) {
    const uint16_t *nb = iq_grid_neighbours(g, key);
    float best_d2 = FLT_MAX;
    int best = -1;
    for (int j = 1; j <= nb[0]; j++) {
        const uint8_t *lp = g->levels + nb[j] * g->dim;
        float d2 = 0;
        for (int e = 0; e < g->dim; e++) {
            const float q = (float)(2 * lp[e] + 1);
            const float diff = scale * q - x[e];
            d2 += w[e] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    /* ggml asserts here; only NaN or infinite distances leave no winner. Keep the first
     * neighbour then, so the output stays a valid grid point. */
    if (best < 0)
        best = nb[1];
    for (int e = 0; e < g->dim; e++)
        L[e] = (int8_t)g->levels[best * g->dim + e];
    return best;
}

/* |x| of each group of 8 into xval and its negative elements as a bit mask into signs[group].
 * With even_parity (formats that store 7 sign bits and imply the 8th), a group with an odd
 * count of negatives keeps the sign of its least important element (smallest weight * x^2,
 * first wins) wrong instead: xval there is -|x| and its bit is toggled. */
static void fold_signs(const float *x, const float *weight, int n, bool even_parity, float *xval,
                       uint8_t *signs) {
    for (int k = 0; k < n / 8; k++) {
        const float *xk = x + 8 * k;
        float *vk = xval + 8 * k;
        unsigned s = 0;
        int n_neg = 0;
        for (int i = 0; i < 8; i++) {
            if (xk[i] >= 0) {
                vk[i] = xk[i];
            } else {
                vk[i] = -xk[i];
                s |= 1u << i;
                n_neg++;
            }
        }
        if (even_parity && n_neg % 2) {
            const float *wk = weight + 8 * k;
            int imin = 0;
            float min = wk[0] * xk[0] * xk[0];
            for (int i = 1; i < 8; i++) {
                const float ax = wk[i] * xk[i] * xk[i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            vk[imin] = -vk[imin];
            s ^= 1u << imin;
        }
        signs[k] = (uint8_t)s;
    }
}

/* Rounds each element of one group to a level at inverse scale id; when that is not a grid
 * point, takes the nearest neighbour at scale instead. Writes the levels to L; returns whether
 * the rounded levels were a grid point. */
static bool snap_group(const struct iq_grid *g, int kmax, const float *xval, const float *waux,
                       float id, float scale, int8_t *L) {
    for (int e = 0; e < g->dim; e++) {
        const int l = nearest_int(0.5f * (id * xval[e] - 1));
        L[e] = (int8_t)(l < 0 ? 0 : l > kmax - 1 ? kmax - 1 : l);
    }
    const unsigned key = iq_grid_key(g, L);
    if (iq_grid_point(g, key) >= 0)
        return true;
    grid_nearest(g, key, xval, waux, scale, L);
    return false;
}

/* Weighted least-squares fit of xval ~ scale * (2L+1): the sums sum w*x*q and sum w*q^2. */
static void fit_sums(int n, const float *xval, const float *weight, const int8_t *L, float *sumqx,
                     float *sumq2) {
    float sx = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        const float w = weight[i];
        const float q = (float)(2 * L[i] + 1);
        sx += w * xval[i] * q;
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* The trials and the refit of iq_fit_subblock: ref is what the trial inverse scales divide by,
 * scale the start value (kept when no trial wins). Writes the chosen levels to L (every group
 * on the grid) and returns the scale, which may come out negative. */
static float grid_fit(const struct iq_grid *g, const struct iq_fit *f, const float *xval,
                      const float *weight, const float *waux, float ref, float scale, int8_t *L) {
    const int n_groups = f->n / g->dim;
    int8_t Laux[32];
    bool on_grid[8], on_grid_aux[8];
    float best = 0, sumqx, sumq2;
    memset(L, 0, (size_t)f->n);
    for (int k = 0; k < n_groups; k++)
        on_grid[k] = f->start_on_grid;
    for (int t = f->try_lo; t <= f->try_hi; t++) {
        const float id = ((float)(2 * f->kmax - 1) + (float)t * f->step) / ref;
        const float this_scale = 1 / id;
        for (int k = 0; k < n_groups; k++)
            on_grid_aux[k] = snap_group(g, f->kmax, xval + g->dim * k, waux + g->dim * k, id,
                                        this_scale, Laux + g->dim * k);
        fit_sums(f->n, xval, weight, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)f->n);
            memcpy(on_grid, on_grid_aux, (size_t)n_groups * sizeof on_grid[0]);
        }
    }
    int n_off = 0;
    for (int k = 0; k < n_groups; k++)
        n_off += !on_grid[k];
    if (scale > 0 && (f->refit == IQ_REFIT_ALWAYS || n_off > 0)) {
        const float id = 1 / scale;
        for (int k = 0; k < n_groups; k++) {
            if (f->refit == IQ_REFIT_OFF_GRID && on_grid[k])
                continue;
            snap_group(g, f->kmax, xval + g->dim * k, waux + g->dim * k, id, scale, L + g->dim * k);
        }
        fit_sums(f->n, xval, weight, L, &sumqx, &sumq2);
        if (sumq2 > 0)
            scale = sumqx / sumq2;
    }
    return scale;
}

bool iq_fit_subblock(const struct iq_grid *g, const struct iq_fit *f, const float *xb,
                     const float *weight, float *scale, uint16_t *points, uint8_t *signs) {
    float xval[32] = {0}, waux[32];
    int8_t L[32];
    for (int i = 0; i < f->n; i++)
        waux[i] = sqrtf(weight[i]);
    fold_signs(xb, weight, f->n, f->even_parity, xval, signs);
    float max = xval[0];
    for (int i = 1; i < f->n; i++)
        max = max > xval[i] ? max : xval[i];
    if (max < f->zero_below)
        return false;
    float s, ref;
    if (f->start_qp) {
        /* a first scale from plain non-negative levels 0..kmax, as ggml's iq2_xxs does */
        s = make_qp_quants(f->n, f->kmax + 1, xval, (uint8_t *)L, weight);
        ref = s * f->kmax;
        if (ref <= 0)
            return false;
    } else {
        s = max / (2 * f->kmax - 1);
        ref = max;
    }
    s = grid_fit(g, f, xval, weight, waux, ref, s, L);
    if (s < 0) { /* flip the signs so the stored (unsigned) scale codes the same values */
        s = -s;
        for (int k = 0; k < f->n / 8; k++)
            signs[k] = (uint8_t)~signs[k];
    }
    for (int k = 0; k < f->n / g->dim; k++)
        points[k] = (uint16_t)iq_grid_point(g, iq_grid_key(g, L + g->dim * k));
    *scale = s;
    return true;
}
