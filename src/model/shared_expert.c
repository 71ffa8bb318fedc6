/* shared_expert.c: a MoE FFN's shared expert: a dense SwiGLU FFN every token runs beside its
 * routed experts, scaled by sigmoid of a gate of its own when the file has one
 * (ffn_gate_inp_shexp, one row), and added to the routed experts' sum, as llama.cpp's qwen35moe
 * graph does. */
#include "model/shared_expert.h"

#include "model/context.h"
#include "model/layer_ops.h"

void shared_expert_add(struct ox_context *ctx, struct stage *s, const struct layer_weights *l,
                       const float *in, float *out, int n) {
    const struct model_config *c = &ctx->model->cfg;
    struct activations *a = &s->act;
    struct backend *b = &s->be;
    size_t d = (size_t)c->n_embd;
    /* the routed experts are done with these: gate and up hold n_batch rows of the widest FFN,
     * moe_out n_batch rows of n_embd, router n_batch rows of n_expert (>= 1) */
    linear(b, l->ffn_gate_shexp, NULL, in, a->gate, n);
    linear(b, l->ffn_up_shexp, NULL, in, a->up, n);
    b->ops->glu(b, GLU_SILU, a->gate, a->up, a->hidden, (size_t)n * (size_t)c->n_ff_shexp);
    linear(b, l->ffn_down_shexp, NULL, a->hidden, a->moe_out, n);
    if (l->ffn_gate_inp_shexp) {
        linear(b, l->ffn_gate_inp_shexp, NULL, in, a->router, n);
        b->ops->sigmoid_scale_rows(b, a->moe_out, a->router, n, (int)d);
    }
    b->ops->add(b, out, a->moe_out, (size_t)n * d);
}
