/*
 * queue.h — work queues inside the library: the rules for a new queue's
 * name, creating either kind of queue, the channel their producers
 * notify, and the retry backoff that workers (and the relay's settle
 * rules) schedule retries with.
 */
#ifndef PGO_QUEUE_H
#define PGO_QUEUE_H

#include <stdint.h>

#include "pgoutbox.h"

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

/* --- retry: base/backoff.h --- */
#include "base/backoff.h"

#endif /* PGO_QUEUE_H */
