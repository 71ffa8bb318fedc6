/* status.c: status names and the thread-local last-error message. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

static const char *const status_names[] = {
#define X(name, desc) "OX_" #name,
    OX_STATUS_LIST(X)
#undef X
};
_Static_assert(sizeof status_names / sizeof status_names[0] == OX_STATUS_COUNT,
               "status name table out of sync with OX_STATUS_LIST");

const char *ox_status_name(enum ox_status status) {
    if ((unsigned)status >= OX_STATUS_COUNT)
        return "OX_UNKNOWN";
    return status_names[status];
}

const char *ox_last_error(void) {
    return last_error;
}

enum ox_status ox_fail(enum ox_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}
