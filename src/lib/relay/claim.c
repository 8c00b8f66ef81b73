/*
 * claim.c — what a relay slot claims and how, in the three modes.
 *
 * Round 1 claims: BEGIN; DELETE ... WHERE id = ANY(ARRAY(SELECT ...))
 * RETURNING the rows.  The rows leave the queue inside the claim
 * transaction, so anything that ends it without COMMIT (a crash, a lost
 * connection, a failed settle) puts them back.
 *   concurrent  the oldest due rows, FOR UPDATE SKIP LOCKED: relays and
 *               slots never wait for each other; no order.
 *   ordered     the oldest due rows of the shards this connection leases,
 *               with the lease epochs checked (fencing: a stale epoch
 *               claims nothing; no lock is needed, since a lease lives on
 *               this very connection and cannot move while its
 *               transaction is open);
 *               a row waits while an older row of its key waits for a
 *               retry, and a halted shard gives nothing.
 *   strict      the oldest due rows of the whole queue for the one leader;
 *               any row waiting for a retry holds back every later row.
 * Every mode claims from the claim floor up (sql/006_claim_floor.sql): no
 * fresh row has a lower id, so the index scan skips the entries of rows
 * already deleted, which a held xmin keeps from being cleaned; rows that
 * failed before are taken below it from a small partial index, and
 * fresh rows put below it by hand from the heap pages a sweep reads, a
 * few per claim (TID range).  floor.c moves the floor, on a connection
 * of its own.
 * A paused outbox (pgoutbox.pause(), a row of pgoutbox.queue_controls)
 * claims nothing: every mode's batch is gated by one lookup of the
 * queue's row (paused_sql), an InitPlan run once per claim whose false
 * one-time filter keeps the scans below it from running at all.
 * Round 2 settles: retried rows go back in with their ids (attempts + 1,
 * a later run_at, the error), dead ones go to dead letters, then COMMIT.
 *
 * An adopted table (adopted.c) gets statements of its own with the same
 * parameters (but the sweep's) and result columns.
 * This file only builds: the SQL texts, each claim's parameters, the batch
 * from the claimed rows, the settle statements' parameters.  The rules
 * are in settle.c; cycle.c sends the rounds and moves the slot along.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "queue/queue.h"

/* The columns a claim returns, in this order. */
enum {
	COL_ID,
	COL_TOPIC,
	COL_KEY,
	COL_TYPE,
	COL_PAYLOAD,
	COL_HEADERS,
	COL_CREATED,
	COL_ATTEMPTS,
	COL_SHARD,
	COL_BYTES
};

/* An event's bytes for relay.batch_bytes: its texts as stored, and a
 * compressed payload or headers value (pg_column_size() would give its
 * compressed size) as the text the relay receives.  p: the table alias
 * with its dot, or "". */
#define EVENT_BYTES(p)                                                         \
	"(CASE WHEN pg_column_compression(" p "payload) IS NULL THEN "         \
	"pg_column_size(" p "payload) ELSE octet_length(" p "payload::text) "  \
	"END + CASE WHEN pg_column_compression(" p "headers) IS NULL THEN "    \
	"pg_column_size(" p "headers) ELSE octet_length(" p "headers::text) "  \
	"END + octet_length(" p "topic) + coalesce(octet_length(" p            \
	"key), 0) "                                                            \
	"+ octet_length(" p "type))"

/* The shard of a row p (the table alias with its dot, or ""), in the
 * ordered claim: pgoutbox.shard_of(key, id, shards) (sql/002_ordered.sql),
 * which the table no longer stores (sql/017_lighter_rows.sql).  The
 * planner inlines it (the claim's plan is made once), so no row pays a
 * function call.  The shard count is the length of the epoch map $2,
 * which has one element per shard of the queue (shards.c); before the
 * first lease round the map is empty and no row is claimed. */
#define SHARD_OF(p)                                                            \
	"pgoutbox.shard_of(" p "key, " p "id, "                                \
	"greatest(cardinality($2::bigint[]), 1))"

/* The claim's result; its %s is the shard (SHARD_OF, or NULL::integer in
 * the modes without shards). */
#define RETURNING                                                              \
	" RETURNING id, topic, key, type, payload, headers, created_at, "      \
	"attempts, %s, " EVENT_BYTES("")

/* The ids of candidate rows u(id, sz), in id order, up to the one whose
 * bytes reach the byte cap (param bytes): "SELECT w.id FROM (" BYTE_CUT_A
 * rows BYTE_CUT_B(...). */
#define BYTE_CUT_A                                                             \
	"SELECT w.id FROM (SELECT u.id, sum(u.sz) OVER (ORDER BY u.id) - "     \
	"u.sz AS before FROM ("

/* What "due" is measured against: the clock read once, after the claim's
 * snapshot, not now() (the transaction's start).  A row's run_at defaults
 * to its own transaction's start, and transactions start in one order and
 * commit in another: a producer that began before the claim's transaction
 * but committed after an earlier event of its key (whose transaction began
 * later) left a later event due and the earlier one "not yet due" to a
 * claim whose snapshot sees both, and the ordered claim took the later
 * event alone (tests/integration/t_ordered_run_at.sh).  Every committed
 * row's transaction started before its commit, so before the snapshot,
 * so before this reading. */
