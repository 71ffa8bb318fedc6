/* cuda_ops.cuh: the CUDA op functions, one .cu per family, that cuda_backend.cu puts in the
 * table. Shapes and meanings are backend.h's. */
#ifndef OX_BACKEND_CUDA_OPS_CUH
#define OX_BACKEND_CUDA_OPS_CUH

#include "backend/cuda/cuda_common.cuh"

struct cvd_xq; /* cuda_vecdot.cuh */

/* cuda_fold.cu: backend.h's fold_norm, for f16 matrices the decode GEMV streams. */
enum ox_status cuda_fold_norm(struct backend_weights *bw, const float *g, const struct mat *mats,
                              int count, bool *folded);

/* cuda_matmul.cu (cuda_matmul_init: once per device, before any launch) */
cudaError_t cuda_matmul_init(void);
bool cuda_supports(enum backend_op op, enum ox_dtype type);
void cuda_matmul(struct backend *b, const struct mat *w, const float *x, float *y, int n);
/* y += W x through cuBLAS, for batches of more than 8 (the GEMV's most): false for fewer. */
bool cuda_gemm_add(struct backend *b, const struct mat *w, const float *x, float *y, int n);
void cuda_get_rows(struct backend *b, const struct mat *w, const int32_t *ids, float *y, int n);
/* cuda_group.cu: a split model's partial rows summed over its ranks' GPUs */
enum ox_status cuda_all_reduce(struct backend *b, struct backend_group *g, int rank, float *x,
                               size_t n, float *to);
enum ox_status cuda_send(struct backend *b, struct backend_group *g, int rank, int to,
                         const float *x, size_t n);
enum ox_status cuda_recv(struct backend *b, struct backend_group *g, int rank, int from, float *x,
                         size_t n);
extern "C" int cuda_devices(void);
extern "C" int cuda_device_get(void);
extern "C" void cuda_device_set(int device);

/* cuda_gemv_half.cu: one token through f16 / bf16 weights: y = W x (or y += W x); one to three
 * matrices in one launch; y = act(gate x) * (up x). The matrices of _multi and _glu are of one
 * type, width and row size (their callers in cuda_gemv_q8.cu check); they take a norm only
 * with its weight folded into them (norm->w NULL: they divide by x's rms). cuda_half_takes:
 * whether the kernel takes such matrices (f16 or bf16, rows 16-byte aligned, widths a
 * multiple of 8); then the others decline, doing nothing, only for an unaligned x or matrix or
 * a norm with a weight. */
bool cuda_half_takes(const struct mat *w);
bool cuda_half_matmul(struct backend *b, const struct mat *w, const float *x, float *y,
                      bool accumulate);
bool cuda_half_multi(struct backend *b, int count, const struct mat *w, const float *x,
                     const struct norm_in *norm, float *const *y);
bool cuda_half_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                   const struct mat *up, const float *x, const struct norm_in *norm, float *y);

/* cuda_mma_half.cu: 2 to cuda_half_mma_max_n() tokens (OX_CUDA_HALF_MMA_MAX_N, 16 at most)
 * through f16 / bf16 weights on the tensor cores: y = W x (or y += W x) for one to three
 * matrices of one type, width and row size in one launch; y = act(gate x) * (up x). A norm
 * only with its weight folded into the matrices. False, doing nothing, for other batch sizes
 * or types, widths not a multiple of 64, or rows or x not 16-byte aligned. */
int cuda_half_mma_max_n(void);
bool cuda_mma_half_multi(struct backend *b, int count, const struct mat *w, const float *x,
                         const struct norm_in *norm, float *const *y, int n, bool accumulate);
bool cuda_mma_half_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                       const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                       int n);

/* cuda_gemv_q8.cu: dense matmuls of up to cuda_q8_max_n tokens (MoE experts: CUDA_Q8_MAX_N pairs)
 * on int8 activations, for the types of cuda_vecdot.cuh. Each returns false, doing nothing, where
 * the kernel does not take the matrices (the caller falls back). cuda_gemv_q8_init: once per
 * device, before any launch. */
