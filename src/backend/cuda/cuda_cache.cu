/* cuda_cache.cu: the KV cache's rows on the GPU: storing a batch's keys or values (f32, f16 or
 * q8_0, rounded as the CPU does) into their cells, and reading a layer's cells back as floats. */
#include <cuda_fp16.h>
#include <math.h>

#include "backend/cuda/cuda_ops.cuh"

/* One thread per element (f32, f16) or per 32-element block (q8_0). */
__global__ static void store_kernel(int type, const float *x, int n, int dim, uint8_t *base,
                                    size_t row_bytes, const int32_t *cells) {
    size_t per_row = type == OX_DTYPE_Q8_0 ? (size_t)dim / 32 : (size_t)dim;
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (size_t)n * per_row)
        return;
    size_t t = j / per_row, i = j % per_row;
    kv_put(type, base + (size_t)cells[t] * row_bytes, x + t * (size_t)dim, (int)i);
}

void cuda_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                      uint8_t *base, size_t row_bytes, const int32_t *cells) {
    size_t work = (size_t)n * (size_t)(type == OX_DTYPE_Q8_0 ? dim / 32 : dim);
    if (work)
        store_kernel<<<cuda_blocks(work, 256), 256, 0, cuda_of(b)->stream>>>(
            (int)type, x, n, dim, base, row_bytes, cells);
    CUDA_LAUNCHED(b, "cache_store");
}

/* One thread per element; free cells (negative position) are left as they are. */
__global__ static void load_kernel(int type, const uint8_t *base, size_t row_bytes, float *y,
                                   int n_cells, int dim, const int32_t *cell_pos) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (size_t)n_cells * (size_t)dim)
        return;
    size_t c = j / (size_t)dim, i = j % (size_t)dim;
    if (cell_pos && cell_pos[c] < 0)
        return;
    const uint8_t *row = base + c * row_bytes;
    float v;
    if (type == OX_DTYPE_F32) {
        v = ((const float *)row)[i];
    } else if (type == OX_DTYPE_F16) {
        v = __half2float(((const __half *)row)[i]);
    } else {
        const kv_q8_0 *blk = (const kv_q8_0 *)row + i / 32;
        v = __half2float(blk->d) * (float)blk->q[i % 32];
    }
    y[j] = v;
}

void cuda_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                     float *y, int n_cells, int dim, const int32_t *cell_pos) {
    size_t work = (size_t)n_cells * (size_t)dim;
    if (work)
        load_kernel<<<cuda_blocks(work, 256), 256, 0, cuda_of(b)->stream>>>(
            (int)type, base, row_bytes, y, n_cells, dim, cell_pos);
    CUDA_LAUNCHED(b, "cache_load");
}
