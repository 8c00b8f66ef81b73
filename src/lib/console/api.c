/*
 * api.c — what the console's pages ask (GET /api/..., JSON) and the
 * actions (POST), each a short function over the console's connection.
 *
 * Reads are the same facts `pgoutbox status` and `pgoutbox queue` show;
 * the actions go through the library calls the CLI uses
 * (pgo_queue_retry for `queue retry`), one transaction per request
 * whatever the number of ids, so that a request is done entirely or not
 * at all, and each is logged with the name given at login and the
 * client's address.  Every parameter is checked here first, with an
 * error that says what was expected.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/console_int.h"
#include "base/error.h"
#include "base/log.h"
#include "base/buf.h"
#include "console/console.h"
#include "pgoutbox.h"

#define PAGE_ROWS  50
#define IDS_MAX	   500
#define SEARCH_MAX 200
/* An item's times as a page shows them (its envelope has them whole). */
#define TIMES                                                                  \
	"to_char(created_at, 'YYYY-MM-DD HH24:MI:SS') AS created_at, "         \
	"to_char(run_at, 'YYYY-MM-DD HH24:MI:SS') AS run_at, attempts, "       \
	"last_error"

/* --- JSON --- */

void json_error(pgo_buf_t *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pgo_buf_reset(b);
	pgo_buf_puts(b, "{\"error\":");
	pgo_buf_json_str(b, msg);
	pgo_buf_puts(b, "}");
}

/* The type OIDs written as themselves (pg_type.dat). */
static bool is_number(Oid t)
{
	return t == 20 || t == 21 || t == 23 || t == 700 || t == 701 ||
	       t == 1700;
}

void json_rows(pgo_buf_t *b, const PGresult *res)
{
	pgo_buf_puts(b, "[");
	for (int i = 0; i < PQntuples(res); i++) {
		pgo_buf_puts(b, i ? ",{" : "{");
		for (int j = 0; j < PQnfields(res); j++) {
			Oid t = PQftype(res, j);
			const char *v = PQgetvalue(res, i, j);

			pgo_buf_puts(b, j ? "," : "");
			pgo_buf_json_str(b, PQfname(res, j));
			pgo_buf_puts(b, ":");
			if (PQgetisnull(res, i, j))
				pgo_buf_puts(b, "null");
			else if (t == 16)
				pgo_buf_puts(b, *v == 't' ? "true" : "false");
			else if (is_number(t) || t == 114 || t == 3802)
				pgo_buf_puts(b, v); /* PostgreSQL's own JSON */
			else
				pgo_buf_json_str(b, v);
		}
		pgo_buf_puts(b, "}");
	}
	pgo_buf_puts(b, "]");
}

/* --- checked parameters --- */

/* A whole number in [lo, hi]; "" is def. */
static bool num_arg(const char *s, long long lo, long long hi, long long def,
		    long long *out)
{
	char *end;

	if (!*s) {
		*out = def;
		return true;
	}
	errno = 0;
	*out = strtoll(s, &end, 10);
	return !errno && end != s && !*end && *out >= lo && *out <= hi;
}

/* A queue that exists: its kind ("outbox", "work", "adopted") in kind.
 * Otherwise the error is in b and the status returned (400, 404, 503). */
