/* vocab.c: builds a vocabulary from GGUF tokenizer metadata, validating every array and id. */
#define _POSIX_C_SOURCE 200809L
#include "tokenizer/vocab.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenize.h"

/* Token ids stay below this: ids are int32 in the API, and no real vocabulary comes close. */
#define VOCAB_MAX_TOKENS (1 << 24)

enum ox_status tok_list_push(struct tok_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int32_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids)
            return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return OX_OK;
}

void tok_list_free(struct tok_list *l) {
    free(l->ids);
    memset(l, 0, sizeof *l);
}

int32_t vocab_find(const struct vocab *v, const char *text, size_t len) {
    return (int32_t)strmap_find(&v->text_to_id, text, len);
}

/* ---- model type and defaults (llama.cpp's per-model special ids and flags) ------------------ */

static void set_specials(struct vocab *v, int32_t bos, int32_t eos, int32_t unk, int32_t sep,
                         int32_t pad, int32_t mask) {
    v->bos = bos, v->eos = eos, v->unk = unk, v->sep = sep, v->pad = pad, v->mask = mask;
}

static enum ox_status select_model(struct vocab *v, const char *model, size_t len) {
    v->eot = v->eom = v->nl = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    snprintf(v->model_name, sizeof v->model_name, "%.*s", (int)len, model);
    if (!strcmp(v->model_name, "llama")) {
        v->type = VOCAB_SPM, v->ops = &vocab_spm_ops;
        set_specials(v, 1, 2, 0, -1, -1, -1);
        v->add_space_prefix = v->escape_whitespaces = v->add_bos = true;
    } else if (!strcmp(v->model_name, "gpt2")) {
        v->type = VOCAB_BPE, v->ops = &vocab_bpe_ops;
        set_specials(v, 11, 11, -1, -1, -1, -1);
        v->clean_spaces = true;
    } else if (!strcmp(v->model_name, "gemma4")) { /* BPE with its own pre-tokenizer */
        v->type = VOCAB_BPE, v->ops = &vocab_bpe_ops;
        set_specials(v, -1, -1, -1, -1, -1, -1);
        v->clean_spaces = true;
    } else if (!strcmp(v->model_name, "bert")) {
        v->type = VOCAB_WPM, v->ops = &vocab_wpm_ops;
        set_specials(v, 101, -1, 100, 102, 0, 103);
        v->clean_spaces = v->add_bos = v->add_sep = true;
    } else if (!strcmp(v->model_name, "no_vocab") || !strcmp(v->model_name, "none")) {
        v->type = VOCAB_NONE;
        set_specials(v, -1, -1, -1, -1, -1, -1);
    } else {
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "tokenizer: model '%s' is not supported (llama, gpt2, gemma4, bert)",
                       v->model_name);
    }
    return OX_OK;
}

/* ---- the token table ----------------------------------------------------------------------- */

static uint32_t attr_of_type(int32_t type) {
    switch (type) {
    case 1: return OX_TOKEN_ATTR_NORMAL;
    case 2: return OX_TOKEN_ATTR_UNKNOWN;
    case 3: return OX_TOKEN_ATTR_CONTROL;
    case 4: return OX_TOKEN_ATTR_USER_DEFINED;
    case 5: return OX_TOKEN_ATTR_UNUSED;
    case 6: return OX_TOKEN_ATTR_BYTE;
    default: return OX_TOKEN_ATTR_UNDEFINED;
    }
}

/* An optional per-token array must have the right element type and at least n elements. */
static enum ox_status optional_array(const struct ox_gguf *g, const char *key,
                                     enum ox_gguf_type type, uint64_t n,
                                     const struct gguf_value **out) {
    *out = NULL;
    if (!gguf_find(g, key))
        return OX_OK;
    OX_TRY(gguf_get_array(g, key, type, out));
    if ((*out)->n < n)
        return ox_fail(OX_ERR_FORMAT, "tokenizer: '%s' has %llu entries for %llu tokens", key,
                       (unsigned long long)(*out)->n, (unsigned long long)n);
    return OX_OK;
}

static enum ox_status copy_token(struct vocab *v, int32_t id, const struct gguf_value *text) {
    char empty[32];
    const char *s = (const char *)text->data;
    size_t len = (size_t)text->n;
    if (len == 0) { /* llama.cpp names empty tokens so they stay distinct and visible */
        len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)id);
        s = empty;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    memcpy(copy, s, len);
    copy[len] = 0;
    v->tokens[id].text = copy;
    v->tokens[id].len = (uint32_t)len;
    v->max_token_len = len > v->max_token_len ? (uint32_t)len : v->max_token_len;
    /* a later duplicate text wins the lookup, as in llama.cpp's token_to_id map */
    return strmap_put(&v->text_to_id, copy, len, id);
}

