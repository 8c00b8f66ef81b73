/*
 * cronexpr.c — cron expressions: the parser (fields to bitsets, with
 * messages that name the field and the problem) and pgo_cron_next(), which
 * finds the next tick on a zone's wall clock by the DST rules of
 * cronexpr.h.  Pure C: the zone's offsets come in (cron.c asks PostgreSQL).
 *
 * pgo_cron_next() walks the zone's spans of constant UTC offset from
 * `after` on.  Within a span, wall time is UTC plus a constant, so the
 * first matching wall time in the span's wall-clock window is found on the
 * calendar by skipping ahead field by field (month, day, hour, minute,
 * second) and mapped back by subtracting the offset.  The DST rules only
 * touch the span edges: a pinned schedule skips the part of a span's window
 * that repeats the previous span (fall-back) and fires at a span's start
 * for a match in the window a gap skipped (spring-forward).
 */
#include <stdio.h>
#include <string.h>

#include "cron/cronexpr.h"
#include "base/error.h"
#include "pgoutbox.h"

#define TIME_MIN  (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define TIME_MAX  253402300799LL   /* 9999-12-31T23:59:59Z */
#define ALL_HOURS 0xffffffu	   /* bits 0-23 */
#define BLANKS	  " \t\n\r\f\v"

/* --- parsing --- */

/* One field of the expression. */
struct field_def {
	const char *name;	  /* in messages: "minute field: ..." */
	int min, max;		  /* accepted values */
	const char *const *names; /* 3-letter names, names[i] = base + i */
	int base;
};

static const char *const mon_names[] = {"JAN", "FEB", "MAR", "APR", "MAY",
					"JUN", "JUL", "AUG", "SEP", "OCT",
					"NOV", "DEC", NULL};
static const char *const dow_names[] = {"SUN", "MON", "TUE", "WED",
					"THU", "FRI", "SAT", NULL};

enum { F_SEC, F_MIN, F_HOUR, F_DOM, F_MON, F_DOW };

static const struct field_def fields[] = {
	[F_SEC] = {"second", 0, 59, NULL, 0},
	[F_MIN] = {"minute", 0, 59, NULL, 0},
	[F_HOUR] = {"hour", 0, 23, NULL, 0},
	[F_DOM] = {"day-of-month", 1, 31, NULL, 0},
	[F_MON] = {"month", 1, 12, mon_names, 1},
	[F_DOW] = {"day-of-week", 0, 7, dow_names, 0},
};

