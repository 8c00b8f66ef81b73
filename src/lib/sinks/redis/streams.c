/*
 * sinks/redis/streams.c — the Redis Streams sink: one XADD per event, pipelined
 * on one connection; an event is acknowledged when its reply is a stream entry
 * id.  With appendonly/appendfsync always on the Redis side that reply means
 * the entry is on disk.
 *
 *   XADD <stream> [MAXLEN ~ N] * id <id> topic <topic> key <key or "">
 *        type <type> payload <json> headers <json> created_at <rfc3339>
 *
 * The stream name comes from sink.redis_stream with {topic} and {queue}
 * replaced.  The entry id is Redis' own ("*"): the event id travels as the
 * field "id", which the consumer's inbox deduplicates on (an explicit
 * entry id derived from the event id would make Redis refuse events that
 * commit out of id order).
 *
 * Nothing is buffered.  The connection, its pipelining, timeouts,
 * reconnects and outages (UNAVAILABLE verdicts, sink.redis_wait, the
 * sink's health) are the Redis pipeline's (sinks/redis/pipeline.h), shared with
 * the bullmq sink; this file says what an event's command is and what its reply
 * means.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/redis/pipeline.h"
#include "sinks/redis/redis.h"
#include "base/buf.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define SUBJECT "sink redis"

struct rs_sink {
	pgo_redis_pipe_t *pipe; /* first: the pipeline's sink ops find it */
	/* configuration, copied at configure */
	char *stream_tmpl; /* sink.redis_stream */
	char *queue;	   /* relay.queue, for {queue} */
	char maxlen[24];   /* XADD MAXLEN ~ this; "" = no trimming */
	pgo_buf_t stream;  /* scratch: one expanded stream name */
};

static struct rs_sink *rs(pgo_sink_t *sink)
{
	return sink->priv;
}

/* The pipeline's send(): the XADD of event i. */
static void rs_send(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i)
{
	struct rs_sink *s = arg;
	const pgo_event_t *ev = &b->events[i];
	const char *argv[20];
	size_t lens[20];
	char id[24];
	int argc = 0;

	argv[argc++] = "XADD";
	argv[argc] = pgo_sink_template_expand(&s->stream, s->stream_tmpl,
					      ev->topic, s->queue);
	if (!argv[argc++]) {
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY,
				       "redis: out of memory");
		return;
	}
	if (s->maxlen[0]) {
		argv[argc++] = "MAXLEN";
		argv[argc++] = "~";
		argv[argc++] = s->maxlen;
	}
	snprintf(id, sizeof(id), "%" PRId64, ev->id);
	argv[argc++] = "*";
	argv[argc++] = "id";
	argv[argc++] = id;
	argv[argc++] = "topic";
	argv[argc++] = ev->topic;
	argv[argc++] = "key";
	argv[argc++] = ev->key ? ev->key : "";
	argv[argc++] = "type";
	argv[argc++] = ev->type;
	argv[argc++] = "payload";
	argv[argc++] = ev->payload;
	argv[argc++] = "headers";
	argv[argc++] = ev->headers;
	argv[argc++] = "created_at";
	argv[argc++] = ev->created_at;
	for (int k = 0; k < argc; k++)
		lens[k] = strlen(argv[k]);
	pgo_redis_pipe_command(p, b, i, 0, argc, argv, lens);
}

/* The pipeline's reply(): an entry id acknowledges the event. */
static bool rs_reply(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i,
		     int tag, const redisReply *reply, char *why, size_t whylen)
{
	char msg[300];

	(void)arg;
	(void)p;
	(void)tag;
	(void)why;
	(void)whylen;
	if (!b)
		return true; /* this sink queues no command of its own */
	if (reply->type == REDIS_REPLY_STRING ||
	    reply->type == REDIS_REPLY_STATUS) {
		pgo_redis_pipe_verdict(b, i, PGO_ACK_OK, NULL);
	} else if (reply->type == REDIS_REPLY_ERROR) {
		snprintf(msg, sizeof(msg), "redis: XADD: %.*s",
			 (int)(reply->len < 250 ? reply->len : 250),
			 reply->str);
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY, msg);
	} else {
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY,
				       "redis: XADD: unexpected reply type");
	}
	return true;
}

/* --- ops --- */

static void redis_close(pgo_sink_t *sink)
{
	struct rs_sink *s = rs(sink);

	if (!s)
		return;
	pgo_redis_pipe_destroy(s->pipe);
	free(s->stream_tmpl);
	free(s->queue);
	pgo_buf_free(&s->stream);
	free(s);
	sink->priv = NULL;
}

int pgo_sink_redis_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *stream = pgo_conf_get_str(conf, "sink.redis_stream");
	int maxlen = pgo_conf_get_int(conf, "sink.redis_maxlen");
	struct rs_sink *s;
	pgo_error_t err;

	if (pgo_sink_template_check("sink.redis_stream", stream, &err) !=
	    PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "redis: out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_buf_init(&s->stream);
	redis_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	s->pipe =
		pgo_redis_pipe_new(sink, conf,
				   &(pgo_redis_pipe_hooks_t){.subject = SUBJECT,
							     .label = "redis",
							     .send = rs_send,
							     .reply = rs_reply,
							     .arg = s},
				   &err);
	if (!s->pipe) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	s->stream_tmpl = strdup(stream);
	s->queue = strdup(v->queue);
	if (maxlen > 0)
		snprintf(s->maxlen, sizeof(s->maxlen), "%d", maxlen);
	if (!s->stream_tmpl || !s->queue) {
		pgo_sink_set_error(sink, "redis: out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int redis_open(pgo_sink_t *sink)
{
	struct rs_sink *s = rs(sink);

	if (!s || !s->pipe) {
		pgo_sink_set_error(sink, "redis sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT, "publishing to %s, stream %s%s%s",
		pgo_redis_pipe_where(s->pipe), s->stream_tmpl,
		s->maxlen[0] ? ", MAXLEN ~ " : "", s->maxlen);
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_redis_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "redis",
	.open = redis_open,
	.start = pgo_redis_pipe_sink_start,
	.submit = pgo_redis_pipe_sink_submit,
	.cancel = pgo_redis_pipe_sink_cancel,
	.drain = pgo_redis_pipe_sink_drain,
	.stop = pgo_redis_pipe_sink_stop,
	.close = redis_close,
};
