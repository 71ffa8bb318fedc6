/* cuda_mma_half.cu: f16 / bf16 weights times a few tokens (2 to cuda_half_mma_max_n()) on the
 * tensor cores, the weights streamed from global memory straight into mma fragments: q, k and
 * v in one launch, gate and up with their GLU, y += W x, a folded norm's rms inside. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_ops.cuh"

/* Each block takes RPB = 16 MT rows (of each of gate and up for a GLU); its HM_WARPS warps
 * share their columns, chunk q of 64 going to warp q % HM_WARPS, so a block's warps read 1 KB
 * of each row side by side. A lane loads 32 bytes of a row (columns 16 tig .. 16 tig + 15 of
 * the chunk, tig = lane % 4) for rows g and g + 8 of each 16-row tile (g = lane / 4): the
 * fragments of four m16n8k16 products once the columns are renamed. The product sums over its
 * 16 columns in any order, so product s may take columns 16 tig + 4 s .. + 3 as its k = 2 tig,
 * 2 tig + 1, 2 tig + 8, 2 tig + 9, the places the lane holds in A's fragment; B's fragment
 * (token g, the same k) is then x's same four columns, which the lane reads as floats and
 * rounds to the weights' type. Nothing is staged, so warps never wait for each other until the
 * end, where their partial sums meet in shared memory and are added in warp order (the same
 * bits every run). Before it the float GEMV (cuda_matmul.cu) took up to 8 tokens, bound by its
 * shared-memory reads of x, and cuBLAS more: H100, 8B F16 decoding 8 sequences 422 t/s (one
 * 187), now 1360 (llama.cpp 1053 in the same lease); 16 sequences 2103, now 2425. */
constexpr int HM_WARPS = 8;
constexpr int HM_THREADS = 32 * HM_WARPS;
constexpr int HM_CHUNK = 64;

struct hm_job {
    const uint8_t *w[3]; /* up to three matrices of one type and width (or gate, up) */
    float *y[3];
    int64_t rows[3];
    int block_end[3]; /* matrix m owns blocks [block_end[m - 1], block_end[m]) */
    size_t row_bytes;
    const float *x; /* n rows of n_cols floats */
    int n_cols, n, glu, accumulate;
    bool norm; /* scale by 1 / rms(x) (the norm's weight folded into the matrices) */
    float norm_eps;
};

