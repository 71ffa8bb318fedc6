/* log.c: forwards library log messages to the application's callback, if any. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static ox_log_fn log_fn;
static void *log_user;

void ox_log_set(ox_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void ox_log(enum ox_log_level level, const char *fmt, ...) {
    if (!log_fn)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}
