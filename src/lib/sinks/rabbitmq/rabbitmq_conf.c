/*
 * sinks/rabbitmq/rabbitmq_conf.c — the rabbitmq sink's keys (sink.amqp_*),
 * registered through the rabbitmq row of the sink registry (sinks/registry.c),
 * the rules between them that `pgoutbox config check` reports, and the
 * configure step that reads them into the sink's state.
 */
#include <stdlib.h>
#include <string.h>

#include "sinks/rabbitmq/rabbitmq_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/rabbitmq/rabbitmq.h"
#include "sinks/sink_int.h"

static const char *const amqp_format_choices[] = {"plain", "cloudevents", NULL};

const pgo_conf_key_t pgo_sink_amqp_keys[] = {
	{PGO_CONF_KEY("sink", "amqp_url"), .type = PGO_CONF_T_STRING,
	 .def = "amqp://guest:guest@localhost:5672/%2f", .secret = true,
	 .flag = "--amqp-url",
	 .help = "RabbitMQ of the rabbitmq sink: "
		 "amqp[s]://user:password@host[:port][/vhost]"},
	{PGO_CONF_KEY("sink", "amqp_exchange"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--amqp-exchange",
	 .help = "Exchange events are published to (\"\": the default "
		 "exchange, routing key = queue name)"},
	{PGO_CONF_KEY("sink", "amqp_routing_key"), .type = PGO_CONF_T_STRING,
	 .def = "{topic}", .flag = "--amqp-routing-key",
	 .help = "Routing key of an event; {topic} and {queue} are replaced"},
	{PGO_CONF_KEY("sink", "amqp_format"), .type = PGO_CONF_T_ENUM,
	 .def = "plain", .choices = amqp_format_choices,
	 .flag = "--amqp-format",
	 .help = "plain, or cloudevents: adds the CloudEvents binary-mode "
		 "cloudEvents_* headers"},
	{PGO_CONF_KEY("sink", "amqp_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "5s", .min = 10, .max = PGO_MINUTES(10),
	 .flag = "--amqp-timeout",
	 .help = "A batch's publisher confirms must arrive within this, or "
		 "the connection is dropped"},
	{PGO_CONF_KEY("sink", "amqp_connect_timeout"),
	 .type = PGO_CONF_T_DURATION, .def = "5s", .min = 10,
	 .max = PGO_MINUTES(1),
	 .help = "Give up connecting to RabbitMQ (TCP, TLS, login, channel) "
		 "after this long"},
	{PGO_CONF_KEY("sink", "amqp_heartbeat"), .type = PGO_CONF_T_DURATION,
	 .def = "30s", .min = 0, .max = PGO_MINUTES(10),
	 .help = "AMQP heartbeat asked for (whole seconds; 0 = none)"},
	{PGO_CONF_KEY("sink", "amqp_frame_max"), .type = PGO_CONF_T_INT,
	 .def = "131072", .min = 4096, .max = 2147483647,
	 .help = "Largest AMQP frame asked for, in bytes (bodies larger "
		 "are split)"},
	{PGO_CONF_KEY("sink", "amqp_ca"), .type = PGO_CONF_T_STRING, .def = "",
	 .help = "amqps://: PEM file of the CA that signed the broker's "
		 "certificate"},
	{PGO_CONF_KEY("sink", "amqp_cert"), .type = PGO_CONF_T_STRING,
	 .def = "", .help = "amqps://: PEM file of a client certificate"},
	{PGO_CONF_KEY("sink", "amqp_key"), .type = PGO_CONF_T_STRING, .def = "",
	 .help = "amqps://: PEM file of the client certificate's "
		 "private key"},
	{PGO_CONF_KEY("sink", "amqp_verify"), .type = PGO_CONF_T_BOOL,
	 .def = "on",
	 .help = "amqps://: check the broker's certificate and host name"},
	{.key = NULL},
};

int pgo_sink_amqp_validate(const pgo_conf_t *conf, pgo_error_t *err)
{
	int64_t timeout = pgo_conf_get_duration(conf, "sink.amqp_timeout");
	int64_t idle = pgo_conf_values(conf)->idle_tx_timeout;
	bool cert = *pgo_conf_get_str(conf, "sink.amqp_cert") != '\0';
	bool key = *pgo_conf_get_str(conf, "sink.amqp_key") != '\0';
	char a[32], b[32];

	if (cert != key)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.amqp_cert and sink.amqp_key go "
				     "together: set both or neither");
	/* Confirms are awaited inside the claim transaction. */
	if (idle > 0 && timeout >= idle) {
		pgo_format_duration(timeout, a, sizeof(a));
		pgo_format_duration(idle, b, sizeof(b));
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.amqp_timeout (%s) must be less "
				     "than database.idle_tx_timeout (%s), or "
				     "PostgreSQL ends the session while a "
				     "batch awaits its confirms",
				     a, b);
	}
	return PGO_OK;
}

