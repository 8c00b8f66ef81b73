/*
 * cycle.c — a relay slot's state machine, the only code that moves
 * slot->state:
 *
 *   IDLE -> CLAIMING      round 1: [table size;] BEGIN; claim
 *        -> PUBLISHING    the sink holds the batch (submit ... done)
 *        -> SETTLING      round 2: retries, dead letters, COMMIT
 *        -> IDLE
 *   IDLE -> REBALANCING   a lease round (ordered, strict)  -> IDLE
 *   IDLE -> CHORE         maintenance or a health check (slot 0) -> IDLE
 *
 * A claim that comes back empty, failed or without memory ends its
 * transaction (COMMIT or ROLLBACK) through SETTLING as well.  Losing the
 * connection anywhere ends the cycle: the server rolls the claim back, so
 * the batch is claimed again later.  claim.c builds the statements,
 * settle.c decides, shards.c keeps the leases; this file sends and moves.
 * The decisions themselves are pure functions at the top (the
 * transitions, what a claim's answer and the sink's verdicts lead to),
 * so that tests/unit/test_cycle.c can try each one without a server.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

/* --- the transitions (pure) --- */

slot_state_t pgo_slot_next(slot_state_t from, slot_event_t ev)
{
	switch (ev) {
	case SLOT_EV_CLAIM_SENT:
		return from == SLOT_IDLE ? SLOT_CLAIMING : from;
	case SLOT_EV_LEASE_SENT:
		return from == SLOT_IDLE ? SLOT_REBALANCING : from;
	case SLOT_EV_CHORE_SENT: return from == SLOT_IDLE ? SLOT_CHORE : from;
	case SLOT_EV_ROWS:
		return from == SLOT_CLAIMING ? SLOT_PUBLISHING : from;
	case SLOT_EV_END_TX:
		return from == SLOT_CLAIMING || from == SLOT_PUBLISHING
			       ? SLOT_SETTLING
			       : from;
	case SLOT_EV_VERDICTS:
		return from == SLOT_PUBLISHING ? SLOT_SETTLING : from;
	case SLOT_EV_SETTLE_FAILED:
		return from == SLOT_SETTLING ? SLOT_SETTLING : from;
	case SLOT_EV_SETTLED: return from == SLOT_SETTLING ? SLOT_IDLE : from;
	case SLOT_EV_ROUND_DONE:
		return from == SLOT_REBALANCING || from == SLOT_CHORE
			       ? SLOT_IDLE
			       : from;
	case SLOT_EV_SEND_FAILED:
	case SLOT_EV_LOST:
	case SLOT_EV_ABANDONED: return SLOT_IDLE;
	}
	return from;
}

void pgo_cycle_claim_outcome(int mode, wake_state_t wake, int n, bool full,
			     bool wake_claim, int dry_wakes,
			     pgo_claim_outcome_t *out)
{
	/* A full batch says more is waiting: claim again at once.  In
	 * concurrent mode every slot shares the queue, so all may help; in
	 * the ordered modes only this slot's shards are known to be busy.
	 * While the relay holds no sleeper lock (wake.c) producers do not
	 * notify, so any batch does, and in the ordered modes every slot
	 * claims again (a slot that found nothing looks once more each
	 * time another found something) until all come back dry; then the
	 * relay asks for the lock.  While it holds the lock or waits for
	 * it, producers notify and the grant's NOTIFY kicks a claim. */
	bool awake = wake == WAKE_AWAKE || wake == WAKE_RELEASING;

	out->more = full || (awake && n > 0);
	/* Woken by producers while asleep, every connection claims (the
	 * event may be in any one's shards); one whose claims keep coming
	 * back dry goes cold (relay.c). */
	out->went_cold = false;
	if (n > 0)
		dry_wakes = 0;
	else if (wake_claim)
		out->went_cold = ++dry_wakes == COLD_AFTER;
	out->dry_wakes = dry_wakes;
	if (mode == PGO_MODE_CONCURRENT)
		out->relay_more = out->more;
	else if (wake != WAKE_OFF)
		out->relay_more = awake && n > 0;
	else
		out->relay_more = -1;
}

