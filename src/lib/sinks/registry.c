/*
 * sinks/registry.c — the sink registry and the host side of the sink interface:
 * making a sink by name (one table row per built-in sink), attaching it
 * to a host's event loop, and the services a sink calls (watchers,
 * timers, done, health).
 *
 * A sink acknowledges only what the downstream holds durably: the relay
 * deletes a row only for PGO_ACK_OK, so no sink may keep an offline
 * buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop/loop.h"
#include "pgo_int.h"

/* --- the registry --- */

/*
 * One row per built-in sink: its name, ops, configure step, help and
 * keys (see pgo_sink_def_t).  conf.c takes relay.sink's values and help
 * and the sinks' keys from here; sinks that need a library are built only
 * when its meson feature is on (PGO_HAVE_*).
 */
const pgo_sink_def_t pgo_sink_defs[] = {
	{.name = "stdout",
	 .ops = &pgo_sink_stdout_ops,
	 .summary = "one NDJSON line per event on standard output",
	 .details = "(logs go to stderr)"},
	{.name = "exec",
	 .ops = &pgo_sink_exec_ops,
	 .configure = pgo_sink_exec_conf_configure,
	 .summary = "runs sink.exec_command once per batch, NDJSON on its "
		    "stdin",
	 .details = "exit 0 acks the batch, other exits retry it; lines on "
		    "its stdout\n\"retry ID reason\" or \"dead ID reason\" "
		    "fail single events.",
	 .keys = pgo_sink_exec_keys,
	 .validate = pgo_sink_exec_validate},
#ifdef PGO_HAVE_REDIS
	{.name = "redis",
	 .ops = &pgo_sink_redis_ops,
	 .configure = pgo_sink_redis_configure,
	 .summary = "XADD per event to a Redis stream",
	 .details = "an event is acked when Redis returns its entry id.",
	 .keys = pgo_sink_redis_keys},
	{.name = "bullmq",
	 .ops = &pgo_sink_bullmq_ops,
	 .configure = pgo_sink_bullmq_configure,
	 .summary = "a BullMQ job per event, jobId ob-ID (the event id)",
	 .details = "connects with the sink.redis_* keys and adds jobs with "
		    "your bullmq\npackage's own script "
		    "(tools/bullmq-export.js, docs/bullmq.md).",
	 .keys = pgo_sink_bullmq_keys},
#endif
#ifdef PGO_HAVE_NATS
	{.name = "nats",
	 .ops = &pgo_sink_nats_ops,
	 .configure = pgo_sink_nats_configure,
	 .summary = "a JetStream publish per event, Nats-Msg-Id = the event id",
	 .details = "an event is acked by its PubAck; the stream drops "
		    "redeliveries within\nits duplicate window "
		    "(docs/nats.md).",
	 .keys = pgo_sink_nats_keys},
#endif
#ifdef PGO_HAVE_RABBITMQ
	{.name = "rabbitmq",
	 .key_prefix = "amqp",
	 .ops = &pgo_sink_amqp_ops,
	 .configure = pgo_sink_amqp_configure,
	 .summary = "an AMQP 0-9-1 message per event to a RabbitMQ exchange",
	 .details = "publisher confirms, mandatory, persistent; message_id "
		    "is the event id\n(docs/rabbitmq.md).",
	 .keys = pgo_sink_amqp_keys,
	 .validate = pgo_sink_amqp_validate},
#endif
#ifdef PGO_HAVE_KAFKA
	{.name = "kafka",
	 .ops = &pgo_sink_kafka_ops,
	 .configure = pgo_sink_kafka_configure,
	 .summary = "a message per event to Kafka (librdkafka, idempotent, "
		    "acks=all)",
	 .details = "key = the event key, value = the payload, header id = "
		    "the event id;\nan event is acked by its delivery report "
		    "(docs/kafka.md).",
	 .keys = pgo_sink_kafka_keys,
	 .validate = pgo_sink_kafka_validate,
	 .ini_section = "kafka",
	 .ini_key = "sink.kafka_conf"},
#endif
#ifdef PGO_HAVE_CURL
	{.name = "http",
	 .ops = &pgo_sink_http_ops,
	 .configure = pgo_sink_http_configure,
	 .summary = "a webhook per event (or sink.http_batch events) to "
		    "sink.http_url",
	 .details = "signed per Standard Webhooks (sink.http_secret); 2xx "
		    "acks, 410 dead-letters,\n429/502/503/504 wait "
		    "(Retry-After) without spending attempts (docs/http.md).",
	 .keys = pgo_sink_http_keys,
	 .validate = pgo_sink_http_validate},
#endif
	{.name = NULL},
};

const char *pgo_sink_known(void)
{
	static char known[256];

	if (!known[0]) {
		size_t len = 0;

		for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
			len += (size_t)snprintf(known + len,
						sizeof(known) - len, "%s%s",
						len ? ", " : "", d->name);
	}
	return known;
}

