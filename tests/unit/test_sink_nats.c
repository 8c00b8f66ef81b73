/*
 * test_sink_nats.c — the nats sink's pieces that need no server, table
 * driven: the verdict of each publish outcome, the message of an event
 * (subject, data, headers, CloudEvents), the URL as `config show` and the
 * logs print it, the public key of an NKey seed, and the configuration
 * checks.  tests/integration/t_nats*.sh run it against nats-server.
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

#include "sinks/nats/nats.h"
#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_verdicts(void **state)
{
	static const struct {
		natsStatus st;
		int err_code;
		const char *text;
		pgo_ack_t ack;
		const char *msg; /* substring, or NULL */
	} cases[] = {
		{NATS_OK, 0, NULL, PGO_ACK_OK, NULL},
		{NATS_NO_RESPONDERS, 0, NULL, PGO_ACK_RETRY,
		 "no JetStream stream is bound to subject \"orders\""},
		{NATS_TIMEOUT, 0, NULL, PGO_ACK_UNAVAILABLE, "no PubAck"},
		{NATS_ERR, 10077, "maximum messages exceeded", PGO_ACK_RETRY,
		 "the stream refused subject \"orders\": maximum messages "
		 "exceeded (err_code 10077)"},
		{NATS_ERR, 10054, "message size exceeds maximum allowed",
		 PGO_ACK_DEAD, "message size exceeds maximum allowed"},
		{NATS_ERR, 10060, "expected stream does not match",
		 PGO_ACK_RETRY, "expected stream"},
		{NATS_MAX_PAYLOAD, 0, "Payload 2000000 greater than maximum",
		 PGO_ACK_DEAD, "greater than maximum"},
		{NATS_INVALID_SUBJECT, 0, NULL, PGO_ACK_DEAD, "orders"},
		{NATS_CONNECTION_DISCONNECTED, 0, NULL, PGO_ACK_UNAVAILABLE,
		 "cannot publish"},
		{NATS_CONNECTION_CLOSED, 0, NULL, PGO_ACK_UNAVAILABLE, NULL},
		{NATS_INSUFFICIENT_BUFFER, 0, NULL, PGO_ACK_UNAVAILABLE, NULL},
		{NATS_NOT_YET_CONNECTED, 0, NULL, PGO_ACK_UNAVAILABLE, NULL},
		{NATS_IO_ERROR, 0, NULL, PGO_ACK_UNAVAILABLE, NULL},
		{NATS_NO_MEMORY, 0, NULL, PGO_ACK_RETRY, NULL},
		{NATS_ERR, 0, "weird", PGO_ACK_RETRY, "weird"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char msg[512];
		pgo_ack_t ack = pgo_nats_verdict(cases[i].st, cases[i].err_code,
						 cases[i].text, "orders", msg,
						 sizeof(msg));

		if (ack != cases[i].ack ||
		    (cases[i].msg && !strstr(msg, cases[i].msg))) {
			print_error("case %zu (%s): ack %d, msg \"%s\"\n", i,
				    natsStatus_GetText(cases[i].st), ack, msg);
			fail();
		}
	}
}

/* The value of header k of m, or NULL. */
static const char *hdr(natsMsg *m, const char *k)
{
	const char *v = NULL;

	return natsMsgHeader_Get(m, k, &v) == NATS_OK ? v : NULL;
}

