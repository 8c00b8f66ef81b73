/*
 * test_cron.c — the rules of a scheduler's pass (src/lib/cron/due.c),
 * table-driven: the due ticks of a schedule between its last tick and the
 * database's now, in UTC and across both DST changes of a zone; which of
 * them were missed and what each missed policy makes of them (run,
 * skipped, not recorded); how long the scheduler sleeps after a pass,
 * with and without a skewed clock; the fields a cron add writes over an
 * existing schedule.  The next tick itself is test_cronexpr.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cron/cron_int.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* "2027-03-28T01:00:00Z" -> seconds since the epoch. */
static int64_t iso(const char *s)
{
	int y, mo, d, h, mi, se;

	if (sscanf(s, "%d-%d-%dT%d:%d:%dZ", &y, &mo, &d, &h, &mi, &se) != 6)
		fail_msg("bad test time \"%s\"", s);
	return pgo_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
}

/* Europe/Berlin over 2027 as PostgreSQL gives it (test_cronexpr.c has
 * the same): CET, CEST from 2027-03-28T01:00Z, CET from
 * 2027-10-31T01:00Z. */
static pgo_tz_change_t berlin_changes[2];
static pgo_cron_zone_t berlin;

static const pgo_cron_zone_t *zone_of(const char *name)
{
	if (!name)
		return NULL;
	berlin_changes[0] =
		(pgo_tz_change_t){iso("2027-03-28T01:00:00Z"), 7200};
	berlin_changes[1] =
		(pgo_tz_change_t){iso("2027-10-31T01:00:00Z"), 3600};
	berlin = (pgo_cron_zone_t){
		.name = "Europe/Berlin",
		.from = iso("2026-12-01T00:00:00Z"),
		.to = iso("2028-01-01T00:00:00Z"),
		.off = 3600,
		.changes = berlin_changes,
		.n = 2,
	};
	return &berlin;
}

static void test_missed_kind(void **state)
{
	static const struct {
		const char *s;
		pgo_cron_missed_t want;
	} cases[] = {
		{"skip", PGO_CRON_MISSED_SKIP},
		{"run_once", PGO_CRON_MISSED_RUN_ONCE},
		{"catch_up", PGO_CRON_MISSED_CATCH_UP},
		{"catchup", PGO_CRON_MISSED_SKIP},
		{"", PGO_CRON_MISSED_SKIP},
		{NULL, PGO_CRON_MISSED_SKIP},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++)
		if (pgo_cron_missed_kind(cases[i].s) != cases[i].want)
			fail_msg("\"%s\" -> %d, want %d",
				 cases[i].s ? cases[i].s : "(null)",
				 pgo_cron_missed_kind(cases[i].s),
				 cases[i].want);
}