cudaError_t cuda_gemv_q8_init(void);
bool cuda_gemv_q8(struct backend *b, const struct mat *w, const float *x, float *y, int n,
                  bool accumulate);
bool cuda_matmul_add(struct backend *b, const struct mat *w, const float *x, float *y, int n);
bool cuda_matmul_multi(struct backend *b, int count, const struct mat *w, const float *x,
                       const struct norm_in *norm, float *const *y, int n);
bool cuda_matmul_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                     const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                     int n);
/* Whether n rows of n_cols fit the q8_1 buffers (room: any n up to the batch; fits: also few
 * enough for the GEMV's MoE experts (CUDA_Q8_MAX_N); gemv_fits: for its dense matmuls
 * (cuda_q8_max_n), when the RMSNorm and the attention quantize their outputs for them). */
bool cuda_q8_room(struct backend *b, int n, int64_t n_cols);
bool cuda_q8_fits(struct backend *b, int n, int64_t n_cols);
bool cuda_gemv_fits(struct backend *b, int n, int64_t n_cols);
/* Whether a matmul of n tokens through w goes a token at a time: in one-token order
 * (cuda_one_token) where the GEMV would not give each row a single token's bits. */
bool cuda_rows_apart(struct backend *b, const struct mat *w, int n);
/* The most tokens the GEMV takes in a dense matmul: CUDA_GEMV_MAX_N, or OX_CUDA_Q8_MAX_N from the
 * environment (1 to CUDA_Q8_MAX_N); the int8 tensor-core matmul takes the batches above it. */
int cuda_q8_max_n(void);
/* The q8_1 copy of x's n rows (cvd_xq blocks), quantized unless the last quantization was of
 * these very rows; needs cuda_q8_room. */
const struct cvd_xq *cuda_q8_input(struct backend *b, const float *x, int n, int64_t n_cols);
/* A matmul's writes to y's n rows may overwrite the rows the q8_1 copy was made from. */
void cuda_q8_written(struct backend *b, const float *y, int n, int64_t rows);

/* cuda_mmq.cu: more than cuda_q8_max_n tokens (up to cuda_mmq_max_n) on the int8 tensor cores for
 * the types of cuda_vecdot.cuh (y = W x, or y += W x); false, doing nothing, where it does not take
 * w. cuda_mmq_init: once per device, before any launch. */
cudaError_t cuda_mmq_init(void);
/* The most tokens it takes of any matrix: CUDA_MMQ_SMALL_MAX_N, or as the environment's knobs
 * set (OX_CUDA_MMQ_MAX_N, OX_CUDA_MMQ_SMALL_N; for measuring where it stops winning). */
int cuda_mmq_max_n(void);
bool cuda_mmq(struct backend *b, const struct mat *w, const float *x, float *y, int n,
              bool accumulate);
/* Whether cuda_mmq takes these (the GEMV keeps the batches it does not). */
bool cuda_mmq_takes(struct backend *b, const struct mat *w, const float *x, int n);
/* backend.h's matmul_multi and matmul_glu for the batches cuda_mmq takes: each matrix's row
 * tiles in one launch, x quantized once (through the norm unless that is NULL), the GLU applied
 * as the column splits' partial sums are added. False, doing nothing, where it does not take
 * them (a norm it cannot fuse: the caller norms first and asks again). */
bool cuda_mmq_multi(struct backend *b, int count, const struct mat *w, const float *x,
                    const struct norm_in *norm, float *const *y, int n);
bool cuda_mmq_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                  const struct mat *up, const float *x, const struct norm_in *norm, float *y,
                  int n);
/* cuda_mmq_quantize.cu: n rows of x (through the RMSNorm norm first unless NULL) as cuda_mmq's
 * kernel reads them: int8 levels lv[n][n_cols], then per group of 32 scale words in sc (q8k:
 * q8_K's two, else q8_1's one). cuda_mmq_norm_takes: whether it fuses that norm for x. */
