/*
 * sink_redis.c — the Redis Streams sink: one XADD per event, pipelined on
 * one connection; an event is acknowledged when its reply is a stream
 * entry id.  With appendonly/appendfsync always on the Redis side that
 * reply means the entry is on disk.
 *
 *   XADD <stream> [MAXLEN ~ N] * id <id> topic <topic> key <key or "">
 *        type <type> payload <json> headers <json> created_at <rfc3339>
 *
 * The stream name comes from sink.redis_stream with {topic} and {queue}
 * replaced.  The entry id is Redis' own ("*"): the event id travels as the
 * field "id", which the consumer's inbox deduplicates on (an explicit
 * entry id derived from the event id would make Redis refuse events that
 * commit out of id order).
 *
 * Nothing is buffered.  When Redis cannot be reached the publish fails at
 * once (retriable verdicts) and the rows stay in the queue; the next
 * publish tries to connect again, after a backoff.  sink.redis_wait > 0
 * instead lets a batch wait that long for Redis to come back (still inside
 * the relay's claim transaction, so a crash rolls it back): across a short
 * outage the events then go out in their original order, without being
 * counted as failed attempts.
 *
 * Plugging into the relay's loop: the relay may run several publishes at
 * once (one per slot) while the sink has one connection, so replies are
 * matched to events through a FIFO of awaited replies.  Every publish
 * waits on the same epoll fd, which holds the Redis socket and an eventfd;
 * whichever publish the loop resumes first does the I/O for all of them,
 * and the eventfd wakes the others when that decided their fate.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "redis.h"

#define SUBJECT	       "sink redis"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct rs_pub;

/* A command on the wire whose reply is awaited. */
struct rs_expect {
	struct rs_pub *pub; /* NULL once that publish is gone: reply dropped */
	size_t ev;	    /* index of the event in its batch */
};

/* One publish, kept in batch->sink_state from publish() to the resume()
 * that returns PGO_OK (or cancel()). */
struct rs_pub {
	pgo_batch_t *batch;
	struct rs_pub *prev; /* the sink's live publishes, oldest first */
	struct rs_pub *next;
	size_t left;	    /* events without a verdict */
	size_t outstanding; /* replies awaited on the current connection */
	int64_t sent_at;    /* when its XADDs were queued on the current
			     * connection; 0: not on it (waiting) */
	int64_t wait_until; /* a waiting publish fails then; 0: at once */
	int64_t started;    /* for the debug line */
	bool woken;	    /* resumed (or published) since the last kick */
};

struct rs_sink {
	/* configuration, copied at configure */
	pgo_redis_url_t url;
	char where[300];    /* host:port/db, for messages */
	char *stream_tmpl;  /* sink.redis_stream */
	char *queue;	    /* relay.queue, for {queue} */
	char maxlen[24];    /* XADD MAXLEN ~ this; "" = no trimming */
	int64_t timeout_ms; /* replies of a publish */
	int64_t connect_timeout_ms;
	int64_t wait_ms; /* sink.redis_wait */

	pgo_redis_t redis;
	int epfd;	     /* what every publish waits on */
	int kickfd;	     /* eventfd inside epfd */
	int watched_fd;	     /* socket registered in epfd; -1: none */
	uint32_t watched_ev; /* its registered events */

	struct rs_expect *q; /* ring of awaited replies, in wire order */
	size_t q_head, q_len, q_cap;

	struct rs_pub *head, *tail; /* live publishes, oldest first */
	size_t unwoken; /* live publishes not resumed since the kick */
	bool kicked;	/* the eventfd is signalled */

	int64_t retry_at;   /* DOWN: the next connect may start then */
	int64_t backoff;    /* the current reconnect backoff */
	bool up_logged;	    /* "connected" was logged for this connection */
	char last_err[256]; /* the last connection error (logged once) */
	pgo_buf_t stream;   /* scratch: one expanded stream name */
};

