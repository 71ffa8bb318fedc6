/* oxidize.h: the one public C API of oxidize (C11, also valid C++).
 *
 * Conventions (see DESIGN.md):
 * - Fallible calls return enum ox_status (OX_OK = 0); results go through out-params, which are
 *   set to NULL/zero on failure. ox_last_error() then names exactly what failed.
 * - Every _open/_load/_create has one _free; _free(NULL) is a no-op.
 * - The library never prints, exits or aborts; logging goes to the callback of ox_log_set().
 *
 * Example: list the tensors of a GGUF file.
 *
 *     struct ox_gguf *g;
 *     if (ox_gguf_open("model.gguf", &g) != OX_OK) {
 *         fprintf(stderr, "%s\n", ox_last_error());
 *         return 1;
 *     }
 *     for (int64_t i = 0; i < ox_gguf_n_tensors(g); i++) {
 *         struct ox_tensor_info t;
 *         ox_gguf_tensor(g, i, &t);
 *         printf("%s %s\n", t.name, ox_dtype_name(t.type));
 *     }
 *     ox_gguf_free(g);
 */
#ifndef OXIDIZE_H
#define OXIDIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(OX_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define OX_API __attribute__((visibility("default")))
#else
#define OX_API
#endif

#define OX_VERSION_STRING "0.1.0"

/* ---- Status and errors ------------------------------------------------------------------- */

/* X(name, description) */
#define OX_STATUS_LIST(X)                                                 \
    X(OK, "ok")                                                           \
    X(ERR_IO, "input/output error")                                       \
    X(ERR_FORMAT, "malformed file or data")                               \
    X(ERR_UNSUPPORTED, "unsupported")                                     \
    X(ERR_OOM, "out of memory")                                           \
    X(ERR_DEVICE, "device error")                                         \
    X(ERR_INVALID_ARG, "invalid argument")                                \
    X(ERR_CONTEXT_FULL, "context full")                                   \
    X(ERR_ABORTED, "aborted")

enum ox_status {
#define OX_X_(name, desc) OX_##name,
    OX_STATUS_LIST(OX_X_)
#undef OX_X_
    OX_STATUS_COUNT
};

/* Short constant name of a status ("OX_ERR_FORMAT"); "OX_UNKNOWN" for values out of range. */
OX_API const char *ox_status_name(enum ox_status status);

/* The message of the last failure on this thread ("" if none yet). The pointer stays valid
 * until the next failing call on the same thread. */
OX_API const char *ox_last_error(void);

/* sizeof the public struct this header defines under the tag name ("ox_model_params",
 * "ox_batch", ...), 0 for a name it does not define. Bindings that declare the structs
 * themselves (the Python package's ctypes) compare their sizes with the library's when they load
 * it, so a library built from another oxidize.h is refused rather than read past. */
OX_API size_t ox_struct_size(const char *name);

/* ---- Logging ----------------------------------------------------------------------------- */

enum ox_log_level { OX_LOG_DEBUG, OX_LOG_INFO, OX_LOG_WARN, OX_LOG_ERROR, OX_LOG_LEVEL_COUNT };

typedef void (*ox_log_fn)(enum ox_log_level level, const char *message, void *user);

/* Route library log messages to fn (NULL: silent, the default). Not thread-safe against
 * concurrent logging; call it once at startup. */
OX_API void ox_log_set(ox_log_fn fn, void *user);

/* ---- Tensor data types ------------------------------------------------------------------- */

/* Every ggml tensor type, with ggml's numeric ids, block sizes (elements) and bytes per block.
 * X(NAME, id, "name", block_size, type_size). Ids 4, 5, 31-33 and 36-38 were removed from
 * ggml and are rejected. */
#define OX_DTYPE_LIST(X)                       \
    X(F32, 0, "f32", 1, 4)                     \
    X(F16, 1, "f16", 1, 2)                     \
    X(Q4_0, 2, "q4_0", 32, 18)                 \
    X(Q4_1, 3, "q4_1", 32, 20)                 \
    X(Q5_0, 6, "q5_0", 32, 22)                 \
    X(Q5_1, 7, "q5_1", 32, 24)                 \
    X(Q8_0, 8, "q8_0", 32, 34)                 \
    X(Q8_1, 9, "q8_1", 32, 36)                 \
    X(Q2_K, 10, "q2_K", 256, 84)               \
    X(Q3_K, 11, "q3_K", 256, 110)              \
    X(Q4_K, 12, "q4_K", 256, 144)              \
    X(Q5_K, 13, "q5_K", 256, 176)              \
    X(Q6_K, 14, "q6_K", 256, 210)              \
    X(Q8_K, 15, "q8_K", 256, 292)              \
    X(IQ2_XXS, 16, "iq2_xxs", 256, 66)         \
    X(IQ2_XS, 17, "iq2_xs", 256, 74)           \
    X(IQ3_XXS, 18, "iq3_xxs", 256, 98)         \
    X(IQ1_S, 19, "iq1_s", 256, 50)             \
    X(IQ4_NL, 20, "iq4_nl", 32, 18)            \
    X(IQ3_S, 21, "iq3_s", 256, 110)            \
    X(IQ2_S, 22, "iq2_s", 256, 82)             \
    X(IQ4_XS, 23, "iq4_xs", 256, 136)          \
    X(I8, 24, "i8", 1, 1)                      \
    X(I16, 25, "i16", 1, 2)                    \
    X(I32, 26, "i32", 1, 4)                    \
    X(I64, 27, "i64", 1, 8)                    \
    X(F64, 28, "f64", 1, 8)                    \
    X(IQ1_M, 29, "iq1_m", 256, 56)             \
    X(BF16, 30, "bf16", 1, 2)                  \
    X(TQ1_0, 34, "tq1_0", 256, 54)             \
    X(TQ2_0, 35, "tq2_0", 256, 66)             \
    X(MXFP4, 39, "mxfp4", 32, 17)              \
    X(NVFP4, 40, "nvfp4", 64, 36)              \
    X(Q1_0, 41, "q1_0", 128, 18)               \
    X(Q2_0, 42, "q2_0", 64, 18)

enum ox_dtype {
#define OX_X_(name, id, str, blck, size) OX_DTYPE_##name = id,
    OX_DTYPE_LIST(OX_X_)
#undef OX_X_
    OX_DTYPE_COUNT = 43
};

/* True for ids that name a type of the list above. */
OX_API bool ox_dtype_valid(int id);
/* ggml's type name ("q4_K"), or NULL for an invalid id. */
OX_API const char *ox_dtype_name(enum ox_dtype type);
/* Elements per block (0 for an invalid id). */
OX_API int64_t ox_dtype_block_size(enum ox_dtype type);
/* Bytes per block (0 for an invalid id). */
OX_API size_t ox_dtype_type_size(enum ox_dtype type);

/* Dequantize n elements (a multiple of the block size) of src, in the type's own layout, to
 * float. Bit-identical with ggml's reference dequantization. */
OX_API enum ox_status ox_dequantize(enum ox_dtype type, const void *src, float *dst, int64_t n);

/* True for types model weights can be stored in (all but f64, the integers, and the activation
 * types q8_1 and q8_K, which ox_quantize still produces for dot products). */
OX_API bool ox_dtype_can_quantize(enum ox_dtype type);
/* True for types too coarse to quantize without an importance matrix (iq2_xxs, iq2_xs, iq1_s). */
OX_API bool ox_dtype_needs_imatrix(enum ox_dtype type);

/* Quantize n_rows rows of n_per_row floats (a multiple of the block size) into dst, which holds
 * n_rows * n_per_row / block_size * type_size bytes. imatrix: NULL, or n_per_row importance
 * weights (one per column, as in llama.cpp's imatrix files). Byte-identical with llama.cpp's
 * quantizers. Thread-safe: callers split rows across threads. */
OX_API enum ox_status ox_quantize(enum ox_dtype type, const float *src, void *dst,
                                  int64_t n_rows, int64_t n_per_row, const float *imatrix);

/* ---- Quantizing model files ------------------------------------------------------------- */

