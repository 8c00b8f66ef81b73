/*
 * sinks/redis/pipeline.c — the Redis pipeline of both Redis sinks (see
 * sinks/redis/pipeline.h): one connection on the host's loop, the FIFO of
 * awaited replies, per-batch deadlines, reconnects and the health of Redis.
 *
 * Every batch in flight shares the one connection, so the pipeline is
 * stepped as a whole: whatever wakes it (its socket watcher, its timer, a
 * submit) reads every reply that came, for every batch, sends what waits,
 * and re-arms the one timer at the nearest deadline: the connect's, a
 * batch's reply timeout (sink.redis_timeout), a waiting batch's end
 * (sink.redis_wait) or the next reconnect.
 *
 * States of the connection are sinks/redis/conn.h's (DOWN, CONNECTING,
 * HANDSHAKE, UP); what the pipeline adds is the reconnect backoff while DOWN
 * and whether the host was told that Redis is down.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop/loop.h"
#include "sinks/redis/pipeline.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/redis/conn.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct rp_batch;

/* A command on the wire whose reply is awaited. */
struct rp_expect {
	struct rp_batch *pb; /* its batch; NULL: own, or a cancelled batch's */
	size_t ev;	     /* index of the event in its batch */
	int tag;	     /* the sink's word for the command */
	bool own;	     /* the connection's own command (SCRIPT LOAD) */
};

/* One batch taken by submit(), in batch->sink_state until it is done or
 * cancelled. */
struct rp_batch {
	pgo_batch_t *batch;
	struct rp_batch *prev; /* the pipeline's batches, oldest first */
	struct rp_batch *next;
	size_t left;	    /* events without a verdict */
	size_t outstanding; /* replies awaited on the current connection */
	int64_t sent_at;    /* when its commands were queued on the current
			     * connection; 0: not on it (waiting) */
	int64_t wait_until; /* a waiting batch fails then; 0: at once */
	int64_t started;    /* for the debug line */
};

struct pgo_redis_pipe {
	pgo_sink_t *sink;
	pgo_redis_pipe_hooks_t hooks;
	/* configuration, copied at new */
	pgo_redis_url_t url;
	char where[300];    /* host:port/db, for messages */
	int64_t timeout_ms; /* sink.redis_timeout: replies of a batch */
	int64_t connect_timeout_ms;
	int64_t wait_ms; /* sink.redis_wait */

	pgo_redis_t redis;
	uint64_t generation;	 /* connections started so far */
	pgo_sink_io_t *io;	 /* the socket's watcher (start to stop) */
	pgo_sink_timer_t *timer; /* the nearest deadline (start to stop) */
	bool active;		 /* a batch came: stay connected from now on */
	bool down;		 /* the host was told that Redis is down */
	bool broken;		 /* a command could not be queued */
	int64_t drain_until;	 /* the host is stopping: no wait past this */

	struct rp_expect *q; /* ring of awaited replies, in wire order */
	size_t q_head, q_len, q_cap;

	struct rp_batch *head, *tail; /* batches held, oldest first */

	int64_t retry_at;   /* DOWN: the next connect may start then */
	int64_t backoff;    /* the current reconnect backoff */
	bool up_logged;	    /* "connected" was logged for this connection */
	char last_err[256]; /* the last connection error (logged once) */
};

/* --- the FIFO of awaited replies --- */

static bool expect_push(pgo_redis_pipe_t *p, struct rp_batch *pb, size_t ev,
			int tag, bool own)
{
	if (p->q_len == p->q_cap) {
		size_t cap = p->q_cap ? p->q_cap * 2 : 256;
		struct rp_expect *q = malloc(cap * sizeof(*q));

		if (!q)
			return false;
		for (size_t i = 0; i < p->q_len; i++)
			q[i] = p->q[(p->q_head + i) % p->q_cap];
		free(p->q);
		p->q = q;
		p->q_cap = cap;
		p->q_head = 0;
	}
	p->q[(p->q_head + p->q_len) % p->q_cap] =
		(struct rp_expect){.pb = pb, .ev = ev, .tag = tag, .own = own};
	p->q_len++;
	return true;
}

static bool expect_pop(pgo_redis_pipe_t *p, struct rp_expect *e)
{
	if (p->q_len == 0)
		return false;
	*e = p->q[p->q_head];
	p->q_head = (p->q_head + 1) % p->q_cap;
	p->q_len--;
	return true;
}