#define CLOCK "WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now) "
#define NOW   "(SELECT t.now FROM t)"

/* No claim while queue q is paused (sql/schema/functions/pause.sql): a
 * condition on no row, so the planner makes it a one-time filter over
 * the batch's scans; a claim that starts after the pause's COMMIT takes
 * nothing, and resume()'s notification wakes the relay. */
static void paused_sql(char *buf, size_t size, const char *q)
{
	snprintf(buf, size,
		 " AND NOT EXISTS (SELECT FROM pgoutbox.queue_controls p "
		 "WHERE p.queue = '%s' AND p.paused)",
		 q);
}

/* Rows that went back to the queue after a failure (retried, held back,
 * halted, or put back from dead letters): claimed below the floor. */
#define BEHIND	 "(attempts > 0 OR last_error IS NOT NULL)"
#define BEHIND_C "(c.attempts > 0 OR c.last_error IS NOT NULL)"

/* The sweep's part of a claim: the fresh rows below the floor (put there
 * by hand) on the heap pages [lo, hi) (tid parameters; '(0,0)' twice: no
 * page).  A TID range scan reads those pages and nothing else, however
 * many dead entries the index holds below the floor, so each claim's
 * share of a sweep costs the same.  `id + 0`: no index may serve the
 * range, or the planner could walk the primary key below the floor
 * instead (the very walk the sweep must not do); the OFFSET 0 fence
 * keeps the ORDER BY from asking the index for the order. */
#define SWEPT(q, lo, hi, floor, cond)                                          \
	"SELECT x.id, x.sz FROM (SELECT c.id, " EVENT_BYTES(                   \
		"c.") " AS sz FROM pgoutbox.\"" q "\" c WHERE c.ctid >= " lo   \
		      "::tid AND c.ctid < " hi "::tid AND c.id + 0 < " floor   \
		      " AND c.attempts = 0 AND c.last_error IS NULL AND " cond \
		      " OFFSET 0) x ORDER BY x.id LIMIT $1"

/* The ordered modes: the oldest due rows at or above the floor, those
 * failed before below it, and those the sweep finds below it, so the
 * batch stays the oldest due rows of each shard (no fresh row is below
 * the floor but the ones put there by hand). */
static void claim_union(pgo_relay_sql_t *sql, const char *q, const char *cond,
			const char *floor, const char *bytes, const char *lo,
			const char *hi, const char *shard)
{
	char paused[256];

	paused_sql(paused, sizeof(paused), q);
	snprintf(sql->claim, sizeof(sql->claim),
		 CLOCK
		 "DELETE FROM pgoutbox.\"%s\" WHERE id = ANY(ARRAY(" BYTE_CUT_A
		 "(SELECT c.id, " EVENT_BYTES(
			 "c.") " AS sz FROM "
			       "pgoutbox.\"%s\" c WHERE c.id >= %s AND "
			       "%s ORDER BY c.id LIMIT $1) UNION ALL "
			       "(SELECT c.id, " EVENT_BYTES(
				       "c.") " AS sz FROM "
					     "pgoutbox.\"%s\" c WHERE " BEHIND_C
					     " AND c.id < %s AND %s ORDER BY "
					     "c.id LIMIT $1) UNION ALL "
					     "(" SWEPT("%s", "%s", "%s", "%s",
						       "%s") ")"
							     ") u ORDER BY "
							     "u.id LIMIT $1) w "
							     "WHERE w.before < "
							     "%s%s))" RETURNING,
		 q, q, floor, cond, q, floor, cond, q, lo, hi, floor, cond,
		 bytes, paused, shard);
}

/* The relay's settings as one statement, for the session (local
 * "false") or for the transaction at hand ("true", through a transaction
 * pooler: session state would stay on a server connection producers get
 * next).  Timestamps in UTC and ISO for the events' created_at, floats in
 * full.  And no sequential or bitmap scans: a queue table swings between
 * empty and a large backlog, and between few and millions of dead rows,
 * so its statistics mislead the planner, and each time it turned a
 * backlog into a collapse: a cached plan made while the table looked tiny
 * scanned the whole heap once per claimed row (the NOT EXISTS of the
 * ordered claim); with a floor past the histogram's last id, a bitmap
 * scan read the whole backlog and sorted it to keep 1,000 rows.  A claim
 * is an index scan in id order and every table it reads has the index it
 * needs.  (enable_sort = off as well cost a fifth of the drain rate.)
 * And no JIT: a claim planned again (an ANALYZE of the outbox, or of
 * shard_leases, invalidates its plan) while the table holds millions of
 * dead rows costs more than jit_above_cost, and every execution of that
 * plan compiled its expressions first: 0.2 s to over 1 s of CPU per
 * claim of 1,000 rows, for as long as the plan lived (issue 21).  And the
 * generic plan from the first claim on: a plan never made for the
 * floor's value of the moment, so where the floor is cannot change it;
 * the settings above leave every plan one shape. */
