/*
 * log.h — the library's log: every line goes to the callback the program
 * set with pgo_log_set() (pgoutbox.h); the library itself never prints.
 * The level is checked before any formatting happens.
 */
#ifndef PGO_BASE_LOG_H
#define PGO_BASE_LOG_H

#include "pgoutbox.h"

/* The most verbose level pgo_log_set() asked for. */
extern pgo_log_level_t pgo_log_max;

/* Level checked before any formatting happens. */
#define pgo_log(level, subject, ...)                                           \
	do {                                                                   \
		if ((level) <= pgo_log_max)                                    \
			pgo_log_emit((level), (subject), __VA_ARGS__);         \
	} while (0)

void pgo_log_emit(pgo_log_level_t level, const char *subject, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

#endif /* PGO_BASE_LOG_H */
