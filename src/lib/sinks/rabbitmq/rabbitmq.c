/*
 * sinks/rabbitmq/rabbitmq.c — the rabbitmq sink: one AMQP 0-9-1 connection
 * (rabbitmq-c), one channel in confirm mode, every event a persistent message
 * published with mandatory set; an event is acknowledged when the broker's
 * basic.ack for its delivery tag arrives, which for a durable queue means
 * the message is on disk (and, for a quorum queue, on a majority).
 *
 *   exchange     sink.amqp_exchange
 *   routing key  sink.amqp_routing_key, {topic} and {queue} replaced
 *   properties   message_id = the event id, type, timestamp (created_at,
 *                seconds), content_type application/json, delivery_mode 2,
 *                app_id pgoutbox
 *   headers      the event's headers object, then topic, key (when the
 *                event has one) and created_at unless the event's headers
 *                have them; with sink.amqp_format = cloudevents the
 *                cloudEvents_* headers of the CloudEvents AMQP binding
 *   body         the payload, the JSON text as stored
 *
 * Verdicts: basic.ack is OK; basic.nack (a queue with x-overflow
 * reject-publish is full, or the broker failed to store it) is RETRY; a
 * basic.return (no queue is bound for the routing key) is RETRY with the
 * broker's reply text, so the event dead-letters after its attempts
 * instead of vanishing; a channel error (an exchange that does not exist)
 * fails the events in flight as RETRY with the broker's text.  A lost
 * connection, confirms that do not come within sink.amqp_timeout and
 * connection.blocked (a memory or disk alarm) are outages: the events in
 * doubt are UNAVAILABLE, the host is told through pgo_sink_health(), and
 * the sink reconnects (or waits for connection.unblocked) by itself.
 *
 * Threads: rabbitmq-c 0.11 connects and logs in only with blocking calls,
 * so a short-lived thread does the TCP/TLS connect, the login, channel.open
 * and confirm.select, and hands the ready connection to the loop through a
 * pipe it writes once.  Everything else runs on the loop's thread: publishes
 * go out from submit(), and the socket watcher reads the broker's frames
 * without blocking (amqp_simple_wait_frame_noblock with a zero timeout).
 * The timer serves the heartbeats, the confirm deadline and the reconnect
 * backoff.  A publish waits only when the socket's send buffer is full
 * (rabbitmq-c then polls the socket, at most the connection's RPC timeout,
 * sink.amqp_timeout).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <jansson.h>

#include "sinks/rabbitmq/rabbitmq.h"

#define SUBJECT	       "sink rabbitmq"
#define CHANNEL	       1
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* The connection's states. */
enum am_state {
	AM_DOWN,       /* no connection; the next try at retry_at */
	AM_CONNECTING, /* the connect thread runs */
	AM_UP	       /* logged in, channel in confirm mode */
};

struct am_batch;

/* A published message whose confirm is awaited; delivery tags are
 * consecutive, so the ring's head has tag base_tag. */
struct am_pend {
	struct am_batch *ab; /* NULL: decided already, or batch cancelled */
	size_t ev;	     /* index of the event in its batch */
	int64_t id;	     /* the event id (matches a basic.return) */
	bool confirmed;	     /* its ack or nack came */
};

/* One batch taken by submit(), in batch->sink_state until done or
 * cancelled. */
struct am_batch {
	pgo_batch_t *batch;
	struct am_batch *prev, *next; /* the sink's batches, oldest first */
	size_t left;		      /* events without a verdict */
	int64_t deadline;	      /* confirms due; 0: not published yet */
	int64_t started;
};

/* What the connect thread gets and gives back. */
struct am_connect {
	pthread_t thread;
	int pipe[2];		      /* the thread writes one byte when done */
	pthread_mutex_t mu;	      /* guards fd and abort */
	int fd;			      /* the thread's socket while it logs in */
	bool abort;		      /* stopping: the thread gives up */
	amqp_connection_state_t conn; /* ready when ok */
	bool ok;
	char err[300];
};

struct am_sink {
	/* configuration, copied at configure */
	char *url_buf;			 /* amqp_parse_url's fields point in */
	struct amqp_connection_info url; /* host, port, vhost, user, ssl */
	char where[300];		 /* host:port/vhost, for messages */
	char *exchange;
	char *rkey_tmpl;
	char *queue; /* relay.queue, for {queue} */
	bool cloudevents;
	int64_t timeout_ms;
	int64_t connect_timeout_ms;
	int heartbeat_s;
	int frame_max;
	char *ca, *cert, *key;
	bool verify;

	pgo_sink_t *sink;
	pgo_sink_io_t *io;	 /* the socket's or the pipe's watcher */
	pgo_sink_timer_t *timer; /* the nearest deadline */
	enum am_state state;
	amqp_connection_state_t conn;  /* AM_UP */
	struct am_connect *connecting; /* AM_CONNECTING */
	bool blocked;		       /* connection.blocked came */
	bool down;		       /* the host was told it is down */
	bool up_logged;
	int64_t retry_at; /* AM_DOWN: the next connect then */
	int64_t backoff;
	int64_t tick_at; /* next heartbeat service */
	int64_t drain_until;
	char last_err[300];

	struct am_pend *q; /* ring of awaited confirms */
	size_t q_head, q_len, q_cap;
	uint64_t base_tag; /* delivery tag of q[q_head] */

	/* a basic.return being read: its header, then its body frames */
	int ret_stage; /* 0 none, 1 header awaited, 2 body */
	uint64_t ret_body_left;
	char ret_why[400];