/* And the relay's commits do not wait for the WAL flush unless
 * relay.synchronous_commit is on: everything a relay commits (a claim
 * with its acks, a retry, a dead letter, a lease) is redone if a server
 * crash undoes it, as after a relay killed between the sink's ack and
 * the commit: the events go out again, none is lost, and a crash loses
 * the newest WAL only, so what it undoes is the last acks, in order.
 * Each ack waited for a flush of its own before: producers and relay
 * took turns on the disk (send() with a relay listening 0.30 of a plain
 * INSERT; 0.54 without the wait), and most of the steady workload's
 * slowest windows were COMMITs in LWLock:WALWrite (issue 21).  The
 * floor is reset with a lost connection (pgo_floor_reset) so that
 * a row an undone ack brought back is claimed from id 0 again. */
static void settings_sql(char *buf, size_t size,
			 const struct pgo_conf_values *v, const char *local)
{
	snprintf(buf, size,
		 "SELECT set_config('TimeZone', 'UTC', %1$s), "
		 "set_config('DateStyle', 'ISO, YMD', %1$s), "
		 "set_config('extra_float_digits', '3', %1$s), "
		 "set_config('enable_seqscan', 'off', %1$s), "
		 "set_config('enable_bitmapscan', 'off', %1$s), "
		 "set_config('jit', 'off', %1$s), "
		 "set_config('plan_cache_mode', 'force_generic_plan', %1$s), "
		 "set_config('synchronous_commit', '%5$s', %1$s), "
		 "set_config('statement_timeout', '%2$lld', %1$s), "
		 "set_config('lock_timeout', '%3$lld', %1$s), "
		 "set_config('idle_in_transaction_session_timeout', '%4$lld', "
		 "%1$s)",
		 local, (long long)v->statement_timeout,
		 (long long)v->lock_timeout, (long long)v->idle_tx_timeout,
		 v->sync_commit ? "on" : "off");
}

/* The concurrent claim: the oldest due rows, FOR UPDATE SKIP LOCKED. */
static void claim_concurrent(pgo_relay_sql_t *sql, const char *q)
{
	char paused[256];

	paused_sql(paused, sizeof(paused), q);
	/* $2: the floor, $4 and $5 the sweep's pages.  Rows failed
	 * before come first, from the small partial index below the
	 * floor, then those the sweep finds below it. */
	snprintf(sql->claim, sizeof(sql->claim),
		 CLOCK ", behind AS (SELECT id, " EVENT_BYTES(
			 "") " AS sz "
			     "FROM pgoutbox.\"%s\" "
			     "WHERE " BEHIND " AND id < $2 AND run_at <= " NOW
			     " "
			     "ORDER BY id LIMIT $1 FOR UPDATE SKIP "
			     "LOCKED), "
			     "swept AS (SELECT id, " EVENT_BYTES(
				     "") " AS sz FROM pgoutbox.\"%s\" "
					 "WHERE ctid >= $4::tid AND "
					 "ctid < $5::tid AND id + 0 < "
					 "$2 AND attempts = 0 AND "
					 "last_error IS NULL AND "
					 "run_at <= " NOW
					 " LIMIT $1 - (SELECT count(*) "
					 "FROM behind) FOR UPDATE SKIP "
					 "LOCKED), "
					 "fresh AS (SELECT "
					 "id, " EVENT_BYTES(
						 "") " AS sz "
						     "FROM "
						     "pgoutbox.\"%s\" "
						     "WHERE "
						     "id >= $2 AND "
						     "run_at <= " NOW
						     " ORDER BY id "
						     "LIMIT $1 - "
						     "(SELECT "
						     "count(*) FROM "
						     "behind) - "
						     "(SELECT count(*) "
						     "FROM swept) FOR "
						     "UPDATE SKIP "
						     "LOCKED) "
						     "DELETE FROM "
						     "pgoutbox.\"%s\" "
						     "WHERE id = ANY("
						     "ARRAY(" BYTE_CUT_A
						     "SELECT id, sz "
						     "FROM behind "
						     "UNION ALL SELECT "
						     "id, sz FROM "
						     "swept UNION ALL "
						     "SELECT id, sz "
						     "FROM fresh) u) w "
						     "WHERE w.before < "
						     "$3%s))" RETURNING,
		 q, q, q, q, paused, "NULL::integer");
}

/* The concurrent claim of a fair queue (set_queue(q, fair => true)):
 * fresh rows round-robin across keys.  Rows failed before and those the
 * sweep finds come first, as in the plain claim; the room left is shared
 * by groups: each key with pending rows (the first $1 keys of a skip
 * scan of the index q_fair on (key, id), partial on key IS NOT NULL,
 * made by set_queue) gives at most a share of the room, its oldest due
 * rows; the oldest due rows whatever their key (rows without a key
 * among them) fill the rest, and at least one: the batch is full when
 * few keys are pending, and every claim takes the queue's oldest row (no
 * key starves behind the skip scan's first $1 keys).  The batch is the
 * candidates in turn order (each group's first, then each group's
 * second, ...), then id, cut at the room and the byte cap.  A key with
 * 100,000 pending rows gives another's first row no more than one claim
 * of delay.  With more keys than the room, candidates left out (one per
 * key at most) stay locked until the claim's COMMIT; other slots skip
 * them.  q_fair is partial so that no scan by id can take it: the
 * generic plan of a table whose statistics were taken small took it for
 * the oldest rows and for the DELETE's id = ANY(...), reading the whole
 * index (1.4 s a claim). */
