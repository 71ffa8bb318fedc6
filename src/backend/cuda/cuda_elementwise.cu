/* cuda_elementwise.cu: the CUDA backend's elementwise and row ops: GLU, GELU, adds, scaling,
 * softmax, soft-capping, row copies. Grid-stride loops over the elements, one launch each. */
#include <math.h>

#include "backend/cuda/cuda_ops.cuh"

static const unsigned THREADS = 256;

/* Blocks for n elements, capped: the grid-stride loops take the rest. */
static unsigned grid_for(size_t n) {
    unsigned g = cuda_blocks(n, THREADS);
    return g < 65535u ? (g ? g : 1u) : 65535u;
}

#define FOR_EACH(i, n)                                                                             \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

__global__ static void glu_kernel(int kind, const float *gate, const float *up, float *y,
                                  size_t n) {
    FOR_EACH(i, n) y[i] = cuda_glu_value(kind, gate[i], up[i]);
}

void cuda_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
              size_t n) {
    glu_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>((int)kind, gate, up, y, n);
    CUDA_LAUNCHED(b, "glu");
}

__global__ static void sigmoid_scale_rows_kernel(float *y, const float *g, size_t dim, size_t n) {
    FOR_EACH(i, n) y[i] *= 1.0f / (1.0f + expf(-g[i / dim]));
}

void cuda_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim) {
    size_t all = (size_t)n * (size_t)dim;
    sigmoid_scale_rows_kernel<<<grid_for(all), THREADS, 0, cuda_of(b)->stream>>>(y, g, (size_t)dim,
                                                                                 all);
    CUDA_LAUNCHED(b, "sigmoid_scale_rows");
}

__global__ static void gelu_kernel(const float *x, float *y, size_t n) {
    FOR_EACH(i, n) y[i] = cuda_glu_act(GLU_GELU, x[i]);
}

void cuda_gelu(struct backend *b, const float *x, float *y, size_t n) {
    gelu_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>(x, y, n);
    CUDA_LAUNCHED(b, "gelu");
}

__global__ static void axpy_kernel(float *y, const float *x, float w, size_t n) {
    FOR_EACH(i, n) y[i] += w * x[i];
}

void cuda_add(struct backend *b, float *y, const float *x, size_t n) {
    axpy_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>(y, x, 1.0f, n);
    CUDA_LAUNCHED(b, "add");
}

void cuda_axpy(struct backend *b, float *y, const float *x, float w, size_t n) {
    axpy_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>(y, x, w, n);
    CUDA_LAUNCHED(b, "axpy");
}

__global__ static void add_row_kernel(float *y, const float *row, size_t n, int dim) {
    FOR_EACH(i, n) y[i] += row[i % (size_t)dim];
}

void cuda_add_row(struct backend *b, float *y, const float *row, int n, int dim) {
    size_t all = (size_t)n * (size_t)dim;
    add_row_kernel<<<grid_for(all), THREADS, 0, cuda_of(b)->stream>>>(y, row, all, dim);
    CUDA_LAUNCHED(b, "add_row");
}

__global__ static void scale_kernel(float *y, float s, size_t n) {
    FOR_EACH(i, n) y[i] *= s;
}

void cuda_scale(struct backend *b, float *y, float s, size_t n) {
    scale_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>(y, s, n);
    CUDA_LAUNCHED(b, "scale");
}

void cuda_zero(struct backend *b, float *y, size_t n) {
    cuda_note(b, cudaMemsetAsync(y, 0, n * sizeof *y, cuda_of(b)->stream), "zero");
}

__global__ static void softcap_kernel(float *y, float cap, size_t n) {
    float inv = 1.0f / cap;
    FOR_EACH(i, n) y[i] = tanhf(y[i] * inv) * cap;
}

void cuda_softcap(struct backend *b, float *y, float cap, size_t n) {
    softcap_kernel<<<grid_for(n), THREADS, 0, cuda_of(b)->stream>>>(y, cap, n);
    CUDA_LAUNCHED(b, "softcap");
}

/* Block-wide reduction of one value per thread (max or sum); every thread gets the result. */
template <bool MAX> __device__ static float block_reduce(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    __syncthreads(); /* shared may still be read by a previous reduction */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = lane < n_warps ? shared[lane] : (MAX ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    return v;
}

/* One block per row. */
__global__ static void softmax_kernel(float *x, int dim) {
    __shared__ float shared[32];
    float *row = x + (size_t)blockIdx.x * (size_t)dim;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        m = fmaxf(m, row[i]);
    m = block_reduce<true>(m, shared);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float e = expf(row[i] - m);
        row[i] = e;
        sum += e;
    }
    sum = block_reduce<false>(sum, shared);
    float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        row[i] *= inv;
}

void cuda_softmax(struct backend *b, float *x, int n, int dim) {
    if (n > 0)
        softmax_kernel<<<n, THREADS, 0, cuda_of(b)->stream>>>(x, dim);
    CUDA_LAUNCHED(b, "softmax");
}

void cuda_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                    size_t src_stride, int rows, int cols) {
    if (rows > 0 && cols > 0)
        cuda_note(b,
                  cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src,
                                    src_stride * sizeof(float), (size_t)cols * sizeof(float),
                                    (size_t)rows, cudaMemcpyDeviceToDevice, cuda_of(b)->stream),
                  "copy_rows");
}
