/*
 * pgo_int.h — internals shared by the modules of libpgoutbox (like libpq's
 * libpq-int.h).  Nothing here is part of the public API.
 */
#ifndef PGO_INT_H
#define PGO_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "pgoutbox.h"

/* --- log --- */
#include "base/log.h"

/* --- errors --- */
#include "base/error.h"

/* --- time --- */
#include "base/time.h"

/* --- arena --- */
#include "base/arena.h"

/* --- growable text buffer --- */
#include "base/buf.h"

/* --- config --- */

#include "conf/conf.h"

/* --- status --- */
#include "outbox/status.h"

/* --- consume --- */

struct pgo_consumer;
/* Gives `pgoutbox consume` its metrics and, with metrics.listen, the
 * endpoint (src/lib/metrics); PGO_ERR_INVALID when it cannot listen. */
int pgo_consumer_monitor(struct pgo_consumer *c, const pgo_conf_t *conf,
			 pgo_error_t *err);

/* --- retry --- */

/* Backoff before attempt `attempt` (1 = first retry): base * 2^(attempt-1)
 * capped at max, then "equal jitter": half fixed, half random.  rnd is a
 * uniform value in [0,1). */
int64_t pgo_backoff_ms(int attempt, int64_t base, int64_t max, double rnd);

/* --- sinks: the registry, the host, name templates (sinks/sink_int.h) --- */

#include "sinks/sink_int.h"

/* --- schema --- */

/* Reads the applied schema version (0 if none) on an idle connection. */
int pgo_schema_read_version(PGconn *conn, int *version, pgo_error_t *err);
/* The message for a version mismatch, or NULL when version matches. */
int pgo_schema_verdict(int db_version, pgo_error_t *err);

/* --- queue --- */

/* A name for a new work queue: pgo_ident_check's rules, and none of the
 * names of partitions pgoutbox creates itself (<queue>_archive and its
 * <queue>_archive_YYYYMMDD, inbox_YYYYMMDD, cron_history_YYYYMMDD): a
 * queue so named would take a partition's place (sql/011 says the same
 * in pgoutbox.create_queue). */
int pgo_queue_name_check(const char *name, pgo_error_t *err);
/* pgo_queue_create() for either kind: "work" (a work queue) or "outbox"
 * (an outbox of its own, relayed by `relay --queue NAME` and written by
 * pgoutbox.send_to(NAME, ...)). */
int pgo_queue_create_kind(PGconn *conn, const char *name, int shards,
			  const char *kind, pgo_error_t *err);

/* Channel a queue's producers notify and relays listen on. */
#define PGO_CHANNEL_PREFIX "pgoutbox_"

/* --- ABI --- */
#include "base/abi.h"

#endif /* PGO_INT_H */