template <enum ox_dtype T>
__device__ __forceinline__ void hm_mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1) {
    if constexpr (T == OX_DTYPE_F16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Two floats in the weights' type, packed as the fragments hold them (the first low). */
template <enum ox_dtype T> __device__ __forceinline__ uint32_t hm_pack(float lo, float hi) {
    if constexpr (T == OX_DTYPE_F16) {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *(const uint32_t *)&h;
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *(const uint32_t *)&h;
    }
}

/* The lane's 16 columns of token t at col (zeros past n), as floats. */
__device__ __forceinline__ void hm_load_x(const hm_job &job, int t, int64_t col, float4 (&v)[4]) {
    const float4 *p = (const float4 *)(job.x + (size_t)t * job.n_cols + col);
#pragma unroll
    for (int i = 0; i < 4; i++)
        v[i] = t < job.n ? __ldg(p + i) : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* Those columns as B fragments, bx[2 s], bx[2 s + 1] for product s; with NORM, their squares
 * added to ss. */
template <enum ox_dtype T, bool NORM>
__device__ __forceinline__ void hm_pack_x(const float4 (&v)[4], uint32_t (&bx)[8], float &ss) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        bx[2 * i] = hm_pack<T>(v[i].x, v[i].y), bx[2 * i + 1] = hm_pack<T>(v[i].z, v[i].w);
        if constexpr (NORM)
            ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    }
}

/* Row r's 32 bytes at column col: 16 weights, products s = 0..3 taking words 2 s, 2 s + 1. */
__device__ __forceinline__ void hm_load_w(const uint8_t *w, size_t row_bytes, int64_t r,
                                          int64_t col, uint4 (&u)[2]) {
    const uint4 *p = (const uint4 *)(w + (size_t)r * row_bytes + (size_t)col * 2);
    u[0] = __ldg(p), u[1] = __ldg(p + 1);
}

/* The four products of one 16-row tile (its rows g and g + 8: wa, wb) and token tile. */
template <enum ox_dtype T>
__device__ __forceinline__ void hm_tile(float (&c)[4], const uint4 (&wa)[2], const uint4 (&wb)[2],
                                        const uint32_t (&bx)[8]) {
    const uint32_t *a = (const uint32_t *)wa, *b = (const uint32_t *)wb;
#pragma unroll
    for (int s = 0; s < 4; s++)
        hm_mma<T>(c, a[2 * s], b[2 * s], a[2 * s + 1], b[2 * s + 1], bx[2 * s], bx[2 * s + 1]);
}

/* The chunk at column col (the lane's own) of the lane's rows r of each matrix s. */
template <int S, int MT>
__device__ __forceinline__ void hm_load_rows(const uint8_t *const (&w)[S], size_t row_bytes,
                                             const int64_t (&r)[MT][2], int64_t col,
                                             uint4 (&wv)[S][MT][2][2]) {
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                hm_load_w(w[s], row_bytes, r[i][h], col, wv[s][i][h]);
}

/* The warp's sums over its chunks (q = warp, warp + HM_WARPS, ...) into acc, and with NORM its
 * lanes' shares of x's squares (token 8 j + g) into ss. */
template <enum ox_dtype T, int S, int MT, int NT, bool NORM>
__device__ __forceinline__ void hm_sums(const hm_job &job, const uint8_t *const (&w)[S],
                                        const int64_t (&r)[MT][2], int warp, int g, int tig,
                                        float (&acc)[S][MT][NT][4], float (&ss)[NT]) {
    const int chunks = job.n_cols / HM_CHUNK;
    uint4 wv[S][MT][2][2];
    float4 xv[NT][4];
    /* a chunk's weights and x are asked for together, the next ones right after the products
     * (x asked for only when its products came kept a warp waiting on the L2 after memory:
     * H100, 4096 x 14336 at 16 tokens 63 us, then 51; 8B F16 at 16 sequences 2146 -> 2446
     * t/s); the first chunk's weights before the kernel before this one has finished */
    int64_t col = (int64_t)warp * HM_CHUNK + 16 * tig;
    if (warp < chunks)
        hm_load_rows<S, MT>(w, job.row_bytes, r, col, wv);
    cuda_wait_previous();
    if (warp < chunks)
#pragma unroll
        for (int j = 0; j < NT; j++)
            hm_load_x(job, 8 * j + g, col, xv[j]);
    for (int q = warp; q < chunks; q += HM_WARPS) {
        uint32_t bx[NT][8];
#pragma unroll
        for (int j = 0; j < NT; j++)
            hm_pack_x<T, NORM>(xv[j], bx[j], ss[j]);
#pragma unroll
        for (int s = 0; s < S; s++)
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++)
                    hm_tile<T>(acc[s][i][j], wv[s][i][0], wv[s][i][1], bx[j]);
        col += HM_WARPS * HM_CHUNK;
        if (q + HM_WARPS < chunks) {
            hm_load_rows<S, MT>(w, job.row_bytes, r, col, wv);
#pragma unroll
            for (int j = 0; j < NT; j++)
                hm_load_x(job, 8 * j + g, col, xv[j]);
        }
    }
}

/* The block's outputs from its warps' partial sums (added in warp order) and, with NORM, x's
 * squares: y = W x (or y += W x; a GLU's act(gate) * up) for its rows of the matrix. */
template <int S, int RPB, int TOK, bool GLU, bool NORM>
__device__ __forceinline__ void hm_write(const hm_job &job, const float (*part)[S][RPB * TOK],
                                         const float (*sq)[TOK], float *y, int64_t rows,
                                         int64_t row0) {
    for (int o = threadIdx.x; o < RPB * TOK; o += HM_THREADS) {
        const int rl = o % RPB, t = o / RPB;
        if (t >= job.n || row0 + rl >= rows)
            continue;
        float v[S], scale = 1.f;
        if constexpr (NORM) { /* W (g x / rms(x)) = (W g) x / rms(x): cuda_gemv_half.cu */
            float sum = 0.f;
#pragma unroll
            for (int k = 0; k < HM_WARPS; k++)
                sum += sq[k][t];
            scale = rsqrtf(sum / (float)job.n_cols + job.norm_eps);
        }
#pragma unroll
        for (int s = 0; s < S; s++) {
            v[s] = 0.f;
#pragma unroll
            for (int k = 0; k < HM_WARPS; k++)
                v[s] += part[k][s][o];
            v[s] *= scale;
        }
        const float out = GLU ? cuda_glu_act(job.glu, v[0]) * v[S - 1] : v[0];
        float *d = y + (size_t)t * rows + row0 + rl;
        *d = job.accumulate ? *d + out : out;
    }
}