static enum ox_status load_tokens(struct vocab *v, const struct ox_gguf *g) {
    const struct gguf_value *tokens, *scores, *types;
    OX_TRY(gguf_get_array(g, "tokenizer.ggml.tokens", OX_GGUF_STRING, &tokens));
    if (tokens->n == 0 || tokens->n > VOCAB_MAX_TOKENS)
        return ox_fail(OX_ERR_FORMAT, "tokenizer: %llu tokens (must be 1..%d)",
                       (unsigned long long)tokens->n, VOCAB_MAX_TOKENS);
    v->n_tokens = (int32_t)tokens->n;
    OX_TRY(optional_array(g, "tokenizer.ggml.scores", OX_GGUF_FLOAT32, tokens->n, &scores));
    OX_TRY(optional_array(g, "tokenizer.ggml.token_type", OX_GGUF_INT32, tokens->n, &types));
    v->tokens = calloc((size_t)v->n_tokens, sizeof *v->tokens);
    if (!v->tokens)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory for %d tokens", v->n_tokens);
    OX_TRY(strmap_reserve(&v->text_to_id, (size_t)v->n_tokens));
    for (int32_t i = 0; i < v->n_tokens; i++) {
        struct gguf_value e;
        OX_TRY(gguf_array_elem(tokens, (uint64_t)i, &e));
        OX_TRY(copy_token(v, i, &e));
        v->tokens[i].attr = OX_TOKEN_ATTR_NORMAL;
        if (scores)
            memcpy(&v->tokens[i].score, scores->data + 4 * (size_t)i, 4);
        if (types) {
            int32_t t;
            memcpy(&t, types->data + 4 * (size_t)i, 4);
            v->tokens[i].attr = attr_of_type(t);
        }
    }
    return OX_OK;
}

/* ---- special tokens ------------------------------------------------------------------------ */

/* An id key overrides the model default when it names a token; defaults that fall outside
 * the vocabulary are dropped (llama.cpp warns and does the same). */
static enum ox_status read_special(const struct vocab *v, const struct ox_gguf *g, const char *key,
                                   int32_t *id) {
    if (*id >= v->n_tokens)
        *id = -1;
    if (!gguf_find(g, key))
        return OX_OK;
    uint64_t x;
    OX_TRY(gguf_get_uint(g, key, UINT32_MAX, &x));
    if (x < (uint64_t)v->n_tokens)
        *id = (int32_t)x;
    return OX_OK;
}

static enum ox_status read_specials(struct vocab *v, const struct ox_gguf *g) {
    const struct {
        const char *key;
        int32_t *id;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},
        {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},
        {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},
        {"tokenizer.ggml.seperator_token_id", &v->sep}, /* sic: the format's spelling */
        {"tokenizer.ggml.padding_token_id", &v->pad},
        {"tokenizer.ggml.mask_token_id", &v->mask},
        {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
        {"tokenizer.ggml.prefix_token_id", &v->fim_pre}, /* deprecated names */
        {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
        {"tokenizer.ggml.middle_token_id", &v->fim_mid},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        OX_TRY(read_special(v, g, keys[i].key, keys[i].id));
    return OX_OK;
}

static enum ox_status read_flag(const struct ox_gguf *g, const char *key, bool *flag) {
    return gguf_find(g, key) ? gguf_get_bool(g, key, flag) : OX_OK;
}

/* Flags the model file may set; read after the model's own defaults so the file wins. */
static enum ox_status read_flags(struct vocab *v, const struct ox_gguf *g) {
    OX_TRY(read_flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix));
    OX_TRY(read_flag(g, "tokenizer.ggml.remove_extra_whitespaces", &v->remove_extra_whitespaces));
    OX_TRY(read_flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos));
    OX_TRY(read_flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos));
    OX_TRY(read_flag(g, "tokenizer.ggml.add_sep_token", &v->add_sep));
    v->normalizer_lowercase = true; /* BertNormalizer's defaults, as llama.cpp's */
    OX_TRY(read_flag(g, "tokenizer.ggml.normalizer.lowercase", &v->normalizer_lowercase));
    v->normalizer_strip_accents = v->normalizer_lowercase;
    OX_TRY(read_flag(g, "tokenizer.ggml.normalizer.strip_accents", &v->normalizer_strip_accents));
    /* ours, for a converter to record tokenizer.json's NFC normalizer; without it the
     * pre-tokenizer type's default (pretok_config.nfc) */
    return read_flag(g, "tokenizer.ggml.normalizer.nfc", &v->normalizer_nfc);
}

