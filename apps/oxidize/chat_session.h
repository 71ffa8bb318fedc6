/* chat_session.h: a conversation with a model: its messages, the tokens already in the KV
 * cache, and one answer at a time generated from only the tokens that are new. */
#ifndef OX_APPS_CHAT_SESSION_H
#define OX_APPS_CHAT_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "oxidize.h"
#include "common/stop_filter.h"

struct chat_session {
    struct ox_model *model;     /* borrowed */
    struct ox_context *ctx;     /* borrowed; sequence 0 holds the conversation */
    struct ox_sampler *sampler; /* borrowed; reset before each answer */
    struct ox_spec *spec;       /* borrowed: speculative decoding's drafter, or NULL */
    const char *tmpl;           /* template text, or NULL for the model's own */
    const char *stop[STOP_MAX];
    int n_stop;
    int n_predict; /* answer budget in tokens; < 0: until end of turn or a full context */

    struct ox_chat_message *msgs; /* role and content malloc'd */
    size_t n_msgs, cap_msgs;
    ox_token *kv; /* tokens in the KV cache, in order */
    size_t n_kv, cap_kv;
    char *kv_text; /* the text those tokens spell (rendered prompt, then answer) */
    size_t n_kv_text, cap_kv_text;
    bool kv_text_valid; /* false after a change that kv_text cannot follow */
};

/* What one answer cost. */
struct chat_stats {
    size_t n_prompt; /* new tokens processed for the prompt */
    size_t n_reused; /* tokens already in the cache that were kept */
    int n_gen;       /* tokens generated */
    double t_prompt, t_gen;
    size_t n_dropped; /* old messages dropped to make room */
    bool interrupted, context_full;
    bool refused; /* the message alone does not fit the context (said on stderr) */
};

void chat_session_init(struct chat_session *s);
void chat_session_free(struct chat_session *s);
/* Append a message (copied). */
enum ox_status chat_session_add(struct chat_session *s, const char *role, const char *content);
/* Forget every message but a leading system prompt, and the KV cache. */
void chat_session_reset(struct chat_session *s);
/* The conversation (FILE, JSON messages as /save writes them), the KV cache that holds it
 * (FILE.kv, ox_state_seq_save_file) and the text its tokens spell (FILE.kvtext): a later session
 * loads them and answers on from exactly where this one was, processing only what is new. A state
 * that does not load (another model, a missing or damaged FILE.kv) leaves the messages loaded and
 * the cache empty. */
enum ox_status chat_session_save_state(struct chat_session *s, const char *path);
enum ox_status chat_session_load_state(struct chat_session *s, const char *path, size_t *n_kv);
/* Replace the messages; the KV cache keeps whatever prefix the new rendering shares. */
enum ox_status chat_session_replace(struct chat_session *s, const struct ox_chat_message *msgs,
                                    size_t n);

/* Answer the conversation (whose last message is the user's): render it, process the new
 * tokens, stream the answer to out and append it as the assistant's message. *interrupt is
 * polled between tokens (Ctrl-C): the answer ends there and is kept. */
enum ox_status chat_session_answer(struct chat_session *s, FILE *out,
                                   volatile sig_atomic_t *interrupt, struct chat_stats *stats);

/* The template's rendering of msgs (*out malloc'd, NUL-terminated); OX_ERR_FORMAT when the
 * template raises, or the model has none and tmpl is NULL. */
enum ox_status chat_render(const struct ox_model *m, const char *tmpl,
                           const struct ox_chat_message *msgs, size_t n, bool add_generation,
                           char **out, size_t *len);
/* Whether text begins with the vocabulary's BOS token text (templates often write it, and
 * then the tokenizer must not add another). */
bool chat_starts_with_bos(const struct ox_vocab *v, const char *text);

#endif
