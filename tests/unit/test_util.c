/*
 * test_util.c — table-driven tests of the small pure pieces: retry
 * backoff, identifier checks, the JSON and array escapers, NDJSON lines,
 * durations, the one rule for a retriable PostgreSQL error, loopback
 * Host headers and addresses, and what the constructors report when they
 * fail.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/backoff.h"
#include "base/net.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

static void test_backoff(void **state)
{
	static const struct {
		int attempt;
		int64_t base, max;
		double rnd;
		int64_t want;
	} cases[] = {
		/* equal jitter: half fixed, half random */
		{1, 1000, 300000, 0.0, 500},
		{1, 1000, 300000, 0.999999, 999},
		{2, 1000, 300000, 0.0, 1000},
		{3, 1000, 300000, 0.5, 3000},
		{10, 1000, 300000, 0.0, 150000}, /* 512 s capped at 300 s */
		{40, 1000, 300000, 0.0, 150000}, /* no overflow */
		{0, 1000, 300000, 0.0, 500},	 /* treated as 1 */
		{5, 0, 300000, 0.7, 0},		 /* no delay configured */
		{3, 250, 1000, 1.0 - 1e-9, 999}, /* 1000 capped, top end */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t got = pgo_backoff_ms(cases[i].attempt, cases[i].base,
					     cases[i].max, cases[i].rnd);

		if (got != cases[i].want)
			fail_msg("case %zu: attempt %d -> %lld, want %lld", i,
				 cases[i].attempt, (long long)got,
				 (long long)cases[i].want);
	}
}

static void test_ident(void **state)
{
	static const struct {
		const char *name;
		int ok;
		const char *msg; /* substring of the error */
	} cases[] = {
		{"outbox", 1, NULL},
		{"_emails2", 1, NULL},
		{"a", 1, NULL},
		{"", 0, "must not be empty"},
		{"Outbox", 0, "must start with a lower-case letter"},
		{"9lives", 0, "must start with a lower-case letter"},
		{"out-box", 0, "'-' at position 4"},
		{"x; DROP TABLE y", 0, "';' at position 2"},
		{"a\"b", 0, "'\"' at position 2"},
		{"pg_catalog", 0, "must not start with pg_"},
		{"abcdefghijabcdefghijabcdefghijabcdefghijabcdefgh", 1, NULL},
		{"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghi", 0,
		 "49 characters long; the limit is 48"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_error_t err;
		int rc = pgo_ident_check(cases[i].name, &err);

		if (cases[i].ok) {
			assert_int_equal(rc, PGO_OK);
		} else {
			assert_int_equal(rc, PGO_ERR_INVALID);
			if (!strstr(err.msg, cases[i].msg))
				fail_msg("case %zu: \"%s\" not in \"%s\"", i,
					 cases[i].msg, err.msg);
		}
	}
	assert_int_equal(pgo_ident_check(NULL, NULL), PGO_ERR_INVALID);
}

static void test_json_str(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"plain", "\"plain\""},
		{"", "\"\""},
		{"a\"b\\c", "\"a\\\"b\\\\c\""},
		{"line\nnext\ttab\r", "\"line\\nnext\\ttab\\r\""},
		{"\x01\x1f", "\"\\u0001\\u001f\""},
		{"caf\xc3\xa9", "\"caf\xc3\xa9\""}, /* UTF-8 passes through */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_buf_t b;

		pgo_buf_init(&b);
		pgo_buf_json_str(&b, cases[i].in);
		assert_string_equal(b.data, cases[i].want);
		pgo_buf_free(&b);
	}
}

static void test_array_elem(void **state)
{
	pgo_buf_t b;

	(void)state;
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "{");
	pgo_buf_array_elem(&b, "x");
	pgo_buf_puts(&b, ",");
	pgo_buf_array_elem(&b, NULL);
	pgo_buf_puts(&b, ",");
	pgo_buf_array_elem(&b, "{\"a\": \"q\\\"\"}");
	pgo_buf_puts(&b, "}");
	assert_string_equal(b.data,
			    "{\"x\",NULL,\"{\\\"a\\\": \\\"q\\\\\\\"\\\"}\"}");
	pgo_buf_free(&b);
}

