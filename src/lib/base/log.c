/*
 * log.c — the log callback: the library never prints, it hands each line
 * to the function the program set with pgo_log_set().
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "pgoutbox.h"

static pgo_log_fn log_fn;
static void *log_ctx;
pgo_log_level_t pgo_log_max = PGO_LOG_INFO;

void pgo_log_set(pgo_log_fn fn, void *ctx, pgo_log_level_t max_level)
{
	log_fn = fn;
	log_ctx = ctx;
	pgo_log_max = fn ? max_level : PGO_LOG_ERROR;
}

int pgo_log_level_parse(const char *s)
{
	static const char *names[] = {"error", "warn", "info", "debug"};

	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

void pgo_log_emit(pgo_log_level_t level, const char *subject, const char *fmt,
		  ...)
{
	char msg[1024];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(log_ctx, level, subject, msg);
}
