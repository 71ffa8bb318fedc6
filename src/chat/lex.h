/* lex.h: template source to tokens (text runs, tag delimiters, expression tokens). */
#ifndef OX_CHAT_LEX_H
#define OX_CHAT_LEX_H

#include "chat/jinja_int.h"

enum jtok_type {
    T_TEXT,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
    T_EOF
};

struct jtok {
    enum jtok_type type;
    int line;
    const char *s; /* NAME/OP: points into the source; TEXT/STRING: arena copy */
    size_t n;
    int64_t i;
    double f;
};

/* Tokenize with trim_blocks and lstrip_blocks on (Hugging Face's settings). On failure the
 * message goes to err (with the line). Tokens live in arena. */
int jlex(struct jarena *a, const char *src, size_t len, struct jtok **toks, size_t *ntoks,
         char *err, size_t errlen);

#endif