	struct am_batch *head, *tail;
	pgo_buf_t rkey; /* scratch: one expanded routing key */
};

static struct am_sink *am(pgo_sink_t *sink)
{
	return sink->priv;
}

static void step(struct am_sink *s);

/* --- verdicts and batches --- */

static void verdict(struct am_batch *ab, size_t i, pgo_ack_t ack,
		    const char *msg)
{
	if (pgo_batch_set(ab->batch, i, ack, msg))
		ab->left--;
}

static void unlink_batch(struct am_sink *s, struct am_batch *ab)
{
	if (ab->prev)
		ab->prev->next = ab->next;
	else
		s->head = ab->next;
	if (ab->next)
		ab->next->prev = ab->prev;
	else
		s->tail = ab->prev;
	ab->batch->sink_state = NULL;
}

/* Forgets pb's messages in the ring: their confirms are ignored. */
static void pend_forget(struct am_sink *s, const struct am_batch *ab)
{
	for (size_t k = 0; k < s->q_len; k++) {
		struct am_pend *e = &s->q[(s->q_head + k) % s->q_cap];

		if (e->ab == ab)
			e->ab = NULL;
	}
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
static void finish_done(struct am_sink *s)
{
	for (;;) {
		struct am_batch *ab = s->head;
		pgo_batch_t *b;

		while (ab && ab->left > 0)
			ab = ab->next;
		if (!ab)
			return;
		b = ab->batch;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"batch of %zu done in %" PRId64 " ms", b->n,
			pgo_now_ms() - ab->started);
		pend_forget(s, ab);
		unlink_batch(s, ab);
		free(ab);
		pgo_sink_done(s->sink, b);
	}
}

/* Every event in doubt (published, or waiting to be) gets ack. */
static void fail_all(struct am_sink *s, pgo_ack_t ack, const char *msg)
{
	for (struct am_batch *ab = s->head; ab; ab = ab->next) {
		pgo_batch_fail_rest(ab->batch, ack, msg);
		ab->left = 0;
	}
	for (size_t k = 0; k < s->q_len; k++)
		s->q[(s->q_head + k) % s->q_cap].ab = NULL;
}

/* --- the ring of awaited confirms --- */

static bool pend_push(struct am_sink *s, struct am_batch *ab, size_t ev,
		      int64_t id)
{
	if (s->q_len == s->q_cap) {
		size_t cap = s->q_cap ? s->q_cap * 2 : 256;
		struct am_pend *q = malloc(cap * sizeof(*q));

		if (!q)
			return false;
		for (size_t k = 0; k < s->q_len; k++)
			q[k] = s->q[(s->q_head + k) % s->q_cap];
		free(s->q);
		s->q = q;
		s->q_cap = cap;
		s->q_head = 0;
	}
	s->q[(s->q_head + s->q_len) % s->q_cap] =
		(struct am_pend){.ab = ab, .ev = ev, .id = id};
	s->q_len++;
	return true;
}

static void pend_clear(struct am_sink *s)
{
	s->q_len = 0;
	s->q_head = 0;
	s->base_tag = 1;
}

/* basic.ack (ok) or basic.nack for tag, or every tag up to it. */
static void on_confirm(struct am_sink *s, uint64_t tag, bool multiple, bool ok)
{
	static const char nacked[] =
		"rabbitmq: the broker nacked the message (a queue refused "
		"it: x-overflow reject-publish and full, or the broker "
		"could not store it)";
	uint64_t from = multiple ? s->base_tag : tag;

	for (uint64_t t = from; t <= tag; t++) {
		struct am_pend *e;

		if (t < s->base_tag || t - s->base_tag >= s->q_len)
			continue;
		e = &s->q[(s->q_head + (t - s->base_tag)) % s->q_cap];
		e->confirmed = true;
		if (e->ab) {
			verdict(e->ab, e->ev, ok ? PGO_ACK_OK : PGO_ACK_RETRY,
				ok ? NULL : nacked);
			e->ab = NULL;
		}
	}
	while (s->q_len > 0 && s->q[s->q_head].confirmed) {
		s->q_head = (s->q_head + 1) % s->q_cap;
		s->q_len--;
		s->base_tag++;
	}
}

