/*
 * test_redis.c — the Redis pieces without a Redis: redis:// URL parsing
 * (table-driven), and the redis sink hosted the way the relay hosts it (a
 * loop, a sink host, submit, then turns of the loop until done) against a
 * scripted fake server in the same process (fake_redis.h): stream ids, an
 * error for one event, a LOADING phase, a connection closed after some
 * commands, a slow AUTH, a server that never answers, none at all.
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

#include "fake_redis.h"
#include "sinks/redis/conn.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* --- URLs --- */

static void test_url_table(void **state)
{
	static const struct {
		const char *url;
		const char *host, *user, *password;
		int port, db, tls;
		const char *error; /* substring of the message, or NULL */
	} cases[] = {
		{"redis://localhost", "localhost", "", "", 6379, 0, 0, NULL},
		{"redis://", "localhost", "", "", 6379, 0, 0, NULL},
		{"redis://10.0.0.5:7000/3", "10.0.0.5", "", "", 7000, 3, 0,
		 NULL},
		{"redis://:pw@h/1", "h", "", "pw", 6379, 1, 0, NULL},
		{"redis://alice:s%40cr%3At@h:1", "h", "alice", "s@cr:t", 1, 0,
		 0, NULL},
		{"redis://u:p@ss@h", "h", "u", "p@ss", 6379, 0, 0, NULL},
		{"REDIS://H/", "H", "", "", 6379, 0, 0, NULL},
		{"redis://[::1]:6380/2", "::1", "", "", 6380, 2, 0, NULL},
		{"rediss://h", "h", "", "", 6379, 0, 1, NULL},
		{"http://h", NULL, NULL, NULL, 0, 0, 0, "must start with"},
		{"", NULL, NULL, NULL, 0, 0, 0, "empty"},
		{"redis://h:0", NULL, NULL, NULL, 0, 0, 0, "port"},
		{"redis://h:70000", NULL, NULL, NULL, 0, 0, 0, "port"},
		{"redis://h:12x", NULL, NULL, NULL, 0, 0, 0, "port"},
		{"redis://h/db", NULL, NULL, NULL, 0, 0, 0, "database number"},
		{"redis://h/-1", NULL, NULL, NULL, 0, 0, 0, "database number"},
		{"redis://h?timeout=1", NULL, NULL, NULL, 0, 0, 0, "query"},
		{"redis://user@h", NULL, NULL, NULL, 0, 0, 0, "no password"},
		{"redis://u:%zz@h", NULL, NULL, NULL, 0, 0, 0, "percent"},
		{"redis://[::1", NULL, NULL, NULL, 0, 0, 0, "without"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_redis_url_t u;
		pgo_error_t err;
		int rc = pgo_redis_url_parse(cases[i].url, &u, &err);

		if (cases[i].error) {
			if (rc != PGO_ERR_CONFIG ||
			    !strstr(err.msg, cases[i].error))
				fail_msg("%s: rc %d, \"%s\"", cases[i].url, rc,
					 err.msg);
			/* A message never repeats the URL (it may hold a
			 * password). */
			assert_null(strstr(err.msg, "%zz"));
			continue;
		}
		if (rc != PGO_OK)
			fail_msg("%s: %s", cases[i].url, err.msg);
		assert_string_equal(u.host, cases[i].host);
		assert_string_equal(u.user, cases[i].user);
		assert_string_equal(u.password, cases[i].password);
		assert_int_equal(u.port, cases[i].port);
		assert_int_equal(u.db, cases[i].db);
		assert_int_equal(u.tls, cases[i].tls);
	}
}

static void test_url_tls_and_describe(void **state)
{
	pgo_redis_url_t u;
	pgo_error_t err;
	char d[300];

	(void)state;
	assert_int_equal(pgo_redis_url_parse("rediss://:pw@h:1/2", &u, &err),
			 PGO_OK);
	assert_int_equal(pgo_redis_url_supported(&u, &err), PGO_ERR_CONFIG);
	assert_non_null(strstr(err.msg, "TLS"));
	assert_int_equal(
		pgo_redis_url_parse("redis://:secret@[::1]:1/2", &u, &err),
		PGO_OK);
	assert_int_equal(pgo_redis_url_supported(&u, &err), PGO_OK);
	pgo_redis_url_describe(&u, d, sizeof(d));
	assert_string_equal(d, "[::1]:1/2");
}

static int setup(void **state)
{
	(void)state;
	fake_start();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fake_stop();
	return 0;
}

/* A redis sink on the fake (or url), attached to a loop. */
static pgo_sink_t *hosted(const char *url, const char *extra_key,
			  const char *extra_value)
{
	const char *kv[9] = {"sink.redis_stream", "s:{queue}:{topic}",
			     "sink.redis_timeout", "2s"};
	int n = 4;

	if (url) {
		kv[n++] = "sink.redis_url";
		kv[n++] = url;
	}
	if (extra_key) {
		kv[n++] = extra_key;
		kv[n++] = extra_value;
	}
	kv[n] = NULL;
	return drv_sink("redis", kv);
}

/* Two batches at once share the connection; every field goes out. */
static void test_pipelined_publishes(void **state)
{
	pgo_sink_t *s = hosted(NULL, "sink.redis_maxlen", "1000");
	job_t a, b, *jobs[] = {&a, &b};

	(void)state;
	job_init(&a, 1, 5, "orders");
	job_init(&b, 6, 4, "users");
	job_submit(s, &a);
	job_submit(s, &b);
	drive(jobs, 2, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 5);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 4);
	assert_int_equal(F.connections, 1);
	assert_int_equal(F.ncmds, 9);
	assert_string_equal(F.cmds[0],
			    "XADD s:outbox:orders MAXLEN ~ 1000 * id 1 topic "
			    "orders key k type t payload {\"a\": 1} headers {} "
			    "created_at 2026-01-01T00:00:00Z");
	assert_string_equal(F.cmds[6],
			    "XADD s:outbox:users MAXLEN ~ 1000 * id 7 topic "
			    "users key  type t payload {\"a\": 1} headers {} "
			    "created_at 2026-01-01T00:00:00Z");
	assert_int_equal(H.downs, 0);
	drv_destroy(s);
}

