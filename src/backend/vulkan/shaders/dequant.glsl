// dequant.glsl: GGUF blocks to floats, 32 consecutive elements of a row at a time, for the weight
// type named by one TYPE_* define; the layouts are src/quant/dequant_*.c's (and ggml's).
// Gives QK (elements a block), BS (bytes a block) and dq_group(row, g, tab, y): elements
// 32g .. 32g+31 of the row that starts at address row. tab: the device's lookup tables (vk_tables:
// iq4_nl levels at 0, e2m1 levels at 16, the iq3_s grid at 32).
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_control_flow_attributes : require

// Weights are only read (readonly: the read-only data path's loads where the driver has one).
layout(buffer_reference, std430, buffer_reference_align = 1) readonly buffer Bytes { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer Shorts { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Table { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Quads { uvec4 v[]; };

#if defined(TYPE_F32)
const uint QK = 1, BS = 4;
#elif defined(TYPE_F16) || defined(TYPE_BF16)
const uint QK = 1, BS = 2;
#elif defined(TYPE_Q4_0) || defined(TYPE_IQ4_NL)
const uint QK = 32, BS = 18;
#elif defined(TYPE_Q4_1)
const uint QK = 32, BS = 20;
#elif defined(TYPE_Q5_0)
const uint QK = 32, BS = 22;
#elif defined(TYPE_Q5_1)
const uint QK = 32, BS = 24;
#elif defined(TYPE_Q8_0)
const uint QK = 32, BS = 34;
#elif defined(TYPE_Q1_0)
const uint QK = 128, BS = 18;
#elif defined(TYPE_Q2_0)
const uint QK = 64, BS = 18;
#elif defined(TYPE_Q2_K)
const uint QK = 256, BS = 84;
#elif defined(TYPE_Q3_K) || defined(TYPE_IQ3_S)
const uint QK = 256, BS = 110;
#elif defined(TYPE_Q4_K)
const uint QK = 256, BS = 144;
#elif defined(TYPE_Q5_K)
const uint QK = 256, BS = 176;
#elif defined(TYPE_Q6_K)
const uint QK = 256, BS = 210;
#elif defined(TYPE_IQ4_XS)
const uint QK = 256, BS = 136;
#elif defined(TYPE_MXFP4)
const uint QK = 32, BS = 17;
#elif defined(TYPE_TQ1_0)
const uint QK = 256, BS = 54;
#elif defined(TYPE_TQ2_0)
const uint QK = 256, BS = 66;
#else
#error "dequant.glsl: no TYPE_* defined"
#endif

// The alignment of a block (tensors start 256-aligned; rows, and the column slices a sliced FFN
// reads, start at whole blocks; 16 at most is used),
// and of a field at byte offset off in it: the loads below are as wide as that allows.
const uint BA = min(16u, BS & (~BS + 1u));
uint al_at(uint off) {
    return off == 0 ? BA : min(BA, off & (~off + 1u));
}

uint ld8(uint64_t a) {
    return uint(Bytes(a).v[0]);
}

uint ld16(uint64_t a, uint al) {
    return al % 2 == 0 ? uint(Shorts(a).v[0]) : ld8(a) | ld8(a + 1) << 8;
}

uint ld32(uint64_t a, uint al) {
    return al % 4 == 0 ? Words(a).v[0] : ld16(a, al) | ld16(a + 2, al) << 16;
}

float f16_at(uint64_t a, uint al) {
    return unpackHalf2x16(ld16(a, al)).x;
}

// An activation as ggml's CPU multiplies it with this weight type: rounded to f16 for f16
// weights and to bf16 (to nearest, ties to even) for bf16 ones, whose dot products take pairs of
// that type; as it is for the others.
float x_as_weight(float v) {
#if defined(TYPE_BF16)
    uint u = floatBitsToUint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return v; // NaN stays NaN
    return uintBitsToFloat((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
#elif defined(TYPE_F16)
    return round_to_f16(v);
#else
    return v;
#endif
}

// Byte j (0..31) of eight little-endian words.
#define BYTE(w, j) (((w)[(j) >> 2] >> (8 * ((j)&3))) & 0xffu)

// N little-endian words from address a whose alignment is al: 16-byte loads where a is 16-aligned,
// word loads where it is 4-aligned;
// where it is 2 mod 4, the N + 1 aligned words around it, shifted by 16 bits (the first starts 2
// bytes before the field, inside the block or the one before; the last ends 2 bytes past it,
// inside the block or the allocation's 256-byte rounding); byte by byte for 1-aligned fields.
#define LOAD_WORDS(w, N, a, al)                                                                    \
    {                                                                                              \
        uint64_t a_ = (a);                                                                         \
        if ((al) % 16 == 0 && (N) % 4 == 0) {                                                      \
            [[unroll]] for (uint i_ = 0; i_ < (N) / 4; i_++) {                                     \
                uvec4 q_ = Quads(a_ + 16 * i_).v[0];                                               \
                [[unroll]] for (uint k_ = 0; k_ < 4; k_++) w[4 * i_ + k_] = q_[k_];                 \
            }                                                                                      \
        } else if ((al) % 4 == 0) {                                                                \
            [[unroll]] for (uint i_ = 0; i_ < (N); i_++) w[i_] = Words(a_ + 4 * i_).v[0];          \
        } else if ((al) % 2 == 0 && (a_ & 3) == 0) {                                                \
            [[unroll]] for (uint i_ = 0; i_ < (N); i_++) w[i_] = Words(a_ + 4 * i_).v[0];          \
        } else if ((al) % 2 == 0) {                                                                \
            uint prev_ = Words(a_ - 2).v[0];                                                       \
            [[unroll]] for (uint i_ = 0; i_ < (N); i_++) {                                         \
                uint next_ = Words(a_ + 2 + 4 * i_).v[0];                                          \
                w[i_] = (prev_ >> 16) | (next_ << 16);                                             \
                prev_ = next_;                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            [[unroll]] for (uint i_ = 0; i_ < (N); i_++) w[i_] = ld32(a_ + 4 * i_, 1);             \
        }                                                                                          \
    }

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
// A group is 32 consecutive values: 16-byte loads (rows of whole groups are 64-byte aligned).
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Quads q = Quads(row + uint64_t(g) * (32 * BS));
#if defined(TYPE_F32)
    [[unroll]] for (uint i = 0; i < 8; i++) {
        uvec4 u = q.v[i];
        y[4 * i] = uintBitsToFloat(u.x), y[4 * i + 1] = uintBitsToFloat(u.y);
        y[4 * i + 2] = uintBitsToFloat(u.z), y[4 * i + 3] = uintBitsToFloat(u.w);
    }
#else
    [[unroll]] for (uint i = 0; i < 4; i++) {
        uvec4 u = q.v[i];
        [[unroll]] for (uint k = 0; k < 4; k++) {
#if defined(TYPE_F16)
            vec2 h = unpackHalf2x16(u[k]);
#else
            vec2 h = vec2(uintBitsToFloat(u[k] << 16), uintBitsToFloat(u[k] & 0xffff0000u));
#endif
            y[8 * i + 2 * k] = h.x, y[8 * i + 2 * k + 1] = h.y;
        }
    }
#endif
}

#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_IQ4_NL)
// Byte j of the 16 quant bytes holds element j (low nibble) and j + 16. A group's fields as
// loaded (load_group: dq_group's and dequant_q8.glsl's): d, q4_1's m, the quant bytes.
struct Group {
    float d, m;
    uint w[4];
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g) * BS;
    r.d = f16_at(b, al_at(0));
#if defined(TYPE_Q4_1)
    const uint Q = 4;
    r.m = f16_at(b + 2, al_at(2));
#else
    const uint Q = 2;
    r.m = 0;
#endif
    LOAD_WORDS(r.w, 4, b + Q, al_at(Q));
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    float d = r.d, m = r.m;
    [[unroll]] for (uint j = 0; j < 16; j++) {
        uint q = BYTE(r.w, j);
#if defined(TYPE_Q4_0)
        y[j] = float(int(q & 15) - 8) * d;
        y[j + 16] = float(int(q >> 4) - 8) * d;
#elif defined(TYPE_Q4_1)
        y[j] = float(q & 15) * d + m;
        y[j + 16] = float(q >> 4) * d + m;
#else
        y[j] = d * float(Table(tab).v[q & 15]);
        y[j + 16] = d * float(Table(tab).v[q >> 4]);
#endif
    }
}

#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// As q4, with bit j of the little-endian qh word the 5th bit of element j.
struct Group {
    float d, m;
    uint qh, w[4];
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g) * BS;
    r.d = f16_at(b, al_at(0));
#if defined(TYPE_Q5_1)
    const uint H = 4;
    r.m = f16_at(b + 2, al_at(2));
#else
    const uint H = 2;
    r.m = 0;
#endif
    r.qh = ld32(b + H, al_at(H));
    LOAD_WORDS(r.w, 4, b + H + 4, al_at(H + 4));
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    float d = r.d, m = r.m;
    uint qh = r.qh;
    [[unroll]] for (uint j = 0; j < 16; j++) {
        uint q = BYTE(r.w, j);
        uint lo = (q & 15) | ((qh >> j) & 1) << 4, hi = (q >> 4) | ((qh >> (j + 16)) & 1) << 4;
#if defined(TYPE_Q5_1)
        y[j] = float(lo) * d + m;
        y[j + 16] = float(hi) * d + m;
#else
        y[j] = float(int(lo) - 16) * d;
        y[j + 16] = float(int(hi) - 16) * d;
#endif
    }
}

#elif defined(TYPE_Q8_0)
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g) * BS;
    float d = f16_at(b, al_at(0));
    uint w[8];
    LOAD_WORDS(w, 8, b + 2, al_at(2));
    [[unroll]] for (uint j = 0; j < 32; j++)
        y[j] = float(bitfieldExtract(int(w[j >> 2]), int(8 * (j & 3)), 8)) * d;
}

#elif defined(TYPE_Q1_0)
// 128 a block; element j is bit j%8 of byte j/8: a group is one word.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 4) * BS;
    float d = f16_at(b, al_at(0));
    uint bits = ld32(b + 2 + 4 * (g % 4), al_at(2));
    [[unroll]] for (uint j = 0; j < 32; j++)
        y[j] = ((bits >> j) & 1) != 0 ? d : -d;
}

