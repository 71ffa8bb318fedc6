// rope_store.comp: a layer's RoPE of q and k and its stores of k and v into the cache's f32 or
// f16 rows (cells[t] each token's row), one dispatch where rope.comp and cache.comp took four:
// threads take q's pairs, k's pairs (rotated, then stored), k's dims past n_rot, then v's values.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats q, k, v;
    Ints pos;
    Floats ff; // n_rot / 2 divisors, or 0
    uint64_t k_cache, v_cache;
    Ints cells;
    uint n, n_head, n_head_kv, hd_k, hd_v, n_rot, neox, half_rows; // half_rows: ROW_F16
    float theta_scale, freq_scale, ext_factor, attn_factor, corr0, corr1;
    uint k_row, v_row; // bytes a cache row
} p;
#include "rope.glsl"

// Element i of the k (or v) cache row of token t.
void store(bool is_k, uint t, uint i, float v) {
    uint64_t row = (is_k ? p.k_cache : p.v_cache) + uint64_t(p.cells.v[t]) * (is_k ? p.k_row : p.v_row);
    if (p.half_rows != 0)
        Halves(row).v[i] = float16_t(v);
    else
        Floats(row).v[i] = v;
}

void main() {
    uint half_rot = p.n_rot / 2, kv_dims = p.n_head_kv * p.hd_k;
    uint q_pairs = p.n * p.n_head * half_rot, k_pairs = p.n * p.n_head_kv * half_rot;
    uint k_tail = p.n * p.n_head_kv * (p.hd_k - p.n_rot), v_all = p.n * p.n_head_kv * p.hd_v;
    GRID_STRIDE(j, q_pairs + k_pairs + k_tail + v_all) {
        if (j < q_pairs + k_pairs) { // a pair of q's (then k's) heads
            bool is_k = j >= q_pairs;
            uint jj = is_k ? j - q_pairs : j, heads = is_k ? p.n_head_kv : p.n_head;
            uint k = jj % half_rot, head = jj / half_rot, t = head / heads, a, b;
            float ff = 1.0; // an if, as attention_args.glsl's cell_range (ff may be null)
            if (uint64_t(p.ff) != 0)
                ff = p.ff.v[k];
            vec2 v, sc = rope_sin_cos(float(p.pos.v[t]), k, ff);
            rope_pair(is_k ? p.k : p.q, head * p.hd_k, k, p.n_rot, p.neox != 0, sc, a, b, v);
            if (is_k)
                store(true, t, a % kv_dims, v.x), store(true, t, b % kv_dims, v.y);
        } else if (j < q_pairs + k_pairs + k_tail) { // k's dims past n_rot, as they are
            uint jj = j - q_pairs - k_pairs, tail = p.hd_k - p.n_rot;
            uint head = jj / tail, i = head * p.hd_k + p.n_rot + jj % tail;
            store(true, head / p.n_head_kv, i % kv_dims, p.k.v[i]);
        } else { // v's values
            uint i = j - q_pairs - k_pairs - k_tail, dims = p.n_head_kv * p.hd_v;
            store(false, i / dims, i % dims, p.v.v[i]);
        }
    }
}