/* Replies for pb will be read and dropped when they come. */
static void expect_forget(pgo_redis_pipe_t *p, const struct rp_batch *pb)
{
	for (size_t i = 0; i < p->q_len; i++) {
		struct rp_expect *e = &p->q[(p->q_head + i) % p->q_cap];

		if (e->pb == pb)
			e->pb = NULL;
	}
}

/* --- batches and verdicts --- */

static void unlink_batch(pgo_redis_pipe_t *p, struct rp_batch *pb)
{
	if (pb->prev)
		pb->prev->next = pb->next;
	else
		p->head = pb->next;
	if (pb->next)
		pb->next->prev = pb->prev;
	else
		p->tail = pb->prev;
	pb->prev = pb->next = NULL;
	pb->batch->sink_state = NULL;
}

void pgo_redis_pipe_verdict(pgo_batch_t *b, size_t i, pgo_ack_t ack,
			    const char *msg)
{
	struct rp_batch *pb = b->sink_state;

	if (pb && pgo_batch_set(b, i, ack, msg))
		pb->left--;
}

/* Redis is unreachable: the events are not at fault, so they spend no
 * attempt; the relay rolls the batch back and pauses. */
static void fail_rest(struct rp_batch *pb, const char *msg)
{
	pgo_batch_fail_rest(pb->batch, PGO_ACK_UNAVAILABLE, msg);
	pb->left = 0;
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
static void finish_done(pgo_redis_pipe_t *p)
{
	for (;;) {
		struct rp_batch *pb = p->head;
		pgo_batch_t *b;

		while (pb && pb->left > 0)
			pb = pb->next;
		if (!pb)
			return;
		b = pb->batch;
		pgo_log(PGO_LOG_DEBUG, p->hooks.subject,
			"batch of %zu done in %" PRId64 " ms", b->n,
			pgo_now_ms() - pb->started);
		unlink_batch(p, pb);
		free(pb);
		pgo_sink_done(p->sink, b);
	}
}

/* --- the connection --- */

/* Tells the host once that Redis is down (claiming pauses). */
static void report_down(pgo_redis_pipe_t *p, const char *msg)
{
	if (p->down)
		return;
	p->down = true;
	pgo_sink_health(p->sink, 0, msg);
}

/* The connection failed or was lost: every command in flight is in
 * doubt.  Batches still allowed to wait send their unacked events again
 * on the next connection (Redis may hold some of them already:
 * duplicates, which the consumer's inbox drops); the others fail now. */
static void lost(pgo_redis_pipe_t *p, const char *reason, int64_t now)
{
	bool idle = p->q_len == 0 && p->up_logged;
	char why[256], msg[600];

	/* reason may be redis.err or last_err, both rewritten here. */
	snprintf(why, sizeof(why), "%s", reason);
	pgo_redis_close(&p->redis);
	p->q_len = 0;
	p->q_head = 0;
	if (p->up_logged) {
		pgo_log(PGO_LOG_WARN, p->hooks.subject, "lost %s: %s", p->where,
			why);
	} else if (strcmp(p->last_err, why) != 0) {
		pgo_log(PGO_LOG_WARN, p->hooks.subject,
			"cannot reach %s: %s (retrying with backoff)", p->where,
			why);
	} else {
		pgo_log(PGO_LOG_DEBUG, p->hooks.subject,
			"still cannot reach %s: %s", p->where, why);
	}
	snprintf(p->last_err, sizeof(p->last_err), "%s", why);
	p->up_logged = false;
	snprintf(msg, sizeof(msg), "%s %s: %s", p->hooks.label, p->where, why);
	if (idle) {
		/* A server restart noticed on an idle connection: reconnect
		 * at once; only a failure to do so means Redis is down. */
		p->retry_at = now;
	} else {
		p->retry_at = now + p->backoff;
		p->backoff = p->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : p->backoff * 2;
		report_down(p, msg);
	}
	for (struct rp_batch *pb = p->head; pb; pb = pb->next) {
		pb->outstanding = 0;
		pb->sent_at = 0;
		if (pb->left > 0 && !(pb->wait_until && now < pb->wait_until))
			fail_rest(pb, msg);
	}
}

void pgo_redis_pipe_command(pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i,
			    int tag, int argc, const char **argv,
			    const size_t *lens)
{
	struct rp_batch *pb = b ? b->sink_state : NULL;

	if (p->broken)
		return;
	if (pgo_redis_append(&p->redis, argc, argv, lens) != PGO_OK ||
	    !expect_push(p, pb, i, tag, !b)) {
		/* The command may be queued without its expectation: the
		 * wire can no longer be trusted. */
		p->broken = true;
		return;
	}
	if (pb)
		pb->outstanding++;
}

/* Queues the commands of pb's events that have no verdict yet. */
static void send_batch(pgo_redis_pipe_t *p, struct rp_batch *pb, int64_t now)
{
	pgo_batch_t *b = pb->batch;
	char msg[64];

	pb->sent_at = now;
	for (size_t i = 0; i < b->n && pb->left > 0; i++) {
		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		p->broken = false;
		p->hooks.send(p->hooks.arg, p, b, i);
		if (p->broken) {
			p->broken = false;
			snprintf(msg, sizeof(msg), "%s: out of memory",
				 p->hooks.label);
			pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY, msg);
			lost(p, "out of memory", now);
			return;
		}
	}
}

