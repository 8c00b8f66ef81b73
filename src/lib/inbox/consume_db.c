/*
 * consume_db.c — the consumer's PostgreSQL session: one libpq connection
 * used one request at a time (the consumer handles one message at a time)
 * but never waiting without a deadline: the connect gives up after the
 * connect timeout, each request after the request timeout (db/conn.h's
 * pgo_pq_*), and a stop request ends either within 100 ms.  Connected
 * with backoff and the relay's TCP keepalives, its schema and its --sql
 * function checked, the inbox's partitions maintained.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/conn.h"
#include "inbox/consumer_int.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "pgoutbox.h"

void pgo_consume_pg_lost(pgo_consumer_t *c, const char *why)
{
	/* conn.c's rule (pgo_outage_t): a storm writes a few lines. */
	pgo_outage_failed(pgo_outage_of(c->subject), c->subject, true, why);
	PQfinish(c->pg);
	c->pg = NULL;
	c->pg_retry_at = pgo_now_ms() + c->pg_backoff;
	c->pg_backoff = pgo_consume_next_backoff(c->pg_backoff);
}

int64_t pgo_consume_deadline(const pgo_consumer_t *c)
{
	return c->request_timeout_ms ? pgo_now_ms() + c->request_timeout_ms : 0;
}

void pgo_consume_pg_failed(pgo_consumer_t *c, pgo_pq_wait_t how)
{
	char why[512];

	if (how == PGO_PQ_STOPPED) {
		/* Stopping: the transaction in flight rolls back with the
		 * session, its message comes again. */
		PQfinish(c->pg);
		c->pg = NULL;
		return;
	}
	pgo_consume_pg_lost(c,
			    pgo_pq_wait_why(c->pg, how, c->request_timeout_ms,
					    why, sizeof(why)));
}

/* Runs a command that returns no rows; false on failure (logged). */
bool pgo_consume_pg_cmd(pgo_consumer_t *c, const char *sql)
{
	pgo_pq_wait_t how;
	PGresult *res = pgo_pq_exec(c->pg, sql, 0, NULL,
				    pgo_consume_deadline(c), &c->stop, &how);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!res) {
		pgo_consume_pg_failed(c, how);
		return false;
	}
	if (!ok)
		pgo_log(PGO_LOG_WARN, c->subject, "%s: %s", sql,
			pgo_pq_msg(c->pg, res));
	PQclear(res);
	return ok;
}

/* The --sql function must exist with one jsonb argument, as the handler
 * calls it: a typo would otherwise fail every message max_attempts times
 * and skip it, order lost.  PGO_ERR_INVALID (errmsg set) when it does not,
 * PGO_ERR_AGAIN when the check itself failed (the connection is dropped),
 * PGO_OK otherwise. */
