/*
 * status.c — the operator's view of a queue: what is pending (per topic,
 * with the age of the oldest event and how many are waiting for a retry),
 * the dead letters, the relays of the queue with their modes (a warning
 * when they mix modes), shard leases, the retention mode, what holds
 * back vacuum, and which relays are connected right now (a warning when
 * events wait and none is).
 *
 * A relay is a process; each of its connections is a member of the
 * queue (pgoutbox.relays, "NAME/0", "NAME/1"...) with a PostgreSQL
 * backend.  Relays are counted and named by process (relay.name, by
 * default HOST-PID: where it runs and its process id); a backend's pid
 * is only ever called a backend pid, so that nobody kills a backend
 * taking it for the relay.
 *
 * The facts are read once (collect()) and written either as text for a
 * person (`pgoutbox status`) or as one JSON object for scripts (`status
 * --json`), so the two cannot tell different stories.
 *
 * A fleet's status (docs/fleet.md) is every database's report headed by
 * its name, a database that fails (down, not migrated) an error row, the
 * others still reported.
 */
#include <stdlib.h>
#include <string.h>

#include "outbox/status.h"
#include "base/buf.h"
#include "base/error.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"

/* Every result the report needs, in the order it is written. */
typedef struct facts {
	PGresult *topics;    /* topic, pending, oldest s, delayed, retried */
	PGresult *dead;	     /* count, latest failed_at, its error */
	PGresult *members;   /* member, mode, backend pid, heartbeat age,
			      * shards, relay */
	PGresult *procs;     /* relay, modes, connections, clients,
			      * heartbeat age, connected now */
	PGresult *shards;    /* shard, pending, lag s, halted, its error */
	PGresult *retention; /* retention, days, partitions, paused (0 or 1
			      * row) */
	PGresult *health;    /* kind, subject, detail */
	PGresult *relays;    /* application_name, backend pid, client, up,
			      * state */
	PGresult *adopted;   /* an adopted table's done, table (else NULL) */
	PGresult *slot;	     /* a WAL queue's slot (docs/wal.md): exists,
			      * active, wal_status, lag bytes, lag s; no row
			      * for a table queue */
} facts_t;

static void facts_clear(facts_t *f)
{
	PQclear(f->topics);
	PQclear(f->dead);
	PQclear(f->members);
	PQclear(f->procs);
	PQclear(f->adopted);
	PQclear(f->shards);
	PQclear(f->retention);
	PQclear(f->health);
	PQclear(f->relays);
	PQclear(f->slot);
	memset(f, 0, sizeof(*f));
}

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

/* Where a queue's pending rows are read from, into from: an adopted
 * table's come through the map (sql/013_adopt.sql), and its retention is
 * its `done` (f->adopted); a queue's are its table. */
static int pending_from(PGconn *conn, const char *queue, facts_t *f, char *from,
			size_t size, pgo_error_t *err)
{
	PGresult *kind;

	kind = query(conn, "SELECT kind FROM pgoutbox.queues WHERE name = $1",
		     queue, err);
	if (!kind)
		return PGO_ERR_DB;
	if (PQntuples(kind) == 1 &&
	    strcmp(PQgetvalue(kind, 0, 0), "adopted") == 0) {
		snprintf(from, size, "pgoutbox.adopted_pending('%s')", queue);
		/* Its retention is its `done`: delete, or mark and keep. */
		f->adopted =
			query(conn,
			      "SELECT CASE WHEN pgoutbox.queue_capture(name) "
			      "= 'wal' THEN NULL ELSE done_sql END, tbl_sql "
			      "FROM pgoutbox.adopted_map($1)",
			      queue, err);
		if (!f->adopted) {
			PQclear(kind);
			return PGO_ERR_DB;
		}
	} else /* a queue table stores no shard (sql/017_lighter_rows.sql) */
		snprintf(from, size,
			 "(SELECT t.*, pgoutbox.shard_of(t.key, t.id, "
			 "(SELECT q.shards FROM pgoutbox.queues q WHERE q.name "
			 "= '%s')) AS shard FROM pgoutbox.\"%s\" t) t",
			 queue, queue);
	PQclear(kind);
	return PGO_OK;
}

/* The pending rows per topic, and the dead letters. */
static int collect_backlog(PGconn *conn, const char *queue, const char *from,
			   facts_t *f, pgo_error_t *err)
{
	char sql[1024];

	snprintf(
		sql, sizeof(sql),
		"SELECT topic, count(*), "
		"coalesce(to_char(extract(epoch FROM now() - min(created_at)), "
		"'FM9999999990.000'), '0'), "
		"count(*) FILTER (WHERE run_at > now()), "
		"count(*) FILTER (WHERE attempts > 0) "
		"FROM %s GROUP BY topic ORDER BY 2 DESC, 1",
		from);
	if (!(f->topics = query(conn, sql, NULL, err)))
		return PGO_ERR_DB;
	f->dead = query(conn,
			"SELECT count(*), coalesce(max(failed_at)::text, '-'), "
			"coalesce((array_agg(last_error ORDER BY failed_at "
			"DESC))[1], '-') FROM pgoutbox.dead_letters WHERE "
			"queue = $1",
			queue, err);
	if (!f->dead)
		return PGO_ERR_DB;
	return PGO_OK;
}