/* The header of a returned message names its event by message_id. */
static void on_returned(struct am_sink *s, const amqp_basic_properties_t *p)
{
	char id[32];
	int64_t want;

	if (!(p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ||
	    p->message_id.len >= sizeof(id))
		return;
	memcpy(id, p->message_id.bytes, p->message_id.len);
	id[p->message_id.len] = '\0';
	want = strtoll(id, NULL, 10);
	for (size_t k = 0; k < s->q_len; k++) {
		struct am_pend *e = &s->q[(s->q_head + k) % s->q_cap];

		if (e->ab && e->id == want) {
			verdict(e->ab, e->ev, PGO_ACK_RETRY, s->ret_why);
			e->ab = NULL;
			return;
		}
	}
}

/* --- the connection --- */

static void report_down(struct am_sink *s, const char *msg)
{
	if (s->down)
		return;
	s->down = true;
	pgo_sink_health(s->sink, 0, msg);
}

static void report_up(struct am_sink *s)
{
	if (!s->down)
		return;
	s->down = false;
	pgo_sink_health(s->sink, 1, NULL);
}

static void close_conn(struct am_sink *s)
{
	if (s->conn) {
		amqp_destroy_connection(s->conn);
		s->conn = NULL;
	}
	if (s->io)
		pgo_sink_io_set(s->io, -1, 0);
	s->blocked = false;
	s->ret_stage = 0;
	pend_clear(s);
	s->state = AM_DOWN;
}

/* The connection failed or was lost: what is in flight is in doubt
 * (UNAVAILABLE: no attempt spent; the broker may hold some of it, which
 * the consumer's inbox drops by message_id). */
static void lost(struct am_sink *s, const char *reason, bool outage)
{
	char why[300], msg[700];
	int64_t now = pgo_now_ms();

	snprintf(why, sizeof(why), "%s", reason);
	if (s->up_logged)
		pgo_log(PGO_LOG_WARN, SUBJECT, "lost %s: %s", s->where, why);
	else if (strcmp(s->last_err, why) != 0)
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"cannot reach %s: %s (retrying with backoff)", s->where,
			why);
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	s->up_logged = false;
	close_conn(s);
	snprintf(msg, sizeof(msg), "rabbitmq %s: %s", s->where, why);
	fail_all(s, outage ? PGO_ACK_UNAVAILABLE : PGO_ACK_RETRY, msg);
	if (outage) {
		s->retry_at = now + s->backoff;
		s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : s->backoff * 2;
		report_down(s, msg);
	} else {
		s->retry_at = now;
	}
}

/* One line from an RPC reply of rabbitmq-c. */
static void reply_text(amqp_rpc_reply_t r, const char *what, char *out,
		       size_t size)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL: snprintf(out, size, "%s: ok", what); break;
	case AMQP_RESPONSE_NONE:
		snprintf(out, size, "%s: no reply", what);
		break;
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		snprintf(out, size, "%s: %s", what,
			 amqp_error_string2(r.library_error));
		break;
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
			amqp_connection_close_t *m = r.reply.decoded;

			snprintf(out, size, "%s: %.*s", what,
				 (int)m->reply_text.len,
				 (const char *)m->reply_text.bytes);
		} else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
			amqp_channel_close_t *m = r.reply.decoded;

			snprintf(out, size, "%s: %.*s", what,
				 (int)m->reply_text.len,
				 (const char *)m->reply_text.bytes);
		} else {
			snprintf(out, size, "%s: server error (method %#x)",
				 what, (unsigned)r.reply.id);
		}
		break;
	}
}

/* The connect thread is done with its socket (closed or handed over):
 * connect_abort may not shut it down any more. */
static void forget_fd(struct am_connect *c)
{
	pthread_mutex_lock(&c->mu);
	c->fd = -1;
	pthread_mutex_unlock(&c->mu);
}

/* The connect thread: blocking calls, bounded by the timeouts. */
static void *connect_main(void *arg)
{
	struct am_sink *s = arg;
	struct am_connect *c = s->connecting;
	struct timeval tv = {.tv_sec = s->connect_timeout_ms / 1000,
			     .tv_usec = (s->connect_timeout_ms % 1000) * 1000};
	struct timeval rpc = {.tv_sec = s->timeout_ms / 1000,
			      .tv_usec = (s->timeout_ms % 1000) * 1000};
	amqp_connection_state_t conn = amqp_new_connection();
	amqp_socket_t *sock = NULL;
	amqp_table_entry_t caps[2], props[2];
	amqp_table_t client;
	amqp_rpc_reply_t r;
	int st;
	char one = 1;

	if (!conn) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		goto out;
	}
	sock = s->url.ssl ? amqp_ssl_socket_new(conn)
			  : amqp_tcp_socket_new(conn);
	if (!sock) {
		snprintf(c->err, sizeof(c->err), "cannot make a socket");
		goto fail;
	}
	if (s->url.ssl) {
		amqp_ssl_socket_set_verify_peer(sock, s->verify);
		amqp_ssl_socket_set_verify_hostname(sock, s->verify);
		if (*s->ca && (st = amqp_ssl_socket_set_cacert(sock, s->ca))) {
			snprintf(c->err, sizeof(c->err), "sink.amqp_ca %s: %s",
				 s->ca, amqp_error_string2(st));
			goto fail;
		}
		if (*s->cert &&
		    (st = amqp_ssl_socket_set_key(sock, s->cert, s->key))) {
			snprintf(c->err, sizeof(c->err),
				 "sink.amqp_cert/amqp_key: %s",
				 amqp_error_string2(st));
			goto fail;
		}
	}
	amqp_set_handshake_timeout(conn, &tv);
	amqp_set_rpc_timeout(conn, &rpc);
	st = amqp_socket_open_noblock(sock, s->url.host, s->url.port, &tv);
	if (st) {
		snprintf(c->err, sizeof(c->err), "connect: %s",
			 amqp_error_string2(st));
		goto fail;
	}
	/* From here a stop may shut the socket down (connect_abort): a
	 * broker that accepted the connection but answers nothing must not
	 * hold the relay for the login's timeouts. */
	pthread_mutex_lock(&c->mu);
	if (!c->abort)
		c->fd = amqp_socket_get_sockfd(sock);
	pthread_mutex_unlock(&c->mu);
	if (c->fd < 0) {
		snprintf(c->err, sizeof(c->err), "stopped while connecting");
		goto fail;
	}
	/* Ask for connection.blocked and a close on a failed login. */
	caps[0] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("connection.blocked"),
		.value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}};
	caps[1] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("authentication_failure_close"),
		.value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}};
	props[0] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("capabilities"),
		.value = {.kind = AMQP_FIELD_KIND_TABLE,
			  .value.table = {.num_entries = 2, .entries = caps}}};
	props[1] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("connection_name"),
		.value = {.kind = AMQP_FIELD_KIND_UTF8,
			  .value.bytes = amqp_cstring_bytes("pgoutbox relay")}};
	client = (amqp_table_t){.num_entries = 2, .entries = props};
	r = amqp_login_with_properties(
		conn, s->url.vhost, 0, s->frame_max, s->heartbeat_s, &client,
		AMQP_SASL_METHOD_PLAIN, s->url.user, s->url.password);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		reply_text(r, "login", c->err, sizeof(c->err));
		goto fail;
	}
	amqp_channel_open(conn, CHANNEL);
	r = amqp_get_rpc_reply(conn);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		reply_text(r, "channel.open", c->err, sizeof(c->err));
		goto fail;
	}
	amqp_confirm_select(conn, CHANNEL);
	r = amqp_get_rpc_reply(conn);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		reply_text(r, "confirm.select", c->err, sizeof(c->err));
		goto fail;
	}
	forget_fd(c);
	c->conn = conn;
	c->ok = true;
	goto out;