/* An error reply fails its event only, as retriable. */
static void test_error_reply(void **state)
{
	pgo_sink_t *s = hosted(NULL, NULL, NULL);
	job_t a, *jobs[] = {&a};

	(void)state;
	F.fail_id = "3";
	job_init(&a, 1, 5, "t");
	job_submit(s, &a);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 4);
	assert_int_equal(a.acks[2], PGO_ACK_RETRY);
	assert_non_null(strstr(a.errors[2], "boom"));
	drv_destroy(s);
}

/* A reply announcing an array of a billion elements is a protocol error
 * (hiredis would allocate 8 GB for its pointers): the connection drops
 * with that reason, the events after it are unavailable, not lost. */
static void test_huge_array_refused(void **state)
{
	pgo_sink_t *s = hosted(NULL, NULL, NULL);
	job_t a, *jobs[] = {&a};

	(void)state;
	F.fail_id = "3";
	F.fail_raw = "*1111111111\r\n";
	job_init(&a, 1, 5, "t");
	job_submit(s, &a);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 2);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 3);
	assert_non_null(strstr(a.errors[2], "an array of 1111111111 elements"));
	assert_int_equal(H.downs, 1);
	drv_destroy(s);
}

/* Lost mid-batch, no waiting: the rest fails now (and Redis is reported
 * down); the pipeline reconnects and the next batch goes through. */
static void test_lost_fails_rest(void **state)
{
	pgo_sink_t *s = hosted(NULL, NULL, NULL);
	job_t a, b, *ja[] = {&a}, *jb[] = {&b};

	(void)state;
	F.close_after = 3;
	job_init(&a, 1, 6, "t");
	job_submit(s, &a);
	drive(ja, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 3);
	assert_int_equal(H.downs, 1);
	usleep(250 * 1000); /* past the reconnect backoff */
	job_init(&b, 7, 3, "t");
	job_submit(s, &b);
	drive(jb, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 3);
	assert_int_equal(F.connections, 2);
	assert_int_equal(H.ups, 1);
	drv_destroy(s);
}

