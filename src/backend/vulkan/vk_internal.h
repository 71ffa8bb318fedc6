/* vk_internal.h: what the Vulkan backend's files share: the process's device (one, made at the
 * first use), its memory as buffer device addresses, and a context's command stream. */
#ifndef OX_BACKEND_VK_INTERNAL_H
#define OX_BACKEND_VK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_shaders.h" /* generated: enum vk_shader and the SPIR-V */

/* Every shader takes its arguments as push constants (the pointers among them 64-bit buffer
 * device addresses), at most this many bytes: what every Vulkan device offers. */
enum { VK_PUSH_BYTES = 128, VK_WAITING = 3 };

/* A pipeline made with specialization constants 0 .. VK_SPEC - 1 set (vk_pipeline_special). */
enum { VK_SPEC = 8 };
/* Decode attention over at least this many cells is split among workgroups (vk_attention.c's
 * decode_splits; attention_decode.comp's SPLIT_ROUNDS of 128 cells). */
enum { VK_LONG_CELLS = 512 };
struct vk_special {
    enum vk_shader shader;
    uint32_t spec[VK_SPEC];
    VkPipeline pipeline;
};

/* The device every context and every weight of this process uses. */
struct vk_device {
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t family, memory_type, host_type; /* device-local memory; host-visible for staging */
    /* host-visible and cached where the device has it: what downloads land in */
    uint32_t read_type;
    VkPhysicalDeviceProperties props;
    VkPipelineLayout layout;              /* one for all: the push constants alone */
    VkPipeline pipeline[VK_SHADER_COUNT]; /* made at their first use */
    struct vk_special *special;           /* vk_pipeline_special's, made at their first use */
    int n_special, cap_special;
    void *tables;       /* dequant.glsl's lookup tables (vk_tables_ready) */
    bool coopmat;       /* prompts' products on gemm_cm.comp (vk_coopmat.c) */
    bool coopmat2;      /* f16 and q4_K's on gemm_cm2.comp (vk_coopmat2.c) */
    bool attention_cm2; /* prompts' attention on attention_cm2.comp (same) */
    bool dot8; /* decode's products on int8 activations (matvec.comp's X_Q8: vk_device.c) */
    /* decode's q, k and v products rotate and store them too (vk_rope_fold.c); OX_VK_FOLDS=0
     * turns it off */
    bool folds;
    /* decode's products make the int8 groups the next product takes (vk_group_fold.c);
     * OX_VK_GROUP_FOLDS=0 turns it off */
    bool group_folds;
    int64_t group_cols; /* the widest rows of those products (OX_VK_GROUP_COLS; 4096) */
    /* RMSNorms' weights go into the f16 matrices after them at load, and a decode step's product
     * of one token takes the norm in (vk_fold_norm.c); OX_VK_NORM_IN=0 turns it off */
    bool norm_in;
    /* a decode step's q, k and v products of two or three weight types (a dispatch each) run
     * with no barrier between them (vk_join_waiting); OX_VK_JOIN=0 turns it off */
    bool joins;
    /* a decode step's attention over f16 cache rows on attention_decode.comp (vk_attention.c);
     * OX_VK_DECODE_ATTN=0 turns it off */
    bool decode_attention;
    /* long contexts' decode attention split among workgroups (vk_attention.c's decode_splits);
     * OX_VK_DECODE_SPLIT=0 turns it off */
    bool decode_split;
    uint32_t subgroup_size; /* the threads of a subgroup, as the device reports them */
    /* how long a wait for the GPU polls its fence before it blocks (OX_VK_SPIN_US; 0: never) */
    int64_t spin_ns;
    /* gemm_cm2.comp's pipelines specialized to each weight shape (vk_matmul.c's cm2_product);
     * OX_VK_CM2_SHAPES=0 turns it off */
    bool cm2_shapes;
    /* f16 products whose large tiles are too few cut into column slices (vk_matmul.c's
     * cm2_slices); OX_VK_CM2_SLICES=0 turns it off */
    bool cm2_slices;
    /* the most 64-column steps a trip of gemm_cm2.comp's f16 loop takes (OX_VK_CM2_UNROLL, 1-8;
     * 8 unless set) */
    int cm2_unroll;
    /* products of at least this many tokens take quantized weights made f16 first (0: none;
     * vk_matmul.c's weights_as_halves) */
    uint32_t dequant_tokens;
    bool pipeline_stats;           /* each pipeline's statistics printed (vk_pipeline_stats.c) */
    bool host_import;              /* host memory imported for downloads (vk_pinned.c) */
    VkDeviceSize import_alignment; /* what its pointers and sizes are multiples of */
};

