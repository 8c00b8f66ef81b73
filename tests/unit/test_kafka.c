/*
 * test_kafka.c — the Kafka sink's pure parts, table-driven: the verdict of
 * every librdkafka error class, the sink.kafka_conf pairs and the
 * producer's configuration, a message's headers in both formats, the
 * shared name templates ({topic}, {queue}, {type}) and the config rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/kafka/kafka.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_verdicts(void **state)
{
	static const struct {
		rd_kafka_resp_err_t err;
		pgo_ack_t want;
	} cases[] = {
		{RD_KAFKA_RESP_ERR_NO_ERROR, PGO_ACK_OK},
		/* the event's own fault: dead letters */
		{RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_INVALID_RECORD, PGO_ACK_DEAD},
		{RD_KAFKA_RESP_ERR_POLICY_VIOLATION, PGO_ACK_DEAD},
		/* the broker cannot take anything now: no attempt spent */
		{RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
		 PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
		 PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR__TRANSPORT, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR__QUEUE_FULL, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR__PURGE_QUEUE, PGO_ACK_UNAVAILABLE},
		{RD_KAFKA_RESP_ERR__FATAL, PGO_ACK_UNAVAILABLE},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_ack_t got = pgo_kafka_verdict(cases[i].err);

		if (got != cases[i].want)
			fail_msg("%s: verdict %d, want %d",
				 rd_kafka_err2name(cases[i].err), got,
				 cases[i].want);
	}
}

static void test_conf_pairs(void **state)
{
	static const struct {
		const char *text;
		const char *name, *value; /* read back, or NULL */
		const char *error;	  /* substring, or NULL */
	} cases[] = {
		{"", NULL, NULL, NULL},
		{"linger.ms=7", "linger.ms", "7", NULL},
		{" compression.type = lz4 ; linger.ms=3", "compression.type",
		 "lz4", NULL},
		{"   linger.ms=3;batch.size=5000", "batch.size", "5000", NULL},
		{"linger.ms=3;\n\n batch.num.messages=77\n",
		 "batch.num.messages", "77", NULL},
		{"security.protocol=sasl_ssl;sasl.mechanisms=PLAIN;"
		 "sasl.username=u;sasl.password=p=w",
		 "sasl.password", "p=w", NULL},
		{"no.such.property=1", NULL, NULL, "no.such.property"},
		{"linger.ms", NULL, NULL, "not name=value"},
		{"=5", NULL, NULL, "not name=value"},
		{"acks=sometimes", NULL, NULL, "acks"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		rd_kafka_conf_t *c = rd_kafka_conf_new();
		pgo_error_t err = {0};
		int rc = pgo_kafka_conf_apply(c, cases[i].text, &err);

		if (cases[i].error) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			if (!strstr(err.msg, cases[i].error))
				fail_msg("\"%s\": error \"%s\" lacks \"%s\"",
					 cases[i].text, err.msg,
					 cases[i].error);
		} else {
			if (rc != PGO_OK)
				fail_msg("\"%s\": %s", cases[i].text, err.msg);
			if (cases[i].name) {
				char v[256];
				size_t n = sizeof(v);

				assert_int_equal(
					rd_kafka_conf_get(c, cases[i].name, v,
							  &n),
					RD_KAFKA_CONF_OK);
				assert_string_equal(v, cases[i].value);
			}
		}
		rd_kafka_conf_destroy(c);
	}
}