bool cuda_mmq_norm_takes(const float *x, const struct norm_in *norm, int64_t n_cols);
void cuda_mmq_quantize(struct backend *b, const float *x, const struct norm_in *norm, int n,
                       int64_t n_cols, bool q8k, uint8_t *lv, uint32_t *sc);
/* MoE experts, matrices w (expert e's is e * n_rows * row_bytes on) chosen by ids[p] for pairs
 * p of a token and one of its k experts: cuda_experts_glu gives y[p] = act(gate x[p / k]) *
 * (up x[p / k]) for n tokens, cuda_experts y[p] = w x[p]. cuda_q8_takes_experts: whether they
 * take w for n_pairs pairs (then they do not decline). */
bool cuda_q8_takes_experts(struct backend *b, const struct mat *w, int n_pairs);
bool cuda_experts_glu(struct backend *b, enum glu_kind kind, const struct mat *gate,
                      const struct mat *up, const float *x, int n, const int32_t *ids, int k,
                      float *y);
bool cuda_experts(struct backend *b, const struct mat *w, const float *x, const int32_t *ids,
                  int n_pairs, float *y);

/* cuda_moe.cu */
bool cuda_moe_ffn(struct backend *b, struct moe_args *a);

/* cuda_norm.cu */
void cuda_rms_norm(struct backend *b, const float *x, const float *g, float *y, int n, int dim,
                   float eps);
void cuda_layer_norm(struct backend *b, const float *x, const float *g, const float *bias, float *y,
                     int n, int dim, float eps);

/* cuda_rope.cu */
void cuda_rope(struct backend *b, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
               const struct rope_params *p);
bool cuda_rope_store(struct backend *b, const struct rope_store_args *a);

/* cuda_elementwise.cu */
void cuda_glu(struct backend *b, enum glu_kind kind, const float *gate, const float *up, float *y,
              size_t n);
void cuda_gelu(struct backend *b, const float *x, float *y, size_t n);
void cuda_sigmoid_scale_rows(struct backend *b, float *y, const float *g, int n, int dim);
void cuda_add(struct backend *b, float *y, const float *x, size_t n);
void cuda_add_row(struct backend *b, float *y, const float *row, int n, int dim);
void cuda_scale(struct backend *b, float *y, float s, size_t n);
void cuda_softmax(struct backend *b, float *x, int n, int dim);
void cuda_softcap(struct backend *b, float *y, float cap, size_t n);
void cuda_copy_rows(struct backend *b, float *dst, size_t dst_stride, const float *src,
                    size_t src_stride, int rows, int cols);
void cuda_axpy(struct backend *b, float *y, const float *x, float w, size_t n);
void cuda_zero(struct backend *b, float *y, size_t n);

/* cuda_delta_net.cu */
void cuda_delta_net(struct backend *b, const struct delta_net_args *a);
/* cuda_mamba2.cu */
void cuda_mamba2(struct backend *b, const struct mamba2_args *a);

/* cuda_attention.cu; _alloc: the context's room for decode steps split along the cells */
void cuda_attention(struct backend *b, const struct attn_args *a);
cudaError_t cuda_attention_alloc(cuda_state *s, size_t *bytes);
/* cuda_decode_attention.cu: a step whose queries each have their own sequence, over an f16
 * cache (its output also as q8_1 into xq, or NULL); false, doing nothing, for shapes it does not
 * take. */
bool cuda_decode_attention(struct backend *b, const struct attn_args *a, struct cvd_xq *xq);
/* cuda_flash_attention.cu: prompts (16 queries or more) over an f16 or q8_0 cache on the tensor
 * cores; false, doing nothing, for shapes it does not take. _init: once per device. */
cudaError_t cuda_flash_attention_init(void);
bool cuda_flash_attention(struct backend *b, const struct attn_args *a);

/* cuda_cache.cu */
void cuda_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                      uint8_t *base, size_t row_bytes, const int32_t *cells);
void cuda_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                     float *y, int n_cells, int dim, const int32_t *cell_pos);

#endif
