/*
 * sinks/kafka/kafka.h — the parts of the Kafka sink (sinks/kafka/kafka.c,
 * sinks/kafka/kafka_conf.c) that are pure functions, shared by its two files
 * and tested on their own (tests/unit/test_kafka.c): the producer's
 * configuration, a message's headers, and the verdict of a delivery
 * report.
 */
#ifndef PGO_SINK_KAFKA_H
#define PGO_SINK_KAFKA_H

#include <librdkafka/rdkafka.h>

#include "sinks/sink_int.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* --- the sink as the registry knows it --- */

extern const pgo_sink_ops_t pgo_sink_kafka_ops;
/* sinks/kafka/kafka_conf.c: the sink.kafka_* keys and the rules validate
 * checks (templates, the timeout against database.idle_tx_timeout,
 * librdkafka's own verdict on every property). */
extern const pgo_conf_key_t pgo_sink_kafka_keys[];
int pgo_sink_kafka_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.kafka_* keys (and relay.queue) into the sink and builds
 * the producer's configuration (sinks/kafka/kafka.c). */
int pgo_sink_kafka_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The kafka row of the sink registry (sinks/registry.c); its INI section
 * [kafka] passes through to sink.kafka_conf. */
/* clang-format off */
#define PGO_SINK_ROW_kafka                                                     \
	{.name = "kafka",                                                      \
	 .ops = &pgo_sink_kafka_ops,                                           \
	 .configure = pgo_sink_kafka_configure,                                \
	 .summary = "a message per event to Kafka (librdkafka, idempotent, "   \
		    "acks=all)",                                               \
	 .details = "key = the event key, value = the payload, header id = "   \
		    "the event id;\nan event is acked by its delivery report " \
		    "(docs/kafka.md).",                                        \
	 .keys = pgo_sink_kafka_keys,                                          \
	 .validate = pgo_sink_kafka_validate,                                  \
	 .ini_section = "kafka",                                               \
	 .ini_key = "sink.kafka_conf"}
/* clang-format on */

/* --- the pure parts --- */

/* sink.kafka_format: the message shape (values never renumbered). */
typedef enum pgo_kafka_format {
	PGO_KAFKA_PLAIN = 0,	  /* headers id, type, topic, created_at */
	PGO_KAFKA_CLOUDEVENTS = 1 /* CloudEvents 1.0, Kafka binary mode */
} pgo_kafka_format_t;

/* The producer's configuration from the sink.kafka_* keys: the settings
 * the guarantees need (enable.idempotence, acks=all, murmur2_random,
 * message.timeout.ms from sink.kafka_timeout), then every pair of
 * sink.kafka_conf as librdkafka documents it.  NULL with err filled
 * (PGO_ERR_CONFIG, naming the property and librdkafka's reason). */
rd_kafka_conf_t *pgo_kafka_conf_build(const pgo_conf_t *conf, pgo_error_t *err);
/* Sets each "name=value" pair of text (separated by ';' or newlines,
 * blanks around them ignored) on c.  PGO_OK or PGO_ERR_CONFIG with err
 * naming the pair. */
int pgo_kafka_conf_apply(rd_kafka_conf_t *c, const char *text,
			 pgo_error_t *err);

/* The headers of event ev's message (caller owns them; NULL on OOM):
 * plain: id, type, topic, created_at; cloudevents: ce_specversion,
 * ce_id, ce_type, ce_source (source), ce_subject (the key, when there is
 * one), ce_time, content-type.  Then every entry of the event's headers
 * object that does not shadow one of those: a string as its text, null
 * as a header without a value, anything else as its JSON. */
rd_kafka_headers_t *pgo_kafka_headers(const pgo_event_t *ev,
				      pgo_kafka_format_t format,
				      const char *source);

/* What an error of librdkafka (from produce or a delivery report) means
 * for the event: PGO_ACK_OK for none; PGO_ACK_DEAD when sending it again
 * fails the same way (too large, an invalid or unknown topic, no
 * authorization); PGO_ACK_UNAVAILABLE for everything else (timeouts, no
 * leader, not enough replicas, brokers down, a full queue): the broker
 * cannot take it now, no attempt is spent. */
pgo_ack_t pgo_kafka_verdict(rd_kafka_resp_err_t err);

#endif /* PGO_SINK_KAFKA_H */