static struct rs_sink *rs(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- the FIFO of awaited replies --- */

static bool expect_push(struct rs_sink *s, struct rs_pub *pub, size_t ev)
{
	if (s->q_len == s->q_cap) {
		size_t cap = s->q_cap ? s->q_cap * 2 : 256;
		struct rs_expect *q = malloc(cap * sizeof(*q));

		if (!q)
			return false;
		for (size_t i = 0; i < s->q_len; i++)
			q[i] = s->q[(s->q_head + i) % s->q_cap];
		free(s->q);
		s->q = q;
		s->q_cap = cap;
		s->q_head = 0;
	}
	s->q[(s->q_head + s->q_len) % s->q_cap] =
		(struct rs_expect){.pub = pub, .ev = ev};
	s->q_len++;
	return true;
}

static bool expect_pop(struct rs_sink *s, struct rs_expect *e)
{
	if (s->q_len == 0)
		return false;
	*e = s->q[s->q_head];
	s->q_head = (s->q_head + 1) % s->q_cap;
	s->q_len--;
	return true;
}

/* Replies for pub will be dropped when they come. */
static void expect_forget(struct rs_sink *s, const struct rs_pub *pub)
{
	for (size_t i = 0; i < s->q_len; i++) {
		struct rs_expect *e = &s->q[(s->q_head + i) % s->q_cap];

		if (e->pub == pub)
			e->pub = NULL;
	}
}

/* --- waking the publishes --- */

static void kick(struct rs_sink *s)
{
	uint64_t one = 1;

	s->unwoken = 0;
	for (struct rs_pub *p = s->head; p; p = p->next) {
		p->woken = false;
		s->unwoken++;
	}
	if (s->unwoken && !s->kicked &&
	    write(s->kickfd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		s->kicked = true;
}

/* pub has seen the current state; the last one to do so clears the kick. */
static void mark_woken(struct rs_sink *s, struct rs_pub *pub)
{
	uint64_t n;

	if (!pub->woken) {
		pub->woken = true;
		s->unwoken--;
	}
	if (s->unwoken == 0 && s->kicked) {
		if (read(s->kickfd, &n, sizeof(n)) < 0) {
			/* EAGAIN: nothing to drain */
		}
		s->kicked = false;
	}
}

static void unlink_pub(struct rs_sink *s, struct rs_pub *pub)
{
	mark_woken(s, pub);
	if (pub->prev)
		pub->prev->next = pub->next;
	else
		s->head = pub->next;
	if (pub->next)
		pub->next->prev = pub->prev;
	else
		s->tail = pub->prev;
	pub->prev = pub->next = NULL;
}

/* Registers the socket in the epoll set with the events it waits for. */
static void watch(struct rs_sink *s)
{
	short want = pgo_redis_events(&s->redis);
	uint32_t ev = (want & POLLIN ? EPOLLIN : 0u) |
		      (want & POLLOUT ? EPOLLOUT : 0u);
	int fd = s->redis.fd;
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = ev;
	if (fd != s->watched_fd) {
		if (s->watched_fd >= 0)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->watched_fd, NULL);
		s->watched_fd = -1;
		if (fd >= 0 && ev &&
		    epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) == 0) {
			s->watched_fd = fd;
			s->watched_ev = ev;
		}
	} else if (fd >= 0 && ev != s->watched_ev) {
		if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &e) == 0)
			s->watched_ev = ev;
	}
}

/* --- verdicts --- */

static void verdict(struct rs_pub *pub, size_t i, pgo_ack_t ack,
		    const char *msg)
{
	pgo_batch_t *b = pub->batch;

	if (b->acks[i] != PGO_ACK_NONE)
		return;
	if (ack == PGO_ACK_OK)
		b->acks[i] = PGO_ACK_OK;
	else
		pgo_batch_fail(b, i, ack, msg);
	pub->left--;
}

/* Redis is unreachable: the events are not at fault, so they spend no
 * attempt; the relay rolls the batch back and pauses. */
static void fail_rest(struct rs_pub *pub, const char *msg)
{
	for (size_t i = 0; i < pub->batch->n && pub->left > 0; i++)
		verdict(pub, i, PGO_ACK_UNAVAILABLE, msg);
}

/* --- the connection --- */

/* The connection failed or was lost: every XADD in flight is in doubt.
 * Publishes still allowed to wait will send their unacked events again on
 * the next connection (Redis may hold some of them already: duplicates,
 * which the consumer's inbox drops); the others fail now. */
