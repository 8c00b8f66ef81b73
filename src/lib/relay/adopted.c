/*
 * adopted.c — relaying a table the application already has
 * (`pgoutbox adopt`, sql/013_adopt.sql, docs/adopt.md).
 *
 * pgoutbox.adopted holds the map: the table, its bigint event id column,
 * and SQL expressions over its row for the topic, key, type, payload,
 * headers and creation time, the predicate of pending rows and what
 * "done" is (DELETE, or an assignment).  The relay reads it once when it
 * is created and builds every statement of its cycle from it, with the
 * parameters and result columns of the statements claim.c builds for
 * pgoutbox's own queues, so cycle.c runs both alike:
 *
 *   claim   SELECT the oldest pending rows that no retry, halt or dead
 *           letter holds back (pgoutbox.adopted_state), in the three
 *           modes; concurrent locks them FOR UPDATE SKIP LOCKED, the
 *           ordered modes rely on their leases as claim.c's do.  The rows
 *           stay as they are: nothing is written at the claim.
 *   done    the acknowledged events get the map's `done` in the settle
 *           round, inside the claim transaction, and lose their state
 *           row; a crash before COMMIT leaves them pending.
 *   retry,  the state row (attempts, run_at, error; dead, for dead
 *   dead    letters, which also go to pgoutbox.dead_letters): the
 *           application's table changes only by `done`.
 *
 * Reading the map is the one blocking step (pgo_adopted_load(), called by
 * pgo_relay_new() before the loop runs; a fleet's relay reads it in a
 * thread, start.c); building is pure.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/error.h"
#include "base/log.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"

/* The map's columns, in the order pgo_adopted_load() selects them. */
enum {
	M_TBL,
	M_EID,
	M_TOPIC,
	M_KEY,
	M_TYPE,
	M_PAYLOAD,
	M_HEADERS,
	M_CREATED,
	M_PENDING,
	M_DONE,
	M_CHANNEL,
	M_SHARD_COL,
	M_SHARDS,
	M_RELID,   /* the table's oid (capture wal: pgoutput's relation) */
	M_CAPTURE, /* table or wal (wal.c streams it) */
	M_N
};

static const char *map(const pgo_relay_t *r, int col)
{
	return PQgetvalue(r->adopted, 0, col);
}

/* Whether claims of pgoutbox's own queue name are fair across keys
 * (pgoutbox.set_queue(name, fair => true)): read once, at start; a
 * relay started before the change claims as before until restarted. */
static bool read_fair(PGconn *pg, const char *name)
{
	PGresult *res = PQexecParams(
		pg, "SELECT fair FROM pgoutbox.queue_controls WHERE queue = $1",
		1, NULL, &name, NULL, NULL, 0);
	bool fair = PQresultStatus(res) == PGRES_TUPLES_OK &&
		    PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';

	PQclear(res);
	return fair;
}

void pgo_adopted_read(PGconn *pg, const char *name, pgo_adopted_found_t *out)
{
	PGresult *res;

	memset(out, 0, sizeof(*out));
	res = PQexecParams(pg,
			   "SELECT tbl_sql, event_id, topic_sql, key_sql, "
			   "type_sql, payload_sql, headers_sql, created_sql, "
			   "pending_sql, done_sql, channel, shard_col, shards, "
			   "tbl::oid, pgoutbox.queue_capture(name) "
			   "FROM pgoutbox.adopted_map($1)",
			   1, NULL, &name, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		out->map = res;
		return;
	}
	/* No such row: one of pgoutbox's own queues. */
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		snprintf(out->warn, sizeof(out->warn),
			 "cannot read whether queue %s is an adopted table "
			 "(%s): relaying it as pgoutbox.%s",
			 name, pgo_pq_msg(pg, res), name);
	PQclear(res);
	out->fair = read_fair(pg, name);
}

