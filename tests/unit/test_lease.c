/*
 * test_lease.c — the worker's lease rules (src/lib/queue/lease.c),
 * table-driven: a job's verdict and retry delay, which operation a free
 * connection takes next (outcomes, heartbeats, the reaper, claims), the
 * size of a claim, how long the loop may sleep and when a stop may end
 * the run; then a lease's renewals over a long job, driven the way
 * lease_run.c drives the rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "queue/worker_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_verdict(void **state)
{
	static const struct {
		bool ok;
		int attempt, max;
		lease_verdict_t want;
	} cases[] = {
		{true, 1, 3, VERDICT_OK},
		{true, 3, 3, VERDICT_OK}, /* done on the last attempt */
		{false, 1, 3, VERDICT_RETRY},
		{false, 2, 3, VERDICT_RETRY},
		{false, 3, 3, VERDICT_DEAD}, /* the last attempt failed */
		{false, 4, 3, VERDICT_DEAD}, /* past it (max lowered) */
		{false, 1, 1, VERDICT_DEAD}, /* one attempt only */
		{true, 1, 1, VERDICT_OK},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		lease_verdict_t got = pgo_lease_verdict(
			cases[i].ok, cases[i].attempt, cases[i].max);

		if (got != cases[i].want)
			fail_msg("case %zu: ok %d attempt %d of %d -> %d, want "
				 "%d",
				 i, cases[i].ok, cases[i].attempt, cases[i].max,
				 got, cases[i].want);
	}
}

/* The delay that moves a retried job's run_at: the backoff of its
 * attempt, none for the other verdicts. */
static void test_retry_delay(void **state)
{
	static const struct {
		lease_verdict_t v;
		int attempt;
		int64_t base, max;
		double rnd;
		int64_t want;
	} cases[] = {
		{VERDICT_RETRY, 1, 1000, 300000, 0.0, 500},
		{VERDICT_RETRY, 1, 1000, 300000, 0.5, 750},
		{VERDICT_RETRY, 2, 1000, 300000, 0.0, 1000},
		{VERDICT_RETRY, 3, 1000, 300000, 0.0, 2000},
		{VERDICT_RETRY, 4, 1000, 300000, 0.999, 7996},
		{VERDICT_RETRY, 12, 1000, 300000, 0.0, 150000}, /* capped */
		{VERDICT_RETRY, 2, 0, 300000, 0.5, 0},		/* no backoff */
		{VERDICT_OK, 3, 1000, 300000, 0.5, 0},
		{VERDICT_DEAD, 3, 1000, 300000, 0.5, 0},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int64_t got = pgo_lease_retry_delay(
			cases[i].v, cases[i].attempt, cases[i].base,
			cases[i].max, cases[i].rnd);

		if (got != cases[i].want)
			fail_msg("case %zu: verdict %d attempt %d -> %lld ms, "
				 "want %lld",
				 i, cases[i].v, cases[i].attempt,
				 (long long)got, (long long)cases[i].want);
	}
}

static void test_hb_every(void **state)
{
	static const int64_t cases[][2] = {
		{30000, 10000}, {1000, 333}, {3000, 1000}, {60001, 20000}};

	(void)state;
	for (size_t i = 0; i < N(cases); i++)
		if (pgo_lease_hb_every(cases[i][0]) != cases[i][1])
			fail_msg("lease %lld ms: heartbeat every %lld, want "
				 "%lld",
				 (long long)cases[i][0],
				 (long long)pgo_lease_hb_every(cases[i][0]),
				 (long long)cases[i][1]);
}

/* A view at now = 1000 of a worker with 4 slots, written as a row:
 * outcomes waiting, jobs running, stopping, kicked, the timers (next
 * heartbeat, reap, poll, retry) and the kinds in flight (letters s c h
 * r).  The base row has nothing due: 1 job running, every timer at 2000,
 * no retry scheduled. */
typedef struct view_row {
	int queued, running;
	bool stop, kick;
	int64_t hb, reap, poll, retry;
	const char *inflight;
} view_row_t;

static lease_view_t view_of(const view_row_t *r)
{
	lease_view_t v = {
		.now = 1000,
		.queued = r->queued,
		.running = r->running,
		.capacity = 4,
		.stop = r->stop,
		.kick = r->kick,
		.next_hb = r->hb,
		.next_reap = r->reap,
		.next_poll = r->poll,
		.next_retry = r->retry,
	};

	for (const char *p = r->inflight; p && *p; p++)
		v.inflight[*p == 's'   ? OP_SETTLE
			   : *p == 'c' ? OP_CLAIM
			   : *p == 'h' ? OP_HB
				       : OP_REAP] = true;
	return v;
}