/* A token llama.cpp would force to be a control token for its text, made one unless it is a
 * plain entry of the model: typed normal and made by a merge from text. Hugging Face matches
 * only its added tokens in the text; Qwen2's "</s>" (a merge of "</" and "s>") is text there,
 * where llama.cpp matches it as a control token. An old conversion's mistyped "<|im_end|>" (an
 * added token: no merge makes it) still becomes one. */
static void force_control(struct vocab *v, int32_t id) {
    const struct vocab_token *t = &v->tokens[id];
    if (!(t->attr & OX_TOKEN_ATTR_NORMAL) || !v->ops->makes || !v->ops->makes(v, t->text, t->len))
        v->tokens[id].attr |= OX_TOKEN_ATTR_CONTROL;
}

/* Older conversions do not store every special id; llama.cpp recognises these by their text
 * (first listed text present wins) and forces them to be control tokens (force_control). */
static void detect_by_text(struct vocab *v, int32_t *id, const char *const *texts) {
    for (; *texts && *id < 0; texts++) {
        int32_t t = vocab_find(v, *texts, strlen(*texts));
        if (t >= 0) {
            *id = t;
            force_control(v, t);
        }
    }
}

static const char *const eot_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "<|end_of_text|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "<\xef\xbd\x9c"
                                        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                        "<end_of_utterance>",
                                        NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>",
                                            "<fim-prefix>",
                                            "<fim_prefix>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81"
                                            "begin\xef\xbd\x9c>",
                                            "<PRE>",
                                            "\xe2\x96\x81<PRE>",
                                            "<|code_prefix|>",
                                            "<|prefix|>",
                                            NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>",
                                            "<fim-suffix>",
                                            "<fim_suffix>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                                            "<SUF>",
                                            "\xe2\x96\x81<SUF>",
                                            "<|code_suffix|>",
                                            "<|suffix|>",
                                            NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>",
                                            "<fim-middle>",
                                            "<fim_middle>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81"
                                            "end\xef\xbd\x9c>",
                                            "<MID>",
                                            "\xe2\x96\x81<MID>",
                                            "<|code_middle|>",
                                            "<|middle|>",
                                            NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                            "<PAD>",       "[PAD]",     NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>",       "<reponame>",    NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
/* Texts that end generation in the models that use them. */
static const char *const eog_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<|return|>",
                                        "<|call|>",
                                        "<|flush|>",
                                        "<|calls|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "</s>",
                                        "<|eom_id|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "[EOS]",
                                        "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<eos>",
                                        "<turn|>",
                                        "<|tool_response>",
                                        "<\xef\xbd\x9c"
                                        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                        "[e~[",
                                        NULL};

static enum ox_status add_eog(struct vocab *v, int32_t id) {
    if (id < 0)
        return OX_OK;
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return OX_OK;
    int32_t *eog = realloc(v->eog, (v->n_eog + 1) * sizeof *eog);
    if (!eog)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    v->eog = eog;
    v->eog[v->n_eog++] = id;
    return OX_OK;
}

static enum ox_status detect_specials(struct vocab *v) {
    detect_by_text(v, &v->eot, eot_texts);
    detect_by_text(v, &v->eom, eom_texts);
    detect_by_text(v, &v->fim_pre, fim_pre_texts);
    detect_by_text(v, &v->fim_suf, fim_suf_texts);
    detect_by_text(v, &v->fim_mid, fim_mid_texts);
    detect_by_text(v, &v->fim_pad, fim_pad_texts);
    detect_by_text(v, &v->fim_rep, fim_rep_texts);
    detect_by_text(v, &v->fim_sep, fim_sep_texts);
    for (const char *const *t = eog_texts; *t; t++) {
        int32_t id = vocab_find(v, *t, strlen(*t));
        if (id >= 0)
            force_control(v, id);
        OX_TRY(add_eog(v, id)); /* generation still ends on it, as in llama.cpp */
    }
    const int32_t always[] = {v->fim_pad, v->fim_rep, v->fim_sep, v->eos, v->eot, v->eom};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        OX_TRY(add_eog(v, always[i]));
    return OX_OK;
}

/* Phi-3's special tokens swallow the spaces after them (llama.cpp keys this on the name). */
static void name_specific_attrs(struct vocab *v, const struct ox_gguf *g) {
    const char *name;
    uint64_t len;
    char lower[128] = "";
    if (gguf_find(g, "general.name") && gguf_get_str(g, "general.name", &name, &len) == OX_OK)
        for (size_t i = 0; i < len && i + 1 < sizeof lower; i++)
            lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    if (!strstr(lower, "phi-3") && !strstr(lower, "phi3"))
        return;
    for (size_t i = 0; i < v->n_special; i++)
        v->tokens[v->special_ids[i]].attr |= OX_TOKEN_ATTR_RSTRIP;
    int32_t id = vocab_find(v, "</s>", 4);
    if (id >= 0)
        v->tokens[id].attr |= OX_TOKEN_ATTR_RSTRIP;
    const char *const plain[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < 3; i++)
        if ((id = vocab_find(v, plain[i], strlen(plain[i]))) >= 0)
            v->tokens[id].attr &= ~(uint32_t)OX_TOKEN_ATTR_RSTRIP;
}

