// common.glsl: what every shader shares: the op table's pointers as buffer device addresses.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

// Activations, indices and f16 rows where the pointers the op table passes point.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halves { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer Int8s { int8_t v[]; };

// The KV cache's row types (vk_attention.c's enum): f32, f16, and q8_0's blocks of 32 (an f16
// scale, then 32 signed bytes: 34 bytes).
#define ROW_F32 0
#define ROW_F16 1
#define ROW_Q8_0 2

// Element i of a cache row of that type starting at address row.
float row_at(uint64_t row, uint type, uint i) {
    if (type == ROW_F32)
        return Floats(row).v[i];
    if (type == ROW_F16)
        return float(Halves(row).v[i]);
    uint64_t block = row + uint64_t(i / 32) * 34;
    return float(Halves(block).v[0]) * float(int(Int8s(block + 2 + i % 32).v[0]));
}

// The threads of a grid-stride loop over n values: each dispatch caps its groups.
#define GRID_STRIDE(i, n)                                                                          \
    for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// v rounded to the nearest f16 value (ties to even), kept as a float: in integer arithmetic,
// because on the H100 unpackHalf2x16(packHalf2x16(v)) came back as v itself, unrounded.
float round_to_f16(float v) {
    float a = abs(v);
    if (a < 6.103515625e-05) // below f16's smallest normal: a multiple of 2^-24
        return roundEven(v * 16777216.0) / 16777216.0;
    uint u = floatBitsToUint(v);
    if (a >= 65520.0) // past f16's largest: infinity (NaN, not >=, keeps its bits below)
        return uintBitsToFloat((u & 0x80000000u) | 0x7f800000u);
    return uintBitsToFloat((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
}

// GELU's tanh form, as ggml's table holds it (computed in float).
float gelu(float x) {
    const float c = 0.79788456080286535587989211986876, a = 0.044715;
    return 0.5 * x * (1.0 + tanh(c * x * (1.0 + a * x * x)));
}

// act(gate) * up for backend.h's enum glu_kind: SiLU, GELU, sigmoid, gpt-oss's clamped SwiGLU.
float glu(uint kind, float g, float u) {
    if (kind == 0)
        return g / (1.0 + exp(-g)) * u;
    if (kind == 1)
        return gelu(g) * u;
    if (kind == 2)
        return 1.0 / (1.0 + exp(-g)) * u;
    g = min(g, 7.0);
    return g / (1.0 + exp(-1.702 * g)) * (clamp(u, -7.0, 7.0) + 1.0);
}