int64_t pgo_cycle_backoff(int64_t backoff, int64_t max)
{
	backoff = backoff ? backoff * 2 : 100;
	return backoff > max ? max : backoff;
}

unsigned pgo_cycle_round2(const pgo_settle_plan_t *plan, bool adopted)
{
	unsigned what = 0;

	if (plan->unavailable)
		return PGO_ROUND2_ROLLBACK;
	if ((plan->n_retry || plan->n_dead) && !adopted)
		what |= PGO_ROUND2_UNARCHIVE;
	if (plan->n_ok && adopted)
		what |= PGO_ROUND2_DONE;
	if (plan->n_retry)
		what |= PGO_ROUND2_RETRY;
	if (plan->n_dead)
		what |= PGO_ROUND2_DEAD;
	return what | PGO_ROUND2_COMMIT;
}

/* --- moving the slot --- */

static void move(slot_t *s, slot_event_t ev)
{
	s->state = pgo_slot_next(s->state, ev);
}

/* Frees the batch and the claimed rows. */
static void forget_batch(slot_t *s)
{
	PQclear(s->claimed);
	s->claimed = NULL;
	memset(&s->batch, 0, sizeof(s->batch));
	s->fix = NULL;
	pgo_arena_reset(s->arena);
}

/* Ends a cycle (ev: why): frees the batch, the slot is idle. */
static void end_cycle(slot_t *s, slot_event_t ev)
{
	forget_batch(s);
	move(s, ev);
}

/* Sends the round queued on the slot and moves it on with ev; a failed
 * send (the connection went down) ends the cycle. */
static bool send_round(slot_t *s, slot_event_t ev)
{
	if (pgo_conn_send(&s->conn) != PGO_OK) {
		end_cycle(s, SLOT_EV_SEND_FAILED);
		return false;
	}
	move(s, ev);
	return true;
}

/* Ends a claim round that cannot go on (failed, empty, no memory). */
static void finish_tx(slot_t *s, const char *how, slot_event_t ev)
{
	pgo_conn_query(&s->conn, how, 0, NULL);
	if (send_round(s, ev))
		s->t.settle = s->conn.round.sent_us;
}

static double ms_of(int64_t us)
{
	return (double)us / 1000.0;
}

/* At debug, where the cycle's time went: the claim (with a sweep below
 * the floor or from the floor), the sink, round 2.  A stall of the relay
 * shows here as the phase that took it. */
static void log_cycle(pgo_relay_t *r, const slot_t *s)
{
	int64_t end = pgo_now_us(), claimed_at;
	char how[32];

	if (pgo_log_max < PGO_LOG_DEBUG || !s->t.sent)
		return;
	claimed_at = s->t.claim ? s->t.claim : s->t.settle;
	if (s->t.sweep)
		snprintf(how, sizeof(how), "sweep of %d pages", s->t.pages);
	else
		snprintf(how, sizeof(how), "from the floor");
	pgo_log(PGO_LOG_DEBUG, r->subject,
		"slot %d: cycle of %zu events in %.1f ms: "
		"claim %.1f (%s), sink %.1f, settle %.1f ms",
		s->idx, s->batch.n, ms_of(end - s->t.sent),
		ms_of(claimed_at - s->t.sent), how,
		s->t.done ? ms_of(s->t.done - claimed_at) : 0.0,
		ms_of(end - s->t.settle));
}