static void test_ndjson(void **state)
{
	pgo_event_t ev = {
		.id = 42,
		.topic = "chat\"room",
		.key = NULL,
		.type = "message.sent",
		.payload = "{\"text\": \"hi\"}",
		.headers = "{}",
		.created_at = "2026-11-30T16:53:33.123456Z",
		.attempts = 2,
	};
	const char *want =
		"{\"id\":42,\"topic\":\"chat\\\"room\",\"key\":null,"
		"\"type\":\"message.sent\",\"payload\":{\"text\": \"hi\"},"
		"\"headers\":{},\"created_at\":\"2026-11-30T16:53:33.123456Z\","
		"\"attempts\":2}\n";
	char buf[512], small[16];
	size_t n;

	(void)state;
	n = pgo_event_ndjson(&ev, buf, sizeof(buf));
	assert_int_equal(n, strlen(want));
	assert_string_equal(buf, want);
	/* Too small: returns the size needed, still NUL-terminated. */
	n = pgo_event_ndjson(&ev, small, sizeof(small));
	assert_int_equal(n, strlen(want));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	ev.key = "user-7";
	n = pgo_event_ndjson(&ev, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"key\":\"user-7\""));
}

static void test_duration(void **state)
{
	static const struct {
		const char *in;
		int ok;
		int64_t ms;
	} cases[] = {
		{"0", 1, 0},	   {"250ms", 1, 250},  {"30s", 1, 30000},
		{"5m", 1, 300000}, {"1h", 1, 3600000}, {"30", 0, 0},
		{"s", 0, 0},	   {"-1s", 0, 0},      {"10x", 0, 0},
		{"", 0, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t ms = -1;
		const char *why = NULL;
		int rc = pgo_parse_duration(cases[i].in, &ms, &why);

		if (cases[i].ok) {
			assert_int_equal(rc, PGO_OK);
			assert_int_equal(ms, cases[i].ms);
		} else {
			if (rc == PGO_OK)
				fail_msg("\"%s\" accepted", cases[i].in);
			assert_non_null(why);
		}
	}
}

/* The one retriable rule, by SQLSTATE class (util.c). */
static void test_retriable(void **state)
{
	static const struct {
		const char *sqlstate;
		bool retriable;
	} cases[] = {
		{"08000", true},  /* connection_exception */
		{"08006", true},  /* connection_failure */
		{"08P01", true},  /* protocol_violation */
		{"40001", true},  /* serialization_failure */
		{"40P01", true},  /* deadlock_detected */
		{"40003", true},  /* statement_completion_unknown */
		{"53100", true},  /* disk_full */
		{"53200", true},  /* out_of_memory */
		{"53300", true},  /* too_many_connections */
		{"57014", true},  /* query_canceled: statement_timeout */
		{"57P01", true},  /* admin_shutdown */
		{"57P03", true},  /* cannot_connect_now */
		{"58000", true},  /* system_error */
		{"58030", true},  /* io_error */
		{"55P03", true},  /* lock_not_available: lock_timeout */
		{"55000", false}, /* object_not_in_prerequisite_state */
		{"55006", false}, /* object_in_use */
		{"22P02", false}, /* invalid_text_representation */
		{"22001", false}, /* string_data_right_truncation */
		{"23505", false}, /* unique_violation */
		{"23503", false}, /* foreign_key_violation */
		{"42P01", false}, /* undefined_table */
		{"42883", false}, /* undefined_function */
		{"42501", false}, /* insufficient_privilege */
		{"42601", false}, /* syntax_error */
		{"3F000", false}, /* invalid_schema_name */
		{"25P02", false}, /* in_failed_sql_transaction */
		{"28P01", false}, /* invalid_password */
		{"0A000", false}, /* feature_not_supported */
		{"P0001", false}, /* raise_exception */
		{"XX000", false}, /* internal_error */
		{"4", false},	  /* too short to be a class: not 40 */
		{"", true},	  /* no SQLSTATE: libpq's own error */
		{NULL, true},
	};
	PGconn *bad;
	PGresult *res;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (pgo_sqlstate_retriable(cases[i].sqlstate) !=
		    cases[i].retriable)
			fail_msg("SQLSTATE %s: retriable should be %d",
				 cases[i].sqlstate ? cases[i].sqlstate : "NULL",
				 cases[i].retriable);
	/* No connection, a lost one or no result: the server went away (or
	 * libpq ran out of memory).  The SQLSTATE path of pgo_pq_retriable
	 * needs a live server: the integration tests take it. */
	assert_true(pgo_pq_retriable(NULL, NULL));
	bad = PQconnectdb("host=/nonexistent-pgoutbox-test port=1 "
			  "connect_timeout=1");
	assert_non_null(bad);
	assert_int_equal(PQstatus(bad), CONNECTION_BAD);
	res = PQmakeEmptyPGresult(bad, PGRES_FATAL_ERROR);
	assert_true(pgo_pq_retriable(bad, NULL));
	assert_true(pgo_pq_retriable(bad, res));
	PQclear(res);
	PQfinish(bad);
}

/* The constructors say why they failed; on success *err is cleared. */
static void test_constructors(void **state)
{
	pgo_conf_t *conf = pgo_conf_new();
	PGconn *conn = PQconnectdb("host=/nonexistent-pgoutbox-test port=1");
	pgo_worker_opts_t wo;
	pgo_consumer_opts_t co;
	pgo_scheduler_opts_t so;
	pgo_error_t err;
	void *h;

	(void)state;
	assert_non_null(conf);
	assert_non_null(conn); /* a handle is all a constructor needs */

	/* producer and enqueuer */
	assert_null(pgo_producer_new(NULL, "outbox", &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "no connection"));
	assert_null(pgo_producer_new(conn, "Bad-Name", &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "Bad-Name"));
	assert_null(pgo_producer_new(conn, "Bad-Name", NULL));
	h = pgo_producer_new(conn, NULL, &err);
	assert_non_null(h);
	assert_int_equal(err.code, PGO_OK);
	pgo_producer_destroy(h);
	assert_null(pgo_enqueuer_new(NULL, "jobs", &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_null(pgo_enqueuer_new(conn, "", &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "empty"));
	h = pgo_enqueuer_new(conn, "jobs", &err);
	assert_non_null(h);
	assert_int_equal(err.code, PGO_OK);
	pgo_enqueuer_destroy(h);

	/* worker */
	pgo_worker_opts_init(&wo, sizeof(wo));
	wo.queue = "jobs";
	assert_null(pgo_worker_new(NULL, &wo, &err));
	assert_non_null(strstr(err.msg, "configuration"));
	assert_null(pgo_worker_new(conf, NULL, &err));
	assert_non_null(strstr(err.msg, "options"));
	assert_null(pgo_worker_new(conf, &wo, &err)); /* no handler */
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "exactly one handler"));
	wo.exec_command = "true";
	wo.concurrency = 0;
	assert_null(pgo_worker_new(conf, &wo, &err));
	assert_non_null(strstr(err.msg, "concurrency"));
	assert_null(pgo_worker_new(conf, &wo, NULL)); /* err may be NULL */
	wo.concurrency = 1;
	h = pgo_worker_new(conf, &wo, &err);
	assert_non_null(h);
	assert_int_equal(err.code, PGO_OK);
	pgo_worker_destroy(h);

	/* consumer */
	assert_null(pgo_consumer_new(NULL, &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	pgo_consumer_opts_init(&co, sizeof(co));
	co.stream = "s";
	co.group = "g";
	assert_null(pgo_consumer_new(&co, &err)); /* no handler */
	assert_non_null(strstr(err.msg, "exactly one handler"));
	co.exec_command = "true";
	co.count = 0;
	assert_null(pgo_consumer_new(&co, &err));
	assert_non_null(strstr(err.msg, "count 0"));
	co.count = 100001; /* a reply hiredis would be refused (redis/conn.c) */
	assert_null(pgo_consumer_new(&co, &err));
	assert_non_null(strstr(err.msg, "count 100001 is over the limit"));
	co.count = 100000;
	h = pgo_consumer_new(&co, &err);
	assert_non_null(h);
	pgo_consumer_destroy(h);
	co.count = 10;
	co.redis_url = "redis://h/?x=1";
	assert_null(pgo_consumer_new(&co, &err));
	assert_int_equal(err.code, PGO_ERR_CONFIG);
	co.redis_url = "redis://localhost:6379/0";
	h = pgo_consumer_new(&co, &err);
	assert_non_null(h);
	assert_int_equal(err.code, PGO_OK);
	pgo_consumer_destroy(h);

	/* scheduler */
	pgo_scheduler_opts_init(&so, sizeof(so));
	assert_null(pgo_scheduler_new(NULL, &so, &err));
	assert_non_null(strstr(err.msg, "configuration"));
	so.max_sleep_ms = 1;
	assert_null(pgo_scheduler_new(conf, &so, &err));
	assert_int_equal(err.code, PGO_ERR_INVALID);
	assert_non_null(strstr(err.msg, "max sleep"));
	so.max_sleep_ms = 1000;
	h = pgo_scheduler_new(conf, &so, &err);
	assert_non_null(h);
	assert_int_equal(err.code, PGO_OK);
	pgo_scheduler_destroy(h);

	PQfinish(conn);
	pgo_conf_destroy(conf);
}

/* The Host headers a server on a loopback address answers to (DNS
 * rebinding: a page of another name resolved to 127.0.0.1 is refused). */
static void test_loopback(void **state)
{
	static const struct {
		const char *host;
		bool ok;
	} hosts[] = {
		{"localhost", true},
		{"localhost:9187", true},
		{"LocalHost:9187", true},
		{"127.0.0.1", true},
		{"127.0.0.1:9188", true},
		{"127.1.2.3:80", true},
		{"[::1]", true},
		{"[::1]:9187", true},
		{NULL, false},
		{"", false},
		{"evil.example", false},
		{"evil.example:9187", false},
		{"localhost.evil.example", false},
		{"localhostx:9187", false},
		{"127.0.0.1.evil.example", false},
		{"127.0.0.1evil", false},
		{"127.0.0.256", false},
		{"127.1", false},
		{"128.0.0.1:9187", false},
		{"10.0.0.1", false},
		{"[::1]evil", false},
		{"[::2]:9187", false},
		{"[::ffff:127.0.0.1]", false},
		{"localhost:", false},
		{"localhost:80x", false},
		{"localhost:80:80", false},
	};
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};

	(void)state;
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		if (pgo_host_is_loopback(hosts[i].host) != hosts[i].ok)
			fail_msg("Host \"%s\": expected %s",
				 hosts[i].host ? hosts[i].host : "(null)",
				 hosts[i].ok ? "loopback" : "refused");
	inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
	assert_true(pgo_addr_is_loopback((struct sockaddr *)&in));
	inet_pton(AF_INET, "127.9.9.9", &in.sin_addr);
	assert_true(pgo_addr_is_loopback((struct sockaddr *)&in));
	inet_pton(AF_INET, "0.0.0.0", &in.sin_addr);
	assert_false(pgo_addr_is_loopback((struct sockaddr *)&in));
	inet_pton(AF_INET, "192.168.1.2", &in.sin_addr);
	assert_false(pgo_addr_is_loopback((struct sockaddr *)&in));
	inet_pton(AF_INET6, "::1", &in6.sin6_addr);
	assert_true(pgo_addr_is_loopback((struct sockaddr *)&in6));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
	assert_true(pgo_addr_is_loopback((struct sockaddr *)&in6));
	inet_pton(AF_INET6, "::", &in6.sin6_addr);
	assert_false(pgo_addr_is_loopback((struct sockaddr *)&in6));
	assert_false(pgo_addr_is_loopback(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_ident),
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_array_elem),
		cmocka_unit_test(test_ndjson),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_retriable),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_constructors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