/* The relays' members and processes. */
static int collect_members(PGconn *conn, const char *queue, facts_t *f,
			   pgo_error_t *err)
{
	/* Members and their live leases (pg_locks is the truth). */
	f->members = query(
		conn,
		"SELECT r.member, r.mode, r.backend_pid, "
		"date_trunc('second', now() - r.heartbeat_at), "
		"coalesce((SELECT string_agg(x::text, ',' ORDER BY x) FROM "
		"(SELECT l.objid::bigint::bit(32)::integer AS x FROM pg_locks "
		"l "
		"WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND "
		"l.granted AND l.classid = pgoutbox.lease_ns($1)::oid AND "
		"l.pid = r.backend_pid) s), ''), "
		"regexp_replace(r.member, '/[0-9]+$', '') "
		"FROM pgoutbox.relays r WHERE r.queue = $1 ORDER BY r.member",
		queue, err);
	if (!f->members)
		return PGO_ERR_DB;
	/* The same, per process: a member is NAME/connection.  Where from
	 * (a backend of another role hides its address: "?"), and whether
	 * it is connected: a backend of it is, or it beat within the
	 * default relay.lease_timeout (through a pooler, the backend it
	 * beat on may be gone while it runs). */
	f->procs = query(
		conn,
		"SELECT regexp_replace(r.member, '/[0-9]+$', '') AS relay, "
		"string_agg(DISTINCT r.mode, ', '), count(*), "
		"coalesce(string_agg(DISTINCT CASE "
		"WHEN a.pid IS NULL THEN NULL "
		"WHEN a.client_port IS NULL THEN '?' "
		"WHEN a.client_port = -1 THEN 'local' "
		"ELSE host(a.client_addr) END, ', '), '-'), "
		"date_trunc('second', now() - max(r.heartbeat_at)), "
		"bool_or(a.pid IS NOT NULL OR r.heartbeat_at > now() - "
		"interval '10 s')::text "
		"FROM pgoutbox.relays r LEFT JOIN pg_stat_activity a ON a.pid "
		"= r.backend_pid WHERE r.queue = $1 GROUP BY 1 ORDER BY 1",
		queue, err);
	if (!f->procs)
		return PGO_ERR_DB;
	return PGO_OK;
}

/* The shards that lag or halt most, and the retention. */
static int collect_shards(PGconn *conn, const char *queue, const char *from,
			  facts_t *f, pgo_error_t *err)
{
	char sql[1024];

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
	if (!(f->shards = query(conn, sql, NULL, err)))
		return PGO_ERR_DB;
	f->retention = query(
		conn,
		"SELECT retention, retention_days, (SELECT count(*) FROM "
		"pg_inherits WHERE inhparent = to_regclass(format("
		"'pgoutbox.%I', name || '_archive'))), EXISTS (SELECT FROM "
		"pgoutbox.queue_controls c WHERE c.queue = name AND c.paused) "
		"FROM pgoutbox.queues WHERE name = $1",
		queue, err);
	if (!f->retention)
		return PGO_ERR_DB;
	return PGO_OK;
}

/* The schema's health and the relays' connections. */
static int collect_health(PGconn *conn, facts_t *f, pgo_error_t *err)
{
	f->health = query(conn,
			  "SELECT kind, subject, detail FROM pgoutbox.health()",
			  NULL, err);
	if (!f->health)
		return PGO_ERR_DB;
	f->relays = query(conn,
			  "SELECT application_name, pid, "
			  "coalesce(client_addr::text, 'local'), "
			  "date_trunc('second', now() - backend_start), state "
			  "FROM pg_stat_activity WHERE datname = "
			  "current_database() AND application_name LIKE "
			  "'pgoutbox relay%' ORDER BY backend_start",
			  NULL, err);
	return f->relays ? PGO_OK : PGO_ERR_DB;
}

/* A WAL queue's slot (docs/wal.md); no row for a table queue. */
static int collect_slot(PGconn *conn, const char *queue, facts_t *f,
			pgo_error_t *err)
{
	/* The seconds: the streaming relay's flush lag as its walsender
	 * measures it from the relay's confirmations (NULL when caught
	 * up, or when none streams). */
	f->slot = query(
		conn,
		"SELECT s.slot_name IS NOT NULL, coalesce(s.active, false), "
		"coalesce(s.wal_status, 'missing'), "
		"coalesce(pg_current_wal_lsn() - s.confirmed_flush_lsn, 0), "
		"coalesce(extract(epoch FROM r.flush_lag), 0) "
		"FROM pgoutbox.queues q LEFT JOIN pg_replication_slots s ON "
		"s.slot_name = 'pgoutbox_' || q.name AND s.database = "
		"current_database() LEFT JOIN pg_stat_replication r ON r.pid = "
		"s.active_pid WHERE q.name = $1 AND q.capture = 'wal'",
		queue, err);
	return f->slot ? PGO_OK : PGO_ERR_DB;
}

