/* chat_file.c: conversations saved as JSON (an array of {"role", "content"} objects, the
 * format of chat-template --messages and of OpenAI's API) for chat's /save and /load. */
#define _POSIX_C_SOURCE 200809L
#include "chat_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_out.h"

bool chat_file_save(const char *path, const struct ox_chat_message *msgs, size_t n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fputs("[", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  {\"role\": " : "\n  {\"role\": ", f);
        json_write_string(f, msgs[i].role, strlen(msgs[i].role));
        fputs(", \"content\": ", f);
        json_write_string(f, msgs[i].content, strlen(msgs[i].content));
        fputs("}", f);
    }
    fputs(n ? "\n]\n" : "]\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    return true;
}

void chat_file_free(struct ox_chat_message *msgs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free((char *)msgs[i].role);
        free((char *)msgs[i].content);
    }
    free(msgs);
}

struct ox_chat_message *chat_file_load(const char *path, size_t *n) {
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    *n = 0;
    if (!root) {
        fprintf(stderr, "cannot load %s: %s (line %d)\n", path, err.text, err.line);
        return NULL;
    }
    struct ox_chat_message *msgs = NULL;
    size_t count = json_is_array(root) ? json_array_size(root) : 0;
    if (!json_is_array(root)) {
        fprintf(stderr, "cannot load %s: not a JSON array of messages\n", path);
        goto done;
    }
    msgs = calloc(count ? count : 1, sizeof *msgs);
    for (size_t i = 0; msgs && i < count; i++) {
        json_t *m = json_array_get(root, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (!role || !content) {
            fprintf(stderr, "cannot load %s: message %zu needs string \"role\" and \"content\"\n",
                    path, i);
            chat_file_free(msgs, i);
            msgs = NULL;
            goto done;
        }
        msgs[i].role = strdup(role), msgs[i].content = strdup(content);
        if (!msgs[i].role || !msgs[i].content) {
            chat_file_free(msgs, i + 1);
            msgs = NULL;
        }
    }
    if (!msgs)
        fprintf(stderr, "cannot load %s: out of memory\n", path);
    else
        *n = count;
done:
    json_decref(root);
    return msgs;
}
