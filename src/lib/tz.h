/*
 * tz.h — IANA time zones without touching the process environment: the
 * zone's TZif file (RFC 8536) is read from the tzdata directory, its
 * transition table is used up to its last entry and the POSIX TZ rule in
 * its footer ("CET-1CEST,M3.5.0,M10.5.0/3") beyond it, so dates after 2037
 * and "slim" files work.  Used by the cron expression module.
 *
 * Times are seconds since the epoch, UTC.  A "local" time is the wall
 * clock reading expressed the same way, as if it were UTC: local = utc +
 * offset.
 */
#ifndef PGO_TZ_H
#define PGO_TZ_H

#include <stdint.h>

#include "pgoutbox.h"

typedef struct pgo_tz pgo_tz_t;

/* A stretch of time with one UTC offset: [start, end). */
typedef struct pgo_tz_span {
	int64_t start;	  /* first instant; INT64_MIN when there is none */
	int64_t end;	  /* the next transition; INT64_MAX when none */
	int32_t off;	  /* seconds east of UTC during the span */
	int32_t prev_off; /* offset before start (== off when start is MIN) */
} pgo_tz_span_t;

/* Broken-down local time. */
typedef struct pgo_tm {
	int year;
	int mon;       /* 1-12 */
	int mday;      /* 1-31 */
	int hour;      /* 0-23 */
	int min;       /* 0-59 */
	int sec;       /* 0-59 */
	int wday;      /* 0-6, 0 = Sunday */
	int32_t utoff; /* seconds east of UTC */
} pgo_tm_t;

/*
 * Finds a zone by IANA name ("Europe/Berlin"); NULL, "" and "UTC" are UTC
 * and need no file.  The directory is $TZDIR or /usr/share/zoneinfo.  Names
 * may hold only [A-Za-z0-9_+-/], must not start with '/' and are at most
 * 255 characters.  Returns PGO_OK and a zone owned by a cache of 32 (valid
 * until 32 other zones have been loaded or pgo_tz_cache_clear() is called:
 * do not keep it), or PGO_ERR_INVALID "unknown time zone \"X\"" (also for
 * a file that is not valid TZif data, with the reason).
 */
int pgo_tz_load(const char *name, const pgo_tz_t **out, pgo_error_t *err);

/* Frees every cached zone (tests, leak checkers). */
void pgo_tz_cache_clear(void);

/* The span of constant offset that holds instant t. */
void pgo_tz_span(const pgo_tz_t *tz, int64_t t, pgo_tz_span_t *span);

/* UTC instant -> local broken-down time with its offset. */
void pgo_tz_to_local(const pgo_tz_t *tz, int64_t t, pgo_tm_t *tm);

/*
 * Local wall time (as seconds, see above) -> the UTC instants that show it:
 * returns 1 normally, 2 in a fall-back overlap (out[0] < out[1]) and 0 in
 * a spring-forward gap, where *gap_end (if not NULL) gets the transition
 * instant, the first one after the gap.
 */
int pgo_tz_from_local(const pgo_tz_t *tz, int64_t local, int64_t out[2],
		      int64_t *gap_end);

/* --- proleptic Gregorian calendar, valid for any int64 day count --- */

/* Days since 1970-01-01 of a civil date (mon 1-12). */
int64_t pgo_days_from_civil(int64_t year, int mon, int mday);
/* The civil date of a day count. */
void pgo_civil_from_days(int64_t days, int64_t *year, int *mon, int *mday);
int pgo_days_in_month(int64_t year, int mon);
/* 0 = Sunday. */
int pgo_weekday(int64_t days);

#endif /* PGO_TZ_H */
