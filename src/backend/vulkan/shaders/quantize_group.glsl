// quantize_group.glsl: 32 activations as int8 levels for matvec.comp's integer products: the
// scale d = max|v| / 127, levels round(v / d) (halves away from zero, as ggml's q8_1), given as
// 8 words of bytes (lo: elements 0..15, hi: 16..31) and (d, the sums of the levels of elements
// 0..15 and 16..31, 0). quantize_q8.comp and attention.comp's decode output take it whole,
// rows.comp's RMSNorm into bytes its parts (a thread each half of a group).
float abs_max4(vec4 v) {
    vec4 a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

// Four values' levels at 1 / d = id as a word of bytes, their sum added to sum.
uint levels4(vec4 v, float id, inout int sum) {
    ivec4 l = ivec4(sign(v) * floor(abs(v) * id + 0.5));
    sum += l.x + l.y + l.z + l.w;
    return (uint(l.x) & 0xffu) | (uint(l.y) & 0xffu) << 8 | (uint(l.z) & 0xffu) << 16 |
           (uint(l.w) & 0xffu) << 24;
}

void quantize_group(vec4 v[8], out uvec4 lo, out uvec4 hi, out vec4 meta) {
    float amax = 0;
    [[unroll]] for (uint i = 0; i < 8; i++)
        amax = max(amax, abs_max4(v[i]));
    float d = amax / 127.0, id = d != 0 ? 1.0 / d : 0.0;
    uint w[8];
    int sums[2] = int[2](0, 0);
    [[unroll]] for (uint i = 0; i < 8; i++)
        w[i] = levels4(v[i], id, sums[i / 4]);
    lo = uvec4(w[0], w[1], w[2], w[3]), hi = uvec4(w[4], w[5], w[6], w[7]);
    meta = vec4(d, float(sums[0]), float(sums[1]), 0);
}
