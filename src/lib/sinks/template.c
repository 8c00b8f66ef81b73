/*
 * sinks/template.c — the name templates of every sink: a destination
 * (Redis stream, BullMQ queue, Kafka topic) is a text in which {topic},
 * {queue} and {type} are replaced by the event's topic, the relay's queue
 * and the event's type.  Each sink says which placeholders its key
 * accepts.
 */
#include <string.h>

#include "pgo_int.h"

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
