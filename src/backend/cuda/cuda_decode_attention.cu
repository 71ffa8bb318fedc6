/* cuda_decode_attention.cu: decode attention over an f16 cache (queries with no cells to share):
 * a block takes query heads of one kv head (two by default, each key and value row read once
 * for both) over its share of the cells (flash-decoding), a tile's rows requested ahead of the
 * math that waits for them, and the shares' partials combined by the block that ends last. */
#include <math.h>

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

namespace {

enum {
    DA_THREADS = 128,
    DA_DIMS = 64,           /* key dims a thread takes of a cell (8 loads of 16 bytes) */
    DA_LOADS = DA_DIMS / 8, /* so a tile holds DA_THREADS / (threads a cell) cells */
    DA_MAX_HD = 256,
    DA_V_CELLS = 8,     /* value rows a thread reads per tile, at most */
    DA_QPAD = 68,       /* floats a part of a query takes in shared memory: the parts' float4
                           reads fall on different banks */
    DA_MIN_CELLS = 128, /* a split takes at least this many cells: below, its fixed costs (the
                           query, the partials' combination) outweigh the cells it reads */
    DA_MAX_SPLITS = 64,
};

struct da_args {
    attn_args a;
    cvd_xq *xq;     /* the outputs as q8_1 too, for the wo matmul next (or NULL) */
    int splits;     /* blocks per (token, head group), each over its share of the cells */
    float *part;    /* with more than 1: their running max, sum and outputs per head, */
    int stride;     /* stride floats apart (hd_v + 2) */
    int *count;     /* and per (token, head group) how many are done */
    bool one_token; /* each query's cells end as a step of it alone found them (cuda_one_token) */
};

/* 8 f16 values as floats. */
__device__ __forceinline__ void f16x8(const uint4 &u, float *f) {
    const __half2 *h2 = (const __half2 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 p = __half22float2(h2[j]);
        f[2 * j] = p.x, f[2 * j + 1] = p.y;
    }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Where a block works: its token, kv head, first query head and how many, and its cells. */
struct da_place {
    int t, kvh, h0, nh, c_begin, c_end, used;
};

template <int CT, int GQ> __device__ __forceinline__ da_place da_where(const da_args &d) {
    const attn_args &a = d.a;
    const int g = a.n_head / a.n_head_kv, chunks = (g + GQ - 1) / GQ;
    const int per_token = a.n_head_kv * chunks;
    da_place w;
    w.t = blockIdx.x / per_token;
    w.kvh = blockIdx.x % per_token / chunks;
    w.h0 = w.kvh * g + blockIdx.x % chunks * GQ;
    w.nh = min(GQ, (w.kvh + 1) * g - w.h0);
    /* a replayed step reads the cells in use now, not those of its recording; and only the
     * tiles that hold the query's sequence (a tile with none of its cells changes nothing) */
    int n_cells = a.n_cells_now ? *a.n_cells_now : a.n_cells, c0 = 0;
    if (a.seq_span) {
        const int32_t qs = a.q_seq[w.t];
        c0 = a.seq_span[2 * qs] / CT * CT;
        n_cells = min(n_cells, a.seq_span[2 * qs + 1]);
    }
    if (d.one_token)
        n_cells = cuda_one_token_end(a.cell_pos, a.cell_seq, n_cells, a.q_pos[w.t], a.q_seq[w.t]);
    const int tiles = n_cells > c0 ? (n_cells - c0 + CT - 1) / CT : 0;
    const int per = max((DA_MIN_CELLS + CT - 1) / CT, (tiles + d.splits - 1) / d.splits);
    w.used = max(1, (tiles + per - 1) / per);
    w.c_begin = c0 + (int)blockIdx.y * per * CT;
    w.c_end = min(n_cells, w.c_begin + per * CT);
    return w;
}

/* The thread's sums (dims vd * 8 .. + 8 of group vg's cells, for each head) into the block's
 * table, which group_sums adds up in group order. */
template <int GQ>
__device__ __forceinline__ void store_group(const float (*acc)[8], const float *l, float *v_part,
                                            float *l_part, int vg, int vd, int hd_v) {
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        float *dst = v_part + ((size_t)vg * GQ + h) * hd_v + vd * 8;
        *(float4 *)dst = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
        *(float4 *)(dst + 4) = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
        if (vd == 0)
            l_part[vg * GQ + h] = l[h];
    }
}

/* Output i of head h (of the block's): the groups' sums of the values and probabilities, in
 * group order, and the head's running maximum (m[h], h known only at run time). */
template <int GQ>
__device__ __forceinline__ void group_sums(const float *v_part, const float *l_part, const float *m,
                                           int groups, int hd_v, int h, int i, float *o, float *lo,
                                           float *mo) {
    *o = 0.0f, *lo = 0.0f;
    for (int g = 0; g < groups; g++)
        *o += v_part[((size_t)g * GQ + h) * hd_v + i], *lo += l_part[g * GQ + h];
    *mo = m[0];
#pragma unroll
    for (int k = 1; k < GQ; k++)
        *mo = k == h ? m[k] : *mo;
}

/* y's output i of query head qh (head h of the model), from the unscaled sum o, the
 * probabilities' sum lo and their maximum mo: the sink joins the softmax, and the q8_1 copy
 * takes the warp's 32 outputs. */
__device__ __forceinline__ void put_output(const da_args &d, size_t qh, int h, int i, float o,
                                           float lo, float mo, int lane) {
    const float keep = cuda_join_sink(d.a.sinks, h, &mo, &lo);
    const float y = lo > 0.0f ? o * (keep / lo) : 0.0f; /* nothing seen: zeros, as the CPU */
    const size_t at = qh * d.a.hd_v + i;
    d.a.y[at] = y;
    if (d.xq)
        cvd_quantize_warp(y, d.xq + at / 32, lane);
}

/* q . k for the GQ heads' queries (qsm) and this thread's nk 16-byte loads of a key row (kr),
 * the TPC threads of a cell's parts added together (neighbouring lanes). */
template <int GQ, int TPC>
__device__ __forceinline__ void key_scores(const float (*qsm)[TPC][DA_QPAD], const uint4 *kr,
                                           int nk, int part, float *s) {
#pragma unroll
    for (int h = 0; h < GQ; h++)
        s[h] = 0.0f;
#pragma unroll
    for (int r = 0; r < DA_LOADS; r++) {
        if (r >= nk)
            break;
        float kf[8];
        f16x8(kr[r], kf);
#pragma unroll
        for (int h = 0; h < GQ; h++) {
            const float4 q0 = *(const float4 *)&qsm[h][part][8 * r];
            const float4 q1 = *(const float4 *)&qsm[h][part][8 * r + 4];
            s[h] += q0.x * kf[0] + q0.y * kf[1] + q0.z * kf[2] + q0.w * kf[3] + q1.x * kf[4] +
                    q1.y * kf[5] + q1.z * kf[6] + q1.w * kf[7];
        }
    }
#pragma unroll
    for (int h = 0; h < GQ; h++)
#pragma unroll
        for (int o = TPC / 2; o > 0; o >>= 1)
            s[h] += __shfl_xor_sync(0xffffffffu, s[h], o);
}

/* The online softmax's step for a tile: scores scaled (soft-capped) or masked, the block's
 * maximum per head (one barrier for all heads), the factor the running sums take (alpha) and
 * each cell's probability into ps (published by the barrier after). */
template <int GQ, int CT>
__device__ __forceinline__ void tile_softmax(const attn_args &a, bool seen, float *s, float *m,
                                             float *alpha, float (*red)[DA_THREADS / 32],
                                             float (*ps)[CT], int cell, int part, int lane,
                                             int warp) {
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        s[h] = !seen            ? -INFINITY
               : a.softcap == 0 ? s[h] * a.scale
                                : a.softcap * tanhf(s[h] * (a.scale / a.softcap));
        const float mx = warp_max(s[h]);
        if (lane == 0)
            red[h][warp] = mx;
    }
    __syncthreads(); /* the warps' maxima */
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        float m_new = m[h];
#pragma unroll
        for (int k = 0; k < DA_THREADS / 32; k++)
            m_new = fmaxf(m_new, red[h][k]);
        alpha[h] = m_new == -INFINITY ? 1.0f : expf(m[h] - m_new); /* 0 when m was -inf */
        m[h] = m_new;
        if (part == 0)
            ps[h][cell] = s[h] == -INFINITY ? 0.0f : expf(s[h] - m_new);
    }
}