static void test_message(void **state)
{
	static const struct {
		const char *tmpl;
		bool ce;
		pgo_event_t ev;
		const char *subject; /* NULL: an error containing error */
		const char *error;
		/* header, value (NULL: absent) pairs */
		const char *h[16][2];
	} cases[] = {
		{"{topic}",
		 false,
		 {.id = 42,
		  .topic = "orders",
		  .key = "k1",
		  .type = "order.created",
		  .payload = "{\"a\": 1}",
		  .headers = "{\"traceparent\": \"00-abc-01\", \"n\": 5, "
			     "\"o\": {\"x\": [1, 2]}}",
		  .created_at = "2026-12-01T10:00:00.5Z"},
		 "orders",
		 NULL,
		 {{"Pgoutbox-Type", "order.created"},
		  {"Pgoutbox-Key", "k1"},
		  {"Pgoutbox-Created-At", "2026-12-01T10:00:00.5Z"},
		  {"traceparent", "00-abc-01"},
		  {"n", "5"},
		  {"o", "{\"x\":[1,2]}"},
		  {"ce-id", NULL}}},
		{"app.{queue}.{topic}",
		 true,
		 {.id = 7,
		  .topic = "users",
		  .key = NULL,
		  .type = "user.seen",
		  .payload = "{}",
		  .headers = "{\"Nats-Expected-Stream\": \"x\", \"bad name\": "
			     "\"y\", \"multi\": \"a\\nb\"}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 "app.outbox.users",
		 NULL,
		 {{"Pgoutbox-Key", NULL},
		  {"Nats-Expected-Stream", NULL},
		  {"bad name", NULL},
		  {"multi", "a b"},
		  {"ce-specversion", "1.0"},
		  {"ce-id", "7"},
		  {"ce-source", "/users"},
		  {"ce-type", "user.seen"},
		  {"ce-subject", NULL},
		  {"ce-time", "2026-12-01T10:00:00Z"},
		  {"content-type", "application/json"}}},
		{"{topic}",
		 true,
		 {.id = 8,
		  .topic = "t",
		  .key = "k",
		  .type = "x",
		  .payload = "[1]",
		  .headers = "{}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 "t",
		 NULL,
		 {{"ce-subject", "k"}}},
		{"{topic}",
		 false,
		 {.id = 9,
		  .topic = "t",
		  .type = "x",
		  .payload = "{}",
		  .headers = "[1]",
		  .created_at = "2026-12-01T10:00:00Z"},
		 NULL,
		 "not a JSON object",
		 {{NULL, NULL}}},
		{"{topic}",
		 false,
		 {.id = 10,
		  .topic = "",
		  .type = "x",
		  .payload = "{}",
		  .headers = "{}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 NULL,
		 "empty",
		 {{NULL, NULL}}},
		{"{topic}",
		 false,
		 {.id = 11,
		  .topic = "my topic",
		  .type = "x",
		  .payload = "{}",
		  .headers = "{}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 NULL,
		 "whitespace",
		 {{NULL, NULL}}},
		{"a.{topic}",
		 false,
		 {.id = 12,
		  .topic = "b..c",
		  .type = "x",
		  .payload = "{}",
		  .headers = "{}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 NULL,
		 "empty token",
		 {{NULL, NULL}}},
		{"{topic}.x",
		 false,
		 {.id = 13,
		  .topic = "*",
		  .type = "x",
		  .payload = "{}",
		  .headers = "{}",
		  .created_at = "2026-12-01T10:00:00Z"},
		 NULL,
		 "wildcard",
		 {{NULL, NULL}}},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_nats_format_t f = {.subject = cases[i].tmpl,
				       .queue = "outbox",
				       .cloudevents = cases[i].ce};
		pgo_buf_t subj;
		natsMsg *m = NULL;
		char why[512] = "";
		int rc;

		pgo_buf_init(&subj);
		rc = pgo_nats_message(&f, &cases[i].ev, &subj, &m, why,
				      sizeof(why));
		if (!cases[i].subject) {
			assert_int_not_equal(rc, PGO_OK);
			assert_null(m);
			if (!strstr(why, cases[i].error)) {
				print_error("case %zu: \"%s\"\n", i, why);
				fail();
			}
			pgo_buf_free(&subj);
			continue;
		}
		assert_int_equal(rc, PGO_OK);
		assert_string_equal(natsMsg_GetSubject(m), cases[i].subject);
		assert_int_equal(natsMsg_GetDataLength(m),
				 (int)strlen(cases[i].ev.payload));
		assert_memory_equal(natsMsg_GetData(m), cases[i].ev.payload,
				    strlen(cases[i].ev.payload));
		for (size_t k = 0; k < 16 && cases[i].h[k][0]; k++) {
			const char *want = cases[i].h[k][1];
			const char *got = hdr(m, cases[i].h[k][0]);

			if ((!want) != (!got) ||
			    (want && strcmp(want, got) != 0)) {
				print_error("case %zu: header %s = \"%s\", "
					    "want \"%s\"\n",
					    i, cases[i].h[k][0],
					    got ? got : "(absent)",
					    want ? want : "(absent)");
				fail();
			}
		}
		natsMsg_Destroy(m);
		pgo_buf_free(&subj);
	}
}

static void test_urls(void **state)
{
	static const struct {
		const char *url, *masked, *where;
	} cases[] = {
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222",
		 "127.0.0.1:4222"},
		{"nats://relay:s3cr3t@h:4222", "nats://relay:***@h:4222",
		 "h:4222"},
		{"nats://tok3n@h", "nats://***@h", "h"},
		{"tls://a:p@h1:1,nats://tok@h2:2",
		 "tls://a:***@h1:1,nats://***@h2:2", "h1:1,h2:2"},
		{"redis://u:p@h", NULL, NULL},
		{"h:4222", NULL, "h:4222"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_buf_t b;
		char where[256];
		bool ok;

		pgo_buf_init(&b);
		pgo_buf_puts(&b, "");
		ok = pgo_nats_url_mask(cases[i].url, &b);
		assert_int_equal(ok, cases[i].masked != NULL);
		if (ok)
			assert_string_equal(b.data, cases[i].masked);
		if (cases[i].where) {
			pgo_nats_url_describe(cases[i].url, where,
					      sizeof(where));
			assert_string_equal(where, cases[i].where);
		}
		pgo_buf_free(&b);
	}
}

static void test_nkey(void **state)
{
	/* The example pair of the NATS documentation (nk -gen user). */
	static const struct {
		const char *seed, *pub, *error;
	} cases[] = {
		{"SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY",
		 "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4",
		 NULL},
		{"SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3XX",
		 NULL, "checksum"},
		{"SUACSS", NULL, "not a user NKey seed"},
		{"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4",
		 NULL, "not a user NKey seed"},
		{"SUAC$SL3", NULL, "not an NKey seed"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char pub[64];
		pgo_error_t err;
		int rc;

		pgo_error_clear(&err);
		rc = pgo_nats_nkey_public(cases[i].seed, pub, sizeof(pub),
					  &err);
		if (cases[i].pub) {
			assert_int_equal(rc, PGO_OK);
			assert_string_equal(pub, cases[i].pub);
		} else {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			if (!strstr(err.msg, cases[i].error)) {
				print_error("case %zu: \"%s\"\n", i, err.msg);
				fail();
			}
		}
	}
}

/* The sink refuses a bad configuration when it is made, naming the key. */
static void test_configure(void **state)
{
	static const struct {
		const char *key, *value, *error; /* error NULL: accepted */
	} cases[] = {
		{"sink.nats_subject", "{topic}.x", NULL},
		{"sink.nats_subject", "{type}", "unknown placeholder"},
		{"sink.nats_subject", "", "sink.nats_subject is empty"},
		{"sink.nats_url", ", ,", "sink.nats_url is empty"},
		{"sink.nats_creds", "/nonexistent/x.creds", "sink.nats_creds"},
		{"sink.nats_nkey", "/nonexistent/seed", "sink.nats_nkey"},
		{"sink.nats_tls_cert", "/etc/hostname", "go together"},
		{"sink.nats_format", "cloudevents", NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_error_t err;
		pgo_conf_t *conf = pgo_conf_new();
		pgo_sink_t *sink;

		assert_non_null(conf);
		assert_int_equal(pgo_conf_set(conf, cases[i].key,
					      cases[i].value, PGO_CONF_FLAG,
					      "t"),
				 PGO_OK);
		sink = pgo_sink_new("nats", conf, &err);
		if (!cases[i].error) {
			if (!sink)
				print_error("case %zu: %s\n", i, err.msg);
			assert_non_null(sink);
		} else {
			assert_null(sink);
			if (!strstr(err.msg, cases[i].error)) {
				print_error("case %zu: \"%s\"\n", i, err.msg);
				fail();
			}
		}
		pgo_sink_destroy(sink);
		pgo_conf_destroy(conf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_message),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_nkey),
		cmocka_unit_test(test_configure),
	};

	int rc;

	/* Messages are freed through cnats' garbage collector. */
	if (nats_Open(-1) != NATS_OK)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	nats_CloseAndWait(0);
	return rc;
}
