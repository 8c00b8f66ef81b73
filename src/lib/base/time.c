/*
 * time.c — the clocks (monotonic and wall) and the reading of an event's
 * created_at into microseconds since the epoch.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/time.h"

int64_t pgo_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t pgo_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t pgo_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Digits t[0..n-1] as a number; -1 when one is not a digit. */
static int digits(const char *t, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return -1;
		v = v * 10 + (t[i] - '0');
	}
	return v;
}

int pgo_parse_rfc3339_us(const char *t, int64_t *us)
{
	int y, mo, d, h, mi, sec, frac = 0, scale = 1000000;
	struct tm tm = {0};
	const char *p;

	if (!t || strlen(t) < 19 || t[4] != '-' || t[7] != '-' ||
	    (t[10] != 'T' && t[10] != ' ') || t[13] != ':' || t[16] != ':')
		return -1;
	y = digits(t, 4);
	mo = digits(t + 5, 2);
	d = digits(t + 8, 2);
	h = digits(t + 11, 2);
	mi = digits(t + 14, 2);
	sec = digits(t + 17, 2);
	if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 ||
	    mi < 0 || mi > 59 || sec < 0 || sec > 60)
		return -1;
	p = t + 19;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00") != 0 &&
	    strcmp(p, "+00:00") != 0)
		return -1;
	/* The events of a batch share their hour: timegm() once an hour
	 * (per thread), minutes and seconds added here. */
	{
		static _Thread_local char hour_key[14];
		static _Thread_local int64_t hour_at;

		if (memcmp(hour_key, t, 13) != 0) {
			tm.tm_year = y - 1900;
			tm.tm_mon = mo - 1;
			tm.tm_mday = d;
			tm.tm_hour = h;
			hour_at = (int64_t)timegm(&tm);
			memcpy(hour_key, t, 13);
		}
		*us = (hour_at + mi * 60 + sec) * 1000000 + frac;
	}
	return 0;
}