static unsigned queue_arg(pgo_console_t *c, const char *name, char *kind,
			  size_t size, pgo_buf_t *b)
{
	pgo_error_t err;
	char why[512];
	PGresult *res;

	if (pgo_ident_check(name, &err) != PGO_OK) {
		json_error(b, "queue: %s", err.msg);
		return 400;
	}
	res = console_query(c,
			    "SELECT kind FROM pgoutbox.queues WHERE name = $1",
			    1, &name, why, sizeof(why));
	if (!res) {
		json_error(b, "%s", why);
		return 503;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		json_error(b, "no queue named \"%s\"", name);
		return 404;
	}
	snprintf(kind, size, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/* What a search may be: up to 200 characters, none a control one. */
static bool search_ok(const char *q)
{
	if (strlen(q) > SEARCH_MAX)
		return false;
	for (const unsigned char *p = (const unsigned char *)q; *p; p++)
		if (*p < 0x20)
			return false;
	return true;
}

/* "12,13,14" into ids (1 to IDS_MAX of them, each >= 1). */
static int ids_arg(const char *s, long long *ids)
{
	int n = 0;

	while (*s) {
		char *end;

		if (n == IDS_MAX)
			return -1;
		errno = 0;
		ids[n] = strtoll(s, &end, 10);
		if (errno || end == s || ids[n] < 1 || (*end && *end != ','))
			return -1;
		n++;
		s = *end ? end + 1 : end;
	}
	return n ? n : -1;
}

/* The relation a queue's items are read from, for FROM. */
static void items_from(const char *name, const char *kind, char *out,
		       size_t size)
{
	if (strcmp(kind, "adopted") == 0)
		snprintf(out, size, "pgoutbox.adopted_pending('%s')", name);
	else /* name passed pgo_ident_check: quoted as is */
		snprintf(out, size, "pgoutbox.\"%s\"", name);
}

/* Runs sql, appends `"key":[rows]` (preceded by a comma); false with the
 * error in b and why (and *status set) when it fails. */
static bool rows_why(pgo_console_t *c, pgo_buf_t *b, const char *key,
		     const char *sql, int n, const char *const *p,
		     unsigned *status, char *why, size_t size)
{
	PGresult *res = console_query(c, sql, n, p, why, size);

	if (!res) {
		json_error(b, "%s", why);
		*status = 503;
		return false;
	}
	pgo_buf_printf(b, ",\"%s\":", key);
	json_rows(b, res);
	PQclear(res);
	return true;
}

/* The same without why. */
static bool rows_into(pgo_console_t *c, pgo_buf_t *b, const char *key,
		      const char *sql, int n, const char *const *p,
		      unsigned *status)
{
	char why[512];

	return rows_why(c, b, key, sql, n, p, status, why, sizeof(why));
}

/* --- overview --- */

/* What the overview adds up over a fleet's databases. */
typedef struct totals {
	long long pending, dead;
	bool capped;
	bool down; /* the database could not be reached */
} totals_t;

/* c->db's overview object into b: {"db":{"ok":...},"queues":[...],
 * "sessions":[...],"warnings":[...],"series":{...}}, its figures added
 * to t.  200, {"db":{"ok":false,...}} when the database is unreachable;
 * otherwise the status, with the error in b and why. */
static unsigned overview_db(pgo_console_t *c, pgo_buf_t *b, totals_t *t,
			    char *why, size_t size)
{
	static const char queues_sql[] =
		"SELECT q.name, q.kind, q.shards, "
		"(SELECT count(*) FROM pgoutbox.dead_letters d WHERE d.queue "
		"= q.name) AS dead, "
		"(SELECT count(*) FROM pgoutbox.relays m WHERE m.queue = "
		"q.name AND m.heartbeat_at > now() - interval '1 minute') AS "
		"members, "
		"(SELECT count(*) FROM pgoutbox.shard_leases l WHERE l.queue = "
		"q.name AND l.owner IS NOT NULL) AS leases, "
		/* A WAL queue's slot: WAL kept past its confirmed position
		 * (status --json's slot.lag_bytes); null for the others. */
		"(SELECT pg_current_wal_lsn() - s.confirmed_flush_lsn FROM "
		"pg_replication_slots s WHERE q.capture = 'wal' AND "
		"s.slot_name = 'pgoutbox_' || q.name AND s.database = "
		"current_database()) AS slot_lag_bytes "
		"FROM pgoutbox.queues q ORDER BY q.name <> 'outbox', q.name";
	char from[160], sql[1024];
	unsigned status = 200;
	PGresult *qs, *res;
	int shown = 0;

	qs = console_query(c, queues_sql, 0, NULL, why, size);
	if (!qs && c->db->conn) { /* connected: this query failed */
		json_error(b, "%s", why);
		return 503;
	}
	if (!qs) {
		pgo_buf_puts(b, "{\"db\":{\"ok\":false,\"error\":");
		pgo_buf_json_str(b, why);
		pgo_buf_puts(b, "}}");
		t->down = true;
		return 200; /* the page shows the banner */
	}
	pgo_buf_puts(b, "{\"db\":{\"ok\":true},\"queues\":[");
	for (int i = 0; i < PQntuples(qs); i++) {
		const char *name = PQgetvalue(qs, i, 0);

		if (pgo_ident_check(name, NULL) != PGO_OK)
			continue; /* not one create_queue() or adopt made */
		items_from(name, PQgetvalue(qs, i, 1), from, sizeof(from));
		/* Bounded: at most CONSOLE_COUNT_CAP + 1 rows, the first by
		 * the primary key (an index scan), so a deep backlog costs
		 * PostgreSQL no more than a cap's worth a request.  An
		 * adopted queue's rows come from a function: not bounded. */
		snprintf(sql, sizeof(sql),
			 "SELECT least(count(*), %d) AS pending, count(*) "
			 "FILTER (WHERE run_at > now()) AS scheduled, count(*) "
			 "FILTER (WHERE attempts > 0) AS retrying, "
			 "coalesce(round(extract(epoch FROM now() - "
			 "min(created_at)), 1), 0) AS oldest_s, count(*) > %d "
			 "AS capped FROM (SELECT run_at, attempts, created_at "
			 "FROM %s%s LIMIT %d) s",
			 CONSOLE_COUNT_CAP, CONSOLE_COUNT_CAP, from,
			 strcmp(PQgetvalue(qs, i, 1), "adopted") == 0
				 ? ""
				 : " ORDER BY id",
			 CONSOLE_COUNT_CAP + 1);
		res = console_query(c, sql, 0, NULL, why, size);
		pgo_buf_puts(b, shown++ ? ",{\"name\":" : "{\"name\":");
		pgo_buf_json_str(b, name);
		pgo_buf_puts(b, ",\"kind\":");
		pgo_buf_json_str(b, PQgetvalue(qs, i, 1));
		pgo_buf_printf(b,
			       ",\"shards\":%s,\"dead\":%s,\"members\":%s,"
			       "\"leases\":%s,\"slot_lag_bytes\":%s",
			       PQgetvalue(qs, i, 2), PQgetvalue(qs, i, 3),
			       PQgetvalue(qs, i, 4), PQgetvalue(qs, i, 5),
			       PQgetisnull(qs, i, 6) ? "null"
						     : PQgetvalue(qs, i, 6));
		t->dead += strtoll(PQgetvalue(qs, i, 3), NULL, 10);
		if (res) {
			pgo_buf_printf(
				b,
				",\"pending\":%s,\"scheduled\":%s,"
				"\"retrying\":%s,\"oldest_s\":%s,"
				"\"pending_capped\":%s}",
				PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
				PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3),
				*PQgetvalue(res, 0, 4) == 't' ? "true"
							      : "false");
			t->pending += strtoll(PQgetvalue(res, 0, 0), NULL, 10);
			t->capped |= *PQgetvalue(res, 0, 4) == 't';
			PQclear(res);
		} else {
			pgo_buf_puts(b, ",\"error\":");
			pgo_buf_json_str(b, why);
			pgo_buf_puts(b, "}");
		}
	}
	PQclear(qs);
	pgo_buf_puts(b, "]");
	if (!rows_why(c, b, "sessions",
		      "SELECT split_part(application_name, ' ', 2) AS role, "
		      "application_name AS name, count(*) AS connections, "
		      "min(date_trunc('second', now() - backend_start))::text "
		      "AS up FROM pg_stat_activity WHERE datname = "
		      "current_database() AND (application_name LIKE "
		      "'pgoutbox relay%' OR application_name LIKE 'pgoutbox "
		      "worker%' OR application_name LIKE 'pgoutbox cron%' OR "
		      "application_name LIKE 'pgoutbox run%') GROUP BY 1, 2 "
		      "ORDER BY 1, 2",
		      0, NULL, &status, why, size))
		return status;
	/* Held xmin, replication slots, dead tuples (`status` warns too). */
	if (!rows_why(c, b, "warnings",
		      "SELECT kind, subject, detail FROM pgoutbox.health()", 0,
		      NULL, &status, why, size))
		return status;
	pgo_buf_puts(b, ",\"series\":");
	console_series_json(c, b);
	pgo_buf_puts(b, "}");
	return status;
}

/* A database of the fleet that could not be read: its error row. */
static void db_down(pgo_buf_t *b, const char *name, const char *why)
{
	pgo_buf_puts(b, "{\"name\":");
	pgo_buf_json_str(b, name);
	pgo_buf_puts(b, ",\"db\":{\"ok\":false,\"error\":");
	pgo_buf_json_str(b, why);
	pgo_buf_puts(b, "}}");
}

/* GET /api/overview: one database's object (overview_db); a fleet's is
 * {"fleet":{"databases":N,"up":U,"down":D,"pending":P,"pending_capped":
 * bool,"dead":X},"databases":[{"name":...,<overview_db>}, ...]}, each
 * database read in turn on its own connection: one that is down is its
 * error row, the others are read all the same. */
static unsigned api_overview(pgo_console_t *c, const console_req_t *r,
			     pgo_buf_t *b)
{
	totals_t t = {0};
	pgo_buf_t one, all;
	char why[512];
	int up = 0;

	(void)r;
	if (!c->fleet) {
		c->db = c->dbs;
		return overview_db(c, b, &t, why, sizeof(why));
	}
	pgo_buf_init(&one);
	pgo_buf_init(&all);
	for (int i = 0; i < c->ndb; i++) {
		totals_t mine = {0};
		unsigned status;

		c->db = &c->dbs[i];
		pgo_buf_reset(&one);
		why[0] = '\0';
		status = overview_db(c, &one, &mine, why, sizeof(why));
		pgo_buf_puts(&all, i ? "," : "");
		if (status != 200 || one.oom) {
			db_down(&all, c->db->name, why);
		} else if (mine.down) {
			db_down(&all, c->db->name, why);
		} else {
			up++;
			t.pending += mine.pending;
			t.dead += mine.dead;
			t.capped |= mine.capped;
			pgo_buf_puts(&all, "{\"name\":");
			pgo_buf_json_str(&all, c->db->name);
			pgo_buf_printf(&all, ",%s", one.data + 1);
		}
	}
	if (all.oom || !all.data) {
		pgo_buf_free(&one);
		pgo_buf_free(&all);
		json_error(b, "out of memory");
		return 503;
	}
	pgo_buf_printf(b,
		       "{\"fleet\":{\"databases\":%d,\"up\":%d,\"down\":%d,"
		       "\"pending\":%lld,\"pending_capped\":%s,\"dead\":%lld},"
		       "\"databases\":[",
		       c->ndb, up, c->ndb - up, t.pending,
		       t.capped ? "true" : "false", t.dead);
	pgo_buf_puts(b, all.data);
	pgo_buf_puts(b, "]}");
	pgo_buf_free(&one);
	pgo_buf_free(&all);
	return 200;
}

/* --- a queue --- */

static unsigned api_queue(pgo_console_t *c, const console_req_t *r,
			  pgo_buf_t *b)
{
	const char *name = r->get(r->ctx, "name"), *q = r->get(r->ctx, "q"),
		   *state = r->get(r->ctx, "state");
	char kind[16], from[160], sql[1024], off[24];
	const char *p[2] = {q, off};
	const char *cols;
	long long page;
	unsigned status;
	bool adopted;

	if ((status = queue_arg(c, name, kind, sizeof(kind), b)))
		return status;
	if (!*state)
		state = "pending";
	if (strcmp(state, "pending") != 0 && strcmp(state, "scheduled") != 0) {
		json_error(b, "state: pending or scheduled, not \"%.40s\"",
			   state);
		return 400;
	}
	if (!num_arg(r->get(r->ctx, "page"), 0, 100000, 0, &page)) {
		json_error(b, "page: a whole number from 0 to 100000");
		return 400;
	}
	if (!search_ok(q)) {
		json_error(b,
			   "search: up to %d characters, no control "
			   "characters",
			   SEARCH_MAX);
		return 400;
	}
	snprintf(off, sizeof(off), "%lld", page * PAGE_ROWS);
	adopted = strcmp(kind, "adopted") == 0;
	items_from(name, kind, from, sizeof(from));
	cols = adopted ? "id, topic, key, NULL::text AS type, " TIMES
		       : "id, topic, key, type, " TIMES;
	pgo_buf_puts(b, "{\"name\":");
	pgo_buf_json_str(b, name);
	pgo_buf_puts(b, ",\"kind\":");
	pgo_buf_json_str(b, kind);
	pgo_buf_printf(b, ",\"page\":%lld,\"page_rows\":%d,\"state\":\"%s\"",
		       page, PAGE_ROWS, state);
	/* The search: an id exactly, or a part of key, type or topic. */
	snprintf(sql, sizeof(sql),
		 "SELECT %s FROM %s t WHERE (run_at %s now()) AND ($1 = '' "
		 "OR t.id::text = $1 OR strpos(t.key, $1) > 0 OR "
		 "strpos(t.topic, $1) > 0%s) ORDER BY %s LIMIT %d OFFSET "
		 "$2::bigint",
		 cols, from, strcmp(state, "pending") == 0 ? "<=" : ">",
		 adopted ? "" : " OR strpos(t.type, $1) > 0",
		 strcmp(state, "pending") == 0 ? "t.id" : "t.run_at, t.id",
		 PAGE_ROWS);
	if (!rows_into(c, b, "items", sql, 2, p, &status))
		return status;
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) AS n FROM %s t WHERE (run_at %s now()) AND "
		 "($1 = '' OR t.id::text = $1 OR strpos(t.key, $1) > 0 OR "
		 "strpos(t.topic, $1) > 0%s)",
		 from, strcmp(state, "pending") == 0 ? "<=" : ">",
		 adopted ? "" : " OR strpos(t.type, $1) > 0");
	if (!rows_into(c, b, "total", sql, 1, p, &status))
		return status;
	p[0] = name;
	/* One row per owner, its shards as ranges ("0-31, 40"). */
	if (!rows_into(c, b, "leases",
		       "SELECT owner, mode, pid, heartbeat_age, sum(n) AS "
		       "shards, string_agg(r, ', ' ORDER BY lo) AS ranges, "
		       "max(epoch) AS epoch, min(since) AS since FROM (SELECT "
		       "owner, mode, pid, heartbeat_age, count(*) AS n, "
		       "min(shard) AS lo, CASE WHEN min(shard) = max(shard) "
		       "THEN min(shard)::text ELSE min(shard) || '-' || "
		       "max(shard) END AS r, max(epoch) AS epoch, "
		       "min(acquired_at) AS since FROM (SELECT l.owner, "
		       "m.mode, m.backend_pid AS pid, date_trunc('second', "
		       "now() - m.heartbeat_at)::text AS heartbeat_age, "
		       "l.shard, l.epoch, l.acquired_at, l.shard - "
		       "row_number() OVER (PARTITION BY l.owner ORDER BY "
		       "l.shard) AS island FROM pgoutbox.shard_leases l LEFT "
		       "JOIN pgoutbox.relays m ON m.queue = l.queue AND "
		       "m.member = l.owner WHERE l.queue = $1 AND l.owner IS "
		       "NOT NULL) x GROUP BY owner, mode, pid, heartbeat_age, "
		       "island) y GROUP BY owner, mode, pid, heartbeat_age "
		       "ORDER BY owner",
		       1, p, &status) ||
	    !rows_into(c, b, "members",
		       "SELECT member, mode, backend_pid AS pid, "
		       "date_trunc('second', now() - heartbeat_at)::text AS "
		       "heartbeat_age FROM pgoutbox.relays WHERE queue = $1 "
		       "ORDER BY member",
		       1, p, &status))
		return status;
	snprintf(sql, sizeof(sql),
		 "SELECT * FROM (SELECT 'retrying' AS what, id, attempts, "
		 "last_error, to_char(run_at, 'YYYY-MM-DD HH24:MI:SS') AS at "
		 "FROM %s WHERE last_error IS NOT NULL ORDER BY run_at DESC "
		 "LIMIT 10) a UNION ALL SELECT * FROM (SELECT 'dead', id, "
		 "attempts, last_error, to_char(failed_at, 'YYYY-MM-DD "
		 "HH24:MI:SS') FROM pgoutbox.dead_letters WHERE queue = $1 "
		 "ORDER BY failed_at DESC LIMIT 10) d",
		 from);
	if (!rows_into(c, b, "errors", sql, 1, p, &status))
		return status;
	pgo_buf_puts(b, "}");
	return 200;
}

