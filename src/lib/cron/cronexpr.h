/*
 * cronexpr.h — cron expressions: parsing and "the next tick after t" on
 * the wall clock of a time zone.
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
 *
 * Where a zone's offsets come from.  Matching is pure C; what a zone's
 * wall clock shows at an instant comes in a pgo_cron_zone_t: the zone's
 * UTC offsets over a window of time.  cron.c asks PostgreSQL for them
 * (pgoutbox.tz_offsets, sql/009), so every scheduler computes ticks with
 * the database's tzdata, as it uses the database's clock; the unit tests
 * write them by hand.
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

/* --- time zones --- */

/* A change of a zone's UTC offset. */
typedef struct pgo_tz_change {
	int64_t at;  /* its first instant (seconds since the epoch, UTC) */
	int32_t off; /* the offset from then on, seconds east of UTC */
} pgo_tz_change_t;

/*
 * A time zone's UTC offsets over the window of instants [from, to]: the
 * offset in force at `from` and every change of it up to `to`.  A view:
 * the name and the changes belong to whoever filled it in.  NULL stands
 * for UTC wherever a zone is taken.
 */
typedef struct pgo_cron_zone {
	const char *name;		/* IANA name, for messages */
	int64_t from, to;		/* INT64_MIN, INT64_MAX: no bound */
	int32_t off;			/* the offset at `from` */
	const pgo_tz_change_t *changes; /* those in (from, to], ascending */
	size_t n;			/* how many */
} pgo_cron_zone_t;

/* Nothing matching within this long after `after`: no tick at all. */
#define PGO_CRON_HORIZON (5 * 366 * 86400LL)
/* How far before `after` a zone's window must reach: the change of offset
 * that started a repeated hour may lie up to a day before it. */
#define PGO_CRON_ZONE_MARGIN (2 * 86400LL)

/*
 * The first tick strictly after `after` (seconds since the epoch, UTC, in
 * years 1-9999) on the wall clock of zone (NULL = UTC), by the DST rules
 * above.  The zone's window must reach from PGO_CRON_ZONE_MARGIN before
 * `after` to the tick, so to `after` + PGO_CRON_HORIZON to be sure.
 * Returns PGO_OK and *next, or PGO_ERR_INVALID when nothing matches within
 * PGO_CRON_HORIZON ("0 0 30 2 *") or the window is too short.
 */
int pgo_cron_next(const pgo_cron_expr_t *e, const pgo_cron_zone_t *zone,
		  int64_t after, int64_t *next, pgo_error_t *err);

/* --- proleptic Gregorian calendar, valid for any int64 day count --- */

/* Days since 1970-01-01 of a civil date (mon 1-12). */
int64_t pgo_days_from_civil(int64_t year, int mon, int mday);
/* The civil date of a day count. */
void pgo_civil_from_days(int64_t days, int64_t *year, int *mon, int *mday);
int pgo_days_in_month(int64_t year, int mon);
/* 0 = Sunday. */
int pgo_weekday(int64_t days);

#endif /* PGO_CRONEXPR_H */
