/*
 * fuzz_cron.c — the cron expression parser and the next-tick search
 * (cron/cronexpr.c), in UTC.
 *
 * Input: the expression, then a NUL and the instant to search after
 * (seconds since the epoch, decimal; 2026-12-01 when absent).  Oracles: a
 * refused expression has a message naming it; for a parsed one, a tick
 * found lies after the instant, within PGO_CRON_HORIZON, and matches
 * every field (the day of month or of week by Vixie cron's rule when
 * neither field is '*').
 */
#include "fuzz.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

static bool matches(const pgo_cron_expr_t *e, int64_t t)
{
	int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
	int64_t s = t - days * 86400, year;
	int mon, mday, wday = pgo_weekday(days);
	bool dom, dow;

	pgo_civil_from_days(days, &year, &mon, &mday);
	dom = (e->dom >> mday) & 1;
	dow = (e->dow >> wday) & 1;
	return ((e->sec >> (s % 60)) & 1) && ((e->min >> (s / 60 % 60)) & 1) &&
	       ((e->hour >> (s / 3600)) & 1) && ((e->mon >> mon) & 1) &&
	       ((!e->dom_star && !e->dow_star) ? (dom || dow) : (dom && dow));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	pgo_cron_expr_t e;
	pgo_error_t err;
	int64_t after = 1796083200, next = 0; /* 2026-12-01T00:00:00Z */
	char *end;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	fuzz_fields(&ff, data, size, '\0', 2);
	if (ff.f[1][0]) {
		long long v = strtoll(ff.f[1], &end, 10);

		/* Years 1-9999 and a little beyond, to reach the limits. */
		if (v > -62200000000LL && v < 253500000000LL)
			after = v;
	}
	if (pgo_cron_parse(ff.f[0], &e, &err) != PGO_OK) {
		FUZZ_CHECK(err.msg[0], "refused without a message");
		fuzz_fields_free(&ff);
		return 0;
	}
	FUZZ_CHECK(e.sec && e.min && e.hour && e.dom && e.mon && e.dow,
		   "\"%s\" parsed with an empty field", ff.f[0]);
	FUZZ_CHECK(e.has_seconds || e.sec == 1,
		   "\"%s\": seconds without 6 fields", ff.f[0]);
	if (pgo_cron_next(&e, NULL, after, &next, &err) == PGO_OK) {
		FUZZ_CHECK(next > after &&
				   next - after <= PGO_CRON_HORIZON + 86400,
			   "\"%s\" after %lld: next %lld", ff.f[0],
			   (long long)after, (long long)next);
		FUZZ_CHECK(matches(&e, next),
			   "\"%s\" after %lld: %lld does not match", ff.f[0],
			   (long long)after, (long long)next);
	} else {
		FUZZ_CHECK(err.msg[0], "no tick and no message");
	}
	fuzz_fields_free(&ff);
	return 0;
}
