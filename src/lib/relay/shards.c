/*
 * shards.c — who relays a queue: membership in every mode, shard leases
 * in the ordered and strict modes.
 *
 * Membership: slot 0 of every relay beats (pgoutbox.relay_beat(),
 * sql/016_queues_named.sql) every relay.heartbeat, which keeps the
 * relay's row in pgoutbox.relays with its mode and returns the live
 * relays of the queue that run another mode.  The first beat, before any
 * claim, refuses to join them (the relay stops, exit 2); a relay of
 * another mode that appears later is logged at ERROR and counted in
 * pgoutbox_relay_mode_conflicts.  The row is written only when it gets
 * old, so a beat is one short statement and no batch pays for it.
 *
 * Leases: each connection of an ordered or strict relay is a member that
 * holds leases on a fair share of the queue's shards.  A lease is a
 * session-level advisory lock in pgoutbox's own two-integer key space,
 * taken on the same connection that claims the shard: when the
 * connection dies, its transaction and its leases end together, and other
 * members take the shards at their next heartbeat.  The lease round is one
 * call of pgoutbox.rebalance() (sql/002_ordered.sql): heartbeat, count the
 * live members, release the surplus, take free shards, bump their epochs.
 * It runs between cycles only, so a shard is never released mid-batch.
 * On slot 0 the beat rides in front of it, in the same round.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"

static const char *mode_name(int mode)
{
	return mode == PGO_MODE_STRICT	  ? "strict"
	       : mode == PGO_MODE_ORDERED ? "ordered"
					  : "concurrent";
}

void pgo_shards_init(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	snprintf(s->leases.member, sizeof(s->leases.member), "%s/%d",
		 v->name && *v->name ? v->name : "relay", s->idx);
	s->leases.shards = strdup("{}");
	s->leases.epochs = strdup("{}");
	s->leases.map = strdup("{}");
	s->leases.n = 0;
	s->leases.next_round = 0;
}

void pgo_shards_free(slot_t *s)
{
	free(s->leases.shards);
	free(s->leases.epochs);
	free(s->leases.map);
	s->leases.shards = s->leases.epochs = s->leases.map = NULL;
}

void pgo_shards_reset(pgo_relay_t *r, slot_t *s)
{
	if (s->leases.n)
		pgo_log(pgo_outage_on(pgo_outage_of(r->subject)) ? PGO_LOG_DEBUG
								 : PGO_LOG_INFO,
			r->subject,
			"member %s lost its %d lease%s with its connection",
			s->leases.member, s->leases.n,
			s->leases.n == 1 ? "" : "s");
	s->leases.n = 0;
	if (s->leases.shards)
		strcpy(s->leases.shards, "{}");
	if (s->leases.epochs)
		strcpy(s->leases.epochs, "{}");
	if (s->leases.map)
		strcpy(s->leases.map, "{}");
	s->leases.next_round = 0;
}

/* Whether the slot runs membership rounds at all: every connection of
 * the ordered modes (each holds leases), slot 0 of a concurrent relay
 * (its beat), unless relay_beat() is refused to it. */
static bool member_slot(const pgo_relay_t *r, const slot_t *s)
{
	return r->mode != PGO_MODE_CONCURRENT ||
	       (s->idx == 0 && !r->members.beat_off);
}

int64_t pgo_shards_next(const pgo_relay_t *r, const slot_t *s)
{
	if (!member_slot(r, s) || s->state != SLOT_IDLE ||
	    s->conn.state != PGO_CONN_READY ||
	    (s->idx > 0 && !r->members.checked))
		return 0;
	/* A past due time must not read as "none". */
	return s->leases.next_round ? s->leases.next_round : 1;
}

bool pgo_shards_due(pgo_relay_t *r, slot_t *s, int64_t now)
{
	int64_t due = pgo_shards_next(r, s);

	return due && now >= due;
}