static int collect(PGconn *conn, const char *queue, facts_t *f,
		   pgo_error_t *err)
{
	char from[320];
	int rc = pending_from(conn, queue, f, from, sizeof(from), err);

	if (rc == PGO_OK)
		rc = collect_backlog(conn, queue, from, f, err);
	if (rc == PGO_OK)
		rc = collect_members(conn, queue, f, err);
	if (rc == PGO_OK)
		rc = collect_shards(conn, queue, from, f, err);
	if (rc == PGO_OK)
		rc = collect_health(conn, f, err);
	if (rc == PGO_OK)
		rc = collect_slot(conn, queue, f, err);
	return rc;
}

static bool is_concurrent(const PGresult *members, int i)
{
	return strcmp(PQgetvalue(members, i, 1), "concurrent") == 0;
}

/* The modes of the queue's relays, "ordered" or "concurrent, ordered"
 * (sorted, each once); "" without relays.  How many there are. */
static int modes_of(const PGresult *members, char *out, size_t size)
{
	static const char *const all[] = {"concurrent", "ordered", "strict"};
	int n = 0;

	out[0] = '\0';
	for (size_t m = 0; m < sizeof(all) / sizeof(all[0]); m++)
		for (int i = 0; i < PQntuples(members); i++)
			if (strcmp(PQgetvalue(members, i, 1), all[m]) == 0) {
				snprintf(out + strlen(out), size - strlen(out),
					 "%s%s", n++ ? ", " : "", all[m]);
				break;
			}
	return n;
}

#define MIXED_WARNING                                                          \
	"relays of different modes on one queue break its per-key order "      \
	"(docs/ordering.md, \"Mixing modes\"): stop the relays of one mode "   \
	"and run every relay of the queue in the other"

/* How many shards a lease holder's list "1,2,3" names. */
static int count_shards(const char *shards)
{
	int n = *shards ? 1 : 0;

	for (const char *p = shards; *p; p++)
		n += *p == ',';
	return n;
}

/* --- text --- */

/* Whether events wait and no relay of the queue is connected: a
 * warning, with how many wait.  0 when all is well. */
static long long unserved(const facts_t *f)
{
	long long total = 0;

	for (int i = 0; i < PQntuples(f->procs); i++)
		if (strcmp(PQgetvalue(f->procs, i, 5), "true") == 0)
			return 0;
	for (int i = 0; i < PQntuples(f->topics); i++)
		total += atoll(PQgetvalue(f->topics, i, 1));
	return total;
}

/* The unserved warning's text: what waits, and what to start. */
static void unserved_text(const facts_t *f, const char *queue, char *out,
			  size_t size)
{
	long long n = unserved(f);
	bool dflt = strcmp(queue, "outbox") == 0;

	snprintf(out, size,
		 "%lld event%s pending and no relay connected: start one "
		 "(pgoutbox relay%s%s)",
		 n, n == 1 ? "" : "s", dflt ? "" : " --queue ",
		 dflt ? "" : queue);
}

/* The queue's relays (pgoutbox.relays): the processes with their modes
 * and connections, the concurrent members, then the lease holders
 * with their shards. */
