/* vk_attention.c: the KV cache's rows stored and loaded (cache.comp: f32, f16 and q8_0 rows) and
 * the attention over them (attention.comp a query at a time, attention_decode.comp over f16 rows;
 * for prompts attention_block.comp 16 at a time, or attention_cm.comp 64 / attention_cm2.comp 32
 * at a time on cooperative matrices; all read the cache's rows themselves), as the op table names
 * them. */
#include <stdatomic.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_ops.h"

/* The dispatches attention_decode.comp took (vk_backend_decode_attentions_taken), over every
 * context. */
static _Atomic uint64_t decodes_taken;

uint64_t vk_backend_decode_attentions_taken(void) {
    return decodes_taken;
}

/* The dispatches of attention_decode.comp split among workgroups (decode_splits). */
static _Atomic uint64_t splits_taken;

uint64_t vk_backend_decode_splits_taken(void) {
    return splits_taken;
}

/* common.glsl's ROW_* codes. */
enum { ROW_F32, ROW_F16, ROW_Q8_0 };

struct cache_args {
    uint64_t x, base, cells;
    uint32_t n, dim, row_bytes, type, load;
};

/* The row code of a cache type, or -1 (noted) for one without a shader or q8_0 rows that are not
 * whole blocks. */
static int row_type(struct backend *b, enum ox_dtype type, int dim) {
    if (type == OX_DTYPE_F32 || type == OX_DTYPE_F16)
        return type == OX_DTYPE_F16 ? ROW_F16 : ROW_F32;
    if (type == OX_DTYPE_Q8_0 && dim % 32 == 0)
        return ROW_Q8_0;
    vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "the KV cache: a type without a shader");
    return -1;
}

static void cache_op(struct backend *b, enum ox_dtype type, float *x, int n, int dim,
                     const uint8_t *base, size_t row_bytes, const int32_t *cells, bool load) {
    int rt = n > 0 && dim > 0 ? row_type(b, type, dim) : -1;
    if (rt < 0)
        return;
    struct cache_args args = {vk_addr(x),    vk_addr(base),       vk_addr(cells), (uint32_t)n,
                              (uint32_t)dim, (uint32_t)row_bytes, (uint32_t)rt,   load};
    size_t work = (size_t)n * (size_t)(rt == ROW_Q8_0 && !load ? dim / 32 : dim);
    vk_dispatch(vk_of(b), VK_SHADER_cache, &args, sizeof args, vk_groups(work), 1, 1);
}

void vk_cache_store(struct backend *b, enum ox_dtype type, const float *x, int n, int dim,
                    uint8_t *base, size_t row_bytes, const int32_t *cells) {
    cache_op(b, type, (float *)x, n, dim, base, row_bytes, cells, false);
}

void vk_cache_load(struct backend *b, enum ox_dtype type, const uint8_t *base, size_t row_bytes,
                   float *y, int n_cells, int dim, const int32_t *cell_pos) {
    cache_op(b, type, y, n_cells, dim, base, row_bytes, cell_pos, true);
}

struct rope_store_push {
    uint64_t q, k, v, pos, ff, k_cache, v_cache, cells;
    uint32_t n, n_head, n_head_kv, hd_k, hd_v, n_rot, neox, half_rows;
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
    uint32_t k_row, v_row;
};

/* RoPE of q and k and the stores of k and v in one dispatch (rope_store.comp), for f32 and f16
 * cache rows; false for q8_0's (whose blocks the caller's cache_store rounds). */
