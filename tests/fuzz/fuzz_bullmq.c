/*
 * fuzz_bullmq.c — the BullMQ sink (sinks/redis/bullmq.c): its
 * configuration, then one job added through a real connection.
 *
 * The configuration: the header of the file tools/bullmq-export.js writes
 * ("--! pgoutbox-bullmq-export bullmq=6.7.0 script=addStandardJob
 * keys=9") and the script after it, sink.bullmq_queue (a template without
 * ':'), sink.bullmq_prefix and sink.bullmq_remove_on_complete.  When the
 * sink accepts them, the harness is its Redis: it listens on 127.0.0.1,
 * answers SCRIPT LOAD with the script's SHA-1, reads the EVALSHA of an
 * event of the given topic, type and payload, unpacks the job's msgpack
 * arguments and answers with the last field's bytes.
 *
 * Input: the script file, the queue template, the prefix, the
 * removeOnComplete value, the topic, the type, the payload and the reply,
 * cut at NUL bytes.  Oracles: a refused configuration has a message; an
 * accepted one came from a header naming bullmq 5 or 6, addStandardJob
 * and 9 keys; the EVALSHA names the script's SHA-1 and 9 keys under the
 * prefix and the expanded queue, its args are an array of 9 (bullmq 5)
 * or 10 (6) whose 2nd is the job id "ob-<id>" and 3rd the event's type,
 * its opts a map with attempts and jobId; the event gets a verdict
 * whatever the reply.
 */
#include <fcntl.h>
#include <msgpack.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "loop/loop.h"
#include "sinks/redis/redis.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

static int listener = -1;
static int port;
static int dones;

static void listen_once(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);

	if (listener >= 0)
		return;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(listener, 4) ||
	    getsockname(listener, (struct sockaddr *)&a, &len) ||
	    fcntl(listener, F_SETFL, O_NONBLOCK) < 0)
		abort();
	port = ntohs(a.sin_port);
}

static void on_done(void *ctx, pgo_batch_t *b)
{
	(void)ctx;
	for (size_t i = 0; i < b->n; i++)
		FUZZ_CHECK(b->acks[i] != PGO_ACK_NONE, "event %zu undecided",
			   i);
	dones++;
}

static void on_health(void *ctx, int up, const char *reason)
{
	(void)ctx;
	(void)up;
	(void)reason;
}

static bool arg_is(const redisReply *c, size_t i, const char *s)
{
	return i < c->elements && c->element[i]->type == REDIS_REPLY_STRING &&
	       c->element[i]->len == strlen(s) &&
	       memcmp(c->element[i]->str, s, c->element[i]->len) == 0;
}

