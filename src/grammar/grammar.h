/* grammar.h: GBNF grammars (llama.cpp's format), compiled to flat rules and matched one code
 * point at a time by a bounded set of parse stacks. */
#ifndef OX_GRAMMAR_GRAMMAR_H
#define OX_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Limits that keep any grammar, however hostile, within bounded memory and time. */
#define GRAM_MAX_ELEMS     (1u << 20) /* elements in all rules, after expanding repetitions */
#define GRAM_MAX_REPEAT    10000      /* largest m or n in x{m,n} */
#define GRAM_MAX_NEST      200        /* parenthesis nesting depth while parsing */
#define GRAM_MAX_STACKS    4096       /* live parse stacks after one code point */
#define GRAM_MAX_LIVE_DATA (1u << 17) /* entries of all of them together */
#define GRAM_MAX_DEPTH     2048       /* entries in one parse stack */
#define GRAM_MAX_WORK      (1u << 18) /* stack entries expanded per code point (test_grammar) */
#define GRAM_MAX_WORK_DATA (1u << 23) /* stack entries held while expanding (32 MiB) */

/* One element of a rule. A rule is alternatives separated by ALT and closed by END; a character
 * class is CHAR or CHAR_NOT followed by RNG_UPPER (closing a range) and CHAR_ALT entries. */
enum gram_etype {
    GRAM_END,
    GRAM_ALT,
    GRAM_REF,       /* value: rule id */
    GRAM_CHAR,      /* value: code point; starts a positive class (or a literal char) */
    GRAM_CHAR_NOT,  /* value: code point; starts a negated class */
    GRAM_RNG_UPPER, /* value: inclusive upper end of the range begun by the previous element */
    GRAM_CHAR_ALT,  /* value: another code point of the same class */
    GRAM_ANY,       /* `.`: any code point */
};

struct gram_elem {
    uint32_t type; /* enum gram_etype */
    uint32_t value;
};

/* A compiled, validated grammar; immutable, so states on many threads may share it. */
struct gram {
    struct gram_elem *elems; /* all rules back to back */
    size_t n_elems;
    uint32_t *rule_start; /* [n_rules] first element of each rule */
    char **rule_names;    /* [n_rules]; generated rules are "<parent>~<n>" */
    bool *nullable;       /* [n_rules] can match the empty string */
    uint32_t n_rules;
    uint32_t root;
};

/* Parse and validate GBNF text (need not be NUL-terminated). Rejects undefined rules, a missing
 * `root`, and left recursion, with the line and column in ox_last_error(). */
enum ox_status gram_parse(const char *src, size_t len, struct gram **out);
void gram_free(struct gram *g);

/* Internal (gbnf_check.c): find root, compute nullable rules, reject left recursion. */
enum ox_status gram_check(struct gram *g);

/* A set of parse stacks; each stack is element indices, top last. Deduplicated by content. */
struct gram_stacks {
    uint32_t *data;
    size_t n_data, cap_data;
    size_t *off;
    uint32_t *len;
    size_t count, cap;
    uint32_t *table; /* open addressing: stack index + 1, 0 = empty */
    size_t tcap;
};

void gram_stacks_clear(struct gram_stacks *s);
void gram_stacks_free(struct gram_stacks *s);
/* Add a stack unless an equal one is present; *added says which. */
enum ox_status gram_stacks_add(struct gram_stacks *s, const uint32_t *st, uint32_t n, bool *added);
enum ox_status gram_stacks_copy(struct gram_stacks *dst, const struct gram_stacks *src);
/* Append without deduplication (a work list); gram_stacks_pop copies the last one to buf. */
enum ox_status gram_stacks_push(struct gram_stacks *s, const uint32_t *st, uint32_t n);
uint32_t gram_stacks_pop(struct gram_stacks *s, uint32_t *buf);

/* Incremental UTF-8 decoding, so a code point may be split across tokens. */
struct gram_u8 {
    uint32_t acc;  /* bits so far */
    uint8_t need;  /* continuation bytes still expected; 0 = between code points */
    uint8_t total; /* length of the sequence being decoded */
};
/* 1: *cp complete; 0: need more bytes; -1: invalid UTF-8 (d is then unspecified). */
int gram_u8_feed(struct gram_u8 *d, uint8_t b, uint32_t *cp);
/* The code points [*lo, *hi] that the pending partial sequence (d->need > 0) may still become. */
void gram_u8_range(const struct gram_u8 *d, uint32_t *lo, uint32_t *hi);

/* Matching state: the live stacks plus a pending partial code point, and scratch space. */
struct gram_state {
    const struct gram *g;
    struct gram_stacks cur;
    struct gram_u8 u8;
    struct gram_stacks tmp[2], seen; /* scratch */
    struct gram_stacks work;         /* scratch: LIFO of stacks to expand (not deduplicated) */
    uint32_t *buf;                   /* scratch: [GRAM_MAX_DEPTH + 2] */
    /* gram_state_filter's memo of the stacks after a first ASCII code point: candidates share
     * first characters (" the", " a", ...), so each is expanded once per call. */
    struct gram_stacks first[128];
    bool first_done[128];
};

/* The state at the start of the grammar; borrows g. */
enum ox_status gram_state_create(const struct gram *g, struct gram_state **out);
enum ox_status gram_state_clone(const struct gram_state *s, struct gram_state **out);
void gram_state_free(struct gram_state *s);

/* Advance by one code point. *ok false: cp cannot continue the parse; the state is unchanged.
 * A non-OK status means a resource limit was hit (the state is unchanged then too). */
enum ox_status gram_state_accept_cp(struct gram_state *s, uint32_t cp, bool *ok);
/* Advance by UTF-8 bytes (a trailing partial code point is kept pending). On *ok false,
 * *n_ok is how many bytes were accepted and the state has advanced past exactly those. */
enum ox_status gram_state_accept(struct gram_state *s, const char *text, size_t len, bool *ok,
                                 size_t *n_ok);
/* The grammar may end here: some stack is empty and no code point is half-fed. */
bool gram_state_can_end(const struct gram_state *s);
/* No continuation is possible at all (only ending, or nothing). */
bool gram_state_is_dead(const struct gram_state *s);

/* For sampling: allowed[i] = candidate text i (bytes, possibly a partial UTF-8 sequence, joined
 * to any partial code point pending in s) can continue the parse. Empty texts are not allowed;
 * end-of-generation tokens are the caller's, through gram_state_can_end. s is left unchanged. */
enum ox_status gram_state_filter(struct gram_state *s, const char *const *texts, const size_t *lens,
                                 size_t n, bool *allowed);

/* Internal (gbnf_match.c): one step of cp from `in` to `out`; `out` empty = rejected. */
enum ox_status gram_step(struct gram_state *s, const struct gram_stacks *in, uint32_t cp,
                         struct gram_stacks *out);
/* Internal: some stack in `in` could take a code point in [lo, hi] (first-byte / partial test). */
bool gram_stacks_may_take(const struct gram *g, const struct gram_stacks *in, uint32_t lo,
                          uint32_t hi);

#endif
