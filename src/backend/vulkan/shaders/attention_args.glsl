// attention_args.glsl: what attention.comp and attention_block.comp share: their arguments (one
// C struct, vk_attention.c's), the cells in use and which of them a query token sees.
layout(push_constant) uniform Args {
    Floats q;
    uint64_t k, v; // row c at k + c * k_row bytes, head h from its element h * hd_k
    Floats y;
    Ints q_pos, q_seq, cell_pos;
    uint64_t cell_seq; // [n_cells][SEQ_WORDS] 64-bit sets
    Floats sinks;      // [n_head] or 0
    Ints n_cells_at;   // with COUNT_AT the cells in use, where the context keeps their count
                       // (else n_cells, and this some readable address), or with SPANS each
                       // sequence's first and one past its last cell: what a recorded decode
                       // step replayed later reads then (vk_graph.c)
    uint64_t bytes;    // or 0: y also as int8 groups (attention.comp; matvec.comp's X_Q8 layout),
                       // or as f16 at bytes - 1 where bit 0 is set
    uint n_cells, heads, dims; // heads: n_head | n_head_kv << 16; dims: hd_k | hd_v << 16
    uint words; // seq_words | row_type << 8 (common.glsl's ROW_*) | SPANS | COUNT_AT
                // | query tokens << 13
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
#define ROW_TYPE ((p.words >> 8) & 7u)
#define SPANS ((p.words & 0x800u) != 0)
#define COUNT_AT ((p.words & 0x1000u) != 0)
#define N_Q (p.words >> 13)

uint n_cells; // one past the last cell a workgroup looks at (cell_range)

// The cells a query of sequence s looks at, [first, end): its sequence's span where the context
// gives them (a decode step of many sequences then reads a few hundred cells of its own, not all
// of theirs), else every cell in use. first is a multiple of tile, so the tiles are those from
// cell 0 and the ones skipped hold none of its cells: the same sums.
void cell_range(int s, uint tile, out uint first, out uint end) {
    first = 0, end = 0;
    if (!SPANS) {
        // n_cells_at is a readable address even without COUNT_AT: Mesa 26's lavapipe loads
        // through it before it tests COUNT_AT (a null address crashed it, session 39)
        end = COUNT_AT ? uint(p.n_cells_at.v[0]) : p.n_cells;
    } else if (s >= 0 && uint(s) < SEQ_WORDS * 64)
        first = uint(p.n_cells_at.v[2 * s]) / tile * tile, end = uint(p.n_cells_at.v[2 * s + 1]);
}

// Whether a cell's word of sequence sets (the one of s / 64) holds sequence s.
bool word_holds(uint64_t w, int s) {
    return ((w >> (uint(s) % 64)) & 1) != 0;
}

// Whether a query at position qp sees a cell at position kp of its sequence (causal, ahead,
// window).
bool in_reach(int qp, int kp) {
    return kp - qp <= p.ahead && (p.window <= 0 || qp - kp < p.window);
}

// Whether cell c holds sequence s (none for s < 0: tested before the sequence's word is read,
// which would be far past the cells' sets).
bool in_sequence(uint c, int s) {
    if (s < 0)
        return false;
    return word_holds(Words(p.cell_seq).v[c * SEQ_WORDS + uint(s) / 64], s);
}

// Whether a query at position qp of sequence s sees cell c.
bool visible_from(int qp, int s, uint c) {
    if (!in_sequence(c, s))
        return false;
    return in_reach(qp, p.cell_pos.v[c]);
}

bool visible(uint t, uint c) {
    return visible_from(p.q_pos.v[t], p.q_seq.v[t], c);
}
