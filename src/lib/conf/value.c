/*
 * conf/value.c — a key's value read from text and written back: whole
 * numbers within bounds, durations ("250ms", "30s", "5m", "1h"), booleans,
 * one of an enum's names, SQL identifiers.  Each key keeps its value as
 * canonical text ("30s", "on") next to the typed value, so that reload can
 * compare texts.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/conf_int.h"
#include "conf/conf.h"
#include "pgoutbox.h"

void pgo_format_duration(int64_t ms, char *buf, size_t size)
{
	static const struct {
		int64_t ms;
		const char *unit;
	} units[] = {{PGO_HOURS(1), "h"},
		     {PGO_MINUTES(1), "m"},
		     {PGO_SECONDS(1), "s"}};

	if (ms == 0) {
		snprintf(buf, size, "0");
		return;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].ms == 0) {
			snprintf(buf, size, "%lld%s",
				 (long long)(ms / units[i].ms), units[i].unit);
			return;
		}
	}
	snprintf(buf, size, "%lldms", (long long)ms);
}

void pgo_conf_format_range(const pgo_conf_key_t *k, char *buf, size_t size)
{
	char lo[32], hi[32];
	size_t used = 0;

	buf[0] = '\0';
	switch (k->type) {
	case T_INT:
		snprintf(buf, size, "%lld..%lld", (long long)k->min,
			 (long long)k->max);
		break;
	case T_DURATION:
		pgo_format_duration(k->min, lo, sizeof(lo));
		pgo_format_duration(k->max, hi, sizeof(hi));
		snprintf(buf, size, "%s..%s", lo, hi);
		break;
	case T_ENUM:
		for (size_t i = 0; k->choices[i] && used < size; i++)
			used += (size_t)snprintf(buf + used, size - used,
						 "%s%s", i ? ", " : "",
						 k->choices[i]);
		break;
	case T_BOOL: snprintf(buf, size, "on, off"); break;
	case T_IDENT:
		snprintf(buf, size, "[a-z_][a-z0-9_]*, at most %d characters",
			 IDENT_MAX);
		break;
	case T_STRING: break;
	}
}

int pgo_parse_duration(const char *s, int64_t *ms, const char **why)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {{"ms", 1},
		     {"s", PGO_SECONDS(1)},
		     {"m", PGO_MINUTES(1)},
		     {"h", PGO_HOURS(1)}};
	const char *dummy;
	int64_t n = 0;
	size_t ulen;

	if (!why)
		why = &dummy;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '-') {
		*why = "must not be negative";
		return PGO_ERR_INVALID;
	}
	if (!isdigit((unsigned char)*s)) {
		*why = "is not a duration (like 250ms, 30s, 5m, 1h)";
		return PGO_ERR_INVALID;
	}
	for (; isdigit((unsigned char)*s); s++) {
		if (n > (INT64_MAX - 9) / 10) {
			*why = "is too large";
			return PGO_ERR_INVALID;
		}
		n = n * 10 + (*s - '0');
	}
	if (*s == '.' || *s == ',') {
		*why = "is not a whole number (write 1500ms, not 1.5s)";
		return PGO_ERR_INVALID;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	ulen = strcspn(s, " \t\r\n\v\f");
	for (const char *t = s + ulen; *t; t++) {
		if (!isspace((unsigned char)*t)) {
			*why = "is not a duration (like 250ms, 30s, 5m, 1h)";
			return PGO_ERR_INVALID;
		}
	}
	if (ulen == 0) {
		if (n != 0) {
			*why = "needs a unit (ms, s, m, h)";
			return PGO_ERR_INVALID;
		}
		*ms = 0;
		return PGO_OK;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strlen(units[i].unit) != ulen ||
		    memcmp(s, units[i].unit, ulen) != 0)
			continue;
		if (n > INT64_MAX / units[i].ms) {
			*why = "is too large";
			return PGO_ERR_INVALID;
		}
		*ms = n * units[i].ms;
		return PGO_OK;
	}
	*why = "has an unknown unit (use ms, s, m, h)";
	return PGO_ERR_INVALID;
}

/* Why name is not an identifier T_IDENT accepts, or NULL when it is.
 * Plain ASCII ranges: the locale must not widen what SQL accepts. */