static void text_members(const facts_t *f, FILE *out)
{
	const PGresult *res = f->members, *procs = f->procs;
	char modes[64];
	int nmodes = modes_of(res, modes, sizeof(modes)), holders = 0, conc;

	if (PQntuples(res) == 0)
		return;
	fprintf(out, "  relays: %d (%s)\n", PQntuples(procs), modes);
	if (nmodes > 1)
		fprintf(out,
			"  WARNING modes mixed on queue: %s; " MIXED_WARNING
			"\n",
			modes);
	for (int i = 0; i < PQntuples(procs); i++) {
		const char *n = PQgetvalue(procs, i, 2),
			   *from = PQgetvalue(procs, i, 3);
		bool up = strcmp(PQgetvalue(procs, i, 5), "true") == 0;

		/* "-": none of its backends is left, so no "from". */
		fprintf(out,
			"    %-28s %-10s %s connection%s%s%s, heartbeat %s "
			"ago%s\n",
			PQgetvalue(procs, i, 0), PQgetvalue(procs, i, 1), n,
			strcmp(n, "1") == 0 ? "" : "s",
			strcmp(from, "-") == 0 ? "" : " from ",
			strcmp(from, "-") == 0 ? "" : from,
			PQgetvalue(procs, i, 4),
			up ? "" : " (not connected now)");
	}
	for (int i = 0; i < PQntuples(res); i++)
		holders += !is_concurrent(res, i);
	conc = PQntuples(res) - holders;
	if (conc > 0)
		fprintf(out, "  concurrent relay connections (no leases): %d\n",
			conc);
	for (int i = 0; i < PQntuples(res); i++)
		if (is_concurrent(res, i))
			fprintf(out, "    %-28s %-10s heartbeat %s ago\n",
				PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
				PQgetvalue(res, i, 3));
	if (holders > 0)
		fprintf(out, "  lease holders (ordered/strict relays): %d\n",
			holders);
	for (int i = 0; i < PQntuples(res); i++) {
		const char *shards = PQgetvalue(res, i, 4);
		int n = count_shards(shards);
		const char *tag = strcmp(shards, "-1") == 0 ? "LEADER (strict)"
				  : n == 0 ? "no shards (standby)"
					   : NULL;

		if (is_concurrent(res, i))
			continue;
		fprintf(out, "    %-28s %-8s heartbeat %s ago%s%s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 3), tag ? ", " : "", tag ? tag : "");
		if (n > 0 && strcmp(shards, "-1") != 0)
			fprintf(out, "      %d shard%s: %s\n", n,
				n == 1 ? "" : "s", shards);
	}
}

static void text_shards(const facts_t *f, FILE *out)
{
	const PGresult *res = f->shards;

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
}

/* The report as text; a fleet's database (database: its name) heads it
 * with its name. */
static void write_text(const facts_t *f, const char *database,
		       const char *queue, FILE *out)
{
	const PGresult *res = f->topics;
	char warning[256];

	if (database)
		fprintf(out, "database %s, ", database);
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
	res = f->dead;
	fprintf(out, "  dead letters: %s", PQgetvalue(res, 0, 0));
	if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
		fprintf(out, " (latest %s: %.120s)", PQgetvalue(res, 0, 1),
			PQgetvalue(res, 0, 2));
	fputc('\n', out);
	text_members(f, out);
	text_shards(f, out);
	res = f->retention;
	if (f->adopted && PQntuples(f->adopted) == 1) {
		const char *done = PQgetvalue(f->adopted, 0, 0);

		/* Captured through the WAL: the relay never touches the
		 * rows (docs/adopt.md). */
		if (PQgetisnull(f->adopted, 0, 0))
			fprintf(out,
				"  retention: none (capture wal: the rows of "
				"%s are the application's)\n",
				PQgetvalue(f->adopted, 0, 1));
		else if (strcmp(done, "delete") == 0)
			fprintf(out,
				"  retention: delete on ack (rows of %s)\n",
				PQgetvalue(f->adopted, 0, 1));
		else
			fprintf(out,
				"  retention: mark on ack (SET %s on %s); the "
				"rows stay, removing them is the "
				"application's\n",
				done, PQgetvalue(f->adopted, 0, 1));
	} else if (PQntuples(res) == 1) {
		if (strcmp(PQgetvalue(res, 0, 0), "archive") == 0)
			fprintf(out,
				"  retention: archive, %s days, in %s "
				"day partitions of pgoutbox.%s_archive\n",
				PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
				queue);
		else
			fprintf(out, "  retention: delete on ack\n");
	}
	if (PQntuples(res) == 1 && *PQgetvalue(res, 0, 3) == 't')
		fprintf(out,
			"  PAUSED: its relays claim nothing until `pgoutbox "
			"queue resume %s`\n",
			queue);
	res = f->slot;
	if (PQntuples(res) == 1)
		fprintf(out,
			"  capture: wal, slot pgoutbox_%s %s, wal_status %s, "
			"lag %s bytes, %s s\n",
			queue,
			*PQgetvalue(res, 0, 0) != 't'	? "MISSING"
			: *PQgetvalue(res, 0, 1) == 't' ? "streamed"
							: "not streamed",
			PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3),
			PQgetvalue(res, 0, 4));
	res = f->health;
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "  WARNING %s %s: %s\n", PQgetvalue(res, i, 0),
			PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	if (unserved(f)) {
		unserved_text(f, queue, warning, sizeof(warning));
		fprintf(out, "  WARNING queue %s: %s\n", queue, warning);
	}
	res = f->relays;
	fprintf(out, "  relay connections: %d\n", PQntuples(res));
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "    %-32s backend %-8s %-16s up %-10s %s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
			PQgetvalue(res, i, 4));
}

/* --- JSON: the same facts, numbers as numbers --- */

static void j_key(pgo_buf_t *b, bool *first, const char *key)
{
	if (!*first)
		pgo_buf_puts(b, ",");
	*first = false;
	pgo_buf_json_str(b, key);
	pgo_buf_puts(b, ":");
}

static void j_str(pgo_buf_t *b, bool *first, const char *key, const char *v)
{
	j_key(b, first, key);
	pgo_buf_json_str(b, v);
}