fail:
	forget_fd(c);
	amqp_destroy_connection(conn);
out:
	while (write(c->pipe[1], &one, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* Waits for the connect thread (it has written or is about to). */
static void connect_join(struct am_sink *s)
{
	struct am_connect *c = s->connecting;

	if (!c)
		return;
	pthread_join(c->thread, NULL);
	close(c->pipe[0]);
	close(c->pipe[1]);
	pthread_mutex_destroy(&c->mu);
	s->connecting = NULL;
	if (c->conn && s->conn != c->conn)
		amqp_destroy_connection(c->conn);
	free(c);
}

/* Stopping: a login in progress ends now (its socket shut down) rather
 * than at sink.amqp_connect_timeout or sink.amqp_timeout. */
static void connect_abort(struct am_sink *s)
{
	struct am_connect *c = s->connecting;

	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->abort = true;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->mu);
}

static void start_connect(struct am_sink *s)
{
	struct am_connect *c = calloc(1, sizeof(*c));

	if (!c || pipe2(c->pipe, O_CLOEXEC) != 0) {
		free(c);
		lost(s, "cannot start connecting: out of resources", true);
		return;
	}
	c->fd = -1;
	pthread_mutex_init(&c->mu, NULL);
	s->connecting = c;
	if (pthread_create(&c->thread, NULL, connect_main, s) != 0) {
		pthread_mutex_destroy(&c->mu);
		close(c->pipe[0]);
		close(c->pipe[1]);
		free(c);
		s->connecting = NULL;
		lost(s, "cannot start the connect thread", true);
		return;
	}
	s->state = AM_CONNECTING;
	pgo_sink_io_set(s->io, c->pipe[0], POLLIN);
}

/* The connect thread is done. */
static void connect_finished(struct am_sink *s)
{
	struct am_connect *c = s->connecting;
	char err[300];
	bool ok = c->ok;

	snprintf(err, sizeof(err), "%s", c->err);
	if (ok) {
		s->conn = c->conn;
		c->conn = NULL;
	}
	connect_join(s);
	if (!ok) {
		s->state = AM_DOWN;
		lost(s, err, true);
		return;
	}
	s->state = AM_UP;
	pend_clear(s);
	s->backoff = BACKOFF_MIN_MS;
	s->last_err[0] = '\0';
	s->up_logged = true;
	s->tick_at = 0;
	pgo_sink_io_set(s->io, amqp_get_sockfd(s->conn), POLLIN);
	pgo_log(PGO_LOG_INFO, SUBJECT, "connected to %s (publisher confirms)",
		s->where);
	report_up(s);
}

/* --- publishing --- */

/* created_at (RFC 3339, UTC) in seconds since the epoch; 0 if unreadable. */
static uint64_t epoch_of(const char *rfc3339)
{
	int64_t us;

	if (pgo_parse_rfc3339_us(rfc3339, &us) != 0 || us < 0)
		return 0;
	return (uint64_t)(us / 1000000);
}

static amqp_bytes_t bytes_of(const char *str)
{
	return amqp_cstring_bytes((char *)str);
}

/* Appends a string header (the caller sized the table). */
static void put_hdr(amqp_table_t *t, const char *key, const char *value)
{
	amqp_table_entry_t *e = &t->entries[t->num_entries++];

	e->key = bytes_of(key);
	e->value.kind = AMQP_FIELD_KIND_UTF8;
	e->value.value.bytes = bytes_of(value);
}

static bool has_hdr(const amqp_table_t *t, const char *key)
{
	size_t n = strlen(key);

	for (int k = 0; k < t->num_entries; k++)
		if (t->entries[k].key.len == n &&
		    memcmp(t->entries[k].key.bytes, key, n) == 0)
			return true;
	return false;
}

/*
 * The AMQP headers table of an event, in the batch's arena: the event's
 * headers object (strings as strings, numbers, booleans and null as
 * themselves, objects and arrays as their JSON text), then ours.  *root
 * holds the parsed headers until the publish is done.  NULL on OOM, or
 * with *bad saying why for headers AMQP cannot carry (a name longer than
 * 255 bytes, a table larger than a frame): checked here, because
 * rabbitmq-c finds out only after the publish's first frame went out.
 */
static amqp_table_entry_t *headers_of(struct am_sink *s, pgo_batch_t *b,
				      const pgo_event_t *ev, const char *id,
				      const char *source, json_t **root,
				      amqp_table_t *t, const char **bad)
{
	json_t *h = json_loads(ev->headers ? ev->headers : "{}", 0, NULL);
	size_t n = (h && json_is_object(h) ? json_object_size(h) : 0) + 10;
	size_t size = 0;
	const char *k;
	json_t *v;

	*bad = NULL;

	*root = h;
	t->num_entries = 0;
	t->entries = pgo_arena_alloc(b->arena, n * sizeof(*t->entries));
	if (!t->entries)
		return NULL;
	if (h && json_is_object(h)) {
		json_object_foreach(h, k, v)
		{
			amqp_table_entry_t *e = &t->entries[t->num_entries];

			if (strlen(k) > 255) {
				*bad = "rabbitmq: a header name is longer than "
				       "AMQP's 255 bytes";
				return NULL;
			}
			e->key = bytes_of(k);
			switch (json_typeof(v)) {
			case JSON_STRING:
				e->value.kind = AMQP_FIELD_KIND_UTF8;
				e->value.value.bytes.bytes =
					(void *)json_string_value(v);
				e->value.value.bytes.len =
					json_string_length(v);
				break;
			case JSON_INTEGER:
				e->value.kind = AMQP_FIELD_KIND_I64;
				e->value.value.i64 = json_integer_value(v);
				break;
			case JSON_REAL:
				e->value.kind = AMQP_FIELD_KIND_F64;
				e->value.value.f64 = json_real_value(v);
				break;
			case JSON_TRUE:
			case JSON_FALSE:
				e->value.kind = AMQP_FIELD_KIND_BOOLEAN;
				e->value.value.boolean = json_is_true(v);
				break;
			case JSON_NULL:
				e->value.kind = AMQP_FIELD_KIND_VOID;
				break;
			default: {
				char *text = json_dumps(v, JSON_COMPACT);
				char *copy =
					text ? pgo_arena_strdup(b->arena, text)
					     : NULL;

				free(text);
				if (!copy)
					return NULL;
				e->value.kind = AMQP_FIELD_KIND_UTF8;
				e->value.value.bytes = bytes_of(copy);
			}
			}
			size += 2 + e->key.len + 8 +
				(e->value.kind == AMQP_FIELD_KIND_UTF8
					 ? e->value.value.bytes.len
					 : 0);
			t->num_entries++;
		}
	}
	size += strlen(ev->topic) + strlen(ev->created_at) + 3 * strlen(id) +
		(ev->key ? 2 * strlen(ev->key) : 0) + strlen(ev->type) + 600;
	if (size > (size_t)s->frame_max) {
		*bad = "rabbitmq: the headers do not fit in one AMQP frame "
		       "(sink.amqp_frame_max)";
		return NULL;
	}
	if (!has_hdr(t, "topic"))
		put_hdr(t, "topic", ev->topic);
	if (ev->key && !has_hdr(t, "key"))
		put_hdr(t, "key", ev->key);
	if (!has_hdr(t, "created_at"))
		put_hdr(t, "created_at", ev->created_at);
	if (s->cloudevents) {
		put_hdr(t, "cloudEvents_specversion", "1.0");
		put_hdr(t, "cloudEvents_id", id);
		put_hdr(t, "cloudEvents_source", source);
		put_hdr(t, "cloudEvents_type", ev->type);
		put_hdr(t, "cloudEvents_time", ev->created_at);
		if (ev->key)
			put_hdr(t, "cloudEvents_subject", ev->key);
	}
	return t->entries;
}

/* Publishes event i of ab.  false: the connection broke (lost() ran). */
static bool publish_one(struct am_sink *s, struct am_batch *ab, size_t i)
{
	pgo_batch_t *b = ab->batch;
	const pgo_event_t *ev = &b->events[i];
	amqp_basic_properties_t p;
	char id[24], msg[400];
	const char *rkey;
	char *source;
	const char *bad = NULL;
	json_t *root = NULL;
	int st;

	snprintf(id, sizeof(id), "%" PRId64, ev->id);
	rkey = pgo_sink_template_expand(&s->rkey, s->rkey_tmpl, ev->topic,
					s->queue);
	if (!rkey) {
		verdict(ab, i, PGO_ACK_RETRY, "rabbitmq: out of memory");
		return true;
	}
	if (strlen(rkey) > 255 || strlen(ev->type) > 255) {
		snprintf(msg, sizeof(msg),
			 "rabbitmq: %s longer than AMQP's 255 bytes: "
			 "\"%.60s...\"",
			 strlen(rkey) > 255 ? "routing key" : "type",
			 strlen(rkey) > 255 ? rkey : ev->type);
		verdict(ab, i, PGO_ACK_DEAD, msg);
		return true;
	}
	source = pgo_arena_alloc(b->arena, strlen(ev->topic) + 2);
	if (source)
		sprintf(source, "/%s", ev->topic);
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
		   AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
		   AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
		   AMQP_BASIC_APP_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.content_type = bytes_of("application/json");
	p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
	p.message_id = bytes_of(id);
	p.type = bytes_of(ev->type);
	p.timestamp = epoch_of(ev->created_at);
	p.app_id = bytes_of("pgoutbox");
	if (!source ||
	    !headers_of(s, b, ev, id, source, &root, &p.headers, &bad)) {
		json_decref(root);
		if (bad)
			verdict(ab, i, PGO_ACK_DEAD, bad);
		else
			verdict(ab, i, PGO_ACK_RETRY,
				"rabbitmq: out of memory");
		return true;
	}
	st = amqp_basic_publish(s->conn, CHANNEL, bytes_of(s->exchange),
				bytes_of(rkey), 1, 0, &p,
				bytes_of(ev->payload));
	json_decref(root);
	/* Frames may be on the wire even when it failed: the connection's
	 * state is unknown, so it goes. */
	if (st != AMQP_STATUS_OK) {
		snprintf(msg, sizeof(msg), "publish: %s",
			 amqp_error_string2(st));
		lost(s, msg, true);
		return false;
	}
	/* Its delivery tag is the next one: the ring must hold it. */
	if (!pend_push(s, ab, i, ev->id)) {
		lost(s, "out of memory", true);
		return false;
	}
	return true;
}

/* Publishes every batch not on the wire yet. */
static void publish_waiting(struct am_sink *s)
{
	int64_t now = pgo_now_ms();

	for (struct am_batch *ab = s->head; ab; ab = ab->next) {
		if (ab->deadline || ab->left == 0)
			continue;
		if (s->state != AM_UP)
			return;
		ab->deadline = now + s->timeout_ms;
		if (s->drain_until && ab->deadline > s->drain_until)
			ab->deadline = s->drain_until;
		for (size_t i = 0; i < ab->batch->n; i++) {
			if (ab->batch->acks[i] != PGO_ACK_NONE)
				continue;
			if (!publish_one(s, ab, i))
				return; /* lost(): every batch has verdicts */
		}
	}
}

/* --- the broker's frames --- */

static void on_method(struct am_sink *s, const amqp_frame_t *f)
{
	char msg[400];

	switch (f->payload.method.id) {
	case AMQP_BASIC_ACK_METHOD: {
		amqp_basic_ack_t *m = f->payload.method.decoded;

		on_confirm(s, m->delivery_tag, m->multiple, true);
		break;
	}
	case AMQP_BASIC_NACK_METHOD: {
		amqp_basic_nack_t *m = f->payload.method.decoded;

		on_confirm(s, m->delivery_tag, m->multiple, false);
		break;
	}
	case AMQP_BASIC_RETURN_METHOD: {
		amqp_basic_return_t *m = f->payload.method.decoded;

		snprintf(s->ret_why, sizeof(s->ret_why),
			 "rabbitmq: unroutable, returned by the broker: %u "
			 "%.*s (exchange \"%.*s\", routing key \"%.*s\": no "
			 "queue is bound for it)",
			 m->reply_code, (int)m->reply_text.len,
			 (const char *)m->reply_text.bytes,
			 (int)m->exchange.len, (const char *)m->exchange.bytes,
			 (int)m->routing_key.len,
			 (const char *)m->routing_key.bytes);
		s->ret_stage = 1;
		break;
	}
	case AMQP_CONNECTION_BLOCKED_METHOD: {
		amqp_connection_blocked_t *m = f->payload.method.decoded;

		snprintf(msg, sizeof(msg),
			 "rabbitmq %s: connection blocked by the broker: %.*s",
			 s->where, (int)m->reason.len,
			 (const char *)m->reason.bytes);
		pgo_log(PGO_LOG_WARN, SUBJECT, "%s", msg + 9);
		s->blocked = true;
		/* The broker reads nothing more from us: what is in flight
		 * waits in doubt; publish it again once unblocked. */
		fail_all(s, PGO_ACK_UNAVAILABLE, msg);
		report_down(s, msg);
		break;
	}
	case AMQP_CONNECTION_UNBLOCKED_METHOD:
		pgo_log(PGO_LOG_INFO, SUBJECT, "%s unblocked", s->where);
		s->blocked = false;
		report_up(s);
		break;
	case AMQP_CHANNEL_CLOSE_METHOD: {
		amqp_channel_close_t *m = f->payload.method.decoded;

		/* A channel error caused by a publish (an exchange that does
		 * not exist): the events' fault as far as we can tell. */
		snprintf(msg, sizeof(msg),
			 "channel closed by the broker: %u %.*s", m->reply_code,
			 (int)m->reply_text.len,
			 (const char *)m->reply_text.bytes);
		lost(s, msg, false);
		break;
	}
	case AMQP_CONNECTION_CLOSE_METHOD: {
		amqp_connection_close_t *m = f->payload.method.decoded;

		snprintf(msg, sizeof(msg),
			 "connection closed by the broker: %u %.*s",
			 m->reply_code, (int)m->reply_text.len,
			 (const char *)m->reply_text.bytes);
		lost(s, msg, true);
		break;
	}
	default: break;
	}
}

/* Reads every frame that came, without waiting. */
static void read_frames(struct am_sink *s)
{
	while (s->state == AM_UP) {
		struct timeval zero = {0, 0};
		amqp_frame_t f;
		int st = amqp_simple_wait_frame_noblock(s->conn, &f, &zero);

		if (st == AMQP_STATUS_TIMEOUT)
			break;
		if (st != AMQP_STATUS_OK) {
			lost(s, amqp_error_string2(st), true);
			return;
		}
		if (f.frame_type == AMQP_FRAME_METHOD) {
			on_method(s, &f);
		} else if (f.frame_type == AMQP_FRAME_HEADER &&
			   s->ret_stage == 1) {
			on_returned(s, f.payload.properties.decoded);
			s->ret_body_left = f.payload.properties.body_size;
			s->ret_stage = s->ret_body_left ? 2 : 0;
		} else if (f.frame_type == AMQP_FRAME_BODY &&
			   s->ret_stage == 2) {
			size_t n = f.payload.body_fragment.len;

			s->ret_body_left -=
				n < s->ret_body_left ? n : s->ret_body_left;
			if (!s->ret_body_left)
				s->ret_stage = 0;
		}
	}
	if (s->state == AM_UP)
		amqp_maybe_release_buffers(s->conn);
}

static int64_t next_deadline(const struct am_sink *s)
{
	int64_t at = 0;

	if (s->state == AM_DOWN && s->sink->host)
		at = s->retry_at ? s->retry_at : pgo_now_ms();
	if (s->state == AM_UP) {
		for (const struct am_batch *ab = s->head; ab; ab = ab->next)
			if (ab->deadline && ab->left > 0 &&
			    (!at || ab->deadline < at))
				at = ab->deadline;
		if (s->heartbeat_s > 0 && (!at || s->tick_at < at))
			at = s->tick_at;
	}
	return at;
}

/* Everything that can move, moves; then the timer is re-armed. */
static void step(struct am_sink *s)
{
	int64_t now = pgo_now_ms();

	if (s->state == AM_DOWN && now >= s->retry_at)
		start_connect(s);
	if (s->state == AM_UP) {
		read_frames(s);
		if (s->state == AM_UP && s->blocked) {
			for (struct am_batch *ab = s->head; ab; ab = ab->next)
				if (!ab->deadline) {
					pgo_batch_fail_rest(
						ab->batch, PGO_ACK_UNAVAILABLE,
						"rabbitmq: connection blocked "
						"by the broker");
					ab->left = 0;
				}
		}
		if (s->state == AM_UP)
			publish_waiting(s);
		if (s->state == AM_UP && s->heartbeat_s > 0 &&
		    now >= s->tick_at)
			s->tick_at = now + s->heartbeat_s * 1000 / 2;
	}
	if (s->state == AM_UP) {
		for (struct am_batch *ab = s->head; ab; ab = ab->next) {
			if (ab->deadline && ab->left > 0 &&
			    now >= ab->deadline) {
				char why[100];

				/* The host's drain deadline cut it short. */
				if (ab->deadline == s->drain_until)
					snprintf(why, sizeof(why),
						 "no publisher confirms by "
						 "relay.drain_timeout");
				else
					snprintf(why, sizeof(why),
						 "no publisher confirms within "
						 "%" PRId64 " ms",
						 s->timeout_ms);
				lost(s, why, true);
				break;
			}
		}
	}
	finish_done(s);
	if (s->timer)
		pgo_sink_timer_set(s->timer, next_deadline(s));
}

static void on_io(void *arg, int fd, short revents)
{
	struct am_sink *s = arg;
	char buf[8];

	(void)fd;
	(void)revents;
	if (s->state == AM_CONNECTING) {
		if (read(s->connecting->pipe[0], buf, sizeof(buf)) <= 0)
			return;
		connect_finished(s);
	}
	step(s);
}

static void on_timer(void *arg)
{
	step(arg);
}

/* --- ops --- */

static int amqp_start(pgo_sink_t *sink)
{
	struct am_sink *s = am(sink);

	s->io = pgo_sink_io_add(sink, -1, 0, on_io, s);
	s->timer = pgo_sink_timer_add(sink, 0, on_timer, s);
	if (!s->io || !s->timer) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	s->state = AM_DOWN;
	s->retry_at = 0;
	step(s); /* connect now: the first batch finds it ready */
	return PGO_OK;
}

static void amqp_stop(pgo_sink_t *sink)
{
	struct am_sink *s = am(sink);

	pgo_sink_io_del(s->io);
	pgo_sink_timer_del(s->timer);
	s->io = NULL;
	s->timer = NULL;
	connect_abort(s);
	connect_join(s); /* at once, or sink.amqp_connect_timeout while the
			  * TCP connect itself is pending */
	/* A clean close (one RPC, bounded by sink.amqp_timeout and by what
	 * is left of the host's drain) unless the broker reads nothing from
	 * us anyway.  A broker that answers nothing (stopped, stalled) must
	 * not keep the relay past relay.drain_timeout. */
	if (s->conn && !s->blocked) {
		int64_t left = s->timeout_ms;

		if (s->drain_until && s->drain_until - pgo_now_ms() < left)
			left = s->drain_until - pgo_now_ms();
		if (left > 0) {
			struct timeval tv = {.tv_sec = left / 1000,
					     .tv_usec = (left % 1000) * 1000};

			amqp_set_rpc_timeout(s->conn, &tv);
			amqp_connection_close(s->conn, AMQP_REPLY_SUCCESS);
		}
	}
	close_conn(s);
	s->drain_until = 0;
	s->down = false;
	s->up_logged = false;
}

static int amqp_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct am_sink *s = am(sink);
	struct am_batch *ab;

	if (!s->io) {
		pgo_sink_set_error(sink,
				   "rabbitmq: not started (no host loop)");
		return PGO_ERR_INVALID;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	ab = calloc(1, sizeof(*ab));
	if (!ab) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	ab->batch = b;
	ab->left = b->n;
	ab->started = pgo_now_ms();
	ab->prev = s->tail;
	if (s->tail)
		s->tail->next = ab;
	else
		s->head = ab;
	s->tail = ab;
	b->sink_state = ab;
	if (s->state == AM_DOWN && s->down) {
		char msg[700];

		snprintf(msg, sizeof(msg), "rabbitmq %s: %s", s->where,
			 s->last_err[0] ? s->last_err : "not connected");
		pgo_batch_fail_rest(b, PGO_ACK_UNAVAILABLE, msg);
		ab->left = 0;
	}
	step(s);
	return PGO_OK;
}

static void amqp_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct am_sink *s = am(sink);
	struct am_batch *ab = b->sink_state;

	if (!ab)
		return;
	pend_forget(s, ab);
	unlink_batch(s, ab);
	free(ab);
	if (s->timer)
		pgo_sink_timer_set(s->timer, next_deadline(s));
}

