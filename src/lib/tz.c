/*
 * tz.c — IANA time zones read straight from TZif files (RFC 8536), so the
 * cron module can work in any zone without setenv("TZ")/tzset() on the
 * process environment.
 *
 * A loaded zone is a table of transitions (instant, offset after it) taken
 * from the 64-bit (v2+) data block when present, plus the POSIX TZ rule of
 * the footer, which governs every instant after the last transition (slim
 * files stop early; fat ones at 2037).  Transitions that do not change the
 * UTC offset (abbreviation or isdst changes only) are dropped: the cron
 * module only cares about offsets.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pgo_int.h"
#include "tz.h"

#define TZ_DIR_DEFAULT "/usr/share/zoneinfo"
#define TZ_NAME_MAX    255
#define TZ_CACHE_MAX   32
#define TZ_FILE_MAX    (1 << 20)   /* real TZif files are a few KB */
#define TZ_OFF_MAX     (26 * 3600) /* |UTC offset| bound, with margin */

/* --- calendar --- */

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

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

/* --- POSIX TZ rule of the footer: "CET-1CEST,M3.5.0,M10.5.0/3" --- */

struct tz_rule_date {
	char kind;    /* 'J': Jn, 1-365 without Feb 29; 'D': n, 0-365; 'M' */
	int day;      /* J, D: the day number; M: weekday 0-6 (0 = Sunday) */
	int mon;      /* M: month 1-12 */
	int week;     /* M: week 1-5, 5 = the last one */
	int32_t time; /* local seconds after midnight; may be < 0 or > 24 h */
};

struct tz_rule {
	int32_t std_off;	   /* seconds east of UTC */
	int32_t dst_off;	   /* seconds east of UTC while DST is on */
	bool has_dst;		   /* else std_off all the time */
	struct tz_rule_date start; /* std -> dst, in standard time */
	struct tz_rule_date end;   /* dst -> std, in daylight time */
};

/* Up to max_digits digits into *v; NULL if there are none. */
static const char *rule_num(const char *p, int max_digits, int *v)
{
	int n = 0;

	*v = 0;
	while (*p >= '0' && *p <= '9' && n < max_digits) {
		*v = *v * 10 + (*p++ - '0');
		n++;
	}
	return n ? p : NULL;
}

/* A zone abbreviation: 3+ letters, or <...> of [A-Za-z0-9+-]. */
static const char *rule_name(const char *p)
{
	const char *s;

	if (!p)
		return NULL;
	if (*p == '<') {
		s = ++p;
		while (*p && *p != '>') {
			if (!((*p >= 'A' && *p <= 'Z') ||
			      (*p >= 'a' && *p <= 'z') ||
			      (*p >= '0' && *p <= '9') || *p == '+' ||
			      *p == '-'))
				return NULL;
			p++;
		}
		return *p == '>' && p - s >= 3 ? p + 1 : NULL;
	}
	s = p;
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
		p++;
	return p - s >= 3 ? p : NULL;
}

/* [+-]h[h[h]][:mm[:ss]] with hours <= max_h, into seconds. */
static const char *rule_hms(const char *p, int max_h, int32_t *out)
{
	int sign = 1, h, m = 0, s = 0;

	if (!p)
		return NULL;
	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	p = rule_num(p, 3, &h);
	if (p && *p == ':') {
		p = rule_num(p + 1, 2, &m);
		if (p && *p == ':')
			p = rule_num(p + 1, 2, &s);
	}
	if (!p || h > max_h || m > 59 || s > 59)
		return NULL;
	*out = sign * (h * 3600 + m * 60 + s);
	return p;
}