static const struct {
	const char *name;
	const char *expr;
} macros[] = {
	{"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static char upper(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* ASCII case-insensitive equality of s[0..n) and the string w. */
static bool word_eq(const char *s, size_t n, const char *w)
{
	if (strlen(w) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (upper(s[i]) != upper(w[i]))
			return false;
	return true;
}

/* Digits at *pp as a number capped at 1000000 (enough to be "too big"). */
static long read_num(const char **pp)
{
	const char *p = *pp;
	long v = 0;

	while (is_digit(*p)) {
		if (v < 1000000)
			v = v * 10 + (*p - '0');
		p++;
	}
	*pp = p;
	return v;
}

/* A number or a name at *pp into *v; else the problem into why. */
static int parse_value(const char **pp, const struct field_def *f, int *v,
		       char *why, size_t wlen)
{
	const char *s = *pp, *p = s;
	long n;

	if (is_digit(*p)) {
		n = read_num(&p);
		if (n < f->min || n > f->max) {
			snprintf(why, wlen, "%.*s is out of range %d-%d",
				 (int)(p - s), s, f->min, f->max);
			return -1;
		}
		*v = (int)n;
	} else if (is_alpha(*p)) {
		while (is_alpha(*p))
			p++;
		if (!f->names) {
			snprintf(why, wlen, "\"%.*s\" is not a number",
				 (int)(p - s), s);
			return -1;
		}
		for (n = 0; f->names[n]; n++)
			if (word_eq(s, (size_t)(p - s), f->names[n]))
				break;
		if (!f->names[n]) {
			snprintf(why, wlen, "unknown name \"%.*s\"",
				 (int)(p - s), s);
			return -1;
		}
		*v = f->base + (int)n;
	} else {
		return -1; /* the caller names what it expected */
	}
	*pp = p;
	return 0;
}

/* One list item: `*`, `a`, `a-b`, each optionally followed by `/step`. */
static int parse_item(const char *item, const struct field_def *f,
		      uint64_t *mask, char *why, size_t wlen)
{
	/* Weekdays wrap: `*` and `a/n` stop at Saturday, not at 7. */
	int top = f == &fields[F_DOW] ? 6 : f->max;
	const char *p = item, *range_end;
	int lo, hi, step = 1;
	bool star = false, range = false;

	if (*p == '*') {
		lo = f->min;
		hi = top;
		star = true;
		p++;
	} else {
		if (parse_value(&p, f, &lo, why, wlen) < 0) {
			if (!why[0])
				snprintf(why, wlen, "unexpected \"%s\"", item);
			return -1;
		}
		hi = lo;
		if (*p == '-') {
			p++;
			if (parse_value(&p, f, &hi, why, wlen) < 0) {
				if (!why[0])
					snprintf(why, wlen,
						 "incomplete range \"%s\"",
						 item);
				return -1;
			}
			range = true;
		}
	}
	range_end = p;
	if (*p == '/') {
		const char *s = p++;
		long n = read_num(&p);
		int span = top - f->min + 1;

		if (p == s + 1 || *p || n < 1 || n > span) {
			snprintf(why, wlen, "bad step \"%s\": must be 1-%d", s,
				 span);
			return -1;
		}
		step = (int)n;
		if (!star && !range) /* a/n: from a to the maximum */
			hi = top;
	}
	if (*p) {
		snprintf(why, wlen, "unexpected \"%s\" in \"%s\"", p, item);
		return -1;
	}
	if (f == &fields[F_DOW] && range && hi == 0 && lo > 0)
		hi = 7; /* FRI-SUN */
	if (lo > hi) {
		snprintf(why, wlen, "range %.*s is reversed",
			 (int)(range_end - item), item);
		return -1;
	}
	for (int v = lo; v <= hi; v += step)
		*mask |= 1ull << v;
	return 0;
}

/* A comma list (modified in place) into *mask. */
static int parse_field(char *text, const struct field_def *f, uint64_t *mask,
		       char *why, size_t wlen)
{
	char *item = text, *comma, orig[128];

	snprintf(orig, sizeof(orig), "%s", text);
	*mask = 0;
	for (;;) {
		comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if (!*item) {
			snprintf(why, wlen, "empty item in list \"%s\"", orig);
			return -1;
		}
		if (parse_item(item, f, mask, why, wlen) < 0)
			return -1;
		if (!comma)
			return 0;
		item = comma + 1;
	}
}

/* "@daily" and friends; text is trimmed and starts with '@'. */
static int parse_macro(const char *text, pgo_cron_expr_t *out, pgo_error_t *err)
{
	size_t n = strcspn(text, BLANKS);
	int rc;

	if (word_eq(text, n, "@every") || word_eq(text, n, "@reboot"))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%s\": %.*s is not supported; "
				     "write a 5- or 6-field expression",
				     text, (int)n, text);
	for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++) {
		if (!word_eq(text, n, macros[i].name))
			continue;
		if (text[n])
			return pgo_error_set(
				err, PGO_ERR_INVALID, 0,
				"cron \"%s\": unexpected \"%s\" after %s", text,
				text + n + strspn(text + n, BLANKS),
				macros[i].name);
		rc = pgo_cron_parse(macros[i].expr, out, err);
		if (rc == PGO_OK)
			snprintf(out->text, sizeof(out->text), "%s", text);
		return rc;
	}
	return pgo_error_set(err, PGO_ERR_INVALID, 0,
			     "cron \"%s\": unknown macro \"%.*s\"", text,
			     (int)n, text);
}

int pgo_cron_parse(const char *text, pgo_cron_expr_t *out, pgo_error_t *err)
{
	pgo_cron_expr_t e;
	char buf[sizeof(e.text)], fbuf[sizeof(e.text)], why[256];
	char *field[6];
	const char *s, *end;
	size_t len;
	int nf = 0, first;
	uint64_t mask;
	char *p;

	if (!text)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron expression is missing");
	s = text + strspn(text, BLANKS);
	end = s + strlen(s);
	while (end > s && strchr(BLANKS, end[-1]))
		end--;
	len = (size_t)(end - s);
	if (len == 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"\": empty expression");
	if (len >= sizeof(buf))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%.40s...\": too long (%zu "
				     "characters, at most %zu)",
				     s, len, sizeof(buf) - 1);
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[0] == '@')
		return parse_macro(buf, out, err);

	memset(&e, 0, sizeof(e));
	memcpy(e.text, buf, len + 1);
	/* Split on runs of blanks (in buf; e.text keeps the original). */
	for (p = buf; *p;) {
		p += strspn(p, BLANKS);
		if (!*p)
			break;
		if (nf < 6)
			field[nf] = p;
		nf++;
		p += strcspn(p, BLANKS);
		if (*p)
			*p++ = '\0';
	}
	if (nf != 5 && nf != 6)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%s\": expected 5 or 6 fields, "
				     "got %d",
				     e.text, nf);
	e.has_seconds = nf == 6;
	e.sec = 1; /* second 0 when there are 5 fields */
	first = nf == 6 ? F_SEC : F_MIN;
	for (int i = 0; i < nf; i++) {
		int k = first + i;

		snprintf(fbuf, sizeof(fbuf), "%s", field[i]);
		why[0] = '\0';
		if (parse_field(fbuf, &fields[k], &mask, why, sizeof(why)) < 0)
			return pgo_error_set(err, PGO_ERR_INVALID, 0,
					     "cron \"%s\": %s field: %s",
					     e.text, fields[k].name, why);
		switch (k) {
		case F_SEC: e.sec = mask; break;
		case F_MIN: e.min = mask; break;
		case F_HOUR: e.hour = (uint32_t)mask; break;
		case F_DOM: e.dom = (uint32_t)mask; break;
		case F_MON: e.mon = (uint16_t)mask; break;
		default:
			/* 7 is Sunday too */
			e.dow = (uint8_t)((mask | mask >> 7) & 0x7f);
		}
	}
	e.dom_star = field[nf - 3][0] == '*';
	e.dow_star = field[nf - 1][0] == '*';
	*out = e;
	return PGO_OK;
}