/* The fair claim's text: %1$s the queue, %2$s the pause's condition. */
#define EB  EVENT_BYTES("")
#define EBC EVENT_BYTES("c.")
static const char fair_claim[] = CLOCK
	", behind AS (SELECT id, " EB " AS sz FROM pgoutbox.\"%1$s\" "
	"WHERE " BEHIND " AND id < $2 AND run_at <= " NOW " "
	"ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED), "
	"swept AS (SELECT id, " EB " AS sz FROM pgoutbox.\"%1$s\" "
	"WHERE ctid >= $4::tid AND ctid < $5::tid AND id + 0 < $2 "
	"AND attempts = 0 AND last_error IS NULL AND run_at <= " NOW " "
	"LIMIT $1 - (SELECT count(*) FROM behind) FOR UPDATE SKIP LOCKED), "
	"room AS MATERIALIZED (SELECT $1 - (SELECT count(*) FROM behind) "
	"- (SELECT count(*) FROM swept) AS n), "
	/* The keys: a skip scan of q_fair, the first $1. */
	"keys AS MATERIALIZED (WITH RECURSIVE k AS ("
	"(SELECT key FROM pgoutbox.\"%1$s\" WHERE key IS NOT NULL AND "
	"id >= $2 ORDER BY key LIMIT 1) UNION ALL "
	"SELECT (SELECT x.key FROM pgoutbox.\"%1$s\" x WHERE x.key > k.key "
	"AND x.id >= $2 ORDER BY x.key LIMIT 1) FROM k WHERE k.key IS NOT "
	"NULL) "
	"SELECT key FROM k WHERE key IS NOT NULL LIMIT $1), "
	/* A group's share: the room over the keys and the oldest.  A
	 * key's rows are read from q_fair in its order: a row comparison
	 * and ORDER BY key, id that the primary key cannot serve (with
	 * key = k.key the generic plan walked the primary key from the
	 * floor, filtering on the key: every row of a's backlog to find
	 * b's, 40-60 ms a claim). */
	"share AS MATERIALIZED (SELECT least((SELECT n FROM room), "
	"greatest(1, ((SELECT n FROM room) + (SELECT count(*) FROM keys)) / "
	"((SELECT count(*) FROM keys) + 1))) AS n), "
	"rr AS MATERIALIZED (SELECT f.id, f.sz, row_number() OVER "
	"(PARTITION BY f.key ORDER BY f.id) AS turn FROM ("
	"SELECT x.id, x.key, x.sz FROM keys k CROSS JOIN LATERAL ("
	"SELECT c.id, c.key, " EBC " AS sz FROM pgoutbox.\"%1$s\" c "
	"WHERE (c.key, c.id) >= (k.key, $2) AND c.key <= k.key AND "
	"c.run_at <= " NOW " ORDER BY c.key, c.id "
	"LIMIT (SELECT n FROM share) FOR UPDATE SKIP LOCKED) x) f), "
	/* The oldest rows the keys' shares left, the room's rest, and
	 * always one: every claim takes the queue's oldest row.  No room
	 * (rows failed before fill the batch): no candidate is locked. */
	"oldest AS (SELECT id, " EB " AS sz FROM pgoutbox.\"%1$s\" "
	"WHERE id >= $2 AND run_at <= " NOW " AND id NOT IN "
	"(SELECT id FROM rr) ORDER BY id LIMIT greatest(least(1, (SELECT n "
	"FROM room)), (SELECT n FROM room) - (SELECT count(*) FROM rr)) "
	"FOR UPDATE SKIP LOCKED), "
	"fresh AS (SELECT id, sz, turn FROM (SELECT id, sz, turn FROM rr "
	"UNION ALL SELECT id, sz, row_number() OVER (ORDER BY id) FROM "
	"oldest) z ORDER BY turn, id LIMIT (SELECT n FROM room)) "
	"DELETE FROM pgoutbox.\"%1$s\" WHERE id = ANY(ARRAY("
	"SELECT w.id FROM (SELECT u.id, sum(u.sz) OVER (ORDER BY u.turn, "
	"u.id) - u.sz AS before FROM (SELECT id, sz, 0 AS turn FROM behind "
	"UNION ALL SELECT id, sz, 0 FROM swept UNION ALL SELECT id, sz, turn "
	"FROM fresh) u) w WHERE w.before < $3%2$s)) "
	"RETURNING id, topic, key, type, payload, headers, created_at, "
	"attempts, NULL::integer, " EB;
#undef EB
#undef EBC

static void claim_concurrent_fair(pgo_relay_sql_t *sql, const char *q)
{
	char paused[256];

	paused_sql(paused, sizeof(paused), q);
	snprintf(sql->claim, sizeof(sql->claim), fair_claim, q, paused);
}

/* The ordered claim: the oldest due rows of the shards this connection
 * leases, a row waiting while an older row of its key waits. */