bool vk_rope_store(struct backend *b, const struct rope_store_args *a) {
    const struct rope_params *r = a->rope;
    if ((a->cache_type != OX_DTYPE_F32 && a->cache_type != OX_DTYPE_F16) || r->n_rot <= 0 ||
        r->n_rot > a->hd_k || a->k_row > UINT32_MAX || a->v_row > UINT32_MAX)
        return false;
    if (a->n <= 0 || vk_rope_fold(b, a))
        return true;
    struct rope_store_push args = {vk_addr(a->q),
                                   vk_addr(a->k),
                                   vk_addr(a->v),
                                   vk_addr(a->pos),
                                   vk_addr(r->freq_factors),
                                   vk_addr(a->k_cache),
                                   vk_addr(a->v_cache),
                                   vk_addr(a->cells),
                                   (uint32_t)a->n,
                                   (uint32_t)a->n_head,
                                   (uint32_t)a->n_head_kv,
                                   (uint32_t)a->hd_k,
                                   (uint32_t)a->hd_v,
                                   (uint32_t)r->n_rot,
                                   r->neox,
                                   a->cache_type == OX_DTYPE_F16,
                                   vk_theta_scale(r),
                                   r->freq_scale,
                                   r->ext_factor,
                                   r->attn_factor,
                                   r->corr_dims[0],
                                   r->corr_dims[1],
                                   (uint32_t)a->k_row,
                                   (uint32_t)a->v_row};
    size_t n = (size_t)a->n,
           pairs = n * (size_t)(a->n_head + a->n_head_kv) * (size_t)(r->n_rot / 2);
    size_t rest = n * (size_t)a->n_head_kv * (size_t)(a->hd_k - r->n_rot + a->hd_v);
    vk_dispatch(vk_of(b), VK_SHADER_rope_store, &args, sizeof args, vk_groups(pairs + rest), 1, 1);
    return true;
}

struct attention_args {
    uint64_t q, k, v, y, q_pos, q_seq, cell_pos, cell_seq, sinks;
    uint64_t n_cells_at;           /* the count in device memory (WORDS_COUNT_AT; else n_cells,
                                      and this some readable address), or the sequences' spans
                                      of cells (WORDS_SPANS) */
    uint64_t bytes;                /* or 0: y also as int8 groups (a decode step's) */
    uint32_t n_cells, heads, dims; /* heads: n_head | n_head_kv << 16, dims: hd_k | hd_v << 16 */
    uint32_t words; /* SEQ_WORDS | row_type << 8 | WORDS_SPANS | WORDS_COUNT_AT | tokens << 13 */
    float scale, softcap;
    int32_t window, ahead;
    uint32_t k_row, v_row; /* bytes a row: the cache's, or the float rows' */
};

_Static_assert(SEQ_WORDS < 256, "attention_args.glsl takes SEQ_WORDS in 8 bits");
/* attention_args.glsl's SPANS: n_cells_at holds each sequence's first and one past its last
 * cell (attn_args' seq_span), and a query looks at its own sequence's cells alone. */
enum { WORDS_SPANS = 0x800 };
/* attention_args.glsl's COUNT_AT: n_cells_at holds the count of cells in use. Without it the
 * address is still a readable one (the device's tables): Mesa 26's lavapipe loaded through it
 * before testing whether to (session 39: a null address crashed it). */
enum { WORDS_COUNT_AT = 0x1000, WORDS_TOKENS_SHIFT = 13 };

/* Prompts of at least this many tokens, with heads up to 128 wide, go through
 * attention_block.comp (16 queries a workgroup sharing each tile of keys and values), or
 * attention_cm.comp (64 queries a workgroup) where the device has cooperative matrices, or
 * attention_cm2.comp (32) where it has workgroup-wide ones. */
enum {
    BLOCK_MIN_TOKENS = 16,
    BLOCK_TOKENS = 16,
    BLOCK_MAX_HEAD = 128,
    CM_TOKENS = 64,
    CM2_TOKENS = 32
};

/* attention_cm2.comp's tile (its specialization constants): CM2_TOKENS queries by 64 cells. On
 * an H200 (session 34) 32 queries ran pp512 faster than 64: the 1B F16 at 58900 / 58977 t/s
 * against 57055 / 56876 (the attention 41 us a layer against 60), the 1B Q4_K_M 41578 / 41719
 * against 40719 / 40434, the 8B Q4_K_M 10814 / 10810 against 10665; 32 x 32 and 64 x 32 ran
 * between, and 16 queries failed the op test's bounds. */
static const uint32_t cm2_tile[VK_SPEC] = {CM2_TOKENS, 64, 0, 0, 0, 0};

/* The push constants but for the query tokens (words' top bits) and the bytes; tables: a
 * readable device address for n_cells_at where there is no count there. */
