/* vk_backend.c: the Vulkan backend's op table: GLSL compute shaders (compiled to SPIR-V at build
 * time and embedded) over memory whose buffer device addresses are the table's pointers. The ops
 * it has no shader for yet are NULL or refused by supports(), never run on the host behind the
 * caller's back. */
#include <stdlib.h>

#include "backend/vulkan/vk_backend.h"
#include "backend/vulkan/vk_ops.h"

/* Whether a Vulkan device with what the shaders need is here (the reason kept where not). */
static bool vk_available(void) {
    return vk_device_for_load() != NULL;
}

static int vk_devices(void) {
    return vk_available() ? 1 : 0;
}

/* The logits: imported as device memory where the device can (vk_pinned.c) */
static void vk_pin(struct backend *b, void *host, size_t bytes) {
    vk_pinned_make(vk_of(b), host, bytes);
}

static void vk_unpin(struct backend *b) {
    vk_pinned_release(vk_of(b));
}

const struct backend_ops backend_vulkan_ops = {
    .name = "Vulkan",
    .device = true,
    .available = vk_available,
    .supports = vk_supports,
    .prepare_weight = vk_prepare_weight,
    .release_weight = vk_release_weight,
    .fold_norm = vk_fold_norm,
    .init = vk_init,
    .release = vk_release,
    .pin = vk_pin,
    .unpin = vk_unpin,
    .alloc = vk_alloc,
    .free = vk_free,
    .upload = vk_upload,
    .download = vk_download,
    .matmul = vk_matmul,
    .get_rows = vk_get_rows,
    .matmul_add = vk_matmul_add,
    .matmul_multi = vk_matmul_multi,
    .matmul_glu = vk_matmul_glu,
    .rms_norm = vk_rms_norm,
    .layer_norm = vk_layer_norm,
    .rope = vk_rope,
    .rope_store = vk_rope_store,
    .glu = vk_glu,
    .gelu = vk_gelu,
    .add = vk_add,
    .add_row = vk_add_row,
    .scale = vk_scale,
    .softmax = vk_softmax,
    .softcap = vk_softcap,
    .attention = vk_attention,
    .attention_reads_cache = true,
    .delta_net = vk_delta_net,
    .mamba2 = vk_mamba2,
    .sigmoid_scale_rows = vk_sigmoid_scale_rows,
    .copy_rows = vk_copy_rows,
    .axpy = vk_axpy,
    .zero = vk_zero,
    .cache_store = vk_cache_store,
    .cache_load = vk_cache_load,
    .graph_begin = vk_graph_begin,
    .graph_end = vk_graph_end,
    .graph_max_tokens = 1, /* a sequence's next token, */
    .graph_max_seqs = 8,   /* or those of up to as many sequences as matvec.comp takes */
    .graph_long_cells = VK_LONG_CELLS, /* decode attention split among workgroups from there */
    .devices = vk_devices,
};

bool vk_backend_coopmat(void) {
    struct vk_device *d = vk_device_get();
    return d && d->coopmat;
}

bool vk_backend_coopmat2(void) {
    struct vk_device *d = vk_device_get();
    return d && d->coopmat2;
}

bool vk_backend_dot8(void) {
    struct vk_device *d = vk_device_get();
    return d && d->dot8;
}

uint32_t vk_backend_dequant_tokens(void) {
    struct vk_device *d = vk_device_get();
    return d ? d->dequant_tokens : 0;
}

bool vk_backend_folds(void) {
    struct vk_device *d = vk_device_get();
    return d && d->folds;
}

void vk_backend_set_folds(bool on) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->folds = on;
}

bool vk_backend_group_folds(void) {
    struct vk_device *d = vk_device_get();
    return d && d->group_folds;
}

int64_t vk_backend_group_cols(void) {
    struct vk_device *d = vk_device_get();
    return d ? d->group_cols : 0;
}

bool vk_backend_joins(void) {
    struct vk_device *d = vk_device_get();
    return d && d->joins;
}

void vk_backend_set_joins(bool on) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->joins = on;
}

bool vk_backend_decode_attention(void) {
    struct vk_device *d = vk_device_get();
    return d && d->decode_attention;
}

bool vk_backend_decode_split(void) {
    struct vk_device *d = vk_device_get();
    return d && d->decode_split;
}

void vk_backend_set_decode_attention(bool on) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->decode_attention = on;
}

bool vk_backend_norm_in(void) {
    struct vk_device *d = vk_device_get();
    return d && d->norm_in;
}

void vk_backend_set_norm_in(bool on) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->norm_in = on;
}

void vk_backend_set_group_folds(bool on) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->group_folds = on && d->dot8;
}

void vk_backend_set_dequant_tokens(uint32_t tokens) {
    struct vk_device *d = vk_device_get();
    if (d)
        d->dequant_tokens = tokens;
}