/* --- calendar --- */

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* H. Hinnant's days_from_civil / civil_from_days: exact for any year. */
int64_t pgo_days_from_civil(int64_t year, int mon, int mday)
{
	int64_t y = year - (mon <= 2);
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (mon + (mon > 2 ? -3 : 9)) + 2) / 5 + mday - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

void pgo_civil_from_days(int64_t days, int64_t *year, int *mon, int *mday)
{
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;

	*mday = (int)(doy - (153 * mp + 2) / 5 + 1);
	*mon = (int)(mp < 10 ? mp + 3 : mp - 9);
	*year = yoe + era * 400 + (*mon <= 2);
}

int pgo_days_in_month(int64_t year, int mon)
{
	static const int dim[12] = {31, 28, 31, 30, 31, 30,
				    31, 31, 30, 31, 30, 31};

	return mon == 2 && is_leap(year) ? 29 : dim[mon - 1];
}

int pgo_weekday(int64_t days)
{
	return (int)((days % 7 + 11) % 7); /* 1970-01-01 was a Thursday */
}

/* Seconds since the epoch -> "2027-03-28T01:00:00Z", for messages. */
static const char *iso(int64_t t, char *buf, size_t len)
{
	int64_t days = t / 86400 - (t % 86400 < 0), year;
	int sod = (int)(t - days * 86400), mon, mday;

	pgo_civil_from_days(days, &year, &mon, &mday);
	snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)year,
		 mon, mday, sod / 3600, sod / 60 % 60, sod % 60);
	return buf;
}

/* --- spans of constant offset --- */

/* A stretch of time with one UTC offset: [start, end). */
struct span {
	int64_t start;	  /* its first instant; INT64_MIN: none known */
	int64_t end;	  /* the next change, or just past the window */
	int32_t off;	  /* seconds east of UTC during the span */
	int32_t prev_off; /* the offset before start (== off without one) */
};

static const pgo_cron_zone_t zone_utc = {
	.name = "UTC", .from = INT64_MIN, .to = INT64_MAX};

