/*
 * time.h — the clocks every module reads (monotonic for deadlines and
 * timings, the wall clock for what is compared with the database's
 * timestamps) and the reading of an event's created_at.
 */
#ifndef PGO_BASE_TIME_H
#define PGO_BASE_TIME_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t pgo_now_ms(void);
/* Monotonic microseconds, for timings. */
int64_t pgo_now_us(void);
/* CLOCK_REALTIME in microseconds since the epoch. */
int64_t pgo_wall_us(void);
/* Reads an event's created_at, "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (UTC, as
 * the relay gives it to sinks), into microseconds since the epoch.
 * Returns 0, or -1 when t does not read so (*us untouched). */
int pgo_parse_rfc3339_us(const char *t, int64_t *us);

#endif /* PGO_BASE_TIME_H */