/* One item's whole envelope. */
static unsigned api_item(pgo_console_t *c, const console_req_t *r, pgo_buf_t *b)
{
	const char *name = r->get(r->ctx, "queue");
	char kind[16], sql[1024], ids[24], why[512];
	const char *p[1] = {ids};
	long long id;
	unsigned status;
	PGresult *res;

	if ((status = queue_arg(c, name, kind, sizeof(kind), b)))
		return status;
	if (!num_arg(r->get(r->ctx, "id"), 1, INT64_MAX, 0, &id) || id < 1) {
		json_error(b, "id: a whole number from 1");
		return 400;
	}
	snprintf(ids, sizeof(ids), "%lld", id);
	if (strcmp(kind, "adopted") != 0)
		snprintf(sql, sizeof(sql),
			 "SELECT id, topic, key, type, payload, headers, "
			 "created_at::text, run_at::text, attempts, "
			 "last_error, locked_by, locked_until::text FROM "
			 "pgoutbox.\"%s\" WHERE id = $1::bigint",
			 name);
	else /* what the map reads of the row */
		snprintf(sql, sizeof(sql),
			 "SELECT id, topic, key, created_at::text, shard, "
			 "run_at::text, attempts, last_error FROM "
			 "pgoutbox.adopted_pending('%s') WHERE id = $1::bigint",
			 name);
	res = console_query(c, sql, 1, p, why, sizeof(why));
	if (!res) {
		json_error(b, "%s", why);
		return 503;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		json_error(b,
			   "no item %lld pending in queue %s (delivered "
			   "meanwhile?)",
			   id, name);
		return 404;
	}
	pgo_buf_puts(b, "{\"item\":");
	json_rows(b, res);
	pgo_buf_puts(b, "}");
	PQclear(res);
	return 200;
}

