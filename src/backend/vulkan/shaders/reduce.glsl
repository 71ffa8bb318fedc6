// reduce.glsl: a workgroup's sum or maximum of one float a thread: each subgroup's by subgroup
// operations, then the subgroups' met in shared memory (two barriers where a shared-memory tree
// over 256 threads took nine; a decode step's norms and attention heads are mostly these).
// Subgroups of at least 4 threads (vk_device.c asks the device for it).
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float reduce_parts[gl_WorkGroupSize.x / 4];

float reduce(float v, bool take_max) {
    float s = take_max ? subgroupMax(v) : subgroupAdd(v);
    if (subgroupElect())
        reduce_parts[gl_SubgroupID] = s;
    barrier();
    float r = reduce_parts[0];
    for (uint i = 1; i < gl_NumSubgroups; i++)
        r = take_max ? max(r, reduce_parts[i]) : r + reduce_parts[i];
    barrier(); // read by every thread before the next reduce writes it
    return r;
}