static void test_next_op(void **state)
{
	static const struct {
		const char *why;
		view_row_t e;
		op_kind_t want;
	} cases[] = {
		/* why, {queued, running, stop, kick, hb, reap, poll, retry,
		 * in flight}, ... */
		{"nothing due",
		 {0, 1, false, false, 2000, 2000, 2000, 0, NULL},
		 OP_NONE},
		{"an outcome waits",
		 {2, 1, false, false, 2000, 2000, 2000, 0, NULL},
		 OP_SETTLE},
		{"outcomes before a due heartbeat",
		 {1, 1, false, false, 500, 2000, 2000, 0, NULL},
		 OP_SETTLE},
		{"outcomes while stopping",
		 {1, 1, true, false, 2000, 2000, 2000, 0, NULL},
		 OP_SETTLE},
		{"heartbeat due",
		 {0, 1, false, false, 1000, 2000, 2000, 0, NULL},
		 OP_HB},
		{"heartbeat overdue",
		 {0, 1, false, false, 10, 2000, 2000, 0, NULL},
		 OP_HB},
		{"heartbeat due, none running",
		 {0, 0, false, false, 10, 2000, 2000, 0, NULL},
		 OP_NONE},
		{"heartbeat due, one in flight",
		 {0, 1, false, false, 10, 2000, 2000, 0, "h"},
		 OP_NONE},
		{"heartbeat due while stopping",
		 {0, 1, true, false, 10, 2000, 2000, 0, NULL},
		 OP_HB},
		{"heartbeat before the reaper",
		 {0, 1, false, false, 10, 10, 2000, 0, NULL},
		 OP_HB},
		{"reaper due",
		 {0, 1, false, false, 2000, 1000, 2000, 0, NULL},
		 OP_REAP},
		{"reaper due, one in flight",
		 {0, 1, false, false, 2000, 10, 2000, 0, "r"},
		 OP_NONE},
		{"reaper due while stopping",
		 {0, 1, true, false, 2000, 10, 2000, 0, NULL},
		 OP_NONE},
		{"reaper before a claim",
		 {0, 1, false, true, 2000, 10, 2000, 0, NULL},
		 OP_REAP},
		{"kicked",
		 {0, 1, false, true, 2000, 2000, 2000, 0, NULL},
		 OP_CLAIM},
		{"poll interval passed",
		 {0, 1, false, false, 2000, 2000, 1000, 0, NULL},
		 OP_CLAIM},
		{"a retry is due",
		 {0, 1, false, false, 2000, 2000, 2000, 900, NULL},
		 OP_CLAIM},
		{"a retry later",
		 {0, 1, false, false, 2000, 2000, 2000, 1500, NULL},
		 OP_NONE},
		{"kicked, all slots busy",
		 {0, 4, false, true, 2000, 2000, 2000, 0, NULL},
		 OP_NONE},
		{"kicked, a claim in flight",
		 {0, 1, false, true, 2000, 2000, 2000, 0, "c"},
		 OP_NONE},
		{"kicked while stopping",
		 {0, 1, true, true, 2000, 2000, 2000, 0, NULL},
		 OP_NONE},
		{"a settle in flight does not block a claim",
		 {0, 1, false, true, 2000, 2000, 2000, 0, "s"},
		 OP_CLAIM},
		{"heartbeat in flight, claim due",
		 {0, 1, false, true, 10, 2000, 2000, 0, "h"},
		 OP_CLAIM},
		{"idle worker polls",
		 {0, 0, false, false, 2000, 2000, 1000, 0, NULL},
		 OP_CLAIM},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		lease_view_t v = view_of(&cases[i].e);
		op_kind_t got = pgo_lease_next_op(&v);

		if (got != cases[i].want)
			fail_msg("%s: operation %d, want %d", cases[i].why, got,
				 cases[i].want);
	}
}

static void test_claim_size(void **state)
{
	static const struct {
		bool callback;
		int batch, capacity, running, want;
	} cases[] = {
		{false, 100, 4, 0, 4}, /* exec: the free slots */
		{false, 100, 4, 3, 1},	{false, 100, 4, 4, 0},
		{true, 100, 1, 0, 100}, /* a callback takes a batch */
		{true, 7, 1, 0, 7},
	};
	static const struct {
		int got, want;
		bool full;
	} full[] = {
		{4, 4, true},  {5, 4, true},  {3, 4, false},
		{0, 4, false}, {0, 0, false}, /* nothing asked, nothing got: not
						 full */
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int got = pgo_lease_claim_want(
			cases[i].callback, cases[i].batch, cases[i].capacity,
			cases[i].running);

		if (got != cases[i].want)
			fail_msg("case %zu: claim %d jobs, want %d", i, got,
				 cases[i].want);
	}
	for (size_t i = 0; i < N(full); i++)
		if (pgo_lease_claim_full(full[i].got, full[i].want) !=
		    full[i].full)
			fail_msg("got %d of %d: full %d, want %d", full[i].got,
				 full[i].want, !full[i].full, full[i].full);
}

