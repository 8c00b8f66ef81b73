/*
 * test_sink_amqp.c — the rabbitmq sink without a broker: its configuration
 * (a table of URLs, templates and key combinations and what each gives),
 * and the outage verdicts: against a port nobody listens on, a batch ends
 * UNAVAILABLE (no attempt spent) and the host is told the broker is down.
 * Publishing, confirms, returns and alarms against a real rabbitmq-server
 * are tests/integration/t_rabbitmq_*.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop/loop.h"
#include "base/arena.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* --- configuration --- */

static const struct conf_case {
	const char *name;
	const char *keys[6][2]; /* key, value; NULL ends */
	int want;		/* PGO_OK or the error code */
	const char *msg;	/* a part of the error text */
} conf_cases[] = {
	{"defaults", {{NULL}}, PGO_OK, NULL},
	{"url_with_vhost",
	 {{"sink.amqp_url", "amqp://relay:pw@127.0.0.1:5673/app"}},
	 PGO_OK,
	 NULL},
	{"url_tls",
	 {{"sink.amqp_url", "amqps://relay:pw@broker.example:5671/%2f"},
	  {"sink.amqp_ca", "/etc/ssl/ca.pem"}},
	 PGO_OK,
	 NULL},
	{"url_not_amqp",
	 {{"sink.amqp_url", "http://localhost:5672/"}},
	 PGO_ERR_CONFIG,
	 "not an amqp:// or amqps:// URL"},
	{"url_bad_port",
	 {{"sink.amqp_url", "amqp://u:p@host:port/v"}},
	 PGO_ERR_CONFIG,
	 "cannot read the URL"},
	{"routing_key_queue",
	 {{"sink.amqp_routing_key", "{queue}.{topic}"}},
	 PGO_OK,
	 NULL},
	{"routing_key_unknown",
	 {{"sink.amqp_routing_key", "{type}"}},
	 PGO_ERR_CONFIG,
	 "unknown placeholder"},
	{"routing_key_empty",
	 {{"sink.amqp_routing_key", ""}},
	 PGO_ERR_CONFIG,
	 "sink.amqp_routing_key is empty"},
	{"exchange_too_long",
	 {{"sink.amqp_exchange",
	   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}},
	 PGO_ERR_CONFIG,
	 "longer than AMQP's 255 bytes"},
};

static pgo_conf_t *conf_with(const char *const (*keys)[2])
{
	pgo_conf_t *conf = pgo_conf_new();

	assert_non_null(conf);
	for (size_t i = 0; keys && keys[i][0]; i++)
		assert_int_equal(pgo_conf_set(conf, keys[i][0], keys[i][1],
					      PGO_CONF_FLAG, "test"),
				 PGO_OK);
	return conf;
}

static void test_configure(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(conf_cases); i++) {
		const struct conf_case *c = &conf_cases[i];
		pgo_conf_t *conf = conf_with(c->keys);
		pgo_error_t err = {0};
		pgo_sink_t *s = pgo_sink_new("rabbitmq", conf, &err);

		if (c->want == PGO_OK) {
			if (!s)
				fail_msg("%s: %s", c->name, err.msg);
		} else {
			if (s)
				fail_msg("%s: configured", c->name);
			assert_int_equal(err.code, c->want);
			if (!strstr(err.msg, c->msg))
				fail_msg("%s: \"%s\" lacks \"%s\"", c->name,
					 err.msg, c->msg);
		}
		pgo_sink_destroy(s);
		pgo_conf_destroy(conf);
	}
}

/* Rules between keys, checked by pgo_conf_validate(). */
static const struct conf_case validate_cases[] = {
	{"plain", {{"relay.sink", "rabbitmq"}}, PGO_OK, NULL},
	{"cert_and_key",
	 {{"relay.sink", "rabbitmq"},
	  {"sink.amqp_cert", "c.pem"},
	  {"sink.amqp_key", "k.pem"}},
	 PGO_OK,
	 NULL},
	{"cert_without_key",
	 {{"relay.sink", "rabbitmq"}, {"sink.amqp_cert", "c.pem"}},
	 PGO_ERR_CONFIG,
	 "go together"},
	{"timeout_past_idle_tx",
	 {{"relay.sink", "rabbitmq"},
	  {"sink.amqp_timeout", "2m"},
	  {"database.idle_tx_timeout", "1m"}},
	 PGO_ERR_CONFIG,
	 "must be less than database.idle_tx_timeout"},
};

