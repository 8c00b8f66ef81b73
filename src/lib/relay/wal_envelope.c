/*
 * wal_envelope.c — a WAL queue's logical message to the event
 * (pgo_wal_envelope() in wal.h): the envelope JSON that wal_envelope()
 * in sql/schema writes, as jsonb prints it.  Pure, for the unit tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "relay/wal.h"
#include "pgoutbox/sink.h"

/* The payload and the headers go to the sinks as the text PostgreSQL
 * wrote (jsonb's output, as the table path gives them): jansson would
 * print them its own way (numbers as doubles, "1.10" as 1.1, big
 * integers refused), so a small scanner finds each value's extent and
 * copies it as is.  jansson decodes the strings (escapes, surrogate
 * pairs, UTF-8). */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* The end of the JSON string at p (at its quote), NULL when cut short. */
static const char *string_end(const char *p, const char *end)
{
	if (p >= end || *p != '"')
		return NULL;
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* Whether [p, e) holds a byte below 0x20. */
static bool has_control(const char *p, const char *e)
{
	for (; p < e; p++)
		if ((unsigned char)*p < 0x20)
			return true;
	return false;
}

/* The JSON string [p, e) decoded to *o (by jansson when it has escapes;
 * NUL-ended, no longer
 * than its text); false when it is not one. */
static bool decode_string(const char *p, const char *e, char **o)
{
	json_t *s;
	bool ok;

	/* Most strings have no escape: their text is their value (what
	 * PostgreSQL wrote is valid UTF-8, and to_json() escapes every
	 * control character), copied without a parser.  A raw control
	 * character (a NUL would cut the copy) is not JSON: jansson
	 * refuses it below. */
	if (e - p >= 2 && p[0] == '"' && e[-1] == '"' &&
	    !memchr(p + 1, '\\', (size_t)(e - p - 2)) &&
	    !has_control(p + 1, e - 1)) {
		memcpy(*o, p + 1, (size_t)(e - p - 2));
		*o += e - p - 2;
		*(*o)++ = '\0';
		return true;
	}
	s = json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY, NULL);
	ok = json_is_string(s);

	if (ok) {
		size_t n = json_string_length(s);

		memcpy(*o, json_string_value(s), n + 1);
		*o += n + 1;
	}
	json_decref(s);
	return ok;
}

/* Skips one JSON value; returns the position after it, NULL when
 * malformed. */
static const char *json_skip(const char *p, const char *end)
{
	int depth = 0;

	p = skip_ws(p, end);
	do {
		if (p >= end)
			return NULL;
		if (*p == '"') {
			p = string_end(p, end);
			if (!p)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		else if (depth == 0) {
			/* A number or a literal: up to its end. */
			while (p < end && *p != ',' && *p != '}' && *p != ']' &&
			       *p != ' ' && *p != '\n')
				p++;
			return p;
		}
		p++;
	} while (depth > 0);
	return p;
}

/* What an envelope's fields have given so far. */
typedef struct env_seen {
	bool id, topic, payload;
} env_seen_t;

/* The value [v, after) of the field key into ev (strings copied to *o);
 * false when malformed. */
static bool env_field(pgo_event_t *ev, env_seen_t *seen, const char *key,
		      const char *v, const char *after, char **o)
{
	char *s = *o;

	if (strcmp(key, "payload") == 0 || strcmp(key, "headers") == 0) {
		memcpy(s, v, (size_t)(after - v));
		*o += after - v;
		*(*o)++ = '\0';
		if (key[0] == 'p') {
			ev->payload = s;
			seen->payload = true;
		} else {
			ev->headers = s;
		}
		return true;
	}
	if (strcmp(key, "id") == 0) {
		/* A number within [v, after): the text is not NUL-ended. */
		char num[24];
		size_t n = (size_t)(after - v);

		if (n == 0 || n >= sizeof(num))
			return false;
		memcpy(num, v, n);
		num[n] = '\0';
		ev->id = strtoll(num, NULL, 10);
		seen->id = true;
		return true;
	}
	if (*v != '"')
		return true; /* null, or a field not ours */
	if (!decode_string(v, after, o))
		return false;
	if (strcmp(key, "topic") == 0) {
		ev->topic = s;
		seen->topic = true;
	} else if (strcmp(key, "key") == 0) {
		ev->key = s;
	} else if (strcmp(key, "type") == 0) {
		ev->type = s;
	} else if (strcmp(key, "created_at") == 0) {
		ev->created_at = s;
	}
	return true;
}

/* Unix microseconds as the table path's created_at reads:
 * 2026-12-04T14:15:32.658483Z. */
static void rfc3339_us(int64_t us, char *out, size_t size)
{
	time_t s = (time_t)(us / 1000000);
	long frac = (long)(us % 1000000);
	char date[24];
	struct tm tm;

	if (frac < 0) {
		frac += 1000000;
		s--;
	}
	if (!gmtime_r(&s, &tm) ||
	    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		date[0] = '\0';
	snprintf(out, size, "%s.%06ldZ", date, frac);
}

#define CREATED_AT_MAX 40 /* 23 + 8 + NUL, with room */

bool pgo_wal_envelope(const char *json, size_t len, int64_t commit_us,
		      pgo_event_t *ev, char **mem)
{
	const char *p = json, *end = json + len;
	char *o = malloc(len + 8 + CREATED_AT_MAX);
	env_seen_t seen = {false, false, false};

	*mem = o;
	memset(ev, 0, sizeof(*ev));
	if (!o)
		return false;
	ev->type = ev->headers = "";
	p = skip_ws(p, end);
	if (p >= end || *p++ != '{')
		return false;
	for (;;) {
		const char *v, *after, *kend;
		char *key = o;

		p = skip_ws(p, end);
		if (p < end && *p == '}')
			break;
		kend = string_end(p, end);
		if (!kend || !decode_string(p, kend, &o))
			return false;
		p = skip_ws(kend, end);
		if (p >= end || *p++ != ':')
			return false;
		v = skip_ws(p, end);
		after = json_skip(v, end);
		if (!after || !env_field(ev, &seen, key, v, after, &o))
			return false;
		p = skip_ws(after, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			break;
		return false;
	}
	if (!ev->created_at) {
		/* o has CREATED_AT_MAX bytes left: what the fields took is
		 * at most len + 8 (each string no longer than its text). */
		rfc3339_us(commit_us, o, CREATED_AT_MAX);
		ev->created_at = o;
	}
	return seen.id && seen.topic && seen.payload;
}
