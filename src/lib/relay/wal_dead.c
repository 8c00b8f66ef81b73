/*
 * wal_dead.c — the dead letters of a queue captured through the WAL
 * (docs/wal.md): events the sink rejected for good, or that used
 * relay.max_attempts, written into pgoutbox.dead_letters as table
 * capture writes them (claim.c), after which they count as done.
 *
 * They are written without blocking the loop: one INSERT of every dead
 * event of the batch (one statement, so all or none) is sent on the
 * plain connection (wal_plain.c: made when first needed, connecting
 * driven by the loop too), and its result is read when the socket has
 * it.  Until then the batch is not settled and no other batch starts,
 * so the FIFO keeps its order; the loop goes on streaming, reporting
 * the position and, in a fleet, serving the other databases.  A
 * dead_letters table locked by a migration, or a server or a path that
 * hangs, holds up this queue alone.
 */
#include <stdio.h>
#include <string.h>

#include "relay/wal_int.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox/sink.h"
#include "relay/relay_int.h"

/* Rows in one statement: 10 parameters each, under libpq's 65,535. */
#define DEAD_ROWS_MAX 6000

#define DEAD_COLS                                                              \
	"INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, "     \
	"payload, headers, created_at, attempts, last_error) VALUES "
/* Row k's values, $1-based (k * 10 + 1 ...). */
#define DEAD_ROW                                                               \
	"%s($%zu::bigint, $%zu, $%zu, $%zu, $%zu, "                            \
	"pgoutbox.adopted_jsonb($%zu), "                                       \
	"coalesce(pgoutbox.adopted_jsonb($%zu), '{}'), $%zu::timestamptz, "    \
	"$%zu::int, $%zu)"
#define DEAD_CONFLICT                                                          \
	" ON CONFLICT (queue, id) DO UPDATE SET attempts = "                   \
	"EXCLUDED.attempts, last_error = EXCLUDED.last_error, "                \
	"failed_at = now()"

static void dead_failed(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	pgo_log(PGO_LOG_ERROR, r->subject,
		"cannot write %zu dead letter%s (kept, tried again): %s",
		w->dead_n, w->dead_n == 1 ? "" : "s", why);
}

/* The INSERT is done with (sent, or given up). */
static void dead_forget(struct relay_wal *w)
{
	pgo_buf_free(&w->dead_sql);
	w->dead_params = NULL;
}

/* Sends the INSERT once the plain connection is up: PGO_OK (sent),
 * PGO_ERR_AGAIN (connecting), PGO_ERR_DB (why filled). */
static int dead_send(pgo_relay_t *r, char *why, size_t size)
{
	struct relay_wal *w = r->wal;
	PGconn *pg;
	int rc = pgo_wal_plain(r, &pg, why, size);

	if (rc != PGO_OK)
		return rc;
	if (!pgo_wal_plain_sent(
		    r, pg,
		    PQsendQueryParams(pg, w->dead_sql.data, w->dead_nparams,
				      NULL, w->dead_params, NULL, NULL, 0),
		    why, size))
		return PGO_ERR_DB;
	w->dead_sent = true;
	return PGO_OK;
}

bool pgo_wal_dead_start(pgo_relay_t *r, size_t *idx, size_t n)
{
	struct relay_wal *w = r->wal;
	pgo_batch_t *b = &w->batch;
	const char *queue = pgo_conf_values(r->conf)->queue;
	const char **params;
	char *nums;
	pgo_buf_t sql;
	size_t rows = 0;

	/* The same id twice (a message written by hand with an id taken
	 * already): one row, the first, or the upsert would fail for good. */
	for (size_t j = 0; j < n && rows < DEAD_ROWS_MAX; j++) {
		bool seen = false;

		for (size_t k = 0; k < rows && !seen; k++)
			seen = b->events[idx[k]].id == b->events[idx[j]].id;
		if (!seen)
			idx[rows++] = idx[j];
	}
	w->dead_idx = idx;
	w->dead_n = rows;
	params = pgo_arena_alloc(w->arena, sizeof(*params) * rows * 10);
	nums = pgo_arena_alloc(w->arena, rows * 40);
	pgo_buf_init(&sql);
	pgo_buf_puts(&sql, DEAD_COLS);
	for (size_t j = 0; params && nums && j < rows; j++) {
		const pgo_event_t *e = &w->src[idx[j]]->ev;
		const char **p = params + j * 10;
		size_t k = j * 10;

		snprintf(nums + j * 40, 24, "%lld", (long long)e->id);
		snprintf(nums + j * 40 + 24, 16, "%d", e->attempts);
		p[0] = nums + j * 40;
		p[1] = queue;
		p[2] = e->topic;
		p[3] = e->key;
		p[4] = e->type ? e->type : "";
		p[5] = e->payload;
		p[6] = e->headers;
		p[7] = e->created_at;
		p[8] = nums + j * 40 + 24;
		p[9] = b->errors[idx[j]] ? b->errors[idx[j]] : "dead";
		pgo_buf_printf(&sql, DEAD_ROW, j ? ", " : "", k + 1, k + 2,
			       k + 3, k + 4, k + 5, k + 6, k + 7, k + 8, k + 9,
			       k + 10);
	}
	pgo_buf_puts(&sql, DEAD_CONFLICT);
	if (!params || !nums || sql.oom) {
		pgo_buf_free(&sql);
		dead_failed(r, "out of memory");
		return false;
	}
	/* Kept until sent: the values point into the batch's events, which
	 * stay while it is not settled (or until the stream is lost: the
	 * epoch says). */
	dead_forget(w);
	w->dead_sql = sql;
	w->dead_params = params;
	w->dead_nparams = (int)(rows * 10);
	w->dead_sent = false;
	w->dead_busy = true;
	w->dead_epoch = w->epoch;
	pgo_wal_dead_poll(r); /* sent now when the connection is up */
	return true;
}

void pgo_wal_dead_poll(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;
	PGresult *res;
	char why[256] = "no result";
	bool ok;
	int rc;

	if (!w->dead_busy)
		return;
	if (!w->dead_sent) {
		/* The stream was lost while connecting: the batch is gone,
		 * its values with it. */
		if (w->dead_epoch != w->epoch) {
			dead_forget(w);
			w->dead_busy = false;
			return;
		}
		rc = dead_send(r, why, sizeof(why));
		if (rc == PGO_ERR_AGAIN)
			return;
		dead_forget(w);
		if (rc == PGO_OK)
			return;
		w->dead_busy = false;
		dead_failed(r, why);
		pgo_wal_settled(r, false);
		return;
	}
	rc = pgo_wal_plain_result(r, &res, why, sizeof(why));
	if (rc == PGO_ERR_AGAIN)
		return;
	ok = rc == PGO_OK && PQresultStatus(res) == PGRES_COMMAND_OK;
	if (rc == PGO_OK && res && !ok)
		snprintf(why, sizeof(why), "%s", pgo_pq_msg(w->dead_pg, res));
	PQclear(res);
	w->dead_busy = false;
	/* The stream was lost meanwhile: the batch is gone (its events
	 * come again from the slot); the rows, if written, are upserted
	 * then. */
	if (w->dead_epoch != w->epoch)
		return;
	if (!ok)
		dead_failed(r, why);
	pgo_wal_settled(r, ok);
}