void pgo_cycle_claim(pgo_relay_t *r, slot_t *s)
{
	int64_t now = pgo_now_ms();
	pgo_claim_req_t q;

	pgo_claim_prepare(r, s, now, &q);
	memset(&s->t, 0, sizeof(s->t));
	s->t.sweep = s->sweep.in_claim;
	s->t.pages = s->sweep.in_claim ? (int)(s->sweep.hi - s->sweep.page) : 0;
	if (q.pages[0])
		pgo_conn_exec_prepared(&s->conn, "pgoutbox_pages", 1, q.pages);
	pgo_conn_query(&s->conn, "BEGIN", 0, NULL);
	pgo_conn_exec_prepared(&s->conn, "pgoutbox_claim", q.nparams, q.params);
	if (!send_round(s, SLOT_EV_CLAIM_SENT))
		return;
	pgo_floor_claiming(r);
	s->claim_started = now;
	s->t.sent = s->conn.round.sent_us;
	r->sched.next_poll = now + pgo_claim_poll_ms(r);
}

void pgo_cycle_rebalance(pgo_relay_t *r, slot_t *s)
{
	if (pgo_shards_send(r, s))
		move(s, SLOT_EV_LEASE_SENT);
}

/* --- publishing and settling --- */

static void settle(pgo_relay_t *r, slot_t *s);

/* Round 1 came back: build the batch and hand it to the sink. */
static void claimed(pgo_relay_t *r, slot_t *s)
{
	pgo_batch_t *b = &s->batch;
	PGresult *res, *pages = NULL;
	int n, rc, ci = pgo_claim_index(s), pi = pgo_claim_pages_index(s);
	pgo_claim_outcome_t o;

	if (s->conn.round.got > ci)
		s->t.claim = s->conn.round.at[ci];
	if (s->conn.round.failed) {
		pgo_log(PGO_LOG_WARN, r->subject, "claim failed: %s",
			s->conn.round.err);
		pgo_conn_round_clear(&s->conn);
		pgo_claim_swept(r, s, NULL, NULL);
		finish_tx(s, "ROLLBACK", SLOT_EV_END_TX);
		return;
	}
	res = pgo_conn_take(&s->conn, ci);
	if (pi >= 0)
		pages = pgo_conn_take(&s->conn, pi);
	pgo_conn_round_clear(&s->conn);
	n = PQntuples(res);
	pgo_claim_swept(r, s, res, pages);
	PQclear(pages);
	/* How the slot and the relay go on (pgo_cycle_claim_outcome).  A
	 * sweep going on claims again too, for its next pages, when its
	 * pace is there (claim.c; the loop claims at s->sweep.next). */
	pgo_cycle_claim_outcome(r->mode, r->wake.state, n,
				pgo_claim_full(s, res), s->cold.wake_claim,
				s->cold.dry_wakes, &o);
	s->more = o.more;
	s->cold.dry_wakes = o.dry_wakes;
	if (o.went_cold)
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"slot %d: cold: its last %d claims after producers' "
			"notifications found nothing; it looks every %d ms "
			"until one finds events",
			s->idx, COLD_AFTER, COLD_MS);
	if (s->sweep.on && pgo_claim_sweep_due(r, s, pgo_now_ms()))
		s->wants_claim = true;
	if (o.relay_more >= 0)
		r->sched.more = o.relay_more;
	if (n == 0) {
		PQclear(res);
		finish_tx(s, "COMMIT", SLOT_EV_END_TX);
		return;
	}
	if (pgo_claim_batch(r, s, res) < 0) {
		/* Without memory nothing can be published: roll back. */
		pgo_log(PGO_LOG_ERROR, r->subject, "out of memory for a batch");
		finish_tx(s, "ROLLBACK", SLOT_EV_END_TX);
		return;
	}
	move(s, SLOT_EV_ROWS);
	s->t.submit = pgo_now_us();
	/* The sink calls done() when every verdict is set, perhaps before
	 * submit returns; the slot is not touched here after that. */
	rc = pgo_sink_submit(r->sink, b);
	if (rc == PGO_OK)
		return;
	pgo_batch_fail_rest(b, PGO_ACK_RETRY,
			    r->sink->errmsg[0] ? r->sink->errmsg
					       : pgo_strerror(rc));
	settle(r, s);
}

