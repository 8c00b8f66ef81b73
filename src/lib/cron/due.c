/*
 * due.c — the rules of a scheduler's pass over one schedule, as pure
 * functions: which ticks are due by the database clock, which of them
 * were missed (older than the grace: no scheduler was running) and what
 * the schedule's missed policy makes of those, and how long the
 * scheduler sleeps after the pass.  fire.c applies them;
 * tests/unit/test_cron.c checks them.
 */
#include <string.h>

#include "cron/cron_int.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

pgo_cron_missed_t pgo_cron_missed_kind(const char *s)
{
	if (s && strcmp(s, "run_once") == 0)
		return PGO_CRON_MISSED_RUN_ONCE;
	if (s && strcmp(s, "catch_up") == 0)
		return PGO_CRON_MISSED_CATCH_UP;
	return PGO_CRON_MISSED_SKIP;
}

void pgo_cron_due_collect(const pgo_cron_expr_t *e, const pgo_cron_zone_t *zone,
			  int64_t first, double now, size_t max,
			  pgo_cron_due_t *d)
{
	int64_t t;

	d->count = 0;
	/* Only the newest ones are kept (a long outage of an every-second
	 * schedule has many). */
	for (t = first; d->count < max && (double)t <= now;) {
		d->ring[d->count % d->cap] = t;
		d->count++;
		if (pgo_cron_next(e, zone, t, &t, NULL) != PGO_OK) {
			t = INT64_MAX;
			break;
		}
	}
	d->next = t;
}

void pgo_cron_plan(const pgo_cron_due_t *d, int64_t grace_from,
		   pgo_cron_missed_t missed, int cmax, size_t max_recorded,
		   pgo_cron_plan_t *p)
{
	size_t late_at, count = d->count;

	/* Ticks within the grace period are on time; older ones were
	 * missed (no instance was running). */
	for (late_at = 0; late_at < count && late_at < d->cap; late_at++)
		if (d->ring[(count - 1 - late_at) % d->cap] < grace_from)
			break;
	p->count = count;
	p->nmissed = count - late_at; /* the oldest nmissed ticks */
	p->runs = 0;
	if (missed == PGO_CRON_MISSED_RUN_ONCE)
		p->runs = p->nmissed ? 1 : 0;
	else if (missed == PGO_CRON_MISSED_CATCH_UP)
		p->runs = p->nmissed < (size_t)cmax ? p->nmissed : (size_t)cmax;
	p->first = count > d->cap ? count - d->cap : 0;
	if (p->nmissed > max_recorded + p->runs &&
	    p->nmissed - max_recorded - p->runs > p->first)
		p->first = p->nmissed - max_recorded - p->runs;
}

pgo_cron_fate_t pgo_cron_fate(const pgo_cron_plan_t *p, size_t i)
{
	if (i < p->first)
		return PGO_TICK_UNRECORDED;
	if (i >= p->nmissed)
		return PGO_TICK_ON_TIME;
	if (i >= p->nmissed - p->runs)
		return PGO_TICK_RUN;
	return PGO_TICK_SKIP;
}

int64_t pgo_cron_wait_ms(int64_t next, double dbnow, int64_t elapsed_ms)
{
	/* Time left by the database clock since it was read; the work since
	 * took some of it. */
	return (int64_t)(((double)next - dbnow) * 1000.0) + 1 - elapsed_ms;
}

int64_t pgo_cron_skewed_sleep(int64_t sleep_ms, int64_t clock_offset_ms)
{
	if (sleep_ms < 0)
		sleep_ms = 0;
	/* A skewed local clock wakes up early or late; the tick decision is
	 * the database's either way.  Early wakers find nothing due and
	 * sleep the rest. */
	if (sleep_ms + clock_offset_ms > 5)
		sleep_ms += clock_offset_ms;
	else if (sleep_ms > 100)
		sleep_ms = 100;
	return sleep_ms;
}
