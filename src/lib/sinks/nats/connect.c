/*
 * sinks/nats/connect.c — the nats sink's side on cnats' threads: the
 * callbacks (PubAcks, disconnects, reconnects, errors) and the connector
 * thread that makes the first connection, each pushing an item into the
 * queue the loop takes (see nats.c); and the connection's options.
 * Nothing of the host is touched here but through that queue.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sinks/nats/nats_int.h"
#include "pgoutbox.h"

void pgo_ns_push(struct nats_sink *s, struct nq_item *it)
{
	uint64_t one = 1;
	bool was_empty;

	pthread_mutex_lock(&s->mu);
	if (s->closing) {
		/* The sink stops and will not look: the message handed
		 * over is freed here, while cnats' library still runs. */
		pthread_mutex_unlock(&s->mu);
		natsMsg_Destroy(it->msg);
		free(it);
		return;
	}
	was_empty = !s->q_head;
	if (s->q_tail)
		s->q_tail->next = it;
	else
		s->q_head = it;
	s->q_tail = it;
	pthread_mutex_unlock(&s->mu);
	if (was_empty && write(s->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, the loop wakes anyway. */
	}
}

static struct nq_item *item_new(enum nq_kind kind, natsConnection *nc)
{
	struct nq_item *it = calloc(1, sizeof(*it));

	if (it) {
		it->kind = kind;
		it->nc = nc;
	}
	return it;
}

/* The PubAck handler.  Out of memory, the message stays in the table and
 * its batch's deadline ends the wait. */
void pgo_ns_on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
		      void *closure)
{
	struct nats_sink *s = closure;
	struct nq_item *it = item_new(NQ_ACK, NULL);

	(void)js;
	if (!it)
		return;
	it->msg = msg;
	if (pa) {
		it->status = NATS_OK;
	} else if (pae) {
		it->status = pae->Err;
		it->err_code = (int)pae->ErrCode;
		snprintf(it->text, sizeof(it->text), "%s",
			 pae->ErrText ? pae->ErrText : "");
	} else {
		it->status = NATS_ERR;
	}
	pgo_ns_push(s, it);
}

/* The connection's last error text, or "". */
static void conn_error(natsConnection *nc, char *buf, size_t size)
{
	const char *text = NULL;

	(void)natsConnection_GetLastError(nc, &text);
	snprintf(buf, size, "%s", text ? text : "");
}

static void on_conn_event(natsConnection *nc, void *closure, enum nq_kind kind)
{
	struct nq_item *it = item_new(kind, nc);

	if (it) {
		if (kind != NQ_RECONNECTED)
			conn_error(nc, it->text, sizeof(it->text));
		pgo_ns_push(closure, it);
	}
}

static void on_disconnected(natsConnection *nc, void *closure)
{
	on_conn_event(nc, closure, NQ_DISCONNECTED);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
	on_conn_event(nc, closure, NQ_RECONNECTED);
}

static void on_closed(natsConnection *nc, void *closure)
{
	on_conn_event(nc, closure, NQ_CLOSED);
}

static void on_async_error(natsConnection *nc, natsSubscription *sub,
			   natsStatus err, void *closure)
{
	struct nq_item *it = item_new(NQ_ERROR, nc);

	(void)sub;
	if (it) {
		it->status = err;
		conn_error(nc, it->text, sizeof(it->text));
		if (!it->text[0])
			snprintf(it->text, sizeof(it->text), "%s",
				 natsStatus_GetText(err));
		pgo_ns_push(closure, it);
	}
}

/* The calling thread's last cnats error without its source location
 * ("(conn.c:1905): Authorization Violation"), or the status' text. */
const char *pgo_ns_last_error(natsStatus st)
{
	const char *why = nats_GetLastError(NULL);
	const char *end;

	if (!why || !*why)
		return natsStatus_GetText(st);
	if (why[0] == '(' && (end = strstr(why, "): ")) != NULL)
		why = end + 3;
	return why;
}

/* The connector: natsConnection_Connect() blocks for up to
 * sink.nats_connect_timeout per server, so the first connection is made
 * here, with a backoff between attempts, until it succeeds or the sink
 * stops.  cnats reconnects by itself afterwards. */