static void claim_ordered(pgo_relay_sql_t *sql, const char *q)
{
	char cond[2048];

	/* $2 the epochs of this connection's leases by shard
	 * (element shard + 1; NULL where it owns none: shards.c), $3
	 * the floor, $5 and $6 the sweep's pages.  %1$s and %2$s: the
	 * shard of c and of h. */
	snprintf(cond, sizeof(cond),
		 "%1$s = ANY(ARRAY("
		 "SELECT l.shard FROM pgoutbox.shard_leases l "
		 "WHERE l.queue = '%3$s' AND "
		 "l.epoch = ($2::bigint[])[l.shard + 1])) "
		 "AND %1$s <> ALL(ARRAY(SELECT %2$s FROM "
		 "pgoutbox.\"%3$s\" h WHERE h.attempts > 0 AND "
		 "h.run_at = 'infinity')) "
		 "AND c.run_at <= " NOW " "
		 "AND NOT EXISTS (SELECT 1 FROM pgoutbox.\"%3$s\" b "
		 "WHERE b.attempts > 0 AND b.key = c.key AND b.id < "
		 "c.id AND b.run_at > " NOW ")",
		 SHARD_OF("c."), SHARD_OF("h."), q);
	claim_union(sql, q, cond, "$3", "$4", "$5", "$6", SHARD_OF(""));
}

/* The strict claim: the oldest due rows of the queue for the leader; a
 * row waiting for a retry holds back every later row. */
static void claim_strict(pgo_relay_sql_t *sql, const char *q)
{
	char cond[2048];

	/* $2: the epoch of the leader lease (pseudo-shard -1), $3
	 * the floor, $5 and $6 the sweep's pages. */
	snprintf(cond, sizeof(cond),
		 "EXISTS (SELECT 1 FROM pgoutbox.shard_leases l "
		 "WHERE l.queue = '%s' AND l.shard = -1 AND "
		 "l.epoch = $2::bigint) "
		 "AND c.run_at <= " NOW " "
		 "AND NOT EXISTS (SELECT 1 FROM pgoutbox.\"%s\" b "
		 "WHERE b.attempts > 0 AND b.id < c.id "
		 "AND b.run_at > " NOW ")",
		 q, q);
	claim_union(sql, q, cond, "$3", "$4", "$5", "$6", "NULL::integer");
}

void pgo_claim_sql_build(pgo_relay_sql_t *sql, int mode, bool fair,
			 const struct pgo_conf_values *v)
{
	const char *q = v->queue;

	switch (mode) {
	case PGO_MODE_CONCURRENT:
		if (fair)
			claim_concurrent_fair(sql, q);
		else
			claim_concurrent(sql, q);
		break;
	case PGO_MODE_ORDERED: claim_ordered(sql, q); break;
	default: claim_strict(sql, q); break;
	}
	snprintf(sql->listen, sizeof(sql->listen),
		 "LISTEN \"" PGO_CHANNEL_PREFIX "%s\"", q);
	settings_sql(sql->session, sizeof(sql->session), v, "false");
	settings_sql(sql->local, sizeof(sql->local), v, "true");
	/* A retried event goes back in with its id, its attempts, a later
	 * run_at (never, for a halted one) and the error. */
	snprintf(
		sql->retry, sizeof(sql->retry),
		"INSERT INTO pgoutbox.\"%s\" (id, topic, key, type, payload, "
		"headers, created_at, run_at, attempts, last_error) "
		"SELECT id, topic, key, type, payload, headers, created_at, "
		"CASE WHEN delay_ms < 0 THEN 'infinity'::timestamptz ELSE "
		"now() + delay_ms * interval '1 millisecond' END, attempts, "
		"err "
		"FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "
		"$5::jsonb[], $6::jsonb[], $7::timestamptz[], $8::bigint[], "
		"$9::int[], $10::text[]) AS u(id, topic, key, type, payload, "
		"headers, created_at, delay_ms, attempts, err)",
		q);
	snprintf(
		sql->dead, sizeof(sql->dead),
		"INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, "
		"type, payload, headers, created_at, attempts, last_error) "
		"SELECT id, '%s', topic, key, type, payload, headers, "
		"created_at, attempts, err FROM unnest($1::bigint[], "
		"$2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], "
		"$7::timestamptz[], $8::bigint[], $9::int[], $10::text[]) AS "
		"u(id, topic, key, type, payload, headers, created_at, unused, "
		"attempts, err) ON CONFLICT (queue, id) DO UPDATE SET "
		"attempts = EXCLUDED.attempts, last_error = "
		"EXCLUDED.last_error, failed_at = now()",
		q);
	sql->done[0] = '\0';
}

