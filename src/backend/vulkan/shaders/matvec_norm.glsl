// matvec_norm.glsl: a product of a decode step's RMSNorm that y += W x made as int8 groups
// without its 1 / rms (matvec_group.comp): that scale, from the workgroups' sums of squares (fold:
// the NormBlock). The includer declares p (matvec_args.glsl), NT and WG, its workgroup's threads,
// and enables GL_KHR_shader_subgroup_arithmetic.
shared float squares[NT][WG / 4]; // each subgroup's (of 4 threads or more: vk_device.c)

// Each subgroup's sum of the norm's sums of squares for each token, into squares (every thread
// calls it, before a barrier).
void add_squares() {
    NormBlock nb = NormBlock(p.fold);
    [[unroll]] for (uint t = 0; t < NT; t++)
        if (t < p.n) {
            float q = 0;
            for (uint j = gl_LocalInvocationID.x; j < nb.parts; j += WG)
                q += nb.partials.v[t * nb.parts + j];
            q = subgroupAdd(q);
            if (gl_SubgroupInvocationID == 0)
                squares[t][gl_SubgroupID] = q;
        }
}

// The norm's 1 / rms for token t, as rows.comp computes it (after add_squares and a barrier).
float norm_scale(uint t) {
    NormBlock nb = NormBlock(p.fold);
    float q = 0;
    for (uint s = 0; s < gl_NumSubgroups; s++)
        q += squares[t][s];
    return block_norm_scale(nb, q);
}
