/*
 * pooler.c — is there a transaction pooler between us and PostgreSQL?
 *
 * A pooler in transaction mode (PgBouncer's pool_mode = transaction) hands
 * each transaction whichever server connection is idle, so session state
 * does not survive between transactions: advisory locks, LISTEN, named
 * prepared statements and SET stay behind on a server connection that
 * other clients (producers) get next.  The runners ask once at start,
 * with connections of their own, and refuse or adapt.
 *
 * The test: PostgreSQL's own pid (pg_backend_pid()) is the one libpq got
 * at connect (PQbackendPID) unless something stands between; poolers send
 * a key of their own.  Then, with two client connections A and B:
 *   A: SELECT pg_backend_pid()            -> p1, A's transaction ends
 *   B: BEGIN; SELECT pg_backend_pid()     -> p2, B's stays open
 *   A: SELECT pg_backend_pid()            -> p3
 * A session pooler keeps A's server connection A's: p2 != p1, p3 == p1.
 * A transaction pooler gave p1's connection back after A's transaction:
 * B most likely gets it (PgBouncer reuses the last released first), then
 * A needs another (p2 == p1, p3 != p1); either sign is proof.  Neither, a
 * few times over, means session pooling.  A pooler in statement mode
 * refuses B's BEGIN: no transactions at all, reported as such.
 *
 * libpq is driven without blocking (conn.c's pgo_pq_connect/exec): no
 * step waits longer than database.connect_timeout for a host that hangs,
 * and a fleet's relay runs the probe in a thread (relay/start.c).
 */
#include <stdlib.h>
#include <string.h>

#include <signal.h>

#include "db/conn.h"
#include "loop/loop.h"
#include "base/error.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"

#define PROBE_ROUNDS 3

/* One probe's connections and their limit: no step of it waits longer
 * than limit ms for PostgreSQL (a host or path that hangs), and a stop
 * request ends it. */
typedef struct probe {
	int64_t limit;
	volatile sig_atomic_t *stop;
} probe_t;

/* sql's result on c (the caller clears it), or NULL with err set. */
static PGresult *run(const probe_t *p, PGconn *c, const char *sql,
		     pgo_error_t *err)
{
	pgo_pq_wait_t how;
	char why[256];
	PGresult *r = pgo_pq_exec(c, sql, 0, NULL, pgo_now_ms() + p->limit,
				  p->stop, &how);

	if (!r)
		pgo_error_set(
			err, PGO_ERR_DB, 1,
			"probing for a connection pooler: %s",
			pgo_pq_wait_why(c, how, p->limit, why, sizeof(why)));
	return r;
}

/* pg_backend_pid() on c, or -1 with err set. */
static int server_pid(const probe_t *p, PGconn *c, pgo_error_t *err)
{
	PGresult *r = run(p, c, "SELECT pg_backend_pid()", err);
	int pid = -1;

	if (!r)
		return -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		pid = atoi(PQgetvalue(r, 0, 0));
	else
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(c, r),
			      "probing for a connection pooler: %s",
			      pgo_pq_msg(c, r));
	PQclear(r);
	return pid;
}

static PGconn *open_conn(const probe_t *p, const char *const *keys,
			 const char *const *vals, pgo_error_t *err)
{
	pgo_pq_wait_t how;
	char why[256];
	PGconn *c = pgo_pq_connect(keys, vals, p->limit, p->stop, &how);

	if (!c || how != PGO_PQ_READY) {
		pgo_error_set(err, PGO_ERR_CONNECT, 1, "%s",
			      !c ? "out of memory"
			      : how == PGO_PQ_LOST
				      ? pgo_pq_msg(c, NULL)
				      : pgo_pq_wait_why(c, how, p->limit, why,
							sizeof(why)));
		PQfinish(c);
		return NULL;
	}
	return c;
}

