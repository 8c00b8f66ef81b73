/*
 * controls.c — steering a work queue: pause and resume, and its limits
 * (group concurrency, running jobs, rate).  Each call is one statement
 * of the SQL API (pgoutbox.pause, resume, set_queue in sql/schema/
 * functions/), which checks the queue and wakes its workers at COMMIT;
 * the claims honour it (claim_ids.sql).
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "pgoutbox.h"

int pgo_queue_pause(PGconn *conn, const char *queue, int paused, int *changed,
		    pgo_error_t *err)
{
	const char *p[1] = {queue};
	PGresult *res;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	res = pgo_pq_run(conn, paused ? "queue pause" : "queue resume",
			 paused ? "SELECT pgoutbox.pause($1)"
				: "SELECT pgoutbox.resume($1)",
			 1, p, err);
	if (!res)
		return PGO_ERR_DB;
	if (changed)
		*changed = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return PGO_OK;
}

/* A limit as set_queue() takes it: NULL (keep) when negative. */
static const char *limit_text(char *buf, size_t size, double v, bool whole)
{
	if (v < 0)
		return NULL;
	if (whole)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.17g", v);
	return buf;
}

int pgo_queue_set(PGconn *conn, const char *queue, int group_concurrency,
		  int max_running, double rate_per_s, int burst,
		  pgo_error_t *err)
{
	char g[24], m[24], r[40], b[24];
	const char *p[5];
	PGresult *res;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	p[0] = queue;
	p[1] = limit_text(g, sizeof(g), group_concurrency, true);
	p[2] = limit_text(m, sizeof(m), max_running, true);
	p[3] = limit_text(r, sizeof(r), rate_per_s, false);
	p[4] = limit_text(b, sizeof(b), burst, true);
	res = pgo_pq_run(conn, "queue set",
			 "SELECT pgoutbox.set_queue($1, $2::integer, "
			 "$3::integer, $4::numeric, $5::integer)",
			 5, p, err);
	if (!res)
		return PGO_ERR_DB;
	PQclear(res);
	return PGO_OK;
}

int pgo_queue_set_fair(PGconn *conn, const char *queue, int fair,
		       pgo_error_t *err)
{
	const char *p[2] = {queue, fair ? "true" : "false"};
	PGresult *res;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	res = pgo_pq_run(conn, "queue set",
			 "SELECT pgoutbox.set_queue($1, fair => $2::boolean)",
			 2, p, err);
	if (!res)
		return PGO_ERR_DB;
	PQclear(res);
	return PGO_OK;
}

int pgo_queue_controls(PGconn *conn, const char *queue, FILE *out,
		       pgo_error_t *err)
{
	const char *p[1] = {queue};
	PGresult *res;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	res = pgo_pq_run(
		conn, "queue controls",
		"SELECT CASE WHEN paused THEN 'paused' ELSE 'not paused' END, "
		"coalesce(group_concurrency::text, '-'), "
		"coalesce(max_running::text, '-'), "
		"coalesce(rate_per_s::text, '-'), "
		"coalesce(burst::text, CASE WHEN rate_per_s IS NULL THEN '-' "
		"ELSE greatest(1, ceil(rate_per_s))::text END), "
		"CASE WHEN fair THEN ', fair' ELSE '' END "
		"FROM (SELECT $1::text AS queue) q "
		"LEFT JOIN pgoutbox.queue_controls c USING (queue)",
		1, p, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out,
		"queue %s: %s, group concurrency %s, max running %s, "
		"rate %s/s, burst %s%s\n",
		queue, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
		PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3),
		PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 5));
	PQclear(res);
	return PGO_OK;
}