/* A number PostgreSQL wrote (count, epoch seconds): copied as it is. */
static void j_num(pgo_buf_t *b, bool *first, const char *key, const char *v)
{
	j_key(b, first, key);
	pgo_buf_puts(b, *v ? v : "0");
}

static void json_rows(pgo_buf_t *b, bool *first, const char *key,
		      const PGresult *res, const char *const *names,
		      const bool *numeric, int ncols)
{
	j_key(b, first, key);
	pgo_buf_puts(b, "[");
	for (int i = 0; i < PQntuples(res); i++) {
		bool f = true;

		pgo_buf_puts(b, i ? ",{" : "{");
		for (int c = 0; c < ncols; c++)
			(numeric[c] ? j_num : j_str)(b, &f, names[c],
						     PQgetvalue(res, i, c));
		pgo_buf_puts(b, "}");
	}
	pgo_buf_puts(b, "]");
}

/* pgoutbox.health()'s warnings, then the unserved queue's. */
static void json_warnings(pgo_buf_t *b, bool *first, const facts_t *f,
			  const char *queue)
{
	char detail[256];
	bool w = true;

	j_key(b, first, "warnings");
	pgo_buf_puts(b, "[");
	for (int i = 0; i < PQntuples(f->health); i++) {
		w = true;
		pgo_buf_puts(b, i ? ",{" : "{");
		j_str(b, &w, "kind", PQgetvalue(f->health, i, 0));
		j_str(b, &w, "subject", PQgetvalue(f->health, i, 1));
		j_str(b, &w, "detail", PQgetvalue(f->health, i, 2));
		pgo_buf_puts(b, "}");
	}
	if (unserved(f)) {
		w = true;
		unserved_text(f, queue, detail, sizeof(detail));
		pgo_buf_puts(b, PQntuples(f->health) ? ",{" : "{");
		j_str(b, &w, "kind", "queue");
		j_str(b, &w, "subject", queue);
		j_str(b, &w, "detail", detail);
		pgo_buf_puts(b, "}");
	}
	pgo_buf_puts(b, "]");
}

/* "dead_letters": their count, the latest one's time and error. */
static void json_dead(pgo_buf_t *b, bool *first, const facts_t *f)
{
	bool d = true;
	bool any = strcmp(PQgetvalue(f->dead, 0, 0), "0") != 0;

	j_key(b, first, "dead_letters");
	pgo_buf_puts(b, "{");
	j_num(b, &d, "count", PQgetvalue(f->dead, 0, 0));
	j_key(b, &d, "latest_at");
	if (any)
		pgo_buf_json_str(b, PQgetvalue(f->dead, 0, 1));
	else
		pgo_buf_puts(b, "null");
	j_key(b, &d, "latest_error");
	if (any)
		pgo_buf_json_str(b, PQgetvalue(f->dead, 0, 2));
	else
		pgo_buf_puts(b, "null");
	pgo_buf_puts(b, "}");
}

/* "modes" of the relays, and "mixed_modes" when they differ. */
static void json_modes(pgo_buf_t *b, bool *first, const PGresult *res)
{
	char modes[64], *p = modes;
	int n = modes_of(res, modes, sizeof(modes));

	j_key(b, first, "modes");
	pgo_buf_puts(b, "[");
	for (int i = 0; i < n; i++) {
		size_t w = strcspn(p, ",");
		char one[16];

		snprintf(one, sizeof(one), "%.*s", (int)w, p);
		pgo_buf_puts(b, i ? "," : "");
		pgo_buf_json_str(b, one);
		p += w + (p[w] ? 2 : 0);
	}
	pgo_buf_puts(b, "]");
	j_key(b, first, "mixed_modes");
	pgo_buf_puts(b, n > 1 ? "true" : "false");
}

/* "lease_holders": the members that hold shards or lead, their role. */
static void json_lease_holders(pgo_buf_t *b, bool *first, const PGresult *res)
{
	j_key(b, first, "lease_holders");
	pgo_buf_puts(b, "[");
	for (int i = 0, k = 0; i < PQntuples(res); i++) {
		const char *shards = PQgetvalue(res, i, 4);
		bool leader = strcmp(shards, "-1") == 0, m = true;

		if (is_concurrent(res, i))
			continue;
		pgo_buf_puts(b, k++ ? ",{" : "{");
		j_str(b, &m, "member", PQgetvalue(res, i, 0));
		j_str(b, &m, "mode", PQgetvalue(res, i, 1));
		j_str(b, &m, "relay", PQgetvalue(res, i, 5));
		j_num(b, &m, "backend_pid", PQgetvalue(res, i, 2));
		j_str(b, &m, "heartbeat_age", PQgetvalue(res, i, 3));
		j_str(b, &m, "role",
		      leader		     ? "leader"
		      : count_shards(shards) ? "owner"
					     : "standby");
		j_key(b, &m, "shards");
		pgo_buf_printf(b, "[%s]", leader ? "" : shards);
		pgo_buf_puts(b, "}");
	}
	pgo_buf_puts(b, "]");
}