/* The running sums rescaled by alpha, then the thread's value rows (vr: cells vg, vg + groups,
 * ... below n_tile) weighted by their probabilities into them. */
template <int GQ, int CT>
__device__ __forceinline__ void add_values(const uint4 *vr, const float (*ps)[CT],
                                           const float *alpha, int vg, int groups, int n_tile,
                                           float *l, float (*acc)[8]) {
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        l[h] *= alpha[h];
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[h][k] *= alpha[h];
    }
#pragma unroll
    for (int r = 0; r < DA_V_CELLS; r++) {
        const int j = vg + r * groups;
        if (j >= n_tile)
            break;
        float vf[8];
        f16x8(vr[r], vf);
#pragma unroll
        for (int h = 0; h < GQ; h++) {
            const float p = ps[h][j];
            if (p == 0.0f) /* masked cells: never 0 * whatever they hold */
                continue;
            l[h] += p;
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[h][k] += p * vf[k];
        }
    }
}

/* A warp per head of the block that finishes last: the splits' maxima and sums read side by
 * side (not one after another: a chain of 40 partials cost more than the cells), each split's
 * weight into w_split, the head's maximum and sum. */
template <int GQ>
__device__ __forceinline__ void split_weights(const da_args &d, const da_place &w, size_t qh0,
                                              float (*w_split)[DA_MAX_SPLITS], float *m_head,
                                              float *l_head, int warp, int lane) {
    if (warp >= w.nh)
        return;
    const float *all = d.part + (qh0 + warp) * d.splits * d.stride;
    float mj[DA_MAX_SPLITS / 32], lj[DA_MAX_SPLITS / 32], mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int k = 0; k < DA_MAX_SPLITS / 32; k++) {
        const int j = lane + 32 * k;
        mj[k] = j < w.used ? __ldcg(all + (size_t)j * d.stride) : -INFINITY;
        lj[k] = j < w.used ? __ldcg(all + (size_t)j * d.stride + 1) : 0.0f;
        mx = fmaxf(mx, mj[k]);
    }
    mx = warp_max(mx);