void pgo_cycle_sink_done(void *ctx, pgo_batch_t *batch)
{
	pgo_relay_t *r = ctx;

	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];

		if (&s->batch == batch && s->state == SLOT_PUBLISHING) {
			settle(r, s);
			return;
		}
	}
	pgo_log(PGO_LOG_ERROR, r->subject,
		"sink %s: done() for a batch it does not hold (ignored)",
		pgo_sink_name(r->sink));
}

/* The settle delays' jitter: a value in [0,1) (an LCG seeded at
 * start). */
static double jitter(void *ctx)
{
	pgo_relay_t *r = ctx;

	r->rnd = r->rnd * 1103515245u + 12345u;
	return (double)((r->rnd >> 8) & 0xffffff) / (double)0x1000000;
}

/* --- retries coming due --- */

/* Remembers that a retry comes due at `due` (monotonic ms), so that the
 * loop claims then (pgo_cycle_next_retry()). */
static void retry_at(pgo_relay_t *r, int64_t due)
{
	int worst = 0;

	if (r->sched.nretry_due <
	    (int)(sizeof(r->sched.retry_due) / sizeof(r->sched.retry_due[0]))) {
		r->sched.retry_due[r->sched.nretry_due++] = due;
		return;
	}
	/* Full: keep the earliest; a later one is found by a claim anyway
	 * (or, at worst, by the fallback poll). */
	for (int i = 1; i < r->sched.nretry_due; i++)
		if (r->sched.retry_due[i] > r->sched.retry_due[worst])
			worst = i;
	if (due < r->sched.retry_due[worst])
		r->sched.retry_due[worst] = due;
}

int64_t pgo_cycle_next_retry(pgo_relay_t *r, int64_t now, bool *due_now)
{
	int64_t next = 0;
	int n = 0;

	*due_now = false;
	for (int i = 0; i < r->sched.nretry_due; i++) {
		if (r->sched.retry_due[i] <= now) {
			*due_now = true;
			continue;
		}
		r->sched.retry_due[n++] = r->sched.retry_due[i];
		if (!next || r->sched.retry_due[i] < next)
			next = r->sched.retry_due[i];
	}
	r->sched.nretry_due = n;
	return next;
}

/* Queues the retry or dead-letter INSERT of the events with verdict
 * kind. */
static void queue_rows(slot_t *s, pgo_ack_t kind, const char *sql)
{
	pgo_buf_t col[10];
	const char *params[10];
	int count = pgo_claim_rows_params(s, kind, col);

	for (int c = 0; c < 10; c++)
		params[c] = col[c].data;
	if (count < 0)
		s->conn.round.failed = true; /* forces a rollback */
	else if (count > 0)
		pgo_conn_query(&s->conn, sql, 10, params);
	for (int c = 0; c < 10; c++)
		pgo_buf_free(&col[c]);
}

/* Events that go back to the queue or to dead letters were not
 * published: an archiving queue's trigger copied them at the claim, so
 * they leave the archive again (a no-op for a deleting queue). */
static void queue_unarchive(pgo_relay_t *r, slot_t *s)
{
	const char *params[2];
	pgo_buf_t ids;

	if (pgo_claim_ids(&s->batch, false, &ids)) {
		params[0] = pgo_conf_values(r->conf)->queue;
		params[1] = ids.data;
		pgo_conn_query(&s->conn,
			       "SELECT pgoutbox.unarchive($1, $2::bigint[])", 2,
			       params);
	} else {
		s->conn.round.failed = true; /* forces a rollback */
	}
	pgo_buf_free(&ids);
}

/* An adopted table: the events the sink acknowledged get the map's
 * `done` (DELETE or UPDATE) in the claim transaction. */
static void queue_done(pgo_relay_t *r, slot_t *s)
{
	const char *params[1];
	pgo_buf_t ids;

	if (pgo_claim_ids(&s->batch, true, &ids)) {
		params[0] = ids.data;
		pgo_conn_query(&s->conn, r->sql.done, 1, params);
	} else {
		s->conn.round.failed = true; /* forces a rollback */
	}
	pgo_buf_free(&ids);
}