#elif defined(TYPE_Q2_0)
// 64 a block, four 2-bit codes a byte, lowest first: a group is 8 bytes.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 2) * BS;
    float d = f16_at(b, al_at(0));
    uint w[2];
    LOAD_WORDS(w, 2, b + 2 + 8 * (g % 2), al_at(2));
    [[unroll]] for (uint j = 0; j < 32; j++)
        y[j] = float(int((w[j / 16] >> (2 * (j % 16))) & 3) - 1) * d;
}

#elif defined(TYPE_Q2_K)
// Group s = 4h + j takes bit pair j of qs[32h .. 32h+31]; scale bytes 8h+2j and 8h+2j+1 (scale
// in the low nibble, min in the high) cover its two halves of 16.
// A group's fields: the halves' scales times d and mins times dmin, the 32 bytes and the bit
// pair (shift) of them that is its levels.
struct Group {
    vec2 dl, ml;
    uint shift, w[8];
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint s = g % 8, h = s / 4, j = s % 4;
    float d = f16_at(b + 80, al_at(80)), dmin = f16_at(b + 82, al_at(82));
    LOAD_WORDS(r.w, 8, b + 16 + 32 * h, al_at(16));
    uint sc = ld16(b + 8 * h + 2 * j, al_at(2));
    r.dl = d * vec2(float(sc & 15), float((sc >> 8) & 15));
    r.ml = dmin * vec2(float((sc >> 4) & 15), float(sc >> 12));
    r.shift = 2 * j;
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    [[unroll]] for (uint half_ = 0; half_ < 2; half_++)
        [[unroll]] for (uint l = 0; l < 16; l++)
            y[16 * half_ + l] =
                r.dl[half_] * float((BYTE(r.w, 16 * half_ + l) >> r.shift) & 3) - r.ml[half_];
}

