/* cuda_attention.cu: causal attention on the GPU where flash attention (prompts) and the f16
 * decode kernel (cuda_decode_attention.cu) do not take it: over q8_0 and f32 caches and float
 * arrays, one block per (token, head), or for decode steps of few queries several, each over its
 * share of the cells, the visible cells taken a tile at a time with an online softmax, so any
 * context length runs in fixed shared memory (GQA, sliding window, soft-capped scores, sinks). */
#include <math.h>

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_vecdot.cuh"

enum { TILE = 128, MAX_HD = 512, PER_THREAD = MAX_HD / TILE };

/* Everything the kernel reads, by value (struct attn_args holds the same device pointers). */
struct attn_k {
    const float *q;
    const uint8_t *kb, *vb; /* keys and values: float arrays, or the cache's rows */
    size_t k_row, v_row;    /* bytes from one cell's row to the next */
    float *y;
    int n_head, n_head_kv, hd_k, hd_v, n_cells, window, ahead;
    const int32_t *q_pos, *q_seq, *cell_pos;
    const uint64_t *cell_seq;
    const int32_t *n_cells_now; /* the count as the decode kernel reads it (or NULL: n_cells) */
    float scale, softcap;
    const float *sinks; /* [n_head] logits joining each softmax with no value (gpt-oss), or NULL */
    cvd_xq *xq;         /* the per-query kernel's output as q8_1 too (for the wo matmul), or NULL */
    const int32_t *seq_span; /* each sequence's first and one past its last cell, or NULL */
    int splits;              /* blocks per (token, head), each over its share of the cells; */
    float *part;             /* with more than 1, their running max, sum and outputs, */
    int *count;              /* and per (token, head) how many are done (cuda_state's attn_) */
    bool one_token; /* each query's cells end as a step of it alone found them (cuda_one_token) */
};

/* A split of the cells takes at least this many tiles, and a (token, head) at most this many
 * splits: beyond, the blocks' fixed costs (the query, the partials' combination) outweigh the
 * cells they share. */
enum { SPLIT_MIN_TILES = 1, MAX_SPLITS = 32, PART_STRIDE = CUDA_ATTN_PART };
static_assert(PART_STRIDE >= MAX_HD + 2, "a split's max, sum and outputs");

__device__ static float block_sum(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < TILE / 32; w++)
        v += shared[w];
    return v;
}

__device__ static float block_max(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < TILE / 32; w++)
        v = fmaxf(v, shared[w]);
    return v;
}

/* q . k for one row of f16 keys at kr (16-byte aligned), summed in dimension order: 8 loads on
 * their way at once, not one after another. */
__device__ __forceinline__ float dot_f16_row(const float *q, const uint4 *kr, int hd) {
    float dot = 0.0f;
    for (int i0 = 0; i0 < hd; i0 += 64) {
        uint4 u[8];
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (i0 + 8 * r < hd)
                u[r] = __ldg(kr + i0 / 8 + r);
#pragma unroll
        for (int r = 0; r < 8; r++) {
            if (i0 + 8 * r >= hd)
                break;
            const __half2 *h2 = (const __half2 *)&u[r];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f = __half22float2(h2[j]);
                dot += q[i0 + 8 * r + 2 * j] * f.x;
                dot += q[i0 + 8 * r + 2 * j + 1] * f.y;
            }
        }
    }
    return dot;
}

/* acc8 += p[j] times 8 f16 values of cell j, for the thread's cells j = vg, vg + groups, ... of
 * a tile of n_tile (col: those values of the tile's first cell, rows v_row bytes apart), in that
 * order: 4 cells' loads on their way at once. */
__device__ __forceinline__ void add_v_f16(float *acc8, const float *p, int n_tile, int vg,
                                          int groups, const uint8_t *col, size_t v_row) {
    for (int j0 = vg; j0 < n_tile; j0 += 4 * groups) {
        float pj[4];
        uint4 u[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int j = j0 + r * groups;
            pj[r] = j < n_tile ? p[j] : 0.0f;
            if (pj[r] != 0.0f)
                u[r] = __ldg((const uint4 *)(col + (size_t)j * v_row));
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (pj[r] == 0.0f) /* masked cells: never 0 * whatever they hold */
                continue;
            const __half2 *h2 = (const __half2 *)&u[r];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __half22float2(h2[k]);
                acc8[2 * k] += pj[r] * f.x;
                acc8[2 * k + 1] += pj[r] * f.y;
            }
        }
    }
}

