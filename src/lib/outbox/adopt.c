/*
 * adopt.c — `pgoutbox adopt` and `pgoutbox unadopt`: an application's own
 * outbox table becomes a queue the relay drains (docs/adopt.md).
 *
 * Both are one call of a function of sql/013_adopt.sql, so everything is
 * checked and added (or removed) in one statement: an error leaves the
 * table and the pgoutbox schema as they were.  The relay side is
 * src/lib/relay/adopted.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "pgoutbox.h"

/* Runs sql with params, hands each returned line to line(). */
static int run_lines(PGconn *conn, const char *sql, int n,
		     const char *const *params, pgo_adopt_line_fn line,
		     void *ctx, pgo_error_t *err)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *msg = pgo_pq_msg(conn, res);

		/* The functions' messages start with what they are. */
		if (strncmp(msg, "pgoutbox adopt: ", 16) == 0)
			msg += 16;
		else if (strncmp(msg, "pgoutbox unadopt: ", 18) == 0)
			msg += 18;
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
			      "%s", msg);
		PQclear(res);
		return PGO_ERR_DB;
	}
	for (int i = 0; i < PQntuples(res); i++)
		line(ctx, PQgetvalue(res, i, 0));
	PQclear(res);
	pgo_error_clear(err);
	return PGO_OK;
}

int pgo_adopt_capture(PGconn *conn, const pgo_adopt_map_t *m,
		      const char *capture, pgo_adopt_line_fn line, void *ctx,
		      pgo_error_t *err)
{
	char shards[16];
	const char *p[14] = {m->table,	 m->name,
			     m->id,	 m->topic,
			     m->key,	 m->type,
			     m->payload, m->headers,
			     m->created, m->pending,
			     m->done,	 m->channel,
			     shards,	 capture ? capture : "table"};

	if (pgo_ident_check(m->name, err) != PGO_OK)
		return err->code;
	snprintf(shards, sizeof(shards), "%d", m->shards);
	return run_lines(conn,
			 "SELECT * FROM pgoutbox.adopt($1, $2, $3, $4, $5, "
			 "$6, $7, $8, $9, $10, $11, $12, $13::integer, $14)",
			 14, p, line, ctx, err);
}

int pgo_adopt(PGconn *conn, const pgo_adopt_map_t *m, pgo_adopt_line_fn line,
	      void *ctx, pgo_error_t *err)
{
	return pgo_adopt_capture(conn, m, "table", line, ctx, err);
}

int pgo_unadopt(PGconn *conn, const char *name, pgo_adopt_line_fn line,
		void *ctx, pgo_error_t *err)
{
	return run_lines(conn, "SELECT * FROM pgoutbox.unadopt($1)", 1, &name,
			 line, ctx, err);
}
