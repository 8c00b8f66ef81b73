/*
 * test_cronexpr.c — table-driven tests of cron expressions: parsing and its
 * error messages, next ticks in UTC and on the wall clocks of zones with
 * DST (gaps, overlaps, half-hour offsets, a skipped day, dates past 2037),
 * the window of offsets a zone must cover, and 100,000 successive ticks.
 *
 * The zones' offsets are written here as PostgreSQL 15 with tzdata 2025b
 * gives them (pgoutbox.tz_offsets); tests/integration/t_cron_tz.sh checks
 * the same cases against the database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cron/cronexpr.h"
#include "pgoutbox.h"

/* "2027-03-28T01:00:00Z" -> seconds since the epoch. */
static int64_t iso(const char *s)
{
	int y, mo, d, h, mi, se;

	if (sscanf(s, "%d-%d-%dT%d:%d:%dZ", &y, &mo, &d, &h, &mi, &se) != 6)
		fail_msg("bad test time \"%s\"", s);
	return pgo_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
}

static const char *iso_str(int64_t t, char *buf, size_t len)
{
	int64_t days = t / 86400 - (t % 86400 < 0), y;
	int64_t sod = t - days * 86400;
	int mo, d;

	pgo_civil_from_days(days, &y, &mo, &d);
	snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, mo,
		 d, (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60));
	return buf;
}

/* A zone over a window, as text: the offset at `from`, then its changes. */
static const struct zone_spec {
	const char *name;
	const char *from, *to;
	int32_t off;
	struct {
		const char *at;
		int32_t off;
	} changes[12];
} specs[] = {
	/* clang-format off */
	{"Europe/Berlin", "2026-12-01T00:00:00Z", "2028-01-01T00:00:00Z", 3600,
	 {{"2027-03-28T01:00:00Z", 7200}, {"2027-10-31T01:00:00Z", 3600}}},
	{"Europe/Berlin", "2044-12-01T00:00:00Z", "2046-01-01T00:00:00Z", 3600,
	 {{"2045-03-26T01:00:00Z", 7200}, {"2045-10-29T01:00:00Z", 3600}}},
	{"Europe/Berlin", "2099-05-01T00:00:00Z", "2100-02-01T00:00:00Z", 7200,
	 {{"2099-10-25T01:00:00Z", 3600}}},
	/* over five years, for "no matching time within 5 years" */
	{"Europe/Berlin", "2023-12-01T00:00:00Z", "2029-02-01T00:00:00Z", 3600,
	 {{"2024-03-31T01:00:00Z", 7200}, {"2024-10-27T01:00:00Z", 3600},
	  {"2025-03-30T01:00:00Z", 7200}, {"2025-10-26T01:00:00Z", 3600},
	  {"2026-03-29T01:00:00Z", 7200}, {"2026-10-25T01:00:00Z", 3600},
	  {"2027-03-28T01:00:00Z", 7200}, {"2027-10-31T01:00:00Z", 3600},
	  {"2028-03-26T01:00:00Z", 7200}, {"2028-10-29T01:00:00Z", 3600}}},
	{"America/New_York", "2023-12-01T00:00:00Z", "2025-01-01T00:00:00Z", -18000,
	 {{"2024-03-10T07:00:00Z", -14400}, {"2024-11-03T06:00:00Z", -18000}}},
	{"Asia/Kolkata", "2023-12-01T00:00:00Z", "2024-02-01T00:00:00Z", 19800,
	 {{NULL, 0}}},
	{"Australia/Lord_Howe", "2024-07-01T00:00:00Z", "2025-07-01T00:00:00Z", 37800,
	 {{"2024-10-05T15:30:00Z", 39600}, {"2025-04-05T15:00:00Z", 37800}}},
	/* Samoa skipped 2011-12-30, going from -10 to +14 */
	{"Pacific/Apia", "2011-12-01T00:00:00Z", "2012-01-01T00:00:00Z", -36000,
	 {{"2011-12-30T10:00:00Z", 50400}}},
	/* clang-format on */
};

#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static pgo_cron_zone_t zones[NSPECS];
static pgo_tz_change_t changes[NSPECS][12];

/* The zone of specs[i], built on first use. */
static const pgo_cron_zone_t *spec_zone(size_t i)
{
	pgo_cron_zone_t *z = &zones[i];

	if (!z->name) {
		z->name = specs[i].name;
		z->from = iso(specs[i].from);
		z->to = iso(specs[i].to);
		z->off = specs[i].off;
		z->changes = changes[i];
		for (size_t k = 0; k < 12 && specs[i].changes[k].at; k++) {
			changes[i][k].at = iso(specs[i].changes[k].at);
			changes[i][k].off = specs[i].changes[k].off;
			z->n = k + 1;
		}
	}
	return z;
}

