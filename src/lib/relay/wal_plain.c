/*
 * wal_plain.c — the plain SQL connection of a queue captured through the
 * WAL: its dead letters (wal_dead.c) and an adopted table's map
 * (wal_adopted.c) run on it.  It is made when first needed and, like
 * the stream, never waits for a server: PQconnectPoll() is driven by the
 * loop when the socket is ready (pgo_wal_plain_step()), given up after
 * database.connect_timeout, and statements are sent and their results
 * read as the socket allows.  A server or a path that hangs holds up
 * this queue alone; in a fleet, the other databases go on.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "relay/wal_int.h"
#include "base/error.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "relay/relay_int.h"

void pgo_wal_plain_close(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	PQfinish(w->dead_pg);
	w->dead_pg = NULL;
	w->plain_state = WAL_PLAIN_DOWN;
	w->map_prepared = false;
	PQclear(w->plain_res);
	w->plain_res = NULL;
	if (w->plain_io)
		pgo_loop_io_set(w->plain_io, -1, 0);
}

/* Connecting failed: why is kept for the one who asked. */
static void plain_failed(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	snprintf(w->plain_why, sizeof(w->plain_why), "%s", why);
	pgo_wal_plain_close(r);
	w->plain_failed = true;
}

/* Watches the socket as PQconnectPoll() asked. */
static void plain_watch(pgo_relay_t *r, PostgresPollingStatusType st)
{
	struct relay_wal *w = r->wal;

	pgo_loop_io_set(w->plain_io, PQsocket(w->dead_pg),
			st == PGRES_POLLING_READING ? POLLIN : POLLOUT);
}

int pgo_wal_plain(pgo_relay_t *r, PGconn **pg, char *why, size_t size)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24];

	*pg = NULL;
	if (w->plain_failed) {
		w->plain_failed = false;
		snprintf(why, size, "%s", w->plain_why);
		return PGO_ERR_DB;
	}
	if (w->plain_state == WAL_PLAIN_CONNECTING)
		return PGO_ERR_AGAIN;
	if (w->plain_state == WAL_PLAIN_READY &&
	    PQstatus(w->dead_pg) == CONNECTION_OK) {
		*pg = w->dead_pg;
		return PGO_OK;
	}
	pgo_wal_plain_close(r);
	pgo_conn_params_resolved(r->conf, r->app_name, r->resolved, keys, vals,
				 timeout);
	w->dead_pg = PQconnectStartParams(keys, vals, 1);
	if (!w->dead_pg || PQstatus(w->dead_pg) == CONNECTION_BAD) {
		snprintf(why, size, "%s",
			 w->dead_pg ? pgo_pq_msg(w->dead_pg, NULL)
				    : "out of memory");
		pgo_wal_plain_close(r);
		return PGO_ERR_DB;
	}
	w->plain_state = WAL_PLAIN_CONNECTING;
	w->plain_limit = v->connect_timeout > 0 ? v->connect_timeout : 10000;
	w->plain_until = pgo_now_ms() + w->plain_limit;
	w->plain_revents = 0;
	plain_watch(r, PGRES_POLLING_WRITING); /* PQconnectStart's rule */
	return PGO_ERR_AGAIN;
}

void pgo_wal_plain_step(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	PostgresPollingStatusType st;

	if (w->plain_state != WAL_PLAIN_CONNECTING)
		return;
	if (!w->plain_revents) {
		char why[96];

		if (now < w->plain_until)
			return;
		snprintf(why, sizeof(why),
			 "no answer to connecting within %lld ms (server or "
			 "network hung)",
			 (long long)w->plain_limit);
		plain_failed(r, why);
		return;
	}
	w->plain_revents = 0;
	st = PQconnectPoll(w->dead_pg);
	if (st == PGRES_POLLING_FAILED) {
		plain_failed(r, pgo_pq_msg(w->dead_pg, NULL));
	} else if (st == PGRES_POLLING_OK) {
		w->plain_state = WAL_PLAIN_READY;
		PQsetnonblocking(w->dead_pg, 1);
		pgo_loop_io_set(w->plain_io, -1, 0);
	} else {
		plain_watch(r, st); /* libpq may change the socket */
	}
}

int64_t pgo_wal_plain_deadline(const pgo_relay_t *r, int64_t deadline)
{
	const struct relay_wal *w = r->wal;

	return w->plain_state == WAL_PLAIN_CONNECTING
		       ? pgo_deadline_min(deadline, w->plain_until)
		       : deadline;
}

bool pgo_wal_plain_sent(pgo_relay_t *r, PGconn *pg, int sent, char *why,
			size_t size)
{
	struct relay_wal *w = r->wal;

	if (!sent) {
		snprintf(why, size, "%s", pgo_pq_msg(pg, NULL));
		pgo_wal_plain_close(r);
		return false;
	}
	pgo_loop_io_set(w->plain_io, PQsocket(pg),
			POLLIN | (PQflush(pg) > 0 ? POLLOUT : 0));
	return true;
}

int pgo_wal_plain_result(pgo_relay_t *r, PGresult **res, char *why, size_t size)
{
	struct relay_wal *w = r->wal;
	PGconn *pg = w->dead_pg;
	PGresult *one;

	*res = NULL;
	w->plain_revents = 0;
	if (PQflush(pg) < 0 || !PQconsumeInput(pg)) {
		snprintf(why, size, "%s", pgo_pq_msg(pg, NULL));
		pgo_wal_plain_close(r);
		return PGO_ERR_DB;
	}
	/* Its results, then NULL, read while nothing blocks: the first
	 * kept while the end is not in, or the first error after it (a
	 * statement of several). */
	while (!PQisBusy(pg) && (one = PQgetResult(pg))) {
		ExecStatusType st = PQresultStatus(one);

		if (!w->plain_res ||
		    (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
		     (PQresultStatus(w->plain_res) == PGRES_COMMAND_OK ||
		      PQresultStatus(w->plain_res) == PGRES_TUPLES_OK))) {
			PQclear(w->plain_res);
			w->plain_res = one;
		} else {
			PQclear(one);
		}
	}
	if (PQisBusy(pg)) {
		pgo_loop_io_set(w->plain_io, PQsocket(pg),
				POLLIN | (PQflush(pg) > 0 ? POLLOUT : 0));
		return PGO_ERR_AGAIN;
	}
	*res = w->plain_res;
	w->plain_res = NULL;
	pgo_loop_io_set(w->plain_io, -1, 0);
	return PGO_OK;
}
