/*
 * cron.h — what the CLI and the rest of the library use of cron beyond
 * the public API (pgoutbox.h's pgo_cron_*).
 */
#ifndef PGO_CRON_H
#define PGO_CRON_H

#include <stdbool.h>

#include "pgoutbox.h"

/* pgo_cron_add(), saying whether it replaced a schedule of that name
 * (*replaced; replaced may be NULL).  A replaced schedule keeps the
 * fields the caller left NULL or 0 (tz NULL or "", payload, overlap,
 * missed, catch_up_max); a new one takes their defaults.  The expression
 * and the queue are always given; the ticks of either count from now. */
int pgo_cron_put(PGconn *conn, const pgo_cron_schedule_t *s, bool *replaced,
		 pgo_error_t *err);

#endif /* PGO_CRON_H */