/* --- dead letters --- */

static unsigned api_dead(pgo_console_t *c, const console_req_t *r, pgo_buf_t *b)
{
	const char *name = r->get(r->ctx, "queue"), *q = r->get(r->ctx, "q");
	char kind[16], off[24];
	const char *p[3] = {name, q, off};
	long long page;
	unsigned status;

	if (*name && (status = queue_arg(c, name, kind, sizeof(kind), b)))
		return status;
	if (!num_arg(r->get(r->ctx, "page"), 0, 100000, 0, &page)) {
		json_error(b, "page: a whole number from 0 to 100000");
		return 400;
	}
	if (!search_ok(q)) {
		json_error(b,
			   "search: up to %d characters, no control "
			   "characters",
			   SEARCH_MAX);
		return 400;
	}
	snprintf(off, sizeof(off), "%lld", page * PAGE_ROWS);
	pgo_buf_printf(b, "{\"page\":%lld,\"page_rows\":%d", page, PAGE_ROWS);
	if (!rows_into(c, b, "items",
		       "SELECT queue, id, topic, key, type, attempts, "
		       "to_char(failed_at, 'YYYY-MM-DD HH24:MI:SS') AS "
		       "failed_at, left(last_error, 300) AS last_error, "
		       "left(payload::text, 120) AS payload FROM "
		       "pgoutbox.dead_letters WHERE ($1 = '' OR queue = $1) "
		       "AND ($2 = '' OR id::text = $2 OR strpos(key, $2) > 0 "
		       "OR strpos(type, $2) > 0 OR strpos(topic, $2) > 0) "
		       "ORDER BY failed_at DESC, queue, id DESC LIMIT 50 "
		       "OFFSET $3::bigint",
		       3, p, &status) ||
	    !rows_into(c, b, "total",
		       "SELECT count(*) AS n FROM pgoutbox.dead_letters WHERE "
		       "($1 = '' OR queue = $1) AND ($2 = '' OR id::text = $2 "
		       "OR strpos(key, $2) > 0 OR strpos(type, $2) > 0 OR "
		       "strpos(topic, $2) > 0)",
		       2, p, &status) ||
	    !rows_into(c, b, "queues",
		       "SELECT queue, count(*) AS n FROM pgoutbox.dead_letters "
		       "GROUP BY queue ORDER BY queue",
		       0, NULL, &status))
		return status;
	pgo_buf_puts(b, "}");
	return 200;
}