/* Applies one reply.  Returns false when the connection is of no use
 * any more (why says why): Redis cannot serve now (LOADING, ...), the
 * reply is out of step, or the sink says so. */
static bool on_reply(pgo_redis_pipe_t *p, redisReply *reply, char *why,
		     size_t whylen)
{
	struct rp_expect e;
	pgo_batch_t *b;
	bool ok = true;

	if (!expect_pop(p, &e)) {
		snprintf(why, whylen, "reply out of step");
		ok = false;
	} else if (pgo_redis_reply_unavailable(reply)) {
		snprintf(why, whylen, "%.*s",
			 (int)(reply->len < 200 ? reply->len : 200),
			 reply->str);
		ok = false;
	} else if (e.pb && pgo_redis_reply_oom(reply)) {
		/* An outage that keeps the connection: the batch goes back
		 * untouched and the relay backs off (no attempt spent). */
		char msg[300];

		e.pb->outstanding--;
		snprintf(msg, sizeof(msg), "redis: %.*s",
			 (int)(reply->len < 250 ? reply->len : 250),
			 reply->str);
		pgo_redis_pipe_verdict(e.pb->batch, e.ev, PGO_ACK_UNAVAILABLE,
				       msg);
	} else if (e.own || e.pb) {
		b = e.pb ? e.pb->batch : NULL;
		if (e.pb)
			e.pb->outstanding--;
		ok = p->hooks.reply(p->hooks.arg, p, b, e.ev, e.tag, reply, why,
				    whylen);
		if (b && b->acks[e.ev] == PGO_ACK_NONE) {
			char msg[64];

			snprintf(msg, sizeof(msg),
				 "%s: a reply without a verdict",
				 p->hooks.label);
			pgo_redis_pipe_verdict(b, e.ev, PGO_ACK_RETRY, msg);
		}
	}
	freeReplyObject(reply);
	return ok;
}

/* Socket I/O and the replies it completed. */
static void pump(pgo_redis_pipe_t *p, int64_t now)
{
	redisReply *reply;
	char why[256];
	int rc;

	if (p->redis.state == PGO_REDIS_DOWN)
		return;
	rc = pgo_redis_io(&p->redis);
	while (rc == PGO_OK) {
		rc = pgo_redis_next_reply(&p->redis, &reply);
		if (rc != PGO_OK || !reply)
			break;
		if (!on_reply(p, reply, why, sizeof(why))) {
			lost(p, why, now);
			return;
		}
	}
	if (rc != PGO_OK)
		lost(p, p->redis.err, now);
}

/* Starts a connection when the backoff allows: once a batch came, the
 * pipeline stays connected, so that it notices Redis coming back. */
static void maybe_connect(pgo_redis_pipe_t *p, int64_t now)
{
	if (!p->active || p->redis.state != PGO_REDIS_DOWN || now < p->retry_at)
		return;
	p->generation++;
	if (pgo_redis_connect(&p->redis, p->connect_timeout_ms) != PGO_OK)
		lost(p, p->redis.err, now);
}

