/*
 * lease.c — the rules of lease mode, as pure functions of what the worker
 * knows at an instant (lease_view_t): what becomes of a job that ran, how
 * long its retry waits, which operation a free connection takes next,
 * when the loop must look again and when a stop may end the run.
 *
 * The database keeps the lease itself (locked_by, locked_until, epoch in
 * the queue's row; ops.c has the statements): these rules decide when
 * those statements are sent.  tests/unit/test_lease.c checks them.
 */
#include "queue/worker_int.h"
#include "base/backoff.h"
#include "loop/loop.h"

lease_verdict_t pgo_lease_verdict(bool ok, int attempt, int max_attempts)
{
	if (ok)
		return VERDICT_OK;
	return attempt >= max_attempts ? VERDICT_DEAD : VERDICT_RETRY;
}

int64_t pgo_lease_retry_delay(lease_verdict_t v, int attempt, int64_t base,
			      int64_t max, double rnd)
{
	if (v != VERDICT_RETRY)
		return 0;
	return pgo_backoff_ms(attempt, base, max, rnd);
}

int64_t pgo_lease_hb_every(int64_t lease_ms)
{
	return lease_ms / 3;
}

/* A claim may go out: room for jobs, none in flight, not stopping. */
static bool may_claim(const lease_view_t *v)
{
	return !v->stop && v->running < v->capacity && !v->inflight[OP_CLAIM];
}

op_kind_t pgo_lease_next_op(const lease_view_t *v)
{
	bool retry_due = v->next_retry && v->now >= v->next_retry;

	if (v->queued > 0)
		return OP_SETTLE;
	if (v->running > 0 && v->now >= v->next_hb && !v->inflight[OP_HB])
		return OP_HB;
	if (!v->stop && v->now >= v->next_reap && !v->inflight[OP_REAP])
		return OP_REAP;
	if (may_claim(v) && (v->kick || v->now >= v->next_poll || retry_due))
		return OP_CLAIM;
	return OP_NONE;
}

int pgo_lease_claim_want(bool callback, int batch, int capacity, int running)
{
	return callback ? batch : capacity - running;
}

bool pgo_lease_claim_full(int got, int want)
{
	return got >= want && got > 0;
}

int64_t pgo_lease_wake_at(const lease_view_t *v, bool free_conn)
{
	int64_t at = 0;

	/* Timers that start an operation matter only while a connection
	 * can take it; otherwise a round's end or a reconnect wakes the
	 * loop. */
	if (!free_conn)
		return 0;
	if (!v->stop) {
		if (may_claim(v)) {
			at = pgo_deadline_min(at, v->next_poll);
			at = pgo_deadline_min(at, v->next_retry);
		}
		if (!v->inflight[OP_REAP])
			at = pgo_deadline_min(at, v->next_reap);
	}
	if (v->running > 0 && !v->inflight[OP_HB])
		at = pgo_deadline_min(at, v->next_hb);
	return at;
}

bool pgo_lease_may_end(const lease_view_t *v, int busy, int64_t deadline)
{
	return v->stop && v->running == 0 && busy == 0 &&
	       (v->queued == 0 || v->now >= deadline);
}

bool pgo_lease_settle_again(int tries)
{
	return tries <= SETTLE_TRIES;
}