/* The device, made at the first call (NULL with the error set where there is none). */
struct vk_device *vk_device_get(void);
/* The same for a model being placed: NULL (the error set) where the device it asks for
 * (vulkan:N) is not the one this process made; frees and contexts take vk_device_get's. */
struct vk_device *vk_device_for_load(void);
VkPipeline vk_pipeline(struct vk_device *d, enum vk_shader s);
/* Shader s's pipeline with its specialization constants 0 .. VK_SPEC - 1 set to spec (made at
 * the first use of those values; NULL where the driver cannot make it). */
VkPipeline vk_pipeline_special(struct vk_device *d, enum vk_shader s, const uint32_t spec[VK_SPEC]);

/* Whether the device lists the extension. */
bool vk_has_extension(VkPhysicalDevice pd, const char *name);
/* The records a device's list query gives (fn: an instance function by name, called as
 * vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR is: for the count, then for the array), each
 * size bytes opening with its sType, set to type before the query; NULL with *n 0 where fn is
 * missing, fails or lists none. The caller frees it. */
void *vk_list_records(VkInstance inst, VkPhysicalDevice pd, const char *fn, size_t size,
                      VkStructureType type, uint32_t *n);
/* Whether the environment variable env is "0" (a path turned off, to compare with). */
bool vk_turned_off(const char *env);
/* Whether an optional path's extension is there and its environment variable (off_env=0, to
 * compare with the path without) does not turn it off. */
bool vk_optional_wanted(VkPhysicalDevice pd, const char *extension, const char *off_env);

/* Cooperative matrices (vk_coopmat.c): whether gemm_cm.comp can run on this device (this build
 * has it, the device has the extension, its block shape, subgroups of 32 and, as memory_model
 * says, the Vulkan memory model); OX_VK_COOPMAT=0 says no. */
bool vk_coopmat_usable(VkInstance inst, VkPhysicalDevice pd, bool memory_model);
/* VkPhysicalDeviceCooperativeMatrixFeaturesKHR, for headers older than the extension. */
struct vk_coopmat_features {
    VkStructureType type;
    void *next;
    VkBool32 on, robust;
};
/* f filled in to turn the feature on, chained before next; f returned. */
void *vk_coopmat_enable(struct vk_coopmat_features *f, void *next);
const char *vk_coopmat_extension(void);

/* Workgroup-wide cooperative matrices (vk_coopmat2.c): whether gemm_cm2.comp can run on this
 * device (this build has it, the device has the extension with the features and shapes it uses,
 * Vulkan 1.3, and coopmat: gemm_cm.comp's matrices, which that extension builds on);
 * OX_VK_COOPMAT2=0 says no. */
bool vk_coopmat2_usable(VkInstance inst, VkPhysicalDevice pd, bool coopmat);
/* VkPhysicalDeviceCooperativeMatrix2FeaturesNV, for headers older than the extension. */
struct vk_coopmat2_features {
    VkStructureType type;
    void *next;
    VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element,
        tensor_addressing, block_loads;
};
/* Whether attention_cm2.comp can run too (coopmat2: vk_coopmat2_usable's answer): the
 * extension's reductions, conversions and per-element functions, its shapes for a workgroup of
 * 128, subgroup arithmetic; OX_VK_ATTENTION_CM2=0 says no (attention_cm.comp then). */