/* Lost mid-batch with redis_wait: the unacked events go again on the next
 * connection and the whole batch is acked. */
static void test_lost_resends_with_wait(void **state)
{
	pgo_sink_t *s = hosted(NULL, "sink.redis_wait", "5s");
	job_t a, b, *jobs[] = {&a, &b};

	(void)state;
	F.close_after = 4;
	job_init(&a, 1, 3, "t");
	job_init(&b, 4, 3, "t");
	job_submit(s, &a);
	job_submit(s, &b);
	drive(jobs, 2, 5000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 3);
	assert_int_equal(F.connections, 2);
	/* 4 acked on the first connection (or in doubt), 2 sent again. */
	assert_int_equal(F.adds, 6);
	assert_non_null(strstr(F.cmds[4], " id 5 "));
	drv_destroy(s);
}

/* Redis not there: the batch fails at once, nothing waits, and the host
 * hears that Redis is down. */
static void test_down_fails_at_once(void **state)
{
	pgo_sink_t *s;
	job_t a, *jobs[] = {&a};
	int64_t t0;

	(void)state;
	fake_stop(); /* nothing listens on the port any more */
	s = hosted(NULL, NULL, NULL);
	job_init(&a, 1, 4, "t");
	t0 = pgo_now_ms();
	job_submit(s, &a);
	drive(jobs, 1, 1000);
	assert_true(pgo_now_ms() - t0 < 500);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 4);
	assert_non_null(strstr(a.errors[0], "refused"));
	assert_int_equal(H.downs, 1);
	assert_non_null(strstr(H.reason, "refused"));
	drv_destroy(s);
	fake_start();
}

/* Down, then back: the pipeline keeps reconnecting on its own timer, with
 * no batch to send, and tells the host once Redis is up again. */
static void test_health_down_then_up(void **state)
{
	pgo_sink_t *s;
	job_t a, b, *ja[] = {&a}, *jb[] = {&b};
	int port = F.port;

	(void)state;
	fake_stop();
	s = hosted(NULL, NULL, NULL);
	job_init(&a, 1, 2, "t");
	job_submit(s, &a);
	drive(ja, 1, 1000);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 2);
	assert_int_equal(H.downs, 1);
	drive_for(300); /* reconnects fail meanwhile: still one down */
	assert_int_equal(H.downs, 1);
	assert_int_equal(H.ups, 0);
	fake_start_on(port);
	drive_until(&H.ups, 1, 3000);
	assert_int_equal(F.connections, 1);
	assert_int_equal(F.ncmds, 0);
	job_init(&b, 3, 2, "t");
	job_submit(s, &b);
	drive(jb, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 2);
	assert_int_equal(F.connections, 1);
	drv_destroy(s);
}

/* An idle connection closed by the server (a restart) is watched too:
 * the pipeline reconnects at once, and Redis was never down. */
static void test_idle_close_reconnects(void **state)
{
	pgo_sink_t *s = hosted(NULL, NULL, NULL);
	job_t a, *jobs[] = {&a};

	(void)state;
	job_init(&a, 1, 2, "t");
	job_submit(s, &a);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 2);
	fake_close_client();
	drive_until(&F.connections, 2, 3000);
	assert_int_equal(H.downs, 0);
	drv_destroy(s);
}

/* No reply within sink.redis_timeout: the connection is in doubt, the
 * batch fails as unavailable. */
static void test_reply_timeout(void **state)
{
	pgo_sink_t *s = hosted(NULL, "sink.redis_timeout", "200ms");
	job_t a, *jobs[] = {&a};
	int64_t t0 = pgo_now_ms();

	(void)state;
	F.silent = true;
	job_init(&a, 1, 3, "t");
	job_submit(s, &a);
	drive(jobs, 1, 2000);
	assert_true(pgo_now_ms() - t0 >= 190);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 3);
	assert_non_null(strstr(a.errors[0], "no reply within 200 ms"));
	assert_int_equal(F.adds, 3);
	drv_destroy(s);
}

/* A cancelled batch's replies are read and dropped; the other one
 * completes; the cancelled one is never done. */
