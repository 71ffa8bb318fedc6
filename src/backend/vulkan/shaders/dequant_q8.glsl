// dequant_q8.glsl: a weight group of 32 as bytes for integer dot products with activations made
// int8 (quantize_q8.comp), for the types whose values are a scale times a small integer plus an
// offset: q8_group(row, g, q, ab) gives the group's levels as bytes, elements 4i .. 4i + 3 in word
// i (unsigned for every type but q8_0's, whose levels are signed: both within int8), and
// ab = (A_lo, A_hi, B_lo, B_hi): element j's value is A_h * level + B_h, h its half (j < 16: lo).
// A row times x's group then is x.d * (A_lo * dot_lo + A_hi * dot_hi + B_lo * sum_lo + B_hi *
// sum_hi), dot_h over the half's four words and sum_h x's bytes summed over it: one integer dot
// product for four weights where a float product takes a conversion and two multiplies each.
// Include after dequant.glsl: its load_group gives a group's fields as loaded, which dq_group
// makes floats and q8_group bytes.
#extension GL_EXT_spirv_intrinsics : require

// The dot product of two words' four signed bytes (OpSDot, PackedVectorFormat4x8Bit), written as
// SPIR-V because the glslc of Debian 12 has no GL_EXT_integer_dot_product.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450) int sdot_raw(uint a, uint b, spirv_literal int packed_format);
int sdot4(uint a, uint b) {
    return sdot_raw(a, b, 0);
}

// Bits 0..3 of v as the low bits of four bytes, shifted to bit `to` of each byte.
uint spread4(uint v, uint to) {
    return ((v & 15u) * 0x00204081u & 0x01010101u) << to;
}

#if defined(TYPE_Q4_0) || defined(TYPE_Q4_1)
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 4; i++)
        q[i] = r.w[i] & 0x0f0f0f0fu, q[i + 4] = (r.w[i] >> 4) & 0x0f0f0f0fu;
#if defined(TYPE_Q4_0)
    r.m = -8.0 * r.d;
#endif
    ab = vec4(r.d, r.d, r.m, r.m);
}

#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 4; i++) {
        q[i] = (r.w[i] & 0x0f0f0f0fu) | spread4(r.qh >> (4 * i), 4);
        q[i + 4] = ((r.w[i] >> 4) & 0x0f0f0f0fu) | spread4(r.qh >> (16 + 4 * i), 4);
    }
#if defined(TYPE_Q5_0)
    r.m = -16.0 * r.d;
#endif
    ab = vec4(r.d, r.d, r.m, r.m);
}

#elif defined(TYPE_Q8_0)
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    uint64_t b = row + uint64_t(g) * BS;
    float d = f16_at(b, al_at(0));
    LOAD_WORDS(q, 8, b + 2, al_at(2));
    ab = vec4(d, d, 0, 0);
}

#elif defined(TYPE_Q2_K)
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 8; i++)
        q[i] = (r.w[i] >> r.shift) & 0x03030303u;
    ab = vec4(r.dl, -r.ml);
}

#elif defined(TYPE_Q3_K)
// Levels pair | high << 2, minus 4.
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 8; i++)
        q[i] = ((r.w[i] >> (2 * r.j)) & 0x03030303u) | ((r.hm[i] >> r.hb) & 0x01010101u) << 2;
    ab = vec4(r.dl, -4.0 * r.dl);
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    uint shift = 4 * (r.s % 2);
    [[unroll]] for (uint i = 0; i < 8; i++) {
        q[i] = (r.w[i] >> shift) & 0x0f0f0f0fu;
#if defined(TYPE_Q5_K)
        q[i] |= ((r.qh[i] >> r.s) & 0x01010101u) << 4;
#endif
    }
    ab = vec4(r.dl, r.dl, -r.ml, -r.ml);
}

// Q8_PAIRS: q8_pair(row, c, q0, q1, ab0, ab1) gives groups 2c and 2c + 1 at once, whose levels
// are the low and high nibbles of the same 32 bytes: each byte loaded once, and the superblock's
// head (d, dmin and the twelve bytes of packed scales) in one 16-byte load (blocks of 144 and
// 176 bytes: 16-aligned), the scales taken out of its words without indexing a vector.
#define Q8_PAIRS
void k4_pair_scales(uvec4 h, uint s, out uint sc, out uint mn) {
    uint sh = 8 * (s % 4), by = (h.y >> sh) & 255, bz = (h.z >> sh) & 255, bw = (h.w >> sh) & 255;
    sc = s < 4 ? by & 63 : (bw & 15) | (by >> 6) << 4;
    mn = s < 4 ? bz & 63 : (bw >> 4) | (bz >> 6) << 4;
}

void q8_pair(uint64_t row, uint c, out uint q0[8], out uint q1[8], out vec4 ab0, out vec4 ab1) {
    uint64_t b = row + uint64_t(c / 4) * BS;
    uvec4 h = Quads(b).v[0];
#if defined(TYPE_Q5_K)
    const uint Q = 48;
    uvec4 hb[2] = uvec4[2](Quads(b + 16).v[0], Quads(b + 32).v[0]);
#else
    const uint Q = 16;
#endif
    uvec4 w[2] = uvec4[2](Quads(b + Q + 32 * (c % 4)).v[0], Quads(b + Q + 32 * (c % 4) + 16).v[0]);
    uint s0 = 2 * (c % 4), sc0, mn0, sc1, mn1;
    [[unroll]] for (uint i = 0; i < 8; i++) {
        q0[i] = w[i / 4][i % 4] & 0x0f0f0f0fu, q1[i] = (w[i / 4][i % 4] >> 4) & 0x0f0f0f0fu;
#if defined(TYPE_Q5_K)
        q0[i] |= ((hb[i / 4][i % 4] >> s0) & 0x01010101u) << 4;
        q1[i] |= ((hb[i / 4][i % 4] >> (s0 + 1)) & 0x01010101u) << 4;
#endif
    }
    k4_pair_scales(h, s0, sc0, mn0), k4_pair_scales(h, s0 + 1, sc1, mn1);
    vec2 dm = unpackHalf2x16(h.x);
    ab0 = vec4(dm.x * float(sc0), dm.x * float(sc0), -dm.y * float(mn0), -dm.y * float(mn0));
    ab1 = vec4(dm.x * float(sc1), dm.x * float(sc1), -dm.y * float(mn1), -dm.y * float(mn1));
}

#elif defined(TYPE_Q6_K)
// Levels 0..63, minus 32.
void q8_group(uint64_t row, uint g, uint64_t tab, out uint q[8], out vec4 ab) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 8; i++)
        q[i] = ((r.ql[i] >> (4 * (r.k / 2))) & 0x0f0f0f0fu) |
               ((r.qh[i] >> (2 * r.k)) & 0x03030303u) << 4;
    ab = vec4(r.ds, -32.0 * r.ds);
}

#else
#error "dequant_q8.glsl: no integer form for this TYPE_*"
#endif