bool pgo_shards_send(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	char stale[32];
	const char *params[5] = {v->queue, s->leases.member, mode_name(r->mode),
				 stale, r->members.checked ? "false" : "true"};

	/* A member silent for lease_timeout is fenced by the others, and
	 * is no longer counted as a relay of its mode. */
	snprintf(stale, sizeof(stale), "%lld milliseconds",
		 (long long)v->lease_timeout);
	/* First, so that a refused first beat aborts the lease round
	 * behind it: a relay refused takes no shard. */
	s->leases.beating = s->idx == 0 && !r->members.beat_off;
	/* The round is one transaction.  The beat deletes the rows of the
	 * members whose session is gone and refreshes its own; the lease
	 * round behind it then waits for the queue's rebalance lock.
	 * Another slot's lease round takes them the other way round:
	 * rebalance() holds that lock and deletes the same rows.  After a
	 * server restart every member's row is of a gone session, and the
	 * two deadlocked ("lease round failed: deadlock detected", issue
	 * 44).  So the lock comes first, as in rebalance() and a joining
	 * beat. */
	s->leases.locking = s->leases.beating && r->mode != PGO_MODE_CONCURRENT;
	if (s->leases.locking)
		pgo_conn_query(&s->conn,
			       "SELECT pg_catalog.pg_advisory_xact_lock("
			       "pg_catalog.hashtext('pgoutbox.rebalance.' || "
			       "$1::text), 0)",
			       1, params);
	if (s->leases.beating)
		pgo_conn_query(&s->conn,
			       "SELECT other_member, other_mode, other_pid "
			       "FROM pgoutbox.relay_beat($1, $2, $3, "
			       "$4::interval, $5::boolean)",
			       5, params);
	/* The fourth column: who held the lease before this round.  The
	 * statement's snapshot predates what rebalance() writes, so it reads
	 * the owner rebalance() replaced (takeovers, pgo_shards_foreign()). */
	if (r->mode != PGO_MODE_CONCURRENT)
		pgo_conn_query(
			&s->conn,
			"SELECT r.shard, r.epoch, (SELECT max(l.shard) + 1 "
			"FROM pgoutbox.shard_leases l WHERE l.queue = $1), "
			"(SELECT l.owner FROM pgoutbox.shard_leases l "
			"WHERE l.queue = $1 AND l.shard = r.shard) "
			"FROM pgoutbox.rebalance($1, $2, $3, $4::interval) r",
			4, params);
	return pgo_conn_send(&s->conn) == PGO_OK;
}

/* The live relays of the queue in another mode, from a beat that
 * worked: logged at ERROR when the list changes and once a minute while
 * it stays, counted in the gauge. */
static void report_conflicts(pgo_relay_t *r, const PGresult *res)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	int n = PQntuples(res);
	int64_t now = pgo_now_ms();
	pgo_buf_t list;

	pgo_observe_mode_conflicts(r, n);
	if (n == 0) {
		if (r->members.conflicts[0])
			pgo_log(PGO_LOG_INFO, r->subject,
				"no relay of another mode on queue %s any "
				"more",
				v->queue);
		r->members.conflicts[0] = '\0';
		return;
	}
	pgo_buf_init(&list);
	for (int i = 0; i < n; i++)
		pgo_buf_printf(&list, "%s%s (%s)", i ? ", " : "",
			       PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	if (list.oom) {
		pgo_buf_free(&list);
		return;
	}
	if (strncmp(list.data, r->members.conflicts,
		    sizeof(r->members.conflicts) - 1) != 0 ||
	    now - r->members.conflicts_logged >= 60000) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"queue %s is also relayed in another mode: %s; this "
			"relay runs in %s mode, and relays of different modes "
			"on one queue break its per-key order "
			"(docs/ordering.md, \"Mixing modes\"): stop the "
			"relays of one mode and run every relay of the queue "
			"in the other",
			v->queue, list.data, mode_name(r->mode));
		snprintf(r->members.conflicts, sizeof(r->members.conflicts),
			 "%s", list.data);
		r->members.conflicts_logged = now;
	}
	pgo_buf_free(&list);
}