/* "retention": an adopted table's done, or the queue's retention. */
static void json_retention(pgo_buf_t *b, bool *first, const facts_t *f)
{
	const PGresult *res = f->retention;

	j_key(b, first, "retention");
	if (f->adopted && PQntuples(f->adopted) == 1) {
		const char *done = PQgetvalue(f->adopted, 0, 0);
		bool r = true;

		pgo_buf_puts(b, "{");
		j_str(b, &r, "mode",
		      PQgetisnull(f->adopted, 0, 0) ? "none"
		      : strcmp(done, "delete") == 0 ? "delete"
						    : "mark");
		j_str(b, &r, "table", PQgetvalue(f->adopted, 0, 1));
		if (!PQgetisnull(f->adopted, 0, 0))
			j_str(b, &r, "done", done);
		pgo_buf_puts(b, "}");
	} else if (PQntuples(res) == 1) {
		bool r = true;

		pgo_buf_puts(b, "{");
		j_str(b, &r, "mode", PQgetvalue(res, 0, 0));
		j_num(b, &r, "days", PQgetvalue(res, 0, 1));
		j_num(b, &r, "partitions", PQgetvalue(res, 0, 2));
		pgo_buf_puts(b, "}");
	} else {
		pgo_buf_puts(b, "null");
	}
}

/* "slot": a WAL queue's replication slot, or null. */
static void json_slot(pgo_buf_t *b, bool *first, const facts_t *f,
		      const char *queue)
{
	const PGresult *res = f->slot;

	j_key(b, first, "slot");
	if (PQntuples(res) == 1) {
		bool r = true;
		char name[96];

		snprintf(name, sizeof(name), "pgoutbox_%s", queue);
		pgo_buf_puts(b, "{");
		j_str(b, &r, "name", name);
		j_key(b, &r, "exists");
		pgo_buf_puts(b,
			     *PQgetvalue(res, 0, 0) == 't' ? "true" : "false");
		j_key(b, &r, "active");
		pgo_buf_puts(b,
			     *PQgetvalue(res, 0, 1) == 't' ? "true" : "false");
		j_str(b, &r, "wal_status", PQgetvalue(res, 0, 2));
		j_num(b, &r, "lag_bytes", PQgetvalue(res, 0, 3));
		j_num(b, &r, "lag_seconds", PQgetvalue(res, 0, 4));
		pgo_buf_puts(b, "}");
	} else {
		pgo_buf_puts(b, "null");
	}
}

/* The report as one JSON object (no newline); a fleet's database
 * (database: its name) has "database" and "error": null first. */
static void write_json(const facts_t *f, const char *database,
		       const char *queue, pgo_buf_t *b)
{
	static const char *const topic_cols[] = {
		"topic", "pending", "oldest_seconds", "delayed", "retried"};
	static const bool topic_num[] = {false, true, true, true, true};
	static const char *const shard_cols[] = {
		"shard", "pending", "lag_seconds", "halted", "halted_by"};
	static const bool shard_num[] = {true, true, true, true, false};
	static const char *const relay_cols[] = {
		"application_name", "backend_pid", "client", "up", "state"};
	static const bool relay_num[] = {false, true, false, false, false};
	static const char *const member_cols[] = {
		"member",	 "mode",   "backend_pid",
		"heartbeat_age", "shards", "relay"};
	static const bool member_num[] = {false, false, true,
					  false, false, false};
	static const char *const proc_cols[] = {"relay",	 "modes",
						"connections",	 "clients",
						"heartbeat_age", "connected"};
	static const bool proc_num[] = {false, false, true, false, false, true};
	const PGresult *res;
	bool first = true;
	long long total = 0;

	pgo_buf_puts(b, "{");
	if (database) {
		j_str(b, &first, "database", database);
		j_key(b, &first, "error");
		pgo_buf_puts(b, "null");
	}
	j_str(b, &first, "queue", queue);
	for (int i = 0; i < PQntuples(f->topics); i++)
		total += atoll(PQgetvalue(f->topics, i, 1));
	j_key(b, &first, "pending_total");
	pgo_buf_printf(b, "%lld", total);
	json_rows(b, &first, "pending", f->topics, topic_cols, topic_num, 5);
	json_dead(b, &first, f);
	res = f->members;
	/* Every relay with its mode; "mixed_modes" when they differ. */
	json_rows(b, &first, "relays", res, member_cols, member_num, 6);
	/* The same per process (relays counts connections, this does not). */
	json_rows(b, &first, "relay_processes", f->procs, proc_cols, proc_num,
		  6);
	json_modes(b, &first, res);
	json_lease_holders(b, &first, res);
	json_rows(b, &first, "shards", f->shards, shard_cols, shard_num, 5);
	json_retention(b, &first, f);
	j_key(b, &first, "paused");
	pgo_buf_puts(b, PQntuples(f->retention) == 1 &&
					*PQgetvalue(f->retention, 0, 3) == 't'
				? "true"
				: "false");
	json_slot(b, &first, f, queue);
	json_warnings(b, &first, f, queue);
	json_rows(b, &first, "relay_connections", f->relays, relay_cols,
		  relay_num, 5);
	pgo_buf_puts(b, "}");
}

