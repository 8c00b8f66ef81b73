/*
 * shards.c — ordered and strict modes: each relay connection is a member
 * that holds leases on a fair share of the queue's shards.
 *
 * A lease is a session-level advisory lock in pgoutbox's own two-integer
 * key space, taken on the same connection that claims the shard: when the
 * connection dies, its transaction and its leases end together, and other
 * members take the shards at their next heartbeat.  The lease round is one
 * call of pgoutbox.rebalance() (sql/002_ordered.sql): heartbeat, count the
 * live members, release the surplus, take free shards, bump their epochs.
 * It runs between cycles only, so a shard is never released mid-batch.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"

static const char *mode_name(int mode)
{
	return mode == PGO_MODE_STRICT ? "strict" : "ordered";
}

void pgo_shards_init(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	snprintf(s->member, sizeof(s->member), "%s/%d",
		 v->name && *v->name ? v->name : "relay", s->idx);
	s->owned_shards = strdup("{}");
	s->owned_epochs = strdup("{}");
	s->nowned = 0;
	s->next_rebalance = 0;
}

void pgo_shards_free(slot_t *s)
{
	free(s->owned_shards);
	free(s->owned_epochs);
	s->owned_shards = s->owned_epochs = NULL;
}

void pgo_shards_reset(pgo_relay_t *r, slot_t *s)
{
	if (s->nowned)
		pgo_log(PGO_LOG_INFO, r->subject,
			"member %s lost its %d lease%s with its connection",
			s->member, s->nowned, s->nowned == 1 ? "" : "s");
	s->nowned = 0;
	if (s->owned_shards)
		strcpy(s->owned_shards, "{}");
	if (s->owned_epochs)
		strcpy(s->owned_epochs, "{}");
	s->next_rebalance = 0;
}

bool pgo_shards_due(pgo_relay_t *r, slot_t *s, int64_t now)
{
	return r->mode != PGO_MODE_CONCURRENT && s->state == SLOT_IDLE &&
	       s->conn.state == PGO_CONN_READY && now >= s->next_rebalance;
}

bool pgo_shards_send(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	char stale[32];
	const char *params[4] = {v->queue, s->member, mode_name(r->mode),
				 stale};

	/* A member silent for lease_timeout is fenced by the others. */
	snprintf(stale, sizeof(stale), "%lld milliseconds",
		 (long long)v->lease_timeout);
	pgo_conn_query(
		&s->conn,
		"SELECT shard, epoch FROM pgoutbox.rebalance($1, $2, $3, "
		"$4::interval)",
		4, params);
	return pgo_conn_send(&s->conn) == PGO_OK;
}

/* How many shards of the lease round's result the old set ("{1,2}")
 * did not hold. */
static int gained(const char *old, const PGresult *res)
{
	int n = 0;

	for (int i = 0; i < PQntuples(res); i++) {
		const char *shard = PQgetvalue(res, i, 0), *p = old + 1;
		size_t len = strlen(shard);
		bool held = false;

		while (*p && *p != '}' && !held) {
			size_t w = strcspn(p, ",}");

			held = w == len && strncmp(p, shard, len) == 0;
			p += w + (p[w] == ',');
		}
		n += !held;
	}
	return n;
}

void pgo_shards_done(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	PGresult *res = s->conn.round.res[0];
	pgo_buf_t shards, epochs;
	int n, before = s->nowned;

	s->next_rebalance = pgo_now_ms() + v->heartbeat;
	if (s->conn.round.failed || !res) {
		pgo_log(PGO_LOG_WARN, r->subject,
			"member %s: lease round failed: %s", s->member,
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
	if (strcmp(shards.data, s->owned_shards) != 0 ||
	    strcmp(epochs.data, s->owned_epochs) != 0) {
		if (r->mode == PGO_MODE_STRICT)
			pgo_log(PGO_LOG_INFO, r->subject, "member %s %s",
				s->member,
				n ? "is the leader now"
				  : "is on standby: another relay leads");
		else if (n != before)
			/* One line a change of share; the list at debug (a
			 * deploy rebalances dozens of times). */
			pgo_log(PGO_LOG_INFO, r->subject,
				"member %s owns %d shard%s (was %d)", s->member,
				n, n == 1 ? "" : "s", before);
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"member %s shards %s epochs %s", s->member, shards.data,
			epochs.data);
		pgo_observe_takeovers(r, gained(s->owned_shards, res));
		free(s->owned_shards);
		free(s->owned_epochs);
		s->owned_shards = shards.data;
		s->owned_epochs = epochs.data;
		/* A new lease may come with a backlog: claim at once. */
		if (n > 0)
			r->kick = true;
		/* Shards this connection gave up are free now: the relay's
		 * other connections take their share at once rather than at
		 * their next heartbeat (half a second of a backlog idle). */
		if (n < before)
			for (int i = 0; i < r->nslots; i++)
				if (&r->slots[i] != s)
					r->slots[i].next_rebalance = 0;
	} else {
		pgo_buf_free(&shards);
		pgo_buf_free(&epochs);
	}
	s->nowned = n;
	if (r->mode == PGO_MODE_STRICT && n > 0)
		snprintf(s->leader_epoch, sizeof(s->leader_epoch), "%s",
			 PQgetvalue(res, 0, 1));
	pgo_conn_round_clear(&s->conn);
}

void pgo_shards_leave(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *params[2] = {v->queue, s->member};
	PGresult *res;

	/* At shutdown only: a short blocking call on an idle connection,
	 * so that the others need not wait to see this member gone. */
	if (r->mode == PGO_MODE_CONCURRENT || s->conn.state != PGO_CONN_READY ||
	    !PQexitPipelineMode(s->conn.pg) ||
	    PQsetnonblocking(s->conn.pg, 0) != 0)
		return;
	res = PQexecParams(s->conn.pg, "SELECT pgoutbox.leave($1, $2)", 2, NULL,
			   params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		pgo_log(PGO_LOG_WARN, r->subject, "member %s: leave: %s",
			s->member, pgo_pq_msg(s->conn.pg, res));
	PQclear(res);
}