/* When the pipeline must be stepped again without any I/O (0: never). */
static int64_t next_deadline(const pgo_redis_pipe_t *p)
{
	int64_t at = 0;

	switch (p->redis.state) {
	case PGO_REDIS_CONNECTING:
	case PGO_REDIS_HANDSHAKE: at = p->redis.connect_deadline; break;
	case PGO_REDIS_DOWN:
		if (p->active)
			at = p->retry_at > 0 ? p->retry_at : 1;
		break;
	case PGO_REDIS_UP: break;
	}
	for (const struct rp_batch *pb = p->head; pb; pb = pb->next) {
		if (pb->outstanding)
			at = pgo_deadline_min(at, pb->sent_at + p->timeout_ms);
		else if (pb->left && !pb->sent_at && pb->wait_until)
			at = pgo_deadline_min(at, pb->wait_until);
	}
	return at;
}

/* Everything the pipeline can do now, for every batch it holds. */
static void step(pgo_redis_pipe_t *p)
{
	int64_t now = pgo_now_ms();

	pump(p, now);
	if (p->redis.state == PGO_REDIS_UP && !p->up_logged) {
		pgo_log(PGO_LOG_INFO, p->hooks.subject, "connected to %s",
			p->where);
		p->up_logged = true;
		p->backoff = BACKOFF_MIN_MS;
		p->last_err[0] = '\0';
		if (p->down) {
			p->down = false;
			pgo_sink_health(p->sink, 1, NULL);
		}
	}
	/* A batch whose replies are late: the connection is in doubt. */
	for (struct rp_batch *pb = p->head; pb; pb = pb->next) {
		if (pb->outstanding && now >= pb->sent_at + p->timeout_ms) {
			char why[96];

			snprintf(why, sizeof(why),
				 "no reply within %" PRId64 " ms",
				 p->timeout_ms);
			lost(p, why, now);
			break;
		}
	}
	maybe_connect(p, now);
	for (struct rp_batch *pb = p->head; pb; pb = pb->next) {
		if (pb->left == 0 || pb->sent_at)
			continue;
		if (p->redis.state != PGO_REDIS_DOWN) {
			send_batch(p, pb, now);
		} else if (!pb->wait_until || now >= pb->wait_until) {
			char msg[600];

			snprintf(msg, sizeof(msg), "%s %s: %s", p->hooks.label,
				 p->where,
				 p->last_err[0] ? p->last_err : "unreachable");
			fail_rest(pb, msg);
		}
	}
	/* Write what was just queued without waiting for a loop turn (and
	 * take the replies that came meanwhile: once read, the socket will
	 * not signal them again). */
	if (pgo_redis_pending_output(&p->redis))
		pump(p, now);
	finish_done(p);
	if (p->io)
		pgo_sink_io_set(p->io, p->redis.fd,
				pgo_redis_events(&p->redis));
	if (p->timer)
		pgo_sink_timer_set(p->timer, next_deadline(p));
}

static void on_io(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents; /* whatever it is, reading and writing will tell */
	step(arg);
}

static void on_timer(void *arg)
{
	step(arg);
}

/* --- the pipeline --- */

pgo_redis_pipe_t *pgo_redis_pipe_new(pgo_sink_t *sink, const pgo_conf_t *conf,
				     const pgo_redis_pipe_hooks_t *hooks,
				     pgo_error_t *err)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	int64_t timeout = pgo_conf_get_duration(conf, "sink.redis_timeout");
	int64_t connect_timeout =
		pgo_conf_get_duration(conf, "sink.redis_connect_timeout");
	int64_t wait = pgo_conf_get_duration(conf, "sink.redis_wait");
	pgo_redis_pipe_t *p;
	pgo_redis_url_t url;

	if (pgo_redis_url_parse(pgo_conf_get_str(conf, "sink.redis_url"), &url,
				err) != PGO_OK ||
	    pgo_redis_url_supported(&url, err) != PGO_OK)
		return NULL;
	if (v->idle_tx_timeout > 0 && wait + timeout >= v->idle_tx_timeout) {
		pgo_error_set(err, PGO_ERR_CONFIG, 0,
			      "sink.redis_wait + sink.redis_timeout "
			      "(%" PRId64 " ms) must be less than "
			      "database.idle_tx_timeout (%" PRId64
			      " ms): a batch waits for Redis inside its "
			      "claim transaction",
			      wait + timeout, v->idle_tx_timeout);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	p->sink = sink;
	p->hooks = *hooks;
	p->url = url;
	pgo_redis_url_describe(&p->url, p->where, sizeof(p->where));
	pgo_redis_init(&p->redis, &p->url);
	p->timeout_ms = timeout;
	p->connect_timeout_ms = connect_timeout;
	p->wait_ms = wait;
	p->backoff = BACKOFF_MIN_MS;
	pgo_error_clear(err);
	return p;
}