static const char *rule_date(const char *p, struct tz_rule_date *d)
{
	if (!p)
		return NULL;
	memset(d, 0, sizeof(*d));
	if (*p == 'J') {
		d->kind = 'J';
		p = rule_num(p + 1, 3, &d->day);
		if (p && (d->day < 1 || d->day > 365))
			return NULL;
	} else if (*p == 'M') {
		d->kind = 'M';
		p = rule_num(p + 1, 2, &d->mon);
		if (p && *p == '.')
			p = rule_num(p + 1, 1, &d->week);
		if (p && *p == '.')
			p = rule_num(p + 1, 1, &d->day);
		else
			p = NULL;
		if (p && (d->mon < 1 || d->mon > 12 || d->week < 1 ||
			  d->week > 5 || d->day > 6))
			return NULL;
	} else {
		d->kind = 'D';
		p = rule_num(p, 3, &d->day);
		if (p && d->day > 365)
			return NULL;
	}
	d->time = 2 * 3600;
	if (p && *p == '/') /* RFC 8536 allows -167..167 hours */
		p = rule_hms(p + 1, 167, &d->time);
	return p;
}

static bool rule_parse(const char *s, struct tz_rule *r)
{
	const char *p;
	int32_t off;

	memset(r, 0, sizeof(*r));
	p = rule_hms(rule_name(s), 24, &off);
	if (!p)
		return false;
	r->std_off = -off; /* POSIX offsets count west of UTC */
	if (!*p)
		return true;
	p = rule_name(p);
	if (!p)
		return false;
	r->has_dst = true;
	r->dst_off = r->std_off + 3600;
	if (*p && *p != ',') {
		p = rule_hms(p, 24, &off);
		if (!p)
			return false;
		r->dst_off = -off;
	}
	if (*p == ',') {
		p = rule_date(p + 1, &r->start);
		if (!p || *p != ',')
			return false;
		p = rule_date(p + 1, &r->end);
	} else {
		/* No rule given: POSIX leaves it to us; take the US one. */
		p = rule_date("M3.2.0", &r->start);
		p = rule_date("M11.1.0", &r->end);
	}
	if (r->dst_off == r->std_off)
		r->has_dst = false;
	return p && !*p;
}

/* The local day (days since the epoch) a rule date falls on in year y. */
static int64_t rule_day(int64_t y, const struct tz_rule_date *d)
{
	int64_t jan1 = pgo_days_from_civil(y, 1, 1);
	int64_t first;
	int md, dim;

	switch (d->kind) {
	case 'J': return jan1 + d->day - 1 + (is_leap(y) && d->day >= 60);
	case 'D': return jan1 + d->day;
	default:
		first = pgo_days_from_civil(y, d->mon, 1);
		dim = pgo_days_in_month(y, d->mon);
		md = (d->day - pgo_weekday(first) + 7) % 7 + 7 * (d->week - 1);
		while (md >= dim)
			md -= 7;
		return first + md;
	}
}

/* The span a DST rule puts t in. */
static void rule_span(const struct tz_rule *r, int64_t t, pgo_tz_span_t *sp)
{
	struct {
		int64_t at;
		int32_t off;
	} tr[6], tmp;
	int64_t y;
	int n = 0, m = 0, i, mon, mday;

	sp->start = INT64_MIN;
	sp->end = INT64_MAX;
	sp->off = sp->prev_off = r->std_off;
	if (!r->has_dst)
		return;
	/* The transitions of the years around t, in order. */
	pgo_civil_from_days(floor_div(t, 86400), &y, &mon, &mday);
	for (int64_t yy = y - 1; yy <= y + 1; yy++) {
		tr[n].at = rule_day(yy, &r->start) * 86400 + r->start.time -
			   r->std_off;
		tr[n++].off = r->dst_off;
		tr[n].at = rule_day(yy, &r->end) * 86400 + r->end.time -
			   r->dst_off;
		tr[n++].off = r->std_off;
	}
	for (i = 1; i < n; i++)
		for (int j = i; j > 0 && tr[j - 1].at > tr[j].at; j--) {
			tmp = tr[j];
			tr[j] = tr[j - 1];
			tr[j - 1] = tmp;
		}
	/* An end and a start at the same instant cancel ("DST all year"). */
	for (i = 0; i < n; i++) {
		if (i + 1 < n && tr[i].at == tr[i + 1].at) {
			i++;
			continue;
		}
		tr[m++] = tr[i];
	}
	for (i = m - 1; i >= 0 && tr[i].at > t; i--)
		;
	if (i >= 0) {
		sp->start = tr[i].at;
		sp->off = tr[i].off;
		sp->prev_off = sp->off == r->dst_off ? r->std_off : r->dst_off;
	} else if (m > 0) {
		sp->off = sp->prev_off =
			tr[0].off == r->dst_off ? r->std_off : r->dst_off;
	}
	if (i + 1 < m)
		sp->end = tr[i + 1].at;
}

