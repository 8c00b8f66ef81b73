/*
 * test_sink_http.c — the http sink's pure parts (sinks/http/webhook.c and
 * base/template.c), table-driven: what a status means, Retry-After,
 * whsec_ secrets, the Standard Webhooks signature against the spec's own
 * example, header values taken from the event's headers, the bodies, and
 * URL templates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sinks/http/webhook.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_status_verdict(void **state)
{
	static const struct {
		long status;
		pgo_ack_t ack;
	} cases[] = {
		{200, PGO_ACK_OK},	    {201, PGO_ACK_OK},
		{204, PGO_ACK_OK},	    {299, PGO_ACK_OK},
		{410, PGO_ACK_DEAD},	    {429, PGO_ACK_UNAVAILABLE},
		{502, PGO_ACK_UNAVAILABLE}, {503, PGO_ACK_UNAVAILABLE},
		{504, PGO_ACK_UNAVAILABLE}, {500, PGO_ACK_RETRY},
		{501, PGO_ACK_RETRY},	    {400, PGO_ACK_RETRY},
		{401, PGO_ACK_RETRY},	    {404, PGO_ACK_RETRY},
		{408, PGO_ACK_RETRY},	    {413, PGO_ACK_RETRY},
		{301, PGO_ACK_RETRY},	    {100, PGO_ACK_RETRY},
		{0, PGO_ACK_RETRY},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		if (pgo_http_status_verdict(cases[i].status) != cases[i].ack)
			fail_msg("status %ld: got %d, want %d", cases[i].status,
				 pgo_http_status_verdict(cases[i].status),
				 cases[i].ack);
	}
}

static void test_retry_after(void **state)
{
	/* 2026-12-01 12:00:00 UTC */
	const time_t now = 1796126400;
	static const struct {
		const char *value;
		int64_t ms;
	} cases[] = {
		{"2", 2000},
		{" 120 ", 120000},
		{"0", 0},
		{"Tue, 01 Dec 2026 12:00:05 GMT", 5000},
		{"Tue, 01 Dec 2026 11:59:00 GMT", 0}, /* in the past */
		{"Tuesday, 01-Dec-26 12:01:00 GMT", 60000},
		{"soon", -1},
		{"2s", -1},
		{"", -1},
		{NULL, -1},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int64_t got = pgo_http_retry_after_ms(cases[i].value, now);

		if (got != cases[i].ms)
			fail_msg("Retry-After \"%s\": got %lld, want %lld",
				 cases[i].value ? cases[i].value : "(null)",
				 (long long)got, (long long)cases[i].ms);
	}
}

static void test_secrets(void **state)
{
	static const struct {
		const char *text;
		int n; /* -1: refused */
		const char *error;
	} cases[] = {
		{"", 0, NULL},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 1, NULL},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_c2VjcmV0", 2,
		 NULL},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_YQ==", 2, NULL},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", -1,
		 "secret 1 does not "
		 "start with whsec_"},
		{"whsec_YQ== whsec_abc", -1, "secret 2 is not padded base64"},
		{"whsec_", -1, "does not start with whsec_"},
		{"whsec_!!!!", -1, "secret 1 is not valid base64"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_http_secrets_t s;
		pgo_error_t err;
		int rc = pgo_http_secrets_parse(cases[i].text, &s, &err);

		if (cases[i].n < 0) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			if (!strstr(err.msg, cases[i].error))
				fail_msg("\"%s\": message \"%s\" lacks \"%s\"",
					 cases[i].text, err.msg,
					 cases[i].error);
			/* The message never shows the secret. */
			assert_null(strstr(err.msg, "MfKQ9r8"));
		} else {
			assert_int_equal(rc, PGO_OK);
			assert_int_equal(s.n, cases[i].n);
		}
	}
}

/* The example of the Standard Webhooks spec (and of its libraries'
 * tests), then rotation: one signature per secret. */
static void test_signature(void **state)
{
	static const struct {
		const char *secrets, *id, *body, *want;
		int64_t ts;
	} cases[] = {
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		 "msg_p5jXN8AQM9LWM0D4loKWxJek", "{\"test\": 2432232314}",
		 "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", 1614265330},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw "
		 "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		 "msg_p5jXN8AQM9LWM0D4loKWxJek", "{\"test\": 2432232314}",
		 "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= "
		 "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		 1614265330},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_http_secrets_t s;
		pgo_error_t err;
		pgo_buf_t scratch, out;

		pgo_buf_init(&scratch);
		pgo_buf_init(&out);
		assert_int_equal(
			pgo_http_secrets_parse(cases[i].secrets, &s, &err),
			PGO_OK);
		assert_true(pgo_http_sign(&s, cases[i].id, cases[i].ts,
					  cases[i].body, strlen(cases[i].body),
					  &scratch, &out));
		assert_string_equal(out.data, cases[i].want);
		pgo_buf_free(&scratch);
		pgo_buf_free(&out);
	}
}