/* Model file types (llama.cpp's llama_ftype ids, stored as general.file_type): which tensor
 * type a file is "mostly" made of, and for the _S/_M/_L mixes which tensors get more bits.
 * X(NAME, id, "name", base dtype) */
#define OX_FTYPE_LIST(X)                          \
    X(ALL_F32, 0, "F32", F32)                     \
    X(MOSTLY_F16, 1, "F16", F16)                  \
    X(MOSTLY_Q4_0, 2, "Q4_0", Q4_0)               \
    X(MOSTLY_Q4_1, 3, "Q4_1", Q4_1)               \
    X(MOSTLY_Q8_0, 7, "Q8_0", Q8_0)               \
    X(MOSTLY_Q5_0, 8, "Q5_0", Q5_0)               \
    X(MOSTLY_Q5_1, 9, "Q5_1", Q5_1)               \
    X(MOSTLY_Q2_K, 10, "Q2_K", Q2_K)              \
    X(MOSTLY_Q3_K_S, 11, "Q3_K_S", Q3_K)          \
    X(MOSTLY_Q3_K_M, 12, "Q3_K_M", Q3_K)          \
    X(MOSTLY_Q3_K_L, 13, "Q3_K_L", Q3_K)          \
    X(MOSTLY_Q4_K_S, 14, "Q4_K_S", Q4_K)          \
    X(MOSTLY_Q4_K_M, 15, "Q4_K_M", Q4_K)          \
    X(MOSTLY_Q5_K_S, 16, "Q5_K_S", Q5_K)          \
    X(MOSTLY_Q5_K_M, 17, "Q5_K_M", Q5_K)          \
    X(MOSTLY_Q6_K, 18, "Q6_K", Q6_K)              \
    X(MOSTLY_IQ2_XXS, 19, "IQ2_XXS", IQ2_XXS)     \
    X(MOSTLY_IQ2_XS, 20, "IQ2_XS", IQ2_XS)        \
    X(MOSTLY_Q2_K_S, 21, "Q2_K_S", Q2_K)          \
    X(MOSTLY_IQ3_XS, 22, "IQ3_XS", IQ3_S)         \
    X(MOSTLY_IQ3_XXS, 23, "IQ3_XXS", IQ3_XXS)     \
    X(MOSTLY_IQ1_S, 24, "IQ1_S", IQ1_S)           \
    X(MOSTLY_IQ4_NL, 25, "IQ4_NL", IQ4_NL)        \
    X(MOSTLY_IQ3_S, 26, "IQ3_S", IQ3_S)           \
    X(MOSTLY_IQ3_M, 27, "IQ3_M", IQ3_S)           \
    X(MOSTLY_IQ2_S, 28, "IQ2_S", IQ2_XS)          \
    X(MOSTLY_IQ2_M, 29, "IQ2_M", IQ2_S)           \
    X(MOSTLY_IQ4_XS, 30, "IQ4_XS", IQ4_XS)        \
    X(MOSTLY_IQ1_M, 31, "IQ1_M", IQ1_M)           \
    X(MOSTLY_BF16, 32, "BF16", BF16)              \
    X(MOSTLY_TQ1_0, 36, "TQ1_0", TQ1_0)           \
    X(MOSTLY_TQ2_0, 37, "TQ2_0", TQ2_0)           \
    X(MOSTLY_MXFP4_MOE, 38, "MXFP4_MOE", MXFP4)   \
    X(MOSTLY_Q1_0, 40, "Q1_0", Q1_0)              \
    X(MOSTLY_Q2_0, 41, "Q2_0", Q2_0)

enum ox_ftype {
#define OX_X_(name, id, str, base) OX_FTYPE_##name = id,
    OX_FTYPE_LIST(OX_X_)
#undef OX_X_
    OX_FTYPE_COUNT = 42
};

/* "Q4_K_M", or NULL for an id that is not a file type. */
OX_API const char *ox_ftype_name(enum ox_ftype ftype);
/* Parse a file type name as llama-quantize does: case-insensitive, the aliases Q3_K, Q4_K and
 * Q5_K (= _M), or the numeric id. */
OX_API enum ox_status ox_ftype_parse(const char *name, enum ox_ftype *out);

/* A per-tensor override: tensors whose name matches the POSIX extended regular expression
 * `pattern` (searched anywhere in the name) are quantized to `type`. */
struct ox_tensor_type_override {
    const char *pattern;
    enum ox_dtype type;
};

/* Progress of ox_model_quantize, reported after each tensor. */
struct ox_quantize_progress {
    int64_t i_tensor, n_tensors;       /* tensors done (1-based) of all */
    const char *name;                  /* the tensor just written */
    enum ox_dtype type_in, type_out;
    uint64_t bytes_in, bytes_out;      /* its size before and after */
};

/* Return false to abort the quantization (ox_model_quantize then returns OX_ERR_ABORTED). */
typedef bool (*ox_quantize_progress_fn)(const struct ox_quantize_progress *progress, void *user);

struct ox_quantize_params {
    enum ox_ftype ftype;               /* the target mix */
    int n_threads;                     /* <= 0: one per online CPU */
    int output_tensor_type;            /* an ox_dtype for output.weight, or -1: the mix decides */
    int token_embedding_type;          /* an ox_dtype for token_embd.weight, or -1 */
    bool allow_requantize;             /* accept already-quantized inputs (loses quality) */
    bool leave_output_tensor;          /* keep output.weight exactly as it is */
    bool pure;                         /* every tensor in the base type: no k-quant mixing */
    bool only_copy;                    /* copy tensors unchanged (ftype = the input's) */
    const char *imatrix_path;          /* NULL, or a llama.cpp importance matrix (GGUF or .dat) */
    const struct ox_tensor_type_override *overrides; /* first match wins */
    size_t n_overrides;
    ox_quantize_progress_fn progress;  /* NULL: none */
    void *progress_user;
};

/* What a quantization did (all sizes in bytes of tensor data). */
struct ox_quantize_result {
    uint64_t n_params;                 /* elements in all tensors */
    uint64_t bytes_in, bytes_out;
    int n_fallback;                    /* tensors whose row size forced a different type */
    int n_imatrix_entries;             /* importance matrix entries loaded (0 without one) */
};

OX_API struct ox_quantize_params ox_quantize_params_default(void);

/* Quantize the GGUF model at in_path into out_path (written through a temporary file and
 * renamed; refuses to overwrite in_path). Tensor types follow llama.cpp's rules for the file
 * type, so the output is byte-identical with llama-quantize's for the same input and options.
 * result may be NULL. */
OX_API enum ox_status ox_model_quantize(const char *in_path, const char *out_path,
                                        const struct ox_quantize_params *params,
                                        struct ox_quantize_result *result);

/* ---- Tokenizers ------------------------------------------------------------------------- */

typedef int32_t ox_token;

/* Token attributes (bit flags), as llama.cpp defines them. */
enum ox_token_attr {
    OX_TOKEN_ATTR_UNDEFINED = 0,
    OX_TOKEN_ATTR_UNKNOWN = 1 << 0,
    OX_TOKEN_ATTR_UNUSED = 1 << 1,
    OX_TOKEN_ATTR_NORMAL = 1 << 2,
    OX_TOKEN_ATTR_CONTROL = 1 << 3,
    OX_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    OX_TOKEN_ATTR_BYTE = 1 << 5,
    OX_TOKEN_ATTR_NORMALIZED = 1 << 6,
    OX_TOKEN_ATTR_LSTRIP = 1 << 7,
    OX_TOKEN_ATTR_RSTRIP = 1 << 8,
    OX_TOKEN_ATTR_SINGLE_WORD = 1 << 9,
};

struct ox_vocab;

/* Load the tokenizer of a GGUF file (a model or a vocabulary-only file): SentencePiece
 * ("llama"), byte-level BPE with its pre-tokenizer ("gpt2"), or WordPiece ("bert"). Every
 * tokenizer.ggml.* key is validated; unknown models or pre-tokenizers are OX_ERR_UNSUPPORTED. */