bool vk_coopmat2_attention_usable(VkInstance inst, VkPhysicalDevice pd, bool coopmat2);
/* f filled in to turn on the features gemm_cm2.comp uses, and attention_cm2.comp's with
 * attention, chained before next; f returned. */
void *vk_coopmat2_enable(struct vk_coopmat2_features *f, void *next, bool attention);
const char *vk_coopmat2_extension(void);

/* The driver's statistics of each pipeline (vk_pipeline_stats.c): whether OX_VK_PIPELINE_STATS
 * asks for them and the device has the extension; f filled in to turn them on, chained before
 * next; a pipeline's (made with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR) printed. */
bool vk_pipeline_stats_wanted(VkPhysicalDevice pd);
const char *vk_pipeline_stats_extension(void);
void *vk_pipeline_stats_enable(VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR *f,
                               void *next);
void vk_pipeline_stats_print(VkDevice dev, VkPipeline pipeline, const char *name);

/* Device memory: one pool of large buffers whose addresses the op table's pointers are. */
void *vk_mem_alloc(struct vk_device *d, size_t bytes);
void vk_mem_free(struct vk_device *d, const void *p);
/* The buffer holding address p, and p's offset in it (VK_NULL_HANDLE where p is not ours). */
VkBuffer vk_mem_find(const void *p, VkDeviceSize *offset);
/* The first memory type among bits (a mask of type indices) with every flag of need, the first
 * with prefer's too where there is one; UINT32_MAX: none. */
uint32_t vk_memory_type(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags need,
                        VkMemoryPropertyFlags prefer);
/* A host-visible, coherent buffer of bytes of that memory type, mapped at *map (staging). */
VkBuffer vk_host_buffer(struct vk_device *d, size_t bytes, uint32_t type, VkDeviceMemory *mem,
                        void **map);

/* A decode step recorded once and replayed (vk_graph.c): its key (the op table's graph_begin),
 * whether it may be replayed (recorded whole, nothing uploaded inside, over the scratch buffer
 * of its epoch), its last use. */
enum { VK_GRAPHS = 8 }; /* a server's steps of 1 to 8 sequences each keep theirs */
struct vk_graph {
    VkCommandBuffer cmd;
    VkFence fence;
    uint64_t key, epoch, used;
    bool valid, in_flight;
};

/* A context's pinned host range imported as device memory (vk_pinned.c): host .. host + bytes
 * inside the whole pages from start that buffer covers. */
struct vk_pinned {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint8_t *start;
    const uint8_t *host;
    size_t bytes;
};

/* A context's state: the command buffer being recorded (one of a ring: a long batch goes to the
 * GPU in parts while the rest is recorded; or a decode step's recording), each one's fence, the
 * staging for uploads (a ring, flushed when full) and for downloads, the first failure since the
 * last download. */
