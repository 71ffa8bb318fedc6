/* cuda_mmq_tile.cuh: the pieces of cuda_mmq.cu's tiles that do not depend on how the products
 * are scaled: a stage of 8 groups of 32 columns, the shared-memory copy of a stage's stored
 * bytes, fragment loads, and the column splits' partial sums. */
#ifndef OX_BACKEND_CUDA_MMQ_TILE_CUH
#define OX_BACKEND_CUDA_MMQ_TILE_CUH

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_dequant.cuh"
#include "backend/cuda/cuda_mmq_quantize.cuh"

/* Groups of 32 columns per stage: one k-quant super-block. */
constexpr int MQ_KG = 8;

/* A stage's bytes of a row as stored (groups per block GPB, block bytes BS), and the room its
 * copy takes in shared memory: whole 16-byte chunks, one more where a stage may start within
 * one (the k-quants whose blocks are not a multiple of 16 bytes). ALIGN: what the block starts
 * of such a copy are aligned to (the fields' loads follow from it, as from a row's start). */
template <enum ox_dtype T> struct mq_raw {
    static constexpr int GPB = dq<T>::QK / 32, BS = dq<T>::BS, BYTES = MQ_KG / GPB * BS;
    static constexpr int ROOM = (BYTES + 15) / 16 * 16 + (BYTES % 16 ? 16 : 0);
    static constexpr int ALIGN = cdq_align(16, BS, 0);
};

/* Four 8 x 16-byte tiles of shared memory, each lane giving one row's address (lanes 8i ..
 * 8i + 7 tile i's), into the mma fragment layout: r[i] holds word lane % 4 of row lane / 4
 * of tile i. */
__device__ __forceinline__ void mq_ldmatrix4(uint32_t r[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

/* The first two of those tiles (the addresses of lanes 0 .. 15). */
__device__ __forceinline__ void mq_ldmatrix2(uint32_t r[2], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
#endif
}

/* A stream of a launch's work (stream-K): its tiles' stages in one sequence (a tile's
 * consecutively, row tiles along the matrices first), cut into blocks equal parts; a tile whose
 * stages two or more blocks share gets each one's partial sums in a slab of its own, in block
 * order, and the reduction adds them. units 0: a block per tile and split (blockIdx). */
struct mq_stream {
    int64_t units; /* tiles times stages */
    int blocks, stages, row_tiles;
};

/* Block b's first unit; the block a unit belongs to; the blocks sharing tile t. */
__host__ __device__ inline int64_t mqs_start(const mq_stream &st, int64_t b) {
    return b * st.units / st.blocks;
}
__host__ __device__ inline int64_t mqs_block_of(const mq_stream &st, int64_t u) {
    return ((u + 1) * st.blocks - 1) / st.units;
}
__host__ __device__ inline int mqs_segments(const mq_stream &st, int64_t t) {
    return (int)(mqs_block_of(st, (t + 1) * st.stages - 1) - mqs_block_of(st, t * st.stages) + 1);
}

/* How many partial sums an output has: splits, or (splits 0) its tile's segments of the stream;
 * the output i of matrix m is token i / rows[m], row i % rows[m]. */
struct mq_parts {
    int splits;
    mq_stream st;
    int bm, bn, rows[3], tile0[3];
    __device__ int at(size_t i, int m) const {
        if (splits)
            return splits;
        const int tok = (int)(i / (size_t)rows[m]), row = (int)(i % (size_t)rows[m]);
        return mqs_segments(st, (int64_t)(tok / bn) * st.row_tiles + tile0[m] + row / bm);
    }
};

/* Where the sums of a launch's matrices go: outputs [end[m - 1], end[m]) to y[m]. */
struct mq_dests {
    float *y[3];
    size_t end[3];
};

/* y[t][r] = (y[t][r] +) the sum of the partial sums, in split order (so a batch's result does
 * not depend on which split finished first). */
__global__ static void mq_reduce_kernel(const float *__restrict__ part, const mq_dests d,
                                        size_t count, const mq_parts p, int accumulate) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const int m = i < d.end[0] ? 0 : i < d.end[1] ? 1 : 2;
        const size_t at = i - (m ? d.end[m - 1] : 0);
        float *y = (m == 0 ? d.y[0] : m == 1 ? d.y[1] : d.y[2]) + at;
        float v = accumulate ? *y : 0.f;
        for (int z = 0, parts = p.at(at, m); z < parts; z++)
            v += part[(size_t)z * count + i];
        *y = v;
    }
}

/* A GLU's first half: gate's sums (each part's first count floats of its slab) and up's (the
 * next count), added in split order as above, then y = act(gate) * up. */
__global__ static void mq_reduce_glu_kernel(const float *__restrict__ part, float *__restrict__ y,
                                            size_t count, size_t slab, const mq_parts p, int kind) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = 0.f, u = 0.f;
        for (int z = 0, parts = p.at(i, 0); z < parts; z++)
            g += part[(size_t)z * slab + i];
        for (int z = 0, parts = p.at(i, 1); z < parts; z++)
            u += part[(size_t)z * slab + count + i];
        y[i] = cuda_glu_value(kind, g, u);
    }
}