/* --- zones --- */

struct pgo_tz {
	char name[TZ_NAME_MAX + 1]; /* as loaded, the cache key */
	int64_t *at;		    /* transition instants, ascending */
	int32_t *off;		    /* offset from at[i] until at[i + 1] */
	size_t n;		    /* transitions */
	int32_t first_off;	    /* before at[0]: time type 0 */
	bool has_rule;		    /* footer rule rules after at[n - 1] */
	struct tz_rule rule;
};

static const pgo_tz_t tz_utc = {.name = "UTC"};
static pgo_tz_t *tz_cache[TZ_CACHE_MAX];
static unsigned tz_cache_next; /* slot the next new zone evicts when full */

static void tz_free(pgo_tz_t *tz)
{
	if (tz) {
		free(tz->at);
		free(tz->off);
		free(tz);
	}
}

void pgo_tz_cache_clear(void)
{
	for (int i = 0; i < TZ_CACHE_MAX; i++) {
		tz_free(tz_cache[i]);
		tz_cache[i] = NULL;
	}
	tz_cache_next = 0;
}

static bool tz_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > TZ_NAME_MAX || name[0] == '/')
		return false;
	/* No '.' at all, so no ".." either. */
	for (const char *p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || strchr("_+-/", *p)))
			return false;
	return true;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* The counts of a TZif header, in file order. */
