/*
 * sink.c — the sink registry: making a sink by name from the configuration
 * or from a caller's ops, and the error text a sink reports.
 *
 * A sink publishes a batch and gives a verdict per event (pgo_ack_t).  The
 * relay deletes a row only for PGO_ACK_OK, so a sink must acknowledge only
 * what the downstream holds durably: no sink may keep an offline buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgo_int.h"

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
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const pgo_sink_ops_t *ops;
	pgo_sink_t *sink;
	int rc = PGO_OK;

	if (strcmp(name, "stdout") == 0)
		ops = &pgo_sink_stdout_ops;
	else if (strcmp(name, "exec") == 0)
		ops = &pgo_sink_exec_ops;
	else if (strcmp(name, "redis") == 0)
		ops = &pgo_sink_redis_ops;
	else if (strcmp(name, "bullmq") == 0)
		ops = &pgo_sink_bullmq_ops;
	else {
		pgo_error_set(
			err, PGO_ERR_INVALID, 0,
			"unknown sink \"%s\" (known: stdout, exec, redis, "
			"bullmq)",
			name);
		return NULL;
	}
	sink = sink_alloc(ops, NULL);
	if (!sink) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (ops == &pgo_sink_exec_ops)
		rc = pgo_sink_exec_configure(sink, v->exec_command,
					     v->exec_timeout);
	else if (ops == &pgo_sink_redis_ops)
		rc = pgo_sink_redis_configure(sink, conf);
	else if (ops == &pgo_sink_bullmq_ops)
		rc = pgo_sink_bullmq_configure(sink, conf);
	if (rc == PGO_OK && ops->open)
		rc = ops->open(sink);
	if (rc != PGO_OK) {
		pgo_error_set(err, rc, 0, "sink %s: %s", name, sink->errmsg);
		pgo_sink_destroy(sink);
		return NULL;
	}
	pgo_error_clear(err);
	return sink;
}

pgo_sink_t *pgo_sink_new_custom(const pgo_sink_ops_t *ops, void *priv)
{
	pgo_sink_t *sink;

	if (!ops || !ops->publish)
		return NULL;
	sink = sink_alloc(ops, priv);
	if (sink && ops->open && ops->open(sink) != PGO_OK) {
		free(sink);
		return NULL;
	}
	return sink;
}

void pgo_sink_destroy(pgo_sink_t *sink)
{
	if (!sink)
		return;
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