/* The same, 8 outputs a lane (8 rows of one tile), also quantized for the down projection that
 * reads them next (lv, sc: as cuda_mmq_quantize writes them; q8_K: rows a multiple of 256, so a
 * warp's 256 outputs are one block of a token; q8_1: of 32). */
template <bool Q8K>
__global__ static void mq_reduce_glu_q_kernel(const float *__restrict__ part, float *__restrict__ y,
                                              size_t count, size_t slab, const mq_parts p, int kind,
                                              uint8_t *__restrict__ lv, uint32_t *__restrict__ sc) {
    const size_t lanes = count / 8, lane = threadIdx.x % 32;
    for (size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32; base < lanes;
         base += (size_t)gridDim.x * blockDim.x) { /* whole warps, as the shuffles need */
        const size_t t = base + lane;
        const bool live = t < lanes;
        float v[8];
        if (live) {
            float g[8] = {}, u[8] = {}, pg[8], pu[8];
            for (int z = 0, parts = p.at(8 * t, 0); z < parts; z++) {
                mqq_load8(pg, part + (size_t)z * slab + 8 * t);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    g[e] += pg[e];
            }
            for (int z = 0, parts = p.at(8 * t, 1); z < parts; z++) {
                mqq_load8(pu, part + (size_t)z * slab + count + 8 * t);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    u[e] += pu[e];
            }
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = cuda_glu_value(kind, g[e], u[e]);
            ((float4 *)(y + 8 * t))[0] = make_float4(v[0], v[1], v[2], v[3]);
            ((float4 *)(y + 8 * t))[1] = make_float4(v[4], v[5], v[6], v[7]);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = 0.f;
        }
        if constexpr (Q8K) /* lanes a multiple of 32: whole warps live */
            mqq_put_k(v, (int)lane, lv + 8 * base, sc + 2 * (base / 4));
        else
            mqq_put_1(v, (int)(t % 4), live, lv + 8 * (live ? t : 0) / 32 * 32,
                      sc + (live ? t : 0) / 4);
    }
}

/* A launch's plan: splits of the columns (classic: a block per tile and split, up to 8, their
 * partial sums within the scratch buffer), or a stream (splits 1 and st.units > 0), by a model
 * of the time. Blocks run in waves of per_sm to a multiprocessor, and a block takes its stages
 * plus one (the first stage's copies wait alone), so the fewest splits with the fewest stages
 * in waves win. Filling one wave alone was not enough: 14336 x 4096 q4_K, 32 tokens (224 tiles,
 * 3 blocks per multiprocessor) split in 2 ran 448 blocks on 396 places, 52 in a second wave.
 * Each split keeps two stages or more where the columns have them. A stream of one block a
 * place costs its share of the units plus one per tile it touches; it is taken where streams
 * are allowed (the tiles that hold one block a multiprocessor) and it costs less: 224 tiles of
 * 16 stages in 132 places are 28 + 3 against two waves of 17 (the 8B's gate and up from 65
 * tokens on; H100, its decode of 128 / 160 / 192 / 224 / 256 sequences 8.04k / 8.25k / 8.46k /
 * 7.97k / 8.77k t/s against 7.71k / 8.10k / 8.39k / 7.97k / 8.69k without streams). slabs: the
 * partial sums' room. */
struct mq_plan {
    int splits, slabs;
    mq_stream st;
};
static mq_plan mq_plan_for(struct backend *b, int64_t tiles, int row_tiles, int n_groups,
                           size_t outputs, int per_sm, bool stream) {
    const cuda_state *s = cuda_of(b);
    const int64_t places = (int64_t)(per_sm > 0 ? per_sm : 1) * s->n_sm;
    const int stages = (n_groups + MQ_KG - 1) / MQ_KG;
    mq_plan plan = {1, 1, {0, 0, 0, 0}};
    int64_t best_cost = INT64_MAX;
    for (int z = 1; z <= 8; z++) {
        if (z > 1 && (stages / z < 2 || z * outputs > s->scratch_floats))
            break;
        const int64_t waves = (tiles * z + places - 1) / places, per = (stages + z - 1) / z;
        if (waves * (per + 1) < best_cost)
            plan.splits = plan.slabs = z, best_cost = waves * (per + 1);
    }
    const mq_stream st = {tiles * stages, (int)places, stages, row_tiles};
    if (!stream || tiles <= places || tiles * stages < 2 * places)
        return plan;
    const int64_t share = (st.units + places - 1) / places;
    int slabs = 1;
    for (int64_t t = 0; t < tiles; t++)
        slabs = max(slabs, mqs_segments(st, t));
    if (share + (share + stages - 1) / stages + 1 < best_cost &&
        (size_t)slabs * outputs <= s->scratch_floats)
        plan = {1, slabs, st};
    return plan;
}

#endif
