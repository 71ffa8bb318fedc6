// cache.comp: the KV cache's rows (f32 or f16, row_bytes apart): n rows of dim floats stored
// into rows cells[t], or rows [0, n) loaded as floats, free cells (cell_pos < 0) left alone.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats x;       // the rows of floats (stored from, or loaded into)
    uint64_t base;  // the cache's first row
    Ints cells;     // store: row of each token; load: cell positions, or 0
    uint n, dim, row_bytes, half_rows, load;
} p;

void main() {
    uint total = p.n * p.dim;
    GRID_STRIDE(i, total) {
        uint r = i / p.dim, c = i % p.dim;
        uint row = p.load != 0 ? r : uint(p.cells.v[r]);
        if (p.load != 0 && uint64_t(p.cells) != 0 && p.cells.v[r] < 0)
            continue; // a free cell: attention never reads it
        uint64_t at = p.base + uint64_t(row) * p.row_bytes;
        if (p.half_rows != 0) {
            if (p.load != 0)
                p.x.v[i] = float(Halves(at).v[c]);
            else
                Halves(at).v[c] = float16_t(p.x.v[i]);
        } else {
            if (p.load != 0)
                p.x.v[i] = Floats(at).v[c];
            else
                Floats(at).v[c] = p.x.v[i];
        }
    }
}