/* At least 4 blocks per multiprocessor, as 128 registers a thread: without a minimum, ptxas kept
 * the f16 kernel to 32 registers and spilled, which made 1B Q4_0 decode 18% slower (1026 ->
 * 846 t/s on an H200; under a profiler, one kernel at a time, hardly at all). */
template <int KT> __global__ static void __launch_bounds__(TILE, 4) attention_kernel(attn_k a) {
    __shared__ float q[MAX_HD], p[TILE], red[TILE / 32], red_sum[TILE / 32];
    __shared__ float v_part[TILE * 8]; /* the cell groups' partial outputs (vec_v) */
    __shared__ bool last_split;
    cuda_let_next_start();
    const int qh = blockIdx.x, split = blockIdx.y;
    int t = qh / a.n_head, h = qh % a.n_head;
    int kvh = h / (a.n_head / a.n_head_kv), tid = threadIdx.x;
    /* the step's positions, sequences and cells came before any kernel of it (uploads): the
     * first tile's are read while the previous kernel finishes. With that and the rows' loads
     * below issued together (not one after another), H200 tg128: 8B F16 245 -> 251.5 t/s, 1B F16
     * 1160 -> 1198, 8B Q4_0 439 -> 459. */
    const int32_t qp = a.q_pos[t], qs = a.q_seq[t];
    /* a replayed decode step reads the cells in use now, not those of its recording */
    int n_cells = a.n_cells_now ? *a.n_cells_now : a.n_cells, c_begin = 0;
    /* only the tiles that hold the query's sequence: a tile with no cell of it changes
     * nothing (its scores are all masked: the maximum stays, the sum and the values are scaled
     * by exactly 1), so skipping those is exact; a step of many sequences, each in its own
     * run of cells, then reads its own tiles, not every sequence's */
    if (a.seq_span) {
        c_begin = a.seq_span[2 * qs] / TILE * TILE;
        n_cells = min(n_cells, a.seq_span[2 * qs + 1]);
    }
    if (a.one_token)
        n_cells = cuda_one_token_end(a.cell_pos, a.cell_seq, n_cells, qp, qs);
    /* this block's share of the tiles, from the cells in use now (so a recorded step's splits
     * follow the cache as it grows); splits past the last share have nothing to do */
    const int tiles = n_cells > c_begin ? (n_cells - c_begin + TILE - 1) / TILE : 0;
    const int per = max(SPLIT_MIN_TILES, (tiles + a.splits - 1) / a.splits);
    const int used = max(1, (tiles + per - 1) / per);
    if (split >= used)
        return;
    c_begin += split * per * TILE;
    n_cells = min(n_cells, c_begin + per * TILE);
    int32_t kp0 = -1;
    uint64_t seq0 = 0;
    if (c_begin + tid < n_cells)
        kp0 = a.cell_pos[c_begin + tid],
        seq0 = a.cell_seq[(size_t)(c_begin + tid) * SEQ_WORDS + qs / 64];
    cuda_wait_previous();
    const float *qg = a.q + ((size_t)t * a.n_head + h) * a.hd_k;
    for (int i = tid; i < a.hd_k; i += TILE)
        q[i] = qg[i];
    const bool vec_k = ((uintptr_t)a.kb | a.k_row | (size_t)a.hd_k * 2) % 16 == 0;
    /* f16 values 8 at a time: a thread takes dims vd * 8 .. + 8 of every groups-th cell (from
     * vg), so a tile's weighted sum is a few 16-byte loads per thread rather than a chain of
     * n_tile loads; the groups' sums are added at the end */
    const int dv8 = a.hd_v / 8;
    const bool vec_v = KT == OX_DTYPE_F16 && a.hd_v % 8 == 0 && TILE % dv8 == 0 &&
                       ((uintptr_t)a.vb | a.v_row) % 16 == 0;
    const int groups = vec_v ? TILE / dv8 : 1, vd = vec_v ? tid % dv8 : 0, vg = tid / dv8;
    float m = -INFINITY, sum = 0.0f, acc[PER_THREAD] = {0}, acc8[8] = {0};
    __syncthreads();
    for (int c0 = c_begin; c0 < n_cells; c0 += TILE) {
        int c = c0 + tid;
        float s = -INFINITY;
        if (c < n_cells) {
            const int32_t kp = c0 != c_begin ? a.cell_pos[c] : kp0;
            const uint64_t sw = c0 != c_begin ? a.cell_seq[(size_t)c * SEQ_WORDS + qs / 64] : seq0;
            bool seen = kp >= 0 && (sw >> (qs % 64) & 1) && kp - qp <= a.ahead &&
                        (a.window <= 0 || qp - kp < a.window);
            if (seen) {
                float dot = 0.0f;
                if (KT == OX_DTYPE_F16 && vec_k) {
                    dot = dot_f16_row(
                        q, (const uint4 *)(a.kb + (size_t)c * a.k_row) + kvh * a.hd_k / 8, a.hd_k);
                } else {
                    for (int i = 0; i < a.hd_k; i++)
                        dot += q[i] * kv_elem<KT>(a.kb, a.k_row, (size_t)c, kvh * a.hd_k + i);
                }
                s = a.softcap == 0.0f ? dot * a.scale
                                      : a.softcap * tanhf(dot * (a.scale / a.softcap));
            }
        }
        float m_new = fmaxf(m, block_max(s, red));
        if (m_new == -INFINITY) /* nothing visible yet */
            continue;
        float alpha = expf(m - m_new); /* 0 when m was -inf */
        p[tid] = s == -INFINITY ? 0.0f : expf(s - m_new);
        sum = sum * alpha + block_sum(p[tid], red_sum); /* its barriers publish p too */
        int n_tile = n_cells - c0 < TILE ? n_cells - c0 : TILE;
        if (vec_v) {
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc8[k] *= alpha;
            add_v_f16(acc8, p, n_tile, vg, groups,
                      a.vb + (size_t)c0 * a.v_row + (size_t)kvh * a.hd_v * 2 + (size_t)vd * 16,
                      a.v_row);
        }
#pragma unroll
        for (int r = 0; r < PER_THREAD && !vec_v; r++) {
            int i = tid + r * TILE;
            if (i >= a.hd_v)
                break;
            float v_acc = acc[r] * alpha;
            for (int j = 0; j < n_tile; j++)
                if (p[j] != 0.0f)
                    v_acc += p[j] * kv_elem<KT>(a.vb, a.v_row, (size_t)(c0 + j), kvh * a.hd_v + i);
            acc[r] = v_acc;
        }
        m = m_new;
        __syncthreads(); /* p is rewritten by the next tile */
    }
    if (vec_v) { /* the groups' partial sums, added in group order */
#pragma unroll
        for (int k = 0; k < 8; k++)
            v_part[vg * a.hd_v + vd * 8 + k] = acc8[k];
        __syncthreads();
    }
    float o[PER_THREAD];
#pragma unroll
    for (int r = 0; r < PER_THREAD; r++) {
        int i = tid + r * TILE;
        o[r] = acc[r];
        if (vec_v && i < a.hd_v) {
            o[r] = 0.0f;
            for (int g = 0; g < groups; g++)
                o[r] += v_part[g * a.hd_v + i];
        }
    }
    if (used > 1) {
        /* a share of the cells: its max, sum and unscaled outputs go out, and the block that
         * finishes last among the (token, head)'s splits takes them all in split order (the
         * same sums whichever finishes last), as one softmax over every cell */
        float *mine = a.part + ((size_t)qh * a.splits + split) * PART_STRIDE;
#pragma unroll
        for (int r = 0; r < PER_THREAD; r++)
            if (tid + r * TILE < a.hd_v)
                mine[2 + tid + r * TILE] = o[r];
        if (tid == 0)
            mine[0] = m, mine[1] = sum;
        __threadfence(); /* the partials are visible before the count says so */
        __syncthreads();
        if (tid == 0)
            last_split = atomicAdd(&a.count[qh], 1) == used - 1;
        __syncthreads();
        if (!last_split)
            return;
        __threadfence();
        const float *all = a.part + (size_t)qh * a.splits * PART_STRIDE;
        float m_all = -INFINITY;
        for (int j = 0; j < used; j++)
            m_all = fmaxf(m_all, __ldcg(all + (size_t)j * PART_STRIDE));
        sum = 0.0f;
#pragma unroll
        for (int r = 0; r < PER_THREAD; r++)
            o[r] = 0.0f;
        for (int j = 0; j < used; j++) {
            const float *pj = all + (size_t)j * PART_STRIDE, mj = __ldcg(pj);
            const float w = mj == -INFINITY ? 0.0f : expf(mj - m_all); /* nothing seen there */
            sum += __ldcg(pj + 1) * w;
#pragma unroll
            for (int r = 0; r < PER_THREAD; r++)
                if (tid + r * TILE < a.hd_v)
                    o[r] += __ldcg(pj + 2 + tid + r * TILE) * w;
        }
        m = m_all;
        if (tid == 0) /* ready for the next step */
            a.count[qh] = 0;
    }
    float *y = a.y + ((size_t)t * a.n_head + h) * a.hd_v;
    float keep = cuda_join_sink(a.sinks, h, &m, &sum);
    float inv = sum > 0.0f ? keep / sum : 0.0f; /* nothing visible: zeros, as the CPU */
#pragma unroll
    for (int r = 0; r < PER_THREAD; r++) {
        int i = tid + r * TILE;
        if (i < a.hd_v) {
            y[i] = o[r] * inv;
            if (a.xq) /* hd_v % 32 == 0: a warp holds 32 consecutive outputs */
                cvd_quantize_warp(o[r] * inv, a.xq + (((size_t)t * a.n_head + h) * a.hd_v + i) / 32,
                                  tid % 32);
        }
    }
}

