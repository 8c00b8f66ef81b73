/*
 * sinks/http/http_conf.c — the http sink's keys (sink.http_*), registered
 * through the http row of the sink registry (sinks/registry.c), and the
 * rules `pgoutbox config check` reports.
 */
#include "sinks/http/webhook.h"
#include "base/error.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "sinks/http/http.h"

static const char *const body_choices[] = {"event", "payload", "cloudevents",
					   NULL};

const pgo_conf_key_t pgo_sink_http_keys[] = {
	{PGO_CONF_KEY("sink", "http_url"), .type = PGO_CONF_T_STRING, .def = "",
	 .secret = true, .flag = "--http-url",
	 .help = "Endpoint of the http sink: http(s)://host[:port]/path; "
		 "{topic}, {type} and {key} are replaced (URL-encoded)"},
	{PGO_CONF_KEY("sink", "http_body"), .type = PGO_CONF_T_ENUM,
	 .def = "event", .choices = body_choices, .flag = "--http-body",
	 .help = "Request body: event (the stdout sink's JSON object), "
		 "payload, or cloudevents (structured mode)"},
	{PGO_CONF_KEY("sink", "http_batch"), .type = PGO_CONF_T_INT, .def = "1",
	 .min = 1, .max = 10000, .flag = "--http-batch",
	 .help = "Events per request; more than 1 sends a JSON array and "
		 "gives one verdict to all"},
	{PGO_CONF_KEY("sink", "http_concurrency"), .type = PGO_CONF_T_INT,
	 .def = "16", .min = 1, .max = 1000, .flag = "--http-concurrency",
	 .help = "Requests in flight at once (one key's events are never "
		 "in flight together)"},
	{PGO_CONF_KEY("sink", "http_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "10s", .min = 10, .max = PGO_MINUTES(10),
	 .flag = "--http-timeout",
	 .help = "A request must be answered within this (connecting "
		 "included), or it is a failed attempt"},
	{PGO_CONF_KEY("sink", "http_headers"), .type = PGO_CONF_T_STRING,
	 .def = "", .secret = true, .flag = "--http-header",
	 .help = "Extra request headers, \"Name: value\" separated by "
		 "newlines or \" | \""},
	{PGO_CONF_KEY("sink", "http_secret"), .type = PGO_CONF_T_STRING,
	 .def = "", .secret = true,
	 .help = "Standard Webhooks signing secrets (whsec_...), separated "
		 "by spaces: each signs every request (rotation)"},
	{PGO_CONF_KEY("sink", "http_ca_file"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--http-ca-file",
	 .help = "PEM file of the CAs that verify the endpoint's certificate "
		 "(default: the system's)"},
	{PGO_CONF_KEY("sink", "http_cert"), .type = PGO_CONF_T_STRING,
	 .def = "",
	 .help = "PEM client certificate for mutual TLS (with "
		 "sink.http_key)"},
	{PGO_CONF_KEY("sink", "http_key"), .type = PGO_CONF_T_STRING, .def = "",
	 .help = "PEM private key of sink.http_cert"},
	{.key = NULL},
};

int pgo_sink_http_validate(const pgo_conf_t *conf, pgo_error_t *err)
{
	int64_t timeout = pgo_conf_get_duration(conf, "sink.http_timeout");
	int64_t idle = pgo_conf_values(conf)->idle_tx_timeout;
	pgo_http_secrets_t secrets;
	char a[32], b[32];

	if (!*pgo_conf_get_str(conf, "sink.http_url"))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "relay.sink = http needs sink.http_url "
				     "(--http-url)");
	if (!*pgo_conf_get_str(conf, "sink.http_cert") !=
	    !*pgo_conf_get_str(conf, "sink.http_key"))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.http_cert and sink.http_key go "
				     "together");
	if (pgo_http_secrets_parse(pgo_conf_get_str(conf, "sink.http_secret"),
				   &secrets, err) != PGO_OK)
		return PGO_ERR_CONFIG;
	/* Requests run inside the claim transaction, idle as far as
	 * PostgreSQL can tell. */
	if (idle > 0 && timeout >= idle) {
		pgo_format_duration(timeout, a, sizeof(a));
		pgo_format_duration(idle, b, sizeof(b));
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.http_timeout (%s) must be less "
				     "than database.idle_tx_timeout (%s), or "
				     "PostgreSQL ends the session while a "
				     "batch is publishing",
				     a, b);
	}
	pgo_error_clear(err);
	return PGO_OK;
}