/* The producer's settings the guarantees need, and the rules. */
static void test_conf_build(void **state)
{
	static const struct {
		const char *key, *value;
		const char *error; /* substring from validate, or NULL */
	} cases[] = {
		{"sink.kafka_conf", "linger.ms=20", NULL},
		{"sink.kafka_conf", "no.such=1", "no.such"},
		{"sink.kafka_topic", "events.{nope}", "unknown placeholder"},
		{"sink.kafka_topic", "", "empty"},
		{"sink.kafka_ce_source", "/x/{type}", NULL},
		{"sink.kafka_ce_source", "/x/{key}", "unknown placeholder"},
		{"sink.kafka_timeout", "1m", "idle_tx_timeout"},
		{"sink.kafka_conf", "message.timeout.ms=5000",
		 "set sink.kafka_timeout"},
		{"sink.kafka_conf", "delivery.timeout.ms=5000",
		 "set sink.kafka_timeout"},
		{"sink.kafka_brokers", "", "needs sink.kafka_brokers"},
	};
	static const char *const fixed[][2] = {
		{"enable.idempotence", "true"},
		{"acks", "-1"},
		{"partitioner", "murmur2_random"},
		{"message.timeout.ms", "0"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		pgo_error_t err = {0};
		int rc;

		assert_non_null(conf);
		assert_int_equal(pgo_conf_set(conf, cases[i].key,
					      cases[i].value, PGO_CONF_FLAG,
					      "test"),
				 PGO_OK);
		rc = pgo_sink_kafka_validate(conf, &err);
		if (cases[i].error) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			if (!strstr(err.msg, cases[i].error))
				fail_msg("%s=%s: error \"%s\" lacks \"%s\"",
					 cases[i].key, cases[i].value, err.msg,
					 cases[i].error);
		} else {
			rd_kafka_conf_t *c;

			if (rc != PGO_OK)
				fail_msg("%s=%s: %s", cases[i].key,
					 cases[i].value, err.msg);
			c = pgo_kafka_conf_build(conf, &err);
			assert_non_null(c);
			for (size_t k = 0; k < N(fixed); k++) {
				char v[256];
				size_t n = sizeof(v);

				assert_int_equal(rd_kafka_conf_get(
							 c, fixed[k][0], v, &n),
						 RD_KAFKA_CONF_OK);
				if (strcmp(v, fixed[k][1]) != 0)
					fail_msg("%s = %s, want %s",
						 fixed[k][0], v, fixed[k][1]);
			}
			rd_kafka_conf_destroy(c);
		}
		pgo_conf_destroy(conf);
	}
}

/* The value of header name, or "<none>" when absent, "<null>" without a
 * value. */
static const char *hdr(rd_kafka_headers_t *h, const char *name, char *buf,
		       size_t size)
{
	const void *v;
	size_t n;

	if (rd_kafka_header_get_last(h, name, &v, &n) != 0)
		return "<none>";
	if (!v)
		return "<null>";
	snprintf(buf, size, "%.*s", (int)n, (const char *)v);
	return buf;
}