static int parse_url(const char *url, char **buf,
		     struct amqp_connection_info *info, char *err,
		     size_t errlen)
{
	*buf = strdup(url);
	if (!*buf) {
		snprintf(err, errlen, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	if (strncmp(url, "amqp://", 7) != 0 &&
	    strncmp(url, "amqps://", 8) != 0) {
		snprintf(err, errlen,
			 "sink.amqp_url: not an amqp:// or amqps:// URL "
			 "(amqp://user:password@host:port/vhost)");
		return PGO_ERR_CONFIG;
	}
	amqp_default_connection_info(info);
	if (amqp_parse_url(*buf, info) != AMQP_STATUS_OK || !*info->host) {
		snprintf(err, errlen,
			 "sink.amqp_url: cannot read the URL "
			 "(amqp://user:password@host:port/vhost; %%2f is the "
			 "vhost \"/\")");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}

int pgo_sink_amqp_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *rkey = pgo_conf_get_str(conf, "sink.amqp_routing_key");
	struct am_sink *s;
	pgo_error_t err;
	char msg[300];
	int rc;

	if (pgo_sink_template_check("sink.amqp_routing_key", rkey, &err) !=
	    PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_sink_amqp_ops.close(
		sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	s->sink = sink;
	pgo_buf_init(&s->rkey);
	s->backoff = BACKOFF_MIN_MS;
	pgo_am_pend_clear(s);
	rc = parse_url(pgo_conf_get_str(conf, "sink.amqp_url"), &s->url_buf,
		       &s->url, msg, sizeof(msg));
	if (rc != PGO_OK) {
		free(s->url_buf);
		s->url_buf = NULL;
		pgo_sink_set_error(sink, "%s", msg);
		return rc;
	}
	snprintf(s->where, sizeof(s->where), "%s:%d/%s", s->url.host,
		 s->url.port, s->url.vhost);
	s->exchange = strdup(pgo_conf_get_str(conf, "sink.amqp_exchange"));
	s->rkey_tmpl = strdup(rkey);
	s->queue = strdup(v->queue);
	s->ca = strdup(pgo_conf_get_str(conf, "sink.amqp_ca"));
	s->cert = strdup(pgo_conf_get_str(conf, "sink.amqp_cert"));
	s->key = strdup(pgo_conf_get_str(conf, "sink.amqp_key"));
	s->cloudevents = pgo_conf_get_int(conf, "sink.amqp_format") == 1;
	s->verify = pgo_conf_get_bool(conf, "sink.amqp_verify");
	s->timeout_ms = pgo_conf_get_duration(conf, "sink.amqp_timeout");
	s->connect_timeout_ms =
		pgo_conf_get_duration(conf, "sink.amqp_connect_timeout");
	s->heartbeat_s =
		(int)(pgo_conf_get_duration(conf, "sink.amqp_heartbeat") /
		      1000);
	s->frame_max = pgo_conf_get_int(conf, "sink.amqp_frame_max");
	if (!s->exchange || !s->rkey_tmpl || !s->queue || !s->ca || !s->cert ||
	    !s->key) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	if (strlen(s->exchange) > 255) {
		pgo_sink_set_error(sink, "sink.amqp_exchange: longer than "
					 "AMQP's 255 bytes");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}