/* How often a slot sweeps at least (or every poll_interval if shorter):
 * a row inserted with an explicit id below the floor (an event re-sent
 * by hand with its old id) is found within this time and the sweep's
 * length.  A sweep reads the queue's heap, a few pages per claim, from
 * page 0 to the end: what each claim pays is bounded whatever the index
 * holds below the floor (a sweep that claimed from id 0 walked every
 * dead entry there: under a held xmin, seconds, and the batch waited;
 * issue 21).  The pages per claim are sized by time: a sweep's claim
 * may take SWEEP_BUDGET_US longer than the slot's claims without one
 * (their running average); over it the pages halve, under half of it
 * they double, between SWEEP_PAGES_MIN and SWEEP_PAGES_MAX (a fixed 128
 * pages made claims of 35-116 ms after a held xmin, dead rows on every
 * page).  And a sweep keeps a pace: the table's pages spread over the
 * period / SWEEP_SPREAD, and a claim ahead of the pace reads none.
 * While a sweep is due, the slot claims again at once; ahead of its
 * pace, when its next part is due (s->sweep.next), so a sweep ends
 * about half a period after it began, even when no event comes.
 * Without a pace, every claim of a busy slot swept until the table's
 * end: under a held xmin, 3-5 s of claims averaging 4-5 ms instead of
 * 1.5, every slot at once, twice a minute (issue 21).  A pace set by
 * the table's size at the sweep's start, over the whole period, never
 * caught up with a table growing under a held xmin: the slots swept
 * all the time (docs/benchmarks.md, "Afternoon of 2026-12-03"). */
#define FLOOR_SWEEP_MS	  30000
#define SWEEP_SPREAD	  2 /* a sweep spreads over the period / this */
#define SWEEP_PAGES_START 32
#define SWEEP_PAGES_MIN	  4
#define SWEEP_PAGES_MAX	  512
#define SWEEP_BUDGET_US	  2000

void pgo_claim_prepare(pgo_relay_t *r, slot_t *s, int64_t now,
		       pgo_claim_req_t *q)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	int64_t lo = 0, hi = 0;
	bool sweepable;

	memset(q, 0, sizeof(*q));
	s->batch_limit = v->batch;
	snprintf(q->limit, sizeof(q->limit), "%d", v->batch);
	snprintf(q->floor, sizeof(q->floor), "%lld", (long long)r->floor.id);
	/* Only below a floor: none for an adopted table or with
	 * relay.claim_floor off, none yet while it is 0. */
	sweepable = v->claim_floor && !r->adopted && r->floor.id > 0;
	/* The first sweep one period after the floor first rose, not at
	 * once: the slot's claims have come up from id 0 since the start,
	 * so below the floor lie only rows put there by hand since then.
	 * A sweep at once read the whole backlog a relay starts on (or
	 * comes back to after an outage) again, 1 MB per claim, while
	 * draining it: 4 % of the backends' CPU in a drain of 300,000. */
	if (sweepable && s->sweep.at == 0)
		s->sweep.at = now + pgo_claim_poll_ms(r);
	if (!s->sweep.on && sweepable && now >= s->sweep.at) {
		s->sweep.on = true;
		s->sweep.page = 0;
		s->sweep.start = now;
		s->sweep.end = -1;
	}
	if (!sweepable)
		s->sweep.on = false;
	s->sweep.in_claim = s->sweep.on && pgo_claim_sweep_due(r, s, now);
	s->sweep.floor = r->floor.id;
	if (s->sweep.in_claim) {
		if (s->sweep.pages == 0)
			s->sweep.pages = SWEEP_PAGES_START;
		lo = s->sweep.page;
		hi = lo + s->sweep.pages;
	}
	s->sweep.hi = hi;
	snprintf(q->lo, sizeof(q->lo), "(%lld,0)", (long long)lo);
	snprintf(q->hi, sizeof(q->hi), "(%lld,0)", (long long)hi);
	q->pages[0] = s->sweep.in_claim ? v->queue : NULL;
	s->batch_bytes = v->batch_bytes;
	snprintf(q->bytes, sizeof(q->bytes), "%d", v->batch_bytes);
	q->params[0] = q->limit;
	if (r->mode == PGO_MODE_CONCURRENT) {
		q->params[1] = q->floor;
		q->params[2] = q->bytes;
		q->params[3] = q->lo;
		q->params[4] = q->hi;
		q->nparams = 5;
	} else if (r->mode == PGO_MODE_STRICT) {
		q->params[1] = s->leases.leader_epoch;
		q->params[2] = q->floor;
		q->params[3] = q->bytes;
		q->params[4] = q->lo;
		q->params[5] = q->hi;
		q->nparams = 6;
	} else {
		q->params[1] = s->leases.map;
		q->params[2] = q->floor;
		q->params[3] = q->bytes;
		q->params[4] = q->lo;
		q->params[5] = q->hi;
		q->nparams = 6;
	}
	/* An adopted table's statements take no sweep. */
	if (r->adopted)
		q->nparams -= 2;
}

bool pgo_claim_sweep_due(const pgo_relay_t *r, slot_t *s, int64_t now)
{
	int64_t spread = pgo_claim_poll_ms(r) / SWEEP_SPREAD;

	s->sweep.next = 0;
	if (!s->sweep.on)
		return false;
	/* Until the table's size is known, and on a short period, as
	 * fast as the claims go. */
	if (s->sweep.end <= 0 || spread <= 0)
		return true;
	/* Due: the pace (the table's size, as last read, over half the
	 * period) has reached the sweep's next page.  A table that grows
	 * meanwhile (a held xmin keeps every deleted row) speeds it up, so
	 * a sweep still ends about half a period after it began. */
	if (s->sweep.page * spread <= s->sweep.end * (now - s->sweep.start))
		return true;
	s->sweep.next =
		s->sweep.start + s->sweep.page * spread / s->sweep.end + 1;
	return false;
}