#pragma unroll
    for (int k = 0; k < DA_MAX_SPLITS / 32; k++) {
        const float wj = mj[k] == -INFINITY ? 0.0f : expf(mj[k] - mx); /* nothing seen */
        w_split[warp][lane + 32 * k] = wj;
        sum += lj[k] * wj;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0)
        m_head[warp] = mx, l_head[warp] = sum;
}

/* Output i of query head qh over every split: their unscaled outputs by their weights, in
 * split order, 8 loads on their way at once. */
__device__ __forceinline__ float combined(const da_args &d, const da_place &w, size_t qh, int i,
                                          const float *weights) {
    const float *all = d.part + qh * d.splits * d.stride + 2 + i;
    float o = 0.0f;
    for (int j0 = 0; j0 < w.used; j0 += 8) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            v[k] = j0 + k < w.used ? __ldcg(all + (size_t)(j0 + k) * d.stride) : 0.f;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (j0 + k < w.used)
                o += weights[j0 + k] * v[k];
    }
    return o;
}

/* Blocks of GQ heads a multiprocessor holds at once (its launch bounds): 4 (128 registers a
 * thread), 3 with four heads' sums (168 registers: within 128, ptxas spilled 100 bytes). */
__host__ __device__ constexpr int blocks_per_sm(int gq) {
    return gq == 4 ? 3 : 4;
}

