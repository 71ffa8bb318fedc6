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

/* Where the sums of a launch's matrices go: outputs [end[m - 1], end[m]) to y[m]. */
struct mq_dests {
    float *y[3];
    size_t end[3];
};

/* y[t][r] = (y[t][r] +) the sum of the splits' partial sums, in split order (so a batch's
 * result does not depend on which split finished first). */
__global__ static void mq_reduce_kernel(const float *__restrict__ part, const mq_dests d,
                                        size_t count, int splits, int accumulate) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const int m = i < d.end[0] ? 0 : i < d.end[1] ? 1 : 2;
        float *y = (m == 0 ? d.y[0] : m == 1 ? d.y[1] : d.y[2]) + (i - (m ? d.end[m - 1] : 0));
        float v = accumulate ? *y : 0.f;
        for (int z = 0; z < splits; z++)
            v += part[(size_t)z * count + i];
        *y = v;
    }
}

/* A GLU's first half: gate's sums (each split's first count floats of its slab) and up's (the
 * next count), added in split order as above, then y = act(gate) * up. */
__global__ static void mq_reduce_glu_kernel(const float *__restrict__ part, float *__restrict__ y,
                                            size_t count, size_t slab, int splits, int kind) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = 0.f, u = 0.f;
        for (int z = 0; z < splits; z++)
            g += part[(size_t)z * slab + i], u += part[(size_t)z * slab + count + i];
        y[i] = cuda_glu_value(kind, g, u);
    }
}

/* The same, 8 outputs a lane, also quantized for the down projection that reads them next
 * (lv, sc: as cuda_mmq_quantize writes them; q8_K: rows a multiple of 256, so a warp's 256
 * outputs are one block of a token; q8_1: of 32). */
template <bool Q8K>
__global__ static void mq_reduce_glu_q_kernel(const float *__restrict__ part, float *__restrict__ y,
                                              size_t count, size_t slab, int splits, int kind,
                                              uint8_t *__restrict__ lv, uint32_t *__restrict__ sc) {
    const size_t lanes = count / 8, lane = threadIdx.x % 32;
    for (size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * 32; base < lanes;
         base += (size_t)gridDim.x * blockDim.x) { /* whole warps, as the shuffles need */
        const size_t t = base + lane;
        const bool live = t < lanes;
        float v[8];
        if (live) {
            float g[8] = {}, u[8] = {}, pg[8], pu[8];
            for (int z = 0; z < splits; z++) {
                mqq_load8(pg, part + (size_t)z * slab + 8 * t);
                mqq_load8(pu, part + (size_t)z * slab + count + 8 * t);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    g[e] += pg[e], u[e] += pu[e];
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

/* Splits of the columns (up to 8, their partial sums within the scratch buffer), by a model of
 * the time: blocks run in waves of per_sm to a multiprocessor, and a block takes its stages
 * plus one (the first stage's copies wait alone), so the fewest splits with the fewest stages
 * in waves win. Filling one wave alone was not enough: 14336 x 4096 q4_K, 32 tokens (224 tiles,
 * 3 blocks per multiprocessor) split in 2 ran 448 blocks on 396 places, 52 in a second wave.
 * Each split keeps two stages or more where the columns have them. */
static int mq_splits(struct backend *b, int64_t tiles, int n_groups, size_t outputs, int per_sm) {
    const cuda_state *s = cuda_of(b);
    const int64_t places = (int64_t)(per_sm > 0 ? per_sm : 1) * s->n_sm;
    const int stages = (n_groups + MQ_KG - 1) / MQ_KG;
    int best = 1;
    int64_t best_cost = INT64_MAX;
    for (int z = 1; z <= 8; z++) {
        if (z > 1 && (stages / z < 2 || z * outputs > s->scratch_floats))
            break;
        const int64_t waves = (tiles * z + places - 1) / places, per = (stages + z - 1) / z;
        if (waves * (per + 1) < best_cost)
            best = z, best_cost = waves * (per + 1);
    }
    return best;
}

#endif