static void test_validate(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(validate_cases); i++) {
		const struct conf_case *c = &validate_cases[i];
		pgo_conf_t *conf = conf_with(c->keys);
		int rc = pgo_conf_validate(conf);

		if (rc != c->want)
			fail_msg("%s: validate %d (%s)", c->name, rc,
				 pgo_conf_errmsg(conf));
		if (c->msg && !strstr(pgo_conf_errmsg(conf), c->msg))
			fail_msg("%s: \"%s\" lacks \"%s\"", c->name,
				 pgo_conf_errmsg(conf), c->msg);
		pgo_conf_destroy(conf);
	}
}

/* --- an unreachable broker --- */

static struct {
	pgo_loop_t *loop;
	pgo_sink_host_t host;
	int done;
	int down, up;
	char reason[512];
} th;

static void host_done(void *ctx, pgo_batch_t *batch)
{
	(void)ctx;
	(void)batch;
	th.done++;
}

static void host_health(void *ctx, int up, const char *reason)
{
	(void)ctx;
	if (up) {
		th.up++;
	} else {
		th.down++;
		snprintf(th.reason, sizeof(th.reason), "%s", reason);
	}
}

/* A port on 127.0.0.1 that nobody listens on (bound, then closed). */
static int dead_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void test_unreachable_is_unavailable(void **state)
{
	pgo_event_t ev[3];
	pgo_ack_t acks[3] = {0};
	const char *errors[3] = {0};
	pgo_batch_t b = {.events = ev, .n = 3, .acks = acks, .errors = errors};
	char url[128];
	pgo_conf_t *conf;
	pgo_error_t err = {0};
	pgo_sink_t *s;
	int64_t t0 = pgo_now_ms();

	(void)state;
	snprintf(url, sizeof(url), "amqp://u:secretpw@127.0.0.1:%d/%%2f",
		 dead_port());
	conf = conf_with(
		(const char *const[][2]){{"sink.amqp_url", url},
					 {"sink.amqp_connect_timeout", "1s"},
					 {NULL, NULL}});
	s = pgo_sink_new("rabbitmq", conf, &err);
	pgo_conf_destroy(conf);
	if (!s)
		fail_msg("%s", err.msg);
	for (int i = 0; i < 3; i++)
		ev[i] = (pgo_event_t){.id = i + 1,
				      .topic = "orders",
				      .type = "t",
				      .payload = "{}",
				      .headers = "{}",
				      .created_at = "2024-01-02T03:04:05Z"};
	b.arena = pgo_arena_new(0);
	memset(&th, 0, sizeof(th));
	th.loop = pgo_loop_new();
	th.host.loop = th.loop;
	th.host.done = host_done;
	th.host.health = host_health;
	assert_int_equal(pgo_sink_attach(s, &th.host), PGO_OK);
	/* The first connect (started by start()) fails: down. */
	while (!th.down) {
		assert_int_equal(pgo_loop_run_once(th.loop, pgo_now_ms() + 500),
				 0);
		assert_true(pgo_now_ms() - t0 < 10000);
	}
	assert_non_null(strstr(th.reason, "connect"));
	assert_null(strstr(th.reason, "secretpw"));
	/* A batch while down ends at once, UNAVAILABLE, nothing spent. */
	assert_int_equal(pgo_sink_submit(s, &b), PGO_OK);
	while (!th.done) {
		assert_int_equal(pgo_loop_run_once(th.loop, pgo_now_ms() + 500),
				 0);
		assert_true(pgo_now_ms() - t0 < 10000);
	}
	assert_int_equal(th.done, 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(acks[i], PGO_ACK_UNAVAILABLE);
		assert_non_null(errors[i]);
	}
	assert_int_equal(th.up, 0);
	pgo_sink_detach(s);
	pgo_sink_destroy(s);
	pgo_loop_destroy(th.loop);
	pgo_arena_destroy(b.arena);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configure),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_unreachable_is_unavailable),
	};

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