/* The due ticks from a schedule's first due tick up to now. */
static void test_due_collect(void **state)
{
	static const struct {
		const char *why, *expr, *zone;
		const char *first, *now;
		size_t max, cap;
		const char *ticks[6]; /* what the ring holds, oldest first */
		size_t count;
		const char *next; /* NULL: none */
	} cases[] = {
		{"every minute, five due",
		 "* * * * *",
		 NULL,
		 "2027-05-01T10:01:00Z",
		 "2027-05-01T10:05:30Z",
		 100,
		 10,
		 {"2027-05-01T10:01:00Z", "2027-05-01T10:02:00Z",
		  "2027-05-01T10:03:00Z", "2027-05-01T10:04:00Z",
		  "2027-05-01T10:05:00Z"},
		 5,
		 "2027-05-01T10:06:00Z"},
		{"a tick at now is due",
		 "* * * * *",
		 NULL,
		 "2027-05-01T10:01:00Z",
		 "2027-05-01T10:02:00Z",
		 100,
		 10,
		 {"2027-05-01T10:01:00Z", "2027-05-01T10:02:00Z"},
		 2,
		 "2027-05-01T10:03:00Z"},
		{"the max stops the count; the next is still due",
		 "* * * * *",
		 NULL,
		 "2027-05-01T10:01:00Z",
		 "2027-05-01T10:05:30Z",
		 3,
		 10,
		 {"2027-05-01T10:01:00Z", "2027-05-01T10:02:00Z",
		  "2027-05-01T10:03:00Z"},
		 3,
		 "2027-05-01T10:04:00Z"},
		{"the ring keeps the newest",
		 "* * * * *",
		 NULL,
		 "2027-05-01T10:01:00Z",
		 "2027-05-01T10:05:30Z",
		 100,
		 2,
		 {"2027-05-01T10:04:00Z", "2027-05-01T10:05:00Z"},
		 5,
		 "2027-05-01T10:06:00Z"},
		{"yearly: one due, the next a year on",
		 "0 0 1 1 *",
		 NULL,
		 "2027-01-01T00:00:00Z",
		 "2027-06-01T00:00:00Z",
		 100,
		 10,
		 {"2027-01-01T00:00:00Z"},
		 1,
		 "2028-01-01T00:00:00Z"},
		{"every 30 min through the repeated hour: real time",
		 "*/30 * * * *",
		 "Europe/Berlin",
		 "2027-10-31T00:00:00Z",
		 "2027-10-31T01:59:59Z",
		 100,
		 10,
		 {"2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z",
		  "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z"},
		 4,
		 "2027-10-31T02:00:00Z"},
		{"02:30 daily: once on the fall-back day",
		 "30 2 * * *",
		 "Europe/Berlin",
		 "2027-10-30T00:30:00Z",
		 "2027-10-31T03:00:00Z",
		 100,
		 10,
		 {"2027-10-30T00:30:00Z", "2027-10-31T00:30:00Z"},
		 2,
		 "2027-11-01T01:30:00Z"},
		{"02:30 daily: after the spring-forward gap",
		 "30 2 * * *",
		 "Europe/Berlin",
		 "2027-03-27T01:30:00Z",
		 "2027-03-28T12:00:00Z",
		 100,
		 10,
		 {"2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z"},
		 2,
		 "2027-03-29T00:30:00Z"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int64_t ring[16];
		pgo_cron_due_t d = {.ring = ring, .cap = cases[i].cap};
		pgo_cron_expr_t e;
		size_t held;

		if (pgo_cron_parse(cases[i].expr, &e, NULL) != PGO_OK)
			fail_msg("%s: \"%s\" does not parse", cases[i].why,
				 cases[i].expr);
		pgo_cron_due_collect(
			&e, zone_of(cases[i].zone), iso(cases[i].first),
			(double)iso(cases[i].now), cases[i].max, &d);
		if (d.count != cases[i].count)
			fail_msg("%s: %zu due, want %zu", cases[i].why, d.count,
				 cases[i].count);
		if (d.next != iso(cases[i].next))
			fail_msg("%s: next %lld, want %s", cases[i].why,
				 (long long)d.next, cases[i].next);
		held = d.count < d.cap ? d.count : d.cap;
		for (size_t k = 0; k < held; k++) {
			size_t tick = d.count - held + k;

			if (d.ring[tick % d.cap] != iso(cases[i].ticks[k]))
				fail_msg("%s: tick %zu is %lld, want %s",
					 cases[i].why, tick,
					 (long long)d.ring[tick % d.cap],
					 cases[i].ticks[k]);
		}
	}
}

/* What a pass does with `count` due ticks a minute apart, the first
 * `missed_before` of them older than the grace.  Fates, oldest first:
 * O on time, R missed and run, S missed and skipped, U not recorded. */
static void test_plan(void **state)
{
	static const struct {
		const char *why;
		size_t count, cap, missed_before;
		pgo_cron_missed_t missed;
		int cmax;
		size_t max_recorded;
		size_t nmissed, runs, first;
		const char *fates;
	} cases[] = {
		{"all on time", 3, 10, 0, PGO_CRON_MISSED_SKIP, 1, 100, 0, 0, 0,
		 "OOO"},
		{"on time whatever the policy", 2, 10, 0,
		 PGO_CRON_MISSED_CATCH_UP, 5, 100, 0, 0, 0, "OO"},
		{"skip", 5, 10, 3, PGO_CRON_MISSED_SKIP, 1, 100, 3, 0, 0,
		 "SSSOO"},
		{"run_once runs the newest missed", 5, 10, 3,
		 PGO_CRON_MISSED_RUN_ONCE, 1, 100, 3, 1, 0, "SSROO"},
		{"catch_up 2", 5, 10, 3, PGO_CRON_MISSED_CATCH_UP, 2, 100, 3, 2,
		 0, "SRROO"},
		{"catch_up more than missed", 5, 10, 3,
		 PGO_CRON_MISSED_CATCH_UP, 10, 100, 3, 3, 0, "RRROO"},
		{"all missed, run_once", 5, 10, 5, PGO_CRON_MISSED_RUN_ONCE, 1,
		 100, 5, 1, 0, "SSSSR"},
		{"all missed, skip", 4, 10, 4, PGO_CRON_MISSED_SKIP, 1, 100, 4,
		 0, 0, "SSSS"},
		{"only the newest skipped ones recorded", 6, 10, 6,
		 PGO_CRON_MISSED_RUN_ONCE, 1, 2, 6, 1, 3, "UUUSSR"},
		{"runs are recorded beyond the max", 6, 10, 6,
		 PGO_CRON_MISSED_CATCH_UP, 3, 1, 6, 3, 2, "UUSRRR"},
		{"past the ring: missed, not recorded", 6, 4, 0,
		 PGO_CRON_MISSED_SKIP, 1, 100, 2, 0, 2, "UUOOOO"},
		{"past the ring, run_once", 6, 4, 4, PGO_CRON_MISSED_RUN_ONCE,
		 1, 100, 4, 1, 2, "UUSROO"},
	};
	const int64_t t0 = iso("2027-05-01T10:00:00Z");

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int64_t ring[16];
		pgo_cron_due_t d = {.ring = ring,
				    .cap = cases[i].cap,
				    .count = cases[i].count};
		pgo_cron_plan_t p;
		char fates[16] = "";

		for (size_t k = 0; k < d.count; k++)
			ring[k % d.cap] = t0 + 60 * (int64_t)k;
		pgo_cron_plan(&d, t0 + 60 * (int64_t)cases[i].missed_before,
			      cases[i].missed, cases[i].cmax,
			      cases[i].max_recorded, &p);
		for (size_t k = 0; k < d.count; k++)
			fates[k] = "ORSU"[pgo_cron_fate(&p, k)];
		if (p.count != cases[i].count ||
		    p.nmissed != cases[i].nmissed || p.runs != cases[i].runs ||
		    p.first != cases[i].first)
			fail_msg("%s: missed %zu, runs %zu, first %zu; want "
				 "%zu, %zu, %zu",
				 cases[i].why, p.nmissed, p.runs, p.first,
				 cases[i].nmissed, cases[i].runs,
				 cases[i].first);
		if (strcmp(fates, cases[i].fates) != 0)
			fail_msg("%s: fates %s, want %s", cases[i].why, fates,
				 cases[i].fates);
	}
}