/* Prompts: a block takes QT queries of one head and walks the cells CT at a time, the tile of
 * keys and values in shared memory shared by all its queries (the per-query kernel reads every
 * key and value once per query). Scores, the online softmax and the weighted values are kept
 * for all QT queries at once: thread t owns output dims t, t + 128 of every query. */
enum { QT = 16, CT = 32, TILED_HD = 128 };

template <int KT>
__global__ static void __launch_bounds__(TILE) attention_tiled_kernel(attn_k a, int n) {
    __shared__ float qs[QT][TILED_HD], ks[CT][TILED_HD + 1], vs[CT][TILED_HD], ps[QT][CT];
    __shared__ float m_row[QT], l_row[QT], alpha_row[QT];
    __shared__ int32_t qpos[QT], qseq[QT];
    const int h = blockIdx.y, t0 = blockIdx.x * QT, tid = threadIdx.x;
    const int kvh = h / (a.n_head / a.n_head_kv), nq = min(QT, n - t0);
    for (int i = tid; i < QT * a.hd_k; i += TILE) {
        int q = i / a.hd_k, d = i % a.hd_k;
        qs[q][d] = q < nq ? a.q[((size_t)(t0 + q) * a.n_head + h) * a.hd_k + d] : 0.0f;
    }
    if (tid < QT) {
        qpos[tid] = tid < nq ? a.q_pos[t0 + tid] : -1;
        qseq[tid] = tid < nq ? a.q_seq[t0 + tid] : 0;
        m_row[tid] = -INFINITY, l_row[tid] = 0.0f;
    }
    float acc[QT];
#pragma unroll
    for (int q = 0; q < QT; q++)
        acc[q] = 0.0f;
    for (int c0 = 0; c0 < a.n_cells; c0 += CT) {
        __syncthreads(); /* the previous tile is consumed */
        for (int i = tid; i < CT * a.hd_k; i += TILE) {
            int c = i / a.hd_k, d = i % a.hd_k;
            ks[c][d] = c0 + c < a.n_cells
                           ? kv_elem<KT>(a.kb, a.k_row, (size_t)(c0 + c), kvh * a.hd_k + d)
                           : 0.0f;
        }
        for (int i = tid; i < CT * a.hd_v; i += TILE) {
            int c = i / a.hd_v, d = i % a.hd_v;
            vs[c][d] = c0 + c < a.n_cells
                           ? kv_elem<KT>(a.vb, a.v_row, (size_t)(c0 + c), kvh * a.hd_v + d)
                           : 0.0f;
        }
        __syncthreads();
        /* scores: thread t takes cell t % CT for queries t / CT, + 4, + 8, + 12 */
        const int c = tid % CT, cell = c0 + c;
        const int32_t kp = cell < a.n_cells ? a.cell_pos[cell] : -1;
        for (int q = tid / CT; q < QT; q += TILE / CT) {
            float s = -INFINITY; /* kp >= 0: a cell of the cache */
            if (kp >= 0 && seq_set_has(a.cell_seq + (size_t)cell * SEQ_WORDS, qseq[q]) &&
                kp - qpos[q] <= a.ahead && (a.window <= 0 || qpos[q] - kp < a.window)) {
                float dot = 0.0f;
                for (int d = 0; d < a.hd_k; d++)
                    dot += qs[q][d] * ks[c][d];
                s = a.softcap == 0.0f ? dot * a.scale
                                      : a.softcap * tanhf(dot * (a.scale / a.softcap));
            }
            ps[q][c] = s;
        }
        __syncthreads();
        /* the online softmax, a warp per four query rows */
        const int warp = tid / 32, lane = tid % 32;
        for (int q = warp; q < QT; q += TILE / 32) {
            float s = ps[q][lane], mx = s;
            for (int o = 16; o > 0; o >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            float m_new = fmaxf(m_row[q], mx);
            float p = m_new == -INFINITY || s == -INFINITY ? 0.0f : expf(s - m_new), sum = p;
            for (int o = 16; o > 0; o >>= 1)
                sum += __shfl_xor_sync(0xffffffffu, sum, o);
            ps[q][lane] = p;
            __syncwarp();
            if (lane == 0) {
                float alpha = m_new == -INFINITY ? 1.0f : expf(m_row[q] - m_new);
                alpha_row[q] = alpha;
                l_row[q] = l_row[q] * alpha + sum;
                m_row[q] = m_new;
            }
        }
        __syncthreads();
        if (tid < a.hd_v) {
#pragma unroll
            for (int q = 0; q < QT; q++) {
                float o = acc[q] * alpha_row[q];
                for (int j = 0; j < CT; j++) /* masked cells: never 0 * whatever they hold */
                    if (ps[q][j] != 0.0f)
                        o += ps[q][j] * vs[j][tid];
                acc[q] = o;
            }
        }
    }
    if (tid < a.hd_v) {
#pragma unroll
        for (int q = 0; q < QT; q++) {
            float m = m_row[q], l = l_row[q], keep = cuda_join_sink(a.sinks, h, &m, &l);
            if (q < nq) /* nothing visible: zeros, as the CPU */
                a.y[((size_t)(t0 + q) * a.n_head + h) * a.hd_v + tid] =
                    l > 0.0f ? acc[q] * keep / l : 0.0f;
        }
    }
}

/* Blocks a step of qh (token, head) pairs takes per pair: as many as make one wave of the
 * kernel (4 blocks a multiprocessor), so few queries over a long cache still fill the GPU, while
 * the splits with nothing to do at short lengths stay few (H100, the 8B Q4_K_M at batch 1,
 * t/s, one block a pair against up to 32: 334 / 329 at an empty cache, 109 / 268 after 4096
 * tokens, 36.5 / 172 after 16384); OX_CUDA_ATTN_SPLITS, a measuring knob, sets the splits (1:
 * one block a pair) within the room cuda_attention_alloc made. */
static int attention_splits(const cuda_state *cs, int qh) {
    static const int knob = cuda_env_int("OX_CUDA_ATTN_SPLITS", 0, 0, MAX_SPLITS);
    if (qh <= 0)
        return 1;
    int splits = knob ? knob : 4 * cs->n_sm / qh;
    splits = splits < cs->attn_blocks / qh ? splits : cs->attn_blocks / qh;
    return splits < 2 ? 1 : splits < MAX_SPLITS ? splits : MAX_SPLITS;
}

cudaError_t cuda_attention_alloc(cuda_state *s, size_t *bytes) {
    s->attn_blocks = 16 * s->n_sm; /* room for one query of 32 heads in 64 splits */
    s->attn_floats = (size_t)s->attn_blocks * PART_STRIDE * 2;
    const size_t part = s->attn_floats * sizeof(float);
    const size_t count = (size_t)s->attn_blocks * sizeof(int);
    cudaError_t e = cudaMalloc(&s->attn_part, part);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->attn_count, count);
    if (e == cudaSuccess) /* the last split of each pair sets its count back to 0 */
        e = cudaMemset(s->attn_count, 0, count);
    *bytes = part + count;
    return e;
}

