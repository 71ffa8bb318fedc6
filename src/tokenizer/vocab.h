/* vocab.h: a model's vocabulary as read from GGUF metadata, and the interface every tokenizer
 * model (SPM, BPE, WPM) implements. Mirrors llama.cpp's llama_vocab. */
#ifndef OX_TOKENIZER_VOCAB_H
#define OX_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strmap.h"
#include "gguf/gguf.h"

enum vocab_type {
    VOCAB_NONE, /* no tokenizer ("no_vocab") */
    VOCAB_SPM,  /* "llama": SentencePiece BPE by score, byte fallback */
    VOCAB_BPE,  /* "gpt2": byte-level BPE by merge rank after a regex pre-tokenizer */
    VOCAB_WPM,  /* "bert": WordPiece */
};

struct vocab_token {
    const char *text; /* NUL-terminated, owned by the vocab */
    uint32_t len;
    float score;
    uint32_t attr; /* OX_TOKEN_ATTR_* bits */
};

/* A growable list of token ids: what encoders append to. */
struct tok_list {
    int32_t *ids;
    size_t n, cap;
};
enum ox_status tok_list_push(struct tok_list *l, int32_t id);
void tok_list_free(struct tok_list *l);

struct vocab;

/* What a tokenizer model provides. init builds its private state (merge ranks, compiled
 * regexes) into v->model_state after the generic fields are loaded; encode appends the tokens
 * of one fragment of plain text (special tokens already split out) and must be thread-safe. */
struct vocab_model_ops {
    enum ox_status (*init)(struct vocab *v, const struct ox_gguf *g);
    void (*free)(struct vocab *v);
    enum ox_status (*encode)(const struct vocab *v, const char *text, size_t len,
                             struct tok_list *out);
    /* Whether the model itself makes this token text from plain text (a BPE merge's result);
     * NULL: it cannot tell. */
    bool (*makes)(const struct vocab *v, const char *text, size_t len);
};

struct vocab {
    enum vocab_type type;
    char model_name[32]; /* tokenizer.ggml.model */
    char pre[64];        /* tokenizer.ggml.pre ("default" when absent) */
    int32_t n_tokens;
    struct vocab_token *tokens;
    struct strmap text_to_id; /* token text -> id */
    uint32_t max_token_len;

    /* special tokens, -1 when absent */
    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int32_t *eog; /* end-of-generation ids (eos, eot, eom and known text matches) */
    size_t n_eog;

    bool add_bos, add_eos, add_sep;
    bool add_space_prefix; /* SPM: a leading space before the first word */
    bool remove_extra_whitespaces;
    bool escape_whitespaces; /* SPM: spaces become U+2581 */
    bool clean_spaces;       /* detokenize: undo spaces before punctuation */
    bool normalizer_lowercase, normalizer_strip_accents; /* WPM */
    bool normalizer_nfc;                                 /* BPE: NFC before pre-tokenizing */

    /* ids of CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first: what the special
     * token partitioning looks for */
    int32_t *special_ids;
    size_t n_special;

    const struct vocab_model_ops *ops;
    void *model_state;
};

/* Load the vocabulary of a GGUF file (all tokenizer.ggml.* keys), fully validated: array
 * element types and lengths, ids in range. OX_ERR_FORMAT names the bad key. */
enum ox_status vocab_load(const struct ox_gguf *g, struct vocab **out);
void vocab_free(struct vocab *v);
/* The public handle (ox_vocab) over g's vocabulary, for a model that has its GGUF open already:
 * g is borrowed and must outlive the handle (ox_model_free frees the vocab before the GGUF). */
struct ox_vocab;
enum ox_status vocab_from_gguf(const struct ox_gguf *g, struct ox_vocab **out);

/* Token id of an exact text, or -1. */
int32_t vocab_find(const struct vocab *v, const char *text, size_t len);

/* The tokenizer models (spm.c, bpe.c, wpm.c). */
extern const struct vocab_model_ops vocab_spm_ops, vocab_bpe_ops, vocab_wpm_ops;

#endif