/* The beat's result (the round's first).  False when the round goes no
 * further: the beat failed, or refused this relay (r->members.refused). */
static bool beat_done(pgo_relay_t *r, slot_t *s, const PGresult *res)
{
	const char *code =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
		r->members.checked = true;
		report_conflicts(r, res);
		return true;
	}
	if (code && strcmp(code, "55006") == 0 && !r->members.checked) {
		/* object_in_use: relays of another mode at our start. */
		snprintf(r->run.errmsg, sizeof(r->run.errmsg), "%s",
			 s->conn.round.err);
		r->run.fatal_code = PGO_ERR_INVALID;
		r->members.refused = true;
		pgo_log(PGO_LOG_ERROR, r->subject, "%s", r->run.errmsg);
		return false;
	}
	if (code && strcmp(code, "42501") == 0) {
		/* Availability first: relay without the check, loudly. */
		r->members.beat_off = true;
		r->members.checked = true;
		s->leases.next_round = 0; /* the lease round it held back */
		pgo_log(PGO_LOG_WARN, r->subject,
			"cannot announce this relay in pgoutbox.relays (%s): "
			"relays of another mode on queue %s go unnoticed; "
			"GRANT EXECUTE ON FUNCTION pgoutbox.relay_beat(text, "
			"text, text, interval, boolean) TO the relay's role",
			s->conn.round.err, pgo_conf_values(r->conf)->queue);
		return false;
	}
	pgo_log(PGO_LOG_WARN, r->subject, "member %s: heartbeat failed: %s",
		s->leases.member, s->conn.round.err);
	return false;
}

/* --- what a lease round changed (pure) --- */

/* The next element of an integer array literal ("{1,2}") from *p on:
 * its text in [*elem, *elem + *len); false at the end. */
static bool next_elem(const char **p, const char **elem, size_t *len)
{
	if (**p == '{')
		(*p)++;
	if (!**p || **p == '}')
		return false;
	*elem = *p;
	*len = strcspn(*p, ",}");
	*p += *len + ((*p)[*len] == ',');
	return true;
}

/* Whether the literal set holds the element [elem, elem + len). */
static bool holds(const char *set, const char *elem, size_t len)
{
	const char *e;
	size_t n;

	while (next_elem(&set, &e, &n))
		if (n == len && strncmp(e, elem, len) == 0)
			return true;
	return false;
}

bool pgo_shards_foreign(const char *owner, const char *member)
{
	const char *slash = strrchr(member, '/');
	size_t relay = slash ? (size_t)(slash - member) + 1 : strlen(member);

	return owner && *owner &&
	       !(strncmp(owner, member, relay) == 0 &&
		 strchr(owner + relay, '/') == NULL);
}

int pgo_shards_missing(const char *set, const char *from)
{
	const char *e;
	size_t len;
	int n = 0;

	while (next_elem(&from, &e, &len))
		n += !holds(set, e, len);
	return n;
}

void pgo_shards_change(const char *old_shards, const char *old_epochs,
		       const char *shards, const char *epochs,
		       pgo_lease_change_t *out)
{
	int before = pgo_shards_missing("{}", old_shards),
	    n = pgo_shards_missing("{}", shards);

	memset(out, 0, sizeof(*out));
	out->changed = strcmp(shards, old_shards) != 0 ||
		       strcmp(epochs, old_epochs) != 0;
	if (!out->changed)
		return;
	out->gained = pgo_shards_missing(old_shards, shards);
	out->released = pgo_shards_missing(shards, old_shards);
	/* A new lease may come with a backlog: claim at once. */
	out->kick = n > 0;
	/* Shards this connection gave up are free now: the relay's other
	 * connections take their share at once rather than at their next
	 * heartbeat (half a second of a backlog idle). */
	out->others_now = n < before;
}

