/*
 * test_redis.c — the Redis pieces without a Redis: redis:// URL parsing
 * (table-driven), and the redis sink driven the way the relay drives it
 * (publish, then resume on the returned fd or deadline) against a scripted
 * fake server in the same process.  The fake records every command it
 * gets and answers per script: stream ids, an error for one event, a
 * LOADING phase, a connection closed after some commands, a slow AUTH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redis.h"

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

/* --- a scripted fake Redis --- */

#define MAX_CMDS 4096

static struct fake {
	int lfd, cfd; /* listening socket, the one client */
	int port;
	char in[1 << 20]; /* bytes received, unparsed */
	size_t in_len;
	char *cmds[MAX_CMDS]; /* each command, arguments joined by ' ' */
	int ncmds;
	int connections; /* accepted so far */
	/* the script */
	const char *fail_id;  /* XADD with this event id gets an error */
	int close_after;      /* close the client after this many XADDs
			       * (counted over all connections); 0 = never */
	int xadds;	      /* XADDs seen */
	int loading;	      /* answer LOADING to this many XADDs */
	int64_t hold_auth_ms; /* answer AUTH only after this long */
	int64_t auth_at;      /* when AUTH arrived */
	bool auth_pending;
	int xadd_before_auth_reply; /* protocol violations seen */
} F;