enum { VK_RING = 8 };
struct vk_state {
    struct vk_device *d;
    VkCommandPool pool;
    VkCommandBuffer cmd; /* ring[at] while recording */
    VkCommandBuffer ring[VK_RING];
    VkFence fence[VK_RING];
    bool in_flight[VK_RING]; /* submitted, its fence not yet waited for */
    int at, dispatches;      /* the ring's buffer being recorded, the dispatches in it */
    struct vk_pinned pinned; /* where downloads go without staging */
    VkBuffer up, down;
    VkDeviceMemory up_mem, down_mem;
    uint8_t *up_map, *down_map;
    size_t up_size, up_used, down_size;
    bool recording, pending; /* commands recorded since the last submit */
    struct vk_profile *prof; /* OX_VK_PROFILE's timings, or NULL (vk_profile.c) */
    void *scratch;           /* activations converted for a product (vk_matmul.c), grown on use */
    size_t scratch_bytes;
    void *wide; /* a quantized weight made f16 for a long prompt's product, grown on use */
    size_t wide_bytes;
    uint64_t serial; /* the dispatches and copies recorded */
    /* what scratch holds (vk_matmul.c): count values of the floats at held_of as int8 bytes or
     * f16 (held_form: 0 none, else an x_form), while serial is held_serial; held_of 0: a
     * norm's output, no floats' */
    uint64_t held_of, held_serial;
    size_t held_count, held_at; /* held_at: its offset in scratch */
    int held_form;
    int last_form;      /* the x form the last matrix-vector product took (vk_matmul.c) */
    struct vk_waiting { /* vk_dispatch_later's dispatches, not yet recorded */
        enum vk_shader shader;
        size_t bytes;
        uint8_t args[VK_PUSH_BYTES];
        uint32_t grid[3];
        bool joined; /* no barrier between it and the next one (vk_join_waiting) */
    } waiting[VK_WAITING];
    int n_waiting;
    struct vk_blocks *blocks; /* vk_blocks.c's, or NULL */
    /* a decode step's outputs as int8 groups for the products after them (vk_group_fold.c),
     * grown on use */
    void *fold;
    size_t fold_bytes;
    /* split decode attention's counters and parts (vk_attention_parts_ready), or NULL */
    void *attn_parts;
    bool fold_lost;              /* no memory for it: not tried again */
    uint64_t group_serial;       /* serial after the last product kept waiting to make them */
    enum vk_shader group_shader; /* its matvec_group.comp variant */
    struct vk_graph graph[VK_GRAPHS];
    struct vk_graph *capture; /* the graph being recorded, or NULL */
    bool capture_spoiled;     /* something was uploaded while it was: not to be replayed */
    uint64_t epoch;           /* scratch's and wide's reallocations (a recording reads them) */
    uint64_t graph_clock;     /* graph_end's calls: the graphs' last use */
    enum ox_status err;
    char msg[256];
};

/* Whether downloads can land in imported host memory (VK_EXT_external_memory_host; not where
 * OX_VK_HOST_IMPORT=0), the pointers' alignment it asks for; the extension's name. */
bool vk_pinned_usable(VkPhysicalDevice pd, VkDeviceSize *alignment);
const char *vk_pinned_extension(void);
/* The context's pinned range made host .. host + bytes (any earlier one released first); left
 * unset where the device cannot import it. */
void vk_pinned_make(struct vk_state *s, void *host, size_t bytes);
void vk_pinned_release(struct vk_state *s);
/* Whether host .. host + bytes lies in the pinned range: its offset in the pinned buffer. */
bool vk_pinned_offset(const struct vk_state *s, const void *host, size_t bytes,
                      VkDeviceSize *offset);

static inline struct vk_state *vk_of(struct backend *b) {
    return (struct vk_state *)b->impl;
}

/* The first failure kept for the next download to report. */
void vk_note(struct vk_state *s, VkResult r, const char *what);
/* Runs what was recorded and waits for it; false on a failure (noted). */
bool vk_flush(struct vk_state *s);
/* What the ring holds sent to the GPU, without waiting. */
void vk_submit_recorded(struct vk_state *s);
/* cb submitted with fence f (ended first where end says), not waited for; false on a failure
 * (noted). */
bool vk_queue_submit(struct vk_state *s, VkCommandBuffer cb, VkFence f, bool end);
/* f waited for and reset where *in_flight, which then turns false. */
void vk_settle(struct vk_state *s, VkFence f, bool *in_flight);

/* The integer form of count activations (vk_matmul.c: matvec.comp's X_Q8 bytes and groups'
 * scales) made by another op for the product after it: where to write it (the scratch buffer,
 * or NULL where the device has no integer products or no memory for them), and, once the
 * dispatch that writes it is recorded, that it is x's (the next product of x takes it, where
 * nothing ran between). */