/* The facts of queue on conn, its schema checked first: PGO_OK, or the
 * error with f cleared. */
static int read_facts(PGconn *conn, const char *queue, facts_t *f,
		      pgo_error_t *err)
{
	int rc = pgo_ident_check(queue, err);

	if (rc == PGO_OK)
		rc = pgo_schema_check(conn, err);
	if (rc == PGO_OK)
		rc = collect(conn, queue, f, err);
	if (rc != PGO_OK)
		facts_clear(f);
	return rc;
}

int pgo_status_write(PGconn *conn, const char *queue, bool json, FILE *out,
		     pgo_error_t *err)
{
	facts_t f = {0};
	int rc;

	if (!queue)
		queue = "outbox";
	rc = read_facts(conn, queue, &f, err);
	if (rc != PGO_OK)
		return rc;
	if (json) {
		pgo_buf_t b;

		pgo_buf_init(&b);
		write_json(&f, NULL, queue, &b);
		pgo_buf_puts(&b, "\n");
		if (b.oom)
			rc = pgo_error_set(err, PGO_ERR_NOMEM, 1,
					   "status: out of memory");
		else
			fwrite(b.data, 1, b.len, out);
		pgo_buf_free(&b);
	} else {
		write_text(&f, NULL, queue, out);
	}
	facts_clear(&f);
	if (rc == PGO_OK)
		pgo_error_clear(err);
	return rc;
}

/* --- a fleet: every database's report, or its error --- */

/* A database of the fleet. */
typedef struct status_db {
	char name[PGO_DB_NAME_MAX + 1]; /* as its relay names it */
	char *url;			/* owned */
	PGconn *conn; /* NULL: not connected yet, or lost (tried again) */
} status_db_t;

struct pgo_status_fleet {
	status_db_t *dbs;	 /* in the order configured */
	size_t n;		 /* how many */
	int64_t connect_timeout; /* ms per host: database.connect_timeout */
};

pgo_status_fleet_t *pgo_status_fleet_new(const pgo_conf_t *conf,
					 pgo_error_t *err)
{
	size_t n = pgo_conf_database_count(conf);
	pgo_conf_db_t *named = calloc(n ? n : 1, sizeof(*named));
	pgo_status_fleet_t *s = calloc(1, sizeof(*s));
	int rc = PGO_OK;

	if (!named || !s || !(s->dbs = calloc(n ? n : 1, sizeof(*s->dbs)))) {
		free(named);
		pgo_status_fleet_destroy(s);
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (!n)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "status: the configuration has no fleet");
	if (rc == PGO_OK)
		rc = pgo_conf_databases_named(conf, named, err);
	for (size_t i = 0; rc == PGO_OK && i < n; i++) {
		status_db_t *d = &s->dbs[i];

		snprintf(d->name, sizeof(d->name), "%s", named[i].name);
		if (!(d->url = strdup(named[i].url)))
			rc = pgo_error_set(err, PGO_ERR_NOMEM, 1,
					   "out of memory");
		s->n++;
	}
	free(named);
	if (rc != PGO_OK) {
		pgo_status_fleet_destroy(s);
		return NULL;
	}
	s->connect_timeout = pgo_conf_values(conf)->connect_timeout;
	return s;
}

void pgo_status_fleet_destroy(pgo_status_fleet_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		PQfinish(s->dbs[i].conn);
		free(s->dbs[i].url);
	}
	free(s->dbs);
	free(s);
}

/* Connects d, each host given up after the connect timeout: PGO_OK, or
 * the error (PGO_ERR_CONFIG when no retry can fix it, as at a relay's
 * start: no such database or role, authentication refused). */
static int db_connect(const pgo_status_fleet_t *s, status_db_t *d,
		      volatile sig_atomic_t *stop, pgo_error_t *err)
{
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24], why[512];
	pgo_pq_wait_t how;

	pgo_conn_params_url(d->url, s->connect_timeout, "pgoutbox status", keys,
			    vals, timeout);
	d->conn = pgo_pq_connect(keys, vals, s->connect_timeout, stop, &how);
	if (how == PGO_PQ_READY)
		return PGO_OK;
	if (!d->conn)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
	pgo_pq_wait_why(d->conn, how, s->connect_timeout, why, sizeof(why));
	PQfinish(d->conn);
	d->conn = NULL;
	if (how == PGO_PQ_LOST &&
	    pgo_conn_url_refusal(d->url, why, false, err) != PGO_OK)
		return err->code;
	return pgo_error_set(err, PGO_ERR_DB, 1,
			     "cannot connect to PostgreSQL: %s", why);
}