int pgo_adopted_apply(pgo_relay_t *r, pgo_adopted_found_t *found,
		      pgo_error_t *err)
{
	const char *name = pgo_conf_values(r->conf)->queue;

	if (found->warn[0])
		pgo_log(PGO_LOG_WARN, r->subject, "%s", found->warn);
	r->fair = found->fair;
	if (r->fair)
		pgo_log(PGO_LOG_INFO, r->subject,
			"claims are fair across keys (set_queue fair)");
	PQclear(r->adopted);
	r->adopted = found->map;
	found->map = NULL;
	if (r->adopted && r->mode == PGO_MODE_ORDERED &&
	    PQgetisnull(r->adopted, 0, M_SHARD_COL) && !pgo_adopted_wal(r))
		return pgo_error_set(
			err, PGO_ERR_INVALID, 0,
			"queue %s was adopted with --shards 0 (no shard "
			"column): relay it with --mode concurrent or strict, "
			"or adopt it again with shards for the ordered mode",
			name);
	return PGO_OK;
}

int pgo_adopted_load(pgo_relay_t *r, pgo_error_t *err)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	char timeout[24];
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	const char *name = v->queue;
	pgo_adopted_found_t found;
	PGconn *pg;

	pgo_conn_params(r->conf, r->app_name, keys, vals, timeout);
	pg = PQconnectdbParams(keys, vals, 1);
	/* The relay's first connection: what no retry fixes (conn.c's
	 * rule) is refused here, before anything else is said. */
	if (pg && PQstatus(pg) != CONNECTION_OK &&
	    pgo_conn_start_refusal(r->conf, pgo_pq_msg(pg, NULL), true, err) !=
		    PGO_OK) {
		PQfinish(pg);
		return PGO_ERR_CONFIG;
	}
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		/* Nothing can be relayed without the database; the slots
		 * will wait for it.  Until then the queue is taken for one
		 * of pgoutbox's own (docs/adopt.md says so). */
		pgo_log(PGO_LOG_WARN, r->subject,
			"cannot read whether queue %s is an adopted table "
			"(%s): relaying it as pgoutbox.%s",
			name, pg ? pgo_pq_msg(pg, NULL) : "out of memory",
			name);
		PQfinish(pg);
		return PGO_OK;
	}
	/* A schema missing or of another version is refused here too, as
	 * the first thing said (the slots would say it after "starting"). */
	if (pgo_schema_check(pg, err) == PGO_ERR_SCHEMA) {
		PQfinish(pg);
		return PGO_ERR_SCHEMA;
	}
	pgo_adopted_read(pg, name, &found);
	PQfinish(pg);
	return pgo_adopted_apply(r, &found, err);
}

bool pgo_adopted_wal(const pgo_relay_t *r)
{
	return r->adopted && strcmp(map(r, M_CAPTURE), "wal") == 0;
}

const char *pgo_adopted_map(const pgo_relay_t *r, pgo_adopted_col_t col)
{
	static const int cols[] = {M_TBL,     M_EID,	 M_TOPIC,
				   M_KEY,     M_TYPE,	 M_PAYLOAD,
				   M_HEADERS, M_CREATED, M_RELID};

	return map(r, cols[col]);
}

void pgo_adopted_free(pgo_relay_t *r)
{
	PQclear(r->adopted);
	r->adopted = NULL;
}

/* The claim's result columns (claim.c's order) over alias t. */
static void columns(const pgo_relay_t *r, const char *q, char *out, size_t n)
{
	const char *eid = map(r, M_EID);

	snprintf(out, n,
		 "t.%s, %s, %s, %s, %s, %s, %s, "
		 "coalesce((SELECT s.attempts FROM pgoutbox.adopted_state s "
		 "WHERE s.queue = '%s' AND s.id = t.%s), 0), %s%s, "
		 "coalesce(octet_length((%s)::text), 0)::bigint",
		 eid, map(r, M_TOPIC), map(r, M_KEY), map(r, M_TYPE),
		 map(r, M_PAYLOAD), map(r, M_HEADERS), map(r, M_CREATED), q,
		 eid, PQgetisnull(r->adopted, 0, M_SHARD_COL) ? "0" : "t.",
		 PQgetisnull(r->adopted, 0, M_SHARD_COL) ? ""
							 : map(r, M_SHARD_COL),
		 map(r, M_PAYLOAD));
}