uint8_t *vk_bytes_target(struct vk_state *s, size_t count);
void vk_bytes_made(struct vk_state *s, const float *x, size_t count);
/* The same for the f16 copy the cooperative-matrix products read (halves.comp's, to nearest):
 * NULL where the device has no such products or no memory for them. */
void *vk_halves_target(struct vk_state *s, size_t count);
void vk_halves_made(struct vk_state *s, const float *x, size_t count);
/* The same for a decode step's output whose next product takes f16 (decode attention's, for the
 * o projection): where the last matrix-vector product took its x as f16 (f16 weights: the next
 * one likely does too), else NULL. */
void *vk_step_halves_target(struct vk_state *s, size_t count);

/* Decode steps recorded and replayed (vk_graph.c): the op table's graph_begin and graph_end; a
 * recording cut short by a flush runs once and is not kept (vk_graph_abort); the graphs waited
 * for, and released. */
bool vk_graph_begin(struct backend *b, uint64_t key);
void vk_graph_end(struct backend *b);
void vk_graph_abort(struct vk_state *s);
void vk_graphs_settle(struct vk_state *s);
void vk_graphs_release(struct vk_state *s);
/* One dispatch of shader s with push constants args (bytes of them), then a barrier so the
 * next op sees its writes. */
void vk_dispatch(struct vk_state *s, enum vk_shader sh, const void *args, size_t bytes, uint32_t gx,
                 uint32_t gy, uint32_t gz);
/* The same on shader s's pipeline specialized to spec (vk_pipeline_special). */
void vk_dispatch_special(struct vk_state *s, enum vk_shader sh, const uint32_t spec[VK_SPEC],
                         const void *args, size_t bytes, uint32_t gx, uint32_t gy, uint32_t gz);
/* The same, kept back (with up to VK_WAITING others) until the next command, which records
 * them first, in order: until then vk_waiting_args gives the i-th one's push constants (bytes of
 * them; NULL past the last or of another size) for the op after them to change (q, k and v's
 * products made to rotate and store them too: vk_rope_fold.c), and vk_waiting_redirect its shader
 * and grid for another of the same arguments (false where that has no pipeline). vk_record_waiting
 * records them now. */
void vk_dispatch_later(struct vk_state *s, enum vk_shader sh, const void *args, size_t bytes,
                       uint32_t gx, uint32_t gy, uint32_t gz);
void *vk_waiting_args(struct vk_state *s, int i, size_t bytes);
bool vk_waiting_redirect(struct vk_state *s, int i, enum vk_shader sh, uint32_t gx, uint32_t gy);
void vk_record_waiting(struct vk_state *s);
/* The last dispatch kept back and the next one kept back run with no barrier between them: the
 * second neither reads what the first writes nor writes what it reads or writes (q, k and v's
 * products of one x in two runs of one type each). */
void vk_join_waiting(struct vk_state *s);
/* matvec.comp's arguments (vk_matmul.c): up to 3 matrices of one width and type, and what to do
 * with them. */
enum { MV_SET, MV_ADD, MV_GLU };
struct matvec_args {
    uint64_t w[3], y[3], x, tab;
    uint32_t rows[3], row_bytes[3];
    uint32_t cols, n, mode, glu_kind;
    uint64_t halves; /* a GLU's output as f16 too (for down), or 0 */
    uint64_t rope; /* q, k and v's: vk_rope_fold.c's block (rotate q and k, store k and v), or 0 */
    uint64_t fold; /* matvec_group.comp's NormBlock, or that of the norm a product takes: 0 none */
};
_Static_assert(sizeof(struct matvec_args) == VK_PUSH_BYTES, "matvec.comp's push constants");
/* Decode's RoPE and cache stores done by the products of q, k and v still waiting to be recorded
 * (vk_rope_fold.c), rather than by rope_store.comp: true where they took them. */
