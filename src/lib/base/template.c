/*
 * base/template.c — name templates with {placeholders}, shared by the sinks
 * (sink.redis_stream and sink.bullmq_queue: {topic} and {queue};
 * sink.http_url: {topic}, {type} and {key}).  A template is checked once,
 * when the sink is configured, and expanded per event into a buffer.
 */
#include <string.h>

#include "pgo_int.h"

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

int pgo_template_check(const char *key, const char *tmpl,
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

const char *pgo_template_expand(pgo_buf_t *buf, const char *tmpl,
				const char *const *names,
				const char *const *values, bool url_escape)
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
