/* state.c: a sequence's saved state: its cached keys and values, layer by layer, with their
 * positions, behind a header that names the model they belong to; loaded into any sequence of a
 * context of the same model (its cells placed anew), it continues exactly as if never saved.
 * Files add the tokens the state holds (a prompt cache: `oxidize run --prompt-cache`).
 *
 * Layout, little-endian: "OXSTATE1", u64 the model's fingerprint, u32 n cells, i32 their
 * positions (ascending), then for each layer that keeps rows its n key rows, and its n value
 * rows where they are its own (kv_cache.h), then for each recurrent layer (delta_net.h) the
 * sequence's convolution rows and its state matrices. A file then has u32 n tokens and the
 * tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "model/split.h"

#define STATE_MAGIC  "OXSTATE1"
#define STATE_HEADER (8 + 8 + 4)

/* What a state must match: the model (its description, size, shape) and how the cache keeps
 * rows (type, row sizes), as FNV-1a. */
static uint64_t fingerprint(const struct ox_context *ctx) {
    uint64_t h = 0xcbf29ce484222325ull;
    char desc[256];
    ox_model_desc(ctx->model, desc, sizeof desc);
    const struct kv_cache *kv = &ctx->kv;
    const struct delta_net_state *dn = ctx->dn;
    int64_t facts[] = {ox_model_n_layer(ctx->model),
                       ox_model_n_embd(ctx->model),
                       ox_model_n_vocab(ctx->model),
                       (int64_t)ox_model_n_params(ctx->model),
                       kv->type,
                       dn ? dn->n_layers : 0,
                       dn ? (int64_t)dn->conv_floats : 0,
                       dn ? (int64_t)dn->ssm_floats : 0};
    const uint8_t *parts[] = {(const uint8_t *)desc, (const uint8_t *)facts,
                              (const uint8_t *)kv->k_row, (const uint8_t *)kv->v_row};
    size_t lens[] = {strlen(desc), sizeof facts, sizeof kv->k_row, sizeof kv->v_row};
    for (int p = 0; p < 4; p++)
        for (size_t i = 0; i < lens[p]; i++)
            h = (h ^ parts[p][i]) * 0x100000001b3ull;
    return h;
}

static struct stage *stage_of(struct ox_context *ctx, int32_t il) {
    for (int32_t s = 0; s < ctx->n_stages; s++)
        if (il >= ctx->stages[s].layer_begin && il < ctx->stages[s].layer_end)
            return &ctx->stages[s];
    return NULL;
}

/* The cells of seq in position order (malloc'd; *n of them). */
static int32_t *seq_cells(const struct kv_cache *kv, int32_t seq, int32_t *n) {
    int32_t *cells = malloc(((size_t)kv->used_end + 1) * sizeof *cells);
    *n = 0;
    for (int32_t c = 0; cells && c < kv->used_end; c++)
        if (kv->pos[c] >= 0 && kv_cell_in(kv, c, seq))
            cells[(*n)++] = c;
    for (int32_t i = 1; cells && i < *n; i++) { /* insertion sort by position: runs mostly */
        int32_t c = cells[i], j = i;
        for (; j > 0 && kv->pos[cells[j - 1]] > kv->pos[c]; j--)
            cells[j] = cells[j - 1];
        cells[j] = c;
    }
    return cells;
}

/* One cell's rows in every layer that keeps them, in bytes. */
static size_t rows_bytes(const struct ox_context *ctx) {
    size_t b = 0;
    for (int32_t il = 0; il < ctx->model->cfg.n_layer; il++)
        b += ctx->kv.k_row[il] + ctx->kv.v_row[il];
    return b;
}

/* The recurrent layers' state of one sequence, in bytes (0 without such layers). */
static size_t recurrent_bytes(const struct ox_context *ctx) {
    const struct delta_net_state *dn = ctx->dn;
    return dn ? (size_t)dn->n_layers * (dn->conv_floats + dn->ssm_floats) * sizeof(float) : 0;
}

/* A state of n cells, in bytes (the layout at the top of this file). */
static size_t state_bytes(const struct ox_context *ctx, size_t n) {
    return STATE_HEADER + n * (4 + rows_bytes(ctx)) + recurrent_bytes(ctx);
}