/* The per-query kernel also quantizes its output for the wo matmul next (cuda_gemv_q8.cu). */
template <int KT> static void launch(struct backend *b, const struct attn_args *a, attn_k k) {
    cuda_state *cs = cuda_of(b);
    cudaStream_t s = cs->stream;
    const int64_t width = (int64_t)a->n_head * a->hd_v;
    /* decode steps (each token of its own sequence, so nothing to share) take the per-query
     * kernel, which reads the cells in use from device memory as a recorded step must; so do
     * steps of more sequences than a recording takes: the 8B Q4_K_M model decoded 2036 t/s in
     * steps of 32 sequences this way against 1300 through the tensor-core kernel (H100) */
    if (a->n > CUDA_Q8_MAX_N && !a->one_per_seq && a->hd_k <= TILED_HD && a->hd_v <= TILED_HD) {
        attention_tiled_kernel<KT>
            <<<dim3((unsigned)((a->n + QT - 1) / QT), (unsigned)a->n_head), TILE, 0, s>>>(k, a->n);
    } else if (a->n > 0) {
        if (a->hd_v % 32 == 0 && cuda_gemv_fits(b, a->n, width)) {
            k.xq = (cvd_xq *)cs->xq[cs->xq_cur];
            cs->xq_src = a->y, cs->xq_n = a->n, cs->xq_cols = width;
        }
        /* an f16 cache's: the kernel taking a kv head's query heads together (H100, 1B Q4_0
         * after 16384 tokens 555-611 -> 746-782 t/s, 8B Q4_K_M 179-183 -> 211-212);
         * OX_CUDA_ATTN_KERNEL=0, a measuring knob, keeps this one */
        static const int grouped = cuda_env_int("OX_CUDA_ATTN_KERNEL", 1, 0, 1);
        if (grouped && cuda_decode_attention(b, a, k.xq))
            return;
        /* in one-token order each query keeps the splits of a step of it alone, room allowing */
        const int qh = a->n * a->n_head;
        k.one_token = cuda_one_token(b, a->n) && a->ahead == 0;
        k.splits = attention_splits(cs, k.one_token ? a->n_head : qh);
        if (k.one_token &&
            (qh > cs->attn_blocks || (size_t)qh * k.splits * PART_STRIDE > cs->attn_floats))
            k.one_token = false, k.splits = attention_splits(cs, qh);
        k.part = cs->attn_part, k.count = cs->attn_count;
        cuda_note(b,
                  cuda_launch_early(cuda_of(b)->pdl, attention_kernel<KT>,
                                    dim3((unsigned)qh, (unsigned)k.splits), dim3(TILE), 0, s, k),
                  "attention");
    }
    CUDA_LAUNCHED(b, "attention");
}