/* Writes text indented by `indent` columns, line by line. */
static void put_indented(FILE *out, int indent, const char *text)
{
	while (*text) {
		size_t n = strcspn(text, "\n");

		fprintf(out, "%*s%.*s\n", indent, "", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

void pgo_sink_list(FILE *out)
{
	int width = 0;

	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
		if ((int)strlen(d->name) > width)
			width = (int)strlen(d->name);
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++) {
		fprintf(out, "  %-*s  %s\n", width, d->name, d->summary);
		if (d->details)
			put_indented(out, width + 4, d->details);
		for (const pgo_conf_key_t *k = d->keys; k && k->key; k++) {
			char left[64];

			if (!k->flag)
				continue;
			snprintf(left, sizeof(left), "%s VALUE", k->flag);
			fprintf(out, "%*s%-22s %s (default: %s)\n", width + 4,
				"", left, k->key, *k->def ? k->def : "none");
		}
	}
}

static pgo_sink_t *sink_alloc(const pgo_sink_ops_t *ops, void *priv)
{
	pgo_sink_t *sink = calloc(1, sizeof(*sink));

	if (!sink)
		return NULL;
	sink->ops = ops;
	sink->priv = priv;
	snprintf(sink->name, sizeof(sink->name), "%s", ops->name);
	return sink;
}

pgo_sink_t *pgo_sink_new(const char *name, const pgo_conf_t *conf,
			 pgo_error_t *err)
{
	const pgo_sink_def_t *def = pgo_sink_defs;
	pgo_sink_t *sink;
	int rc = PGO_OK;

	while (def->name && strcmp(def->name, name) != 0)
		def++;
	if (!def->name) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "unknown sink \"%s\" (known: %s)", name,
			      pgo_sink_known());
		return NULL;
	}
	sink = sink_alloc(def->ops, NULL);
	if (!sink) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (def->configure)
		rc = def->configure(sink, conf);
	if (rc == PGO_OK && def->ops->open)
		rc = def->ops->open(sink);
	if (rc != PGO_OK) {
		pgo_error_set(err, rc, 0, "sink %s: %s", name, sink->errmsg);
		pgo_sink_destroy(sink);
		return NULL;
	}
	pgo_error_clear(err);
	return sink;
}

pgo_sink_t *pgo_sink_new_custom(const pgo_sink_ops_t *ops, void *priv,
				pgo_error_t *err)
{
	pgo_sink_t *sink;

	if (!ops || ops->version != PGO_SINK_API_VERSION || !ops->submit) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "custom sink: ops must have version %d "
			      "(PGO_SINK_API_VERSION; got %d) and a submit()",
			      PGO_SINK_API_VERSION, ops ? ops->version : -1);
		return NULL;
	}
	sink = sink_alloc(ops, priv);
	if (!sink) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (ops->open && ops->open(sink) != PGO_OK) {
		pgo_error_set(err, PGO_ERR_SINK, 0, "sink %s: %s", sink->name,
			      sink->errmsg[0] ? sink->errmsg : "open failed");
		free(sink);
		return NULL;
	}
	pgo_error_clear(err);
	return sink;
}

void pgo_sink_destroy(pgo_sink_t *sink)
{
	if (!sink)
		return;
	pgo_sink_detach(sink);
	if (sink->ops->close)
		sink->ops->close(sink);
	free(sink);
}

void *pgo_sink_priv(pgo_sink_t *sink)
{
	return sink->priv;
}

const char *pgo_sink_name(const pgo_sink_t *sink)
{
	return sink->name;
}

void pgo_sink_set_error(pgo_sink_t *sink, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sink->errmsg, sizeof(sink->errmsg), fmt, ap);
	va_end(ap);
}

const char *pgo_sink_errmsg(const pgo_sink_t *sink)
{
	return sink->errmsg;
}

/* --- the host's services --- */

pgo_sink_io_t *pgo_sink_io_add(pgo_sink_t *sink, int fd, short events,
			       pgo_sink_io_fn fn, void *arg)
{
	if (!sink->host)
		return NULL;
	return pgo_loop_io_add(sink->host->loop, fd, events, fn, arg);
}

void pgo_sink_io_set(pgo_sink_io_t *io, int fd, short events)
{
	pgo_loop_io_set(io, fd, events);
}

void pgo_sink_io_del(pgo_sink_io_t *io)
{
	pgo_loop_io_del(io);
}

pgo_sink_timer_t *pgo_sink_timer_add(pgo_sink_t *sink, int64_t at_ms,
				     pgo_sink_timer_fn fn, void *arg)
{
	if (!sink->host)
		return NULL;
	return pgo_loop_timer_add(sink->host->loop, at_ms, fn, arg);
}

void pgo_sink_timer_set(pgo_sink_timer_t *t, int64_t at_ms)
{
	pgo_loop_timer_set(t, at_ms);
}

void pgo_sink_timer_del(pgo_sink_timer_t *t)
{
	pgo_loop_timer_del(t);
}

int64_t pgo_sink_now_ms(void)
{
	return pgo_now_ms();
}

void pgo_sink_done(pgo_sink_t *sink, pgo_batch_t *batch)
{
	if (sink->host && sink->host->done)
		sink->host->done(sink->host->ctx, batch);
}

void pgo_sink_health(pgo_sink_t *sink, int up, const char *reason)
{
	if (sink->host && sink->host->health)
		sink->host->health(sink->host->ctx, up, reason);
}

/* --- the host's side --- */

int pgo_sink_attach(pgo_sink_t *sink, const pgo_sink_host_t *host)
{
	int rc;

	sink->host = host;
	if (!sink->ops->start)
		return PGO_OK;
	rc = sink->ops->start(sink);
	if (rc != PGO_OK) {
		if (sink->ops->stop)
			sink->ops->stop(sink);
		sink->host = NULL;
	}
	return rc;
}

void pgo_sink_detach(pgo_sink_t *sink)
{
	if (!sink->host)
		return;
	if (sink->ops->stop)
		sink->ops->stop(sink);
	sink->host = NULL;
}

int pgo_sink_submit(pgo_sink_t *sink, pgo_batch_t *batch)
{
	return sink->ops->submit(sink, batch);
}

void pgo_sink_cancel(pgo_sink_t *sink, pgo_batch_t *batch)
{
	if (sink->ops->cancel)
		sink->ops->cancel(sink, batch);
}

void pgo_sink_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	if (sink->ops->drain)
		sink->ops->drain(sink, deadline_ms);
}