/* Sequence seq's recurrent state to or from p (each layer in its owner's memory). */
static enum ox_status move_recurrent(struct ox_context *ctx, int32_t seq, uint8_t *p, bool save) {
    const struct delta_net_state *dn = ctx->dn;
    for (int32_t r = 0; dn && r < dn->n_layers; r++) {
        struct backend *b = dn->owner[r];
        float *parts[2] = {dn->conv[r] + (size_t)seq * dn->conv_floats,
                           dn->ssm[r] + (size_t)seq * dn->ssm_floats};
        size_t bytes[2] = {dn->conv_floats * sizeof(float), dn->ssm_floats * sizeof(float)};
        for (int k = 0; k < 2; k++) {
            if (save)
                OX_TRY(b->ops->download(b, p, parts[k], bytes[k]));
            else
                b->ops->upload(b, parts[k], p, bytes[k]);
            p += bytes[k];
        }
    }
    return OX_OK;
}

static enum ox_status check_seq(const struct ox_context *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= (int32_t)ctx->params.n_seq_max)
        return ox_fail(OX_ERR_INVALID_ARG, "state: no sequence %d in this context", seq);
    return OX_OK;
}

size_t ox_state_seq_size(struct ox_context *ctx, int32_t seq) {
    if (check_seq(ctx, seq) != OX_OK)
        return 0;
    if (ctx->split)
        return split_state_size(ctx, seq);
    size_t n = 0;
    for (int32_t c = 0; c < ctx->kv.used_end; c++)
        n += ctx->kv.pos[c] >= 0 && kv_cell_in(&ctx->kv, c, seq);
    return state_bytes(ctx, n);
}

/* Rows of the given cells between the host (at, rows after one another) and a layer's rows in
 * the stage's memory, by runs of adjacent cells: one copy for each run. */
static enum ox_status move_rows(struct stage *s, uint8_t *base, size_t row, const int32_t *cells,
                                int32_t n, uint8_t *at, bool save) {
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && cells[j] == cells[j - 1] + 1)
            j++;
        uint8_t *dev = base + (size_t)cells[i] * row;
        size_t bytes = (size_t)(j - i) * row;
        if (save)
            OX_TRY(s->be.ops->download(&s->be, at, dev, bytes));
        else
            s->be.ops->upload(&s->be, dev, at, bytes);
        at += bytes, i = j;
    }
    return OX_OK;
}

/* Every layer's rows of the cells, to or from p. */
static enum ox_status move_layers(struct ox_context *ctx, const int32_t *cells, int32_t n,
                                  uint8_t *p, bool save) {
    const struct kv_cache *kv = &ctx->kv;
    for (int32_t il = 0; il < ctx->model->cfg.n_layer; il++) {
        struct stage *s = stage_of(ctx, il);
        if (!kv->k_row[il])
            continue;
        if (!s)
            return ox_fail(OX_ERR_INVALID_ARG, "state: layer %d runs nowhere", il);
        OX_TRY(move_rows(s, s->k[il], kv->k_row[il], cells, n, p, save));
        p += (size_t)n * kv->k_row[il];
        if (kv->v_row[il]) {
            OX_TRY(move_rows(s, s->v[il], kv->v_row[il], cells, n, p, save));
            p += (size_t)n * kv->v_row[il];
        }
    }
    if (!save) /* the uploads are done before anything reads the buffer again */
        for (int32_t s = 0; s < ctx->n_stages; s++)
            OX_TRY(ctx->stages[s].be.ops->download(&ctx->stages[s].be, NULL, NULL, 0));
    return OX_OK;
}