/* GQ: the most query heads a block takes; TPC: threads per cell (a tile is 128 / TPC cells). */
template <int GQ, int TPC>
__global__ static void __launch_bounds__(DA_THREADS, blocks_per_sm(GQ))
    decode_attention_kernel(const da_args d) {
    constexpr int CT = DA_THREADS / TPC;
    __shared__ __align__(16) float qsm[GQ][TPC][DA_QPAD];
    __shared__ float ps[GQ][CT], red[GQ][DA_THREADS / 32];
    __shared__ __align__(16) float v_part[GQ * DA_THREADS * 8]; /* groups x heads x hd_v */
    __shared__ float l_part[GQ * DA_THREADS];
    __shared__ float w_split[GQ][DA_MAX_SPLITS], m_head[GQ], l_head[GQ]; /* combining splits */
    __shared__ bool last_split;
    static_assert(GQ <= DA_THREADS / 32, "a warp per head combines the splits");
    cuda_let_next_start();
    const attn_args &a = d.a;
    const da_place w = da_where<CT, GQ>(d);
    if ((int)blockIdx.y >= w.used)
        return;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int cell = tid / TPC, part = tid % TPC, kd0 = part * DA_DIMS;
    const int nk = max(0, min(DA_LOADS, (a.hd_k - kd0) / 8)); /* this thread's key loads */
    /* values 8 dims at a time: thread (vg, vd) takes dims vd * 8 .. + 8 of cells vg, vg +
     * groups, ...; the groups' sums are added at the end */
    const int dv8 = a.hd_v / 8, groups = DA_THREADS / dv8, vg = tid / dv8, vd = tid % dv8;
    const bool v_on = vg < groups;
    const int32_t qp = a.q_pos[w.t], qs = a.q_seq[w.t];
    const uint8_t *kbase = a.k_cache + ((size_t)w.kvh * a.hd_k + kd0) * 2;
    const uint8_t *vbase = a.v_cache + ((size_t)w.kvh * a.hd_v + vd * 8) * 2;
    /* the first tile's cells came before any kernel of the step (uploads): read them while
     * the previous kernel finishes */
    int32_t kp = -1;
    uint64_t sw = 0;
    if (w.c_begin + cell < w.c_end)
        kp = a.cell_pos[w.c_begin + cell],
        sw = a.cell_seq[(size_t)(w.c_begin + cell) * SEQ_WORDS + qs / 64];
    cuda_wait_previous();
    for (int f = tid; f < GQ * TPC * DA_DIMS; f += DA_THREADS) {
        const int h = f / (TPC * DA_DIMS), i = f % (TPC * DA_DIMS);
        qsm[h][i / DA_DIMS][i % DA_DIMS] =
            h < w.nh && i < a.hd_k ? a.q[((size_t)w.t * a.n_head + w.h0 + h) * a.hd_k + i] : 0.0f;
    }
    uint4 kr[DA_LOADS];
#pragma unroll
    for (int r = 0; r < DA_LOADS; r++) /* cells past the end: zeros, masked below */
        kr[r] = r < nk && w.c_begin + cell < w.c_end
                    ? __ldg((const uint4 *)(kbase + (size_t)(w.c_begin + cell) * a.k_row) + r)
                    : make_uint4(0, 0, 0, 0);
    float m[GQ], l[GQ], acc[GQ][8];
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++)
            acc[h][k] = 0.0f;
    }
    __syncthreads(); /* the query */
    for (int c0 = w.c_begin; c0 < w.c_end; c0 += CT) {
        const int c = c0 + cell, n_tile = min(CT, w.c_end - c0);
        /* this tile's values on their way while its scores are worked out */
        uint4 vr[DA_V_CELLS];
#pragma unroll
        for (int r = 0; r < DA_V_CELLS; r++) {
            const int j = vg + r * groups;
            if (v_on && j < n_tile)
                vr[r] = __ldg((const uint4 *)(vbase + (size_t)(c0 + j) * a.v_row));
        }
        float s[GQ];
        key_scores<GQ, TPC>(qsm, kr, nk, part, s);
        const bool seen = c < w.c_end && kp >= 0 && (sw >> (qs % 64) & 1) && kp - qp <= a.ahead &&
                          (a.window <= 0 || qp - kp < a.window);
        /* the next tile's cells and keys on their way through the softmax and the values */
        if (c + CT < w.c_end) {
            kp = a.cell_pos[c + CT], sw = a.cell_seq[(size_t)(c + CT) * SEQ_WORDS + qs / 64];
#pragma unroll
            for (int r = 0; r < DA_LOADS; r++)
                if (r < nk)
                    kr[r] = __ldg((const uint4 *)(kbase + (size_t)(c + CT) * a.k_row) + r);
        } /* else the last tile's keys stay: defined values, masked as cells past the end */
        float alpha[GQ];
        tile_softmax<GQ, CT>(a, seen, s, m, alpha, red, ps, cell, part, lane, warp);
        __syncthreads(); /* the probabilities */
        add_values<GQ, CT>(vr, ps, alpha, vg, groups, v_on ? n_tile : 0, l, acc);
    }
    if (v_on)
        store_group<GQ>(acc, l, v_part, l_part, vg, vd, a.hd_v);
    __syncthreads();
    /* output f = tid + r * 128 is dim f % hd_v of head f / hd_v (hd_v % 32 == 0 when xq is
     * wanted: a warp holds 32 outputs of one head, so the tests below are warp-uniform) */
    const int n_out = w.nh * a.hd_v;
    const size_t qh0 = (size_t)w.t * a.n_head + w.h0;
    if (w.used > 1) {
        /* a share of the cells: its max, sum and unscaled outputs go out, and the block that
         * finishes last among the group's splits takes them all in split order (the same sums
         * whichever finishes last), as one softmax over every cell */
        for (int f = tid; f < n_out; f += DA_THREADS) {
            const int h = f / a.hd_v, i = f % a.hd_v;
            float o, lo, mo, *mine = d.part + ((qh0 + h) * d.splits + blockIdx.y) * d.stride;
            group_sums<GQ>(v_part, l_part, m, groups, a.hd_v, h, i, &o, &lo, &mo);
            mine[2 + i] = o;
            if (i == 0)
                mine[0] = mo, mine[1] = lo;
        }
        __threadfence(); /* the partials are visible before the count says so */
        __syncthreads();
        if (tid == 0)
            last_split = atomicAdd(&d.count[qh0], 1) == w.used - 1;
        __syncthreads();
        if (!last_split)
            return;
        __threadfence();
        split_weights<GQ>(d, w, qh0, w_split, m_head, l_head, warp, lane);
        __syncthreads();
        for (int f = tid; f < n_out; f += DA_THREADS) {
            const int h = f / a.hd_v, i = f % a.hd_v;
            put_output(d, qh0 + h, w.h0 + h, i, combined(d, w, qh0 + h, i, w_split[h]), l_head[h],
                       m_head[h], lane);
        }
        if (tid == 0) /* ready for the next step */
            d.count[qh0] = 0;
        return;
    }
    for (int f = tid; f < n_out; f += DA_THREADS) {
        const int h = f / a.hd_v, i = f % a.hd_v;
        float o, lo, mo;
        group_sums<GQ>(v_part, l_part, m, groups, a.hd_v, h, i, &o, &lo, &mo);
        put_output(d, qh0 + h, w.h0 + h, i, o, lo, mo, lane);
    }
}