static struct attention_args attention_push(const struct attn_args *a, bool cache, int rt,
                                            const void *tables) {
    const void *at = a->seq_span ? a->seq_span : a->n_cells_now;
    return (struct attention_args){
        .q = vk_addr(a->q),
        .k = vk_addr(cache ? (const void *)a->k_cache : a->k),
        .v = vk_addr(cache ? (const void *)a->v_cache : a->v),
        .y = vk_addr(a->y),
        .q_pos = vk_addr(a->q_pos),
        .q_seq = vk_addr(a->q_seq),
        .cell_pos = vk_addr(a->cell_pos),
        .cell_seq = vk_addr(a->cell_seq),
        .sinks = vk_addr(a->sinks),
        .n_cells_at = vk_addr(at ? at : tables),
        .n_cells = (uint32_t)a->n_cells,
        .heads = (uint32_t)a->n_head | (uint32_t)a->n_head_kv << 16,
        .dims = (uint32_t)a->hd_k | (uint32_t)a->hd_v << 16,
        .words = SEQ_WORDS | (uint32_t)rt << 8 | (a->seq_span ? WORDS_SPANS : 0) |
                 (!a->seq_span && a->n_cells_now ? WORDS_COUNT_AT : 0),
        .scale = a->scale,
        .softcap = a->softcap,
        .window = a->window,
        .ahead = a->ahead,
        .k_row = (uint32_t)(cache ? a->k_row : (size_t)a->n_head_kv * (size_t)a->hd_k * 4),
        .v_row = (uint32_t)(cache ? a->v_row : (size_t)a->n_head_kv * (size_t)a->hd_v * 4)};
}

/* Whether attention's arguments are ones the shaders take (else noted). */
static bool attention_takes(struct backend *b, const struct attn_args *a) {
    if (a->hd_k > 512 || a->hd_v > 512) {
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "attention: heads wider than 512");
        return false;
    }
    if (a->n_head > 65535) { /* a workgroup column a head; the counts share a word */
        vk_note(vk_of(b), VK_ERROR_FORMAT_NOT_SUPPORTED, "attention: more than 65535 heads");
        return false;
    }
    return true;
}

/* Whether a prompt's attention takes attention_cm.comp: f16 cache rows it can read 16 bytes at a
 * time, heads of whole 16x16 blocks. */
static bool on_coopmat(const struct vk_state *s, const struct attn_args *a, int rt) {
#ifdef OX_VK_COOPMAT
    return s->d->coopmat && rt == ROW_F16 && a->hd_k % 16 == 0 && a->hd_v % 16 == 0 &&
           a->k_row % 16 == 0 && a->v_row % 16 == 0 && vk_addr(a->k_cache) % 16 == 0 &&
           vk_addr(a->v_cache) % 16 == 0;
#else
    (void)s, (void)a, (void)rt;
    return false;
#endif
}

/* attention_cm2.comp's build for these heads (up to 64 or 128 wide), or VK_SHADER_COUNT where
 * it does not take them (attention_cm.comp's conditions hold already; its tensor loads and
 * stores of q and y need 16-byte aligned bases, as the cache's rows have). */
static enum vk_shader coopmat2_attention(const struct vk_state *s, const struct attn_args *a) {
#ifdef OX_VK_COOPMAT2
    int widest = a->hd_k > a->hd_v ? a->hd_k : a->hd_v;
    if (s->d->attention_cm2 && widest <= 128 && vk_addr(a->q) % 16 == 0 && vk_addr(a->y) % 16 == 0)
        return widest <= 64 ? VK_SHADER_attention_cm2_64 : VK_SHADER_attention_cm2_128;
#else
    (void)s, (void)a;
#endif
    return VK_SHADER_COUNT;
}

/* attention_decode.comp's build for a decode's queries (not block) over these heads, or
 * VK_SHADER_COUNT where it does not take them: f16 cache rows (keys 16-byte aligned, values
 * 4-byte), keys and values 64, 128 or 256 wide, subgroups of 4 .. hd / 2 threads (a lane's value
 * slice whole words), the shader's shared memory within the device's. *spec: its subgroup size. */
