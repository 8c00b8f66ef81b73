/*
 * dead.c — dead letters: list, show, retry and discard, by queue and
 * ids or a filter (topic, type).  Retry and discard are one statement
 * each, so one transaction (pgoutbox.dead_retry and dead_discard in
 * sql/schema/functions/); `pgoutbox dead` and the older `queue dead` and
 * `queue retry` come here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"

/* ids as a PostgreSQL array literal in buf; NULL (every one) when there
 * are none. */
static const char *ids_array(pgo_buf_t *buf, const int64_t *ids, int n)
{
	if (!ids || n <= 0)
		return NULL;
	pgo_buf_puts(buf, "{");
	for (int i = 0; i < n; i++)
		pgo_buf_printf(buf, "%s%" PRId64, i ? "," : "", ids[i]);
	pgo_buf_puts(buf, "}");
	return buf->data;
}

int pgo_dead_list(PGconn *conn, const char *queue, const char *topic,
		  const char *type, int limit, FILE *out, pgo_error_t *err)
{
	char lim[16];
	const char *p[4] = {queue, topic, type, lim};
	PGresult *res;

	snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 50);
	res = pgo_pq_run(
		conn, "dead list",
		"SELECT id, attempts, to_char(failed_at AT TIME ZONE 'UTC', "
		"'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
		"left(payload::text, 60), coalesce(last_error, ''), queue "
		"FROM pgoutbox.dead_letters WHERE ($1::text IS NULL OR queue = "
		"$1) AND ($2::text IS NULL OR topic = $2) AND ($3::text IS "
		"NULL OR type = $3) "
		"ORDER BY failed_at DESC, id DESC LIMIT $4::integer",
		4, p, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "%-10s %-8s %-20s %s\n", "ID", "ATTEMPTS", "FAILED_AT",
		queue ? "PAYLOAD / LAST ERROR" : "QUEUE: PAYLOAD / LAST ERROR");
	for (int i = 0; i < PQntuples(res); i++) {
		fprintf(out, "%-10s %-8s %-20s %s%s%s\n", PQgetvalue(res, i, 0),
			PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
			queue ? "" : PQgetvalue(res, i, 5), queue ? "" : ": ",
			PQgetvalue(res, i, 3));
		fprintf(out, "%-40s error: ", "");
		/* Errors may hold a stderr tail: indent its lines. */
		for (const char *c = PQgetvalue(res, i, 4); *c; c++) {
			fputc(*c, out);
			if (*c == '\n' && c[1])
				fprintf(out, "%-40s        ", "");
		}
		fputc('\n', out);
	}
	if (PQntuples(res) == 0 && queue)
		fprintf(out, "(no dead letters in queue %s)\n", queue);
	else if (PQntuples(res) == 0)
		fprintf(out, "(no dead letters)\n");
	PQclear(res);
	return PGO_OK;
}

int pgo_dead_show(PGconn *conn, const char *queue, int64_t id, FILE *out,
		  pgo_error_t *err)
{
	static const char *const names[] = {
		"queue",     "id",	"topic",    "key",
		"type",	     "group",	"attempts", "created_at",
		"failed_at", "headers", "payload",  "last_error"};
	char ids[24];
	const char *p[2] = {queue, ids};
	PGresult *res;

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	res = pgo_pq_run(conn, "dead show",
			 "SELECT queue, id, topic, key, type, group_key, "
			 "attempts, created_at, failed_at, headers, payload, "
			 "last_error FROM pgoutbox.dead_letters "
			 "WHERE queue = $1 AND id = $2::bigint",
			 2, p, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "no dead letter %" PRId64 " in queue %s",
				     id, queue);
	}
	for (int c = 0; c < PQnfields(res); c++)
		fprintf(out, "%-11s %s\n", names[c],
			PQgetisnull(res, 0, c) ? "(none)"
					       : PQgetvalue(res, 0, c));
	PQclear(res);
	return PGO_OK;
}

/* dead_retry() or dead_discard(): the count of ids acted on. */
static int dead_act(PGconn *conn, const char *fn, const char *queue,
		    const int64_t *ids, int n_ids, const char *topic,
		    const char *type, int64_t *count, pgo_error_t *err)
{
	char sql[160];
	pgo_buf_t buf;
	const char *p[4];
	PGresult *res;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	pgo_buf_init(&buf);
	p[0] = queue;
	p[1] = ids_array(&buf, ids, n_ids);
	p[2] = topic;
	p[3] = type;
	if (buf.oom) {
		pgo_buf_free(&buf);
		return pgo_error_set(err, PGO_ERR_NOMEM, 0,
				     "dead letters: out of memory");
	}
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM pgoutbox.%s($1, $2::bigint[], $3, $4)",
		 fn);
	res = pgo_pq_run(conn, fn, sql, 4, p, err);
	pgo_buf_free(&buf);
	if (!res)
		return PGO_ERR_DB;
	if (count)
		*count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return PGO_OK;
}

int pgo_dead_retry(PGconn *conn, const char *queue, const int64_t *ids,
		   int n_ids, const char *topic, const char *type,
		   int64_t *count, pgo_error_t *err)
{
	return dead_act(conn, "dead_retry", queue, ids, n_ids, topic, type,
			count, err);
}

int pgo_dead_discard(PGconn *conn, const char *queue, const int64_t *ids,
		     int n_ids, const char *topic, const char *type,
		     int64_t *count, pgo_error_t *err)
{
	return dead_act(conn, "dead_discard", queue, ids, n_ids, topic, type,
			count, err);
}