bool vk_rope_fold(struct backend *b, const struct rope_store_args *a);
/* The int8 groups of x that a decode step's product takes where the product that wrote x is
 * still waiting (vk_group_fold.c): it is then made to write them too (matvec_group.comp) and
 * recorded; 0 where not (the caller makes them). vk_group_fold_norm: x's RMSNorm's, y += W x
 * having written x, *block the norm's for the products (matvec.comp's NORM_FOLD: 1 / rms);
 * vk_group_fold_bytes: x's own, a GLU having written x. */
uint64_t vk_group_fold_norm(struct backend *b, const float *x, const struct norm_in *norm, int n,
                            int64_t cols, uint64_t *block);
uint64_t vk_group_fold_bytes(struct backend *b, const float *x, int n, int64_t cols);
/* The device address of a block of bytes (at most VK_BLOCK_BYTES) equal to want where the
 * context has one; where it has none, want is uploaded into a new one (recording what waits
 * first) and 0 returned, so that a block serves from its second use: a decode step's first
 * recording is not replayed, and a block once there never changes (a recorded step may read
 * it). 0 too where there is no room. */
enum { VK_BLOCK_BYTES = 128 };
uint64_t vk_block_address(struct backend *b, const void *want, size_t bytes);
/* matvec_args.glsl's NormBlock: a norm taken into the products after it (vk_group_fold.c's, and
 * matvec.comp's NORM_IN, which reads dim and eps alone). */
struct norm_block {
    uint64_t g, bytes, partials;
    uint32_t parts, dim;
    float eps;
    uint32_t pad;
};
_Static_assert(sizeof(struct norm_block) == 40, "matvec_args.glsl's NormBlock is 40 bytes");
/* The NormBlock (dim and eps) by which a product of one token of f16 weights takes x's RMSNorm in
 * (matvec.comp's NORM_IN), reading x's floats: where the norm's weights went into the matrices at
 * load (vk_fold_norm.c; the model then gives none) and x is 16-byte aligned; else 0 (the caller
 * runs the norm). From the norm's second use (vk_block_address). */
uint64_t vk_norm_in_block(struct backend *b, const float *x, const struct norm_in *norm, int n,
                          int64_t cols);
void vk_blocks_release(struct vk_state *s);
/* *buf (of *have bytes) replaced by one of bytes, after what was recorded ran (it may read the
 * old one); false (*buf NULL) where the flush failed (noted) or there is no memory. */
bool vk_regrow(struct vk_state *s, void **buf, size_t *have, size_t bytes);
/* Groups for a grid-stride loop over n values, 256 a group. */
uint32_t vk_groups(size_t n);
/* The device address a pointer stands for, as the shaders take it. */
static inline uint64_t vk_addr(const void *p) {
    return (uint64_t)(uintptr_t)p;
}
/* RoPE's angle step between pairs as rope.glsl takes it (theta_scale): one expression for every
 * shader's arguments, so q, k and v's products (vk_rope_fold.c) rotate as rope_store.comp does. */
static inline float vk_theta_scale(const struct rope_params *r) {
    return powf(r->freq_base, -2.0f / (float)r->n_rot);
}

/* OX_VK_PROFILE (vk_profile.c): NULL when not asked for; timestamps around each dispatch (after:
 * the one after it), read after each submission, printed when the context is released. */
struct vk_profile *vk_profile_make(struct vk_device *d);
void vk_profile_begin(struct vk_state *s);
void vk_profile_dispatch(struct vk_state *s, enum vk_shader sh, const uint32_t grid[3], bool after);
void vk_profile_collect(struct vk_state *s);
void vk_profile_release(struct vk_state *s);

enum ox_status vk_init(struct backend *b, const struct backend_sizes *z);
void vk_release(struct backend *b);
void *vk_alloc(struct backend *b, size_t bytes);
void vk_free(struct backend *b, void *p);
void vk_upload(struct backend *b, void *dst, const void *host, size_t bytes);
enum ox_status vk_download(struct backend *b, void *host, const void *src, size_t bytes);

#endif
