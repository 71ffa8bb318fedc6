// cm2_q6_k.glsl: q6_K weights as gemm_cm2.comp's tensor loads read them: each superblock's 16
// scales (times d) worked out once for the tile's rows into shared memory (read a superblock
// ahead), and a weight's 6 bits read in the decode function (its byte of low nibbles and its byte
// of high bit pairs). Needs BM, w_base, ROWS, ROW_BYTES (gemm_cm2.comp's).

// q6_K's superblock as ggml lays it out (ggml-common.h's block_q6_K): 128 bytes of low nibbles
// (ql), 64 of high bit pairs (qh), 16 int8 scales, d (f16): 210 bytes, so blocks are only 2-byte
// aligned. The layout's element is the whole block; the decode function reads its 16-bit words
// (a byte's own 64-bit address a weight cost more registers and instructions).
struct q6_K {
    uint16_t h[105];
};
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer W { q6_K v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer Block { q6_K b; };
const uint QK = 256, BLOCK_BYTES = 210;
// [group of 16][row]: d * scale of the current superblock; rows padded by four so that a row's
// groups fall in different banks
const uint SCALE_STRIDE = BM + 4;
shared float scales[16 * SCALE_STRIDE];

// Weight (row at[0], column i of its superblock): in half n = i / 128, quarter q of 32, lane l,
// its low 4 bits are a nibble of ql[64 n + 32 (q % 2) + l] (the high one for q >= 2), its high 2
// bits the q'th pair of qh[32 n + l]; it stands for d * scale[i / 16] * (level - 32). Byte k is
// the low or high half of word k / 2.
float16_t decode(const in Block blk, const in uint at[2], const in uint in_block[2]) {
    uint i = in_block[1], n = i / 128, q = i % 128 / 32, l = i % 32, odd = 8 * (l & 1);
    uint lo = uint(blk.b.h[32 * n + 16 * (q % 2) + l / 2]) >> (odd + 4 * (q / 2)) & 15;
    uint hi = uint(blk.b.h[64 + 16 * n + l / 2]) >> (odd + 2 * q) & 3;
    return float16_t(scales[i / 16 * SCALE_STRIDE + at[0] % BM] * float(int(lo | hi << 4) - 32));
}

const uint PER = 16 * BM / 256; // scales a thread works out: its row's part'th PER
float next_d;                   // this thread's row's next superblock's d and its PER scales
int next_scale[PER];

// Superblock c0 / QK's d and this thread's scales of its row (the tile's last row past the
// matrix's).
void fetch_scales(uint r0, uint c0) {
    uint r = min(r0 + gl_LocalInvocationID.x % BM, ROWS - 1), part = gl_LocalInvocationID.x / BM;
    uint64_t b = w_base + uint64_t(r) * ROW_BYTES + uint64_t(c0 / QK) * BLOCK_BYTES;
    next_d = float(Halves(b + 208).v[0]);
    [[unroll]] for (uint e = 0; e < PER; e++)
        next_scale[e] = int(Int8s(b + 192 + PER * part + e).v[0]);
}

void superblocks_begin(uint r0) {
    fetch_scales(r0, 0);
}

// The scales of the superblock at column c0 into shared memory (once the last one's decoding is
// done), then the next one's read while this one is multiplied.
void superblock(uint r0, uint c0) {
    uint th = gl_LocalInvocationID.x, part = th / BM;
    barrier();
    [[unroll]] for (uint e = 0; e < PER; e++)
        scales[(PER * part + e) * SCALE_STRIDE + th % BM] = next_d * float(next_scale[e]);
    barrier();
    if (c0 + QK < COLS)
        fetch_scales(r0, c0 + QK);
}
