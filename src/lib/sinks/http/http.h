/*
 * sinks/http/http.h — the http (webhook) sink as the registry knows it:
 * its ops (sinks/http/http.c), keys and rules (sinks/http/http_conf.c)
 * and its row.  The webhook's pure parts are sinks/http/webhook.h.
 */
#ifndef PGO_SINK_HTTP_H
#define PGO_SINK_HTTP_H

#include "sinks/sink_int.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

extern const pgo_sink_ops_t pgo_sink_http_ops;
/* sinks/http/http_conf.c: the sink.http_* keys and the rules between
 * them. */
extern const pgo_conf_key_t pgo_sink_http_keys[];
int pgo_sink_http_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.http_* keys (and relay.queue, relay.mode) into the
 * sink; checks the URL template, the secrets and the headers. */
int pgo_sink_http_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The http row of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_http                                                      \
	{.name = "http",                                                       \
	 .ops = &pgo_sink_http_ops,                                            \
	 .configure = pgo_sink_http_configure,                                 \
	 .summary = "a webhook per event (or sink.http_batch events) to "      \
		    "sink.http_url",                                           \
	 .details = "signed per Standard Webhooks (sink.http_secret); 2xx "    \
		    "acks, 410 dead-letters,\n429/502/503/504 wait "           \
		    "(Retry-After) without spending attempts (docs/http.md).", \
	 .keys = pgo_sink_http_keys,                                           \
	 .validate = pgo_sink_http_validate}
/* clang-format on */

#endif /* PGO_SINK_HTTP_H */