/* The sink said the downstream is down: roll the batch back untouched
 * and pause claiming with a backoff. */
static void unavailable(pgo_relay_t *r, slot_t *s, size_t i)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_batch_t *b = &s->batch;

	r->outage.backoff =
		pgo_cycle_backoff(r->outage.backoff, v->reconnect_max);
	pgo_observe_sink(r, false);
	pgo_log(r->outage.backoff == 100 ? PGO_LOG_WARN : PGO_LOG_DEBUG,
		r->subject,
		"sink unavailable (%s): a batch of %zu goes back untouched; "
		"claiming again in %lld ms",
		b->errors[i] ? b->errors[i] : "down", b->n,
		(long long)r->outage.backoff);
	r->outage.pause_until = pgo_now_ms() + r->outage.backoff;
	/* The batch is still pending: claim it again when the pause ends,
	 * even if no wake-up comes (a sink without health reports, such
	 * as exec or stdout, never says it is back). */
	s->wants_claim = true;
	s->n_ok = s->n_retry = s->n_dead = 0;
	b->n = 0; /* nothing to count when the ROLLBACK returns */
	pgo_conn_query(&s->conn, "ROLLBACK", 0, NULL);
}

/* Logs what the plan decided beyond plain acks. */
static void log_plan(pgo_relay_t *r, slot_t *s, const pgo_settle_plan_t *p)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_batch_t *b = &s->batch;
	size_t first = p->first_failed;

	for (size_t i = 0; p->n_halted && i < b->n; i++) {
		pgo_event_t *e = &b->events[i];

		if (s->fix[i].delay_ms != -1)
			continue;
		pgo_log(PGO_LOG_ERROR, r->subject,
			"%s%s halted: event %lld (key %s) failed %d "
			"times: %s; fix the cause, then UPDATE "
			"pgoutbox.%s%s%s SET run_at = now() WHERE %s%s%sid = "
			"%lld",
			*pgo_claim_shard_of(s, i) ? "shard " : "the queue",
			pgo_claim_shard_of(s, i), (long long)e->id,
			e->key ? e->key : "-", s->fix[i].attempts,
			b->errors[i] ? b->errors[i] : "failed",
			r->adopted ? "adopted_state" : "\"",
			r->adopted ? "" : v->queue, r->adopted ? "" : "\"",
			r->adopted ? "queue = '" : "",
			r->adopted ? v->queue : "", r->adopted ? "' AND " : "",
			(long long)e->id);
	}
	if (p->n_overtaken) {
		const pgo_event_t *e = &b->events[p->first_overtaken];

		pgo_log(PGO_LOG_ERROR, r->subject,
			"the sink took %d event%s after an earlier event of "
			"the same key failed in the batch (first: event %lld, "
			"key %s, after event %lld): a consumer may see them "
			"out "
			"of order; they are held back and sent again after it. "
			"An ordered sink should refuse them",
			p->n_overtaken, p->n_overtaken == 1 ? "" : "s",
			(long long)e->id, e->key ? e->key : "-",
			(long long)b->events[p->overtaken_behind].id);
	}
	if (p->n_retry || p->n_dead)
		pgo_log(PGO_LOG_WARN, r->subject,
			"batch of %zu: %d published, %d to retry, %d "
			"dead-lettered; event %lld: %s",
			b->n, p->n_ok, p->n_retry, p->n_dead,
			(long long)b->events[first].id,
			b->errors[first] ? b->errors[first] : "failed");
}