enum ox_status ox_state_seq_save(struct ox_context *ctx, int32_t seq, uint8_t *buf, size_t cap,
                                 size_t *written) {
    OX_TRY(check_seq(ctx, seq));
    if (ctx->split)
        return split_state_save(ctx, seq, buf, cap, written);
    int32_t n = 0;
    int32_t *cells = seq_cells(&ctx->kv, seq, &n);
    size_t need = state_bytes(ctx, (size_t)n);
    if (!cells || !buf || cap < need) {
        free(cells);
        return ox_fail(cells ? OX_ERR_INVALID_ARG : OX_ERR_OOM,
                       "state: %zu bytes needed (ox_state_seq_size), %zu given", need, cap);
    }
    uint64_t fp = fingerprint(ctx);
    uint32_t count = (uint32_t)n;
    memcpy(buf, STATE_MAGIC, 8), memcpy(buf + 8, &fp, 8), memcpy(buf + 16, &count, 4);
    uint8_t *p = buf + STATE_HEADER;
    for (int32_t i = 0; i < n; i++, p += 4)
        memcpy(p, &ctx->kv.pos[cells[i]], 4);
    enum ox_status st = move_layers(ctx, cells, n, p, true);
    if (st == OX_OK)
        st = move_recurrent(ctx, seq, p + (size_t)n * rows_bytes(ctx), true);
    free(cells);
    if (st == OX_OK && written)
        *written = need;
    return st;
}

enum ox_status ox_state_seq_load(struct ox_context *ctx, int32_t seq, const uint8_t *buf,
                                 size_t len) {
    OX_TRY(check_seq(ctx, seq));
    if (ctx->split)
        return split_state_load(ctx, seq, buf, len);
    if (!buf || len < STATE_HEADER || memcmp(buf, STATE_MAGIC, 8) != 0)
        return ox_fail(OX_ERR_FORMAT, "state: not a saved state (of this version of oxidize)");
    uint64_t fp;
    uint32_t n;
    memcpy(&fp, buf + 8, 8), memcpy(&n, buf + 16, 4);
    if (fp != fingerprint(ctx))
        return ox_fail(OX_ERR_FORMAT, "state: saved from another model (or another KV cache "
                                      "type) than this context's");
    if (n > (uint32_t)ctx->kv.n_cells || len != state_bytes(ctx, n))
        return ox_fail(OX_ERR_FORMAT, "state: %zu bytes for %u cells, which take %zu", len, n,
                       state_bytes(ctx, n));
    int32_t *pos = malloc(((size_t)n + 1) * sizeof *pos), *seqs = malloc(((size_t)n + 1) * 4),
            *cells = malloc(((size_t)n + 1) * sizeof *cells);
    enum ox_status st = pos && seqs && cells ? OX_OK : ox_fail(OX_ERR_OOM, "state: out of memory");
    for (uint32_t i = 0; st == OX_OK && i < n; i++) {
        memcpy(&pos[i], buf + STATE_HEADER + 4 * (size_t)i, 4);
        seqs[i] = seq;
        if (pos[i] < 0 || (i > 0 && pos[i] <= pos[i - 1]))
            st = ox_fail(OX_ERR_FORMAT, "state: positions out of order");
    }
    if (st == OX_OK) {
        kv_seq_rm(&ctx->kv, seq, -1, -1); /* the sequence is the state's alone */
        st = kv_place(&ctx->kv, (int)n, pos, seqs, cells);
    }
    if (st == OX_OK) {
        uint8_t *rows = (uint8_t *)buf + STATE_HEADER + 4 * (size_t)n;
        st = move_recurrent(ctx, seq, rows + (size_t)n * rows_bytes(ctx), false);
        if (st == OX_OK) /* after the recurrent uploads: its sync covers them too */
            st = move_layers(ctx, cells, (int32_t)n, rows, false);
        if (st != OX_OK)
            kv_seq_rm(&ctx->kv, seq, -1, -1);
    }
    free(pos), free(seqs), free(cells);
    return st;
}

