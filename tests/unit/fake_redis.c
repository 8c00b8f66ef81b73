/*
 * fake_redis.c — the scripted fake Redis and the sink driver of the Redis
 * sinks' unit tests (see fake_redis.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_redis.h"
#include "base/arena.h"
#include "base/time.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/redis/redis.h"
#include "sinks/sink_int.h"

struct fake F;
struct health H;

/* --- the fake --- */

void fake_start_on(int port)
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
	a.sin_port = htons((uint16_t)port);
	assert_int_equal(bind(F.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(F.lfd, 8), 0);
	getsockname(F.lfd, (struct sockaddr *)&a, &len);
	F.port = ntohs(a.sin_port);
}

void fake_start(void)
{
	fake_start_on(0);
}

void fake_close_client(void)
{
	if (F.cfd >= 0)
		close(F.cfd);
	F.cfd = -1;
	F.in_len = 0;
	F.auth_pending = false;
}

void fake_stop(void)
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
static size_t parse_cmd(char *args, size_t size)
{
	const char *p = F.in, *end = F.in + F.in_len;
	size_t o = 0;
	long n;

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

/* The event id of an XADD ("... id 7 ...") or an EVALSHA (job ob-7). */
static bool is_event(const char *cmd, const char *id)
{
	const char *at = strstr(cmd, " id ");
	size_t n = strlen(id);

	if (at)
		return strncmp(at + 4, id, n) == 0 && at[4 + n] == ' ';
	at = strstr(cmd, "ob-");
	return at && strncmp(at + 3, id, n) == 0 &&
	       !(at[3 + n] >= '0' && at[3 + n] <= '9');
}

static void answer_add(const char *cmd)
{
	char reply[64];
	const char *job;

	if (F.auth_pending)
		F.add_before_auth_reply++;
	F.adds++;
	if (F.silent)
		return;
	if (F.loading > 0) {
		F.loading--;
		fake_send(
			"-LOADING Redis is loading the dataset in memory\r\n");
		return;
	}
	if (strncmp(cmd, "EVALSHA", 7) == 0 && F.noscript > 0) {
		F.noscript--;
		fake_send("-NOSCRIPT No matching script. Please use EVAL.\r\n");
		return;
	}
	if (F.fail_id && is_event(cmd, F.fail_id)) {
		fake_send(F.fail_raw ? F.fail_raw : "-ERR boom\r\n");
		return;
	}
	if (strncmp(cmd, "EVALSHA", 7) == 0 && (job = strstr(cmd, "ob-"))) {
		int n = 3;

		while (job[n] >= '0' && job[n] <= '9')
			n++;
		snprintf(reply, sizeof(reply), "$%d\r\n%.*s\r\n", n, n, job);
	} else {
		snprintf(reply, sizeof(reply), "$5\r\n%d-0\r\n",
			 100 + F.adds % 900);
	}
	fake_send(reply);
	if (F.close_after && F.adds == F.close_after)
		fake_close_client();
}

static void fake_answer(const char *cmd)
{
	char reply[64], sha[41];

	if (strncmp(cmd, "AUTH", 4) == 0) {
		if (F.hold_auth_ms) {
			F.auth_pending = true;
			F.auth_at = pgo_now_ms();
			return;
		}
		fake_send("+OK\r\n");
	} else if (strncmp(cmd, "SELECT", 6) == 0) {
		fake_send("+OK\r\n");
	} else if (strncmp(cmd, "SCRIPT LOAD ", 12) == 0) {
		pgo_sha1_hex(cmd + 12, strlen(cmd + 12), sha);
		if (F.bad_sha)
			memset(sha, '0', 40);
		snprintf(reply, sizeof(reply), "$40\r\n%s\r\n", sha);
		fake_send(reply);
	} else if (strncmp(cmd, "XADD", 4) == 0 ||
		   strncmp(cmd, "EVALSHA", 7) == 0) {
		answer_add(cmd);
	} else {
		fake_send("-ERR unknown command\r\n");
	}
}

void fake_step(void)
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
	while (F.cfd >= 0 && (used = parse_cmd(args, sizeof(args))) > 0) {
		memmove(F.in, F.in + used, F.in_len - used);
		F.in_len -= used;
		if (F.ncmds < FAKE_MAX_CMDS)
			F.cmds[F.ncmds++] = strdup(args);
		fake_answer(args);
	}
	if (F.auth_pending && pgo_now_ms() >= F.auth_at + F.hold_auth_ms) {
		F.auth_pending = false;
		fake_send("+OK\r\n");
	}
}

int fake_count(const char *prefix)
{
	int n = 0;

	for (int i = 0; i < F.ncmds; i++)
		n += strncmp(F.cmds[i], prefix, strlen(prefix)) == 0;
	return n;
}