/* The epochs by shard, as the ordered claim reads them: a bigint[]
 * literal whose element shard + 1 is the epoch of an owned shard and NULL
 * for the others ("{NULL,7,7,NULL}": shards 1 and 2 of 4).  It has one
 * element per shard of the queue (all, the lease round's third column),
 * as the claim takes its length for the shard count (claim.c, SHARD_OF).
 * A lookup by subscript costs the claim a few microseconds where a join
 * of the leases with unnest(shards, epochs) cost it about 0.1 ms, a
 * quarter of a one-event claim. */
char *pgo_shards_epoch_map(const char *shards, const char *epochs, int all)
{
	const char **by_shard, *p = shards, *q = epochs, *e, *ep;
	size_t len, elen;
	int n = 0;
	pgo_buf_t map;

	while (next_elem(&p, &e, &len)) {
		int shard = atoi(e);

		if (shard >= n)
			n = shard + 1;
	}
	if (all > n)
		n = all;
	if (!(by_shard = calloc((size_t)n + 1, sizeof(*by_shard))))
		return NULL;
	p = shards;
	while (next_elem(&p, &e, &len) && next_elem(&q, &ep, &elen)) {
		int shard = atoi(e);

		if (shard >= 0)
			by_shard[shard] = ep;
	}
	pgo_buf_init(&map);
	pgo_buf_puts(&map, "{");
	for (int i = 0; i < n; i++) {
		pgo_buf_puts(&map, i ? "," : "");
		if (by_shard[i])
			pgo_buf_printf(&map, "%.*s",
				       (int)strcspn(by_shard[i], ",}"),
				       by_shard[i]);
		else
			pgo_buf_puts(&map, "NULL");
	}
	pgo_buf_puts(&map, "}");
	free(by_shard);
	if (map.oom) {
		pgo_buf_free(&map);
		return NULL;
	}
	return map.data;
}

/* How many leases of the round's result the slot did not hold and
 * another relay did (the fourth column: the owner before the round). */
static int taken_over(const slot_t *s, const PGresult *res)
{
	int n = 0;

	for (int i = 0; i < PQntuples(res); i++) {
		const char *shard = PQgetvalue(res, i, 0);

		if (!holds(s->leases.shards, shard, strlen(shard)) &&
		    pgo_shards_foreign(PQgetisnull(res, i, 3)
					       ? NULL
					       : PQgetvalue(res, i, 3),
				       s->leases.member))
			n++;
	}
	return n;
}