/* The ordered modes: the rows of the inner query c that no state row
 * holds back (itself waiting, or an older live one of its key; strict:
 * any older live one). */
static void claim_held(pgo_relay_t *r, const char *q, const char *cols,
		       const char *cond, bool by_key)
{
	snprintf(r->sql.claim, sizeof(r->sql.claim),
		 "SELECT c.* FROM (SELECT %s FROM %s t WHERE (%s) AND %s) "
		 "c(id, topic, key, type, payload, headers, created_at, "
		 "attempts, shard, bytes) "
		 "WHERE NOT EXISTS (SELECT 1 FROM pgoutbox.adopted_state b "
		 "WHERE b.queue = '%s' AND b.run_at > now() AND (b.id = c.id "
		 "OR (NOT b.dead AND %sb.id < c.id))) "
		 "ORDER BY c.id LIMIT $1",
		 cols, map(r, M_TBL), map(r, M_PENDING), cond, q,
		 by_key ? "b.key = c.key AND " : "");
}

/* The claim statement of the relay's mode. */
static void build_claim(pgo_relay_t *r, const char *q, const char *cols)
{
	const char *eid = map(r, M_EID);
	const char *shard_col = PQgetisnull(r->adopted, 0, M_SHARD_COL)
					? NULL
					: map(r, M_SHARD_COL);
	char cond[1024];

	switch (r->mode) {
	case PGO_MODE_CONCURRENT:
		/* $2: the floor (0: adopted tables have none). */
		snprintf(r->sql.claim, sizeof(r->sql.claim),
			 "SELECT %s FROM %s t WHERE (%s) AND t.%s >= "
			 "$2::bigint AND NOT EXISTS (SELECT 1 FROM "
			 "pgoutbox.adopted_state s WHERE s.queue = '%s' AND "
			 "s.id = t.%s AND s.run_at > now()) "
			 /* $3, relay.batch_bytes: not applied here */
			 "AND $3::bigint IS NOT NULL "
			 "ORDER BY t.%s LIMIT $1 FOR UPDATE OF t SKIP LOCKED",
			 cols, map(r, M_TBL), map(r, M_PENDING), eid, q, eid,
			 eid);
		break;
	case PGO_MODE_ORDERED:
		/* $2 the epochs of this connection's leases by shard
		 * (shards.c), $3 the floor. */
		snprintf(cond, sizeof(cond),
			 "t.%s >= $3::bigint AND t.%s = ANY(ARRAY("
			 "SELECT l.shard FROM pgoutbox.shard_leases l "
			 "WHERE l.queue = '%s' AND "
			 "l.epoch = ($2::bigint[])[l.shard + 1])) "
			 "AND t.%s <> ALL(ARRAY(SELECT h.shard FROM "
			 "pgoutbox.adopted_state h WHERE h.queue = '%s' AND "
			 "h.run_at = 'infinity' AND NOT h.dead)) "
			 /* $4, relay.batch_bytes: not applied here */
			 "AND $4::bigint IS NOT NULL",
			 eid, shard_col, q, shard_col, q);
		claim_held(r, q, cols, cond, true);
		break;
	default:
		/* $2: the epoch of the leader lease, $3 the floor. */
		snprintf(cond, sizeof(cond),
			 "t.%s >= $3::bigint AND EXISTS (SELECT 1 FROM "
			 "pgoutbox.shard_leases l WHERE l.queue = '%s' AND "
			 "l.shard = -1 AND l.epoch = $2::bigint) "
			 /* $4, relay.batch_bytes: not applied here */
			 "AND $4::bigint IS NOT NULL",
			 eid, q);
		claim_held(r, q, cols, cond, false);
		break;
	}
}

/* LISTEN on the channel, as a quoted identifier. */
static void build_listen(pgo_relay_t *r)
{
	const char *ch = map(r, M_CHANNEL);
	size_t o = 0, cap = sizeof(r->sql.listen);

	o = (size_t)snprintf(r->sql.listen, cap, "LISTEN \"");
	for (; *ch && o + 3 < cap; ch++) {
		if (*ch == '"')
			r->sql.listen[o++] = '"';
		r->sql.listen[o++] = *ch;
	}
	r->sql.listen[o++] = '"';
	r->sql.listen[o] = '\0';
}

