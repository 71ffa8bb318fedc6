// common.glsl: what every shader shares: the op table's pointers as buffer device addresses.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

// Activations, indices and f16 rows where the pointers the op table passes point.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halves { float16_t v[]; };

// The threads of a grid-stride loop over n values: each dispatch caps its groups.
#define GRID_STRIDE(i, n)                                                                          \
    for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