static void test_cancel_in_flight(void **state)
{
	pgo_sink_t *s = hosted(NULL, NULL, NULL);
	job_t a, b, *jobs[] = {&b};

	(void)state;
	job_init(&a, 1, 4, "t");
	job_init(&b, 5, 4, "t");
	job_submit(s, &a);
	job_submit(s, &b);
	assert_true(!a.dones && !b.dones);
	pgo_sink_cancel(s, &a.b);
	assert_null(a.b.sink_state);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 4);
	assert_int_equal(F.adds, 8);
	assert_int_equal(a.dones, 0);
	drv_destroy(s);
}

/* LOADING means "not now": with redis_wait the batch is sent again. */
static void test_loading_is_an_outage(void **state)
{
	pgo_sink_t *s = hosted(NULL, "sink.redis_wait", "5s");
	job_t a, *jobs[] = {&a};

	(void)state;
	F.loading = 1;
	job_init(&a, 1, 3, "t");
	job_submit(s, &a);
	drive(jobs, 1, 5000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_true(F.connections >= 2);
	drv_destroy(s);
}

/* Draining: a batch waiting for Redis (redis_wait) ends by the drain
 * deadline, with verdicts, instead of waiting on. */
static void test_drain_ends_the_wait(void **state)
{
	pgo_sink_t *s;
	job_t a, *jobs[] = {&a};
	int64_t t0;

	(void)state;
	fake_stop();
	s = hosted(NULL, "sink.redis_wait", "5s");
	job_init(&a, 1, 2, "t");
	job_submit(s, &a);
	drive_for(100);
	assert_int_equal(a.dones, 0);
	t0 = pgo_now_ms();
	pgo_sink_drain(s, t0 + 200);
	drive(jobs, 1, 2000);
	assert_true(pgo_now_ms() - t0 < 1000);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 2);
	drv_destroy(s);
	fake_start();
}

/* AUTH and SELECT first; no XADD reaches the server before AUTH is
 * answered (it could run as the wrong user or in database 0). */
static void test_handshake_first(void **state)
{
	char url[128];
	pgo_sink_t *s;
	job_t a, *jobs[] = {&a};

	(void)state;
	F.hold_auth_ms = 150;
	snprintf(url, sizeof(url), "redis://bob:pw@127.0.0.1:%d/4", F.port);
	s = hosted(url, NULL, NULL);
	job_init(&a, 1, 2, "t");
	job_submit(s, &a);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 2);
	assert_string_equal(F.cmds[0], "AUTH bob pw");
	assert_string_equal(F.cmds[1], "SELECT 4");
	assert_int_equal(F.add_before_auth_reply, 0);
	drv_destroy(s);
}

/* Configuration the sink refuses at start. */
static void test_bad_config(void **state)
{
	static const struct {
		const char *key, *value, *error;
	} cases[] = {
		{"sink.redis_url", "rediss://h", "TLS"},
		{"sink.redis_url", "tcp://h", "must start with"},
		{"sink.redis_stream", "x:{nope}", "unknown placeholder"},
		{"sink.redis_stream", "", "empty"},
		{"sink.redis_wait", "1m", "idle_tx_timeout"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		pgo_error_t err;
		pgo_sink_t *s;

		assert_int_equal(pgo_conf_set(conf, cases[i].key,
					      cases[i].value, PGO_CONF_FLAG,
					      NULL),
				 PGO_OK);
		s = pgo_sink_new("redis", conf, &err);
		if (s || !strstr(err.msg, cases[i].error))
			fail_msg("%s = %s: %s", cases[i].key, cases[i].value,
				 s ? "accepted" : err.msg);
		pgo_conf_destroy(conf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_table),
		cmocka_unit_test(test_url_tls_and_describe),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test_setup_teardown(test_pipelined_publishes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_error_reply, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_huge_array_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lost_fails_rest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lost_resends_with_wait,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_down_fails_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_health_down_then_up, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idle_close_reconnects,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reply_timeout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loading_is_an_outage,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_ends_the_wait, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_handshake_first, setup,
						teardown),
	};

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
