/* cuda_flash_attention.cu: attention of prompts on the tensor cores (WMMA tiles of f16 operands,
 * f32 sums). A block takes 64 queries of one head, 16 per warp, and walks the cache 64 cells at a
 * time: S = Q K^T on the tensor cores, the online softmax in f32 row by row, then O += P V on the
 * tensor cores with P rounded to f16, as llama.cpp's CUDA flash attention does. O stays in shared
 * memory, where each row is rescaled by the softmax's correction before the next product. */
#include <mma.h>

#include "backend/cuda/cuda_ops.cuh"

namespace {
using namespace nvcuda;

constexpr int FA_WARPS = 4, FA_Q = 16 * FA_WARPS, FA_C = 64, FA_THREADS = 32 * FA_WARPS;
constexpr int FA_MAX_HD = 256;
constexpr int S_LD = FA_C + 4, P_LD = FA_C + 8; /* padded rows: fewer bank conflicts */

/* Byte offsets in shared memory for head size hd: the Q, K and V tiles in f16 (rows ld halves
 * apart), then per warp its scores S (f32), probabilities P (f16) and output rows O (f32). Every
 * part and row block starts 32-byte aligned, as WMMA's loads need. */
struct fa_layout {
    int ld, o_ld;
    size_t k, v, s, p, o, q_last, cpos, cseq, total;
};

__host__ __device__ inline fa_layout fa_smem(int hd) {
    fa_layout l;
    l.ld = hd + 8, l.o_ld = hd + 4;
    const size_t tile = (size_t)FA_C * l.ld * sizeof(__half); /* FA_Q == FA_C rows */
    l.k = tile, l.v = 2 * tile, l.s = 3 * tile;
    l.p = l.s + (size_t)FA_Q * S_LD * sizeof(float);
    l.o = l.p + (size_t)FA_Q * P_LD * sizeof(__half);
    l.q_last = l.o + (size_t)FA_Q * l.o_ld * sizeof(float);
    /* twice (by the tile's parity) its cells' positions and one word of their sequence sets:
     * 1.5 KB, which leaves two blocks of head size 128 room on a multiprocessor (the whole sets,
     * 4.6 KB, left one) */
    l.cpos = l.q_last + 16, l.cseq = l.cpos + 2 * FA_C * sizeof(int32_t);
    l.total = l.cseq + 2 * FA_C * sizeof(uint64_t); /* all of it dynamic: the limit covers it */
    return l;
}

/* Cells [c0, c0 + FA_C) of one kv head, keys to ks and values to vs, as tiles of f16 rows.
 * Free cells and those past n_cells (cpos < 0, staged in shared memory) become zeros: a zero
 * probability times a stale NaN would still be NaN. Keys and values in one loop, whose loads
 * depend on nothing but shared memory, so a thread has all of its on the way at once. */
template <int KT>
__device__ void fa_load_tiles(__half *ks, __half *vs, int ld, int kvh, int hd, int c0,
                              const int32_t *cpos, const attn_args &a) {
    if constexpr (KT == OX_DTYPE_F16) { /* 16 bytes at a time (rows checked 16-byte aligned) */
        const int chunks = hd / 8;
        const size_t off = (size_t)kvh * hd * sizeof(__half);
#pragma unroll 4
        for (int i = threadIdx.x; i < FA_C * chunks; i += FA_THREADS) {
            const int c = i / chunks, j = i % chunks;
            const size_t cell = (size_t)(c0 + c);
            uint4 k = make_uint4(0, 0, 0, 0), v = k;
            if (cpos[c] >= 0) {
                k = __ldg((const uint4 *)(a.k_cache + cell * a.k_row + off) + j);
                v = __ldg((const uint4 *)(a.v_cache + cell * a.v_row + off) + j);
            }
            *((uint4 *)(ks + (size_t)c * ld) + j) = k;
            *((uint4 *)(vs + (size_t)c * ld) + j) = v;
        }
    } else {
        for (int i = threadIdx.x; i < FA_C * hd; i += FA_THREADS) {
            const int c = i / hd, d = i % hd;
            const bool live = cpos[c] >= 0;
            const size_t cell = (size_t)(c0 + c);
            ks[(size_t)c * ld + d] =
                __float2half(live ? kv_elem<KT>(a.k_cache, a.k_row, cell, kvh * hd + d) : 0.f);
            vs[(size_t)c * ld + d] =
                __float2half(live ? kv_elem<KT>(a.v_cache, a.v_row, cell, kvh * hd + d) : 0.f);
        }
    }
}

/* The tile's cells, read once into shared memory: their positions (-1: free or past the end)
 * and word `word` of their sequence sets. Returns this thread's cell's position (-1 past the
 * tile). */
__device__ __forceinline__ int32_t fa_stage_cells(const attn_args &a, int c0, int word,
                                                  int32_t *cpos, uint64_t *cseq) {
    const int cell = c0 + (int)threadIdx.x;
    if (threadIdx.x >= FA_C)
        return -1;
    const int32_t kp = cell < a.n_cells ? a.cell_pos[cell] : -1;
    cpos[threadIdx.x] = kp;
    cseq[threadIdx.x] = kp >= 0 ? a.cell_seq[(size_t)cell * SEQ_WORDS + word] : 0;
    return kp;
}

/* Word q_word of the sequence set of the tile's cell c: staged, when it is the block's word. */
__device__ __forceinline__ uint64_t cell_set(const attn_args &a, const uint64_t *cseq, int c0,
                                             int c, int q_word, int blk_word) {
    return q_word == blk_word ? cseq[c] : a.cell_seq[(size_t)(c0 + c) * SEQ_WORDS + q_word];
}

/* Two blocks per multiprocessor, so 255 registers a thread: without a minimum, ptxas held it to
 * 64 and spilled (a spill in the decode attention kernel once cost 18% of decode speed). */
template <int KT>
__global__ void __launch_bounds__(FA_THREADS, 2) flash_attention_kernel(const attn_args a) {
    extern __shared__ __align__(128) uint8_t smem[];
    const int hd = a.hd_k, h = blockIdx.y, t0 = blockIdx.x * FA_Q;
    const int kvh = h / (a.n_head / a.n_head_kv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const fa_layout L = fa_smem(hd);
    __half *qs = (__half *)smem, *ks = (__half *)(smem + L.k), *vs = (__half *)(smem + L.v);
    float *ss = (float *)(smem + L.s) + warp * 16 * S_LD;
    __half *ps = (__half *)(smem + L.p) + warp * 16 * P_LD;
    float *os = (float *)(smem + L.o) + (size_t)warp * 16 * L.o_ld;
    int32_t &q_last = *(int32_t *)(smem + L.q_last); /* the block's latest query position */
    int32_t *cpos_all = (int32_t *)(smem + L.cpos);
    uint64_t *cseq_all = (uint64_t *)(smem + L.cseq);

    if (threadIdx.x == 0)
        q_last = -1;
    for (int i = threadIdx.x; i < FA_Q * hd; i += FA_THREADS) { /* q rows (zeros past n) */
        const int r = i / hd, d = i % hd, t = t0 + r;
        qs[r * L.ld + d] = __float2half(t < a.n ? a.q[((size_t)t * a.n_head + h) * hd + d] : 0.f);
    }
    for (int i = lane; i < 16 * L.o_ld; i += 32)
        os[i] = 0.f;
    __syncthreads();
    if (threadIdx.x < FA_Q && t0 + threadIdx.x < a.n)
        atomicMax(&q_last, a.q_pos[t0 + threadIdx.x]); /* later cells are masked */
    __syncthreads();
    /* this lane's row of its warp's 16, and which half of the tile's columns it takes */
    const int r = lane / 2, half = lane % 2, tq = t0 + warp * 16 + r;
    const bool live = tq < a.n;
    const int32_t qp = live ? a.q_pos[tq] : -1, qseq = live ? a.q_seq[tq] : 0;
    /* the word of the sequence sets staged for the block: its first query's (a prompt's
     * queries are of one sequence, or of few); a query of another word reads its own */
    const int blk_word = a.q_seq[t0] / 64, q_word = qseq / 64, q_bit = qseq % 64;
    float m = -INFINITY, l = 0.f;

    for (int c0 = 0; c0 < a.n_cells; c0 += FA_C) {
        /* the half of the buffers the previous tile did not use (a warp may still read that) */
        int32_t *cpos = cpos_all + (c0 / FA_C % 2) * FA_C;
        uint64_t *cseq = cseq_all + (c0 / FA_C % 2) * FA_C;
        const int32_t kp = fa_stage_cells(a, c0, blk_word, cpos, cseq);
        /* a tile none of the block's queries can see is skipped (the causal half of a prompt) */
        if (!__syncthreads_or(kp >= 0 &&
                              kp - a.ahead <= q_last)) /* also: the last tile is consumed */
            continue;
        fa_load_tiles<KT>(ks, vs, L.ld, kvh, hd, c0, cpos, a);
        __syncthreads();
        for (int j = 0; j < FA_C / 16; j++) { /* S = Q K^T, 16 cells at a time */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.f);
            for (int k0 = 0; k0 < hd; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fq;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fk;
                wmma::load_matrix_sync(fq, qs + warp * 16 * L.ld + k0, L.ld);
                wmma::load_matrix_sync(fk, ks + j * 16 * L.ld + k0, L.ld);
                wmma::mma_sync(acc, fq, fk, acc);
            }
            wmma::store_matrix_sync(ss + j * 16, acc, S_LD, wmma::mem_row_major);
        }
        __syncwarp();
        /* the online softmax of row r over columns half * 32 .. + 32 (masked: -inf) */
        float sv[32], mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int c = half * 32 + j;
            float s = -INFINITY;
            if (live) {
                const int32_t p = cpos[c]; /* then, of a live cell, the set */
                if (p >= 0 && p - qp <= a.ahead && (a.window <= 0 || qp - p < a.window) &&
                    (cell_set(a, cseq, c0, c, q_word, blk_word) >> q_bit & 1)) {
                    const float raw = ss[r * S_LD + half * 32 + j];
                    s = a.softcap == 0.f ? raw * a.scale
                                         : a.softcap * tanhf(raw * (a.scale / a.softcap));
                }
            }
            sv[j] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m, mx);
        const float alpha = m_new == -INFINITY ? 1.f : expf(m - m_new); /* 0 when m was -inf */
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const float p = sv[j] == -INFINITY ? 0.f : expf(sv[j] - m_new);
            sum += p;
            ps[r * P_LD + half * 32 + j] = __float2half(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum, m = m_new;
        for (int d = half; d < hd; d += 2)
            os[r * L.o_ld + d] *= alpha;
        __syncwarp();
        for (int d0 = 0; d0 < hd; d0 += 16) { /* O += P V, 16 output dims at a time */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, os + d0, L.o_ld, wmma::mem_row_major);
            for (int k0 = 0; k0 < FA_C; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fp;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fv;
                wmma::load_matrix_sync(fp, ps + k0, P_LD);
                wmma::load_matrix_sync(fv, vs + k0 * L.ld + d0, L.ld);
                wmma::mma_sync(acc, fp, fv, acc);
            }
            wmma::store_matrix_sync(os + d0, acc, L.o_ld, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (live) /* nothing visible: zeros, as the CPU */
        for (int d = half; d < hd; d += 2)
            a.y[((size_t)tq * a.n_head + h) * hd + d] = l > 0.f ? os[r * L.o_ld + d] / l : 0.f;
}

int fa_smem_limit; /* what this GPU allows a block (cuda_flash_attention_init) */

} // namespace

/* A GPU that refuses the shared memory just leaves prompts to the other attention kernels. */
cudaError_t cuda_flash_attention_init(void) {
    int device = 0, limit = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    const int want = (int)fa_smem(FA_MAX_HD).total;
    limit = limit < want ? limit : want;
    if (e == cudaSuccess &&
        (cudaFuncSetAttribute(flash_attention_kernel<OX_DTYPE_F16>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit) != cudaSuccess ||
         cudaFuncSetAttribute(flash_attention_kernel<OX_DTYPE_Q8_0>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit) != cudaSuccess)) {
        cudaGetLastError(); /* not an error to keep */
        limit = 0;
    }
    fa_smem_limit = limit;
    return e;
}

bool cuda_flash_attention(struct backend *b, const struct attn_args *a) {
    const int hd = a->hd_k;
    const bool f16 = a->cache_type == OX_DTYPE_F16;
    if (!a->k_cache || a->n < 16 || hd != a->hd_v || hd % 16 || hd > FA_MAX_HD ||
        (!f16 && a->cache_type != OX_DTYPE_Q8_0) || (f16 && (a->k_row | a->v_row) % 16) ||
        a->n_head % a->n_head_kv || a->sinks) /* sinks: the kernels of cuda_attention.cu */
        return false;
    const size_t smem = fa_smem(hd).total;
    if (smem > (size_t)fa_smem_limit)
        return false;
    const dim3 grid((unsigned)((a->n + FA_Q - 1) / FA_Q), (unsigned)a->n_head);
    cudaStream_t st = cuda_of(b)->stream;
    if (f16)
        flash_attention_kernel<OX_DTYPE_F16><<<grid, FA_THREADS, smem, st>>>(*a);
    else
        flash_attention_kernel<OX_DTYPE_Q8_0><<<grid, FA_THREADS, smem, st>>>(*a);
    CUDA_LAUNCHED(b, "flash attention");
    return true;
}