#elif defined(TYPE_Q3_K)
// q3_K's six-bit scale s (dequant_k.c's q3_K_scale), minus 32.
int q3_K_scale(uint64_t packed, uint s) {
    uint low = s < 8 ? ld8(packed + s) & 15 : ld8(packed + s - 8) >> 4;
    uint high = (ld8(packed + 8 + s % 4) >> (2 * (s / 4))) & 3;
    return int(low | high << 4) - 32;
}

// As q2_K, plus the high bit of element i of the group in bit 4h+j of hmask[i] (clear: minus 4).
// A group's fields: its halves' scales times d, the bytes, the bit pair (2 j) and the high bit.
struct Group {
    vec2 dl;
    uint j, hb, hm[8], w[8];
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint s = g % 8, h = s / 4;
    r.j = s % 4, r.hb = 4 * h + r.j;
    float d = f16_at(b + 108, al_at(108));
    LOAD_WORDS(r.hm, 8, b, al_at(0));
    LOAD_WORDS(r.w, 8, b + 32 + 32 * h, al_at(32));
    r.dl = d * vec2(float(q3_K_scale(b + 96, 8 * h + 2 * r.j)),
                    float(q3_K_scale(b + 96, 8 * h + 2 * r.j + 1)));
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    [[unroll]] for (uint i = 0; i < 32; i++) {
        uint high = (BYTE(r.hm, i) >> r.hb) & 1;
        int level = int((BYTE(r.w, i) >> (2 * r.j)) & 3) - (high != 0 ? 0 : 4);
        y[i] = r.dl[i / 16] * float(level);
    }
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// q4_K / q5_K's six-bit scale and min of sub-block s (dequant_k.c's k4_scale_min).
void k4_scale_min(uint64_t packed, uint s, out uint sc, out uint mn) {
    if (s < 4) {
        sc = ld8(packed + s) & 63;
        mn = ld8(packed + s + 4) & 63;
    } else {
        sc = (ld8(packed + s + 4) & 15) | (ld8(packed + s - 4) >> 6) << 4;
        mn = (ld8(packed + s + 4) >> 4) | (ld8(packed + s) >> 6) << 4;
    }
}

// Group s is nibble s%2 of qs[32(s/2) .. +31]; q5_K's 5th bit of element l is bit s of qh[l].
// A group's fields: its scale times d, min times dmin, s, the bytes (and q5_K's qh).
struct Group {
    float dl, ml;
    uint s, w[8];
#if defined(TYPE_Q5_K)
    uint qh[8];
#endif
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint sc, mn;
    r.s = g % 8;
    k4_scale_min(b + 4, r.s, sc, mn);
    r.dl = f16_at(b, al_at(0)) * float(sc), r.ml = f16_at(b + 2, al_at(2)) * float(mn);
#if defined(TYPE_Q5_K)
    const uint Q = 48;
    LOAD_WORDS(r.qh, 8, b + 16, al_at(16));
#else
    const uint Q = 16;
#endif
    LOAD_WORDS(r.w, 8, b + Q + 32 * (r.s / 2), al_at(Q));
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    uint shift = 4 * (r.s % 2);
    [[unroll]] for (uint l = 0; l < 32; l++) {
        uint level = (BYTE(r.w, l) >> shift) & 15;
#if defined(TYPE_Q5_K)
        level += ((BYTE(r.qh, l) >> r.s) & 1) * 16;
#endif
        y[l] = r.dl * float(level) - r.ml;
    }
}

#elif defined(TYPE_Q6_K)
// Group s = 4h + k: low nibble k/2 of ql[64h + 32(k%2) + l], bit pair k of qh[32h + l], signed
// scale bytes 192 + 8h + 2k (+1) for its halves.
// A group's fields: its halves' scales times d, k, the ql and qh bytes.
struct Group {
    vec2 ds;
    uint k, ql[8], qh[8];
};

Group load_group(uint64_t row, uint g) {
    Group r;
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint s = g % 8, h = s / 4;
    r.k = s % 4;
    float d = f16_at(b + 208, al_at(208));
    LOAD_WORDS(r.ql, 8, b + 64 * h + 32 * (r.k % 2), al_at(32));
    LOAD_WORDS(r.qh, 8, b + 128 + 32 * h, al_at(128));
    uint sc = ld16(b + 192 + 8 * h + 2 * r.k, al_at(192));
    r.ds = d * vec2(float(bitfieldExtract(int(sc), 0, 8)), float(bitfieldExtract(int(sc), 8, 8)));
    return r;
}

void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    Group r = load_group(row, g);
    [[unroll]] for (uint l = 0; l < 32; l++) {
        uint lo = (BYTE(r.ql, l) >> (4 * (r.k / 2))) & 15;
        int level = int(lo | ((BYTE(r.qh, l) >> (2 * r.k)) & 3) << 4) - 32;
        y[l] = r.ds[l / 16] * float(level);
    }
}