static void lost(struct rs_sink *s, const char *why, int64_t now)
{
	bool idle = s->q_len == 0 && s->up_logged;
	char msg[600];

	if (s->watched_fd >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->watched_fd, NULL);
	s->watched_fd = -1;
	pgo_redis_close(&s->redis);
	s->q_len = 0;
	s->q_head = 0;
	if (s->up_logged) {
		pgo_log(PGO_LOG_WARN, SUBJECT, "lost %s: %s", s->where, why);
	} else if (strcmp(s->last_err, why) != 0) {
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"cannot reach %s: %s (retrying with backoff)", s->where,
			why);
	} else {
		pgo_log(PGO_LOG_DEBUG, SUBJECT, "still cannot reach %s: %s",
			s->where, why);
	}
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	s->up_logged = false;
	if (idle) {
		/* A server restart noticed on an idle connection: reconnect
		 * at once rather than fail the batch at hand. */
		s->retry_at = now;
	} else {
		s->retry_at = now + s->backoff;
		s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : s->backoff * 2;
	}
	snprintf(msg, sizeof(msg), "redis %s: %s", s->where, why);
	for (struct rs_pub *p = s->head; p; p = p->next) {
		p->outstanding = 0;
		p->sent_at = 0;
		if (p->left > 0 && !(p->wait_until && now < p->wait_until))
			fail_rest(p, msg);
	}
	kick(s);
}

/* The stream of one event: the template with {topic} and {queue}. */
static const char *stream_of(struct rs_sink *s, const pgo_event_t *ev)
{
	const char *t = s->stream_tmpl;

	pgo_buf_reset(&s->stream);
	pgo_buf_puts(&s->stream, "");
	while (*t) {
		if (strncmp(t, "{topic}", 7) == 0) {
			pgo_buf_puts(&s->stream, ev->topic);
			t += 7;
		} else if (strncmp(t, "{queue}", 7) == 0) {
			pgo_buf_puts(&s->stream, s->queue);
			t += 7;
		} else {
			pgo_buf_append(&s->stream, t++, 1);
		}
	}
	return s->stream.oom ? NULL : s->stream.data;
}

/* Queues the XADDs of pub's events that have no verdict yet. */
static void send_pub(struct rs_sink *s, struct rs_pub *pub, int64_t now)
{
	pgo_batch_t *b = pub->batch;

	pub->sent_at = now;
	for (size_t i = 0; i < b->n; i++) {
		const pgo_event_t *ev = &b->events[i];
		const char *argv[20];
		size_t lens[20];
		char id[24];
		int argc = 0;

		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		snprintf(id, sizeof(id), "%" PRId64, ev->id);
		argv[argc++] = "XADD";
		if (!(argv[argc++] = stream_of(s, ev))) {
			verdict(pub, i, PGO_ACK_RETRY, "redis: out of memory");
			continue;
		}
		if (s->maxlen[0]) {
			argv[argc++] = "MAXLEN";
			argv[argc++] = "~";
			argv[argc++] = s->maxlen;
		}
		argv[argc++] = "*";
		argv[argc++] = "id";
		argv[argc++] = id;
		argv[argc++] = "topic";
		argv[argc++] = ev->topic;
		argv[argc++] = "key";
		argv[argc++] = ev->key ? ev->key : "";
		argv[argc++] = "type";
		argv[argc++] = ev->type;
		argv[argc++] = "payload";
		argv[argc++] = ev->payload;
		argv[argc++] = "headers";
		argv[argc++] = ev->headers;
		argv[argc++] = "created_at";
		argv[argc++] = ev->created_at;
		for (int k = 0; k < argc; k++)
			lens[k] = strlen(argv[k]);
		if (pgo_redis_append(&s->redis, argc, argv, lens) != PGO_OK ||
		    !expect_push(s, pub, i)) {
			/* Out of memory: the command may be queued without its
			 * expectation, so the wire can no longer be trusted. */
			verdict(pub, i, PGO_ACK_RETRY, "redis: out of memory");
			lost(s, "out of memory", now);
			return;
		}
		pub->outstanding++;
	}
}

/* Applies one reply.  Returns false when it says Redis cannot serve now:
 * the caller drops the connection. */