static void fake_start(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int one = 1;

	for (int i = 0; i < F.ncmds; i++)
		free(F.cmds[i]);
	memset(&F, 0, sizeof(F));
	F.cfd = -1;
	F.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(F.lfd >= 0);
	setsockopt(F.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(F.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(F.lfd, 8), 0);
	getsockname(F.lfd, (struct sockaddr *)&a, &len);
	F.port = ntohs(a.sin_port);
}

static void fake_close_client(void)
{
	if (F.cfd >= 0)
		close(F.cfd);
	F.cfd = -1;
	F.in_len = 0;
	F.auth_pending = false;
}

static void fake_stop(void)
{
	fake_close_client();
	if (F.lfd >= 0)
		close(F.lfd);
	F.lfd = -1;
	for (int i = 0; i < F.ncmds; i++)
		free(F.cmds[i]);
	F.ncmds = 0;
}

static void fake_send(const char *s)
{
	size_t n = strlen(s);

	if (F.cfd >= 0 && send(F.cfd, s, n, MSG_NOSIGNAL) != (ssize_t)n)
		fake_close_client();
}

/* Parses one RESP array of bulk strings from F.in; returns its length in
 * bytes, or 0 when incomplete.  args receives the arguments joined. */
static size_t parse_cmd(char *args, size_t size, const char **argv0_end)
{
	const char *p = F.in, *end = F.in + F.in_len;
	size_t o = 0;
	long n;

	(void)argv0_end;
	if (p >= end || *p != '*')
		return 0;
	n = strtol(p + 1, NULL, 10);
	if (!(p = memchr(p, '\n', (size_t)(end - p))))
		return 0;
	p++;
	for (long i = 0; i < n; i++) {
		long len;

		if (p >= end || *p != '$' ||
		    !memchr(p, '\n', (size_t)(end - p)))
			return 0;
		len = strtol(p + 1, NULL, 10);
		p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
		if (end - p < len + 2)
			return 0;
		if (o + (size_t)len + 2 < size) {
			if (i)
				args[o++] = ' ';
			memcpy(args + o, p, (size_t)len);
			o += (size_t)len;
		}
		p += len + 2;
	}
	args[o] = '\0';
	return (size_t)(p - F.in);
}

static void fake_answer(const char *cmd)
{
	char reply[64];
	const char *id;

	if (strncmp(cmd, "AUTH", 4) == 0) {
		if (F.hold_auth_ms) {
			F.auth_pending = true;
			F.auth_at = pgo_now_ms();
			return;
		}
		fake_send("+OK\r\n");
		return;
	}
	if (strncmp(cmd, "SELECT", 6) == 0) {
		fake_send("+OK\r\n");
		return;
	}
	if (strncmp(cmd, "XADD", 4) != 0) {
		fake_send("-ERR unknown command\r\n");
		return;
	}
	if (F.auth_pending)
		F.xadd_before_auth_reply++;
	F.xadds++;
	if (F.loading > 0) {
		F.loading--;
		fake_send(
			"-LOADING Redis is loading the dataset in memory\r\n");
		return;
	}
	id = strstr(cmd, " id ");
	if (F.fail_id && id &&
	    strncmp(id + 4, F.fail_id, strlen(F.fail_id)) == 0 &&
	    id[4 + strlen(F.fail_id)] == ' ') {
		fake_send("-ERR boom\r\n");
		return;
	}
	snprintf(reply, sizeof(reply), "$5\r\n%d-0\r\n", 100 + F.xadds % 900);
	fake_send(reply);
	if (F.close_after && F.xadds == F.close_after)
		fake_close_client();
}

/* Accepts, reads and answers whatever is ready. */
static void fake_step(void)
{
	char args[8192];
	size_t used;

	if (F.lfd >= 0 && F.cfd < 0) {
		F.cfd = accept4(F.lfd, NULL, NULL, SOCK_NONBLOCK);
		if (F.cfd >= 0)
			F.connections++;
	}
	if (F.cfd < 0)
		return;
	for (;;) {
		ssize_t n = recv(F.cfd, F.in + F.in_len,
				 sizeof(F.in) - F.in_len, 0);

		if (n > 0) {
			F.in_len += (size_t)n;
			continue;
		}
		if (n == 0)
			fake_close_client();
		break;
	}
	while (F.cfd >= 0 && (used = parse_cmd(args, sizeof(args), NULL)) > 0) {
		memmove(F.in, F.in + used, F.in_len - used);
		F.in_len -= used;
		if (F.ncmds < MAX_CMDS)
			F.cmds[F.ncmds++] = strdup(args);
		fake_answer(args);
	}
	if (F.auth_pending && pgo_now_ms() >= F.auth_at + F.hold_auth_ms) {
		F.auth_pending = false;
		fake_send("+OK\r\n");
	}
}

/* --- driving the sink like the relay --- */

typedef struct job {
	pgo_batch_t b;
	pgo_event_t ev[16];
	pgo_ack_t acks[16];
	const char *errors[16];
	char ids[16][24];
	int fd;
	short events;
	int64_t deadline;
	bool pending;
} job_t;

static pgo_arena_t *arena;

static void job_init(job_t *j, int first_id, int n, const char *topic)
{
	memset(j, 0, sizeof(*j));
	for (int i = 0; i < n; i++) {
		snprintf(j->ids[i], sizeof(j->ids[i]), "%d", first_id + i);
		j->ev[i] = (pgo_event_t){.id = first_id + i,
					 .topic = topic,
					 .key = i % 2 ? NULL : "k",
					 .type = "t",
					 .payload = "{\"a\": 1}",
					 .headers = "{}",
					 .created_at = "2026-01-01T00:00:00Z"};
	}
	j->b.events = j->ev;
	j->b.n = (size_t)n;
	j->b.acks = j->acks;
	j->b.errors = j->errors;
	j->b.arena = arena;
}

static void publish(pgo_sink_t *s, job_t *j)
{
	int rc = s->ops->publish(s, &j->b, &j->fd, &j->events, &j->deadline);

	assert_true(rc == PGO_OK || rc == PGO_ERR_AGAIN);
	j->pending = rc == PGO_ERR_AGAIN;
}

/* Runs the loop until no job is pending (or limit_ms passes: a failure). */
static void drive(pgo_sink_t *s, job_t **jobs, int n, int64_t limit_ms)
{
	int64_t stop = pgo_now_ms() + limit_ms;

	for (;;) {
		struct pollfd p[20];
		int np = 0, busy = 0;
		int64_t deadline = pgo_now_ms() + 10, now;

		for (int i = 0; i < n; i++) {
			if (!jobs[i]->pending)
				continue;
			busy++;
			p[np++] = (struct pollfd){.fd = jobs[i]->fd,
						  .events = jobs[i]->events};
			if (jobs[i]->deadline && jobs[i]->deadline < deadline)
				deadline = jobs[i]->deadline;
		}
		if (!busy)
			return;
		if (pgo_now_ms() > stop)
			fail_msg("the sink did not finish within %lld ms",
				 (long long)limit_ms);
		now = pgo_now_ms();
		(void)poll(p, (nfds_t)np,
			   deadline > now ? (int)(deadline - now) : 0);
		fake_step();
		np = 0;
		now = pgo_now_ms();
		for (int i = 0; i < n; i++) {
			job_t *j = jobs[i];
			short rev;
			int rc;

			if (!j->pending)
				continue;
			rev = p[np++].revents;
			if (!rev && !(j->deadline && now >= j->deadline))
				continue;
			rc = s->ops->resume(s, &j->b, rev, &j->fd, &j->events,
					    &j->deadline);
			assert_true(rc == PGO_OK || rc == PGO_ERR_AGAIN);
			j->pending = rc == PGO_ERR_AGAIN;
		}
	}
}

static pgo_sink_t *make_sink(const char *url, const char *extra_key,
			     const char *extra_value)
{
	pgo_conf_t *conf = pgo_conf_new();
	pgo_error_t err;
	pgo_sink_t *s;
	char buf[128];

	assert_non_null(conf);
	if (!url) {
		snprintf(buf, sizeof(buf), "redis://127.0.0.1:%d/0", F.port);
		url = buf;
	}
	assert_int_equal(pgo_conf_set(conf, "sink.redis_url", url,
				      PGO_CONF_FLAG, "--redis"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "sink.redis_stream",
				      "s:{queue}:{topic}", PGO_CONF_FLAG, NULL),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "sink.redis_timeout", "2s",
				      PGO_CONF_FLAG, NULL),
			 PGO_OK);
	if (extra_key)
		assert_int_equal(pgo_conf_set(conf, extra_key, extra_value,
					      PGO_CONF_FLAG, NULL),
				 PGO_OK);
	s = pgo_sink_new("redis", conf, &err);
	if (!s)
		fail_msg("pgo_sink_new: %s", err.msg);
	pgo_conf_destroy(conf); /* the sink keeps copies */
	return s;
}