void pgo_redis_pipe_destroy(pgo_redis_pipe_t *p)
{
	if (!p)
		return;
	while (p->head) {
		struct rp_batch *pb = p->head;

		unlink_batch(p, pb);
		free(pb);
	}
	pgo_sink_io_del(p->io);
	pgo_sink_timer_del(p->timer);
	pgo_redis_close(&p->redis);
	free(p->q);
	free(p);
}

const char *pgo_redis_pipe_where(const pgo_redis_pipe_t *p)
{
	return p->where;
}

uint64_t pgo_redis_pipe_generation(const pgo_redis_pipe_t *p)
{
	return p->generation;
}

/* --- the sink ops --- */

/* The sink's state starts with the pointer to its pipeline. */
static pgo_redis_pipe_t *pipe_of(pgo_sink_t *sink)
{
	return *(pgo_redis_pipe_t **)pgo_sink_priv(sink);
}

int pgo_redis_pipe_sink_start(pgo_sink_t *sink)
{
	pgo_redis_pipe_t *p = pipe_of(sink);

	/* No connection yet: an unreachable Redis at start is an outage
	 * like any other, met by the first batch. */
	p->io = pgo_sink_io_add(sink, -1, 0, on_io, p);
	p->timer = pgo_sink_timer_add(sink, 0, on_timer, p);
	if (!p->io || !p->timer) {
		pgo_sink_set_error(sink, "%s: out of memory", p->hooks.label);
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

void pgo_redis_pipe_sink_stop(pgo_sink_t *sink)
{
	pgo_redis_pipe_t *p = pipe_of(sink);

	pgo_sink_io_del(p->io);
	pgo_sink_timer_del(p->timer);
	p->io = NULL;
	p->timer = NULL;
	/* Without its watcher the connection cannot be driven. */
	pgo_redis_close(&p->redis);
	p->q_len = 0;
	p->q_head = 0;
	p->up_logged = false;
	p->active = false;
	p->down = false;
	for (struct rp_batch *pb = p->head; pb; pb = pb->next) {
		pb->outstanding = 0;
		pb->sent_at = 0;
	}
}

int pgo_redis_pipe_sink_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	pgo_redis_pipe_t *p = pipe_of(sink);
	struct rp_batch *pb;
	int64_t now = pgo_now_ms();

	if (!p->io) {
		pgo_sink_set_error(sink, "%s: not started (no host loop)",
				   p->hooks.label);
		return PGO_ERR_INVALID;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	pb = calloc(1, sizeof(*pb));
	if (!pb) {
		pgo_sink_set_error(sink, "%s: out of memory", p->hooks.label);
		return PGO_ERR_NOMEM;
	}
	pb->batch = b;
	pb->left = b->n;
	pb->started = now;
	pb->wait_until = p->wait_ms ? now + p->wait_ms : 0;
	if (pb->wait_until && p->drain_until && pb->wait_until > p->drain_until)
		pb->wait_until = p->drain_until;
	pb->prev = p->tail;
	if (p->tail)
		p->tail->next = pb;
	else
		p->head = pb;
	p->tail = pb;
	b->sink_state = pb;
	p->active = true;
	step(p);
	return PGO_OK;
}

void pgo_redis_pipe_sink_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	pgo_redis_pipe_t *p = pipe_of(sink);
	struct rp_batch *pb = b->sink_state;

	if (!pb)
		return;
	expect_forget(p, pb);
	unlink_batch(p, pb);
	free(pb);
	if (p->timer)
		pgo_sink_timer_set(p->timer, next_deadline(p));
}

void pgo_redis_pipe_sink_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	pgo_redis_pipe_t *p = pipe_of(sink);

	/* Batches waiting for Redis give up by the deadline: they end with
	 * verdicts (rolled back untouched) rather than being cancelled. */
	p->drain_until = deadline_ms;
	for (struct rp_batch *pb = p->head; pb; pb = pb->next)
		if (pb->wait_until && pb->wait_until > deadline_ms)
			pb->wait_until = deadline_ms;
	if (p->timer)
		pgo_sink_timer_set(p->timer, next_deadline(p));
}
