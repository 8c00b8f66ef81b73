/*
 * sinks/rabbitmq/connect.c — the rabbitmq sink's connection.  rabbitmq-c
 * 0.11 connects and logs in only with blocking calls, so a short-lived
 * thread does the TCP/TLS connect, the login, channel.open and
 * confirm.select, and hands the ready connection to the loop through a
 * pipe it writes once.  A connection that fails or is lost puts what is in
 * flight in doubt (UNAVAILABLE), tells the host, and is tried again after
 * a backoff.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "sinks/rabbitmq/rabbitmq_int.h"
#include "base/log.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

void pgo_am_report_down(struct am_sink *s, const char *msg)
{
	if (s->down)
		return;
	s->down = true;
	pgo_sink_health(s->sink, 0, msg);
}

void pgo_am_report_up(struct am_sink *s)
{
	if (!s->down)
		return;
	s->down = false;
	pgo_sink_health(s->sink, 1, NULL);
}

void pgo_am_close_conn(struct am_sink *s)
{
	if (s->conn) {
		amqp_destroy_connection(s->conn);
		s->conn = NULL;
	}
	if (s->io)
		pgo_sink_io_set(s->io, -1, 0);
	s->blocked = false;
	s->ret_stage = 0;
	pgo_am_pend_clear(s);
	s->state = AM_DOWN;
}

/* The connection failed or was lost: what is in flight is in doubt
 * (UNAVAILABLE: no attempt spent; the broker may hold some of it, which
 * the consumer's inbox drops by message_id). */
void pgo_am_lost(struct am_sink *s, const char *reason, bool outage)
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
	pgo_am_close_conn(s);
	snprintf(msg, sizeof(msg), "rabbitmq %s: %s", s->where, why);
	pgo_am_fail_all(s, outage ? PGO_ACK_UNAVAILABLE : PGO_ACK_RETRY, msg);
	if (outage) {
		s->retry_at = now + s->backoff;
		s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : s->backoff * 2;
		pgo_am_report_down(s, msg);
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

/* Whether a failed login's reply says the vhost does not exist: RabbitMQ
 * closes the connection with 530 NOT_ALLOWED "vhost NAME not found" (the
 * same code with "access to vhost ... refused" is a permission, which may
 * be granted while we wait, and stays an outage). */
static bool no_such_vhost(amqp_rpc_reply_t r)
{
	const amqp_connection_close_t *m;
	char text[256];

	if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
	    r.reply.id != AMQP_CONNECTION_CLOSE_METHOD)
		return false;
	m = r.reply.decoded;
	snprintf(text, sizeof(text), "%.*s", (int)m->reply_text.len,
		 (const char *)m->reply_text.bytes);
	return m->reply_code == AMQP_NOT_ALLOWED && strstr(text, "vhost") &&
	       strstr(text, "not found");
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
		c->no_vhost = no_such_vhost(r);
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
void pgo_am_connect_join(struct am_sink *s)
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
void pgo_am_connect_abort(struct am_sink *s)
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

void pgo_am_connect_start(struct am_sink *s)
{
	struct am_connect *c = calloc(1, sizeof(*c));
	sigset_t all, old;
	int rc;

	if (!c || pipe2(c->pipe, O_CLOEXEC) != 0) {
		free(c);
		pgo_am_lost(s, "cannot start connecting: out of resources",
			    true);
		return;
	}
	c->fd = -1;
	pthread_mutex_init(&c->mu, NULL);
	s->connecting = c;
	/* The thread takes no signal: they go to the loop's thread, whose
	 * waits they interrupt (pgo_am_connect_wait). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&c->thread, NULL, connect_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_mutex_destroy(&c->mu);
		close(c->pipe[0]);
		close(c->pipe[1]);
		free(c);
		s->connecting = NULL;
		pgo_am_lost(s, "cannot start the connect thread", true);
		return;
	}
	s->state = AM_CONNECTING;
	pgo_sink_io_set(s->io, c->pipe[0], POLLIN);
}

/* The connect thread is done. */
void pgo_am_connect_finished(struct am_sink *s)
{
	struct am_connect *c = s->connecting;
	char err[300];
	bool ok = c->ok;

	snprintf(err, sizeof(err), "%s", c->err);
	if (ok) {
		s->conn = c->conn;
		c->conn = NULL;
	}
	pgo_am_connect_join(s);
	if (!ok) {
		s->state = AM_DOWN;
		pgo_am_lost(s, err, true);
		return;
	}
	s->state = AM_UP;
	pgo_am_pend_clear(s);
	s->backoff = BACKOFF_MIN_MS;
	s->last_err[0] = '\0';
	s->up_logged = true;
	s->tick_at = 0;
	pgo_sink_io_set(s->io, amqp_get_sockfd(s->conn), POLLIN);
	pgo_log(PGO_LOG_INFO, SUBJECT, "connected to %s (publisher confirms)",
		s->where);
	pgo_am_report_up(s);
}

bool pgo_am_connect_wait(struct am_sink *s, int64_t ms)
{
	struct pollfd p = {.fd = s->connecting->pipe[0], .events = POLLIN};

	return poll(&p, 1, (int)ms) == 1;
}
