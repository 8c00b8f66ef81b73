/*
 * cronexpr.h — cron expressions: parsing and "the next tick after t" in an
 * IANA time zone.
 *
 * Syntax.  Five fields "min hour dom mon dow" or six with seconds first
 * "sec min hour dom mon dow", separated by runs of blanks.  A field is a
 * comma list of `*`, `n`, `a-b`, `a-b/n`, `a/n` (a to the field's
 * maximum) and `*` followed by `/n`.  Months JAN-DEC and days SUN-SAT may
 * be named (any case); the day of week is 0-7 with both 0 and 7 Sunday,
 * and a range ending on Sunday may be written FRI-SUN (5-0).  Macros:
 * @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly;
 * @every and @reboot are refused.
 *
 * Day matching (Vixie cron): when both day-of-month and day-of-week are
 * restricted, a day matches if EITHER does; when one of them starts with
 * `*` (a step over `*` included, as in Vixie cron and cronie) both must
 * match.
 *
 * Time zones and daylight saving time.  A schedule reads the wall clock of
 * its zone.  Around a DST change:
 *  - Schedules pinned to hours (the hour field is not every hour, e.g.
 *    "30 2 * * *" or "0 9-17 * * *") fire at most once per wall-clock
 *    time: a time skipped by a spring-forward gap fires once at the first
 *    instant after the gap (02:30 on Europe/Berlin's spring-forward day
 *    fires at 03:00 CEST = 01:00 UTC), and a time that a fall-back overlap
 *    shows twice fires at its first occurrence only.
 *  - Schedules not pinned to hours (the hour field covers all 24 hours,
 *    e.g. every 15 minutes, or "0 * * * *") follow real time: they fire
 *    at every real occurrence of a matching wall time, so twice in a
 *    repeated hour and never for times a gap skips (the hour after the
 *    gap has its own ticks).  A 15-minute job thus runs every 15 real
 *    minutes straight through both changes.
 * This is what Vixie cron and cronie do for "fixed" and "wildcard" jobs.
 */
#ifndef PGO_CRONEXPR_H
#define PGO_CRONEXPR_H

#include <stdbool.h>
#include <stdint.h>

#include "pgoutbox.h"

/* A parsed expression: bit n set = value n matches. */
typedef struct pgo_cron_expr {
	uint64_t sec;	  /* seconds 0-59 (bit 0 only for 5 fields) */
	uint64_t min;	  /* minutes 0-59 */
	uint32_t hour;	  /* hours 0-23 */
	uint32_t dom;	  /* days of month 1-31 */
	uint16_t mon;	  /* months 1-12 */
	uint8_t dow;	  /* days of week 0-6, 0 = Sunday (7 is folded to 0) */
	bool has_seconds; /* written with 6 fields */
	bool dom_star;	  /* day-of-month field starts with '*' ... */
	bool dow_star;	  /* ... day-of-week too: for the Vixie OR rule */
	char text[128];	  /* the expression as given, blanks trimmed */
} pgo_cron_expr_t;

/*
 * Parses text into *out.  Returns PGO_OK, or PGO_ERR_INVALID with err
 * naming the expression, the field and the problem:
 *   cron "61 * * * *": minute field: 61 is out of range 0-59
 * Expressions are at most 127 characters after trimming.
 */
int pgo_cron_parse(const char *text, pgo_cron_expr_t *out, pgo_error_t *err);

/*
 * The first tick strictly after `after` (seconds since the epoch, UTC, in
 * years 1-9999) in time zone tz (IANA name; NULL or "" = UTC), by the DST
 * rules above.  Returns PGO_OK and *next, or PGO_ERR_INVALID for an
 * unknown zone or when nothing matches within 5 years ("0 0 30 2 *").
 */
int pgo_cron_next(const pgo_cron_expr_t *e, const char *tz, int64_t after,
		  int64_t *next, pgo_error_t *err);

/* PGO_OK for a known zone, else PGO_ERR_INVALID "unknown time zone \"X\"". */
int pgo_cron_tz_check(const char *tz, pgo_error_t *err);

#endif /* PGO_CRONEXPR_H */