enum ox_status ox_state_seq_save_file(struct ox_context *ctx, int32_t seq, const char *path,
                                      const ox_token *tokens, size_t n_tokens) {
    size_t size = ox_state_seq_size(ctx, seq), written = 0;
    OX_TRY(check_seq(ctx, seq));
    if (!path || (n_tokens && !tokens) || n_tokens > UINT32_MAX)
        return ox_fail(OX_ERR_INVALID_ARG, "state: a path and the tokens are needed");
    uint8_t *buf = malloc(size);
    if (!buf)
        return ox_fail(OX_ERR_OOM, "state: out of memory");
    enum ox_status st = ox_state_seq_save(ctx, seq, buf, size, &written);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = st == OX_OK ? fopen(tmp, "wb") : NULL;
    uint32_t n = (uint32_t)n_tokens;
    if (st == OX_OK && (!f || fwrite(buf, 1, written, f) != written || fwrite(&n, 4, 1, f) != 1 ||
                        fwrite(tokens, sizeof *tokens, n_tokens, f) != n_tokens))
        st = ox_fail(OX_ERR_IO, "state: cannot write %s", path);
    if (f && fclose(f) != 0 && st == OX_OK)
        st = ox_fail(OX_ERR_IO, "state: cannot write %s", path);
    if (st == OX_OK && rename(tmp, path) != 0) /* never a half-written file under its name */
        st = ox_fail(OX_ERR_IO, "state: cannot write %s", path);
    if (st != OX_OK && f)
        remove(tmp);
    free(buf);
    return st;
}

/* The length of the state at the front of a file's bytes (size of them, at least a header's),
 * from its count of cells; an error where it is not this context's. */
static enum ox_status state_length(const struct ox_context *ctx, const uint8_t *buf, size_t size,
                                   size_t *len) {
    if (memcmp(buf, STATE_MAGIC, 8) != 0)
        return ox_fail(OX_ERR_FORMAT, "state: not a saved state (of this version of oxidize)");
    uint64_t fp = 0;
    if (memcpy(&fp, buf + 8, 8), fp != fingerprint(ctx))
        return ox_fail(OX_ERR_FORMAT, "state: saved from another model (or another KV cache "
                                      "type) than this context's");
    uint32_t n_cells = 0;
    memcpy(&n_cells, buf + 16, 4);
    *len = n_cells <= (uint32_t)ctx->kv.n_cells ? state_bytes(ctx, n_cells) : size;
    return OX_OK;
}

enum ox_status ox_state_seq_load_file(struct ox_context *ctx, int32_t seq, const char *path,
                                      ox_token *tokens, size_t cap, size_t *n_tokens) {
    OX_TRY(check_seq(ctx, seq));
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return ox_fail(OX_ERR_IO, "state: cannot open %s", path ? path : "(null)");
    uint8_t *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    enum ox_status st = size >= STATE_HEADER + 4 && fseek(f, 0, SEEK_SET) == 0
                            ? OX_OK
                            : ox_fail(OX_ERR_FORMAT, "state: %s is not a saved state", path);
    if (st == OX_OK && !(buf = malloc((size_t)size)))
        st = ox_fail(OX_ERR_OOM, "state: out of memory");
    if (st == OX_OK && fread(buf, 1, (size_t)size, f) != (size_t)size)
        st = ox_fail(OX_ERR_IO, "state: cannot read %s", path);
    fclose(f);
    /* the tokens trail the state: its size says where they start */
    uint32_t n = 0;
    size_t state_len = 0;
    if (st == OX_OK)
        st = ctx->split ? split_state_length(ctx, buf, (size_t)size, &state_len)
                        : state_length(ctx, buf, (size_t)size, &state_len);
    if (st == OX_OK && state_len + 4 > (size_t)size)
        st = ox_fail(OX_ERR_FORMAT, "state: %s is cut short", path);
    if (st == OX_OK) {
        memcpy(&n, buf + state_len, 4);
        if ((size_t)size != state_len + 4 + (size_t)n * sizeof *tokens)
            st = ox_fail(OX_ERR_FORMAT, "state: %s is cut short or has bytes past its end", path);
        else if (n > cap || (n && !tokens))
            st = ox_fail(OX_ERR_INVALID_ARG, "state: %s holds %u tokens, room for %zu given", path,
                         n, cap);
    }
    if (st == OX_OK)
        st = ox_state_seq_load(ctx, seq, buf, state_len);
    if (st == OX_OK) {
        if (n)
            memcpy(tokens, buf + state_len + 4, (size_t)n * sizeof *tokens);
        if (n_tokens)
            *n_tokens = n;
    }
    free(buf);
    return st;
}
