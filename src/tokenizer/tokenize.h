/* tokenize.h: text -> tokens (special tokens, BOS/EOS, the model's encoder) and back. */
#ifndef OX_TOKENIZER_TOKENIZE_H
#define OX_TOKENIZER_TOKENIZE_H

#include "tokenizer/vocab.h"

/* Tokenize text as llama.cpp's llama_tokenize does: with parse_special, control tokens in the
 * text become their ids; user-defined tokens are always split out first (lstrip/rstrip
 * honoured); add_special adds BOS/EOS/SEP as the vocab asks. Appends to out. */
enum ox_status vocab_tokenize(const struct vocab *v, const char *text, size_t len,
                              bool add_special, bool parse_special, struct tok_list *out);

/* The text of one token: byte tokens become their byte, SPM's U+2581 a space, BPE's byte
 * alphabet its bytes; control tokens only when special is set. lstrip: skip up to this many
 * leading spaces. Writes at most cap bytes; returns the length needed (snprintf rule, no NUL)
 * or -1 for an invalid id. */
int32_t vocab_token_to_piece(const struct vocab *v, int32_t id, char *buf, size_t cap,
                             int32_t lstrip, bool special);

/* Concatenated pieces of tokens, as llama_detokenize: remove_special drops a leading BOS and
 * trailing EOS the vocab would add; unparse_special renders control tokens as text; spaces are
 * cleaned up the way the model's decoder does. Returns the length needed (may exceed cap). */
int64_t vocab_detokenize(const struct vocab *v, const int32_t *ids, size_t n, char *buf,
                         size_t cap, bool remove_special, bool unparse_special);

#endif