struct tzif_hdr {
	int version; /* 1, 2, 3, 4... */
	uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

#define TZIF_HDR_LEN 44

static bool tzif_hdr(const unsigned char *p, size_t len, struct tzif_hdr *h)
{
	if (len < TZIF_HDR_LEN || memcmp(p, "TZif", 4) != 0)
		return false;
	h->version = p[4] ? p[4] - '0' : 1;
	h->isutcnt = be32(p + 20);
	h->isstdcnt = be32(p + 24);
	h->leapcnt = be32(p + 28);
	h->timecnt = be32(p + 32);
	h->typecnt = be32(p + 36);
	h->charcnt = be32(p + 40);
	return h->typecnt >= 1 && h->typecnt <= 256 && h->timecnt <= 65536 &&
	       h->charcnt <= 65536 && h->leapcnt <= 65536 &&
	       (h->isutcnt == 0 || h->isutcnt == h->typecnt) &&
	       (h->isstdcnt == 0 || h->isstdcnt == h->typecnt);
}

/* Length of the data block after a header, times tsize bytes wide. */
static size_t tzif_block_len(const struct tzif_hdr *h, size_t tsize)
{
	return h->timecnt * tsize + h->timecnt + h->typecnt * 6 + h->charcnt +
	       h->leapcnt * (tsize + 4) + h->isstdcnt + h->isutcnt;
}

/* Parses a TZif image into tz; NULL or a reason. */
static const char *tzif_parse(const unsigned char *buf, size_t len,
			      pgo_tz_t *tz)
{
	struct tzif_hdr h;
	const unsigned char *p = buf, *idx, *types;
	size_t tsize = 4, blen;
	int64_t last_at = 0;
	char footer[256];

	if (!tzif_hdr(p, len, &h))
		return "bad header";
	blen = tzif_block_len(&h, 4);
	if (h.version >= 2) { /* skip the 32-bit block to the 64-bit one */
		if (len - TZIF_HDR_LEN < blen)
			return "truncated";
		p += TZIF_HDR_LEN + blen;
		if (!tzif_hdr(p, len - (size_t)(p - buf), &h))
			return "bad v2 header";
		tsize = 8;
		blen = tzif_block_len(&h, 8);
	}
	if ((size_t)(buf + len - p) - TZIF_HDR_LEN < blen)
		return "truncated";
	if (h.leapcnt)
		return "leap-second zones are not supported";
	p += TZIF_HDR_LEN;
	idx = p + h.timecnt * tsize;
	types = idx + h.timecnt;
	tz->first_off = (int32_t)be32(types);
	tz->at = malloc((h.timecnt + 1) * sizeof(*tz->at));
	tz->off = malloc((h.timecnt + 1) * sizeof(*tz->off));
	if (!tz->at || !tz->off)
		return "out of memory";
	for (uint32_t i = 0; i < h.typecnt; i++) {
		int32_t o = (int32_t)be32(types + 6 * i);

		if (o < -TZ_OFF_MAX || o > TZ_OFF_MAX)
			return "UTC offset out of range";
	}
	for (uint32_t i = 0; i < h.timecnt; i++) {
		int64_t at =
			tsize == 8 ? be64(p + 8 * i) : (int32_t)be32(p + 4 * i);
		int32_t prev = tz->n ? tz->off[tz->n - 1] : tz->first_off;
		int32_t o;

		if (idx[i] >= h.typecnt)
			return "bad time type index";
		if (i > 0 && at <= last_at)
			return "transitions out of order";
		last_at = at;
		o = (int32_t)be32(types + 6 * idx[i]);
		if (o == prev)
			continue; /* no offset change */
		tz->at[tz->n] = at;
		tz->off[tz->n++] = o;
	}
	/* Footer (v2+): "\n<POSIX TZ string>\n", empty when there is none. */
	p += blen;
	if (h.version >= 2 && p < buf + len) {
		const unsigned char *nl;
		size_t n;

		if (*p != '\n')
			return "bad footer";
		nl = memchr(p + 1, '\n', (size_t)(buf + len - p - 1));
		n = nl ? (size_t)(nl - p - 1) : 0;
		if (!nl || n >= sizeof(footer))
			return "bad footer";
		memcpy(footer, p + 1, n);
		footer[n] = '\0';
		if (n > 0) {
			if (!rule_parse(footer, &tz->rule))
				return "bad footer rule";
			tz->has_rule = true;
		}
	}
	return NULL;
}

/* Reads a whole regular file; NULL with errno set on failure. */
static unsigned char *read_file(const char *path, size_t *len)
{
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > TZ_FILE_MAX)
		errno = EINVAL;
	else if (!(buf = malloc((size_t)st.st_size)))
		errno = ENOMEM;
	else
		n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (buf && n != st.st_size) {
		free(buf);
		buf = NULL;
		errno = EIO;
	}
	*len = buf ? (size_t)n : 0;
	return buf;
}

static int tz_unknown(pgo_error_t *err, const char *name)
{
	return pgo_error_set(err, PGO_ERR_INVALID, 0,
			     "unknown time zone \"%.200s\"", name);
}