static unsigned api_dead_item(pgo_console_t *c, const console_req_t *r,
			      pgo_buf_t *b)
{
	const char *name = r->get(r->ctx, "queue");
	char kind[16], ids[24];
	const char *p[2] = {name, ids};
	long long id;
	unsigned status;

	if ((status = queue_arg(c, name, kind, sizeof(kind), b)))
		return status;
	if (!num_arg(r->get(r->ctx, "id"), 1, INT64_MAX, 0, &id) || id < 1) {
		json_error(b, "id: a whole number from 1");
		return 400;
	}
	snprintf(ids, sizeof(ids), "%lld", id);
	pgo_buf_puts(b, "{\"queue\":");
	pgo_buf_json_str(b, name);
	if (!rows_into(c, b, "item",
		       "SELECT queue, id, topic, key, type, payload, headers, "
		       "created_at::text, attempts, last_error, "
		       "failed_at::text FROM pgoutbox.dead_letters WHERE "
		       "queue = $1 AND id = $2::bigint",
		       2, p, &status))
		return status;
	pgo_buf_puts(b, "}");
	return 200;
}

/* BEGIN, or the error in b. */
static bool begin(pgo_console_t *c, pgo_buf_t *b)
{
	char why[512];
	PGresult *res = console_query(c, "BEGIN", 0, NULL, why, sizeof(why));

	if (!res)
		json_error(b, "%s", why);
	PQclear(res);
	return res != NULL;
}

