/*
 * status.h — `pgoutbox status` (status.c): what a queue holds and who
 * serves it, as text or as one JSON object.
 */
#ifndef PGO_OUTBOX_STATUS_H
#define PGO_OUTBOX_STATUS_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "pgoutbox.h"

/* pgo_status_print()'s report, as text or (json) as one JSON object with
 * the same facts and a newline. */
int pgo_status_write(PGconn *conn, const char *queue, bool json, FILE *out,
		     pgo_error_t *err);

/* --- a fleet's databases (docs/fleet.md) --- */

typedef struct pgo_status_fleet pgo_status_fleet_t;

/* The databases of conf's fleet (pgo_conf_database_count() > 0), named
 * as their relays name them; nothing connected yet.  NULL with err
 * filled: PGO_ERR_CONFIG (a section without url, sections and --db
 * both), PGO_ERR_INVALID (no fleet), PGO_ERR_NOMEM. */
pgo_status_fleet_t *pgo_status_fleet_new(const pgo_conf_t *conf,
					 pgo_error_t *err);
/* Closes the connections and frees s; NULL is a no-op. */
void pgo_status_fleet_destroy(pgo_status_fleet_t *s);
/* One report of every database of s, in order: connects those not
 * connected (each host given up after database.connect_timeout, or at
 * *stop; stop may be NULL), then writes as text each database's
 * pgo_status_write() report headed "database NAME, queue Q", or its
 * "ERROR: ..." row, then a "fleet: ..." line; or (json) one object and
 * a newline: {"queue", "pending_total" (of the databases that
 * answered), "databases_failed", "databases": [each database's
 * pgo_status_write() object with "database" and "error": null first, or
 * {"database", "error", "queue"}]}.  A connection lost is made again
 * at the next call.  PGO_OK when every database answered; else err says
 * how many failed and which, with the code of a failure no retry fixes
 * (PGO_ERR_CONFIG, _SCHEMA, _INVALID) if there is one, else the first
 * failure's (PGO_ERR_DB for a database that is down). */
int pgo_status_fleet_write(pgo_status_fleet_t *s, const char *queue, bool json,
			   FILE *out, volatile sig_atomic_t *stop,
			   pgo_error_t *err);

#endif /* PGO_OUTBOX_STATUS_H */
