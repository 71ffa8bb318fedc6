/* slots_save.c: llama-server's POST /slots/{id}?action=save|restore|erase: a slot's state (its
 * cached tokens, ox_engine_slot_*) saved to or restored from a file in --slot-save-path, named by
 * the body's "filename" (a name only: no path), or erased. Answered in llama-server's shape. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "slots_save.h"
#include "state.h"

/* A file name inside the save folder: 1-255 bytes of letters, digits, '.', '-', '_', not
 * starting with '.' (no path, no hidden files). */
static bool safe_name(const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 255 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

struct reply slots_action(struct state *s, const char *path, const char *action, json_t *req) {
    const char *id_text = path + strlen("/slots/");
    char *end;
    long slot = strtol(id_text, &end, 10);
    if (!*id_text || *end || slot < 0 || slot >= state_options(s)->n_parallel)
        return reply_error(400, "invalid_request_error", "id_slot", "no such slot");
    char act = action && !strcmp(action, "save")      ? 's'
               : action && !strcmp(action, "restore") ? 'r'
               : action && !strcmp(action, "erase")   ? 'e'
                                                      : 0;
    if (!act)
        return reply_error(400, "invalid_request_error", "action",
                           "?action= must be save, restore or erase");
    const char *dir = state_options(s)->slot_save_path;
    const char *name = json_string_value(json_object_get(req, "filename"));
    char file[4352] = "";
    if (act != 'e') {
        if (!dir)
            return reply_error(501, "not_supported_error", NULL,
                               "this server keeps no slot files: serve with --slot-save-path DIR");
        if (!safe_name(name))
            return reply_error(400, "invalid_request_error", "filename",
                               "'filename' must be a file name (letters, digits, '.', '-', '_'; "
                               "no path)");
        snprintf(file, sizeof file, "%s/%s", dir, name);
    }
    size_t n = 0;
    double t0 = state_clock();
    enum ox_status st = state_slot(s, act, (int32_t)slot, file, &n);
    double ms = (state_clock() - t0) * 1e3;
    if (st == OX_ERR_UNSUPPORTED)
        return reply_error(501, "not_supported_error", NULL, "this server has no slots");
    if (st != OX_OK) {
        unsigned status = st == OX_ERR_ABORTED ? 409 : st == OX_ERR_IO && act == 'r' ? 404 : 400;
        return reply_error(status, status == 409 ? "conflict_error" : "invalid_request_error", NULL,
                           ox_last_error());
    }
    if (act == 'e')
        return reply_json(json_pack("{s:i, s:I}", "id_slot", (int)slot, "n_erased", (json_int_t)n));
    struct stat sb;
    json_int_t bytes = stat(file, &sb) == 0 ? (json_int_t)sb.st_size : 0;
    return reply_json(json_pack("{s:i, s:s, s:I, s:I, s:{s:f}}", "id_slot", (int)slot, "filename",
                                name, act == 's' ? "n_saved" : "n_restored", (json_int_t)n,
                                act == 's' ? "n_written" : "n_read", bytes, "timings",
                                act == 's' ? "save_ms" : "restore_ms", ms));
}
