/* pretok.h: the regex pre-tokenizers of byte-level BPE vocabularies, selected by
 * tokenizer.ggml.pre. */
#ifndef OX_TOKENIZER_PRETOK_H
#define OX_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* What one tokenizer.ggml.pre value selects: the regex set and the per-model flags that
 * llama.cpp's llama_vocab::impl::load sets beside it. */
struct pretok_config {
    const char *name;        /* the pre value as matched, e.g. "llama-bpe" */
    const char *kind;        /* the regex set it uses, e.g. "llama3" */
    bool byte_encode;        /* pieces go through the GPT-2 byte map (false: raw UTF-8, and
                                missing symbols fall back to <0xXX> tokens) */
    bool ignore_merges;      /* a piece that is itself a token is emitted without merging */
    bool clean_spaces;       /* detokenize: clean_up_tokenization_spaces */
    bool escape_whitespaces; /* ' ' becomes U+2581 before splitting (SPM-style BPE) */
    bool add_bos;            /* default when the GGUF has no tokenizer.ggml.add_bos_token */
    bool add_sep;            /* default when the GGUF has no tokenizer.ggml.add_sep_token */
    bool force_add_bos;      /* add_bos is on whatever the GGUF says (gemma4) */
    bool no_default_bos;     /* no BOS id unless the GGUF names one (glm4) */
    bool newline_runs_whole; /* a piece of only '\n' that is a token is emitted whole (gemma4) */
    bool nfc;                /* text is NFC-normalized first, as the model's tokenizer.json says
                                (Qwen2's, Qwen3.5's, GPT-NeoX's; llama.cpp skips it): the default of
                                tokenizer.ggml.normalizer.nfc */
    bool regex_only;         /* tests: run every pattern as a regex, even those pretok.c
                                replaces by one-pass code for speed */
};

/* Look up a pre value ("" means "default", as llama.cpp treats a missing one). An unknown
 * value is OX_ERR_UNSUPPORTED naming it. */
enum ox_status pretok_config_for(const char *pre, struct pretok_config *out);

/* The pre values pretok_config_for accepts, for listings: names[i] for i < pretok_n_names(). */
size_t pretok_n_names(void);
const char *pretok_name(size_t i);

/* A compiled pre-tokenizer: immutable after creation, shared by all threads. */
struct pretok;

enum ox_status pretok_create(const struct pretok_config *cfg, struct pretok **out);
void pretok_free(struct pretok *p);

/* One piece: bytes [off, off + len) of pretok_split_result.text. */
struct pretok_span {
    size_t off, len;
};

/* The pieces of one text, and the buffers reused from call to call (zero-initialize it; one
 * per thread or per call; release with pretok_split_result_free). */
struct pretok_split_result {
    const char *text; /* what the spans index: the input itself when it was valid
                         UTF-8, else the copy below */
    size_t text_len;
    struct pretok_span *spans;
    size_t n_spans;

    /* scratch */
    char *subject;  /* the input with invalid UTF-8 repaired (what the regexes see) */
    char *out_text; /* subject with surrogate stand-ins put back, when there were any */
    size_t subject_cap, out_cap;
    struct pretok_span *next_spans;
    size_t spans_cap, next_cap, n_next;
    void *match_data; /* pcre2_match_data_8 */
    void *match_ctx;  /* pcre2_match_context_8 with raised limits, made on demand */
    void *jit_stack;  /* pcre2_jit_stack_8, made on demand */
};

/* Split text (len bytes, any bytes) into pieces with the pre-tokenizer's regexes in order,
 * each regex splitting the pieces the previous ones produced; text a regex does not match is
 * kept as pieces of its own. Invalid UTF-8 is read as llama.cpp reads it (see pretok.c). */
enum ox_status pretok_split(const struct pretok *p, const char *text, size_t len,
                            struct pretok_split_result *res);
void pretok_split_result_free(struct pretok_split_result *res);

#endif