/* The settle round's statements: a retry, a dead letter. */
static void build_settle(pgo_relay_t *r, const char *q)
{
	char shard[96];

	if (!PQgetisnull(r->adopted, 0, M_SHARD_COL))
		snprintf(shard, sizeof(shard), "pgoutbox.shard_of(key, id, %s)",
			 map(r, M_SHARDS));
	else
		snprintf(shard, sizeof(shard), "NULL::integer");
		/* The settle round, with the parameters of claim.c's statements
		 * (payload and headers as text: an adopted payload need not be
		 * JSON). */
#define UNNEST                                                                 \
	"unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "            \
	"$5::text[], $6::text[], $7::timestamptz[], $8::bigint[], $9::int[], " \
	"$10::text[]) AS u(id, topic, key, type, payload, headers, "           \
	"created_at, delay_ms, attempts, err)"
	snprintf(r->sql.retry, sizeof(r->sql.retry),
		 "INSERT INTO pgoutbox.adopted_state AS s (queue, id, key, "
		 "shard, attempts, run_at, last_error) "
		 "SELECT '%s', id, key, %s, attempts, CASE WHEN delay_ms < 0 "
		 "THEN 'infinity'::timestamptz ELSE now() + delay_ms * "
		 "interval '1 millisecond' END, err FROM " UNNEST
		 " ON CONFLICT (queue, id) DO UPDATE SET key = EXCLUDED.key, "
		 "shard = EXCLUDED.shard, attempts = EXCLUDED.attempts, "
		 "run_at = EXCLUDED.run_at, last_error = EXCLUDED.last_error, "
		 "dead = false",
		 q, shard);
	snprintf(r->sql.dead, sizeof(r->sql.dead),
		 "WITH u AS (SELECT * FROM " UNNEST "), "
		 "s AS (INSERT INTO pgoutbox.adopted_state (queue, id, key, "
		 "shard, attempts, run_at, last_error, dead) "
		 "SELECT '%s', id, key, %s, attempts, 'infinity', err, true "
		 "FROM u ON CONFLICT (queue, id) DO UPDATE SET "
		 "attempts = EXCLUDED.attempts, run_at = 'infinity', "
		 "last_error = EXCLUDED.last_error, dead = true) "
		 "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, "
		 "type, payload, headers, created_at, attempts, last_error) "
		 "SELECT id, '%s', coalesce(topic, ''), key, coalesce(type, "
		 "''), coalesce(pgoutbox.adopted_jsonb(payload), 'null'), "
		 "coalesce(pgoutbox.adopted_jsonb(headers), '{}'), "
		 "created_at, attempts, err FROM u "
		 "ON CONFLICT (queue, id) DO UPDATE SET attempts = "
		 "EXCLUDED.attempts, last_error = EXCLUDED.last_error, "
		 "failed_at = now()",
		 q, shard, q);
#undef UNNEST
}

void pgo_adopted_build_sql(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *q = v->queue, *eid = map(r, M_EID);
	char cols[2048];
	bool del = strcmp(map(r, M_DONE), "delete") == 0;

	columns(r, q, cols, sizeof(cols));
	build_claim(r, q, cols);
	build_listen(r);
	build_settle(r, q);
	/* $1: the acknowledged event ids.  Only pending rows: the pending
	 * index finds them, and a row that is no longer pending (the
	 * application marked it) is left alone. */
	snprintf(r->sql.done, sizeof(r->sql.done),
		 "WITH s AS (DELETE FROM pgoutbox.adopted_state WHERE queue = "
		 "'%s' AND id = ANY($1::bigint[])) "
		 "%s%s%s%s WHERE %s = ANY($1::bigint[]) AND (%s)",
		 q, del ? "DELETE FROM " : "UPDATE ", map(r, M_TBL),
		 del ? "" : " SET ", del ? "" : map(r, M_DONE), eid,
		 map(r, M_PENDING));
}