/* The sink gave its verdicts: send round 2 (fix-ups and COMMIT). */
static void settle(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_settle_rules_t rules = {
		.mode = r->mode,
		.poison = v->poison,
		.max_attempts = v->max_attempts,
		.retry_base = v->retry_base,
		.retry_max = v->retry_max,
	};
	pgo_batch_t *b = &s->batch;
	size_t *failed = pgo_arena_alloc(s->arena, sizeof(*failed) * b->n);
	pgo_settle_plan_t plan;
	size_t n = b->n;
	unsigned round2;

	s->t.done = pgo_now_us();
	if (!failed) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"out of memory settling a batch of %zu: rolled back",
			b->n);
		b->n = 0;
		finish_tx(s, "ROLLBACK", SLOT_EV_END_TX);
		return;
	}
	pgo_settle_plan(&rules, b, s->fix, failed, jitter, r, &plan);
	round2 = pgo_cycle_round2(&plan, r->adopted != NULL);
	if (round2 & PGO_ROUND2_ROLLBACK) {
		unavailable(r, s, plan.first_failed);
	} else {
		int64_t now = pgo_now_ms();

		r->outage.backoff = 0;
		pgo_observe_acked(r, b);
		if (plan.n_ok)
			pgo_observe_sink(r, true);
		s->n_ok = plan.n_ok;
		s->n_retry = plan.n_retry;
		s->n_dead = plan.n_dead;
		for (size_t i = 0; i < b->n; i++)
			if (b->acks[i] == PGO_ACK_RETRY &&
			    s->fix[i].delay_ms > 0)
				retry_at(r, now + s->fix[i].delay_ms);
		log_plan(r, s, &plan);
		if (round2 & PGO_ROUND2_UNARCHIVE)
			queue_unarchive(r, s);
		if (round2 & PGO_ROUND2_DONE)
			queue_done(r, s);
		if (round2 & PGO_ROUND2_RETRY)
			queue_rows(s, PGO_ACK_RETRY, r->sql.retry);
		if (round2 & PGO_ROUND2_DEAD)
			queue_rows(s, PGO_ACK_DEAD, r->sql.dead);
		pgo_conn_query(&s->conn, "COMMIT", 0, NULL);
	}
	if (!send_round(s, SLOT_EV_VERDICTS))
		pgo_log(PGO_LOG_WARN, r->subject,
			"lost the connection before COMMIT: %zu events go "
			"back to the queue and will be sent again",
			n);
	else
		s->t.settle = s->conn.round.sent_us;
}

/* Round 2 came back. */
static void settled(pgo_relay_t *r, slot_t *s)
{
	if (s->conn.round.failed) {
		if (s->batch.n)
			pgo_log(PGO_LOG_WARN, r->subject,
				"settling a batch of %zu failed (%s): the "
				"events stay queued and will be sent again",
				s->batch.n, s->conn.round.err);
		/* The transaction is aborted: end it. */
		pgo_conn_round_clear(&s->conn);
		forget_batch(s);
		finish_tx(s, "ROLLBACK", SLOT_EV_SETTLE_FAILED);
		return;
	}
	pgo_conn_round_clear(&s->conn);
	if (s->batch.n) {
		r->stats.total.published += (uint64_t)s->n_ok;
		r->stats.total.retried += (uint64_t)s->n_retry;
		r->stats.total.dead += (uint64_t)s->n_dead;
		r->stats.total.batches++;
		pgo_observe_settled(r, s, pgo_now_ms());
	}
	log_cycle(r, s);
	end_cycle(s, SLOT_EV_SETTLED);
}

void pgo_cycle_lost(pgo_relay_t *r, slot_t *s)
{
	if (s->state == SLOT_PUBLISHING)
		pgo_sink_cancel(r->sink, &s->batch);
	if (s->state != SLOT_IDLE && s->batch.n)
		pgo_log(PGO_LOG_WARN, r->subject,
			"connection lost with a batch of %zu in flight: it "
			"was rolled back and will be sent again",
			s->batch.n);
	end_cycle(s, SLOT_EV_LOST);
	pgo_shards_reset(r, s);
	/* The server may have crashed: acks committed without waiting for
	 * the flush (relay.synchronous_commit), or not yet replicated to a
	 * standby it failed over to, can be undone, and their rows are back
	 * below the floor. */
	pgo_floor_reset(r);
	r->stats.total.reconnects++;
}