static bool on_reply(struct rs_sink *s, redisReply *reply)
{
	struct rs_expect e;
	char msg[300];

	if (!expect_pop(s, &e)) {
		freeReplyObject(reply);
		return false; /* a reply nobody asked for: out of step */
	}
	if (pgo_redis_reply_unavailable(reply)) {
		snprintf(s->last_err, sizeof(s->last_err), "%.*s",
			 (int)(reply->len < 200 ? reply->len : 200),
			 reply->str);
		freeReplyObject(reply);
		return false;
	}
	if (e.pub) {
		e.pub->outstanding--;
		if (reply->type == REDIS_REPLY_STRING ||
		    reply->type == REDIS_REPLY_STATUS) {
			verdict(e.pub, e.ev, PGO_ACK_OK, NULL);
		} else if (reply->type == REDIS_REPLY_ERROR) {
			snprintf(msg, sizeof(msg), "redis: XADD: %.*s",
				 (int)(reply->len < 250 ? reply->len : 250),
				 reply->str);
			verdict(e.pub, e.ev, PGO_ACK_RETRY, msg);
		} else {
			verdict(e.pub, e.ev, PGO_ACK_RETRY,
				"redis: XADD: unexpected reply type");
		}
	}
	freeReplyObject(reply);
	return true;
}

/* Starts a connection when publishes wait for one and the backoff allows. */
static void maybe_connect(struct rs_sink *s, int64_t now)
{
	bool waiting = false;

	for (struct rs_pub *p = s->head; p && !waiting; p = p->next)
		waiting = p->left > 0 && !p->sent_at;
	if (!waiting || s->redis.state != PGO_REDIS_DOWN || now < s->retry_at)
		return;
	if (pgo_redis_connect(&s->redis, s->connect_timeout_ms) != PGO_OK) {
		char why[sizeof(s->redis.err)];

		memcpy(why, s->redis.err, sizeof(why));
		lost(s, why, now);
	}
}

/* Socket I/O and the replies it completed. */
static void pump(struct rs_sink *s, int64_t now)
{
	redisReply *reply;
	int rc;

	if (s->redis.state == PGO_REDIS_DOWN)
		return;
	rc = pgo_redis_io(&s->redis);
	while (rc == PGO_OK) {
		rc = pgo_redis_next_reply(&s->redis, &reply);
		if (rc != PGO_OK || !reply)
			break;
		if (!on_reply(s, reply)) {
			/* lost() rewrites last_err: pass it a copy. */
			char why[sizeof(s->last_err)];

			snprintf(why, sizeof(why), "%s",
				 s->last_err[0] ? s->last_err
						: "reply out of step");
			lost(s, why, now);
			return;
		}
	}
	if (rc != PGO_OK) {
		char why[sizeof(s->redis.err)];

		memcpy(why, s->redis.err, sizeof(why));
		lost(s, why, now);
	}
}

/* Everything the sink can do now, for every live publish. */
static void step(struct rs_sink *s)
{
	int64_t now = pgo_now_ms();
	bool any_done = false;

	pump(s, now);
	if (s->redis.state == PGO_REDIS_UP && !s->up_logged) {
		pgo_log(PGO_LOG_INFO, SUBJECT, "connected to %s", s->where);
		s->up_logged = true;
		s->backoff = BACKOFF_MIN_MS;
		s->last_err[0] = '\0';
	}
	/* A publish whose replies are late: the connection is in doubt. */
	for (struct rs_pub *p = s->head; p; p = p->next) {
		if (p->outstanding && now >= p->sent_at + s->timeout_ms) {
			char why[96];

			snprintf(why, sizeof(why),
				 "no reply within %" PRId64 " ms",
				 s->timeout_ms);
			lost(s, why, now);
			break;
		}
	}
	maybe_connect(s, now);
	for (struct rs_pub *p = s->head; p; p = p->next) {
		if (p->left == 0 || p->sent_at)
			continue;
		if (s->redis.state != PGO_REDIS_DOWN) {
			send_pub(s, p, now);
		} else if (!p->wait_until || now >= p->wait_until) {
			char msg[600];

			snprintf(msg, sizeof(msg), "redis %s: %s", s->where,
				 s->last_err[0] ? s->last_err : "unreachable");
			fail_rest(p, msg);
		}
	}
	/* Write what was just queued without waiting for a poll round (and
	 * take the replies that came meanwhile: once read, the socket will
	 * not signal them again). */
	if (pgo_redis_pending_output(&s->redis))
		pump(s, now);
	watch(s);
	for (struct rs_pub *p = s->head; p; p = p->next)
		any_done |= p->left == 0;
	if (any_done)
		kick(s);
}

