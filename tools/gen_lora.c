/* gen_lora.c: `gen-lora BASE.gguf OUT.gguf [options]` writes a random LoRA adapter for a base
 * model, as llama.cpp's convert_lora_to_gguf.py lays one out (general.type adapter, adapter.type
 * lora, adapter.lora.alpha, NAME.lora_a [rank][n_in] and NAME.lora_b [n_out][rank]), for the
 * LoRA tests: tests/data/lora's adapters and llama.cpp's logits with them come from it.
 *
 *   --rank R        (8)     --alpha A   (16; 0 writes none: the scale is the user's alone)
 *   --type f32|f16  (f32)   --seed S    (1)
 *   --targets LIST  weights whose names end in one of these comma-separated suffixes
 *                   (attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down; token_embd
 *                   gets llama.cpp's embedding layout, A [n_vocab][rank], B [n_embd][rank])
 *
 * A's values are uniform in +-1/sqrt(its row's length), B's in +-1/sqrt(rank) (a trained B
 * starts at zero; these make the delta as large as the weights' own products, so a test sees
 * it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/dtype.h"

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* n values uniform in [-bound, bound), a function of (seed, salt, i). */
static void fill(float *v, int64_t n, float bound, uint64_t seed, uint64_t salt) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = splitmix64(seed ^ splitmix64(salt + (uint64_t)i));
        v[i] = ((float)(x >> 40) / (float)(1 << 24) * 2.0f - 1.0f) * bound;
    }
}

static bool targeted(const char *name, const char *targets) {
    char list[512];
    snprintf(list, sizeof list, "%s", targets);
    size_t n = strlen(name);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        char suffix[80];
        snprintf(suffix, sizeof suffix, "%s.weight", t);
        size_t k = strlen(suffix);
        if (n >= k && !strcmp(name + n - k, suffix) && (n == k || name[n - k - 1] == '.'))
            return true;
    }
    return false;
}

struct opts {
    int64_t rank;
    float alpha;
    enum ox_dtype type;
    uint64_t seed;
    const char *targets, *base, *out;
};

static int parse(int argc, char **argv, struct opts *o) {
    *o = (struct opts){
        8,    16.0f, OX_DTYPE_F32, 1, "attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down",
        NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--rank") && v)
            o->rank = atoll(v), i++;
        else if (!strcmp(a, "--alpha") && v)
            o->alpha = strtof(v, NULL), i++;
        else if (!strcmp(a, "--type") && v)
            o->type = !strcmp(v, "f16") ? OX_DTYPE_F16 : OX_DTYPE_F32, i++;
        else if (!strcmp(a, "--seed") && v)
            o->seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--targets") && v)
            o->targets = v, i++;
        else if (a[0] != '-' && !o->base)
            o->base = a;
        else if (a[0] != '-' && !o->out)
            o->out = a;
        else
            return -1;
    }
    return o->base && o->out && o->rank > 0 && o->rank <= 1024 ? 0 : -1;
}

/* The tensor's floats in the adapter's type, added to w (kept until the write: *keep). */
static enum ox_status add(struct gguf_writer *w, const char *name, enum ox_dtype type,
                          const int64_t ne[2], const float *v, void **keep) {
    size_t n = (size_t)(ne[0] * ne[1]);
    *keep = malloc(n * 4);
    if (!*keep)
        return OX_ERR_OOM;
    enum ox_status st = ox_quantize(type, v, *keep, ne[1], ne[0], NULL);
    return st == OX_OK ? gguf_writer_add_tensor(w, name, type, 2, ne, *keep) : st;
}

int main(int argc, char **argv) {
    struct opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: gen-lora BASE.gguf OUT.gguf [--rank R] [--alpha A] "
                        "[--type f32|f16] [--seed S] [--targets a,b,...]\n");
        return 2;
    }
    struct ox_gguf *g = NULL;
    struct gguf_writer *w = NULL;
    const char *arch;
    uint64_t arch_len;
    enum ox_status st = gguf_open(o.base, true, &g);
    if (st == OX_OK)
        st = gguf_get_str(g, "general.architecture", &arch, &arch_len);
    if (st == OX_OK)
        st = gguf_writer_create(&w);
    char arch_s[64];
    snprintf(arch_s, sizeof arch_s, "%.*s", st == OX_OK ? (int)arch_len : 0,
             st == OX_OK ? arch : "");
    if (st == OX_OK)
        st = gguf_writer_set_str(w, "general.architecture", arch_s);
    if (st == OX_OK)
        st = gguf_writer_set_str(w, "general.type", "adapter");
    if (st == OX_OK)
        st = gguf_writer_set_str(w, "adapter.type", "lora");
    if (st == OX_OK && o.alpha != 0.0f)
        st = gguf_writer_set_f32(w, "adapter.lora.alpha", o.alpha);
    void **keep = calloc((size_t)(2 * (g ? g->n_tensors : 0) + 1), sizeof *keep);
    int n_keep = 0, pairs = 0;
    for (int64_t i = 0; st == OX_OK && i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        if (t->n_dims != 2 || !targeted(t->name, o.targets))
            continue;
        int64_t ne_a[2] = {t->ne[0], o.rank}, ne_b[2] = {o.rank, t->ne[1]};
        if (!strcmp(t->name, "token_embd.weight")) /* A [n_vocab][rank], B [n_embd][rank] */
            ne_a[0] = o.rank, ne_a[1] = t->ne[1], ne_b[1] = t->ne[0];
        int64_t n_a = ne_a[0] * ne_a[1], n_b = ne_b[0] * ne_b[1];
        float *a = malloc((size_t)n_a * 4), *b = malloc((size_t)n_b * 4);
        char name[GGUF_MAX_NAME + 8];
        fill(a, n_a, 1.0f / sqrtf((float)ne_a[0]), o.seed, (uint64_t)i << 32); /* a row's length */
        fill(b, n_b, 1.0f / sqrtf((float)o.rank), o.seed, (uint64_t)i << 32 | 1u << 31);
        snprintf(name, sizeof name, "%s.lora_a", t->name);
        st = add(w, name, o.type, ne_a, a, &keep[n_keep++]);
        snprintf(name, sizeof name, "%s.lora_b", t->name);
        if (st == OX_OK)
            st = add(w, name, o.type, ne_b, b, &keep[n_keep++]);
        free(a), free(b);
        pairs++;
    }
    if (st == OX_OK)
        st = gguf_writer_write_file(w, o.out);
    for (int i = 0; i < n_keep; i++)
        free(keep[i]);
    free(keep);
    gguf_writer_free(w);
    gguf_free(g);
    if (st != OX_OK) {
        fprintf(stderr, "gen-lora: %s\n", ox_last_error());
        return 1;
    }
    printf("%s: %d weights, rank %lld, alpha %g\n", o.out, pairs, (long long)o.rank, o.alpha);
    return 0;
}