/* y[t][row] = sum_c W[row][c] x[t][c] for t < n <= 8 NT, RPB = 16 MT rows of a matrix per
 * block (S = 2: gate and up rows, then y = act(gate) * up). */
template <enum ox_dtype T, int MT, int NT, bool GLU, bool NORM>
__global__ void __launch_bounds__(HM_THREADS, 2) hm_kernel(const hm_job job) {
    constexpr int S = GLU ? 2 : 1, RPB = 16 * MT, TOK = 8 * NT;
    __shared__ float part[HM_WARPS][S][RPB * TOK];
    __shared__ float sq[HM_WARPS][TOK];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
    const int blk = (int)blockIdx.x;
    const int m = blk < job.block_end[0] ? 0 : blk < job.block_end[1] ? 1 : 2;
    /* the block's matrix: selects, not indexed reads of the parameter block (a local copy) */
    const int64_t rows = m == 0 ? job.rows[0] : m == 1 ? job.rows[1] : job.rows[2];
    const int first = m == 0 ? 0 : m == 1 ? job.block_end[0] : job.block_end[1];
    const int64_t row0 = (int64_t)(blk - first) * RPB;
    float *y = m == 0 ? job.y[0] : m == 1 ? job.y[1] : job.y[2];
    const uint8_t *w[S];
    w[0] = m == 0 ? job.w[0] : m == 1 ? job.w[1] : job.w[2];
    if constexpr (GLU)
        w[1] = job.w[1];
    int64_t r[MT][2]; /* the lane's rows, those past the matrix reading its last */
#pragma unroll
    for (int i = 0; i < MT; i++) {
        r[i][0] = min(row0 + 16 * i + g, rows - 1);
        r[i][1] = min(row0 + 16 * i + g + 8, rows - 1);
    }
    float acc[S][MT][NT][4] = {};
    float ss[NT] = {};
    hm_sums<T, S, MT, NT, NORM>(job, w, r, warp, g, tig, acc, ss);
    cuda_let_next_start();
    /* C fragment: c[0], c[1] row g, tokens 2 tig, 2 tig + 1; c[2], c[3] row g + 8 */
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                float *p = part[warp][s] + 16 * i + g + RPB * (8 * j + 2 * tig);
                p[0] = acc[s][i][j][0], p[RPB] = acc[s][i][j][1];
                p[8] = acc[s][i][j][2], p[RPB + 8] = acc[s][i][j][3];
            }
    if constexpr (NORM)
#pragma unroll
        for (int j = 0; j < NT; j++) {
            ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 1);
            ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 2);
            if (tig == 0)
                sq[warp][8 * j + g] = ss[j];
        }
    __syncthreads();
    hm_write<S, RPB, TOK, GLU, NORM>(job, part, sq, y, rows, row0);
}

int cuda_half_mma_max_n(void) { /* read once (thread-safe initialisation) */
    static const int v = cuda_env_int("OX_CUDA_HALF_MMA_MAX_N", 16, 0, 16);
    return v;
}

/* Tiles by batch: one token tile up to 8 tokens, two up to 16; rpb rows a block (a GLU's 16
 * are pairs of gate and up rows). */
template <enum ox_dtype T, bool GLU, bool NORM>
static void hm_launch_t(struct backend *b, const hm_job &job, int blocks, int rpb) {
    cuda_state *s = cuda_of(b);
    void (*kernel)(const hm_job) =
        job.n <= 8 ? hm_kernel<T, 1, 1, GLU, NORM> : hm_kernel<T, 1, 2, GLU, NORM>;
    if constexpr (!GLU)
        if (rpb == 32)
            kernel = job.n <= 8 ? hm_kernel<T, 2, 1, false, NORM> : hm_kernel<T, 2, 2, false, NORM>;
    cuda_note(b,
              cuda_launch_early(s->pdl, kernel, dim3((unsigned)blocks), dim3(HM_THREADS), 0,
                                s->stream, job),
              "cuda_mma_half: kernel");
}

