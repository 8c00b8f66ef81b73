/*
 * consume_redis.c — the consumer's Redis connection: one command at a
 * time, its socket a watcher on the consumer's loop while a reply is due
 * (XREADGROUP BLOCK included), so a stop request interrupts the wait;
 * the consumer group made sure of; entries acked.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inbox/consumer_int.h"
#include "base/log.h"
#include "base/time.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "sinks/redis/conn.h"

static void redis_lost(pgo_consumer_t *c)
{
	if (!c->stop)
		pgo_log(PGO_LOG_WARN, c->subject, "Redis: %s; reconnecting",
			c->redis.err);
	pgo_redis_close(&c->redis);
	c->group_ready = false;
	c->redis_retry_at = pgo_now_ms() + c->redis_backoff;
	c->redis_backoff = pgo_consume_next_backoff(c->redis_backoff);
}

/* The Redis socket is ready: pgo_consume_call() does the I/O after the turn. */
void pgo_consume_redis_io(void *arg, int fd, short revents)
{
	(void)arg;
	(void)fd;
	(void)revents;
}

/* One command and its reply, connecting first when down, turning the
 * loop meanwhile: at most the reply timeout plus extra_ms (plus the
 * connect).  NULL when Redis failed, the time ran out or a stop was
 * requested (the connection is then closed, the error logged). */
redisReply *pgo_consume_call(pgo_consumer_t *c, int64_t extra_ms, int argc,
			     const char **argv)
{
	pgo_redis_t *rd = &c->redis;
	int64_t timeout = c->redis_timeout_ms + extra_ms, deadline;
	redisReply *r = NULL;
	size_t lens[16];
	int rc;

	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	if ((rd->state == PGO_REDIS_DOWN &&
	     pgo_redis_connect(rd, c->connect_timeout_ms) != PGO_OK) ||
	    pgo_redis_append(rd, argc, argv, lens) != PGO_OK) {
		redis_lost(c);
		return NULL;
	}
	deadline = pgo_now_ms() + timeout +
		   (rd->state == PGO_REDIS_UP ? 0 : c->connect_timeout_ms);
	while (pgo_redis_io(rd) == PGO_OK &&
	       pgo_redis_next_reply(rd, &r) == PGO_OK && !r) {
		if (c->stop) {
			snprintf(rd->err, sizeof(rd->err), "interrupted");
			break;
		}
		if (pgo_now_ms() >= deadline) {
			snprintf(rd->err, sizeof(rd->err),
				 "no reply within %" PRId64 " ms", timeout);
			break;
		}
		pgo_loop_io_set(c->rio, rd->fd, pgo_redis_events(rd));
		rc = pgo_loop_run_once(c->loop, deadline);
		pgo_loop_io_set(c->rio, -1, 0);
		if (rc < 0) {
			snprintf(rd->err, sizeof(rd->err), "poll: %s",
				 strerror(-rc));
			break;
		}
	}
	if (!r)
		redis_lost(c);
	return r;
}

/* Connects and makes sure the group exists.  PGO_ERR_AGAIN: wait. */
int pgo_consume_ensure_redis(pgo_consumer_t *c)
{
	const char *argv[] = {"XGROUP", "CREATE",    c->stream,
			      c->group, c->start_id, "MKSTREAM"};
	redisReply *r;
	char where[300];

	if (c->group_ready && c->redis.state == PGO_REDIS_UP)
		return PGO_OK;
	if (pgo_now_ms() < c->redis_retry_at)
		return PGO_ERR_AGAIN;
	r = pgo_consume_call(c, 0, 6, argv);
	if (!r)
		return PGO_ERR_AGAIN;
	if (r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "BUSYGROUP", 9) != 0) {
		snprintf(c->redis.err, sizeof(c->redis.err),
			 "XGROUP CREATE: %s", r->str);
		freeReplyObject(r);
		redis_lost(c);
		return PGO_ERR_AGAIN;
	}
	freeReplyObject(r);
	pgo_redis_url_describe(&c->redis.url, where, sizeof(where));
	pgo_log(PGO_LOG_INFO, c->subject, "reading from %s as consumer %s",
		where, c->name);
	c->group_ready = true;
	c->redis_backoff = BACKOFF_MIN_MS;
	/* First our own pending entries: a crash may have left some. */
	c->pending_mode = true;
	snprintf(c->cursor, sizeof(c->cursor), "0");
	return PGO_OK;
}

void pgo_consume_xack(pgo_consumer_t *c, const char *entry_id)
{
	const char *argv[] = {"XACK", c->stream, c->group, entry_id};
	redisReply *r = pgo_consume_call(c, 0, 4, argv);

	/* Not acked: the entry comes again and the inbox drops it. */
	if (r && r->type == REDIS_REPLY_ERROR)
		pgo_log(PGO_LOG_WARN, c->subject, "XACK %s: %s", entry_id,
			r->str);
	freeReplyObject(r);
}
