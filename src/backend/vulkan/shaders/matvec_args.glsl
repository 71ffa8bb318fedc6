// matvec_args.glsl: matvec.comp's and matvec_group.comp's push constants (vk_internal.h's
// struct matvec_args), and the NormBlock a decode step's folded RMSNorm is described by.
layout(push_constant) uniform Args {
    uint64_t w[3], y[3]; // matrices and their outputs; rows[m] 0 past the last
    uint64_t x, tab;
    uint rows[3], row_bytes[3];
    uint cols, n, mode, glu_kind; // n <= 8
    uint64_t halves; // a GLU's y as f16 too (as halves.comp rounds it), or 0; matvec_group.comp's
                     // GLU: where its groups go (as NormBlock's bytes), or 0
    uint64_t rope;   // q, k and v's products in a decode step: RopeBlock, or 0
    uint64_t fold;   // y += W x on matvec_group.comp: the NormBlock it writes; a product of the
                     // norm's groups (x): the NormBlock they came with; 0: none (vk_group_fold.c)
} p;

#define MODE_SET 0
#define MODE_ADD 1
#define MODE_GLU 2

// Where y += W x on matvec_group.comp writes y times the norm's weights g as int8 groups of 32,
// as quantize_q8.comp lays them out (the n tokens' bytes, dim a token, then their groups' (d,
// sums)), and each workgroup's sum of squares of y, parts a token, which the products of the
// norm add up for its 1 / rms.
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer NormBlock {
    Floats g;        // the norm's weights (dim of them), or 0
    uint64_t bytes;  // the bytes, then the groups' (d, sums)
    Floats partials; // the sums of squares
    uint parts, dim; // parts: matvec_group.comp's workgroups (dim / 32)
    float eps;
};

// 1 / rms of a row whose squares sum to q, for the norm of NormBlock nb, as rows.comp computes it.
float block_norm_scale(NormBlock nb, float q) {
    return 1.0 / sqrt(q / float(nb.dim) + nb.eps);
}