int pgo_pooler_probe_params(const char *const *keys, const char *const *vals,
			    int64_t limit_ms, volatile sig_atomic_t *stop,
			    pgo_pooler_t *kind, pgo_error_t *err)
{
	probe_t p = {.limit = limit_ms > 0 ? limit_ms : PGO_SECONDS(10),
		     .stop = stop};
	PGconn *a = NULL, *b = NULL;
	int rc = PGO_OK;

	*kind = PGO_POOLER_NONE;
	if (!(a = open_conn(&p, keys, vals, err)))
		return PGO_ERR_CONNECT;
	{
		int p1 = server_pid(&p, a, err);

		if (p1 < 0) {
			rc = PGO_ERR_DB;
			goto out;
		}
		if (p1 == PQbackendPID(a))
			goto out; /* PostgreSQL itself */
	}
	*kind = PGO_POOLER_SESSION;
	if (!(b = open_conn(&p, keys, vals, err))) {
		rc = PGO_ERR_CONNECT;
		goto out;
	}
	for (int i = 0; i < PROBE_ROUNDS; i++) {
		int p1, p2, p3;
		PGresult *r;

		if ((p1 = server_pid(&p, a, err)) < 0) {
			rc = PGO_ERR_DB;
			goto out;
		}
		if (!(r = run(&p, b, "BEGIN", err))) {
			rc = PGO_ERR_DB;
			goto out;
		}
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			PQclear(r);
			*kind = PGO_POOLER_STATEMENT;
			goto out;
		}
		PQclear(r);
		p2 = server_pid(&p, b, err);
		p3 = p2 < 0 ? -1 : server_pid(&p, a, err);
		if (p2 >= 0)
			PQclear(run(&p, b, "ROLLBACK", err));
		if (p2 < 0 || p3 < 0) {
			rc = PGO_ERR_DB;
			goto out;
		}
		if (p2 == p1 || p3 != p1) {
			*kind = PGO_POOLER_TRANSACTION;
			break;
		}
	}
out:
	PQfinish(a);
	PQfinish(b);
	if (rc == PGO_OK)
		pgo_error_clear(err);
	return rc;
}

int pgo_pooler_probe(const pgo_conf_t *conf, const char *app_name,
		     pgo_pooler_t *kind, pgo_error_t *err)
{
	char timeout[24];
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];

	pgo_conn_params(conf, app_name, keys, vals, timeout);
	return pgo_pooler_probe_params(keys, vals,
				       pgo_conf_values(conf)->connect_timeout,
				       NULL, kind, err);
}

int pgo_pooler_wait(const pgo_conf_t *conf, const char *app_name,
		    const char *subject, struct pgo_loop *loop,
		    volatile sig_atomic_t *stop, pgo_pooler_t *kind)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	int64_t backoff = 100;
	pgo_error_t err;

	while (!*stop) {
		if (pgo_pooler_probe(conf, app_name, kind, &err) == PGO_OK)
			return PGO_OK;
		/* No retry fixes it: the session's own setup refuses it with
		 * what to do (conn.c). */
		if (pgo_conn_start_refusal(conf, err.msg, true, NULL) !=
		    PGO_OK) {
			*kind = PGO_POOLER_NONE;
			return PGO_OK;
		}
		/* As conn.c says it (pgo_outage_t), and the sessions' own
		 * failures after the probe count in the same outage. */
		pgo_outage_failed(pgo_outage_of(subject), subject, false,
				  err.msg);
		if (pgo_loop_run_once(loop, pgo_now_ms() + backoff) < 0)
			break;
		backoff = backoff * 2 > v->reconnect_max ? v->reconnect_max
							 : backoff * 2;
	}
	return PGO_ERR_AGAIN;
}

const char *pgo_pooler_name(pgo_pooler_t kind)
{
	switch (kind) {
	case PGO_POOLER_TRANSACTION:
		return "a transaction pooler (PgBouncer pool_mode = "
		       "transaction?)";
	case PGO_POOLER_STATEMENT:
		return "a statement pooler (PgBouncer pool_mode = "
		       "statement?), which allows no transactions";
	case PGO_POOLER_SESSION: return "a session pooler";
	default: return "PostgreSQL itself";
	}
}