static enum vk_shader decode_attention(const struct vk_state *s, const struct attn_args *a, int rt,
                                       uint32_t spec[VK_SPEC]) {
    const struct vk_device *d = s->d;
    uint32_t sg = d->subgroup_size, hd = (uint32_t)a->hd_k;
    if (!d->decode_attention || !a->k_cache || rt != ROW_F16 || a->hd_v != a->hd_k ||
        (hd != 64 && hd != 128 && hd != 256) || sg < 4 || sg > hd / 2 || (sg & (sg - 1)) ||
        a->k_row % 16 || a->v_row % 4 || vk_addr(a->k_cache) % 16 || vk_addr(a->v_cache) % 4)
        return VK_SHADER_COUNT;
    uint32_t groups = 128 / sg, shared = 4 * (2 * hd + 2 * groups + groups * hd);
    if (shared > d->props.limits.maxComputeSharedMemorySize)
        return VK_SHADER_COUNT;
    memset(spec, 0, sizeof *spec * VK_SPEC);
    spec[0] = sg;
    return hd == 64    ? VK_SHADER_attention_decode_64
           : hd == 128 ? VK_SHADER_attention_decode_128
                       : VK_SHADER_attention_decode_256;
}

/* The split decode attention's counters and parts (decode_splits), made with the context so
 * that no decode step allocates: 128 heads' counters (splits of 2 or more leave at most 128),
 * then heads x splits <= 256 parts of a 256-wide head and its (maximum, sum); the counters zeroed
 * once (the last workgroup of a head sets its counter back). None where splitting is off or
 * there is no memory for it: decode attention then stays whole. */
void vk_attention_parts_ready(struct backend *b) {
    struct vk_state *s = vk_of(b);
    size_t most = 128 * 4 + 256 * (256 + 2) * 4;
    if (s->d->decode_split && (s->attn_parts = vk_mem_alloc(s->d, most)))
        vk_zero(b, s->attn_parts, most / 4);
}

/* How many workgroups attention_decode.comp splits each head's long contexts among, a grid's z
 * (1: not split): about 256 workgroups for the dispatch's heads and tokens, 16 at most (the 1B's
 * and 8B's 32 heads of one token: 8), their parts in vk_attention_parts_ready's memory. The
 * shader splits contexts of VK_LONG_CELLS or more; shorter ones take workgroup 0 alone. Steps
 * whose cells in use are fewer are not split at all: there the grid's other workgroups cost 2% to
 * 4% of an H200's decode (session 39), and a recording is made apart for each side
 * (graph_long_cells). */
static uint32_t decode_splits(struct backend *b, const struct attn_args *a, int tokens,
                              uint32_t spec[VK_SPEC]) {
    struct vk_state *s = vk_of(b);
    int64_t heads = (int64_t)a->n_head * tokens, splits = heads > 0 ? 256 / heads : 1;
    splits = splits > 16 ? 16 : splits;
    spec[1] = spec[2] = 0;
    if (!s->d->decode_split || splits < 2 || a->n_cells < VK_LONG_CELLS || !s->attn_parts)
        return 1;
    /* the address a specialization constant (no room is left in the push constants): the
     * pipelines made once for it */
    uint64_t parts = vk_addr(s->attn_parts);
    spec[1] = (uint32_t)parts, spec[2] = (uint32_t)(parts >> 32);
    return (uint32_t)splits;
}

/* The shader a prompt's (block) or decode's queries take; cm: attention_cm.comp's conditions
 * hold (on_coopmat). */
static enum vk_shader attention_shader(const struct vk_state *s, const struct attn_args *a, bool cm,
                                       bool block) {
    enum vk_shader cm2 = cm ? coopmat2_attention(s, a) : VK_SHADER_COUNT;
    if (cm2 != VK_SHADER_COUNT)
        return cm2;
#ifdef OX_VK_COOPMAT
    if (cm)
        return VK_SHADER_attention_cm;
#endif
    return block ? VK_SHADER_attention_block : VK_SHADER_attention;
}

/* The query tokens a dispatch takes: a workgroup row per per_group of them (65535 rows at
 * most), a count that fits words' 20 bits, and indices (token x heads x head width) within 32
 * bits; a multiple of per_group. */
