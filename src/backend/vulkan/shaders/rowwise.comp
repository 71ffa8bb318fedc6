// rowwise.comp: rows of cols floats, strides apart: a bias added to each row, rows copied, each
// row scaled by the sigmoid of its gate.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform Args {
    Floats y, x;
    uint rows, cols, y_stride, x_stride, op;
} p;

#define OP_ADD_ROW 0       // y[r][c] += x[c]
#define OP_COPY_ROWS 1     // y[r][c] = x[r][c]
#define OP_SIGMOID_SCALE 2 // y[r][c] *= sigmoid(x[r])

void main() {
    uint n = p.rows * p.cols;
    GRID_STRIDE(i, n) {
        uint r = i / p.cols, c = i % p.cols;
        uint at = r * p.y_stride + c;
        if (p.op == OP_ADD_ROW)
            p.y.v[at] += p.x.v[c];
        else if (p.op == OP_COPY_ROWS)
            p.y.v[at] = p.x.v[r * p.x_stride + c];
        else
            p.y.v[at] *= 1.0 / (1.0 + exp(-p.x.v[r]));
    }
}