/* Whether the kernel takes n tokens through matrices like w and x: f16 or bf16 rows 16-byte
 * aligned, widths a multiple of 64, x 16-byte aligned rows. */
static bool hm_takes(const struct mat *w, const float *x, int n) {
    return n >= 2 && n <= cuda_half_mma_max_n() &&
           (w->type == OX_DTYPE_F16 || w->type == OX_DTYPE_BF16) && w->n_cols % HM_CHUNK == 0 &&
           w->n_cols <= INT32_MAX && (((uintptr_t)w->data | w->row_bytes | (uintptr_t)x) & 15) == 0;
}

/* Rows of each matrix per block: one 16-row tile of gate and one of up; else two 16-row tiles
 * where that still makes two blocks per multiprocessor, one where it would not. H100, us, 8 / 16
 * tokens, 32 rows against 16: 14336 x 4096 42.3 / 44.4 against 45.8 / 53.3, 128256 x 4096 349 /
 * 360 against 349 / 400; 4096 x 4096 10.4 / 14.9 against 9.2 / 14.0, 4096 x 14336 44.4 / 50.9
 * against 44.3 / 46.8. */
static int hm_rows_per_block(struct backend *b, bool glu, int64_t rows) {
    return glu || rows < (int64_t)64 * cuda_of(b)->n_sm ? 16 : 32;
}

/* Completes the job for count matrices like w[0] (a GLU: gate, its up already in job.w[1]) and
 * launches it; false where the kernel does not take them, x or the norm (only one whose weight
 * is folded into the matrices: the kernel reads nothing but x). */
static bool hm_run(struct backend *b, hm_job &job, const struct mat *w, int count, const float *x,
                   const struct norm_in *norm, int n) {
    if (!hm_takes(&w[0], x, n) || (norm && norm->w))
        return false;
    const bool glu = job.glu >= 0;
    int64_t all_rows = 0;
    for (int m = 0; m < count; m++)
        all_rows += w[m].n_rows;
    const int rpb = hm_rows_per_block(b, glu, all_rows);
    int blocks = 0;
    for (int m = 0; m < 3; m++) {
        if (m < count) {
            if (((uintptr_t)w[m].data & 15) || w[m].n_rows <= 0 || w[m].n_rows > INT32_MAX / 2)
                return false;
            job.w[m] = (const uint8_t *)w[m].data, job.rows[m] = w[m].n_rows;
            blocks += (int)((w[m].n_rows + rpb - 1) / rpb);
        }
        job.block_end[m] = blocks;
    }
    job.row_bytes = w[0].row_bytes, job.x = x, job.n_cols = (int)w[0].n_cols, job.n = n;
    job.norm = norm != nullptr, job.norm_eps = norm ? norm->eps : 0.f;
    const bool bf = w[0].type == OX_DTYPE_BF16;
#define HM_GO_(T, G)                                                                               \
    (job.norm ? hm_launch_t<T, G, true>(b, job, blocks, rpb)                                       \
              : hm_launch_t<T, G, false>(b, job, blocks, rpb))
    if (bf)
        glu ? HM_GO_(OX_DTYPE_BF16, true) : HM_GO_(OX_DTYPE_BF16, false);
    else
        glu ? HM_GO_(OX_DTYPE_F16, true) : HM_GO_(OX_DTYPE_F16, false);
#undef HM_GO_
    return true;
}

bool cuda_mma_half_multi(struct backend *b, int count, const struct mat *w, const float *x,
                         const struct norm_in *norm, float *const *y, int n, bool accumulate) {
    if (count < 1 || count > 3)
        return false;
    hm_job job = {};
    job.glu = -1, job.accumulate = accumulate;
    for (int m = 0; m < count; m++)
        job.y[m] = y[m];
    if (!hm_run(b, job, w, count, x, norm, n))
        return false;
    for (int m = 0; m < count; m++)
        cuda_q8_written(b, y[m], n, w[m].n_rows);
    return true;
}

bool cuda_mma_half_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                       const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                       int n) {
    if ((uintptr_t)up->data & 15) /* hm_run checks gate */
        return false;
    hm_job job = {};
    job.w[1] = (const uint8_t *)up->data, job.y[0] = y, job.glu = (int)kind;
    if (!hm_run(b, job, gate, 1, x, norm, n))
        return false;
    cuda_q8_written(b, y, n, gate->n_rows);
    return true;
}