static int attention_chunk(const struct attn_args *a, int per_group) {
    int64_t widest = a->hd_k > a->hd_v ? a->hd_k : a->hd_v;
    int64_t most = (int64_t)65535 * per_group, by_words = (1 << 20) - 1;
    int64_t by_index = (int64_t)UINT32_MAX / ((int64_t)a->n_head * widest);
    most = most < by_words ? most : by_words;
    most = most < by_index ? most : by_index;
    most = most / per_group * per_group;
    return most > per_group ? (int)most : per_group;
}

void vk_attention(struct backend *b, const struct attn_args *a) {
    if (a->n <= 0 || a->n_head <= 0 || !attention_takes(b, a))
        return;
    /* the cache's rows where it is given (attention_reads_cache), else rows of floats */
    bool cache = a->k_cache != NULL;
    int rt = cache ? row_type(b, a->cache_type, a->n_head_kv * a->hd_k) : ROW_F32;
    if (rt < 0 || (cache && row_type(b, a->cache_type, a->n_head_kv * a->hd_v) < 0))
        return;
    struct vk_state *s = vk_of(b);
    struct attention_args args = attention_push(a, cache, rt, s->d->tables);
    /* queries of one sequence each share no cells: each its own workgroup, over its span */
    bool block = !a->one_per_seq && a->n >= BLOCK_MIN_TOKENS && a->hd_k <= BLOCK_MAX_HEAD &&
                 a->hd_v <= BLOCK_MAX_HEAD && a->hd_k % 4 == 0 && a->hd_v % 4 == 0;
    /* a decode step's output as the next product takes it (vk_matmul.c): as f16 where the
     * products take that, else in the integer form (the address's bit 0 tells the shader) */
    size_t count = (size_t)a->n * (size_t)a->n_head * (size_t)a->hd_v;
    void *halves = !block && a->n <= 8 ? vk_step_halves_target(s, count) : NULL;
    uint8_t *bytes =
        !halves && !block && a->n <= 8 && a->hd_v % 32 == 0 ? vk_bytes_target(s, count) : NULL;
    args.bytes = halves ? vk_addr(halves) | 1 : vk_addr(bytes);
    bool cm = block && cache && on_coopmat(s, a, rt);
    enum vk_shader shader = attention_shader(s, a, cm, block);
    bool cm2 = false;
#ifdef OX_VK_COOPMAT2
    cm2 = shader == VK_SHADER_attention_cm2_64 || shader == VK_SHADER_attention_cm2_128;
#endif
    uint32_t spec[VK_SPEC];
    const uint32_t *special = cm2 ? cm2_tile : NULL;
    if (!block) {
        enum vk_shader decode = decode_attention(s, a, rt, spec);
        shader = decode != VK_SHADER_COUNT ? decode : shader;
        special = decode != VK_SHADER_COUNT ? spec : NULL;
    }
    int per_group = cm2 ? CM2_TOKENS : cm ? CM_TOKENS : block ? BLOCK_TOKENS : 1;
    int chunk = attention_chunk(a, per_group);
    for (int t0 = 0; t0 < a->n; t0 += chunk) { /* a workgroup row per token (or block) */
        struct attention_args part = args;
        int tokens = a->n - t0 < chunk ? a->n - t0 : chunk;
        part.q += (uint64_t)t0 * (uint64_t)a->n_head * (uint64_t)a->hd_k * sizeof(float);
        part.y += (uint64_t)t0 * (uint64_t)a->n_head * (uint64_t)a->hd_v * sizeof(float);
        part.q_pos += (uint64_t)t0 * sizeof(int32_t), part.q_seq += (uint64_t)t0 * sizeof(int32_t);
        part.words |= (uint32_t)tokens << WORDS_TOKENS_SHIFT;
        uint32_t rows = (uint32_t)((tokens + per_group - 1) / per_group), splits = 1;
        decodes_taken += special == spec;
        if (special == spec)
            splits = decode_splits(b, a, tokens, spec);
        splits_taken += splits > 1;
        if (special)
            vk_dispatch_special(s, shader, special, &part, sizeof part, (uint32_t)a->n_head, rows,
                                splits);
        else
            vk_dispatch(s, shader, &part, sizeof part, (uint32_t)a->n_head, rows, 1);
    }
    if (halves)
        vk_halves_made(s, a->y, count);
    else if (bytes)
        vk_bytes_made(s, a->y, count);
}
