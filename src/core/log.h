/* log.h: the library's log sink (silent unless the application sets a callback). */
#ifndef OX_CORE_LOG_H
#define OX_CORE_LOG_H

#include "core/status.h"

void ox_log(enum ox_log_level level, const char *fmt, ...) OX_PRINTF(2, 3);

#endif
