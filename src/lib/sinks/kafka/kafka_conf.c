/*
 * sinks/kafka/kafka_conf.c — the Kafka sink's keys (sink.kafka_*), the rules
 * pgo_conf_validate() checks when relay.sink is kafka, and the producer's
 * librdkafka configuration built from them.  Registered through the kafka
 * row of the sink registry (sinks/registry.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/kafka/kafka.h"
#include "base/error.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

static const char *const format_choices[] = {"plain", "cloudevents", NULL};

const pgo_conf_key_t pgo_sink_kafka_keys[] = {
	{PGO_CONF_KEY("sink", "kafka_brokers"), .type = PGO_CONF_T_STRING,
	 .def = "localhost:9092", .flag = "--kafka-brokers",
	 .help = "Bootstrap servers of the kafka sink: host:port[,host:port]"},
	{PGO_CONF_KEY("sink", "kafka_topic"), .type = PGO_CONF_T_STRING,
	 .def = "{topic}", .flag = "--kafka-topic",
	 .help = "Topic an event is produced to; {topic}, {queue} and {type} "
		 "are replaced"},
	{PGO_CONF_KEY("sink", "kafka_conf"), .type = PGO_CONF_T_STRING,
	 .def = "", .secret = true, .flag = "--kafka-conf",
	 .help = "librdkafka properties, name=value pairs separated by ';' "
		 "(SASL, TLS, compression, linger.ms)"},
	{PGO_CONF_KEY("sink", "kafka_format"), .type = PGO_CONF_T_ENUM,
	 .def = "plain", .choices = format_choices, .flag = "--kafka-format",
	 .help = "plain (headers id, type, topic, created_at) or cloudevents "
		 "(CloudEvents 1.0 binary mode)"},
	{PGO_CONF_KEY("sink", "kafka_ce_source"), .type = PGO_CONF_T_STRING,
	 .def = "/{topic}",
	 .help = "ce_source of the cloudevents format; {topic}, {queue} and "
		 "{type} are replaced"},
	{PGO_CONF_KEY("sink", "kafka_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "10s", .min = 100, .max = PGO_MINUTES(10),
	 .flag = "--kafka-timeout",
	 .help = "A batch whose delivery reports have not all come by then "
		 "goes back untouched (librdkafka keeps its messages and "
		 "sends them in order)"},
	{.key = NULL},
};

int pgo_kafka_conf_apply(rd_kafka_conf_t *c, const char *text, pgo_error_t *err)
{
	const char *p;

	while (*text) {
		size_t n = strcspn(text, ";\n");
		const char *end = text + n, *eq;
		char name[256], value[4096], why[512];

		p = text;
		while (p < end && isspace((unsigned char)*p))
			p++;
		while (end > p && isspace((unsigned char)end[-1]))
			end--;
		if (end > p) {
			eq = memchr(p, '=', (size_t)(end - p));
			if (!eq || eq == p)
				return pgo_error_set(
					err, PGO_ERR_CONFIG, 0,
					"sink.kafka_conf: \"%.*s\" is not "
					"name=value",
					(int)(end - p), p);
			snprintf(name, sizeof(name), "%.*s", (int)(eq - p), p);
			for (char *t = name + strlen(name);
			     t > name && isspace((unsigned char)t[-1]); t--)
				t[-1] = '\0';
			eq++;
			while (eq < end && isspace((unsigned char)*eq))
				eq++;
			snprintf(value, sizeof(value), "%.*s", (int)(end - eq),
				 eq);
			if (strcmp(name, "message.timeout.ms") == 0 ||
			    strcmp(name, "delivery.timeout.ms") == 0)
				return pgo_error_set(
					err, PGO_ERR_CONFIG, 0,
					"sink.kafka_conf: %s cannot be set: a "
					"message librdkafka gives up on lets "
					"later ones of its partition be "
					"written "
					"without it; set sink.kafka_timeout "
					"(--kafka-timeout) instead",
					name);
			if (rd_kafka_conf_set(c, name, value, why,
					      sizeof(why)) != RD_KAFKA_CONF_OK)
				return pgo_error_set(err, PGO_ERR_CONFIG, 0,
						     "sink.kafka_conf: %s: %s",
						     name, why);
		}
		text += n + (text[n] != '\0');
	}
	return PGO_OK;
}

rd_kafka_conf_t *pgo_kafka_conf_build(const pgo_conf_t *conf, pgo_error_t *err)
{
	char why[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	/* What the guarantees need: the broker holds a message on every
	 * in-sync replica before it is acknowledged (acks=all), retries
	 * inside librdkafka neither duplicate nor reorder it (idempotence),
	 * and a keyed message lands on the partition the Java client
	 * picks. */
	const char *fixed[][2] = {
		{"bootstrap.servers",
		 pgo_conf_get_str(conf, "sink.kafka_brokers")},
		{"enable.idempotence", "true"},
		{"acks", "all"},
		{"partitioner", "murmur2_random"},
		/* Never given up inside librdkafka: a timed-out message
		 * lets later ones of its partition be written without it.
		 * The sink bounds the wait (sink.kafka_timeout). */
		{"message.timeout.ms", "0"},
		/* A claimed batch is all there is: send it at once.  1 ms
		 * kept every lone event of a quiet relay 1 ms in librdkafka's
		 * queue (commit to consumer p50 2.8 -> 1.8 ms at 500/s); 0
		 * costs a drain more, smaller requests (relay CPU 2.0 ->
		 * 2.4-4.9 us an event against the mock cluster). */
		{"linger.ms", "0"},
		/* librdkafka's logs and errors come through the main queue,
		 * served on the loop's thread. */
		{"log.queue", "true"},
		{"statistics.interval.ms", "1000"},
	};

	if (!c) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "kafka: out of memory");
		return NULL;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
		if (rd_kafka_conf_set(c, fixed[i][0], fixed[i][1], why,
				      sizeof(why)) != RD_KAFKA_CONF_OK) {
			pgo_error_set(err, PGO_ERR_CONFIG, 0, "kafka: %s: %s",
				      fixed[i][0], why);
			rd_kafka_conf_destroy(c);
			return NULL;
		}
	if (pgo_kafka_conf_apply(c, pgo_conf_get_str(conf, "sink.kafka_conf"),
				 err) != PGO_OK) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	return c;
}