/* COMMIT (ok) or ROLLBACK; false with the error in b when COMMIT fails. */
static bool end(pgo_console_t *c, bool ok, pgo_buf_t *b)
{
	char why[512];
	PGresult *res = console_query(c, ok ? "COMMIT" : "ROLLBACK", 0, NULL,
				      why, sizeof(why));

	if (!res && ok)
		json_error(b, "%s", why);
	PQclear(res);
	return res != NULL && ok;
}

/* The checked queue and ids of a dead-letter action; 0 or the status. */
static unsigned dead_args(pgo_console_t *c, const console_req_t *r,
			  long long *ids, int *n, pgo_buf_t *b)
{
	char kind[16];
	unsigned status;

	if ((status = queue_arg(c, r->get(r->ctx, "queue"), kind, sizeof(kind),
				b)))
		return status;
	*n = ids_arg(r->get(r->ctx, "ids"), ids);
	if (*n < 0) {
		json_error(b,
			   "ids: 1 to %d ids (whole numbers from 1) "
			   "separated by commas",
			   IDS_MAX);
		return 400;
	}
	return 0;
}

/* POST /api/dead/retry queue=Q&ids=1,2: each back into its queue with
 * pgo_queue_retry (`pgoutbox queue retry`), all in one transaction. */
static unsigned act_retry(pgo_console_t *c, const console_req_t *r,
			  pgo_buf_t *b)
{
	const char *queue = r->get(r->ctx, "queue");
	long long ids[IDS_MAX];
	pgo_error_t err = {0};
	unsigned status;
	int n, rc = PGO_OK, i;

	if ((status = dead_args(c, r, ids, &n, b)))
		return status;
	if (!begin(c, b))
		return 503;
	for (i = 0; i < n && rc == PGO_OK; i++)
		rc = pgo_queue_retry(c->db->conn, queue, ids[i], &err);
	if (rc != PGO_OK) {
		end(c, false, b);
		json_error(b, "nothing retried: %s", err.msg);
		return rc == PGO_ERR_INVALID ? 404 : 503;
	}
	if (!end(c, true, b))
		return 503;
	pgo_log(PGO_LOG_INFO, c->subject,
		"%s (from %s) retried %d dead letter(s) of queue %s%s%s: %s",
		r->session->who, r->from, n, queue,
		c->fleet ? " in database " : "", c->db->name,
		r->get(r->ctx, "ids"));
	pgo_buf_printf(b, "{\"retried\":%d}", n);
	return 200;
}

