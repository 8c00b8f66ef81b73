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
 *
 * Files: this one keeps the batches, their verdicts and the ring of
 * awaited confirms, reads the broker's frames and holds the ops;
 * connect.c the connection (the connect thread, login, loss and
 * backoff); publish.c an event as a message (properties, headers) and
 * its publish; rabbitmq_conf.c the keys and the configure step.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "sinks/rabbitmq/rabbitmq_int.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/rabbitmq/rabbitmq.h"

static struct am_sink *am(pgo_sink_t *sink)
{
	return sink->priv;
}

static void step(struct am_sink *s);

/* --- verdicts and batches --- */

void pgo_am_verdict(struct am_batch *ab, size_t i, pgo_ack_t ack,
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
void pgo_am_fail_all(struct am_sink *s, pgo_ack_t ack, const char *msg)
{
	for (struct am_batch *ab = s->head; ab; ab = ab->next) {
		pgo_batch_fail_rest(ab->batch, ack, msg);
		ab->left = 0;
	}
	for (size_t k = 0; k < s->q_len; k++)
		s->q[(s->q_head + k) % s->q_cap].ab = NULL;
}

/* --- the ring of awaited confirms --- */

bool pgo_am_pend_push(struct am_sink *s, struct am_batch *ab, size_t ev,
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

void pgo_am_pend_clear(struct am_sink *s)
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
			pgo_am_verdict(e->ab, e->ev,
				       ok ? PGO_ACK_OK : PGO_ACK_RETRY,
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
			pgo_am_verdict(e->ab, e->ev, PGO_ACK_RETRY, s->ret_why);
			e->ab = NULL;
			return;
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
		pgo_am_fail_all(s, PGO_ACK_UNAVAILABLE, msg);
		pgo_am_report_down(s, msg);
		break;
	}
	case AMQP_CONNECTION_UNBLOCKED_METHOD:
		pgo_log(PGO_LOG_INFO, SUBJECT, "%s unblocked", s->where);
		s->blocked = false;
		pgo_am_report_up(s);
		break;
	case AMQP_CHANNEL_CLOSE_METHOD: {
		amqp_channel_close_t *m = f->payload.method.decoded;

		/* A channel error caused by a publish (an exchange that does
		 * not exist): the events' fault as far as we can tell. */
		snprintf(msg, sizeof(msg),
			 "channel closed by the broker: %u %.*s", m->reply_code,
			 (int)m->reply_text.len,
			 (const char *)m->reply_text.bytes);
		pgo_am_lost(s, msg, false);
		break;
	}
	case AMQP_CONNECTION_CLOSE_METHOD: {
		amqp_connection_close_t *m = f->payload.method.decoded;

		snprintf(msg, sizeof(msg),
			 "connection closed by the broker: %u %.*s",
			 m->reply_code, (int)m->reply_text.len,
			 (const char *)m->reply_text.bytes);
		pgo_am_lost(s, msg, true);
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
			pgo_am_lost(s, amqp_error_string2(st), true);
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
		pgo_am_connect_start(s);
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
			pgo_am_publish_waiting(s);
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
				pgo_am_lost(s, why, true);
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
		pgo_am_connect_finished(s);
	}
	step(s);
}

static void on_timer(void *arg)
{
	step(arg);
}

/* --- ops --- */

/* Refuses the URL whose vhost the broker does not have, with the fix. */
static int refuse_vhost(struct am_sink *s)
{
	const char *why = s->connecting->err;

	if (!*s->url.vhost)
		pgo_sink_set_error(
			s->sink,
			"sink.amqp_url: the vhost is empty (the URL "
			"ends in \"/\") and RabbitMQ at %s:%d has no "
			"such vhost (%s); end the URL in /%%2f for "
			"the vhost \"/\", or leave the path out",
			s->url.host, s->url.port, why);
	else
		pgo_sink_set_error(s->sink,
				   "sink.amqp_url: RabbitMQ at %s:%d has no "
				   "vhost \"%s\" (%s); the URL's path is the "
				   "vhost, percent-encoded: /%%2f is the vhost "
				   "\"/\"",
				   s->url.host, s->url.port, s->url.vhost, why);
	return PGO_ERR_CONFIG;
}

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
	/* The first login is awaited here, up to sink.amqp_connect_timeout:
	 * a vhost the broker does not have is a misconfiguration, refused at
	 * start, where a broker that cannot be reached (or any later failure)
	 * is an outage the sink waits out. */
	if (s->state == AM_CONNECTING &&
	    pgo_am_connect_wait(s, s->connect_timeout_ms) &&
	    s->connecting->no_vhost)
		return refuse_vhost(s);
	return PGO_OK;
}

static void amqp_stop(pgo_sink_t *sink)
{
	struct am_sink *s = am(sink);

	pgo_sink_io_del(s->io);
	pgo_sink_timer_del(s->timer);
	s->io = NULL;
	s->timer = NULL;
	pgo_am_connect_abort(s);
	pgo_am_connect_join(s); /* at once, or sink.amqp_connect_timeout while
				 * the TCP connect itself is pending */
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
	pgo_am_close_conn(s);
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
	pgo_am_connect_abort(s);
	pgo_am_connect_join(s);
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