/* The heads a block takes: two of a kv head's (OX_CUDA_ATTN_HEADS, a measuring knob, sets 1, 2
 * or 4). H100, t/s at 0 / 4096 / 16384 cached tokens, 1B Q4_0 (4 heads a kv head): 1 head 1394
 * / 1094 / 728, 2 heads 1377 / 1080 / 782, 4 heads 1312 / 920 / 728; 8B Q4_K_M: 338 / 277 /
 * 202, 331 / 268 / 212, 323 / 247 / 195; 2 also led at 32 and 128 sequences (+2-4% over 1). Four
 * keep 168 registers a thread, so 3 blocks a multiprocessor, and a block's latency grows with
 * its heads' work, which fewer blocks hide less. */
int heads_per_block(int g) {
    static const int knob = cuda_env_int("OX_CUDA_ATTN_HEADS", 2, 1, 4);
    const int want = knob < g ? knob : g;
    return want >= 3 ? 4 : want == 2 ? 2 : 1;
}

/* Blocks per (token, head group): one wave of the kernel over the cells for n tokens, so one
 * query over a long cache still fills the GPU (OX_CUDA_ATTN_SPLITS sets them instead), within
 * the room for their partials. */
int da_splits(const cuda_state *cs, int n, int per_token, int n_head, int gq) {
    static const int knob = cuda_env_int("OX_CUDA_ATTN_SPLITS", 0, 0, DA_MAX_SPLITS);
    const int splits = knob ? knob : blocks_per_sm(gq) * cs->n_sm / (n * per_token);
    return max(1, min(splits, min(DA_MAX_SPLITS, cs->attn_blocks / (n * n_head))));
}

