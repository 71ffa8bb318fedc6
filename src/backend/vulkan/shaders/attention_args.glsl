// attention_args.glsl: what attention.comp and attention_block.comp share: their arguments (one
// C struct, vk_attention.c's), the cells in use and which of them a query token sees.
layout(push_constant) uniform Args {
    Floats q;
    uint64_t k, v; // row c at k + c * k_row bytes, head h from its element h * hd_k
    Floats y;
    Ints q_pos, q_seq, cell_pos;
    uint64_t cell_seq; // [n_cells][SEQ_WORDS] 64-bit sets
    Floats sinks;      // [n_head] or 0
    Ints n_cells_at;   // the cells in use, where the context keeps their count (else n_cells):
                       // a recorded decode step replayed later reads it then (vk_graph.c)
    uint64_t bytes;    // or 0: y also as int8 groups (attention.comp; matvec.comp's X_Q8 layout)
    uint n_cells, heads, dims; // heads: n_head | n_head_kv << 16; dims: hd_k | hd_v << 16
    uint words;                // seq_words | row_type << 8 (common.glsl's ROW_*) | query tokens << 12
    float scale, softcap;
    int window, ahead;
    uint k_row, v_row;
} p;

layout(buffer_reference, std430, buffer_reference_align = 8) buffer Words { uint64_t v[]; };

#define N_HEAD (p.heads & 0xffffu)
#define N_HEAD_KV (p.heads >> 16)
#define HD_K (p.dims & 0xffffu)
#define HD_V (p.dims >> 16)
#define SEQ_WORDS (p.words & 255u)
#define ROW_TYPE ((p.words >> 8) & 15u)
#define N_Q (p.words >> 12)

uint n_cells; // set by cells_in_use() at the start of main

void cells_in_use() {
    n_cells = uint64_t(p.n_cells_at) != 0 ? uint(p.n_cells_at.v[0]) : p.n_cells;
}

// Whether a query at position qp of sequence s sees cell c.
bool visible_from(int qp, int s, uint c) {
    int kp = p.cell_pos.v[c];
    uint64_t w = Words(p.cell_seq).v[c * SEQ_WORDS + uint(s) / 64];
    bool in_seq = s >= 0 && ((w >> (uint(s) % 64)) & 1) != 0;
    return in_seq && kp - qp <= p.ahead && (p.window <= 0 || qp - kp < p.window);
}

bool visible(uint t, uint c) {
    return visible_from(p.q_pos.v[t], p.q_seq.v[t], c);
}