#elif defined(TYPE_IQ4_XS)
// A 6-bit scale per group: its low nibble in scales_l, its top two bits in scales_h.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint ib = g % 8;
    float d = f16_at(b, al_at(0));
    uint scales_h = ld16(b + 2, al_at(2));
    uint ls = ((ld8(b + 4 + ib / 2) >> (4 * (ib % 2))) & 15) | ((scales_h >> (2 * ib)) & 3) << 4;
    float dl = d * float(int(ls) - 32);
    uint w[4];
    LOAD_WORDS(w, 4, b + 8 + 16 * ib, al_at(8));
    [[unroll]] for (uint j = 0; j < 16; j++) {
        uint q = BYTE(w, j);
        y[j] = dl * float(Table(tab).v[q & 15]);
        y[j + 16] = dl * float(Table(tab).v[q >> 4]);
    }
}

#elif defined(TYPE_MXFP4)
// e2m1 levels (doubled) times the halved e8m0 scale 2^(e - 128), built from its bits.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g) * BS;
    uint e = ld8(b);
    float d = uintBitsToFloat(e < 2 ? 0x00200000u << e : (e - 1) << 23);
    [[unroll]] for (uint j = 0; j < 16; j++) {
        uint q = ld8(b + 1 + j);
        y[j] = float(Table(tab).v[16 + (q & 15)]) * d;
        y[j + 16] = float(Table(tab).v[16 + (q >> 4)]) * d;
    }
}

