/*
 * status.c — the operator's view of a queue: what is pending (per topic,
 * with the age of the oldest event and how many are waiting for a retry),
 * the dead letters, and which relays are connected right now.
 */
#include <stdlib.h>
#include <string.h>

#include "pgo_int.h"

/* Runs a query with one text parameter; NULL (and err filled) on error. */
static PGresult *query(PGconn *conn, const char *sql, const char *param,
		       pgo_error_t *err)
{
	PGresult *res = PQexecParams(conn, sql, param ? 1 : 0, NULL,
				     param ? &param : NULL, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
			      "status: %s", pgo_pq_msg(conn, res));
		PQclear(res);
		return NULL;
	}
	return res;
}

/* Ordered modes: who owns which shards, halted shards, and the shards
 * that lag most. */
static int print_shards(PGconn *conn, const char *queue, const char *from,
			FILE *out, pgo_error_t *err)
{
	char sql[1024];
	PGresult *res;

	/* Members and their live leases (pg_locks is the truth). */
	res = query(
		conn,
		"SELECT r.member, r.mode, r.backend_pid, "
		"date_trunc('second', now() - r.heartbeat_at), "
		"coalesce((SELECT string_agg(x::text, ',' ORDER BY x) FROM "
		"(SELECT l.objid::bigint::bit(32)::integer AS x FROM pg_locks "
		"l "
		"WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND "
		"l.granted AND l.classid = pgoutbox.lease_ns($1)::oid AND "
		"l.pid = r.backend_pid) s), '') "
		"FROM pgoutbox.relays r WHERE r.queue = $1 ORDER BY r.member",
		queue, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) > 0)
		fprintf(out, "  lease holders (ordered/strict relays): %d\n",
			PQntuples(res));
	for (int i = 0; i < PQntuples(res); i++) {
		const char *shards = PQgetvalue(res, i, 4);
		int n = *shards ? 1 : 0;

		for (const char *p = shards; *p; p++)
			n += *p == ',';
		const char *tag = strcmp(shards, "-1") == 0 ? "LEADER (strict)"
				  : n == 0 ? "no shards (standby)"
					   : NULL;

		fprintf(out, "    %-28s %-8s pid %-8s heartbeat %s ago%s%s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
			tag ? ", " : "", tag ? tag : "");
		if (n > 0 && strcmp(shards, "-1") != 0)
			fprintf(out, "      %d shard%s: %s\n", n,
				n == 1 ? "" : "s", shards);
	}
	PQclear(res);

	snprintf(sql, sizeof(sql),
		 "SELECT shard, count(*), "
		 "to_char(extract(epoch FROM now() - min(created_at)), "
		 "'FM9999999990.000'), "
		 "count(*) FILTER (WHERE run_at = 'infinity'), "
		 "coalesce(max(last_error) FILTER (WHERE run_at = "
		 "'infinity'), '') "
		 "FROM %s GROUP BY shard "
		 "ORDER BY count(*) FILTER (WHERE run_at = 'infinity') DESC, "
		 "min(created_at) LIMIT 8",
		 from);
	res = query(conn, sql, NULL, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) > 0)
		fprintf(out, "  %-10s %10s %12s\n", "shard", "pending",
			"lag (s)");
	for (int i = 0; i < PQntuples(res); i++) {
		fprintf(out, "  %-10s %10s %12s", PQgetvalue(res, i, 0),
			PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
		if (strcmp(PQgetvalue(res, i, 3), "0") != 0)
			fprintf(out, "   HALTED by a poison event: %.100s",
				PQgetvalue(res, i, 4));
		fputc('\n', out);
	}
	PQclear(res);
	return PGO_OK;
}

