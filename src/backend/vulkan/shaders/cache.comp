// cache.comp: the KV cache's rows (f32, f16 or q8_0, row_bytes apart): n rows of dim floats
// stored into rows cells[t] (q8_0: a thread a block of 32, rounded as ggml's CPU rounds them), or
// rows [0, n) loaded as floats, free cells (cell_pos < 0) left alone.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats x;       // the rows of floats (stored from, or loaded into)
    uint64_t base;  // the cache's first row
    Ints cells;     // store: row of each token; load: cell positions, or 0
    uint n, dim, row_bytes, type, load; // type: ROW_F32, ROW_F16 or ROW_Q8_0
} p;

// Block b of row r of x stored as q8_0: d = max |x| / 127 (as f16), q = x / d to nearest, halves
// away from zero (C's roundf).
void store_q8_0(uint r, uint b, uint64_t row) {
    uint x0 = r * p.dim + 32 * b;
    float amax = 0.0;
    for (uint k = 0; k < 32; k++)
        amax = max(amax, abs(p.x.v[x0 + k]));
    float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
    uint64_t block = row + uint64_t(b) * 34;
    Halves(block).v[0] = float16_t(d);
    for (uint k = 0; k < 32; k++) {
        float v = p.x.v[x0 + k] * id;
        Int8s(block + 2 + k).v[0] = int8_t(int(sign(v) * floor(abs(v) + 0.5)));
    }
}

void main() {
    uint per_row = p.type == ROW_Q8_0 && p.load == 0 ? p.dim / 32 : p.dim;
    GRID_STRIDE(i, p.n * per_row) {
        uint r = i / per_row, c = i % per_row;
        // ifs, as attention_args.glsl's cell_range (cells may be null where loading)
        uint row = r;
        if (p.load == 0)
            row = uint(p.cells.v[r]);
        else if (uint64_t(p.cells) != 0) {
            if (p.cells.v[r] < 0)
                continue; // a free cell: attention never reads it
        }
        uint64_t at = p.base + uint64_t(row) * p.row_bytes;
        if (p.load != 0)
            p.x.v[i] = row_at(at, p.type, c);
        else if (p.type == ROW_Q8_0)
            store_q8_0(r, c, at);
        else if (p.type == ROW_F16)
            Halves(at).v[c] = float16_t(p.x.v[i]);
        else
            Floats(at).v[c] = p.x.v[i];
    }
}