static void *connector_main(void *arg)
{
	struct nats_sink *s = arg;
	int64_t backoff = BACKOFF_MIN_MS;

	for (;;) {
		natsConnection *nc = NULL;
		natsStatus st;
		struct nq_item *it;
		struct timespec until;
		bool stop;

		pthread_mutex_lock(&s->mu);
		stop = s->stopping;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			return NULL;
		st = natsConnection_Connect(&nc, s->opts);
		it = item_new(st == NATS_OK ? NQ_CONNECTED : NQ_CONNECT_FAILED,
			      nc);
		if (st == NATS_OK && !it) {
			/* Cannot tell the loop: drop it and try again. */
			natsConnection_Destroy(nc);
		} else if (it) {
			it->status = st;
			snprintf(it->text, sizeof(it->text), "%s",
				 pgo_ns_last_error(st));
			pgo_ns_push(s, it);
			if (st == NATS_OK)
				return NULL;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += backoff / 1000;
		until.tv_nsec += (backoff % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&s->mu);
		while (!s->stopping &&
		       pthread_cond_timedwait(&s->cond, &s->mu, &until) == 0) {
		}
		pthread_mutex_unlock(&s->mu);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
						       : backoff * 2;
	}
}

int pgo_ns_connector_start(struct nats_sink *s)
{
	s->stopping = false;
	if (pthread_create(&s->connector, NULL, connector_main, s) != 0)
		return PGO_ERR_NOMEM;
	s->connector_alive = true;
	return PGO_OK;
}

void pgo_ns_connector_join(struct nats_sink *s)
{
	if (!s->connector_alive)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->connector, NULL);
	s->connector_alive = false;
}

/* --- options --- */

static natsStatus set_servers(struct nats_sink *s, natsOptions *o)
{
	const char *servers[64];
	char *copy = strdup(s->url), *save = NULL;
	int n = 0;
	natsStatus st;

	if (!copy)
		return NATS_NO_MEMORY;
	for (char *t = strtok_r(copy, ",", &save); t && n < 64;
	     t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		if (*t)
			servers[n++] = t;
	}
	st = natsOptions_SetServers(o, servers, n);
	free(copy);
	return st;
}

natsStatus pgo_ns_make_options(struct nats_sink *s, natsOptions **out)
{
	natsOptions *o = NULL;
	natsStatus st = natsOptions_Create(&o);

	if (st == NATS_OK)
		st = set_servers(s, o);
	if (st == NATS_OK)
		st = natsOptions_SetName(o, "pgoutbox relay");
	if (st == NATS_OK)
		st = natsOptions_SetTimeout(o, s->connect_timeout_ms);
	if (st == NATS_OK)
		st = natsOptions_SetNoRandomize(o, true);
	if (st == NATS_OK)
		st = natsOptions_SetMaxReconnect(o, -1);
	if (st == NATS_OK)
		st = natsOptions_SetReconnectWait(o, 250);
	/* Nothing piles up in cnats while it reconnects: a publish then
	 * fails (NATS_INSUFFICIENT_BUFFER), and the batch is unavailable. */
	if (st == NATS_OK)
		st = natsOptions_SetReconnectBufSize(o, 1);
	/* A publish writes to the socket when cnats' buffer is full: a
	 * server that stops reading may hold the loop this long, no more
	 * (the connection is then dropped and the batch unavailable). */
	if (st == NATS_OK)
		st = natsOptions_SetWriteDeadline(o, WRITE_DEADLINE_MS);
	if (st == NATS_OK)
		st = natsOptions_SetPingInterval(o, 5000);
	if (st == NATS_OK)
		st = natsOptions_SetDisconnectedCB(o, on_disconnected, s);
	if (st == NATS_OK)
		st = natsOptions_SetReconnectedCB(o, on_reconnected, s);
	if (st == NATS_OK)
		st = natsOptions_SetClosedCB(o, on_closed, s);
	if (st == NATS_OK)
		st = natsOptions_SetErrorHandler(o, on_async_error, s);
	if (st == NATS_OK && s->creds)
		st = natsOptions_SetUserCredentialsFromFiles(o, s->creds, NULL);
	if (st == NATS_OK && s->nkey)
		st = natsOptions_SetNKeyFromSeed(o, s->nkey_pub, s->nkey);
	if (st == NATS_OK && s->secure)
		st = natsOptions_SetSecure(o, true);
	if (st == NATS_OK && s->tls_ca)
		st = natsOptions_LoadCATrustedCertificates(o, s->tls_ca);
	if (st == NATS_OK && s->tls_cert)
		st = natsOptions_LoadCertificatesChain(o, s->tls_cert,
						       s->tls_key);
	if (st != NATS_OK) {
		natsOptions_Destroy(o);
		return st;
	}
	*out = o;
	return NATS_OK;
}
