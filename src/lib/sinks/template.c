/*
 * sinks/template.c — the name templates of every sink: a destination
 * (Redis stream, BullMQ queue, Kafka topic) is a text in which {topic},
 * {queue} and {type} are replaced by the event's topic, the relay's queue
 * and the event's type.  Each sink says which placeholders its key
 * accepts.  The _names functions take any list of names and can
 * percent-encode the values (a URL's path: sink.http_url).
 */
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

static const struct {
	const char *name;
	unsigned bit;
} placeholders[] = {
	{"{topic}", PGO_TMPL_TOPIC},
	{"{queue}", PGO_TMPL_QUEUE},
	{"{type}", PGO_TMPL_TYPE},
};

#define N_PLACEHOLDERS (sizeof(placeholders) / sizeof(*placeholders))

int pgo_template_check(const char *key, const char *tmpl, unsigned allowed,
		       pgo_error_t *err)
{
	char names[64] = "";

	for (size_t i = 0; i < N_PLACEHOLDERS; i++)
		if (allowed & placeholders[i].bit) {
			if (names[0])
				strcat(names, ", ");
			strcat(names, placeholders[i].name);
		}
	if (!*tmpl)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s is empty",
				     key);
	for (const char *t = strchr(tmpl, '{'); t; t = strchr(t + 1, '{')) {
		size_t i = 0;

		while (i < N_PLACEHOLDERS &&
		       (!(allowed & placeholders[i].bit) ||
			strncmp(t, placeholders[i].name,
				strlen(placeholders[i].name)) != 0))
			i++;
		if (i == N_PLACEHOLDERS)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "%s \"%s\": unknown placeholder "
					     "at \"%.12s\" (use %s)",
					     key, tmpl, t, names);
	}
	return PGO_OK;
}

const char *pgo_template_expand(pgo_buf_t *buf, const char *tmpl,
				const char *topic, const char *queue,
				const char *type)
{
	const char *values[N_PLACEHOLDERS] = {topic, queue, type};
	const char *t = tmpl;

	pgo_buf_reset(buf);
	pgo_buf_puts(buf, "");
	while (*t) {
		size_t i = 0;

		while (i < N_PLACEHOLDERS &&
		       strncmp(t, placeholders[i].name,
			       strlen(placeholders[i].name)) != 0)
			i++;
		if (i < N_PLACEHOLDERS && values[i]) {
			pgo_buf_puts(buf, values[i]);
			t += strlen(placeholders[i].name);
		} else {
			pgo_buf_append(buf, t++, 1);
		}
	}
	return buf->oom ? NULL : buf->data;
}

/* --- any names, optionally percent-encoded (sink.http_url: {topic},
 * {type}, {key}) --- */

/* The index in names of the placeholder at t ("{name}..."), or -1. */
static int placeholder(const char *t, const char *const *names, size_t *len)
{
	for (int i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncmp(t + 1, names[i], n) == 0 && t[n + 1] == '}') {
			*len = n + 2;
			return i;
		}
	}
	return -1;
}

int pgo_template_check_names(const char *key, const char *tmpl,
			     const char *const *names, pgo_error_t *err)
{
	size_t len;

	if (!*tmpl)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s is empty",
				     key);
	for (const char *t = strchr(tmpl, '{'); t; t = strchr(t + 1, '{')) {
		if (placeholder(t, names, &len) < 0) {
			pgo_buf_t use;
			int n = 0;

			pgo_buf_init(&use);
			while (names[n])
				n++;
			for (int i = 0; i < n; i++)
				pgo_buf_printf(&use, "%s{%s}",
					       i == 0	    ? ""
					       : i == n - 1 ? " and "
							    : ", ",
					       names[i]);
			pgo_error_set(err, PGO_ERR_CONFIG, 0,
				      "%s \"%s\": unknown placeholder at "
				      "\"%.12s\" (use %s)",
				      key, tmpl, t, use.data ? use.data : "");
			pgo_buf_free(&use);
			return PGO_ERR_CONFIG;
		}
	}
	return PGO_OK;
}

/* Appends s percent-encoded (RFC 3986: unreserved characters stay). */
static void put_escaped(pgo_buf_t *buf, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[3];

		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			pgo_buf_append(buf, (const char *)p, 1);
			continue;
		}
		e[0] = '%';
		e[1] = hex[*p >> 4];
		e[2] = hex[*p & 15];
		pgo_buf_append(buf, e, 3);
	}
}

const char *pgo_template_expand_names(pgo_buf_t *buf, const char *tmpl,
				      const char *const *names,
				      const char *const *values,
				      bool url_escape)
{
	const char *t = tmpl;

	pgo_buf_reset(buf);
	pgo_buf_puts(buf, "");
	while (*t) {
		size_t len;
		int i = *t == '{' ? placeholder(t, names, &len) : -1;

		if (i < 0) {
			pgo_buf_append(buf, t++, 1);
			continue;
		}
		if (url_escape)
			put_escaped(buf, values[i] ? values[i] : "");
		else
			pgo_buf_puts(buf, values[i] ? values[i] : "");
		t += len;
	}
	return buf->oom ? NULL : buf->data;
}