/* POST /api/dead/discard queue=Q&ids=1,2: deleted for good, all or none
 * (what `pgoutbox queue purge --dead` does to all of them). */
static unsigned act_discard(pgo_console_t *c, const console_req_t *r,
			    pgo_buf_t *b)
{
	const char *queue = r->get(r->ctx, "queue");
	long long ids[IDS_MAX];
	pgo_buf_t arr;
	char why[512];
	const char *p[2];
	unsigned status;
	PGresult *res;
	int n, got;

	if ((status = dead_args(c, r, ids, &n, b)))
		return status;
	pgo_buf_init(&arr);
	pgo_buf_puts(&arr, "{");
	for (int i = 0; i < n; i++)
		pgo_buf_printf(&arr, "%s%lld", i ? "," : "", ids[i]);
	pgo_buf_puts(&arr, "}");
	p[0] = queue;
	p[1] = arr.data;
	if (arr.oom || !begin(c, b)) {
		pgo_buf_free(&arr);
		if (arr.oom)
			json_error(b, "out of memory");
		return 503;
	}
	res = console_query(
		c,
		"DELETE FROM pgoutbox.dead_letters WHERE queue = $1 "
		"AND id = ANY($2::bigint[])",
		2, p, why, sizeof(why));
	pgo_buf_free(&arr);
	got = res ? atoi(PQcmdTuples(res)) : -1;
	PQclear(res);
	if (got != n) {
		end(c, false, b);
		if (got < 0)
			json_error(b, "nothing discarded: %s", why);
		else
			json_error(b,
				   "nothing discarded: %d of the %d ids are "
				   "no dead letter of queue %s",
				   n - got, n, queue);
		return got < 0 ? 503 : 404;
	}
	if (!end(c, true, b))
		return 503;
	pgo_log(PGO_LOG_INFO, c->subject,
		"%s (from %s) discarded %d dead letter(s) of queue %s%s%s: "
		"%s",
		r->session->who, r->from, n, queue,
		c->fleet ? " in database " : "", c->db->name,
		r->get(r->ctx, "ids"));
	pgo_buf_printf(b, "{\"discarded\":%d}", n);
	return 200;
}

/* --- cron --- */

/* The NEXT TICK column of pgo_cron_list()'s lines (`pgoutbox cron
 * list`: the same computation, zones included), as "name":"next". */