static void test_sleep(void **state)
{
	static const struct {
		int64_t next;
		double dbnow;
		int64_t elapsed, want;
	} waits[] = {
		{100, 99.5, 0, 501},   /* just after the tick */
		{100, 99.5, 200, 301}, /* the pass took 200 ms of it */
		{100, 100.0, 0, 1},
		{100, 100.2, 0, -199}, /* already late: the caller clamps */
		{160, 100.0, 0, 60001},
	};
	static const struct {
		int64_t sleep, offset, want;
	} skews[] = {
		{500, 0, 500},	   {-20, 0, 0}, {0, 0, 0},
		{500, 2000, 2500}, /* a clock 2 s slow wakes late */
		{500, -2000, 100}, /* ... 2 s fast: looks every 100 ms */
		{50, -2000, 50},   {3, 3, 6},	{2, 3, 2},
	};

	(void)state;
	for (size_t i = 0; i < N(waits); i++) {
		int64_t got = pgo_cron_wait_ms(waits[i].next, waits[i].dbnow,
					       waits[i].elapsed);

		if (got != waits[i].want)
			fail_msg("next %lld at %.1f after %lld ms: wait %lld, "
				 "want %lld",
				 (long long)waits[i].next, waits[i].dbnow,
				 (long long)waits[i].elapsed, (long long)got,
				 (long long)waits[i].want);
	}
	for (size_t i = 0; i < N(skews); i++) {
		int64_t got =
			pgo_cron_skewed_sleep(skews[i].sleep, skews[i].offset);

		if (got != skews[i].want)
			fail_msg("sleep %lld with offset %lld: %lld, want "
				 "%lld",
				 (long long)skews[i].sleep,
				 (long long)skews[i].offset, (long long)got,
				 (long long)skews[i].want);
	}
}