/* When pub must be looked at again without any I/O happening. */
static int64_t deadline_of(const struct rs_sink *s, const struct rs_pub *pub)
{
	int64_t d;

	if (pub->sent_at) {
		d = pub->sent_at + s->timeout_ms;
		if (s->redis.state == PGO_REDIS_CONNECTING ||
		    s->redis.state == PGO_REDIS_HANDSHAKE)
			d = s->redis.connect_deadline < d
				    ? s->redis.connect_deadline
				    : d;
		return d;
	}
	d = pub->wait_until;
	if (s->redis.state == PGO_REDIS_DOWN && (!d || s->retry_at < d))
		d = s->retry_at;
	return d;
}

/* Ends a publish that has every verdict. */
static int finish(struct rs_sink *s, pgo_batch_t *b, struct rs_pub *pub)
{
	pgo_log(PGO_LOG_DEBUG, SUBJECT, "batch of %zu done in %" PRId64 " ms",
		b->n, pgo_now_ms() - pub->started);
	unlink_pub(s, pub);
	free(pub);
	b->sink_state = NULL;
	return PGO_OK;
}

static int wait_result(struct rs_sink *s, struct rs_pub *pub, int *fd,
		       short *events, int64_t *deadline_ms)
{
	*fd = s->epfd;
	*events = POLLIN;
	*deadline_ms = deadline_of(s, pub);
	return PGO_ERR_AGAIN;
}

/* --- ops --- */

static int redis_publish(pgo_sink_t *sink, pgo_batch_t *b, int *fd,
			 short *events, int64_t *deadline_ms)
{
	struct rs_sink *s = rs(sink);
	struct rs_pub *pub;
	int64_t now = pgo_now_ms();

	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (b->n == 0)
		return PGO_OK;
	pub = calloc(1, sizeof(*pub));
	if (!pub) {
		pgo_sink_set_error(sink, "redis: out of memory");
		return PGO_ERR_NOMEM;
	}
	pub->batch = b;
	pub->left = b->n;
	pub->started = now;
	pub->wait_until = s->wait_ms ? now + s->wait_ms : 0;
	pub->woken = true;
	pub->prev = s->tail;
	if (s->tail)
		s->tail->next = pub;
	else
		s->head = pub;
	s->tail = pub;
	b->sink_state = pub;
	step(s);
	mark_woken(s, pub);
	if (pub->left == 0)
		return finish(s, b, pub);
	return wait_result(s, pub, fd, events, deadline_ms);
}

static int redis_resume(pgo_sink_t *sink, pgo_batch_t *b, short revents,
			int *fd, short *events, int64_t *deadline_ms)
{
	struct rs_sink *s = rs(sink);
	struct rs_pub *pub = b->sink_state;

	(void)revents; /* the epoll set knows better what is ready */
	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (!pub) {
		pgo_sink_set_error(
			sink, "redis: resume without a publish in progress");
		return PGO_ERR_INVALID;
	}
	step(s);
	mark_woken(s, pub);
	if (pub->left == 0)
		return finish(s, b, pub);
	return wait_result(s, pub, fd, events, deadline_ms);
}

static void redis_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct rs_sink *s = rs(sink);
	struct rs_pub *pub = b->sink_state;

	if (!pub)
		return;
	expect_forget(s, pub);
	unlink_pub(s, pub);
	free(pub);
	b->sink_state = NULL;
}