static int count_acks(const job_t *j, pgo_ack_t a)
{
	int n = 0;

	for (size_t i = 0; i < j->b.n; i++)
		n += j->acks[i] == a;
	return n;
}

static int setup(void **state)
{
	(void)state;
	arena = pgo_arena_new(4096);
	fake_start();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fake_stop();
	pgo_arena_destroy(arena);
	return 0;
}

/* Two publishes at once share the connection; every field goes out. */
static void test_pipelined_publishes(void **state)
{
	pgo_sink_t *s = make_sink(NULL, "sink.redis_maxlen", "1000");
	job_t a, b, *jobs[] = {&a, &b};

	(void)state;
	job_init(&a, 1, 5, "orders");
	job_init(&b, 6, 4, "users");
	publish(s, &a);
	publish(s, &b);
	drive(s, jobs, 2, 3000);
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
	pgo_sink_destroy(s);
}

/* An error reply fails its event only, as retriable. */
static void test_error_reply(void **state)
{
	pgo_sink_t *s = make_sink(NULL, NULL, NULL);
	job_t a, *jobs[] = {&a};

	(void)state;
	F.fail_id = "3";
	job_init(&a, 1, 5, "t");
	publish(s, &a);
	drive(s, jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 4);
	assert_int_equal(a.acks[2], PGO_ACK_RETRY);
	assert_non_null(strstr(a.errors[2], "boom"));
	pgo_sink_destroy(s);
}