static bool str_is(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* The EVALSHA of event 42: its keys, args and opts (see the header). */
static void check_add(const redisReply *c, const char *sha, const char *base,
		      const char *type, const char *payload, int nargs)
{
	msgpack_unpacked u;
	size_t off = 0;
	pgo_buf_t key;

	FUZZ_CHECK(c->elements == 15 && arg_is(c, 1, sha) && arg_is(c, 2, "9"),
		   "EVALSHA with %zu arguments, sha %.*s, want %s", c->elements,
		   c->elements > 1 ? (int)c->element[1]->len : 0,
		   c->elements > 1 ? c->element[1]->str : "", sha);
	/* As long as the prefix and queue make it: a fixed buffer cut a
	 * long one short and blamed the sink. */
	pgo_buf_init(&key);
	pgo_buf_printf(&key, "%swait", base);
	FUZZ_CHECK(!key.oom && arg_is(c, 3, key.data),
		   "first key is not %.300s", key.data);
	pgo_buf_free(&key);
	FUZZ_CHECK(arg_is(c, 13, payload), "payload is not %s", payload);
	msgpack_unpacked_init(&u);
	FUZZ_CHECK(msgpack_unpack_next(&u, c->element[12]->str,
				       c->element[12]->len,
				       &off) == MSGPACK_UNPACK_SUCCESS &&
			   off == c->element[12]->len,
		   "args do not unpack");
	FUZZ_CHECK(u.data.type == MSGPACK_OBJECT_ARRAY &&
			   u.data.via.array.size == (uint32_t)nargs &&
			   str_is(&u.data.via.array.ptr[0], base) &&
			   str_is(&u.data.via.array.ptr[1], "ob-42") &&
			   str_is(&u.data.via.array.ptr[2], type),
		   "args are not [%s, ob-42, %s, ...] of %d", base, type,
		   nargs);
	off = 0;
	FUZZ_CHECK(msgpack_unpack_next(&u, c->element[14]->str,
				       c->element[14]->len,
				       &off) == MSGPACK_UNPACK_SUCCESS &&
			   off == c->element[14]->len &&
			   u.data.type == MSGPACK_OBJECT_MAP &&
			   u.data.via.map.size >= 2 &&
			   str_is(&u.data.via.map.ptr[0].key, "attempts") &&
			   str_is(&u.data.via.map.ptr[1].key, "jobId") &&
			   str_is(&u.data.via.map.ptr[1].val, "ob-42"),
		   "opts are not {attempts, jobId: ob-42, ...}");
	msgpack_unpacked_destroy(&u);
}

/* One job of one event through the sink, the harness as its Redis. */
static void add_one(pgo_sink_t *sink, const pgo_conf_t *conf,
		    const fuzz_fields_t *ff, const char *sha, int nargs)
{
	pgo_loop_t *loop = pgo_loop_new();
	pgo_sink_host_t host = {
		.loop = loop, .done = on_done, .health = on_health};
	pgo_event_t ev = {.id = 42,
			  .topic = ff->f[4],
			  .type = ff->f[5],
			  .payload = ff->f[6],
			  .headers = "{}",
			  .created_at = "2026-12-01T00:00:00Z"};
	pgo_ack_t ack = PGO_ACK_NONE;
	const char *err = NULL;
	pgo_batch_t b = {.events = &ev, .n = 1, .acks = &ack, .errors = &err};
	redisReader *reader = redisReaderCreate();
	pgo_buf_t qname, base;
	int client = -1;
	bool added = false;
	int64_t stop;

	if (!loop || !reader)
		abort();
	b.arena = pgo_arena_new(1024);
	pgo_buf_init(&qname);
	pgo_buf_init(&base);
	pgo_buf_printf(&base,
		       "%s:%s:", pgo_conf_get(conf, "sink.bullmq_prefix"),
		       pgo_sink_template_expand(
			       &qname, pgo_conf_get(conf, "sink.bullmq_queue"),
			       ev.topic, pgo_conf_get(conf, "relay.queue")));
	dones = 0;
	/* Connections of an earlier input's sink, still in the backlog
	 * with its commands: not this one's. */
	while ((client = accept(listener, NULL, NULL)) >= 0)
		close(client);
	if (pgo_sink_attach(sink, &host) != PGO_OK)
		abort();
	if (pgo_sink_submit(sink, &b) != PGO_OK)
		abort();
	stop = pgo_now_ms() + 5000;
	while (dones == 0) {
		void *obj;
		char buf[65536];
		ssize_t n;

		FUZZ_CHECK(pgo_now_ms() < stop, "no verdict after 5 s");
		pgo_loop_run_once(loop, pgo_now_ms() + 5);
		if (client < 0 && (client = accept(listener, NULL, NULL)) >= 0)
			(void)fcntl(client, F_SETFL, O_NONBLOCK);
		if (client < 0)
			continue;
		while ((n = recv(client, buf, sizeof(buf), 0)) > 0)
			redisReaderFeed(reader, buf, (size_t)n);
		while (redisReaderGetReply(reader, &obj) == REDIS_OK && obj) {
			const redisReply *c = obj;
			char out[64];

			FUZZ_CHECK(c->type == REDIS_REPLY_ARRAY,
				   "a command that is not an array");
			if (arg_is(c, 0, "SCRIPT")) {
				snprintf(out, sizeof(out), "$40\r\n%s\r\n",
					 sha);
				(void)!send(client, out, strlen(out),
					    MSG_NOSIGNAL);
			} else {
				FUZZ_CHECK(arg_is(c, 0, "EVALSHA") && !added,
					   "unexpected command");
				check_add(c, sha, base.data, ev.type,
					  ev.payload, nargs);
				added = true;
				(void)!send(client, ff->f[7], ff->len[7],
					    MSG_NOSIGNAL);
				/* A short or bad reply ends with the hang-up.
				 */
				shutdown(client, SHUT_WR);
			}
			freeReplyObject(obj);
		}
	}
	FUZZ_CHECK(added || ack != PGO_ACK_OK, "acked without an EVALSHA");
	pgo_sink_detach(sink);
	if (client >= 0)
		close(client);
	redisReaderFree(reader);
	pgo_buf_free(&qname);
	pgo_buf_free(&base);
	pgo_arena_destroy(b.arena);
	pgo_loop_destroy(loop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"sink.bullmq_queue",
					   "sink.bullmq_prefix",
					   "sink.bullmq_remove_on_complete"};
	fuzz_fields_t ff;
	pgo_conf_t *conf;
	pgo_sink_t *sink;
	pgo_error_t err;
	char path[64], url[64], sha[41];
	const char *nl, *ver;
	int fd;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	listen_once();
	fuzz_fields(&ff, data, size, '\0', 8);
	conf = pgo_conf_new();
	if (!conf)
		abort();
	fd = memfd_create("bullmq.lua", 0);
	if (fd < 0 || write(fd, ff.f[0], ff.len[0]) != (ssize_t)ff.len[0])
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	if (pgo_conf_set(conf, "sink.bullmq_script", path, PGO_CONF_FLAG,
			 "fuzz") != PGO_OK ||
	    pgo_conf_set(conf, "sink.redis_url", url, PGO_CONF_FLAG, "fuzz") !=
		    PGO_OK ||
	    pgo_conf_set(conf, "sink.redis_timeout", "2s", PGO_CONF_FLAG,
			 "fuzz") != PGO_OK)
		abort();
	for (int i = 0; i < 3; i++)
		if (ff.n > i + 1 &&
		    pgo_conf_set(conf, keys[i], ff.f[i + 1], PGO_CONF_FLAG,
				 "fuzz") != PGO_OK)
			goto out;
	sink = pgo_sink_new("bullmq", conf, &err);
	if (!sink) {
		FUZZ_CHECK(err.msg[0], "refused without a message");
		goto out;
	}
	nl = memchr(ff.f[0], '\n', ff.len[0]);
	/* The header's last bullmq= counts, as in the sink. */
	ver = NULL;
	for (const char *v = strstr(ff.f[0], "bullmq="); v && nl && v < nl;
	     v = strstr(v + 1, "bullmq="))
		if (v > ff.f[0] && strchr(" \t\r", v[-1]))
			ver = v;
	FUZZ_CHECK(nl && ver && ver < nl &&
			   strncmp(ff.f[0], "--! pgoutbox-bullmq-export ",
				   27) == 0 &&
			   (ver[7] == '5' || ver[7] == '6') &&
			   strstr(ff.f[0], "script=addStandardJob") &&
			   strstr(ff.f[0], "keys=9"),
		   "accepted the script file \"%.200s\"", ff.f[0]);
	FUZZ_CHECK(!strchr(pgo_conf_get(conf, "sink.bullmq_queue"), ':'),
		   "accepted queue \"%s\"",
		   pgo_conf_get(conf, "sink.bullmq_queue"));
	/* The sink loads what follows the header line, as read from the
	 * file (the file may hold NULs: only its length counts). */
	if (pgo_sha1_hex(nl + 1, ff.len[0] - (size_t)(nl + 1 - ff.f[0]), sha) !=
	    PGO_OK)
		abort();
	if (ff.f[4][0] && ff.f[6][0])
		add_one(sink, conf, &ff, sha, ver[7] == '5' ? 9 : 10);
	pgo_sink_destroy(sink);
out:
	pgo_conf_destroy(conf);
	close(fd);
	fuzz_fields_free(&ff);
	return 0;
}