static void cron_next_json(pgo_console_t *c, pgo_buf_t *b)
{
	char *text = NULL, line[1024];
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	pgo_error_t err;
	bool first = true;

	pgo_buf_puts(b, ",\"next\":{");
	if (f && pgo_cron_list(c->db->conn, f, &err) == PGO_OK) {
		fflush(f);
		rewind(f);
		if (fgets(line, sizeof(line), f)) /* the header */
			while (fgets(line, sizeof(line), f)) {
				char *tok[64];
				int nt = 0;

				for (char *s = strtok(line, " \n");
				     s && nt < 64; s = strtok(NULL, " \n"))
					tok[nt++] = s;
				/* NAME ... LAST NEXT overlap= missed= */
				if (nt < 7)
					continue;
				pgo_buf_puts(b, first ? "" : ",");
				first = false;
				pgo_buf_json_str(b, tok[0]);
				pgo_buf_puts(b, ":");
				pgo_buf_json_str(b, tok[nt - 3]);
			}
	}
	if (f)
		fclose(f);
	free(text);
	pgo_buf_puts(b, "}");
}

static unsigned api_cron(pgo_console_t *c, const console_req_t *r, pgo_buf_t *b)
{
	const char *name = r->get(r->ctx, "name");
	const char *p[1] = {name};
	unsigned status;

	if (strlen(name) > 100) {
		json_error(b, "name: at most 100 characters");
		return 400;
	}
	pgo_buf_puts(b, "{\"pause_supported\":true");
	if (!rows_into(c, b, "schedules",
		       "SELECT name, expr, tz, queue, payload, overlap, "
		       "missed, to_char(last_tick AT TIME ZONE 'UTC', "
		       "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS last_tick, "
		       "enabled FROM pgoutbox.cron_schedules ORDER BY name",
		       0, NULL, &status))
		return status;
	cron_next_json(c, b);
	if (!rows_into(
		    c, b, "history",
		    "SELECT name, to_char(tick AT TIME ZONE 'UTC', "
		    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS tick, outcome, "
		    "reason, job_id, to_char(recorded_at AT TIME ZONE "
		    "'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS recorded_at "
		    "FROM pgoutbox.cron_history WHERE ($1 = '' OR name = "
		    "$1) ORDER BY recorded_at DESC LIMIT 50",
		    1, p, &status))
		return status;
	pgo_buf_puts(b, "}");
	return 200;
}

/* POST /api/cron/pause|resume name=N: the schedule's enabled flag, which
 * the scheduler reads on every pass (cron.c: WHERE enabled). */
static unsigned cron_set(pgo_console_t *c, const console_req_t *r, pgo_buf_t *b,
			 bool enabled)
{
	const char *name = r->get(r->ctx, "name");
	const char *p[2] = {name, enabled ? "true" : "false"};
	char why[512];
	PGresult *res;
	bool ok = *name && strlen(name) <= 100;

	for (const char *s = name; ok && *s; s++)
		ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		     (*s >= '0' && *s <= '9') || strchr("_.:-", *s);
	if (!ok) {
		json_error(b, "name: 1 to 100 of A-Z a-z 0-9 _ . : -");
		return 400;
	}
	res = console_query(c,
			    "UPDATE pgoutbox.cron_schedules SET enabled = "
			    "$2::boolean WHERE name = $1",
			    2, p, why, sizeof(why));
	if (!res) {
		json_error(b, "%s", why);
		return 503;
	}
	ok = strcmp(PQcmdTuples(res), "1") == 0;
	PQclear(res);
	if (!ok) {
		json_error(b, "no schedule named \"%s\"", name);
		return 404;
	}
	pgo_log(PGO_LOG_INFO, c->subject, "%s (from %s) %s schedule %s%s%s",
		r->session->who, r->from, enabled ? "resumed" : "paused", name,
		c->fleet ? " in database " : "", c->db->name);
	pgo_buf_printf(b, "{\"enabled\":%s}", enabled ? "true" : "false");
	return 200;
}

static unsigned act_pause(pgo_console_t *c, const console_req_t *r,
			  pgo_buf_t *b)
{
	return cron_set(c, r, b, false);
}

static unsigned act_resume(pgo_console_t *c, const console_req_t *r,
			   pgo_buf_t *b)
{
	return cron_set(c, r, b, true);
}

/* --- the routes --- */

static const struct {
	const char *path;
	console_api_fn fn;
	bool action;
} routes[] = {
	{"overview", api_overview, false},   {"queue", api_queue, false},
	{"item", api_item, false},	     {"dead", api_dead, false},
	{"dead/item", api_dead_item, false}, {"dead/retry", act_retry, true},
	{"dead/discard", act_discard, true}, {"cron", api_cron, false},
	{"cron/pause", act_pause, true},     {"cron/resume", act_resume, true},
};

console_api_fn console_api_find(const char *path, bool *action)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (strcmp(routes[i].path, path) == 0) {
			*action = routes[i].action;
			return routes[i].fn;
		}
	return NULL;
}