static void test_wake_at(void **state)
{
	static const struct {
		const char *why;
		view_row_t e;
		bool free_conn;
		int64_t want;
	} cases[] = {
		/* why, {queued, running, stop, kick, hb, reap, poll, retry,
		 * in flight}, ... */
		{"the nearest timer",
		 {0, 1, false, false, 3000, 2500, 2200, 0, NULL},
		 true,
		 2200},
		{"no free connection: no timer",
		 {0, 1, false, false, 2000, 2000, 2000, 0, NULL},
		 false,
		 0},
		{"a scheduled retry first",
		 {0, 1, false, false, 2000, 2000, 2000, 1500, NULL},
		 true,
		 1500},
		{"slots full: no claim timers",
		 {0, 4, false, false, 3000, 2500, 2000, 1500, NULL},
		 true,
		 2500},
		{"a claim in flight: no claim timers",
		 {0, 1, false, false, 3000, 2500, 2100, 0, "c"},
		 true,
		 2500},
		{"stopping: the heartbeat only",
		 {0, 1, true, false, 3000, 2500, 2100, 0, NULL},
		 true,
		 3000},
		{"stopping, nothing running: none",
		 {0, 0, true, false, 2000, 2000, 2000, 0, NULL},
		 true,
		 0},
		{"heartbeat in flight",
		 {0, 1, false, false, 1500, 2000, 2000, 0, "hr"},
		 true,
		 2000},
		{"nothing running: no heartbeat",
		 {0, 0, false, false, 1100, 5000, 6000, 0, NULL},
		 true,
		 5000},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		lease_view_t v = view_of(&cases[i].e);
		int64_t got = pgo_lease_wake_at(&v, cases[i].free_conn);

		if (got != cases[i].want)
			fail_msg("%s: wake at %lld, want %lld", cases[i].why,
				 (long long)got, (long long)cases[i].want);
	}
}

static void test_may_end(void **state)
{
	static const struct {
		const char *why;
		view_row_t e;
		int busy;
		int64_t deadline;
		bool want;
	} cases[] = {
		/* why, {queued, running, stop, kick, hb, reap, poll, retry,
		 * in flight}, ... */
		{"not stopping",
		 {0, 0, false, false, 2000, 2000, 2000, 0, NULL},
		 0,
		 0,
		 false},
		{"stopping, all quiet",
		 {0, 0, true, false, 2000, 2000, 2000, 0, NULL},
		 0,
		 5000,
		 true},
		{"a job still runs",
		 {0, 1, true, false, 2000, 2000, 2000, 0, NULL},
		 0,
		 5000,
		 false},
		{"a round in flight",
		 {0, 0, true, false, 2000, 2000, 2000, 0, NULL},
		 1,
		 5000,
		 false},
		{"outcomes wait for the database",
		 {2, 0, true, false, 2000, 2000, 2000, 0, NULL},
		 0,
		 5000,
		 false},
		{"... until the deadline",
		 {2, 0, true, false, 2000, 2000, 2000, 0, NULL},
		 0,
		 1000,
		 true},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		lease_view_t v = view_of(&cases[i].e);

		if (pgo_lease_may_end(&v, cases[i].busy, cases[i].deadline) !=
		    cases[i].want)
			fail_msg("%s: may end %d, want %d", cases[i].why,
				 !cases[i].want, cases[i].want);
	}
}

static void test_settle_again(void **state)
{
	(void)state;
	for (int tries = 1; tries <= SETTLE_TRIES + 2; tries++)
		if (pgo_lease_settle_again(tries) != (tries <= 3))
			fail_msg("try %d: again %d", tries,
				 pgo_lease_settle_again(tries));
}

/* One job running for 100 s under a 30 s lease, the loop looking every
 * 250 ms as lease_run.c does (a heartbeat moves next_hb by a third of
 * the lease): the lease is extended before it could expire, every
 * lease/3, and two heartbeats can be lost in a row without losing it. */
static void test_renewals(void **state)
{
	const int64_t lease = 30000;
	const view_row_t running = {0, 1, false, false, 0, 0, 0, 0, NULL};
	lease_view_t v = view_of(&running);
	int64_t last = 0, longest = 0;
	int beats = 0;

	(void)state;
	v.now = 0;
	v.next_hb = 0;
	v.next_reap = v.next_poll = INT64_MAX; /* heartbeats only */
	for (; v.now < 100000; v.now += 250) {
		if (pgo_lease_next_op(&v) != OP_HB)
			continue;
		beats++;
		if (v.now - last > longest)
			longest = v.now - last;
		last = v.now;
		v.next_hb = v.now + pgo_lease_hb_every(lease);
	}
	if (beats != 10)
		fail_msg("%d heartbeats in 100 s, want 10 (at 0, 10, ... 90 s)",
			 beats);
	if (longest != lease / 3 || 3 * longest > lease)
		fail_msg("longest gap %lld ms: a lease of %lld ms would not "
			 "survive two lost heartbeats",
			 (long long)longest, (long long)lease);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdict),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_hb_every),
		cmocka_unit_test(test_next_op),
		cmocka_unit_test(test_claim_size),
		cmocka_unit_test(test_wake_at),
		cmocka_unit_test(test_may_end),
		cmocka_unit_test(test_settle_again),
		cmocka_unit_test(test_renewals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
