/*
 * sinks/nats/nats_conf.c — the nats sink's keys (sink.nats_*), registered
 * through the nats row of the sink registry (sinks/registry.c).
 */
#include "sinks/nats/nats.h"
#include "conf/conf.h"
#include "sinks/sink_int.h"

static const char *const format_choices[] = {"plain", "cloudevents", NULL};

const pgo_conf_key_t pgo_sink_nats_keys[] = {
	{PGO_CONF_KEY("sink", "nats_url"), .type = PGO_CONF_T_STRING,
	 .def = "nats://127.0.0.1:4222", .secret = true,
	 .mask = pgo_nats_url_mask, .flag = "--nats-url",
	 .help = "NATS servers of the nats sink, comma separated: "
		 "nats://[user:password@|token@]host[:port], tls://..."},
	{PGO_CONF_KEY("sink", "nats_subject"), .type = PGO_CONF_T_STRING,
	 .def = "{topic}", .flag = "--nats-subject",
	 .help = "Subject an event is published to (a JetStream stream must "
		 "bind it); {topic} and {queue} are replaced"},
	{PGO_CONF_KEY("sink", "nats_format"), .type = PGO_CONF_T_ENUM,
	 .def = "plain", .choices = format_choices, .flag = "--nats-format",
	 .help = "plain: Pgoutbox-* headers; cloudevents: the ce- headers of "
		 "the CloudEvents NATS binding too"},
	{PGO_CONF_KEY("sink", "nats_creds"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--nats-creds",
	 .help = "Credentials file (user JWT and NKey seed) to authenticate "
		 "with; empty: none"},
	{PGO_CONF_KEY("sink", "nats_nkey"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--nats-nkey",
	 .help = "File with a user NKey seed (SU...) to authenticate with; "
		 "empty: none"},
	{PGO_CONF_KEY("sink", "nats_tls_ca"), .type = PGO_CONF_T_STRING,
	 .def = "",
	 .help = "PEM file of the CAs that sign the servers' certificates "
		 "(turns TLS on)"},
	{PGO_CONF_KEY("sink", "nats_tls_cert"), .type = PGO_CONF_T_STRING,
	 .def = "",
	 .help = "PEM file of a client certificate (with sink.nats_tls_key; "
		 "turns TLS on)"},
	{PGO_CONF_KEY("sink", "nats_tls_key"), .type = PGO_CONF_T_STRING,
	 .def = "", .help = "PEM file of the client certificate's key"},
	{PGO_CONF_KEY("sink", "nats_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "5s", .min = 10, .max = PGO_MINUTES(10),
	 .flag = "--nats-timeout",
	 .help = "An event's PubAck must arrive within this, or the batch "
		 "is rolled back as unavailable"},
	{PGO_CONF_KEY("sink", "nats_connect_timeout"),
	 .type = PGO_CONF_T_DURATION, .def = "2s", .min = 10,
	 .max = PGO_MINUTES(1),
	 .help = "Give up one connection attempt to a NATS server after "
		 "this long"},
	{.key = NULL},
};