static void redis_close(pgo_sink_t *sink)
{
	struct rs_sink *s = rs(sink);

	if (!s)
		return;
	while (s->head) {
		struct rs_pub *p = s->head;

		unlink_pub(s, p);
		p->batch->sink_state = NULL;
		free(p);
	}
	pgo_redis_close(&s->redis);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->kickfd >= 0)
		close(s->kickfd);
	free(s->q);
	free(s->stream_tmpl);
	free(s->queue);
	pgo_buf_free(&s->stream);
	free(s);
	sink->priv = NULL;
}

/* Checks a stream template: only {topic} and {queue} are placeholders. */
static int check_template(const char *t, pgo_error_t *err)
{
	if (!*t)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.redis_stream is empty");
	for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
		if (strncmp(p, "{topic}", 7) != 0 &&
		    strncmp(p, "{queue}", 7) != 0)
			return pgo_error_set(
				err, PGO_ERR_CONFIG, 0,
				"sink.redis_stream \"%s\": unknown "
				"placeholder at \"%.12s\" (use "
				"{topic} and {queue})",
				t, p);
	}
	return PGO_OK;
}

int pgo_sink_redis_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *url = pgo_conf_get_str(conf, "sink.redis_url");
	const char *stream = pgo_conf_get_str(conf, "sink.redis_stream");
	int maxlen = pgo_conf_get_int(conf, "sink.redis_maxlen");
	int64_t timeout_ms = pgo_conf_get_duration(conf, "sink.redis_timeout");
	int64_t connect_timeout_ms =
		pgo_conf_get_duration(conf, "sink.redis_connect_timeout");
	int64_t wait_ms = pgo_conf_get_duration(conf, "sink.redis_wait");
	struct rs_sink *s;
	pgo_error_t err;
	struct epoll_event e;

	if (pgo_redis_url_parse(url, &(pgo_redis_url_t){0}, &err) !=
		    PGO_OK ||
	    check_template(stream, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return PGO_ERR_CONFIG;
	}
	if (v->idle_tx_timeout > 0 &&
	    wait_ms + timeout_ms >= v->idle_tx_timeout) {
		pgo_sink_set_error(sink,
				   "sink.redis_wait + sink.redis_timeout "
				   "(%" PRId64 " ms) must be less than "
				   "database.idle_tx_timeout (%" PRId64
				   " ms): a batch waits for Redis inside its "
				   "claim transaction",
				   wait_ms + timeout_ms,
				   v->idle_tx_timeout);
		return PGO_ERR_CONFIG;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "redis: out of memory");
		return PGO_ERR_NOMEM;
	}
	s->epfd = s->kickfd = s->watched_fd = -1;
	pgo_buf_init(&s->stream);
	pgo_redis_url_parse(url, &s->url, NULL);
	pgo_redis_init(&s->redis, &s->url);
	redis_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	if (pgo_redis_url_supported(&s->url, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return PGO_ERR_CONFIG;
	}
	pgo_redis_url_describe(&s->url, s->where, sizeof(s->where));
	s->stream_tmpl = strdup(stream);
	s->queue = strdup(v->queue);
	if (maxlen > 0)
		snprintf(s->maxlen, sizeof(s->maxlen), "%d", maxlen);
	s->timeout_ms = timeout_ms;
	s->connect_timeout_ms = connect_timeout_ms;
	s->wait_ms = wait_ms;
	s->backoff = BACKOFF_MIN_MS;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	if (!s->stream_tmpl || !s->queue || s->epfd < 0 || s->kickfd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->kickfd, &e) < 0) {
		pgo_sink_set_error(sink, "redis: %s",
				   errno ? strerror(errno) : "out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int redis_open(pgo_sink_t *sink)
{
	struct rs_sink *s = rs(sink);

	if (!s) {
		pgo_sink_set_error(sink, "redis sink: not configured");
		return PGO_ERR_CONFIG;
	}
	/* No connection yet: an unreachable Redis at start is an outage
	 * like any other, handled by the first publish. */
	pgo_log(PGO_LOG_INFO, SUBJECT, "publishing to %s, stream %s%s%s",
		s->where, s->stream_tmpl, s->maxlen[0] ? ", MAXLEN ~ " : "",
		s->maxlen);
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_redis_ops = {
	.name = "redis",
	.open = redis_open,
	.publish = redis_publish,
	.resume = redis_resume,
	.cancel = redis_cancel,
	.close = redis_close,
};
