/*
 * sinks/rabbitmq/rabbitmq_conf.c — the rabbitmq sink's keys (sink.amqp_*),
 * registered through the rabbitmq row of the sink registry (sinks/registry.c),
 * and the rules between them that `pgoutbox config check` reports.
 */
#include "sinks/rabbitmq/rabbitmq.h"

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
