/*
 * sinks/rabbitmq/rabbitmq.h — the rabbitmq sink as the registry knows it:
 * its ops (sinks/rabbitmq/rabbitmq.c), its keys and rules
 * (sinks/rabbitmq/rabbitmq_conf.c) and its row.  Its keys are named
 * sink.amqp_* (the protocol), its --sink value is rabbitmq.
 */
#ifndef PGO_SINK_RABBITMQ_H
#define PGO_SINK_RABBITMQ_H

#include "sinks/sink_int.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

extern const pgo_sink_ops_t pgo_sink_amqp_ops;
/* The sink.amqp_* keys, and the rules between them (cert and key; the
 * confirm timeout within database.idle_tx_timeout). */
extern const pgo_conf_key_t pgo_sink_amqp_keys[];
int pgo_sink_amqp_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.amqp_* keys (and relay.queue) into the sink; checks the
 * URL and the routing key template. */
int pgo_sink_amqp_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The rabbitmq row of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_rabbitmq                                                  \
	{.name = "rabbitmq",                                                   \
	 .key_prefix = "amqp",                                                 \
	 .ops = &pgo_sink_amqp_ops,                                            \
	 .configure = pgo_sink_amqp_configure,                                 \
	 .summary = "an AMQP 0-9-1 message per event to a RabbitMQ exchange",  \
	 .details = "publisher confirms, mandatory, persistent; message_id "   \
		    "is the event id\n(docs/rabbitmq.md).",                    \
	 .keys = pgo_sink_amqp_keys,                                           \
	 .validate = pgo_sink_amqp_validate}
/* clang-format on */

#endif /* PGO_SINK_RABBITMQ_H */