bool pgo_claim_full(const slot_t *s, const PGresult *res)
{
	int n = PQntuples(res);
	int64_t bytes = 0;

	if (n >= s->batch_limit)
		return true;
	for (int i = 0; i < n; i++)
		bytes += strtoll(PQgetvalue(res, i, COL_BYTES), NULL, 10);
	return bytes >= s->batch_bytes;
}

int64_t pgo_claim_poll_ms(const pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	return v->claim_floor && v->poll_interval > FLOOR_SWEEP_MS
		       ? FLOOR_SWEEP_MS
		       : v->poll_interval;
}

void pgo_claim_swept(pgo_relay_t *r, slot_t *s, const PGresult *res,
		     const PGresult *pages)
{
	int64_t now = pgo_now_ms(), end = -1,
		us = res && s->t.sent && s->t.claim > s->t.sent
			     ? s->t.claim - s->t.sent
			     : -1;
	int n;

	if (!s->sweep.in_claim) {
		/* The average claim without a sweep, a sixteenth of each
		 * new one. */
		if (us >= 0)
			s->claim_us =
				s->claim_us
					? s->claim_us + (us - s->claim_us) / 16
					: us;
		return;
	}
	s->sweep.in_claim = false;
	if (us >= 0 && us - s->claim_us > SWEEP_BUDGET_US)
		s->sweep.pages = s->sweep.pages / 2 > SWEEP_PAGES_MIN
					 ? s->sweep.pages / 2
					 : SWEEP_PAGES_MIN;
	else if (us >= 0 && us - s->claim_us < SWEEP_BUDGET_US / 2)
		s->sweep.pages = s->sweep.pages * 2 < SWEEP_PAGES_MAX
					 ? s->sweep.pages * 2
					 : SWEEP_PAGES_MAX;
	if (!res) {
		/* The round failed: no sweep again before its time. */
		s->sweep.on = false;
		s->sweep.at = now + pgo_claim_poll_ms(r);
		return;
	}
	n = PQntuples(res);
	if (pages && PQresultStatus(pages) == PGRES_TUPLES_OK &&
	    PQntuples(pages) == 1)
		end = strtoll(PQgetvalue(pages, 0, 0), NULL, 10);
	if (end >= 0)
		s->sweep.end = end;
	if (pgo_claim_full(s, res)) {
		/* Full, with fresh rows from below the floor: the pages
		 * may hold more of them.  Read them again. */
		for (int i = 0; i < n; i++)
			if (strtoll(PQgetvalue(res, i, COL_ID), NULL, 10) <
				    s->sweep.floor &&
			    strcmp(PQgetvalue(res, i, COL_ATTEMPTS), "0") == 0)
				return;
	}
	s->sweep.page = s->sweep.hi;
	/* Without the table's size (the statement failed) the sweep
	 * goes on: the next claim's round asks again. */
	if (end < 0 || s->sweep.page < end)
		return;
	s->sweep.on = false;
	s->sweep.at = now + pgo_claim_poll_ms(r);
	pgo_log(PGO_LOG_DEBUG, r->subject,
		"slot %d: sweep of %lld pages done in %.1f s", s->idx,
		(long long)end, (double)(now - s->sweep.start) / 1000.0);
}

int pgo_claim_index(const slot_t *s)
{
	return 1 + (s->sweep.in_claim ? 1 : 0);
}

int pgo_claim_pages_index(const slot_t *s)
{
	return s->sweep.in_claim ? 0 : -1;
}

/* How long a round trip to PostgreSQL may take: the server's own limit
 * on a statement (the session settings above), plus the lease timeout. */
int64_t pgo_claim_round_limit(const struct pgo_conf_values *v)
{
	return v->statement_timeout + v->lease_timeout;
}

/* "2026-11-30 16:53:33.123456+00" -> "2026-11-30T16:53:33.123456Z" */
static const char *rfc3339(pgo_arena_t *a, const char *pg)
{
	size_t n = strlen(pg);
	char *out = pgo_arena_alloc(a, n + 2);

	if (!out)
		return pg;
	memcpy(out, pg, n + 1);
	if (n > 10 && out[10] == ' ')
		out[10] = 'T';
	if (n > 3 && strcmp(out + n - 3, "+00") == 0)
		strcpy(out + n - 3, "Z");
	return out;
}