/* Zone `name` (NULL: UTC) over a window that holds `after`. */
static const pgo_cron_zone_t *zone_at(const char *name, int64_t after)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < NSPECS; i++)
		if (strcmp(specs[i].name, name) == 0 &&
		    iso(specs[i].from) <= after && after <= iso(specs[i].to))
			return spec_zone(i);
	fail_msg("the test has no offsets of %s at %lld", name,
		 (long long)after);
	return NULL;
}

static void test_next(void **state)
{
	static const struct {
		const char *expr;
		const char *tz;
		const char *after;
		const char *want;
	} cases[] = {
		/* clang-format off */
		/* UTC: no zone */
		{"* * * * *", NULL, "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z"},
		{"* * * * *", NULL, "2024-01-01T00:00:30Z", "2024-01-01T00:01:00Z"},
		{"*/15 * * * *", NULL, "2024-01-01T00:07:00Z", "2024-01-01T00:15:00Z"},
		{"*/15 * * * *", NULL, "2024-12-31T23:45:00Z", "2025-01-01T00:00:00Z"},
		{"5/20 * * * *", NULL, "2024-01-01T00:25:00Z", "2024-01-01T00:45:00Z"},
		{"  0\t9 * *   MON-FRI ", NULL, "2024-06-07T09:00:00Z", "2024-06-10T09:00:00Z"},
		{"0 9 * * mon-fri", NULL, "2024-06-08T08:00:00Z", "2024-06-10T09:00:00Z"},
		{"@monthly", NULL, "2024-01-31T12:00:00Z", "2024-02-01T00:00:00Z"},
		{"@monthly", NULL, "2024-02-29T23:59:59Z", "2024-03-01T00:00:00Z"},
		{"@YEARLY", NULL, "2024-06-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"@weekly", NULL, "2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z"},
		{"@daily", NULL, "2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z"},
		{"@hourly", NULL, "2024-06-01T00:59:59Z", "2024-06-01T01:00:00Z"},
		{"0 0 29 2 *", NULL, "2024-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 0 31 * *", NULL, "2024-04-01T00:00:00Z", "2024-05-31T00:00:00Z"},
		/* Vixie: dom and dow both restricted -> either matches */
		{"0 0 13 * FRI", NULL, "2024-01-01T00:00:00Z", "2024-01-05T00:00:00Z"},
		{"0 0 13 * FRI", NULL, "2024-01-05T00:00:00Z", "2024-01-12T00:00:00Z"},
		{"0 0 13 * FRI", NULL, "2024-01-12T00:00:00Z", "2024-01-13T00:00:00Z"},
		{"0 0 13 * *", NULL, "2024-01-01T00:00:00Z", "2024-01-13T00:00:00Z"},
		/* ...but a field starting with '*' makes it AND (odd Mondays) */
		{"0 0 */2 * MON", NULL, "2024-01-01T00:00:00Z", "2024-01-15T00:00:00Z"},
		{"0 0 * * 7", NULL, "2024-06-03T00:00:00Z", "2024-06-09T00:00:00Z"},
		{"0 0 * * FRI-SUN", NULL, "2024-06-03T00:00:00Z", "2024-06-07T00:00:00Z"},
		{"0 0 1 jan,Jul *", NULL, "2024-02-01T00:00:00Z", "2024-07-01T00:00:00Z"},
		/* seconds */
		{"*/10 * * * * *", NULL, "2024-01-01T00:00:05Z", "2024-01-01T00:00:10Z"},
		{"*/10 * * * * *", NULL, "2024-01-01T00:00:50Z", "2024-01-01T00:01:00Z"},
		{"30 0 12 * * *", NULL, "2024-01-01T12:00:00Z", "2024-01-01T12:00:30Z"},
		/* Berlin spring-forward 2027-03-28 01:00Z: 02:00-03:00 skipped */
		{"30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z", "2027-03-28T01:00:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"},
		{"*/15 * * * *", "Europe/Berlin", "2027-03-28T00:45:00Z", "2027-03-28T01:00:00Z"},
		{"30 * * * *", "Europe/Berlin", "2027-03-28T00:30:00Z", "2027-03-28T01:30:00Z"},
		/* Berlin fall-back 2027-10-31 01:00Z: 02:00-03:00 twice */
		{"30 2 * * *", "Europe/Berlin", "2027-10-30T12:00:00Z", "2027-10-31T00:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"},
		{"*/15 * * * *", "Europe/Berlin", "2027-10-31T00:45:00Z", "2027-10-31T01:00:00Z"},
		{"*/15 * * * *", "Europe/Berlin", "2027-10-31T01:00:00Z", "2027-10-31T01:15:00Z"},
		{"0 * * * *", "Europe/Berlin", "2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z"},
		/* New York: EDT/EST, gap 02:00-03:00, overlap 01:00-02:00 */
		{"0 9 * * *", "America/New_York", "2024-07-01T00:00:00Z", "2024-07-01T13:00:00Z"},
		{"0 9 * * *", "America/New_York", "2024-01-15T00:00:00Z", "2024-01-15T14:00:00Z"},
		{"30 2 * * *", "America/New_York", "2024-03-10T05:00:00Z", "2024-03-10T07:00:00Z"},
		{"30 1 * * *", "America/New_York", "2024-11-03T05:00:00Z", "2024-11-03T05:30:00Z"},
		{"30 1 * * *", "America/New_York", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"},
		/* half-hour offset, no DST */
		{"0 9 * * *", "Asia/Kolkata", "2024-01-01T00:00:00Z", "2024-01-01T03:30:00Z"},
		{"*/45 * * * *", "Asia/Kolkata", "2024-01-01T00:00:00Z", "2024-01-01T00:15:00Z"},
		/* Lord Howe: +10:30, 30-minute DST (02:00 -> 02:30, back 01:30) */
		{"0 2 * * *", "Australia/Lord_Howe", "2024-10-05T12:00:00Z", "2024-10-05T15:30:00Z"},
		{"0 * * * *", "Australia/Lord_Howe", "2024-10-05T14:30:00Z", "2024-10-05T16:00:00Z"},
		{"45 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:00:00Z", "2025-04-05T14:45:00Z"},
		/* Samoa's skipped day: a pinned time fires as the gap ends */
		{"0 12 * * *", "Pacific/Apia", "2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z"},
		{"0 12 * * *", "Pacific/Apia", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"},
		{"0 * * * *", "Pacific/Apia", "2011-12-30T09:00:00Z", "2011-12-30T10:00:00Z"},
		/* past 2037, where fat TZif files end and rules take over */
		{"0 12 * * *", "Europe/Berlin", "2045-07-01T00:00:00Z", "2045-07-01T10:00:00Z"},
		{"0 12 * * *", "Europe/Berlin", "2045-01-10T00:00:00Z", "2045-01-10T11:00:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2045-03-25T12:00:00Z", "2045-03-26T01:00:00Z"},
		{"0 0 1 1 *", "Europe/Berlin", "2099-06-01T00:00:00Z", "2099-12-31T23:00:00Z"},
		/* clang-format on */
	};
	char got_s[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_cron_expr_t e;
		pgo_error_t err;
		int64_t next = 0;

		if (pgo_cron_parse(cases[i].expr, &e, &err) != PGO_OK)
			fail_msg("case %zu: %s", i, err.msg);
		if (pgo_cron_next(&e, zone_at(cases[i].tz, iso(cases[i].after)),
				  iso(cases[i].after), &next, &err) != PGO_OK)
			fail_msg("case %zu: %s", i, err.msg);
		if (next != iso(cases[i].want))
			fail_msg("case %zu: \"%s\" in %s after %s -> %s, want "
				 "%s",
				 i, cases[i].expr,
				 cases[i].tz ? cases[i].tz : "(UTC)",
				 cases[i].after,
				 iso_str(next, got_s, sizeof(got_s)),
				 cases[i].want);
	}
}

static void test_parse_fields(void **state)
{
	pgo_cron_expr_t e;
	pgo_error_t err;

	(void)state;
	assert_int_equal(pgo_cron_parse(" 0 0 * * 7\n", &e, &err), PGO_OK);
	assert_string_equal(e.text, "0 0 * * 7");
	assert_int_equal(e.dow, 1); /* 7 folds to Sunday */
	assert_false(e.has_seconds);
	assert_int_equal(e.sec, 1);
	assert_true(e.dom_star);
	assert_false(e.dow_star);

	assert_int_equal(
		pgo_cron_parse("*/20 1-3,10/20 */6 1,15 FEB-apr sat-sun", &e,
			       &err),
		PGO_OK);
	assert_true(e.has_seconds);
	assert_int_equal(e.sec, 1ull << 0 | 1ull << 20 | 1ull << 40);
	assert_int_equal(e.min, 1ull << 1 | 1ull << 2 | 1ull << 3 | 1ull << 10 |
					1ull << 30 | 1ull << 50);
	assert_int_equal(e.hour, 1u << 0 | 1u << 6 | 1u << 12 | 1u << 18);
	assert_int_equal(e.dom, 1u << 1 | 1u << 15);
	assert_int_equal(e.mon, 1u << 2 | 1u << 3 | 1u << 4);
	assert_int_equal(e.dow, 1u << 6 | 1u << 0);
	assert_false(e.dom_star);
	assert_false(e.dow_star);

	/* a/n in day-of-week stops at Saturday: 7 would be Sunday again */
	assert_int_equal(pgo_cron_parse("0 0 * * 1/2", &e, &err), PGO_OK);
	assert_int_equal(e.dow, 1u << 1 | 1u << 3 | 1u << 5);
	assert_int_equal(pgo_cron_parse("0 0 * * FRI-SUN", &e, &err), PGO_OK);
	assert_int_equal(e.dow, 1u << 5 | 1u << 6 | 1u << 0);

	assert_int_equal(pgo_cron_parse("@Weekly", &e, &err), PGO_OK);
	assert_string_equal(e.text, "@Weekly");
	assert_int_equal(e.min, 1);
	assert_int_equal(e.hour, 1);
	assert_int_equal(e.dow, 1);
	assert_true(e.dom_star);
}

static void test_invalid(void **state)
{
	static const struct {
		const char *expr;
		const char *msg; /* substring of the error */
	} cases[] = {
		/* clang-format off */
		{"61 * * * *", "cron \"61 * * * *\": minute field: 61 is out of range 0-59"},
		{"* * * *", "cron \"* * * *\": expected 5 or 6 fields, got 4"},
		{"* * * * * * *", "expected 5 or 6 fields, got 7"},
		{"0 */0 * * *", "hour field: bad step \"/0\""},
		{"*/61 * * * *", "minute field: bad step \"/61\": must be 1-60"},
		{"*/ * * * *", "minute field: bad step \"/\""},
		{"*/x * * * *", "minute field: bad step \"/x\""},
		{"0 0 * * */8", "day-of-week field: bad step \"/8\": must be 1-7"},
		{"0 0 * * FUN", "day-of-week field: unknown name \"FUN\""},
		{"5-3 * * * *", "minute field: range 5-3 is reversed"},
		{"0 0 * * SAT-MON", "day-of-week field: range SAT-MON is reversed"},
		{"0 0 0 * *", "day-of-month field: 0 is out of range 1-31"},
		{"0 0 32 * *", "day-of-month field: 32 is out of range 1-31"},
		{"0 0 1 13 *", "month field: 13 is out of range 1-12"},
		{"0 0 1 FOO *", "month field: unknown name \"FOO\""},
		{"0 0 1 JANUARY *", "month field: unknown name \"JANUARY\""},
		{"0 0 * * 8", "day-of-week field: 8 is out of range 0-7"},
		{"60 * * * * *", "second field: 60 is out of range 0-59"},
		{"* 24 * * *", "hour field: 24 is out of range 0-23"},
		{"99999999999 * * * *", "minute field: 99999999999 is out of range 0-59"},
		{"a * * * *", "minute field: \"a\" is not a number"},
		{"0 0 L * *", "day-of-month field: \"L\" is not a number"},
		{"1,,2 * * * *", "minute field: empty item in list \"1,,2\""},
		{"0 1, * * *", "hour field: empty item in list \"1,\""},
		{"5- * * * *", "minute field: incomplete range \"5-\""},
		{"1-2-3 * * * *", "minute field: unexpected \"-3\" in \"1-2-3\""},
		{"5x * * * *", "minute field: unexpected \"x\" in \"5x\""},
		{"? * * * *", "minute field: unexpected \"?\""},
		{"@every 5m", "cron \"@every 5m\": @every is not supported"},
		{"@reboot", "@reboot is not supported"},
		{"@fortnightly", "unknown macro \"@fortnightly\""},
		{"@daily 5", "unexpected \"5\" after @daily"},
		{"", "empty expression"},
		{" \t ", "empty expression"},
		{"0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 "
		 "1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 * 0 0 1 1 *",
		 "too long (129 characters, at most 127)"},
		/* clang-format on */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_cron_expr_t e;
		pgo_error_t err;
		int rc = pgo_cron_parse(cases[i].expr, &e, &err);

		if (rc != PGO_ERR_INVALID)
			fail_msg("case %zu: \"%s\" accepted", i, cases[i].expr);
		if (!strstr(err.msg, cases[i].msg))
			fail_msg("case %zu: \"%s\"\n  got:  %s\n  want: %s", i,
				 cases[i].expr, err.msg, cases[i].msg);
	}
}

static void test_next_errors(void **state)
{
	static const struct {
		const char *expr;
		const char *tz;
		const char *msg;
	} cases[] = {
		/* clang-format off */
		{"0 0 30 2 *", NULL, "cron \"0 0 30 2 *\": no matching time within 5 years"},
		{"0 0 31 4,6 *", "Europe/Berlin", "no matching time within 5 years"},
		/* clang-format on */
	};
	int64_t after = iso("2024-01-01T00:00:00Z"), next;
	pgo_cron_expr_t e;
	pgo_error_t err;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(pgo_cron_parse(cases[i].expr, &e, &err),
				 PGO_OK);
		if (pgo_cron_next(&e, zone_at(cases[i].tz, after), after, &next,
				  &err) != PGO_ERR_INVALID)
			fail_msg("case %zu: no error", i);
		if (!strstr(err.msg, cases[i].msg))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i,
				 err.msg, cases[i].msg);
	}
	assert_int_equal(pgo_cron_next(&e, NULL, INT64_MAX - 10, &next, &err),
			 PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "outside years 1-9999"));
}