/* Database d's report, text to out or a JSON object into b, its pending
 * events added to *pending: PGO_OK, or the error (nothing written; a
 * connection lost is dropped, to be made again next time). */
static int db_report(const pgo_status_fleet_t *s, status_db_t *d,
		     const char *queue, bool json, FILE *out, pgo_buf_t *b,
		     long long *pending, volatile sig_atomic_t *stop,
		     pgo_error_t *err)
{
	facts_t f = {0};
	int rc = PGO_OK;

	if (!d->conn)
		rc = db_connect(s, d, stop, err);
	if (rc == PGO_OK)
		rc = read_facts(d->conn, queue, &f, err);
	if (rc != PGO_OK) {
		if (d->conn && PQstatus(d->conn) == CONNECTION_BAD) {
			PQfinish(d->conn);
			d->conn = NULL;
		}
		return rc;
	}
	for (int i = 0; i < PQntuples(f.topics); i++)
		*pending += atoll(PQgetvalue(f.topics, i, 1));
	if (json)
		write_json(&f, d->name, queue, b);
	else
		write_text(&f, d->name, queue, out);
	facts_clear(&f);
	return PGO_OK;
}

/* Whether a failure is one that no retry fixes (the CLI exits 2). */
static bool grave(int code)
{
	return code == PGO_ERR_CONFIG || code == PGO_ERR_SCHEMA ||
	       code == PGO_ERR_INVALID;
}

int pgo_status_fleet_write(pgo_status_fleet_t *s, const char *queue, bool json,
			   FILE *out, volatile sig_atomic_t *stop,
			   pgo_error_t *err)
{
	pgo_buf_t rows, failed, top;
	long long pending = 0;
	size_t nfailed = 0;
	int worst = PGO_OK;

	if (!queue)
		queue = "outbox";
	pgo_buf_init(&rows);
	pgo_buf_init(&failed);
	pgo_buf_init(&top);
	for (size_t i = 0; i < s->n; i++) {
		status_db_t *d = &s->dbs[i];
		pgo_error_t e;
		int rc;

		if (json)
			pgo_buf_puts(&rows, i ? "," : "");
		else if (i)
			fputc('\n', out);
		rc = db_report(s, d, queue, json, out, &rows, &pending, stop,
			       &e);
		if (rc == PGO_OK)
			continue;
		if (worst == PGO_OK || (grave(rc) && !grave(worst)))
			worst = rc;
		pgo_buf_printf(&failed, "%s%s", nfailed++ ? ", " : "", d->name);
		if (json) {
			bool first = true;

			pgo_buf_puts(&rows, "{");
			j_str(&rows, &first, "database", d->name);
			j_str(&rows, &first, "error", e.msg);
			j_str(&rows, &first, "queue", queue);
			pgo_buf_puts(&rows, "}");
		} else {
			fprintf(out, "database %s, queue %s\n  ERROR: %s\n",
				d->name, queue, e.msg);
		}
	}
	if (json) {
		bool first = true;

		pgo_buf_puts(&top, "{");
		j_str(&top, &first, "queue", queue);
		j_key(&top, &first, "pending_total");
		pgo_buf_printf(&top, "%lld", pending);
		j_key(&top, &first, "databases_failed");
		pgo_buf_printf(&top, "%zu", nfailed);
		j_key(&top, &first, "databases");
		pgo_buf_puts(&top, "[");
		pgo_buf_puts(&top, rows.oom ? "" : rows.data ? rows.data : "");
		pgo_buf_puts(&top, "]}\n");
		if (!rows.oom && !top.oom)
			fwrite(top.data, 1, top.len, out);
	} else if (!failed.oom) {
		fprintf(out, "\nfleet: %zu database%s, %lld pending", s->n,
			s->n == 1 ? "" : "s", pending);
		if (nfailed)
			fprintf(out, " in the %zu that answered; FAILED: %s",
				s->n - nfailed, failed.data);
		fputc('\n', out);
	}
	if (rows.oom || failed.oom || top.oom)
		worst = pgo_error_set(err, PGO_ERR_NOMEM, 1,
				      "status: out of memory");
	else if (nfailed)
		pgo_error_set(err, worst, !grave(worst),
			      "%zu of %zu databases failed: %s", nfailed, s->n,
			      failed.data);
	else
		pgo_error_clear(err);
	pgo_buf_free(&rows);
	pgo_buf_free(&failed);
	pgo_buf_free(&top);
	return worst;
}

int pgo_status_print(PGconn *conn, const char *queue, FILE *out,
		     pgo_error_t *err)
{
	return pgo_status_write(conn, queue, false, out, err);
}