#elif defined(TYPE_TQ1_0)
// Trit k of a tq1_0 byte (a base-3 fixed-point fraction): times 3^k mod 256, the top digit.
int trit(uint byte_, uint k) {
    uint pow3 = k == 0 ? 1 : k == 1 ? 3 : k == 2 ? 9 : k == 3 ? 27 : 81;
    return int((((byte_ * pow3) & 255) * 3) >> 8);
}

// Element order: trit k of qs[0..31] for k = 0..4 (groups 0..4), trit k of qs[32..47] for
// k = 0..4 (elements 160..239), trit k of qh[0..3] for k = 0..3 (240..255).
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint s = g % 8;
    float d = f16_at(b + 52, al_at(52));
    if (s < 5) {
        uint w[8];
        LOAD_WORDS(w, 8, b, al_at(0));
        [[unroll]] for (uint m = 0; m < 32; m++)
            y[m] = float(trit(BYTE(w, m), s) - 1) * d;
        return;
    }
    uint w[4];
    LOAD_WORDS(w, 4, b + 32, al_at(32));
    if (s < 7) { // trits 2(s-5) and 2(s-5)+1 of qs[32..47]
        [[unroll]] for (uint i = 0; i < 32; i++)
            y[i] = float(trit(BYTE(w, i % 16), 2 * (s - 5) + i / 16) - 1) * d;
        return;
    }
    uint qh = ld32(b + 48, al_at(48));
    [[unroll]] for (uint i = 0; i < 16; i++) { // trit 4 of qs[32..47], then the qh bytes' 4 trits, k-major
        y[i] = float(trit(BYTE(w, i), 4) - 1) * d;
        y[16 + i] = float(trit((qh >> (8 * (i % 4))) & 255, i / 4) - 1) * d;
    }
}

#elif defined(TYPE_TQ2_0)
// Group s takes bit pair s%4 of qs[32(s/4) .. +31]; codes 0..2 mean -1, 0, +1.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint s = g % 8;
    float d = f16_at(b + 64, al_at(64));
    uint w[8];
    LOAD_WORDS(w, 8, b + 32 * (s / 4), al_at(0));
    [[unroll]] for (uint m = 0; m < 32; m++)
        y[m] = float(int((BYTE(w, m) >> (2 * (s % 4))) & 3) - 1) * d;
}

#elif defined(TYPE_IQ3_S)
// Group ib: 8 nine-bit grid indices (low byte in qs, 9th bit in qh[ib]) of 4 magnitudes each,
// 32 sign bits, an odd 4-bit scale 1 + 2 sc; each element (db * magnitude) * sign.
void dq_group(uint64_t row, uint g, uint64_t tab, precise out float y[32]) {
    uint64_t b = row + uint64_t(g / 8) * BS;
    uint ib = g % 8;
    float d = f16_at(b, al_at(0));
    uint sc = (ld8(b + 106 + ib / 2) >> (4 * (ib % 2))) & 15;
    float db = d * float(1 + 2 * sc);
    uint qs[2];
    LOAD_WORDS(qs, 2, b + 2 + 8 * ib, al_at(2));
    uint signs = ld32(b + 74 + 4 * ib, al_at(74)), qh = ld8(b + 66 + ib);
    [[unroll]] for (uint gi = 0; gi < 8; gi++) {
        uint idx = BYTE(qs, gi) | ((qh >> gi) & 1) << 8;
        uint entry = uint(Table(tab).v[32 + idx]);
        [[unroll]] for (uint j = 0; j < 4; j++) {
            float mag = db * float((entry >> (8 * j)) & 255);
            y[4 * gi + j] = ((signs >> (4 * gi + j)) & 1) != 0 ? -mag : mag;
        }
    }
}
#endif