static void test_headers(void **state)
{
	static const pgo_event_t keyed = {
		.id = 42,
		.topic = "orders",
		.key = "order-7",
		.type = "order.created",
		.payload = "{\"total\": 3}",
		.headers = "{\"n\": 5, \"id\": \"shadow\", \"obj\": {\"a\": "
			   "[1, 2]}, \"none\": null, \"traceparent\": "
			   "\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
			   "00f067aa0ba902b7-01\", \"ce_id\": \"x\"}",
		.created_at = "2026-12-01T10:00:00.123456Z",
	};
	static const pgo_event_t unkeyed = {
		.id = 43,
		.topic = "t",
		.key = NULL,
		.type = "x",
		.payload = "1",
		.headers = "{}",
		.created_at = "2026-12-01T10:00:01Z",
	};
	static const struct {
		const pgo_event_t *ev;
		pgo_kafka_format_t format;
		const char *name, *want;
	} cases[] = {
		{&keyed, PGO_KAFKA_PLAIN, "id", "42"},
		{&keyed, PGO_KAFKA_PLAIN, "type", "order.created"},
		{&keyed, PGO_KAFKA_PLAIN, "topic", "orders"},
		{&keyed, PGO_KAFKA_PLAIN, "created_at",
		 "2026-12-01T10:00:00.123456Z"},
		{&keyed, PGO_KAFKA_PLAIN, "traceparent",
		 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{&keyed, PGO_KAFKA_PLAIN, "n", "5"},
		{&keyed, PGO_KAFKA_PLAIN, "obj", "{\"a\":[1,2]}"},
		{&keyed, PGO_KAFKA_PLAIN, "none", "<null>"},
		{&keyed, PGO_KAFKA_PLAIN, "ce_id", "x"},
		{&keyed, PGO_KAFKA_PLAIN, "ce_specversion", "<none>"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_specversion", "1.0"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_id", "42"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_type", "order.created"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_source", "/src"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_subject", "order-7"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "ce_time",
		 "2026-12-01T10:00:00.123456Z"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "content-type",
		 "application/json"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "id", "shadow"},
		{&keyed, PGO_KAFKA_CLOUDEVENTS, "traceparent",
		 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{&unkeyed, PGO_KAFKA_CLOUDEVENTS, "ce_subject", "<none>"},
		{&unkeyed, PGO_KAFKA_PLAIN, "id", "43"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		rd_kafka_headers_t *h =
			pgo_kafka_headers(cases[i].ev, cases[i].format, "/src");
		char buf[256];
		const char *got;

		assert_non_null(h);
		got = hdr(h, cases[i].name, buf, sizeof(buf));
		if (strcmp(got, cases[i].want) != 0)
			fail_msg("case %zu: header %s = %s, want %s", i,
				 cases[i].name, got, cases[i].want);
		rd_kafka_headers_destroy(h);
	}
	/* The plain message's own id is the only "id" header. */
	{
		rd_kafka_headers_t *h =
			pgo_kafka_headers(&keyed, PGO_KAFKA_PLAIN, NULL);
		const void *v;
		size_t n;

		assert_int_equal(rd_kafka_header_get(h, 0, "id", &v, &n), 0);
		assert_int_not_equal(rd_kafka_header_get(h, 1, "id", &v, &n),
				     0);
		rd_kafka_headers_destroy(h);
	}
}

static void test_templates(void **state)
{
	static const struct {
		const char *tmpl;
		unsigned allowed;
		const char *want; /* expanded, or NULL: refused */
	} cases[] = {
		{"{topic}", PGO_TMPL_TOPIC, "orders"},
		{"outbox.event.{topic}", PGO_TMPL_TOPIC, "outbox.event.orders"},
		{"{queue}.{topic}.{type}",
		 PGO_TMPL_TOPIC | PGO_TMPL_QUEUE | PGO_TMPL_TYPE,
		 "outbox.orders.order.created"},
		{"{type}", PGO_TMPL_TOPIC | PGO_TMPL_QUEUE, NULL},
		{"a{b}", PGO_TMPL_TOPIC, NULL},
		{"plain", PGO_TMPL_TOPIC, "plain"},
		{"", PGO_TMPL_TOPIC, NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_error_t err = {0};
		int rc = pgo_template_check("k", cases[i].tmpl,
					    cases[i].allowed, &err);
		pgo_buf_t b;

		if (!cases[i].want) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			continue;
		}
		assert_int_equal(rc, PGO_OK);
		pgo_buf_init(&b);
		assert_string_equal(pgo_template_expand(&b, cases[i].tmpl,
							"orders", "outbox",
							"order.created"),
				    cases[i].want);
		pgo_buf_free(&b);
	}
}

/* A [kafka] section passes librdkafka properties through into
 * sink.kafka_conf, after what [sink] kafka_conf says. */
static void test_ini_section(void **state)
{
	static const struct {
		const char *ini;
		const char *want; /* sink.kafka_conf, or NULL: an error */
	} cases[] = {
		{"[kafka]\ncompression.type = lz4\nlinger.ms=5\n",
		 "compression.type=lz4\nlinger.ms=5"},
		{"[sink]\nkafka_conf = acks=all\n[kafka]\nsasl.username = u\n",
		 "acks=all\nsasl.username=u"},
		{"[kafka]\nno.such.property = 1\n", "no.such.property=1"},
		{"[kafkaa]\nlinger.ms = 5\n", NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char path[] = "/tmp/test_kafka_XXXXXX";
		int fd = mkstemp(path);
		pgo_conf_t *conf = pgo_conf_new();
		int rc;

		assert_true(fd >= 0);
		assert_int_equal(write(fd, cases[i].ini, strlen(cases[i].ini)),
				 (ssize_t)strlen(cases[i].ini));
		close(fd);
		rc = pgo_conf_load_file(conf, path);
		unlink(path);
		if (!cases[i].want) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
		} else {
			if (rc != PGO_OK)
				fail_msg("case %zu: %s", i,
					 pgo_conf_errmsg(conf));
			assert_string_equal(
				pgo_conf_get(conf, "sink.kafka_conf"),
				cases[i].want);
		}
		pgo_conf_destroy(conf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_conf_pairs),
		cmocka_unit_test(test_conf_build),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_templates),
		cmocka_unit_test(test_ini_section),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