/* Lost mid-batch, no waiting: the rest fails now; the next publish
 * reconnects and goes through. */
static void test_lost_fails_rest(void **state)
{
	pgo_sink_t *s = make_sink(NULL, NULL, NULL);
	job_t a, b, *ja[] = {&a}, *jb[] = {&b};

	(void)state;
	F.close_after = 3;
	job_init(&a, 1, 6, "t");
	publish(s, &a);
	drive(s, ja, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 3);
	usleep(250 * 1000); /* past the reconnect backoff */
	job_init(&b, 7, 3, "t");
	publish(s, &b);
	drive(s, jb, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 3);
	assert_int_equal(F.connections, 2);
	pgo_sink_destroy(s);
}

/* Lost mid-batch with redis_wait: the unacked events go again on the next
 * connection and the whole batch is acked. */
static void test_lost_resends_with_wait(void **state)
{
	pgo_sink_t *s = make_sink(NULL, "sink.redis_wait", "5s");
	job_t a, b, *jobs[] = {&a, &b};

	(void)state;
	F.close_after = 4;
	job_init(&a, 1, 3, "t");
	job_init(&b, 4, 3, "t");
	publish(s, &a);
	publish(s, &b);
	drive(s, jobs, 2, 5000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 3);
	assert_int_equal(F.connections, 2);
	/* 4 acked on the first connection (or in doubt), 2 sent again. */
	assert_int_equal(F.xadds, 6);
	assert_non_null(strstr(F.cmds[4], " id 5 "));
	pgo_sink_destroy(s);
}

/* Redis not there: the publish fails at once, nothing waits. */
static void test_down_fails_at_once(void **state)
{
	pgo_sink_t *s;
	job_t a;
	int64_t t0;

	(void)state;
	fake_stop(); /* nothing listens on the port any more */
	s = make_sink(NULL, NULL, NULL);
	job_init(&a, 1, 4, "t");
	t0 = pgo_now_ms();
	publish(s, &a);
	if (a.pending) {
		job_t *jobs[] = {&a};

		drive(s, jobs, 1, 1000);
	}
	assert_true(pgo_now_ms() - t0 < 500);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 4);
	assert_non_null(strstr(a.errors[0], "refused"));
	pgo_sink_destroy(s);
	fake_start();
}

/* A cancelled publish's replies are dropped; the other one completes. */
static void test_cancel_in_flight(void **state)
{
	pgo_sink_t *s = make_sink(NULL, NULL, NULL);
	job_t a, b, *jobs[] = {&b};

	(void)state;
	job_init(&a, 1, 4, "t");
	job_init(&b, 5, 4, "t");
	publish(s, &a);
	publish(s, &b);
	assert_true(a.pending && b.pending);
	s->ops->cancel(s, &a.b);
	assert_null(a.b.sink_state);
	drive(s, jobs, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 4);
	pgo_sink_destroy(s);
}

/* LOADING means "not now": with redis_wait the batch is sent again. */
static void test_loading_is_an_outage(void **state)
{
	pgo_sink_t *s = make_sink(NULL, "sink.redis_wait", "5s");
	job_t a, *jobs[] = {&a};

	(void)state;
	F.loading = 1;
	job_init(&a, 1, 3, "t");
	publish(s, &a);
	drive(s, jobs, 1, 5000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_true(F.connections >= 2);
	pgo_sink_destroy(s);
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
	s = make_sink(url, NULL, NULL);
	job_init(&a, 1, 2, "t");
	publish(s, &a);
	drive(s, jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 2);
	assert_string_equal(F.cmds[0], "AUTH bob pw");
	assert_string_equal(F.cmds[1], "SELECT 4");
	assert_int_equal(F.xadd_before_auth_reply, 0);
	pgo_sink_destroy(s);
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
		cmocka_unit_test_setup_teardown(test_lost_fails_rest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lost_resends_with_wait,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_down_fails_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loading_is_an_outage,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_handshake_first, setup,
						teardown),
	};

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
