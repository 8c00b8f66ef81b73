/*
 * lease_run.c — lease mode's loop (exec and C callback).  Each turn has
 * four steps: end the run when stopped with nothing left (lease_ending),
 * give every free connection its next operation (lease_dispatch: lease.c
 * picks it, ops.c sends it), sleep until the nearest timer, a round's
 * end, a job's end or a stop (lease_wake_at, then the loop's turn), and
 * step the connections with what poll() saw (lease_step).  The jobs'
 * pipes, pidfds and timeouts are on the loop already (proc.c): jobs end
 * inside the turn (jobs.c), the connections are stepped after it.
 */
#include <stdio.h>

#include "queue/worker_int.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"

/* The loop's own timers and the stop's progress. */
typedef struct lease_loop {
	int64_t next_poll;     /* a claim at the latest then */
	int64_t next_hb;       /* the next heartbeat */
	int64_t next_reap;     /* the next reaper round */
	int64_t next_stats;    /* the next stats line (0: none) */
	int64_t stop_deadline; /* stopping: outcomes wait for the database
				* until then, then are given up */
	bool stop_logged;      /* "stopping" said */
} lease_loop_t;

/* What the lease rules decide from, at now. */
static lease_view_t view(const pgo_worker_t *w, const lease_loop_t *l,
			 int64_t now)
{
	lease_view_t v = {
		.now = now,
		.queued = w->q_len,
		.running = w->running,
		.capacity = w->o.concurrency,
		.stop = w->stop != 0,
		.kick = w->kick,
		.next_hb = l->next_hb,
		.next_reap = l->next_reap,
		.next_poll = l->next_poll,
		.next_retry = w->next_retry,
	};

	for (int k = 0; k < OP_KINDS; k++)
		v.inflight[k] = pgo_ops_inflight(w, (op_kind_t)k);
	return v;
}

/* The connections' watchers, statements and settings; the first claim
 * at once. */
static int lease_start(pgo_worker_t *w, lease_loop_t *l)
{
	const struct pgo_conf_values *v = pgo_conf_values(w->conf);

	for (int i = 0; i < LEASE_CONNS; i++) {
		w->lio[i] = pgo_loop_io_add(w->loop, -1, 0, pgo_worker_conn_io,
					    &w->lrevents[i]);
		if (!w->lio[i]) {
			snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
			return PGO_ERR_NOMEM;
		}
	}
	snprintf(w->set_sql, sizeof(w->set_sql), "SET statement_timeout = %lld",
		 (long long)v->statement_timeout);
	snprintf(w->local_sql, sizeof(w->local_sql),
		 "SELECT set_config('statement_timeout', '%lld', true)",
		 (long long)v->statement_timeout);
	w->lsetup = (pgo_conn_setup_t){
		.subject = w->subject,
		.app_name = w->app_name,
		.sql = {w->set_sql, w->listen_sql, NULL},
		.check_schema = true,
		.refuse_sql = REFUSE_SQL,
		.refuse_param = {w->queue, NULL},
		.pooled = w->pooled,
		.local_sql = w->local_sql,
	};
	pgo_worker_conns_init(w, w->lconns, LEASE_CONNS, &w->lsetup,
			      &w->lsetup_quiet, 1);
	if (w->o.stats_interval_ms > 0)
		l->next_stats = pgo_now_ms() + w->o.stats_interval_ms;
	w->kick = true;
	return PGO_OK;
}

/* Whether the run ends now: a fatal error, or a stop with no job running,
 * no round in flight and no outcome waiting (or waiting past the stop's
 * deadline: the database is unreachable). */
static bool lease_ending(pgo_worker_t *w, lease_loop_t *l, int64_t now)
{
	lease_view_t v;
	int busy = 0;

	if (w->stop == 2)
		return true;
	if (w->stop && !l->stop_logged) {
		pgo_log(PGO_LOG_INFO, w->subject,
			"stopping: claiming no more, %d job(s) still running",
			w->running);
		l->stop_logged = true;
		l->stop_deadline = now + w->o.timeout_ms + 10000;
	}
	for (int i = 0; i < LEASE_CONNS; i++)
		busy += w->inflight[i] != NULL;
	v = view(w, l, now);
	if (!pgo_lease_may_end(&v, busy, l->stop_deadline))
		return false;
	if (w->q_head)
		pgo_log(PGO_LOG_WARN, w->subject,
			"stopping with %d outcome(s) not recorded (database "
			"unreachable); those jobs run again after their lease",
			w->q_len);
	return true;
}

/* The operation the lease rules pick now, with its timer moved on; NULL
 * for none (or no memory: the timer moved all the same). */