static void test_json_header(void **state)
{
	static const struct {
		const char *json, *name, *want; /* want NULL: not found */
	} cases[] = {
		{"{\"traceparent\": \"00-abc-def-01\"}", "traceparent",
		 "00-abc-def-01"},
		{"{\"a\": {\"traceparent\": \"x\"}, \"traceparent\": \"y\"}",
		 "traceparent", "y"},
		{"{\"a\": [1, \"b,}\"], \"tracestate\": \"k=v,l=w\"}",
		 "tracestate", "k=v,l=w"},
		{"{\"n\": 12, \"t\": true, \"x\": null, \"tp\": \"z\"}", "tp",
		 "z"},
		{"{}", "traceparent", NULL},
		{"{\"traceparent\": 5}", "traceparent", NULL},
		{"{\"traceparent\": \"a\\r\\nX-Evil: 1\"}", "traceparent",
		 NULL},
		{"{\"traceparentx\": \"a\"}", "traceparent", NULL},
		{"[1]", "traceparent", NULL},
		{"{\"traceparent\": \"unterminated", "traceparent", NULL},
		{NULL, "traceparent", NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char out[64];
		bool got = pgo_http_json_header(cases[i].json, cases[i].name,
						out, sizeof(out));

		if (!cases[i].want) {
			if (got)
				fail_msg("%s: found \"%s\"", cases[i].json,
					 out);
		} else {
			if (!got)
				fail_msg("%s: not found", cases[i].json);
			assert_string_equal(out, cases[i].want);
		}
	}
}

static void test_bodies(void **state)
{
	pgo_event_t ev = {.id = 42,
			  .topic = "orders",
			  .key = "k1",
			  .type = "order.created",
			  .payload = "{\"n\": 1}",
			  .headers = "{\"traceparent\": \"00-t-s-01\"}",
			  .created_at = "2026-12-01T12:00:00.000000Z"};
	static const struct {
		pgo_http_body_t fmt;
		const char *want;
	} cases[] = {
		{PGO_HTTP_BODY_PAYLOAD, "{\"n\": 1}"},
		{PGO_HTTP_BODY_CLOUDEVENTS,
		 "{\"specversion\":\"1.0\",\"id\":\"42\",\"source\":"
		 "\"/pgoutbox/outbox\",\"type\":\"order.created\","
		 "\"subject\":\"k1\",\"time\":\"2026-12-01T12:00:00.000000Z\","
		 "\"topic\":\"orders\",\"traceparent\":\"00-t-s-01\","
		 "\"datacontenttype\":\"application/json\",\"data\":{\"n\": "
		 "1}}"},
	};
	pgo_buf_t b;
	char line[1024];
	size_t n;

	(void)state;
	pgo_buf_init(&b);
	for (size_t i = 0; i < N(cases); i++) {
		pgo_buf_reset(&b);
		pgo_http_body_event(&b, cases[i].fmt, &ev, "outbox");
		assert_string_equal(b.data, cases[i].want);
	}
	/* event: the stdout sink's line without its newline. */
	n = pgo_event_ndjson(&ev, line, sizeof(line));
	assert_true(n > 1 && line[n - 1] == '\n');
	line[n - 1] = '\0';
	pgo_buf_reset(&b);
	pgo_http_body_event(&b, PGO_HTTP_BODY_EVENT, &ev, "outbox");
	assert_string_equal(b.data, line);
	pgo_buf_free(&b);
	assert_string_equal(pgo_http_content_type(PGO_HTTP_BODY_EVENT, false),
			    "application/json");
	assert_string_equal(
		pgo_http_content_type(PGO_HTTP_BODY_CLOUDEVENTS, true),
		"application/cloudevents-batch+json");
}

static void test_templates(void **state)
{
	static const char *const names[] = {"topic", "type", "key", NULL};
	static const struct {
		const char *tmpl, *topic, *type, *key, *want;
	} cases[] = {
		{"http://h/{topic}", "orders", "t", "k", "http://h/orders"},
		{"http://h/{topic}/{type}?k={key}", "a b", "x/y",
		 "é&=", "http://h/a%20b/x%2Fy?k=%C3%A9%26%3D"},
		{"http://h/{key}", "t", "t", NULL, "http://h/"},
		{"http://h/x{y", "t", "t", "k", NULL}, /* refused */
		{"http://h/{queue}", "t", "t", "k", NULL},
		{"", "t", "t", "k", NULL},
	};
	pgo_buf_t b;

	(void)state;
	pgo_buf_init(&b);
	for (size_t i = 0; i < N(cases); i++) {
		const char *values[] = {cases[i].topic, cases[i].type,
					cases[i].key};
		pgo_error_t err;
		int rc = pgo_template_check_names("sink.http_url",
						  cases[i].tmpl, names, &err);

		if (!cases[i].want) {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			if (*cases[i].tmpl)
				assert_non_null(strstr(
					err.msg, "(use {topic}, {type} and "
						 "{key})"));
			continue;
		}
		assert_int_equal(rc, PGO_OK);
		assert_string_equal(pgo_template_expand_names(&b, cases[i].tmpl,
							      names, values,
							      true),
				    cases[i].want);
	}
	pgo_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_verdict),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_secrets),
		cmocka_unit_test(test_signature),
		cmocka_unit_test(test_json_header),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_templates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