void pgo_shards_done(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	PGresult *res;
	pgo_buf_t shards, epochs;
	int n, before = s->leases.n;
	pgo_lease_change_t change;
	int first =
		s->leases.locking ? 1 : 0; /* the beat's result (lock before) */

	s->leases.next_round = pgo_now_ms() + v->heartbeat;
	if (s->leases.beating && (!beat_done(r, s, s->conn.round.res[first]) ||
				  r->mode == PGO_MODE_CONCURRENT)) {
		pgo_conn_round_clear(&s->conn);
		return;
	}
	res = s->conn.round.res[first + (s->leases.beating ? 1 : 0)];
	if (s->conn.round.failed || !res) {
		pgo_log(PGO_LOG_WARN, r->subject,
			"member %s: lease round failed: %s", s->leases.member,
			s->conn.round.err);
		pgo_conn_round_clear(&s->conn);
		return;
	}
	n = PQntuples(res);
	pgo_buf_init(&shards);
	pgo_buf_init(&epochs);
	pgo_buf_puts(&shards, "{");
	pgo_buf_puts(&epochs, "{");
	for (int i = 0; i < n; i++) {
		pgo_buf_puts(&shards, i ? "," : "");
		pgo_buf_puts(&shards, PQgetvalue(res, i, 0));
		pgo_buf_puts(&epochs, i ? "," : "");
		pgo_buf_puts(&epochs, PQgetvalue(res, i, 1));
	}
	pgo_buf_puts(&shards, "}");
	pgo_buf_puts(&epochs, "}");
	if (shards.oom || epochs.oom) {
		pgo_buf_free(&shards);
		pgo_buf_free(&epochs);
		pgo_conn_round_clear(&s->conn);
		return;
	}
	pgo_shards_change(s->leases.shards, s->leases.epochs, shards.data,
			  epochs.data, &change);
	if (change.changed) {
		char *map = pgo_shards_epoch_map(shards.data, epochs.data,
						 n ? atoi(PQgetvalue(res, 0, 2))
						   : 0);

		if (!map) {
			pgo_buf_free(&shards);
			pgo_buf_free(&epochs);
			pgo_conn_round_clear(&s->conn);
			return;
		}
		free(s->leases.map);
		s->leases.map = map;
		if (r->mode == PGO_MODE_STRICT)
			pgo_log(PGO_LOG_INFO, r->subject, "member %s %s",
				s->leases.member,
				n ? "is the leader now"
				  : "is on standby: another relay leads");
		else if (n != before)
			/* One line a change of share; the list at debug (a
			 * deploy rebalances dozens of times). */
			pgo_log(pgo_outage_on(pgo_outage_of(r->subject))
					? PGO_LOG_DEBUG
					: PGO_LOG_INFO,
				r->subject,
				"member %s owns %d shard%s (was %d)",
				s->leases.member, n, n == 1 ? "" : "s", before);
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"member %s shards %s epochs %s", s->leases.member,
			shards.data, epochs.data);
		pgo_observe_takeovers(r, taken_over(s, res));
		free(s->leases.shards);
		free(s->leases.epochs);
		s->leases.shards = shards.data;
		s->leases.epochs = epochs.data;
		if (change.kick)
			r->sched.kick = true;
		if (change.others_now)
			for (int i = 0; i < r->nslots; i++)
				if (&r->slots[i] != s)
					r->slots[i].leases.next_round = 0;
	} else {
		pgo_buf_free(&shards);
		pgo_buf_free(&epochs);
	}
	s->leases.n = n;
	if (r->mode == PGO_MODE_STRICT && n > 0)
		snprintf(s->leases.leader_epoch, sizeof(s->leases.leader_epoch),
			 "%s", PQgetvalue(res, 0, 1));
	pgo_conn_round_clear(&s->conn);
}

bool pgo_shards_leave_send(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *params[2] = {v->queue, s->leases.member};

	/* At shutdown only: a short blocking call on an idle connection,
	 * so that the others need not wait to see this member gone.  Sent
	 * here, its answer waited for by pgo_shards_leave_finish(): a
	 * fleet sends every database's before it waits for any. */
	if (!member_slot(r, s) || s->conn.state != PGO_CONN_READY ||
	    !PQexitPipelineMode(s->conn.pg) ||
	    PQsetnonblocking(s->conn.pg, 0) != 0 ||
	    !PQsendQueryParams(s->conn.pg, "SELECT pgoutbox.leave($1, $2)", 2,
			       NULL, params, NULL, NULL, 0))
		return false;
	s->leases.leaving = true;
	return true;
}

void pgo_shards_leave_finish(pgo_relay_t *r, slot_t *s)
{
	PGresult *res;

	if (!s->leases.leaving)
		return;
	s->leases.leaving = false;
	while ((res = PQgetResult(s->conn.pg))) {
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			pgo_log(PGO_LOG_WARN, r->subject,
				"member %s: leave: %s", s->leases.member,
				pgo_pq_msg(s->conn.pg, res));
		PQclear(res);
	}
}

void pgo_shards_leave(pgo_relay_t *r, slot_t *s)
{
	if (pgo_shards_leave_send(r, s))
		pgo_shards_leave_finish(r, s);
}
