/*
 * base/template.c — the name templates of the sinks: a destination named
 * from an event ({topic}, {queue}), as sink.redis_stream,
 * sink.bullmq_queue and sink.amqp_routing_key spell it.  One place, so
 * every sink accepts the same placeholders with the same errors.
 */
#include <string.h>

#include "pgo_int.h"

int pgo_template_check(const char *key, const char *tmpl, pgo_error_t *err)
{
	if (!*tmpl)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s is empty",
				     key);
	for (const char *t = strchr(tmpl, '{'); t; t = strchr(t + 1, '{')) {
		if (strncmp(t, "{topic}", 7) != 0 &&
		    strncmp(t, "{queue}", 7) != 0)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "%s \"%s\": unknown placeholder "
					     "at \"%.12s\" (use {topic} and "
					     "{queue})",
					     key, tmpl, t);
	}
	return PGO_OK;
}

const char *pgo_template_expand(pgo_buf_t *buf, const char *tmpl,
				const char *topic, const char *queue)
{
	const char *t = tmpl;

	pgo_buf_reset(buf);
	pgo_buf_puts(buf, "");
	while (*t) {
		if (strncmp(t, "{topic}", 7) == 0) {
			pgo_buf_puts(buf, topic);
			t += 7;
		} else if (strncmp(t, "{queue}", 7) == 0) {
			pgo_buf_puts(buf, queue);
			t += 7;
		} else {
			pgo_buf_append(buf, t++, 1);
		}
	}
	return buf->oom ? NULL : buf->data;
}