int pgo_sink_kafka_validate(const pgo_conf_t *conf, pgo_error_t *err)
{
	int64_t timeout = pgo_conf_get_duration(conf, "sink.kafka_timeout");
	int64_t idle = pgo_conf_values(conf)->idle_tx_timeout;
	unsigned all = PGO_TMPL_TOPIC | PGO_TMPL_QUEUE | PGO_TMPL_TYPE;
	rd_kafka_conf_t *c;
	char a[32], b[32];

	if (pgo_template_check("sink.kafka_topic",
			       pgo_conf_get_str(conf, "sink.kafka_topic"), all,
			       err) != PGO_OK ||
	    pgo_template_check("sink.kafka_ce_source",
			       pgo_conf_get_str(conf, "sink.kafka_ce_source"),
			       all, err) != PGO_OK)
		return PGO_ERR_CONFIG;
	if (!*pgo_conf_get_str(conf, "sink.kafka_brokers"))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "relay.sink = kafka needs "
				     "sink.kafka_brokers (--kafka-brokers)");
	/* A batch waits for its delivery reports inside the claim
	 * transaction: they must come (or time out) first. */
	if (idle > 0 && timeout >= idle) {
		pgo_format_duration(timeout, a, sizeof(a));
		pgo_format_duration(idle, b, sizeof(b));
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.kafka_timeout (%s) must be less "
				     "than database.idle_tx_timeout (%s), or "
				     "PostgreSQL ends the session while a "
				     "batch is publishing",
				     a, b);
	}
	c = pgo_kafka_conf_build(conf, err);
	if (!c)
		return err ? err->code : PGO_ERR_CONFIG;
	rd_kafka_conf_destroy(c);
	return PGO_OK;
}
