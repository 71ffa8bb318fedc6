// cm2_q4_k.glsl: q4_K weights as gemm_cm2.comp's tensor loads read them: each superblock's 8
// (scale, min) pairs worked out once for the tile's rows into shared memory from its 16-byte
// head (read a superblock ahead), and a weight's level a nibble read in the decode function.
// Needs BM, w_base, ROWS, ROW_BYTES (gemm_cm2.comp's).

// q4_K's superblock as ggml lays it out (ggml-common.h's block_q4_K): d and dmin (f16), 12 bytes
// of 6-bit scales and mins, 128 bytes of 4-bit levels; 144 bytes, so every block is 16-aligned.
struct q4_K {
    uvec4 head;
    uint qs[32];
};
// The weights as an array of blocks (the tensor load's element), one block as the decode
// function is handed it, and the heads alone.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer W { q4_K v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Block { q4_K b; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Heads { uvec4 v[]; };
const uint QK = 256, BLOCK_BYTES = 144;
// [sub-block][row]: d * scale, dmin * min of the current superblock; rows padded by two so that a
// row's sub-blocks fall in different banks
const uint SCALE_STRIDE = BM + 2;
shared vec2 scales[8 * SCALE_STRIDE];

// Weight (row at[0], column in_block[1] of its superblock): sub-block s's level l is a nibble of
// byte 32 (s / 2) + l, the low one for even s.
float16_t decode(const in Block blk, const in uint at[2], const in uint in_block[2]) {
    uint i = in_block[1], s = i / 32, l = i % 32;
    vec2 dm = scales[s * SCALE_STRIDE + at[0] % BM];
    uint q = (blk.b.qs[8 * (s / 2) + l / 4] >> (8 * (l & 3) + 4 * (s % 2))) & 15;
    return float16_t(dm.x * float(q) - dm.y);
}

const uint PER = 8 * BM / 256; // (scale, min) pairs a thread works out: its row's part'th PER
uvec4 head;                    // this thread's row's next superblock's head

// Pairs PER part .. PER part + PER - 1 of the 8 from a superblock's head (ggml's get_scale_min_k4:
// the first four 6 bits of bytes 0-3 and 4-7, the last four a nibble of bytes 8-11 and the top
// two bits of bytes 0-3 and 4-7).
void head_scales(uvec4 h, uint part, out vec2 v[PER]) {
    vec2 dm = unpackHalf2x16(h.x);
    [[unroll]] for (uint e = 0; e < PER; e++) {
        uint s = PER * part + e, sc, mn;
        if (s < 4) {
            sc = (h.y >> (8 * s)) & 63, mn = (h.z >> (8 * s)) & 63;
        } else {
            uint k = 8 * (s - 4);
            sc = ((h.w >> k) & 15) | ((h.y >> (k + 6)) & 3) << 4;
            mn = ((h.w >> (k + 4)) & 15) | ((h.z >> (k + 6)) & 3) << 4;
        }
        v[e] = vec2(dm.x * float(sc), dm.y * float(mn));
    }
}

// The head of superblock c0 / QK of this thread's row (the tile's last row past the matrix's).
uvec4 fetch_head(uint r0, uint c0) {
    uint r = min(r0 + gl_LocalInvocationID.x % BM, ROWS - 1);
    return Heads(w_base + uint64_t(r) * ROW_BYTES + uint64_t(c0 / QK) * BLOCK_BYTES).v[0];
}

void superblocks_begin(uint r0) {
    head = fetch_head(r0, 0);
}

// The scales of the superblock at column c0 into shared memory (once the last one's decoding is
// done), then the next one's head read while this one is multiplied.
void superblock(uint r0, uint c0) {
    uint th = gl_LocalInvocationID.x, part = th / BM;
    vec2 v[PER];
    head_scales(head, part, v);
    barrier();
    [[unroll]] for (uint e = 0; e < PER; e++)
        scales[(PER * part + e) * SCALE_STRIDE + th % BM] = v[e];
    barrier();
    if (c0 + QK < COLS)
        head = fetch_head(r0, c0 + QK);
}