static int check_function(pgo_consumer_t *c)
{
	const char *params[2] = {c->sql_sig, c->sql_name};
	pgo_pq_wait_t how;
	PGresult *res;

	if (!c->sql_name)
		return PGO_OK;
	res = pgo_pq_exec(c->pg,
			  "SELECT to_regprocedure($1) IS NOT NULL, "
			  "(SELECT string_agg(p.oid::regprocedure::text, ', ' "
			  "ORDER BY 1) FROM pg_catalog.pg_proc p "
			  "WHERE p.proname = $2)",
			  2, params, pgo_consume_deadline(c), &c->stop, &how);
	if (!res) {
		pgo_consume_pg_failed(c, how);
		return PGO_ERR_AGAIN;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		pgo_consume_pg_lost(c, pgo_pq_msg(c->pg, res));
		PQclear(res);
		return PGO_ERR_AGAIN;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		snprintf(c->errmsg, sizeof(c->errmsg),
			 "--sql: no function %s in this database (the "
			 "handler takes the message's payload as its one "
			 "jsonb argument)%s%s: create it or fix the name",
			 c->sql_sig,
			 PQgetisnull(res, 0, 1) ? "" : "; there is only ",
			 PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
		PQclear(res);
		return PGO_ERR_INVALID;
	}
	PQclear(res);
	return PGO_OK;
}

/* Connects when needed.  Returns PGO_OK when connected, PGO_ERR_AGAIN to
 * wait for the backoff, or PGO_ERR_SCHEMA when the database lacks the
 * inbox (fatal). */
int pgo_consume_ensure_pg(pgo_consumer_t *c)
{
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	pgo_error_t err;
	pgo_pq_wait_t how;
	char sql[96], what[512], timeout[24];
	int rc;

	if (c->pg && PQstatus(c->pg) == CONNECTION_OK)
		return PGO_OK;
	if (c->pg)
		pgo_consume_pg_lost(c, pgo_pq_msg(c->pg, NULL));
	if (pgo_now_ms() < c->pg_retry_at)
		return PGO_ERR_AGAIN;
	/* The relay's defaults (keepalives...), which the URL overrides. */
	pgo_conn_params_url(c->db_url, c->pg_connect_timeout_ms,
			    "pgoutbox consume", keys, vals, timeout);
	c->pg = pgo_pq_connect(keys, vals, c->pg_connect_timeout_ms, &c->stop,
			       &how);
	if (how == PGO_PQ_STOPPED) {
		PQfinish(c->pg);
		c->pg = NULL;
		return PGO_ERR_AGAIN;
	}
	/* At start, what no retry fixes stops here (conn.c's rule). */
	if (how == PGO_PQ_LOST && c->pg && !c->pg_ever &&
	    pgo_conn_url_refusal(c->db_url, pgo_pq_msg(c->pg, NULL), true,
				 &err) != PGO_OK) {
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", err.msg);
		PQfinish(c->pg);
		c->pg = NULL;
		return PGO_ERR_INVALID;
	}
	if (how != PGO_PQ_READY) {
		char why[512];

		if (how == PGO_PQ_TIMEOUT)
			snprintf(why, sizeof(why),
				 "no answer to connecting within %" PRId64
				 " ms (server or network hung)",
				 c->pg_connect_timeout_ms);
		else
			pgo_pq_wait_why(c->pg, how, 0, why, sizeof(why));
		pgo_outage_failed(pgo_outage_of(c->subject), c->subject, false,
				  why);
		PQfinish(c->pg);
		c->pg = NULL;
		c->pg_retry_at = pgo_now_ms() + c->pg_backoff;
		c->pg_backoff = pgo_consume_next_backoff(c->pg_backoff);
		return PGO_ERR_AGAIN;
	}
	if (pgo_schema_check(c->pg, &err) != PGO_OK) {
		/* A schema that is missing or too old is fatal here; a failed
		 * read of it may go away (pgo_pq_retriable's rule). */
		if (err.code == PGO_ERR_DB && err.retriable) {
			pgo_consume_pg_lost(c, err.msg);
			return PGO_ERR_AGAIN;
		}
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", err.msg);
		return PGO_ERR_SCHEMA;
	}
	rc = check_function(c);
	if (rc != PGO_OK)
		return rc;
	snprintf(sql, sizeof(sql), "SET statement_timeout = %" PRId64,
		 c->statement_timeout_ms);
	if (!pgo_consume_pg_cmd(c, sql)) {
		pgo_consume_pg_lost(c, "setting up the session failed");
		return PGO_ERR_AGAIN;
	}
	c->pg_backoff = BACKOFF_MIN_MS;
	c->pg_ever = true;
	c->pending_mode = true; /* anything in flight may have failed */
	/* Which server: after a failover, the promoted one. */
	snprintf(what, sizeof(what), "connected to %s on %s:%s", PQdb(c->pg),
		 PQhost(c->pg), PQport(c->pg));
	pgo_outage_up(pgo_outage_of(c->subject), c->subject, what);
	return PGO_OK;
}

void pgo_consume_maybe_maintain(pgo_consumer_t *c)
{
	pgo_error_t err;
	int created, dropped;

	if (pgo_now_ms() < c->next_maintain)
		return;
	c->next_maintain = pgo_now_ms() + c->maintain_every_ms;
	if (pgo_inbox_maintain(c->pg, c->window, &created, &dropped, &err) !=
	    PGO_OK) {
		pgo_log(PGO_LOG_WARN, c->subject,
			"%s (retried in %" PRId64 " s)", err.msg,
			c->maintain_every_ms / 1000);
		return;
	}
	if (created || dropped)
		pgo_log(PGO_LOG_INFO, c->subject,
			"inbox partitions: %d created, %d dropped (window %s)",
			created, dropped, c->window);
}