/* The span holding instant t of the zone's window. */
static void zone_span(const pgo_cron_zone_t *z, int64_t t, struct span *sp)
{
	size_t lo = 0, hi = z->n;

	while (lo < hi) { /* lo = the number of changes at or before t */
		size_t mid = lo + (hi - lo) / 2;

		if (z->changes[mid].at <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	sp->start = lo ? z->changes[lo - 1].at : INT64_MIN;
	sp->off = lo ? z->changes[lo - 1].off : z->off;
	sp->prev_off = lo >= 2 ? z->changes[lo - 2].off : z->off;
	/* Past the window nothing is known: the span ends there at most. */
	sp->end = z->to == INT64_MAX ? INT64_MAX : z->to + 1;
	if (lo < z->n && z->changes[lo].at < sp->end)
		sp->end = z->changes[lo].at;
}

/* --- next tick --- */

/* The lowest set bit of mask at or above from, or -1. */
static int next_bit(uint64_t mask, int from)
{
	if (from > 63 || !(mask >> from))
		return -1;
	return from + __builtin_ctzll(mask >> from);
}

static bool day_matches(const pgo_cron_expr_t *e, int64_t days, int mday)
{
	bool dom = e->dom >> mday & 1;
	bool dow = e->dow >> pgo_weekday(days) & 1;

	/* Vixie: restricting both means either will do. */
	return e->dom_star || e->dow_star ? dom && dow : dom || dow;
}

/* Moves h:m:s to the first matching time of day at or after it. */
static bool time_of_day(const pgo_cron_expr_t *e, int *h, int *m, int *s)
{
	int v;

	for (;;) {
		v = next_bit(e->hour, *h);
		if (v < 0)
			return false;
		if (v != *h) {
			*h = v;
			*m = *s = 0;
		}
		v = next_bit(e->min, *m);
		if (v < 0) {
			++*h;
			*m = *s = 0;
			continue;
		}
		if (v != *m) {
			*m = v;
			*s = 0;
		}
		v = next_bit(e->sec, *s);
		if (v >= 0) {
			*s = v;
			return true;
		}
		*s = 0;
		if (++*m > 59) {
			*m = 0;
			++*h;
		}
	}
}

/* The first matching wall-clock time in [lo, hi) (local seconds). */
static bool first_match(const pgo_cron_expr_t *e, int64_t lo, int64_t hi,
			int64_t *out)
{
	int64_t days = lo / 86400 - (lo % 86400 < 0), year;
	int sod = (int)(lo - days * 86400), mon, mday;
	int h = sod / 3600, m = sod / 60 % 60, s = sod % 60;

	pgo_civil_from_days(days, &year, &mon, &mday);
	while (days * 86400 < hi) {
		if (!(e->mon >> mon & 1)) {
			/* Skip to the 1st of the next matching month. */
			int next = next_bit(e->mon, mon + 1);

			if (next < 0) {
				year++;
				next = next_bit(e->mon, 1);
			}
			mon = next;
			mday = 1;
			days = pgo_days_from_civil(year, mon, 1);
			h = m = s = 0;
			continue;
		}
		if (day_matches(e, days, mday) && time_of_day(e, &h, &m, &s)) {
			int64_t t = days * 86400 + h * 3600 + m * 60 + s;

			if (t >= hi)
				return false;
			*out = t;
			return true;
		}
		days++;
		h = m = s = 0;
		if (++mday > pgo_days_in_month(year, mon)) {
			mday = 1;
			if (++mon > 12) {
				mon = 1;
				year++;
			}
		}
	}
	return false;
}

int pgo_cron_next(const pgo_cron_expr_t *e, const pgo_cron_zone_t *z,
		  int64_t after, int64_t *next, pgo_error_t *err)
{
	/* Pinned schedules fire once per wall-clock time (cronexpr.h). */
	bool pinned = (e->hour & ALL_HOURS) != ALL_HOURS;
	struct span sp;
	int64_t t, limit, lo, hi, local;
	char a[48], b[48]; /* iso(): a 64-bit year fits */

	if (after < TIME_MIN || after > TIME_MAX)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%s\": time %lld is outside years "
				     "1-9999",
				     e->text, (long long)after);
	if (!z)
		z = &zone_utc;
	if (z->from > after - PGO_CRON_ZONE_MARGIN)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%s\": the offsets of time zone "
				     "\"%s\" start at %s, too late for ticks "
				     "after %s",
				     e->text, z->name,
				     iso(z->from, a, sizeof(a)),
				     iso(after, b, sizeof(b)));
	limit = after + PGO_CRON_HORIZON;
	for (t = after + 1; t <= limit; t = sp.end) {
		if (t > z->to)
			return pgo_error_set(
				err, PGO_ERR_INVALID, 0,
				"cron \"%s\": the offsets of time zone \"%s\" "
				"end at %s, before the tick after %s",
				e->text, z->name, iso(z->to, a, sizeof(a)),
				iso(after, b, sizeof(b)));
		zone_span(z, t, &sp);
		/* Spring-forward: wall times the gap skipped fire as it ends.
		 */
		if (pinned && sp.start == t && sp.prev_off < sp.off &&
		    first_match(e, t + sp.prev_off, t + sp.off, &local)) {
			*next = t;
			return PGO_OK;
		}
		lo = t + sp.off;
		/* Fall-back: wall times the previous span showed already. */
		if (pinned && sp.start != INT64_MIN && sp.prev_off > sp.off &&
		    lo < sp.start + sp.prev_off)
			lo = sp.start + sp.prev_off;
		hi = (sp.end > limit ? limit + 1 : sp.end) + sp.off;
		if (first_match(e, lo, hi, &local)) {
			*next = local - sp.off;
			return PGO_OK;
		}
		if (sp.end > limit)
			break;
	}
	return pgo_error_set(err, PGO_ERR_INVALID, 0,
			     "cron \"%s\": no matching time within 5 years",
			     e->text);
}