struct special_key {
    uint32_t len;
    int32_t id;
};

static int longer_first(const void *a, const void *b) {
    const struct special_key *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id; /* ties by id: deterministic, unlike llama.cpp */
}

/* The tokens the special-token partitioning looks for, longest first. */
static enum ox_status cache_specials(struct vocab *v) {
    const uint32_t mask =
        OX_TOKEN_ATTR_CONTROL | OX_TOKEN_ATTR_USER_DEFINED | OX_TOKEN_ATTR_UNKNOWN;
    struct special_key *keys = malloc((size_t)v->n_tokens * sizeof *keys);
    v->special_ids = malloc((size_t)v->n_tokens * sizeof *v->special_ids);
    if (!keys || !v->special_ids) {
        free(keys);
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    }
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & mask)
            keys[v->n_special++] = (struct special_key){v->tokens[i].len, i};
    qsort(keys, v->n_special, sizeof *keys, longer_first);
    for (size_t i = 0; i < v->n_special; i++)
        v->special_ids[i] = keys[i].id;
    free(keys);
    return OX_OK;
}

/* The newline token: SPM's byte token, WPM's padding, else whatever "\n" tokenizes to. */
static enum ox_status find_newline(struct vocab *v) {
    if (v->type == VOCAB_SPM) {
        v->nl = vocab_find(v, "<0x0A>", 6);
        if (v->nl < 0)
            v->nl = v->pad;
        return OX_OK;
    }
    if (v->type == VOCAB_WPM) {
        v->nl = v->pad;
        return OX_OK;
    }
    struct tok_list ids = {0};
    enum ox_status s = vocab_tokenize(v, "\n", 1, false, false, &ids);
    v->nl = s == OX_OK && ids.n > 0 ? ids.ids[0] : v->pad;
    tok_list_free(&ids);
    return s;
}

/* ---- load / free --------------------------------------------------------------------------- */

static enum ox_status load_all(struct vocab *v, const struct ox_gguf *g) {
    const char *model, *pre;
    uint64_t len, pre_len;
    OX_TRY(gguf_get_str(g, "tokenizer.ggml.model", &model, &len));
    OX_TRY(select_model(v, model, len));
    snprintf(v->pre, sizeof v->pre, "default");
    if (gguf_find(g, "tokenizer.ggml.pre")) {
        OX_TRY(gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len));
        if (pre_len >= sizeof v->pre)
            return ox_fail(OX_ERR_FORMAT, "tokenizer: pre-tokenizer name too long");
        snprintf(v->pre, sizeof v->pre, "%.*s", (int)pre_len, pre);
    }
    if (!strcmp(v->model_name, "gemma4"))
        snprintf(v->pre, sizeof v->pre, "gemma4"); /* whatever the file says, as llama.cpp */
    if (v->type == VOCAB_NONE)
        return OX_OK;
    OX_TRY(load_tokens(v, g));
    if (v->ops->init)
        OX_TRY(v->ops->init(v, g)); /* may set model flags (BPE pre-tokenizer presets) */
    OX_TRY(read_specials(v, g));
    OX_TRY(read_flags(v, g));
    if (!strcmp(v->pre, "gemma4"))
        v->add_bos = true; /* Gemma 4 files say false but the model needs BOS (llama.cpp #21500) */
    OX_TRY(detect_specials(v));
    OX_TRY(cache_specials(v));
    name_specific_attrs(v, g);
    return find_newline(v);
}

enum ox_status vocab_load(const struct ox_gguf *g, struct vocab **out) {
    *out = NULL;
    struct vocab *v = calloc(1, sizeof *v);
    if (!v)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    enum ox_status s = load_all(v, g);
    if (s != OX_OK) {
        vocab_free(v);
        return s;
    }
    *out = v;
    return OX_OK;
}

void vocab_free(struct vocab *v) {
    if (!v)
        return;
    if (v->ops && v->ops->free)
        v->ops->free(v);
    for (int32_t i = 0; v->tokens && i < v->n_tokens; i++)
        free((char *)v->tokens[i].text);
    free(v->tokens);
    strmap_free(&v->text_to_id);
    free(v->eog);
    free(v->special_ids);
    free(v);
}