int pgo_tz_load(const char *name, const pgo_tz_t **out, pgo_error_t *err)
{
	const char *dir = getenv("TZDIR");
	char path[4096 + TZ_NAME_MAX + 2];
	unsigned char *buf;
	const char *why;
	pgo_tz_t *tz;
	size_t len;
	unsigned slot;

	if (!name || !*name || strcmp(name, "UTC") == 0) {
		*out = &tz_utc;
		return PGO_OK;
	}
	for (int i = 0; i < TZ_CACHE_MAX; i++)
		if (tz_cache[i] && strcmp(tz_cache[i]->name, name) == 0) {
			*out = tz_cache[i];
			return PGO_OK;
		}
	if (!tz_name_ok(name))
		return tz_unknown(err, name);
	if (!dir || !*dir || strlen(dir) > 4096)
		dir = TZ_DIR_DEFAULT;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	buf = read_file(path, &len);
	if (!buf) {
		if (errno == ENOMEM)
			return pgo_error_set(err, PGO_ERR_NOMEM, 1,
					     "out of memory");
		return tz_unknown(err, name);
	}
	if (len < 4 || memcmp(buf, "TZif", 4) != 0) {
		free(buf);
		return tz_unknown(err, name);
	}
	tz = calloc(1, sizeof(*tz));
	if (!tz) {
		free(buf);
		return pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
	}
	snprintf(tz->name, sizeof(tz->name), "%s", name);
	why = tzif_parse(buf, len, tz);
	free(buf);
	if (why) {
		tz_free(tz);
		if (strcmp(why, "out of memory") == 0)
			return pgo_error_set(err, PGO_ERR_NOMEM, 1,
					     "out of memory");
		return pgo_error_set(
			err, PGO_ERR_INVALID, 0,
			"time zone \"%s\": invalid TZif file %s: %s", name,
			path, why);
	}
	for (slot = 0; slot < TZ_CACHE_MAX && tz_cache[slot]; slot++)
		;
	if (slot == TZ_CACHE_MAX) { /* full: evict round-robin */
		slot = tz_cache_next++ % TZ_CACHE_MAX;
		tz_free(tz_cache[slot]);
	}
	tz_cache[slot] = tz;
	*out = tz;
	return PGO_OK;
}

void pgo_tz_span(const pgo_tz_t *tz, int64_t t, pgo_tz_span_t *sp)
{
	size_t n = tz->n, lo = 0, hi = n;

	if (tz->has_rule && (n == 0 || t >= tz->at[n - 1])) {
		rule_span(&tz->rule, t, sp);
		/* The table's last transition bounds the rule's first span. */
		if (n > 0 && sp->start <= tz->at[n - 1]) {
			sp->start = tz->at[n - 1];
			sp->prev_off = n >= 2 ? tz->off[n - 2] : tz->first_off;
		}
		return;
	}
	while (lo < hi) { /* lo = number of transitions at or before t */
		size_t mid = lo + (hi - lo) / 2;

		if (tz->at[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		sp->start = INT64_MIN;
		sp->off = sp->prev_off = tz->first_off;
		sp->end = n ? tz->at[0] : INT64_MAX;
		return;
	}
	sp->start = tz->at[lo - 1];
	sp->off = tz->off[lo - 1];
	sp->prev_off = lo >= 2 ? tz->off[lo - 2] : tz->first_off;
	sp->end = lo < n ? tz->at[lo] : INT64_MAX;
}

void pgo_tz_to_local(const pgo_tz_t *tz, int64_t t, pgo_tm_t *tm)
{
	pgo_tz_span_t sp;
	int64_t local, days, sod, year;

	pgo_tz_span(tz, t, &sp);
	local = t + sp.off;
	days = floor_div(local, 86400);
	sod = local - days * 86400;
	pgo_civil_from_days(days, &year, &tm->mon, &tm->mday);
	tm->year = (int)year;
	tm->hour = (int)(sod / 3600);
	tm->min = (int)(sod / 60 % 60);
	tm->sec = (int)(sod % 60);
	tm->wday = pgo_weekday(days);
	tm->utoff = sp.off;
}

int pgo_tz_from_local(const pgo_tz_t *tz, int64_t local, int64_t out[2],
		      int64_t *gap_end)
{
	int64_t t = local - TZ_OFF_MAX;
	pgo_tz_span_t sp;
	int n = 0;

	/* Every instant showing `local` lies within TZ_OFF_MAX of it: walk
	 * the spans of that window and keep those whose offset maps back. */
	for (;;) {
		int64_t u;

		pgo_tz_span(tz, t, &sp);
		u = local - sp.off;
		if (u >= sp.start && u < sp.end && n < 2)
			out[n++] = u;
		if (n == 0 && gap_end && sp.start != INT64_MIN &&
		    sp.prev_off < sp.off && local >= sp.start + sp.prev_off &&
		    local < sp.start + sp.off)
			*gap_end = sp.start;
		if (sp.end == INT64_MAX || sp.end > local + TZ_OFF_MAX)
			break;
		t = sp.end;
	}
	return n;
}