static int by_id(const void *a, const void *b)
{
	const pgo_event_t *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* A fleet's relay (fleet.c) names its database in each event's headers
 * ("pgoutbox-source", last, so that it wins over a producer's own):
 * consumers tell the shards apart, and the inbox keys on it.  The
 * headers as they are for a relay of one database, or without memory. */
const char *pgo_claim_source_headers(const pgo_relay_t *r, pgo_arena_t *arena,
				     const char *headers)
{
	size_t n = strlen(headers), add;
	char *out;

	if (!r->database[0])
		return headers;
	while (n && headers[n - 1] != '}')
		n--;
	if (!n)
		return headers; /* not an object: the headers' domain says it is
				 */
	n--;			/* drop the '}' */
	add = strlen(r->database) + 40;
	if (!(out = pgo_arena_alloc(arena, n + add)))
		return headers;
	memcpy(out, headers, n);
	/* "{" alone, or "{..." with keys (jsonb writes no blanks inside). */
	while (n > 1 && (out[n - 1] == ' ' || out[n - 1] == '\n'))
		n--;
	snprintf(out + n, add, "%s\"pgoutbox-source\": \"%s\"}",
		 n > 1 ? ", " : "", r->database);
	return out;
}

int pgo_claim_batch(pgo_relay_t *r, slot_t *s, PGresult *res)
{
	pgo_batch_t *b = &s->batch;
	int n = PQntuples(res);

	s->claimed = res;
	b->n = (size_t)n;
	b->arena = s->arena;
	b->events = pgo_arena_alloc(s->arena, sizeof(*b->events) * b->n);
	b->acks = pgo_arena_alloc(s->arena, sizeof(*b->acks) * b->n);
	b->errors = pgo_arena_alloc(s->arena, sizeof(*b->errors) * b->n);
	s->fix = pgo_arena_alloc(s->arena, sizeof(*s->fix) * b->n);
	if (!b->events || !b->acks || !b->errors || !s->fix)
		return -1;
	for (int i = 0; i < n; i++) {
		pgo_event_t *e = &b->events[i];

		e->id = strtoll(PQgetvalue(res, i, COL_ID), NULL, 10);
		e->topic = PQgetvalue(res, i, COL_TOPIC);
		e->key = PQgetisnull(res, i, COL_KEY)
				 ? NULL
				 : PQgetvalue(res, i, COL_KEY);
		e->type = PQgetvalue(res, i, COL_TYPE);
		e->payload = PQgetvalue(res, i, COL_PAYLOAD);
		e->headers = pgo_claim_source_headers(
			r, s->arena, PQgetvalue(res, i, COL_HEADERS));
		e->created_at =
			rfc3339(s->arena, PQgetvalue(res, i, COL_CREATED));
		/* The row, until sorting: kept in attempts' neighbour. */
		e->attempts = i;
	}
	/* RETURNING order is the executor's; the sink gets id order. */
	qsort(b->events, b->n, sizeof(*b->events), by_id);
	for (size_t i = 0; i < b->n; i++) {
		int row = b->events[i].attempts;

		s->fix[i].row = row;
		b->events[i].attempts =
			atoi(PQgetvalue(res, row, COL_ATTEMPTS));
		b->acks[i] = PGO_ACK_NONE;
		b->errors[i] = NULL;
	}
	return n;
}

/* --- settling: the statements' parameters --- */

int pgo_claim_rows_params(const slot_t *s, pgo_ack_t kind, pgo_buf_t col[10])
{
	const pgo_batch_t *b = &s->batch;
	PGresult *res = s->claimed;
	int count = 0;

	for (int c = 0; c < 10; c++) {
		pgo_buf_init(&col[c]);
		pgo_buf_puts(&col[c], "{");
	}
	for (size_t i = 0; i < b->n; i++) {
		int row = s->fix[i].row;
		char num[32];

		if (b->acks[i] != kind)
			continue;
		if (count++ > 0)
			for (int c = 0; c < 10; c++)
				pgo_buf_puts(&col[c], ",");
		pgo_buf_puts(&col[0], PQgetvalue(res, row, COL_ID));
		for (int c = COL_TOPIC; c <= COL_HEADERS; c++)
			pgo_buf_array_elem(&col[c],
					   PQgetisnull(res, row, c)
						   ? NULL
						   : PQgetvalue(res, row, c));
		pgo_buf_array_elem(&col[6], PQgetvalue(res, row, COL_CREATED));
		snprintf(num, sizeof(num), "%lld",
			 (long long)s->fix[i].delay_ms);
		pgo_buf_puts(&col[7], num);
		snprintf(num, sizeof(num), "%d", s->fix[i].attempts);
		pgo_buf_puts(&col[8], num);
		pgo_buf_array_elem(&col[9],
				   b->errors[i] ? b->errors[i] : "failed");
	}
	for (int c = 0; c < 10; c++) {
		pgo_buf_puts(&col[c], "}");
		if (col[c].oom)
			count = -1;
	}
	return count;
}

bool pgo_claim_ids(const pgo_batch_t *b, bool ok, pgo_buf_t *ids)
{
	pgo_buf_init(ids);
	pgo_buf_puts(ids, "{");
	for (size_t i = 0; i < b->n; i++) {
		if ((b->acks[i] == PGO_ACK_OK) != ok)
			continue;
		pgo_buf_printf(ids, "%s%lld", ids->len > 1 ? "," : "",
			       (long long)b->events[i].id);
	}
	pgo_buf_puts(ids, "}");
	return !ids->oom;
}

/* "" in the modes without shards (strict, concurrent). */
const char *pgo_claim_shard_of(const slot_t *s, size_t i)
{
	return PQgetvalue(s->claimed, s->fix[i].row, COL_SHARD);
}