/* Retention mode, the archive's extent, and what holds back vacuum. */
static int print_retention(PGconn *conn, const char *queue, FILE *out,
			   pgo_error_t *err)
{
	PGresult *res;

	res = query(conn,
		    "SELECT retention, retention_days, (SELECT count(*) FROM "
		    "pg_inherits WHERE inhparent = to_regclass(format("
		    "'pgoutbox.%I', name || '_archive'))) FROM pgoutbox.queues "
		    "WHERE name = $1",
		    queue, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 1) {
		if (strcmp(PQgetvalue(res, 0, 0), "archive") == 0)
			fprintf(out,
				"  retention: archive, %s days, in %s "
				"day partitions of pgoutbox.%s_archive\n",
				PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
				queue);
		else
			fprintf(out, "  retention: delete on ack\n");
	}
	PQclear(res);
	res = query(conn, "SELECT kind, subject, detail FROM pgoutbox.health()",
		    NULL, err);
	if (!res)
		return PGO_ERR_DB;
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "  WARNING %s %s: %s\n", PQgetvalue(res, i, 0),
			PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	PQclear(res);
	return PGO_OK;
}

int pgo_status_print(PGconn *conn, const char *queue, FILE *out,
		     pgo_error_t *err)
{
	char sql[640], from[96];
	PGresult *res;
	int rc;

	if (!queue)
		queue = "outbox";
	rc = pgo_ident_check(queue, err);
	if (rc != PGO_OK)
		return rc;
	rc = pgo_schema_check(conn, err);
	if (rc != PGO_OK)
		return rc;
	/* An adopted table's pending rows come through the map
	 * (sql/013_adopt.sql); a queue's are its table. */
	res = query(conn, "SELECT kind FROM pgoutbox.queues WHERE name = $1",
		    queue, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 1 &&
	    strcmp(PQgetvalue(res, 0, 0), "adopted") == 0)
		snprintf(from, sizeof(from), "pgoutbox.adopted_pending('%s')",
			 queue);
	else
		snprintf(from, sizeof(from), "pgoutbox.\"%s\"", queue);
	PQclear(res);

	snprintf(
		sql, sizeof(sql),
		"SELECT topic, count(*), "
		"coalesce(to_char(extract(epoch FROM now() - min(created_at)), "
		"'FM9999999990.000'), '0'), "
		"count(*) FILTER (WHERE run_at > now()), "
		"count(*) FILTER (WHERE attempts > 0) "
		"FROM %s GROUP BY topic ORDER BY 2 DESC, 1",
		from);
	res = query(conn, sql, NULL, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "queue %s\n", queue);
	if (PQntuples(res) == 0)
		fprintf(out, "  pending: none\n");
	else
		fprintf(out, "  %-32s %10s %12s %9s %9s\n", "topic", "pending",
			"oldest (s)", "delayed", "retried");
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "  %-32s %10s %12s %9s %9s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
			PQgetvalue(res, i, 4));
	PQclear(res);

	res = query(conn,
		    "SELECT count(*), coalesce(max(failed_at)::text, '-'), "
		    "coalesce((array_agg(last_error ORDER BY failed_at DESC))"
		    "[1], '-') FROM pgoutbox.dead_letters WHERE queue = $1",
		    queue, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "  dead letters: %s", PQgetvalue(res, 0, 0));
	if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
		fprintf(out, " (latest %s: %.120s)", PQgetvalue(res, 0, 1),
			PQgetvalue(res, 0, 2));
	fputc('\n', out);
	PQclear(res);

	rc = print_shards(conn, queue, from, out, err);
	if (rc != PGO_OK)
		return rc;
	rc = print_retention(conn, queue, out, err);
	if (rc != PGO_OK)
		return rc;

	res = query(conn,
		    "SELECT application_name, pid, coalesce(client_addr::text, "
		    "'local'), date_trunc('second', now() - backend_start), "
		    "state FROM pg_stat_activity WHERE datname = "
		    "current_database() AND application_name LIKE "
		    "'pgoutbox relay%' ORDER BY backend_start",
		    NULL, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "  relay connections: %d\n", PQntuples(res));
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "    %-32s pid %-8s %-16s up %-10s %s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
			PQgetvalue(res, i, 4));
	PQclear(res);
	pgo_error_clear(err);
	return PGO_OK;
}