/* A zone's window must reach from PGO_CRON_ZONE_MARGIN before `after` to
 * the tick. */
static void test_zone_window(void **state)
{
	pgo_cron_zone_t z =
		*zone_at("Europe/Berlin", iso("2027-01-01T00:00:00Z"));
	int64_t after = iso("2027-01-02T00:00:00Z"), next;
	pgo_cron_expr_t e;
	pgo_error_t err;

	(void)state;
	/* The tick, 2028-06-01, lies past the window's end, 2028-01-01. */
	assert_int_equal(pgo_cron_parse("0 0 1 6 *", &e, &err), PGO_OK);
	assert_int_equal(
		pgo_cron_next(&e, &z, iso("2027-07-01T00:00:00Z"), &next, &err),
		PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg,
			       "the offsets of time zone "
			       "\"Europe/Berlin\" end at "
			       "2028-01-01T00:00:00Z, before the tick"));
	/* A window that ends at the tick is enough, one second less not. */
	assert_int_equal(pgo_cron_parse("0 0 1 7 *", &e, &err), PGO_OK);
	z.to = iso("2027-06-30T22:00:00Z"); /* 2027-07-01 00:00 CEST */
	assert_int_equal(pgo_cron_next(&e, &z, after, &next, &err), PGO_OK);
	assert_int_equal(next, z.to);
	z.to--;
	assert_int_equal(pgo_cron_next(&e, &z, after, &next, &err),
			 PGO_ERR_INVALID);
	/* The change that began a repeated hour may lie just before `after`:
	 * the window must start PGO_CRON_ZONE_MARGIN before it. */
	z.to = iso("2028-01-01T00:00:00Z");
	assert_int_equal(pgo_cron_next(&e, &z, z.from + PGO_CRON_ZONE_MARGIN,
				       &next, &err),
			 PGO_OK);
	assert_int_equal(pgo_cron_next(&e, &z,
				       z.from + PGO_CRON_ZONE_MARGIN - 1, &next,
				       &err),
			 PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "the offsets of time zone "
					"\"Europe/Berlin\" start at "
					"2026-12-01T00:00:00Z, too late for "
					"ticks after"));
}

/* 100,000 successive ticks, each exactly one real second after the last,
 * also straight through Berlin's DST changes (not pinned to hours). */
static void test_many_ticks(void **state)
{
	static const struct {
		const char *tz;
		const char *start;
	} runs[] = {
		{NULL, "2024-01-01T00:00:00Z"},
		{"Europe/Berlin", "2027-10-30T12:00:00Z"},
		{"Europe/Berlin", "2027-03-27T12:00:00Z"},
	};
	pgo_cron_expr_t e;
	pgo_error_t err;

	(void)state;
	assert_int_equal(pgo_cron_parse("*/1 * * * * *", &e, &err), PGO_OK);
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		int64_t t = iso(runs[r].start), next;

		for (int i = 0; i < 100000; i++) {
			if (pgo_cron_next(&e, zone_at(runs[r].tz, t), t, &next,
					  &err))
				fail_msg("run %zu tick %d: %s", r, i, err.msg);
			if (next != t + 1)
				fail_msg("run %zu tick %d: %lld -> %lld", r, i,
					 (long long)t, (long long)next);
			t = next;
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_next),
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_next_errors),
		cmocka_unit_test(test_zone_window),
		cmocka_unit_test(test_many_ticks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