/* A cron add's fields: the given over the existing schedule's over the
 * defaults (issue 44: adding again kept no zone). */
static void test_merge(void **state)
{
	static const pgo_cron_def_t berlin_daily = {
		"Europe/Berlin", "{\"k\": 1}", "allow", "catch_up", 5};
	static const struct {
		const char *why;
		pgo_cron_schedule_t s;
		bool exists;
		pgo_cron_def_t want;
	} cases[] = {
		{"new, nothing given",
		 {.size = 0},
		 false,
		 {"UTC", "{}", "skip", "run_once", 1}},
		{"new, an empty zone is UTC",
		 {.tz = ""},
		 false,
		 {"UTC", "{}", "skip", "run_once", 1}},
		{"new, all given",
		 {.tz = "Asia/Tokyo",
		  .payload = "[]",
		  .overlap = "allow",
		  .missed = "skip",
		  .catch_up_max = 7},
		 false,
		 {"Asia/Tokyo", "[]", "allow", "skip", 7}},
		{"replaced, nothing given: all kept",
		 {.size = 0},
		 true,
		 {"Europe/Berlin", "{\"k\": 1}", "allow", "catch_up", 5}},
		{"replaced, an empty zone keeps it",
		 {.tz = ""},
		 true,
		 {"Europe/Berlin", "{\"k\": 1}", "allow", "catch_up", 5}},
		{"replaced, a zone given",
		 {.tz = "UTC"},
		 true,
		 {"UTC", "{\"k\": 1}", "allow", "catch_up", 5}},
		{"replaced, policies given",
		 {.overlap = "skip", .missed = "run_once", .catch_up_max = 2},
		 true,
		 {"Europe/Berlin", "{\"k\": 1}", "skip", "run_once", 2}},
		{"replaced, a payload given",
		 {.payload = "{}"},
		 true,
		 {"Europe/Berlin", "{}", "allow", "catch_up", 5}},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_cron_def_t got;
		const pgo_cron_def_t *w = &cases[i].want;

		pgo_cron_merge(&cases[i].s,
			       cases[i].exists ? &berlin_daily : NULL, &got);
		if (strcmp(got.tz, w->tz) != 0 ||
		    strcmp(got.payload, w->payload) != 0 ||
		    strcmp(got.overlap, w->overlap) != 0 ||
		    strcmp(got.missed, w->missed) != 0 ||
		    got.catch_up_max != w->catch_up_max)
			fail_msg("%s: %s %s %s %s %d, want %s %s %s %s %d",
				 cases[i].why, got.tz, got.payload, got.overlap,
				 got.missed, got.catch_up_max, w->tz,
				 w->payload, w->overlap, w->missed,
				 w->catch_up_max);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missed_kind),
		cmocka_unit_test(test_due_collect),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_sleep),
		cmocka_unit_test(test_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
