/* chat_file.h: saving and loading a conversation as a JSON array of messages. */
#ifndef OX_APPS_CHAT_FILE_H
#define OX_APPS_CHAT_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "oxidize.h"

/* False after printing why (to stderr). */
bool chat_file_save(const char *path, const struct ox_chat_message *msgs, size_t n);
/* The messages (free with chat_file_free), or NULL after printing why. */
struct ox_chat_message *chat_file_load(const char *path, size_t *n);
void chat_file_free(struct ox_chat_message *msgs, size_t n);

#endif
