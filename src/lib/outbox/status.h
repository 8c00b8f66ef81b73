/*
 * status.h — `pgoutbox status` (status.c): what a queue holds and who
 * serves it, as text or as one JSON object.
 */
#ifndef PGO_OUTBOX_STATUS_H
#define PGO_OUTBOX_STATUS_H

#include <stdbool.h>
#include <stdio.h>

#include "pgoutbox.h"

/* pgo_status_print()'s report, as text or (json) as one JSON object with
 * the same facts and a newline. */
int pgo_status_write(PGconn *conn, const char *queue, bool json, FILE *out,
		     pgo_error_t *err);

#endif /* PGO_OUTBOX_STATUS_H */