void pgo_cycle_abandon(pgo_relay_t *r, slot_t *s)
{
	if (s->state != SLOT_PUBLISHING)
		return;
	pgo_log(PGO_LOG_WARN, r->subject,
		"slot %d: the sink did not finish a batch of %zu within "
		"relay.drain_timeout: rolled back, it will be sent again",
		s->idx, s->batch.n);
	pgo_sink_cancel(r->sink, &s->batch);
	end_cycle(s, SLOT_EV_ABANDONED);
	pgo_conn_drop(&s->conn, "stopping");
	pgo_shards_reset(r, s);
}

/* --- chores: maintenance and health, on slot 0 between cycles --- */

bool pgo_cycle_chore(pgo_relay_t *r, slot_t *s, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	bool health;

	if (s->state != SLOT_IDLE || s->conn.state != PGO_CONN_READY)
		return false;
	if (v->maintain_interval && now >= r->sched.next_maintain)
		health = false;
	else if (v->stats_interval && now >= r->sched.next_health)
		health = true;
	else
		return false;
	if (health) {
		r->sched.next_health = now + v->stats_interval;
		pgo_conn_query(&s->conn,
			       "SELECT kind, subject, detail FROM "
			       "pgoutbox.health('5 minutes')",
			       0, NULL);
	} else {
		r->sched.next_maintain = now + v->maintain_interval;
		pgo_conn_query(&s->conn,
			       "SELECT done, created, dropped FROM "
			       "pgoutbox.maintain()",
			       0, NULL);
	}
	if (pgo_conn_send(&s->conn) != PGO_OK)
		return false;
	r->sched.chore_health = health;
	move(s, SLOT_EV_CHORE_SENT);
	return true;
}

/* A chore's round came back: report what it found or did. */
static void chore_done(pgo_relay_t *r, slot_t *s)
{
	PGresult *res = s->conn.round.res[0];

	if (s->conn.round.failed || !res) {
		pgo_log(PGO_LOG_WARN, r->subject, "%s failed: %s",
			r->sched.chore_health ? "health check" : "maintenance",
			s->conn.round.err);
	} else if (r->sched.chore_health) {
		/* What keeps vacuum from reclaiming the queue's rows. */
		for (int i = 0; i < PQntuples(res); i++)
			pgo_log(PGO_LOG_WARN, r->subject, "health: %s %s: %s",
				PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
				PQgetvalue(res, i, 2));
	} else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0 &&
		   (strcmp(PQgetvalue(res, 0, 1), "0") != 0 ||
		    strcmp(PQgetvalue(res, 0, 2), "0") != 0)) {
		pgo_log(PGO_LOG_INFO, r->subject,
			"maintenance: %s partition%s created, %s dropped",
			PQgetvalue(res, 0, 1),
			strcmp(PQgetvalue(res, 0, 1), "1") == 0 ? "" : "s",
			PQgetvalue(res, 0, 2));
	}
	pgo_conn_round_clear(&s->conn);
}

void pgo_cycle_round(pgo_relay_t *r, slot_t *s)
{
	double took = ms_of(pgo_now_us() - s->conn.round.sent_us);

	switch (s->state) {
	case SLOT_CLAIMING: claimed(r, s); break;
	case SLOT_SETTLING: settled(r, s); break;
	case SLOT_REBALANCING:
		move(s, SLOT_EV_ROUND_DONE);
		pgo_shards_done(r, s);
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"slot %d: lease round %.1f ms", s->idx, took);
		break;
	case SLOT_CHORE:
		move(s, SLOT_EV_ROUND_DONE);
		pgo_log(PGO_LOG_DEBUG, r->subject, "slot %d: %s %.1f ms",
			s->idx,
			r->sched.chore_health ? "health check" : "maintenance",
			took);
		chore_done(r, s);
		break;
	default: pgo_conn_round_clear(&s->conn); break;
	}
}