static op_t *take_op(pgo_worker_t *w, lease_loop_t *l, int64_t now)
{
	lease_view_t v = view(w, l, now);
	int want;

	switch (pgo_lease_next_op(&v)) {
	case OP_SETTLE: return pgo_ops_pop(w);
	case OP_HB:
		l->next_hb = now + pgo_lease_hb_every(w->o.lease_ms);
		return pgo_ops_new(OP_HB, 0);
	case OP_REAP:
		l->next_reap = now + w->o.reap_interval_ms;
		return pgo_ops_new(OP_REAP, 0);
	case OP_CLAIM:
		/* A retry this worker scheduled is due. */
		if (w->next_retry && now >= w->next_retry)
			w->next_retry = 0;
		w->kick = false;
		l->next_poll = now + w->o.poll_interval_ms;
		want = pgo_lease_claim_want(w->o.handler != NULL, w->o.batch,
					    w->o.concurrency, w->running);
		return pgo_ops_new(OP_CLAIM, want);
	default: return NULL;
	}
}

/* Gives each free connection its next operation.  Returns the nearest
 * reconnect of a connection that is down (0: none). */
static int64_t lease_dispatch(pgo_worker_t *w, lease_loop_t *l, int64_t now)
{
	int64_t deadline = 0;

	for (int i = 0; i < LEASE_CONNS; i++) {
		pgo_conn_t *c = &w->lconns[i];
		op_t *op;

		pgo_conn_kick(c, now);
		if (c->state == PGO_CONN_DOWN)
			deadline = pgo_deadline_min(deadline, c->retry_at);
		if (c->state != PGO_CONN_READY || w->inflight[i])
			continue;
		op = take_op(w, l, now);
		if (op)
			pgo_ops_send(w, i, op);
	}
	return deadline;
}

/* How long the turn may sleep: until deadline, the timers of the lease
 * rules while a connection is free, and the stats line. */
static int64_t lease_wake_at(const pgo_worker_t *w, const lease_loop_t *l,
			     int64_t now, int64_t deadline)
{
	lease_view_t v = view(w, l, now);
	bool free_conn = false;

	for (int i = 0; i < LEASE_CONNS; i++)
		free_conn |=
			w->lconns[i].state == PGO_CONN_READY && !w->inflight[i];
	deadline = pgo_deadline_min(deadline, pgo_lease_wake_at(&v, free_conn));
	if (l->next_stats)
		deadline = pgo_deadline_min(deadline, l->next_stats);
	return deadline;
}

/* How long a round (claim, heartbeat, completion: short statements under
 * statement_timeout) may wait for its reply before the server or the
 * path to it counts as hung, as the relay's rounds (0: no limit). */
static int64_t lease_round_limit(const pgo_worker_t *w)
{
	const struct pgo_conf_values *v = pgo_conf_values(w->conf);

	return v->statement_timeout ? v->statement_timeout + w->o.lease_ms : 0;
}

/* Steps the connections after the turn: a round's result goes to its
 * operation, a connection lost with one in flight hands it back. */
static void lease_step(pgo_worker_t *w)
{
	for (int i = 0; i < LEASE_CONNS; i++) {
		pgo_conn_t *c = &w->lconns[i];
		pgo_conn_event_t ev =
			pgo_worker_step_conn(w, c, &w->lrevents[i]);

		/* No reply in time: drop the connection (the turn waits at
		 * most MAX_WAIT_MS, so this is seen within a second). */
		if (ev == PGO_CONN_EV_NONE &&
		    pgo_conn_expire(c, pgo_now_ms(), lease_round_limit(w)))
			ev = PGO_CONN_EV_LOST;

		if (ev == PGO_CONN_EV_FATAL) {
			w->stop = 2;
			w->stop_code = c->fatal.code;
		} else if (ev == PGO_CONN_EV_ROUND) {
			bool was_claim = w->inflight[i] &&
					 w->inflight[i]->kind == OP_CLAIM;

			pgo_ops_round(w, i);
			/* A full claim: more may be waiting. */
			if (was_claim &&
			    pgo_lease_claim_full(w->claim_got, w->claim_want))
				w->kick = true;
		}
		if (c->state == PGO_CONN_DOWN && w->inflight[i])
			pgo_ops_lost(w, i);
	}
}

int pgo_lease_run(pgo_worker_t *w)
{
	lease_loop_t l = {0};
	int rc = lease_start(w, &l);

	if (rc != PGO_OK)
		return rc;
	for (;;) {
		int64_t now = pgo_now_ms(), deadline;

		if (lease_ending(w, &l, now))
			break;
		if (l.next_stats && now >= l.next_stats) {
			pgo_worker_log_stats(w, "stats");
			l.next_stats = now + w->o.stats_interval_ms;
		}
		deadline = lease_dispatch(w, &l, now);
		deadline = lease_wake_at(w, &l, now, deadline);
		if (pgo_worker_turn(w, w->lconns, w->lio, w->lrevents,
				    LEASE_CONNS, deadline) != PGO_OK)
			return PGO_ERR_IO;
		lease_step(w);
	}
	return w->stop == 2 ? (w->stop_code ? w->stop_code : PGO_ERR_INVALID)
			    : PGO_OK;
}