static const char *ident_problem(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return "is empty";
	if (len > IDENT_MAX)
		return "is longer than 48 characters";
	if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
		return "must start with a lower-case letter or _";
	for (const char *p = name + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return "may contain only a-z, 0-9 and _";
	return NULL;
}

static int parse_bool(const char *s)
{
	static const char *const yes[] = {"on", "true", "yes", "1"};
	static const char *const no[] = {"off", "false", "no", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

/* One value being read as a key, for the readers of each type below. */
struct reading {
	pgo_conf_t *conf;
	const pgo_conf_key_t *k;
	const char *t;	     /* the value, blanks around it trimmed */
	const char *where;   /* the source, first in every message */
	const char *subject; /* "relay.batch = ", or "" */
	int64_t num;	     /* the value read */
	char canon[32];	     /* its canonical text */
};

/* "where: subject t is out of range (range)". */
static int out_of_range(struct reading *r)
{
	char range[128];

	pgo_conf_format_range(r->k, range, sizeof(range));
	return pgo_conf_fail(r->conf, PGO_ERR_CONFIG,
			     "%s: %s%s is out of range (%s)", r->where,
			     r->subject, r->t, range);
}

static int read_int(struct reading *r)
{
	const char *t = r->t;
	long long n;
	char *end;

	errno = 0;
	n = strtoll(t, &end, 10);
	if (!*t || *end ||
	    !(isdigit((unsigned char)*t) || *t == '-' || *t == '+'))
		return pgo_conf_fail(r->conf, PGO_ERR_CONFIG,
				     "%s: %s\"%s\" is not a whole number",
				     r->where, r->subject, t);
	if (errno == ERANGE || n < r->k->min || n > r->k->max)
		return out_of_range(r);
	r->num = n;
	snprintf(r->canon, sizeof(r->canon), "%lld", n);
	return PGO_OK;
}

static int read_duration(struct reading *r)
{
	const char *why = NULL;

	if (pgo_parse_duration(r->t, &r->num, &why) != PGO_OK)
		return pgo_conf_fail(r->conf, PGO_ERR_CONFIG, "%s: %s\"%s\" %s",
				     r->where, r->subject, r->t, why);
	if (r->num < r->k->min || r->num > r->k->max)
		return out_of_range(r);
	pgo_format_duration(r->num, r->canon, sizeof(r->canon));
	return PGO_OK;
}

static int read_bool(struct reading *r)
{
	int b = parse_bool(r->t);

	if (b < 0)
		return pgo_conf_fail(r->conf, PGO_ERR_CONFIG,
				     "%s: %s\"%s\" is not a boolean (use "
				     "on/off, true/false, yes/no, 1/0)",
				     r->where, r->subject, r->t);
	r->num = b;
	snprintf(r->canon, sizeof(r->canon), "%s", b ? "on" : "off");
	return PGO_OK;
}

static int read_enum(struct reading *r)
{
	const char *const *choices = r->k->choices;
	char range[128];
	const char *guess;
	size_t nc;

	for (nc = 0; choices[nc]; nc++) {
		if (strcasecmp(r->t, choices[nc]) == 0) {
			r->num = (int64_t)nc;
			snprintf(r->canon, sizeof(r->canon), "%s", choices[nc]);
			return PGO_OK;
		}
	}
	pgo_conf_format_range(r->k, range, sizeof(range));
	guess = pgo_conf_closest(r->t, choices, nc);
	return pgo_conf_fail(r->conf, PGO_ERR_CONFIG,
			     "%s: %s\"%s\" is not one of %s%s%s%s", r->where,
			     r->subject, r->t, range,
			     guess ? " (did you mean \"" : "",
			     guess ? guess : "", guess ? "\"?)" : "");
}

/* An identifier's canonical text is itself: r->canon is left empty. */
static int read_ident(struct reading *r)
{
	const char *why = ident_problem(r->t);

	if (why)
		return pgo_conf_fail(r->conf, PGO_ERR_CONFIG,
				     "%s: %s\"%s\" is not a valid name: it %s",
				     r->where, r->subject, r->t, why);
	return PGO_OK;
}

/* value without the blanks around it (malloc'd), or NULL. */
static char *trimmed(const char *value)
{
	size_t len;

	while (isspace((unsigned char)*value))
		value++;
	len = strlen(value);
	while (len > 0 && isspace((unsigned char)value[len - 1]))
		len--;
	return strndup(value, len);
}

int pgo_conf_parse_value(pgo_conf_t *conf, const pgo_conf_key_t *k,
			 const char *value, const char *where,
			 const char *subject, int64_t *num, char **text)
{
	struct reading r = {
		.conf = conf, .k = k, .where = where, .subject = subject};
	char *t;
	int rc = PGO_ERR_CONFIG;

	*text = NULL;
	if (k->type == T_STRING) {
		/* Passed through untouched: conninfo, commands. */
		*text = strdup(value);
		return *text ? PGO_OK : pgo_conf_nomem(conf);
	}
	if (!(t = trimmed(value)))
		return pgo_conf_nomem(conf);
	r.t = t;
	switch (k->type) {
	case T_INT: rc = read_int(&r); break;
	case T_DURATION: rc = read_duration(&r); break;
	case T_BOOL: rc = read_bool(&r); break;
	case T_ENUM: rc = read_enum(&r); break;
	case T_IDENT:
		if ((rc = read_ident(&r)) != PGO_OK)
			break;
		*text = t; /* already canonical */
		return PGO_OK;
	case T_STRING: break;
	}
	free(t);
	if (rc != PGO_OK)
		return rc;
	*num = r.num;
	*text = strdup(r.canon);
	return *text ? PGO_OK : pgo_conf_nomem(conf);
}