OX_API enum ox_status ox_vocab_load(const char *path, struct ox_vocab **out);
OX_API void ox_vocab_free(struct ox_vocab *vocab);

/* "spm", "bpe", "wpm" or "none"; and tokenizer.ggml.pre ("default" when absent). */
OX_API const char *ox_vocab_kind(const struct ox_vocab *vocab);
OX_API const char *ox_vocab_pre(const struct ox_vocab *vocab);
OX_API int32_t ox_vocab_n_tokens(const struct ox_vocab *vocab);
/* Special tokens, -1 when the vocabulary has none. */
OX_API ox_token ox_vocab_bos(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_eos(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_eot(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_pad(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_sep(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_unk(const struct ox_vocab *vocab);
OX_API ox_token ox_vocab_nl(const struct ox_vocab *vocab);
/* True for tokens that end generation (EOS, EOT, <|im_end|>, ...). */
OX_API bool ox_vocab_is_eog(const struct ox_vocab *vocab, ox_token token);
/* Whether tokenizing with add_special prepends BOS / appends EOS. */
OX_API bool ox_vocab_add_bos(const struct ox_vocab *vocab);
OX_API bool ox_vocab_add_eos(const struct ox_vocab *vocab);
/* Whether a tokenized pair (a reranker's query and document) takes SEP between (WordPiece). */
OX_API bool ox_vocab_add_sep(const struct ox_vocab *vocab);
/* A token's text as stored in the vocabulary (NUL-terminated; NULL for an invalid id), its
 * score and attributes (OX_TOKEN_ATTR_* bits; 0 for an invalid id). */
OX_API const char *ox_vocab_token_text(const struct ox_vocab *vocab, ox_token token);
OX_API float ox_vocab_token_score(const struct ox_vocab *vocab, ox_token token);
OX_API uint32_t ox_vocab_token_attr(const struct ox_vocab *vocab, ox_token token);

/* Tokenize text (len bytes, any bytes allowed) as llama.cpp's llama_tokenize does. add_special:
 * BOS/EOS (CLS/SEP for WordPiece) as the vocabulary asks; parse_special: control tokens written
 * in the text ("<|im_end|>") become their ids. Writes at most cap ids and sets *n_tokens to the
 * number the text needs (so a second call with a big enough buffer gets them all). */
OX_API enum ox_status ox_tokenize(const struct ox_vocab *vocab, const char *text, size_t len,
                                  ox_token *tokens, size_t cap, size_t *n_tokens,
                                  bool add_special, bool parse_special);

/* The text of one token (byte tokens as their byte, U+2581 as a space, BPE's byte alphabet
 * decoded); control tokens only with special. lstrip: drop up to that many leading spaces.
 * Writes at most cap bytes (no NUL); returns the length needed, or -1 for an invalid id. */
OX_API int32_t ox_token_to_piece(const struct ox_vocab *vocab, ox_token token, char *buf,
                                 size_t cap, int32_t lstrip, bool special);

/* The text of a token sequence: remove_special drops the BOS/EOS the vocabulary adds;
 * unparse_special renders control tokens. Writes at most cap bytes (no NUL) and returns the
 * length needed. */
OX_API int64_t ox_detokenize(const struct ox_vocab *vocab, const ox_token *tokens,
                             size_t n_tokens, char *buf, size_t cap, bool remove_special,
                             bool unparse_special);

/* Streaming detokenization for generated tokens: text is released only up to the last complete
 * UTF-8 character, so a character split across tokens is never printed in halves. */
struct ox_detok_stream;
OX_API enum ox_status ox_detok_stream_create(const struct ox_vocab *vocab, bool special,
                                             struct ox_detok_stream **out);
OX_API void ox_detok_stream_free(struct ox_detok_stream *stream);
/* Add a token; text and len receive the text now ready (valid until the next call). */
OX_API enum ox_status ox_detok_stream_push(struct ox_detok_stream *stream, ox_token token,
                                           const char **text, size_t *len);
/* Whatever is still held back (an incomplete character at the end of generation). */
OX_API enum ox_status ox_detok_stream_flush(struct ox_detok_stream *stream, const char **text,
                                            size_t *len);

/* ---- Models and inference ---------------------------------------------------------------- */

struct ox_model;
struct ox_context;

/* Called during loading with the fraction done; return false to cancel (OX_ERR_ABORTED). */
typedef bool (*ox_load_progress_fn)(float progress, void *user);

enum ox_split_mode { OX_SPLIT_AUTO = -1, OX_SPLIT_NONE = 0, OX_SPLIT_LAYER = 1, OX_SPLIT_ROW = 2 };
#define OX_MAX_DEVICES 16 /* GPUs one model may span (tensor_split's entries) */

struct ox_model_params {
    bool use_mmap;                /* map the file (default); false reads it into memory */
    ox_load_progress_fn progress; /* NULL: none */
    void *progress_user;
    int32_t n_gpu_layers; /* layers on the GPU: -1 (default) all when the build has the CUDA
                             backend, a GPU is present and it runs the model's types (else the
                             CPU, with a warning), 0 none, n_layer or more all or fail;
                             between, the last n_gpu_layers layers and the output (the
                             CPU runs the embeddings and the first layers) */
    /* How a model whose layers all go to GPUs uses several (llama.cpp's split modes; numbered
     * as its llama_split_mode). OX_SPLIT_AUTO (default): by rows where the model splits so,
     * else by layers (on two H100s rows were the fastest, layers as fast as one GPU: measured),
     * one GPU where there is one. OX_SPLIT_NONE: one GPU. The others use every GPU that
     * tensor_split gives a share (all when it gives none), main_gpu rank 0, the one the logits
     * come from. OX_SPLIT_LAYER: each rank runs consecutive layers, as many as its share says
     * (rank 0 also the embeddings and the output), the hidden state handed from GPU to GPU
     * (NCCL); OX_SPLIT_ROW: each rank holds its share of every layer's attention heads and
     * FFN rows (tensor parallelism: their outputs summed through NCCL twice a layer), the
     * shares equal (heads divide evenly). */
    int32_t split_mode;
    int32_t main_gpu;
    float tensor_split[OX_MAX_DEVICES];
    /* Processes that run the model together, split by rows as OX_SPLIT_ROW splits it over GPUs
     * (by layers where split_mode asks for them or the model does not split by rows), one rank
     * each (its GPU: main_gpu), on this host or others, their sums through NCCL: rank 0 listens
     * at dist_addr ("HOST:PORT") until all dist_world ranks have joined, then makes the
     * contexts and decodes; every other rank's ox_model_load returns a model to hand to
     * ox_model_follow. dist_world 0 (default): this process alone. */
    const char *dist_addr;
    int32_t dist_rank, dist_world;
    int32_t dist_timeout_ms; /* the wait for the others to join, and for any message (0: 60 s) */
    /* The GPU backend the layers go to: "cuda", "vulkan" (a discrete GPU first), "vulkan:N"
     * (the N-th Vulkan device; one a process) or "none" (the CPU alone). NULL (default): the
     * environment variable OX_DEVICE's, else CUDA in a build that has it. The choice holds
     * for the process until the next load: loads that ask for different devices must not
     * run at the same time. */
    const char *device;
};

OX_API struct ox_model_params ox_model_params_default(void);
/* Load a model: hyper-parameters, tokenizer and weights (zero-copy from the mapping). Unknown
 * architectures, missing or mis-shaped tensors and tensor types the CPU cannot run are refused
 * with a message naming them. */
OX_API enum ox_status ox_model_load(const char *path, const struct ox_model_params *params,
                                    struct ox_model **out);
OX_API void ox_model_free(struct ox_model *model);
/* A rank other than 0 of a model split across processes (ox_model_params.dist_rank > 0): runs
 * rank 0's calls on its share until rank 0 frees its model (OX_OK) or is lost (OX_ERR_IO, and
 * so on); the model is then the caller's to free. */
OX_API enum ox_status ox_model_follow(struct ox_model *model);
/* The model's tokenizer, owned by the model. */
OX_API const struct ox_vocab *ox_model_vocab(const struct ox_model *model);
OX_API int32_t ox_model_n_vocab(const struct ox_model *model);
OX_API int32_t ox_model_n_ctx_train(const struct ox_model *model);
OX_API int32_t ox_model_n_embd(const struct ox_model *model);
OX_API int32_t ox_model_n_layer(const struct ox_model *model);
OX_API uint64_t ox_model_n_params(const struct ox_model *model);
/* Where the model runs: "CPU", "CUDA" (or "VULKAN") when its weights were uploaded to a GPU,
 * "CPU+CUDA" when only its last layers were. */
OX_API const char *ox_model_backend(const struct ox_model *model);
/* Bytes of GPU memory the model's weights take (0 on the CPU). */
OX_API uint64_t ox_model_gpu_bytes(const struct ox_model *model);
/* "llama 15.2M q4_K" style description; snprintf rule. */
OX_API size_t ox_model_desc(const struct ox_model *model, char *buf, size_t cap);
/* How oxidize runs the architecture named `arch` (a GGUF general.architecture value): its
 * traits as one line ("RMSNorm, NeoX RoPE, SwiGLU, ..."); snprintf rule. Returns 0 and writes
 * nothing for an architecture oxidize does not support. */
OX_API size_t ox_arch_traits(const char *arch, char *buf, size_t cap);
/* The supported architecture names, comma separated (a static string). */
OX_API const char *ox_arch_supported(void);

/* The default thread count: the machine's physical cores. */
OX_API int ox_default_threads(void);

/* The most sequences one context holds (n_seq_max). */
#define OX_SEQ_MAX 256

struct ox_context_params {
    uint32_t n_ctx;      /* KV cache cells (tokens over all sequences); 0: the model's */
    uint32_t n_batch;    /* most tokens one ox_decode call takes */
    int32_t n_threads;   /* <= 0: ox_default_threads() (physical cores) */
    uint32_t n_seq_max;  /* sequences (seq_id 0 .. n_seq_max-1), at most OX_SEQ_MAX */
    enum ox_dtype kv_type; /* OX_DTYPE_F16 (default), OX_DTYPE_F32 or OX_DTYPE_Q8_0 */
    bool embeddings;       /* also keep each output row's final hidden state (after the output
                              norm, before the output matrix): ox_get_embeddings, ox_embed;
                              required for a model without logits (ox_model_has_logits) */
};

OX_API struct ox_context_params ox_context_params_default(void);
/* A context borrows its model, which must outlive it. Memory (KV cache, activations) is sized
 * here; ox_decode does not allocate. */
OX_API enum ox_status ox_context_create(const struct ox_model *model,
                                        const struct ox_context_params *params,
                                        struct ox_context **out);
OX_API void ox_context_free(struct ox_context *ctx);
OX_API uint32_t ox_context_n_ctx(const struct ox_context *ctx);
/* The most tokens one ox_decode takes, and the model the context runs. */
OX_API uint32_t ox_context_n_batch(const struct ox_context *ctx);
/* The most tokens a batch may have and still run as a recorded step on the context's device
 * (a CUDA graph, replayed for every batch of that size); 0 where steps are not recorded (the
 * CPU). Speculative decoding keeps its checks within it. */
OX_API uint32_t ox_context_recorded_tokens(const struct ox_context *ctx);
OX_API const struct ox_model *ox_context_model(const struct ox_context *ctx);
/* Memory the context holds where the model runs (the GPU's for a CUDA model, also for one split
 * between CPU and GPU, else the host's): the KV cache, and everything else (activations,
 * logits, scratch). */
OX_API void ox_context_memory(const struct ox_context *ctx, uint64_t *kv_bytes,
                              uint64_t *buffer_bytes);
/* on: a batch gives each token's logits bit for bit as decoding that token alone would (on
 * the CPU: its one-token kernels for every batch size, slower for prompts; on a GPU: batches
 * up to ox_context_recorded_tokens), so that checking a speculative draft in one batch keeps
 * plain decoding's output. Off by default. */
OX_API void ox_context_set_one_token_order(struct ox_context *ctx, bool on);

/* A batch of tokens: token i is at position pos[i] of sequence seq_id[i]; logits[i] asks for
 * its output row. pos, seq_id and logits may be NULL: positions then continue each sequence,
 * seq_id is 0, and only the last token's logits are kept. */
struct ox_batch {
    int32_t n_tokens;
    const ox_token *token;
    const int32_t *pos;
    const int32_t *seq_id;
    const bool *logits;
};

/* Run the model over the batch, appending it to the KV cache. OX_ERR_CONTEXT_FULL when the
 * cache has no room (nothing is changed then); OX_ERR_INVALID_ARG for bad tokens, positions or
 * sequence ids. */
OX_API enum ox_status ox_decode(struct ox_context *ctx, const struct ox_batch *batch);
/* The logits (n_vocab floats) of batch token i of the last ox_decode, or NULL when i did not
 * ask for them. Valid until the next ox_decode. */
OX_API const float *ox_get_logits(const struct ox_context *ctx, int32_t i);
/* The final hidden state (n_embd floats) of batch token i of the last ox_decode, or NULL when i
 * did not ask for its output or the context was made without embeddings. Valid until the next
 * ox_decode. */
OX_API const float *ox_get_embeddings(const struct ox_context *ctx, int32_t i);

/* How ox_embed pools a sequence's hidden states (llama.cpp's LLAMA_POOLING_TYPE_* values). */
enum ox_pooling {
    OX_POOLING_NONE = 0, /* none: per-token states only (ox_get_embeddings); ox_embed refuses it */
    OX_POOLING_MEAN = 1, /* the mean over the tokens */
    OX_POOLING_CLS = 2,  /* the first token's */
    OX_POOLING_LAST = 3, /* the last token's */
    OX_POOLING_RANK = 4, /* a classifier head's scores from the first token's state (rerankers:
                            score 0 is the relevance); never normalized */
    OX_POOLING_COUNT
};

/* The pooling the model's file asks for (its "<arch>.pooling_type"), OX_POOLING_NONE when it
 * names none. */
OX_API enum ox_pooling ox_model_pooling(const struct ox_model *model);
/* How many scores the model's classifier head gives with OX_POOLING_RANK (cls.output's rows),
 * 0 when it has no head. */
OX_API int32_t ox_model_n_cls_out(const struct ox_model *model);
/* Whether the model has a language-model head. Encoders (bert, nomic-bert) have none: they make
 * embeddings only, in contexts created with ox_context_params.embeddings. */
OX_API bool ox_model_has_logits(const struct ox_model *model);
/* Whether some of the model's layers are recurrent (delta-net, Mamba-2): their state per
 * sequence cannot give tokens back (ox_kv_seq_rm drops the whole sequence). */
OX_API bool ox_model_is_recurrent(const struct ox_model *model);

/* A reranker's tokens for one query and one document, as llama.cpp's server makes them: the
 * model's "rerank" chat template with {query} and {document} replaced (control tokens parsed)
 * when it has one, else BOS, query, EOS (SEP when there is no EOS), SEP, document, EOS, each as
 * the vocabulary adds them. Writes at most cap ids; *n_tokens is the number needed. */
OX_API enum ox_status ox_tokenize_rerank(const struct ox_model *model, const char *query,
                                         const char *document, ox_token *tokens, size_t cap,
                                         size_t *n_tokens);

/* The embedding of one token sequence: decoded on sequence 0 of a cleared cache in n_batch
 * pieces (one piece for a model whose attention is not causal: its contexts take n_batch =
 * n_ctx); the tokens' final hidden states pooled, then divided by their L2 norm when normalize
 * (llama.cpp's server normalizes; never the scores of OX_POOLING_RANK). out: ox_model_n_embd
 * floats, or ox_model_n_cls_out scores with OX_POOLING_RANK (a model without a classifier head
 * refuses it). Needs a context made with embeddings; more tokens than the context holds:
 * OX_ERR_CONTEXT_FULL. The cache then holds the tokens; ox_get_logits and ox_get_embeddings
 * return NULL until the next ox_decode. */
OX_API enum ox_status ox_embed(struct ox_context *ctx, const ox_token *tokens, int32_t n,
                               enum ox_pooling pooling, bool normalize, float *out);

/* KV cache operations over positions [p0, p1) (p1 < 0: to the end). A model with recurrent
 * layers (qwen35's delta-net layers) keeps one state per sequence that cannot give tokens back:
 * removing any of a sequence's positions removes all of them (check ox_kv_seq_pos_max after),
 * and ox_kv_seq_cp copies the whole state whatever the range. */
OX_API void ox_kv_clear(struct ox_context *ctx);
OX_API void ox_kv_seq_rm(struct ox_context *ctx, int32_t seq_id, int32_t p0, int32_t p1);
OX_API void ox_kv_seq_cp(struct ox_context *ctx, int32_t src, int32_t dst, int32_t p0,
                         int32_t p1);
/* Shift positions by delta (context shift); RoPE is re-applied to the cached keys. */
OX_API void ox_kv_seq_add(struct ox_context *ctx, int32_t seq_id, int32_t p0, int32_t p1,
                          int32_t delta);
/* The largest position cached for seq_id, or -1. */
OX_API int32_t ox_kv_seq_pos_max(const struct ox_context *ctx, int32_t seq_id);
/* Context shift (llama.cpp's): of sequence seq_id's positions [0, n) (n = pos_max + 1), keep the
 * first n_keep, drop half of the rest, and move the ones after down to follow (their keys
 * rotated: ox_kv_seq_add). Returns how many were dropped: 0 when none can be, or when the model's
 * recurrent state cannot give tokens back (the sequence is then empty: ox_kv_seq_rm). The
 * caller's list of the sequence's tokens loses [n_keep, n_keep + dropped) likewise. */
OX_API int32_t ox_kv_seq_shift(struct ox_context *ctx, int32_t seq_id, int32_t n_keep);

/* ---- Saved state ------------------------------------------------------------------------- */

/* A sequence's state: its cached keys and values and their positions, and the state of the
 * model's recurrent layers (delta-net, Mamba-2) for it, tied to the model (and KV cache type)
 * of the context that saved it. Loaded into any sequence of a context of the same model, it
 * replaces that sequence's cells and decoding continues exactly as if the state had never left
 * (the logits of the next tokens are the same bits). The bytes ox_state_seq_save writes (0 on a
 * bad sequence, the message in ox_last_error()). */
OX_API size_t ox_state_seq_size(struct ox_context *ctx, int32_t seq_id);
OX_API enum ox_status ox_state_seq_save(struct ox_context *ctx, int32_t seq_id, uint8_t *buf,
                                        size_t cap, size_t *written);
/* A state from another model, cut short or corrupt is refused (OX_ERR_FORMAT) with the
 * sequence left as it was; one that does not fit the free cells is OX_ERR_CONTEXT_FULL. */
OX_API enum ox_status ox_state_seq_load(struct ox_context *ctx, int32_t seq_id,
                                        const uint8_t *buf, size_t len);
/* The same as files, with the tokens the state holds (a prompt cache): written to a temporary
 * name and renamed when whole; loaded with the tokens into tokens[cap] (their count in
 * *n_tokens). */
OX_API enum ox_status ox_state_seq_save_file(struct ox_context *ctx, int32_t seq_id,
                                             const char *path, const ox_token *tokens,
                                             size_t n_tokens);
OX_API enum ox_status ox_state_seq_load_file(struct ox_context *ctx, int32_t seq_id,
                                             const char *path, ox_token *tokens, size_t cap,
                                             size_t *n_tokens);

/* ---- LoRA adapters ----------------------------------------------------------------------- */

/* A LoRA adapter in GGUF, as llama.cpp's convert_lora_to_gguf.py writes it (general.type
 * "adapter", adapter.type "lora", adapter.lora.alpha, tensors NAME.lora_a and NAME.lora_b),
 * checked against model: its architecture, that every weight it targets is in the model with
 * the shape its A and B fit; any failure is a clear ox_last_error and nothing is loaded. An
 * adapter belongs to its model (freed with it at the latest); apply it to contexts with
 * ox_context_set_lora. Not while the model's contexts decode. */
struct ox_lora;
/* An adapter at a scale (a request's own set, ox_request.lora). */
struct ox_lora_use {
    struct ox_lora *lora;
    float scale;
};
OX_API enum ox_status ox_lora_load(struct ox_model *model, const char *path,
                                   struct ox_lora **out);
/* Only once no context applies it any more (ox_context_clear_lora, or the context freed). */
OX_API void ox_lora_free(struct ox_lora *lora);
OX_API float ox_lora_alpha(const struct ox_lora *lora);
/* How many weights it targets. */
OX_API int32_t ox_lora_n_tensors(const struct ox_lora *lora);
/* ctx's later batches apply lora at scale (1: as trained, as llama.cpp's --lora; the delta is
 * scale * alpha / rank * B A x); scale 0 takes it off; set again, a new scale. Up to 8 at once,
 * applied in the order set. */
OX_API enum ox_status ox_context_set_lora(struct ox_context *ctx, struct ox_lora *lora,
                                          float scale);
OX_API void ox_context_clear_lora(struct ox_context *ctx);
/* A copy of model's file with n adapters merged in at their scales (llama.cpp's export-lora):
 * each weight they target becomes W + sum scale * alpha / rank * B A, written as F16 (F32 where
 * the base's is F32), the rest copied as it is; written to a temporary file renamed to out_path
 * at the end. */
OX_API enum ox_status ox_lora_export(struct ox_model *model, struct ox_lora *const *loras,
                                     const float *scales, int32_t n, const char *out_path);

/* ---- Sampling ---------------------------------------------------------------------------- */

/* A sampler chain turns a row of logits into one token: each stage narrows or reshapes the
 * candidates (penalties, top-k, top-p, min-p, temperature, ...) and the last one picks
 * (greedy, a seeded random draw, or mirostat). Stages run in the order added, as llama.cpp's
 * llama_sampler_chain; its CLI's order is penalties -> DRY -> top-n-sigma -> top-k -> typical
 * -> top-p -> min-p -> XTC -> temperature -> dist (logit bias first, when any).
 *
 *     struct ox_sampler *s;
 *     ox_sampler_create(&s);
 *     ox_sampler_add_top_k(s, 40);
 *     ox_sampler_add_top_p(s, 0.95f, 1);
 *     ox_sampler_add_min_p(s, 0.05f, 1);
 *     ox_sampler_add_temp(s, 0.8f);
 *     ox_sampler_add_dist(s, 1234);
 *     ox_token t = ox_sampler_sample(s, logits, n_vocab);
 */
struct ox_sampler;

OX_API enum ox_status ox_sampler_create(struct ox_sampler **out);
OX_API void ox_sampler_free(struct ox_sampler *sampler);
/* Stages; each returns OX_ERR_INVALID_ARG for out-of-range parameters (NaN, k < 0, ...). */
OX_API enum ox_status ox_sampler_add_greedy(struct ox_sampler *s);
OX_API enum ox_status ox_sampler_add_dist(struct ox_sampler *s, uint32_t seed);
OX_API enum ox_status ox_sampler_add_temp(struct ox_sampler *s, float temp);
OX_API enum ox_status ox_sampler_add_top_k(struct ox_sampler *s, int32_t k);
OX_API enum ox_status ox_sampler_add_top_p(struct ox_sampler *s, float p, size_t min_keep);
OX_API enum ox_status ox_sampler_add_min_p(struct ox_sampler *s, float p, size_t min_keep);
/* Locally typical sampling; p >= 1 keeps everything. */
OX_API enum ox_status ox_sampler_add_typical(struct ox_sampler *s, float p, size_t min_keep);
/* Top-n-sigma: logits below max - n * stddev become -inf; n <= 0 keeps everything. */
OX_API enum ox_status ox_sampler_add_top_n_sigma(struct ox_sampler *s, float n);
/* XTC: with probability p, drop every token above threshold t but the least likely of them
 * (if min_keep remain); p <= 0 or t > 0.5 disable it. Its own seeded MT19937 stream. */
OX_API enum ox_status ox_sampler_add_xtc(struct ox_sampler *s, float p, float t, size_t min_keep,
                                         uint32_t seed);
/* Repetition (divide positive / multiply negative logits by repeat), frequency (count * freq)
 * and presence penalties over the last last_n accepted tokens; last_n = 0 disables. */
OX_API enum ox_status ox_sampler_add_penalties(struct ox_sampler *s, int32_t last_n, float repeat,
                                               float freq, float present);
/* DRY: a token that would extend a repeat of the last penalty_last_n accepted tokens longer
 * than allowed_length loses multiplier * base^(length - allowed_length). Sequence breakers
 * (strings such as "\n", ":", "\"", "*") end repeats; vocab turns them into tokens and may be
 * NULL only with no breakers. multiplier 0, base < 1 or penalty_last_n 0 disable it. */
OX_API enum ox_status ox_sampler_add_dry(struct ox_sampler *s, const struct ox_vocab *vocab,
                                         float multiplier, float base, int32_t allowed_length,
                                         int32_t penalty_last_n, const char *const *breakers,
                                         size_t n_breakers);
/* Mirostat v1 (a picker: ends the chain). n_vocab: the model's; m: tokens used to estimate
 * the Zipf exponent (llama.cpp: 100); mu starts at 2 * tau. */
OX_API enum ox_status ox_sampler_add_mirostat(struct ox_sampler *s, int32_t n_vocab, uint32_t seed,
                                              float tau, float eta, int32_t m);
/* Mirostat v2 (a picker: ends the chain). */
OX_API enum ox_status ox_sampler_add_mirostat_v2(struct ox_sampler *s, uint32_t seed, float tau,
                                                 float eta);
/* A fixed offset added to one token's logit; -INFINITY bans it. */
struct ox_logit_bias {
    ox_token token;
    float bias;
};
/* The n entries are copied; tokens must be >= 0. */
OX_API enum ox_status ox_sampler_add_logit_bias(struct ox_sampler *s,
                                                const struct ox_logit_bias *bias, size_t n);
/* A GBNF grammar (llama.cpp's format) constraining what may be sampled: candidates whose
 * text cannot continue the parse are excluded, end-of-generation tokens are kept only where
 * the grammar may end, and accepted tokens advance it. Add it first in the chain. A grammar
 * that does not parse is refused (OX_ERR_FORMAT, with the line and the reason). */
OX_API enum ox_status ox_sampler_add_grammar(struct ox_sampler *s, const struct ox_vocab *vocab,
                                             const char *gbnf, size_t len);
/* A JSON Schema (JSON text, len bytes) as a GBNF grammar for ox_sampler_add_grammar, following
 * llama.cpp's json-schema-to-grammar: types (and lists of them), properties / required /
 * additionalProperties (absent beside properties = none, as llama.cpp), items / prefixItems /
 * minItems / maxItems, minLength / maxLength / pattern / format (date, time, date-time, uuid),
 * integer minimum / maximum (exclusive too), enum, const, anyOf / oneOf, allOf of objects, and
 * local $refs (recursion allowed). *out is malloc'd, NUL-terminated, with a `root` rule; the
 * caller free()s it. Bad JSON and unsupported or contradictory schemas are OX_ERR_FORMAT. */
OX_API enum ox_status ox_json_schema_to_grammar(const char *schema_json, size_t len, char **out,
                                                size_t *out_len);
/* Pick a token from n_vocab logits (not modified); -1 when the chain cannot pick (empty
 * chain, no final greedy/dist/mirostat stage, n_vocab < 1). Not thread-safe per sampler. */
OX_API ox_token ox_sampler_sample(struct ox_sampler *s, const float *logits, int32_t n_vocab);
/* Forget per-sequence state and restart the random stream from its seed. */
OX_API void ox_sampler_reset(struct ox_sampler *s);
/* Feed an accepted token (a sampled one, or a prompt token) to the stages that keep a
 * history (penalties, DRY); ox_sampler_sample does not do it, as llama.cpp's. */
OX_API enum ox_status ox_sampler_accept(struct ox_sampler *s, ox_token token);
/* The same for a prompt token: the history stages see it, a grammar does not (the grammar
 * constrains what is generated, not what was given). */
OX_API enum ox_status ox_sampler_accept_prompt(struct ox_sampler *s, ox_token token);
/* The chain's state (random streams, token histories, mirostat's mu, a grammar's parse): its
 * size, saved into buf (cap bytes; *written may be NULL), and loaded into a chain built the same
 * way (the same stages in the same order, in this process or another): sampling then goes on
 * exactly as it would have after the save. Bytes of another chain, cut or altered: OX_ERR_FORMAT,
 * the chain left as it was. */
OX_API size_t ox_sampler_state_size(const struct ox_sampler *s);
OX_API enum ox_status ox_sampler_state_save(const struct ox_sampler *s, uint8_t *buf, size_t cap,
                                            size_t *written);
OX_API enum ox_status ox_sampler_state_load(struct ox_sampler *s, const uint8_t *buf,
                                            size_t size);

/* ---- Speculative decoding ---------------------------------------------------------------- */

/* A drafter guesses the tokens that follow a sequence; the target checks the guess in one
 * batch and the caller's sampler samples each position from the target's logits while it
 * agrees: plain decoding's output (greedy or seeded; bit for bit on the CPU) in fewer steps.
 * The drafter is a small model of the target's vocabulary, or prompt lookup: what followed the
 * sequence's last n tokens where they last appeared in it (for text that repeats its input). */
struct ox_spec_params {
    struct ox_model *draft_model; /* NULL: prompt lookup; the caller loads and frees it */
    int32_t draft_max;            /* most tokens drafted a step (16) */
    int32_t draft_min;            /* a shorter draft is not checked (0) */
    float draft_p_min;            /* a draft model stops below this probability (0.75) */
    int32_t ngram_min, ngram_max; /* prompt lookup: suffix lengths, longest first (1, 3) */
    int32_t n_threads;            /* the draft model's context (<= 0: ox_default_threads()) */
    int32_t max_slots; /* an engine drafts only while at most this many slots generate (4) */
};
OX_API struct ox_spec_params ox_spec_params_default(void);

struct ox_spec;
/* A drafter for sequence seq_id of target; a target with recurrent layers (whose state cannot
 * drop a rejected draft) is OX_ERR_UNSUPPORTED. */
OX_API enum ox_status ox_spec_create(struct ox_context *target, int32_t seq_id,
                                     const struct ox_spec_params *params, struct ox_spec **out);
OX_API void ox_spec_free(struct ox_spec *spec);
/* OX_OK when draft shares target's tokens and specials (sizes within 128, as llama.cpp's
 * check); else OX_ERR_INVALID_ARG naming the first difference. */
OX_API enum ox_status ox_spec_draft_fits(const struct ox_model *target,
                                         const struct ox_model *draft);
/* Starts the sequence afresh with the tokens the target holds for it (the decoded prompt). */
OX_API enum ox_status ox_spec_begin(struct ox_spec *spec, const ox_token *tokens, size_t n);
/* One step. token: the last one sampled (and accepted by smp), not yet decoded; it and a draft
 * are decoded in one batch, then each position goes through ox_sampler_sample and
 * ox_sampler_accept (not for end-of-generation tokens) while the sample is the draft's token.
 * out[0 .. *n_out) gets the samples (at least one, at most max_out, none past an end of
 * generation; the last is the next step's token). OX_ERR_CONTEXT_FULL when no cell is left for
 * token (nothing changed: ox_kv_seq_shift and call again). */
OX_API enum ox_status ox_spec_step(struct ox_spec *spec, struct ox_sampler *smp, ox_token token,
                                   ox_token *out, int32_t max_out, int32_t *n_out);
/* Prompt lookup by itself: at most max tokens that followed the latest earlier occurrence of
 * the last n of tokens (n from ngram_max down to ngram_min), repeating past the end as text of
 * that period would, into out. Returns how many (0: no match). */
OX_API int32_t ox_spec_lookup(const ox_token *tokens, size_t n_tokens, int32_t ngram_min,
                              int32_t ngram_max, int32_t max, ox_token *out);
/* A draft model's pick: the first most likely of n_vocab logits, and its probability. */
OX_API ox_token ox_spec_top(const float *logits, int32_t n_vocab, float *prob);
struct ox_spec_stats {
    uint64_t steps, drafted, accepted; /* target batches, draft tokens checked, taken */
};
OX_API void ox_spec_stats(const struct ox_spec *spec, struct ox_spec_stats *stats);

/* ---- Chat templates ---------------------------------------------------------------------- */

/* One message of a conversation. */
struct ox_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content;
};

/* Render a conversation with a chat template (Hugging Face's Jinja subset, rendered as
 * transformers does: trim_blocks, lstrip_blocks, tojson without ASCII escaping). tmpl is the
 * template text, or NULL for the model's own (tokenizer.chat_template); bos_token and
 * eos_token are the model's. tools_json: a JSON array of tool definitions, or NULL. Writes at
 * most cap bytes (no NUL) and sets *len to the full length (snprintf rule). A template that
 * raises, or does not parse, gives OX_ERR_FORMAT with its message. */
OX_API enum ox_status ox_chat_apply_template(const struct ox_model *model, const char *tmpl,
                                             const struct ox_chat_message *msgs, size_t n_msgs,
                                             bool add_generation_prompt, const char *tools_json,
                                             char *buf, size_t cap, size_t *len);

/* The same from JSON: messages_json is a JSON array of message objects (with any extra
 * fields a template reads, e.g. tool_calls), tools_json an array or NULL, bos/eos the token
 * texts (NULL: empty); now: the Unix time strftime_now() reports (0: the clock). *out is
 * malloc'd (free() it) and NUL-terminated. */
OX_API enum ox_status ox_chat_render_json(const char *tmpl, const char *messages_json,
                                          const char *tools_json, bool add_generation_prompt,
                                          const char *bos_token, const char *eos_token,
                                          int64_t now, char **out, size_t *len);

/* The model's chat template text (tokenizer.chat_template), NUL-terminated and owned by the
 * model; with a name, tokenizer.chat_template.NAME, valid until the next named call on the
 * same thread. NULL when there is none. */
OX_API const char *ox_model_chat_template(const struct ox_model *model, const char *name);

/* ---- Serving: many requests in one batch ------------------------------------------------ */

/* An engine runs generation requests side by side on one context: each active request owns a
 * slot (a KV sequence), and every step decodes one batch holding the next token of each
 * generating slot and chunks of the prompts still being read (continuous batching: requests
 * join between steps and leave when done). A slot keeps its tokens after a request, and the
 * next request that starts with the same tokens reuses that prefix of the KV cache. */
struct ox_engine;

struct ox_engine_params {
    int32_t n_parallel;   /* slots, at most OX_SEQ_MAX (default 4) */
    uint32_t n_ctx;       /* KV cells shared by all slots; each slot gets n_ctx / n_parallel */
    uint32_t n_batch;     /* tokens per step at most (default 512) */
    uint32_t n_ubatch;    /* tokens per forward pass (0 or more than n_batch: n_batch); the
                           * context's activations are sized for these */
    int32_t n_threads;    /* CPU threads (0: all cores) */
    enum ox_dtype kv_type; /* the KV cache: f16 (default), f32 or q8_0 */
    /* speculative decoding in every slot (NULL: none): prompt lookup with its draft_max,
     * draft_min, ngram_min and ngram_max (a draft model is not taken here: draft_model must be
     * NULL); each generating slot's draft joins the step's batch, and a step that holds drafts
     * runs in one-token order (ox_context_set_one_token_order) */
    const struct ox_spec_params *spec;
    /* on_token and on_done of a request without on_logits, once it has started, called on a
     * thread of the engine's, in order, while the next step decodes (for a GPU, whose steps
     * leave the host idle): the step does not wait for them. A request whose on_token says
     * stop may have decoded one more step's tokens, which it is not given, and ends
     * OX_FINISH_CANCELLED. */
    bool callbacks_aside;
};

enum ox_finish {
    OX_FINISH_STOP,      /* an end-of-generation token (not passed to on_token) */
    OX_FINISH_LENGTH,    /* max_tokens, or the slot's share of the context, reached */
    OX_FINISH_CANCELLED, /* ox_engine_cancel, or on_token returned false */
    OX_FINISH_ERROR,     /* the batch failed (ox_last_error() on the stepping thread) */
};

/* A generation. The engine copies the prompt at submit; the sampler is borrowed until on_done
 * (reset and fed the prompt by the engine). The callbacks run on the thread that steps (on the
 * engine's own thread with callbacks_aside, as that says). */
struct ox_request {
    const ox_token *prompt;
    int32_t n_prompt;  /* 1 or more, at most the slot's share of the context */
    int32_t max_tokens; /* tokens to generate at most; < 0: until the slot's context is full */
    struct ox_sampler *sampler;
    bool (*on_token)(void *user, ox_token token); /* false: stop here (OX_FINISH_CANCELLED) */
    void (*on_done)(void *user, enum ox_finish reason, int32_t n_generated);
    void *user;
    /* optional: the logits row each generated token was sampled from (before on_token) */
    void (*on_logits)(void *user, const float *logits, int32_t n_vocab, ox_token token);
    bool fresh; /* decode the whole prompt, reusing no cached prefix */
    /* context shift (llama.cpp's): when the slot's context is full, keep the first n_keep
     * tokens (< 0: the whole prompt; a leading BOS always stays), drop half of the rest and
     * go on, the kept keys moved to their new positions; off: OX_FINISH_LENGTH there */
    bool context_shift;
    int32_t n_keep;
    /* the LoRA adapters this request runs with (copied at submit; scale 0 leaves one out, at
     * most 8), or NULL: the engine's own set (ox_engine_set_lora). Requests with other sets than
     * the running ones wait until those end: a step runs one set. */
    const struct ox_lora_use *lora;
    int32_t n_lora;
    /* speculative decoding: 0 drafts up to the engine's draft_max, > 0 at most this many,
     * < 0 none */
    int32_t draft_max;
};

/* What an engine is doing, for monitoring (a snapshot taken at the end of the last step). */
struct ox_engine_stats {
    int32_t n_slots, n_running, n_queued;
    int32_t kv_cells, kv_used;          /* cells of all slots; cells holding a token */
    uint64_t n_prompt_tokens;           /* prompt tokens decoded (reused prefixes not counted) */
    uint64_t n_generated_tokens;        /* tokens passed to on_token */
    uint64_t n_drafted, n_draft_accepted; /* speculative decoding: draft tokens checked, taken */
    double prompt_seconds, gen_seconds; /* time of the steps that decoded prompt / generated
                                         * tokens (a mixed step counts in both) */
};

/* One slot: the request in it (id 0: none) and the tokens its sequence holds. */
struct ox_engine_slot {
    uint64_t request_id;
    int32_t n_ctx, n_past, n_prompt, n_generated;
};

OX_API struct ox_engine_params ox_engine_params_default(void);
OX_API enum ox_status ox_engine_create(const struct ox_model *model,
                                       const struct ox_engine_params *params,
                                       struct ox_engine **out);
/* Requests still queued or running end with OX_FINISH_CANCELLED first. */
OX_API void ox_engine_free(struct ox_engine *engine);
/* Queue a request (thread-safe); *id names it for ox_engine_cancel. OX_ERR_CONTEXT_FULL when
 * the prompt does not fit a slot, OX_ERR_INVALID_ARG for an empty prompt, a token out of the
 * vocabulary or a missing sampler or callback. */
OX_API enum ox_status ox_engine_submit(struct ox_engine *engine, const struct ox_request *req,
                                       uint64_t *id);
/* Stop a request (thread-safe): it ends with OX_FINISH_CANCELLED at the next step; unknown or
 * finished ids are ignored; id 0 stops every request, queued or running. */
OX_API void ox_engine_cancel(struct ox_engine *engine, uint64_t id);
/* The last step's snapshot (thread-safe); slots: n_slots entries, or NULL. */
OX_API void ox_engine_stats(struct ox_engine *engine, struct ox_engine_stats *stats,
                            struct ox_engine_slot *slots);
/* One step: start queued requests in free slots, decode one batch, sample, call back. Sets
 * *n_busy to the requests still running or queued, or whose on_done has yet to run (0: nothing
 * to do until the next submit).
 * A failing batch ends its requests with OX_FINISH_ERROR and returns the failure. */
OX_API enum ox_status ox_engine_step(struct ox_engine *engine, int32_t *n_busy);
/* A slot's saved state (llama-server's slot save / restore / erase): the state of its sequence
 * with the tokens it holds (ox_state_seq_save_file), written to path; read back into a slot,
 * whose next request reuses the prefix it shares; or dropped. *n_tokens: the tokens saved,
 * restored or erased. A slot running a request is OX_ERR_ABORTED ("busy"). Not thread-safe with
 * ox_engine_step: call them between steps (on the stepping thread, or with the steps locked). */
OX_API enum ox_status ox_engine_slot_save(struct ox_engine *engine, int32_t slot,
                                          const char *path, size_t *n_tokens);
OX_API enum ox_status ox_engine_slot_restore(struct ox_engine *engine, int32_t slot,
                                             const char *path, size_t *n_tokens);
OX_API enum ox_status ox_engine_slot_erase(struct ox_engine *engine, int32_t slot,
                                           size_t *n_tokens);
/* The engine's own set of LoRA adapters, which requests without one of their own (ox_request
 * lora NULL) submitted from now on run with: lora at scale (0 takes it off; at most 8).
 * Thread-safe. Running requests keep theirs; a slot's cached prompt is reused only by a request
 * with the set it was made with. */
OX_API enum ox_status ox_engine_set_lora(struct ox_engine *engine, struct ox_lora *lora,
                                         float scale);

/* ---- GGUF files (read-only inspection) --------------------------------------------------- */

/* GGUF metadata value types, with the file format's numeric ids. */
#define OX_GGUF_TYPE_LIST(X)   \
    X(UINT8, 0, "u8", 1)       \
    X(INT8, 1, "i8", 1)        \
    X(UINT16, 2, "u16", 2)     \
    X(INT16, 3, "i16", 2)      \
    X(UINT32, 4, "u32", 4)     \
    X(INT32, 5, "i32", 4)      \
    X(FLOAT32, 6, "f32", 4)    \
    X(BOOL, 7, "bool", 1)      \
    X(STRING, 8, "str", 0)     \
    X(ARRAY, 9, "arr", 0)      \
    X(UINT64, 10, "u64", 8)    \
    X(INT64, 11, "i64", 8)     \
    X(FLOAT64, 12, "f64", 8)

enum ox_gguf_type {
#define OX_X_(name, id, str, size) OX_GGUF_##name = id,
    OX_GGUF_TYPE_LIST(OX_X_)
#undef OX_X_
    OX_GGUF_TYPE_COUNT
};

/* Short name of a metadata type ("u32", "arr"), or NULL for an invalid one. */
OX_API const char *ox_gguf_type_name(enum ox_gguf_type type);

struct ox_gguf;

/* One metadata value. Scalars are widened into u/i/f/b by their type; strings point into the
 * file (not NUL-terminated, length n); arrays have elem_type and n elements, read with
 * ox_gguf_array_get(). Valid while the ox_gguf lives. */
struct ox_gguf_value {
    enum ox_gguf_type type;
    enum ox_gguf_type elem_type; /* OX_GGUF_ARRAY only */
    uint64_t n;                  /* STRING: bytes; ARRAY: elements; scalars: 1 */
    union {
        uint64_t u;    /* UINT8..UINT64 */
        int64_t i;     /* INT8..INT64 */
        double f;      /* FLOAT32, FLOAT64 */
        bool b;        /* BOOL */
        const char *s; /* STRING */
    } v;
    const void *internal_; /* ARRAY: the library's handle; do not touch */
};

/* One tensor's description; name and data stay valid while the ox_gguf lives. */
struct ox_tensor_info {
    const char *name;
    enum ox_dtype type;
    int n_dims;          /* 1..4 */
    int64_t ne[4];       /* elements per dimension, ne[0] fastest; unused dims are 1 */
    uint64_t offset;     /* from the start of the data section */
    uint64_t n_bytes;    /* size of the data */
    const void *data;    /* the bytes in the mapped (or read) file */
};

/* Open and fully validate a GGUF file (v2 or v3), mapped read-only (read() into memory when
 * mmap is unavailable). A malformed file gives OX_ERR_FORMAT with a message naming the key or
 * tensor and the bad value. */
OX_API enum ox_status ox_gguf_open(const char *path, struct ox_gguf **out);
/* Same, over a caller buffer that must outlive the returned object. */
OX_API enum ox_status ox_gguf_open_buffer(const void *data, size_t size, struct ox_gguf **out);
OX_API void ox_gguf_free(struct ox_gguf *gguf);

OX_API uint32_t ox_gguf_version(const struct ox_gguf *gguf);
OX_API uint32_t ox_gguf_alignment(const struct ox_gguf *gguf);
/* Byte offset of the tensor data section in the file. */
OX_API uint64_t ox_gguf_data_offset(const struct ox_gguf *gguf);
OX_API uint64_t ox_gguf_file_size(const struct ox_gguf *gguf);

OX_API int64_t ox_gguf_n_kv(const struct ox_gguf *gguf);
/* Key of entry i (NUL-terminated), or NULL when i is out of range. */
OX_API const char *ox_gguf_key(const struct ox_gguf *gguf, int64_t i);
/* Index of key, or -1. */
OX_API int64_t ox_gguf_find_key(const struct ox_gguf *gguf, const char *key);
OX_API enum ox_status ox_gguf_value(const struct ox_gguf *gguf, int64_t i,
                                    struct ox_gguf_value *out);
/* Element i of an array value. */
OX_API enum ox_status ox_gguf_array_get(const struct ox_gguf_value *array, uint64_t i,
                                        struct ox_gguf_value *out);

OX_API int64_t ox_gguf_n_tensors(const struct ox_gguf *gguf);
/* Index of the tensor with this name, or -1. */
OX_API int64_t ox_gguf_find_tensor(const struct ox_gguf *gguf, const char *name);
OX_API enum ox_status ox_gguf_tensor(const struct ox_gguf *gguf, int64_t i,
                                     struct ox_tensor_info *out);

/* ---- CPU features ------------------------------------------------------------------------ */

/* The features of the running CPU the kernels may use, as a space-separated list ("avx2 fma
 * f16c avx512f ..."; OX_CPU_ISA removes those above its level).
 * Returns the length needed; writes at most cap bytes including the NUL (snprintf rule). */
OX_API size_t ox_cpu_features(char *buf, size_t cap);

/* The instruction-set level the CPU kernels run at: the best this CPU has ("avx512",
 * "avx2-vnni", "avx2"; "neon-i8mm", "neon-dotprod", "neon"; "scalar"), or the lower one named
 * by the environment variable OX_CPU_ISA (for tests and benchmarks). A level the CPU lacks, or
 * an unknown name, makes ox_model_load and ox_context_create fail with OX_ERR_UNSUPPORTED. */
OX_API const char *ox_cpu_isa(void);

/* The data caches the CPU kernels size their blocks for, as one line ("l1d 32K, l2 1M per core,
 * l3 32M shared (sysfs)"); the environment variable OX_CPU_CACHE=L1:L2:L3 (KiB) overrides
 * them. Returns the length needed; writes at most cap bytes including the NUL (snprintf rule). */
OX_API size_t ox_cpu_caches(char *buf, size_t cap);

/* The backends this build has and whether each device backend finds its device, as one line
 * ("cpu", "cpu, cuda (device found)", "cpu, cuda (no device)"). Returns the length needed;
 * writes at most cap bytes including the NUL (snprintf rule). */
OX_API size_t ox_backends(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* OXIDIZE_H */