static void amqp_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	struct am_sink *s = am(sink);

	s->drain_until = deadline_ms;
	for (struct am_batch *ab = s->head; ab; ab = ab->next)
		if (ab->deadline && ab->deadline > deadline_ms)
			ab->deadline = deadline_ms;
	if (s->timer)
		pgo_sink_timer_set(s->timer, next_deadline(s));
}

static void amqp_close(pgo_sink_t *sink)
{
	struct am_sink *s = am(sink);

	if (!s)
		return;
	connect_abort(s);
	connect_join(s);
	if (s->conn)
		amqp_destroy_connection(s->conn);
	free(s->url_buf);
	free(s->exchange);
	free(s->rkey_tmpl);
	free(s->queue);
	free(s->ca);
	free(s->cert);
	free(s->key);
	free(s->q);
	pgo_buf_free(&s->rkey);
	free(s);
	sink->priv = NULL;
}

static int amqp_open(pgo_sink_t *sink)
{
	struct am_sink *s = am(sink);

	if (!s || !s->url_buf) {
		pgo_sink_set_error(sink, "rabbitmq sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT,
		"publishing to %s, exchange \"%s\", routing key %s%s", s->where,
		s->exchange, s->rkey_tmpl,
		s->cloudevents ? ", CloudEvents headers" : "");
	return PGO_OK;
}

static int parse_url(const char *url, char **buf,
		     struct amqp_connection_info *info, char *err,
		     size_t errlen)
{
	*buf = strdup(url);
	if (!*buf) {
		snprintf(err, errlen, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	if (strncmp(url, "amqp://", 7) != 0 &&
	    strncmp(url, "amqps://", 8) != 0) {
		snprintf(err, errlen,
			 "sink.amqp_url: not an amqp:// or amqps:// URL "
			 "(amqp://user:password@host:port/vhost)");
		return PGO_ERR_CONFIG;
	}
	amqp_default_connection_info(info);
	if (amqp_parse_url(*buf, info) != AMQP_STATUS_OK || !*info->host) {
		snprintf(err, errlen,
			 "sink.amqp_url: cannot read the URL "
			 "(amqp://user:password@host:port/vhost; %%2f is the "
			 "vhost \"/\")");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}

int pgo_sink_amqp_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *rkey = pgo_conf_get_str(conf, "sink.amqp_routing_key");
	struct am_sink *s;
	pgo_error_t err;
	char msg[300];
	int rc;

	if (pgo_sink_template_check("sink.amqp_routing_key", rkey, &err) !=
	    PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	amqp_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	s->sink = sink;
	pgo_buf_init(&s->rkey);
	s->backoff = BACKOFF_MIN_MS;
	pend_clear(s);
	rc = parse_url(pgo_conf_get_str(conf, "sink.amqp_url"), &s->url_buf,
		       &s->url, msg, sizeof(msg));
	if (rc != PGO_OK) {
		free(s->url_buf);
		s->url_buf = NULL;
		pgo_sink_set_error(sink, "%s", msg);
		return rc;
	}
	snprintf(s->where, sizeof(s->where), "%s:%d/%s", s->url.host,
		 s->url.port, s->url.vhost);
	s->exchange = strdup(pgo_conf_get_str(conf, "sink.amqp_exchange"));
	s->rkey_tmpl = strdup(rkey);
	s->queue = strdup(v->queue);
	s->ca = strdup(pgo_conf_get_str(conf, "sink.amqp_ca"));
	s->cert = strdup(pgo_conf_get_str(conf, "sink.amqp_cert"));
	s->key = strdup(pgo_conf_get_str(conf, "sink.amqp_key"));
	s->cloudevents = pgo_conf_get_int(conf, "sink.amqp_format") == 1;
	s->verify = pgo_conf_get_bool(conf, "sink.amqp_verify");
	s->timeout_ms = pgo_conf_get_duration(conf, "sink.amqp_timeout");
	s->connect_timeout_ms =
		pgo_conf_get_duration(conf, "sink.amqp_connect_timeout");
	s->heartbeat_s =
		(int)(pgo_conf_get_duration(conf, "sink.amqp_heartbeat") /
		      1000);
	s->frame_max = pgo_conf_get_int(conf, "sink.amqp_frame_max");
	if (!s->exchange || !s->rkey_tmpl || !s->queue || !s->ca || !s->cert ||
	    !s->key) {
		pgo_sink_set_error(sink, "rabbitmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	if (strlen(s->exchange) > 255) {
		pgo_sink_set_error(sink, "sink.amqp_exchange: longer than "
					 "AMQP's 255 bytes");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_amqp_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "rabbitmq",
	.open = amqp_open,
	.start = amqp_start,
	.submit = amqp_submit,
	.cancel = amqp_cancel,
	.drain = amqp_drain,
	.stop = amqp_stop,
	.close = amqp_close,
};
