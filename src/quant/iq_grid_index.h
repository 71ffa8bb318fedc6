/* iq_grid_index.h: the i-quant grids as level vectors, their key -> grid-point maps and
 * nearest-neighbour lists (ggml's iq2xs_init_impl / iq3xs_init_impl), and the grid search that
 * the iq2 and iq3 quantizers share. */
#ifndef OX_QUANT_IQ_GRID_INDEX_H
#define OX_QUANT_IQ_GRID_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/quantize_util.h"

/* A grid point is a short vector (8 or 4 elements) of small levels l; the quantizers work with
 * the odd lattice values 2l+1 (what ggml's init code builds), the stored grids in iq_tables.c
 * with the magnitudes those levels decode to. A key packs a vector of levels, element e in bits
 * [bits*e, bits*e + bits); every key a quantizer can form maps either to the grid point with
 * exactly those levels or to the list of grid points nearest to it. */
enum iq_grid_id {
    IQ_GRID_IQ2XXS, /* 256 points x 8, levels 0..2 */
    IQ_GRID_IQ2XS,  /* 512 x 8 */
    IQ_GRID_IQ2S,   /* 1024 x 8 */
    IQ_GRID_IQ1S,   /* 2048 x 8, levels 0..2 standing for -1, 0, +1 (iq1_s and iq1_m) */
    IQ_GRID_IQ3XXS, /* 256 x 4, levels 0..7 */
    IQ_GRID_IQ3S,   /* 512 x 4 */
    IQ_GRID_COUNT
};

struct iq_grid {
    int n_points;
    int dim;               /* elements per point: 8 or 4 */
    int bits;              /* key bits per element: 2 or 3 */
    const uint8_t *levels; /* [n_points][dim] */
    /* [keys]: the grid point >= 0, or -(1 + offset) of the key's list in neighbours */
    const int32_t *map;
    /* lists: a count, then that many grid points, nearest first, ties by point index */
    const uint16_t *neighbours;
};

/* The grid, built on first use (thread-safe, once per process; static storage, cannot fail). */
const struct iq_grid *iq_grid_get(enum iq_grid_id id);

/* The key of dim levels. */
static inline unsigned iq_grid_key(const struct iq_grid *g, const int8_t *l) {
    unsigned key = 0;
    for (int e = 0; e < g->dim; e++)
        key |= (unsigned)l[e] << (g->bits * e);
    return key;
}

/* Grid point with exactly these levels, or -1. */
static inline int iq_grid_point(const struct iq_grid *g, unsigned key) {
    return g->map[key] >= 0 ? g->map[key] : -1;
}

/* The neighbour list of a key that is not a grid point: count, then the points. */
static inline const uint16_t *iq_grid_neighbours(const struct iq_grid *g, unsigned key) {
    return g->neighbours + (-g->map[key] - 1);
}

/* How one sub-block is fitted to a grid (the per-type constants of ggml's
 * quantize_row_iq2_* / iq3_* functions). */
enum iq_refit {
    IQ_REFIT_ALWAYS,     /* after the trials, re-snap every group at the chosen scale (iq2_xxs) */
    IQ_REFIT_ALL_IF_OFF, /* ... every group, when any group was off the grid (iq3_s) */
    IQ_REFIT_OFF_GRID,   /* ... only the groups that were off the grid (iq2_xs, iq2_s, iq3_xxs) */
};

struct iq_fit {
    int n;              /* elements of the sub-block: 16 or 32 */
    int kmax;           /* levels per element: 3 (2-bit grids) or 8 (3-bit) */
    bool even_parity;   /* 7 sign bits stored per 8, the 8th implied by an even count */
    float zero_below;   /* a sub-block whose largest |x| is below this is left empty */
    bool start_qp;      /* start from make_qp_quants' scale (iq2_xxs), else max / (2*kmax-1) */
    int try_lo, try_hi; /* trial inverse scales (2*kmax - 1 + t*step) / ref, t in [lo, hi] */
    float step;
    enum iq_refit refit;
    bool start_on_grid; /* how groups count before any trial wins (iq3_s: off) */
};

/* Quantizes one sub-block of n elements of xb under the error weights: folds the signs into
 * signs[n/8] (a bit per negative element; see even_parity), tries each trial scale, snapping
 * every group to its rounded grid point or else the nearest neighbour, keeps the trial whose
 * least-squares scale explains the most weighted signal, re-snaps as f->refit says and refits
 * the scale. Returns false for a sub-block to leave empty (nothing to store); else the scale
 * (made >= 0 by flipping every sign if it came out negative) in *scale and the grid points of
 * the groups in points[n/dim]. */
bool iq_fit_subblock(const struct iq_grid *g, const struct iq_fit *f, const float *xb,
                     const float *weight, float *scale, uint16_t *points, uint8_t *signs);

/* A sub-block scale s as the odd multiple (2l+1) of d/2 nearest to it, l clamped to [0, lmax]
 * (id = 1/d); how every iq2/iq3/iq1 type stores its sub-block scales. */
static inline int iq_scale_code(float id, float s, int lmax) {
    const int l = nearest_int(0.5f * (id * s - 1));
    return l < 0 ? 0 : l > lmax ? lmax : l;
}

#endif