/* --- the host --- */

static pgo_loop_t *loop;
static pgo_sink_host_t host;
static pgo_arena_t *arena;

static void host_done(void *ctx, pgo_batch_t *batch)
{
	job_t *j = (job_t *)batch; /* the batch is the job's first member */

	(void)ctx;
	j->dones++;
	/* Every event has its verdict by now. */
	for (size_t i = 0; i < batch->n; i++)
		assert_int_not_equal(batch->acks[i], PGO_ACK_NONE);
}

static void host_health(void *ctx, int up, const char *reason)
{
	(void)ctx;
	if (up) {
		H.ups++;
		return;
	}
	H.downs++;
	snprintf(H.reason, sizeof(H.reason), "%s", reason ? reason : "");
}

void drv_attach(pgo_sink_t *sink)
{
	memset(&H, 0, sizeof(H));
	loop = pgo_loop_new();
	assert_non_null(loop);
	host = (pgo_sink_host_t){
		.loop = loop, .done = host_done, .health = host_health};
	assert_int_equal(pgo_sink_attach(sink, &host), PGO_OK);
}

pgo_sink_t *drv_sink(const char *name, const char *const *kv)
{
	pgo_conf_t *conf = pgo_conf_new();
	pgo_error_t err;
	pgo_sink_t *s;
	char url[64];

	assert_non_null(conf);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", F.port);
	assert_int_equal(pgo_conf_set(conf, "sink.redis_url", url,
				      PGO_CONF_FLAG, "--redis"),
			 PGO_OK);
	for (; kv && kv[0]; kv += 2)
		if (pgo_conf_set(conf, kv[0], kv[1], PGO_CONF_FLAG, NULL) !=
		    PGO_OK)
			fail_msg("%s = %s: %s", kv[0], kv[1],
				 pgo_conf_errmsg(conf));
	s = pgo_sink_new(name, conf, &err);
	if (!s)
		fail_msg("pgo_sink_new: %s", err.msg);
	pgo_conf_destroy(conf); /* the sink keeps copies */
	drv_attach(s);
	return s;
}

void drv_destroy(pgo_sink_t *sink)
{
	pgo_sink_destroy(sink);
	pgo_loop_destroy(loop);
	loop = NULL;
	pgo_arena_destroy(arena);
	arena = NULL;
}

void job_init(job_t *j, int first_id, int n, const char *topic)
{
	if (!arena)
		arena = pgo_arena_new(4096);
	memset(j, 0, sizeof(*j));
	for (int i = 0; i < n; i++)
		j->ev[i] = (pgo_event_t){.id = first_id + i,
					 .topic = topic,
					 .key = i % 2 ? NULL : "k",
					 .type = "t",
					 .payload = "{\"a\": 1}",
					 .headers = "{}",
					 .created_at = "2026-01-01T00:00:00Z"};
	j->b.events = j->ev;
	j->b.n = (size_t)n;
	j->b.acks = j->acks;
	j->b.errors = j->errors;
	j->b.arena = arena;
}

void job_submit(pgo_sink_t *sink, job_t *j)
{
	assert_int_equal(pgo_sink_submit(sink, &j->b), PGO_OK);
}

/* One turn: the sink's watchers and timers, then the fake. */
static void turn(void)
{
	assert_int_equal(pgo_loop_run_once(loop, pgo_now_ms() + 10), 0);
	fake_step();
}

void drive(job_t **jobs, int n, int64_t limit_ms)
{
	int64_t stop = pgo_now_ms() + limit_ms;

	for (;;) {
		int busy = 0;

		for (int i = 0; i < n; i++) {
			assert_true(jobs[i]->dones <= 1);
			busy += jobs[i]->dones == 0;
		}
		if (!busy)
			return;
		if (pgo_now_ms() > stop)
			fail_msg("the sink did not finish within %lld ms",
				 (long long)limit_ms);
		turn();
	}
}

void drive_for(int64_t ms)
{
	int64_t stop = pgo_now_ms() + ms;

	while (pgo_now_ms() < stop)
		turn();
}

void drive_until(const int *flag, int want, int64_t limit_ms)
{
	int64_t stop = pgo_now_ms() + limit_ms;

	while (*flag < want) {
		if (pgo_now_ms() > stop)
			fail_msg("nothing happened within %lld ms",
				 (long long)limit_ms);
		turn();
	}
}

int count_acks(const job_t *j, pgo_ack_t a)
{
	int n = 0;

	for (size_t i = 0; i < j->b.n; i++)
		n += j->acks[i] == a;
	return n;
}
