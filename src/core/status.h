/* status.h: setting the thread-local last error, and the idioms for failing with a message. */
#ifndef OX_CORE_STATUS_H
#define OX_CORE_STATUS_H

#include "oxidize.h"

#if defined(__GNUC__) || defined(__clang__)
#define OX_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define OX_PRINTF(fmt, args)
#endif

/* Record a formatted message as this thread's last error and return status, so a failing
 * path reads: return ox_fail(OX_ERR_FORMAT, "gguf: key '%s' ...", key); */
enum ox_status ox_fail(enum ox_status status, const char *fmt, ...) OX_PRINTF(2, 3);

/* Propagate a failure from a call that already set the message. */
#define OX_TRY(expr)                                  \
    do {                                              \
        enum ox_status ox_try_status_ = (expr);       \
        if (ox_try_status_ != OX_OK)                  \
            return ox_try_status_;                    \
    } while (0)

#endif