using da_kernel = void (*)(da_args);
template <int GQ> da_kernel kernel_for(int tpc) {
    return tpc == 1   ? decode_attention_kernel<GQ, 1>
           : tpc == 2 ? decode_attention_kernel<GQ, 2>
                      : decode_attention_kernel<GQ, 4>;
}

} // namespace

bool cuda_decode_attention(struct backend *b, const struct attn_args *a, cvd_xq *xq) {
    cuda_state *cs = cuda_of(b);
    const int tpc = a->hd_k <= DA_DIMS ? 1 : a->hd_k <= 2 * DA_DIMS ? 2 : 4;
    const int dv8 = a->hd_v / 8, ct = DA_THREADS / tpc;
    if (!a->k_cache || a->cache_type != OX_DTYPE_F16 || a->hd_k % 8 || a->hd_v % 8 ||
        a->hd_k > DA_MAX_HD || a->hd_v > DA_MAX_HD || a->n_head % a->n_head_kv ||
        ((uintptr_t)a->k_cache | (uintptr_t)a->v_cache | a->k_row | a->v_row) % 16 ||
        (ct + DA_THREADS / dv8 - 1) / (DA_THREADS / dv8) > DA_V_CELLS)
        return false;
    const int g = a->n_head / a->n_head_kv, gq = heads_per_block(g);
    const int per_token = a->n_head_kv * ((g + gq - 1) / gq);
    /* in one-token order each query keeps the splits a step of it alone takes, room allowing */
    bool one = cuda_one_token(b, a->n) && a->ahead == 0;
    int splits = da_splits(cs, one ? 1 : a->n, per_token, a->n_head, gq);
    if (one && (a->n * a->n_head > cs->attn_blocks ||
                (size_t)a->n * a->n_head * splits * (a->hd_v + 2) > cs->attn_floats))
        one = false, splits = da_splits(cs, a->n, per_token, a->n_head, gq);
    da_args d = {*a, xq, splits, cs->attn_part, a->hd_v + 2, cs->attn_count, one};
    const dim3 grid((unsigned)(a->n * per_token), (unsigned)d.splits);
    const da_kernel k = gq == 4   ? kernel_for<4>(tpc)
                        : gq == 2 ? kernel_for<2>(tpc)
                                  : kernel_for<1>(tpc);
    cuda_note(b, cuda_launch_early(cs->pdl, k, grid, dim3(DA_THREADS), 0, cs->stream, d),
              "decode attention");
    return true;
}