/* Keys and values from the KV cache itself (the backend sets attention_reads_cache), or from
 * float arrays (the op test, and any caller that loaded the cache first). */
void cuda_attention(struct backend *b, const struct attn_args *a) {
    if (!a->one_per_seq && cuda_flash_attention(b, a))
        return;
    if (a->hd_k > MAX_HD || a->hd_v > MAX_HD) {
        cuda_note(b, cudaErrorInvalidValue, "attention: head size over 512");
        return;
    }
    bool cached = a->k_cache != NULL;
    attn_k k = {a->q,
                cached ? a->k_cache : (const uint8_t *)a->k,
                cached ? a->v_cache : (const uint8_t *)a->v,
                cached ? a->k_row : (size_t)a->n_head_kv * a->hd_k * sizeof(float),
                cached ? a->v_row : (size_t)a->n_head_kv * a->hd_v * sizeof(float),
                a->y,
                a->n_head,
                a->n_head_kv,
                a->hd_k,
                a->hd_v,
                a->n_cells,
                a->window,
                a->ahead,
                a->q_pos,
                a->q_seq,
                a->cell_pos,
                a->cell_seq,
                a->n_cells_now,
                a->scale,
                a->softcap,
                a->sinks,
                nullptr,
                a->seq_span,
                1,
                nullptr,
                nullptr,
                false};
    if (cached && a->cache_type == OX_DTYPE_F16)
        launch<OX_DTYPE_F16>(b, a, k);
    else if (cached && a->cache_type == OX_DTYPE_Q8_0)
        launch<OX_DTYPE_Q8_0>(b, a, k);
    else if (!cached || a->cache_type == OX_DTYPE_F32)
        launch<OX_DTYPE_F32>(b, a, k);
    else
        cuda_note(b, cudaErrorInvalidValue, "attention: cache type");
}
