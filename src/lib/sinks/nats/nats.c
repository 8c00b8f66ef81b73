/*
 * sinks/nats/nats.c — the nats sink: one JetStream publish per event,
 * asynchronous, on one cnats connection; an event is acknowledged when its
 * PubAck comes (the stream holds it), with Nats-Msg-Id = the event id so
 * that the stream drops a redelivery within its duplicate window.
 *
 * cnats runs threads of its own: it connects, reads, flushes and calls
 * back (PubAcks, disconnects) on them.  Nothing of the host is touched
 * there.  Every callback, and the thread that makes the first connection
 * (natsConnection_Connect() blocks), pushes one item into a queue under a
 * mutex and writes an eventfd; the eventfd's watcher, on the loop's
 * thread, takes the items and does the work: verdicts, pgo_sink_done(),
 * pgo_sink_health().  The publishes themselves are made on the loop's
 * thread (js_PublishMsgAsync() only appends to cnats' buffer; its flusher
 * thread writes it).
 *
 * Nothing waits only in cnats' memory: an event is PGO_ACK_OK on its PubAck
 * alone.  A server that goes away (or does not answer in time) makes every
 * event of the batches in flight PGO_ACK_UNAVAILABLE: the relay rolls them
 * back untouched and claims them again later, and what cnats may still
 * send of them after a reconnect is a duplicate the stream drops.  While
 * the connection is down, batches fail at once as UNAVAILABLE and the host
 * is told (claiming pauses) until cnats has reconnected.  cnats' reconnect
 * buffer is 1 byte: publishing while reconnecting fails instead of piling
 * up.
 *
 * States: IDLE (not started), CONNECTING (the first attempt runs; batches
 * wait for it), UP, DOWN (a connect failed or the connection was lost; the
 * connector or cnats keeps trying).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "loop/loop.h"
#include "sinks/nats/nats.h"

#define SUBJECT		  "sink nats"
#define BACKOFF_MIN_MS	  100
#define BACKOFF_MAX_MS	  2000
#define GRACE_MS	  1000 /* past cnats' own PubAck timeout */
#define WRITE_DEADLINE_MS 1000

/* What cnats' threads tell the loop. */
enum nq_kind {
	NQ_ACK,		   /* a PubAck, its error or cnats' timeout */
	NQ_CONNECTED,	   /* the connector made the connection */
	NQ_CONNECT_FAILED, /* one connect attempt failed (it goes on) */
	NQ_DISCONNECTED,   /* cnats lost the connection (reconnecting) */
	NQ_RECONNECTED,	   /* cnats reconnected */
	NQ_CLOSED,	   /* the connection is closed for good */
	NQ_ERROR	   /* an asynchronous error (permissions, ...) */
};

struct nq_item {
	struct nq_item *next;
	enum nq_kind kind;
	natsMsg *msg;	    /* NQ_ACK: the published message, ours now */
	natsConnection *nc; /* the connection it is about */
	natsStatus status;  /* NQ_ACK, NQ_CONNECT_FAILED, NQ_ERROR */
	int err_code;	    /* NQ_ACK: the stream's error code */
	char text[256];	    /* the error text */
};

/* One batch taken by submit(), in batch->sink_state until it is done or
 * cancelled. */
struct nb_batch {
	pgo_batch_t *batch;
	struct nb_batch *prev, *next; /* the sink's batches, oldest first */
	size_t left;		      /* events without a verdict */
	size_t outstanding;	      /* publishes whose PubAck is awaited */
	bool sent;		      /* published (else waiting to connect) */
	int64_t deadline;	      /* it fails as unavailable then */
	int64_t started;	      /* for the debug line */
};

/* A publish whose PubAck is awaited: a slot of the table keyed by the
 * message, which cnats hands back with the PubAck.  pb NULL: its batch is
 * gone (done or cancelled); the PubAck is dropped. */
struct nb_pub {
	natsMsg *msg; /* NULL: free slot */
	struct nb_batch *pb;
	size_t ev;
};

enum ns_state { NS_IDLE, NS_CONNECTING, NS_UP, NS_DOWN };

struct nats_sink {
	pgo_sink_t *sink;
	/* configuration, copied at configure */
	char *url;	   /* sink.nats_url, comma separated */
	char where[256];   /* the servers without user information */
	char *subject;	   /* sink.nats_subject */
	char *queue;	   /* relay.queue */
	char *creds;	   /* sink.nats_creds or NULL */
	char *nkey;	   /* sink.nats_nkey or NULL */
	char nkey_pub[64]; /* its public key */
	char *tls_ca, *tls_cert, *tls_key; /* or NULL */
	bool secure;			   /* TLS asked for */
	int64_t timeout_ms;		   /* sink.nats_timeout */
	int64_t connect_timeout_ms;	   /* sink.nats_connect_timeout */
	pgo_nats_format_t fmt;

	/* start to stop */
	natsOptions *opts;
	natsConnection *nc; /* NULL until connected */
	jsCtx *js;
	natsConnection **graves; /* closed connections, destroyed at stop */
	size_t n_graves;
	int efd;		 /* the bridge's eventfd */
	pgo_sink_io_t *io;	 /* its watcher */
	pgo_sink_timer_t *timer; /* the nearest batch deadline */

	/* the bridge: cnats' threads push, the loop takes (under mu) */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* wakes the connector's backoff */
	struct nq_item *q_head, *q_tail;
	bool stopping;	      /* the connector gives up */
	bool closing;	      /* the sink stops: nothing is queued any more */
	pthread_t connector;  /* makes the first connection */
	bool connector_alive; /* to be joined */

	enum ns_state state;
	bool told_down;	     /* the host was told the server is down */
	int64_t drain_until; /* the host stops: no wait past this */
	char last_err[256];  /* the last connection error (logged once) */

	struct nb_batch *head, *tail;
	struct nb_pub *pubs; /* open addressing, power-of-two size */
	size_t pubs_cap, pubs_len;
	pgo_buf_t subj; /* scratch: one expanded subject */
};

static struct nats_sink *ns(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- the table of awaited PubAcks --- */

static size_t pub_hash(const natsMsg *m, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)m;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

static struct nb_pub *pub_find(struct nats_sink *s, const natsMsg *m)
{
	if (!s->pubs_cap)
		return NULL;
	for (size_t i = pub_hash(m, s->pubs_cap);;
	     i = (i + 1) & (s->pubs_cap - 1)) {
		if (!s->pubs[i].msg)
			return NULL;
		if (s->pubs[i].msg == m)
			return &s->pubs[i];
	}
}

static bool pub_insert(struct nb_pub *tab, size_t cap, const struct nb_pub *p)
{
	size_t i = pub_hash(p->msg, cap);

	while (tab[i].msg)
		i = (i + 1) & (cap - 1);
	tab[i] = *p;
	return true;
}

static bool pub_put(struct nats_sink *s, natsMsg *m, struct nb_batch *pb,
		    size_t ev)
{
	if ((s->pubs_len + 1) * 2 > s->pubs_cap) {
		size_t cap = s->pubs_cap ? s->pubs_cap * 2 : 1024;
		struct nb_pub *tab = calloc(cap, sizeof(*tab));

		if (!tab)
			return false;
		for (size_t i = 0; i < s->pubs_cap; i++)
			if (s->pubs[i].msg)
				pub_insert(tab, cap, &s->pubs[i]);
		free(s->pubs);
		s->pubs = tab;
		s->pubs_cap = cap;
	}
	pub_insert(s->pubs, s->pubs_cap,
		   &(struct nb_pub){.msg = m, .pb = pb, .ev = ev});
	s->pubs_len++;
	return true;
}

/* Removes a slot, shifting back the ones its probe sequence covers. */
static void pub_del(struct nats_sink *s, struct nb_pub *slot)
{
	size_t mask = s->pubs_cap - 1;
	size_t i = (size_t)(slot - s->pubs);

	s->pubs[i].msg = NULL;
	s->pubs_len--;
	for (size_t j = (i + 1) & mask; s->pubs[j].msg; j = (j + 1) & mask) {
		size_t h = pub_hash(s->pubs[j].msg, s->pubs_cap);

		/* j may move to i if h is not cyclically in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			s->pubs[i] = s->pubs[j];
			s->pubs[j].msg = NULL;
			i = j;
		}
	}
}

/* The PubAcks still awaited for pb will be dropped when they come. */
static void pub_orphan(struct nats_sink *s, const struct nb_batch *pb)
{
	if (!pb->outstanding)
		return;
	for (size_t i = 0; i < s->pubs_cap; i++)
		if (s->pubs[i].msg && s->pubs[i].pb == pb)
			s->pubs[i].pb = NULL;
}

/* Empties the table without freeing a message: each is cnats' until its
 * PubAck handler runs, and jsCtx_Destroy() frees the ones still awaited.
 * A message handed over after this is found nowhere and freed. */
static void pub_forget(struct nats_sink *s)
{
	if (s->pubs_cap)
		memset(s->pubs, 0, s->pubs_cap * sizeof(*s->pubs));
	s->pubs_len = 0;
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pb->outstanding = 0;
}

/* --- the bridge (cnats' threads) --- */

static void push(struct nats_sink *s, struct nq_item *it)
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
static void on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
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
	push(s, it);
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
		push(closure, it);
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
		push(closure, it);
	}
}

/* The calling thread's last cnats error without its source location
 * ("(conn.c:1905): Authorization Violation"), or the status' text. */
static const char *last_error(natsStatus st)
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
				 last_error(st));
			push(s, it);
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

static int connector_start(struct nats_sink *s)
{
	s->stopping = false;
	if (pthread_create(&s->connector, NULL, connector_main, s) != 0)
		return PGO_ERR_NOMEM;
	s->connector_alive = true;
	return PGO_OK;
}

static void connector_join(struct nats_sink *s)
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

/* --- batches and verdicts --- */

static void verdict(struct nb_batch *pb, size_t i, pgo_ack_t ack,
		    const char *msg)
{
	if (pgo_batch_set(pb->batch, i, ack, msg))
		pb->left--;
}

/* The server cannot take anything now: not the events' fault. */
static void fail_rest(struct nb_batch *pb, const char *msg)
{
	if (!pb->left)
		return;
	pgo_batch_fail_rest(pb->batch, PGO_ACK_UNAVAILABLE, msg);
	pb->left = 0;
}

static void fail_all(struct nats_sink *s, const char *msg)
{
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		fail_rest(pb, msg);
}

static void unlink_batch(struct nats_sink *s, struct nb_batch *pb)
{
	if (pb->prev)
		pb->prev->next = pb->next;
	else
		s->head = pb->next;
	if (pb->next)
		pb->next->prev = pb->prev;
	else
		s->tail = pb->prev;
	pb->prev = pb->next = NULL;
	pb->batch->sink_state = NULL;
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
static void finish_done(struct nats_sink *s)
{
	for (;;) {
		struct nb_batch *pb = s->head;
		pgo_batch_t *b;

		while (pb && pb->left > 0)
			pb = pb->next;
		if (!pb)
			return;
		b = pb->batch;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"batch of %zu done in %" PRId64 " ms", b->n,
			pgo_now_ms() - pb->started);
		pub_orphan(s, pb);
		unlink_batch(s, pb);
		free(pb);
		pgo_sink_done(s->sink, b);
	}
}

static int64_t next_deadline(const struct nats_sink *s)
{
	int64_t at = 0;

	for (const struct nb_batch *pb = s->head; pb; pb = pb->next)
		if (pb->left)
			at = pgo_deadline_min(at, pb->deadline);
	return at;
}

static void arm(struct nats_sink *s)
{
	if (s->timer)
		pgo_sink_timer_set(s->timer, next_deadline(s));
}

static int64_t clamp_deadline(const struct nats_sink *s, int64_t at)
{
	return s->drain_until && at > s->drain_until ? s->drain_until : at;
}

/* Publishes the events of pb that have no verdict yet. */
static void send_batch(struct nats_sink *s, struct nb_batch *pb)
{
	pgo_batch_t *b = pb->batch;
	char why[512], id[24];

	pb->sent = true;
	pb->deadline =
		clamp_deadline(s, pgo_now_ms() + s->timeout_ms + GRACE_MS);
	for (size_t i = 0; i < b->n && pb->left > 0; i++) {
		natsMsg *m = NULL;
		jsPubOptions po;
		natsStatus st;
		pgo_ack_t ack;
		int rc;

		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		rc = pgo_nats_message(&s->fmt, &b->events[i], &s->subj, &m, why,
				      sizeof(why));
		if (rc != PGO_OK) {
			verdict(pb, i,
				rc == PGO_ERR_NOMEM ? PGO_ACK_RETRY
						    : PGO_ACK_DEAD,
				why);
			continue;
		}
		if (!pub_put(s, m, pb, i)) {
			natsMsg_Destroy(m);
			verdict(pb, i, PGO_ACK_RETRY, "nats: out of memory");
			continue;
		}
		pgo_nats_msg_id(b->events[i].id, id, sizeof(id));
		jsPubOptions_Init(&po);
		po.MsgId = id;
		po.MaxWait = s->timeout_ms;
		pb->outstanding++;
		/* The PubAck may be handled (on cnats' thread) before this
		 * returns: it only queues an item the loop takes later. */
		st = js_PublishMsgAsync(s->js, &m, &po);
		if (st == NATS_OK)
			continue;
		/* Not published: the message is still ours. */
		pub_del(s, pub_find(s, m));
		pb->outstanding--;
		ack = pgo_nats_verdict(st, 0, last_error(st),
				       natsMsg_GetSubject(m), why, sizeof(why));
		natsMsg_Destroy(m);
		verdict(pb, i, ack, why);
		if (ack == PGO_ACK_UNAVAILABLE) {
			fail_rest(pb, why);
			break;
		}
	}
}

/* --- the connection, on the loop's thread --- */

static void report_down(struct nats_sink *s, const char *why)
{
	char msg[600];

	s->state = NS_DOWN;
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	snprintf(msg, sizeof(msg), "nats %s: %s", s->where, why);
	fail_all(s, msg);
	if (!s->told_down) {
		s->told_down = true;
		pgo_sink_health(s->sink, 0, msg);
	}
}

static void report_up(struct nats_sink *s)
{
	s->state = NS_UP;
	s->last_err[0] = '\0';
	if (s->told_down) {
		s->told_down = false;
		pgo_sink_health(s->sink, 1, NULL);
	}
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		if (!pb->sent && pb->left)
			send_batch(s, pb);
}

static void on_connected(struct nats_sink *s, natsConnection *nc)
{
	jsOptions jo;
	natsStatus st;
	char url[256];

	connector_join(s);
	s->nc = nc;
	jsOptions_Init(&jo);
	jo.PublishAsync.AckHandler = on_puback;
	jo.PublishAsync.AckHandlerClosure = s;
	jo.PublishAsync.MaxPending = 0; /* a batch is the bound */
	st = natsConnection_JetStream(&s->js, nc, &jo);
	if (st != NATS_OK) {
		pgo_log(PGO_LOG_ERROR, SUBJECT, "JetStream context: %s",
			natsStatus_GetText(st));
		report_down(s, natsStatus_GetText(st));
		return;
	}
	if (natsConnection_GetConnectedUrl(nc, url, sizeof(url)) != NATS_OK)
		snprintf(url, sizeof(url), "%s", s->where);
	pgo_nats_url_describe(url, url, sizeof(url));
	pgo_log(PGO_LOG_INFO, SUBJECT, "connected to %s", url);
	report_up(s);
}

static void handle(struct nats_sink *s, struct nq_item *it)
{
	struct nb_pub *p;
	char msg[600];

	switch (it->kind) {
	case NQ_ACK:
		p = pub_find(s, it->msg);
		if (p) {
			struct nb_batch *pb = p->pb;
			size_t ev = p->ev;

			pub_del(s, p);
			if (pb) {
				pgo_ack_t ack = pgo_nats_verdict(
					it->status, it->err_code, it->text,
					natsMsg_GetSubject(it->msg), msg,
					sizeof(msg));

				pb->outstanding--;
				verdict(pb, ev, ack, msg);
				/* No PubAck in time: the server is in
				 * doubt for the whole batch. */
				if (ack == PGO_ACK_UNAVAILABLE)
					fail_rest(pb, msg);
			}
		}
		natsMsg_Destroy(it->msg);
		it->msg = NULL;
		break;
	case NQ_CONNECTED:
		if (s->state == NS_IDLE) {
			natsConnection_Destroy(it->nc);
			break;
		}
		on_connected(s, it->nc);
		break;
	case NQ_CONNECT_FAILED:
		if (strcmp(s->last_err, it->text) != 0)
			pgo_log(PGO_LOG_WARN, SUBJECT,
				"cannot connect to %s: %s (retrying with "
				"backoff)",
				s->where, it->text);
		report_down(s, it->text);
		break;
	case NQ_DISCONNECTED:
		if (it->nc != s->nc || s->state == NS_DOWN)
			break;
		pgo_log(PGO_LOG_WARN, SUBJECT, "lost %s%s%s (reconnecting)",
			s->where, it->text[0] ? ": " : "", it->text);
		report_down(s, it->text[0] ? it->text : "disconnected");
		break;
	case NQ_RECONNECTED:
		if (it->nc != s->nc)
			break;
		pgo_log(PGO_LOG_INFO, SUBJECT, "reconnected to %s", s->where);
		report_up(s);
		break;
	case NQ_CLOSED:
		if (it->nc != s->nc || !s->nc || s->state == NS_IDLE)
			break;
		pgo_log(PGO_LOG_WARN, SUBJECT, "connection to %s closed%s%s",
			s->where, it->text[0] ? ": " : "", it->text);
		report_down(s, it->text[0] ? it->text : "connection closed");
		/* Destroyed at stop: cnats may still be calling back. */
		{
			natsConnection **g = realloc(
				s->graves, (s->n_graves + 1) * sizeof(*g));

			if (g) {
				s->graves = g;
				s->graves[s->n_graves++] = s->nc;
			}
		}
		pub_forget(s);
		jsCtx_Destroy(s->js);
		s->js = NULL;
		s->nc = NULL;
		if (connector_start(s) != PGO_OK)
			pgo_log(PGO_LOG_ERROR, SUBJECT,
				"cannot start a thread to reconnect");
		break;
	case NQ_ERROR:
		pgo_log(PGO_LOG_WARN, SUBJECT, "%s: %s", s->where, it->text);
		break;
	}
}

/* Takes what cnats' threads queued (read the eventfd first: a push after
 * the take writes it again). */
static void drain_queue(struct nats_sink *s)
{
	uint64_t n;
	struct nq_item *it;

	if (read(s->efd, &n, sizeof(n)) < 0) {
		/* EAGAIN: nothing counted; the list says what there is */
	}
	pthread_mutex_lock(&s->mu);
	it = s->q_head;
	s->q_head = s->q_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	while (it) {
		struct nq_item *next = it->next;

		handle(s, it);
		free(it);
		it = next;
	}
}

static void on_io(void *arg, int fd, short revents)
{
	struct nats_sink *s = arg;

	(void)fd;
	(void)revents;
	drain_queue(s);
	finish_done(s);
	arm(s);
}

static void on_timer(void *arg)
{
	struct nats_sink *s = arg;
	int64_t now = pgo_now_ms();
	char msg[600];

	drain_queue(s);
	for (struct nb_batch *pb = s->head; pb; pb = pb->next) {
		if (!pb->left || now < pb->deadline)
			continue;
		if (pb->sent)
			snprintf(msg, sizeof(msg),
				 "nats %s: no PubAck within %" PRId64 " ms",
				 s->where, s->timeout_ms);
		else
			snprintf(msg, sizeof(msg), "nats %s: %s", s->where,
				 s->last_err[0] ? s->last_err
						: "not connected");
		fail_rest(pb, msg);
	}
	finish_done(s);
	arm(s);
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

static natsStatus make_options(struct nats_sink *s, natsOptions **out)
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

/* --- ops --- */

static int nats_start(pgo_sink_t *sink)
{
	struct nats_sink *s = ns(sink);
	natsStatus st;

	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		pgo_sink_set_error(sink, "nats: eventfd: %s", strerror(errno));
		return PGO_ERR_IO;
	}
	s->io = pgo_sink_io_add(sink, s->efd, POLLIN, on_io, s);
	s->timer = pgo_sink_timer_add(sink, 0, on_timer, s);
	if (!s->io || !s->timer) {
		pgo_sink_set_error(sink, "nats: out of memory");
		return PGO_ERR_NOMEM;
	}
	st = make_options(s, &s->opts);
	if (st != NATS_OK) {
		pgo_sink_set_error(sink, "nats: %s", last_error(st));
		return PGO_ERR_CONFIG;
	}
	s->state = NS_CONNECTING;
	s->closing = false;
	s->told_down = false;
	s->last_err[0] = '\0';
	if (connector_start(s) != PGO_OK) {
		pgo_sink_set_error(sink, "nats: cannot start a thread");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

/* Stops the bridge (a callback frees what it is handed from now on) and
 * frees what it holds: the messages while cnats' library runs (it has
 * a lock natsMsg_Destroy() takes), a connection the loop never took. */
static void close_queue(struct nats_sink *s)
{
	struct nq_item *it;

	pthread_mutex_lock(&s->mu);
	s->closing = true;
	it = s->q_head;
	s->q_head = s->q_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	while (it) {
		struct nq_item *next = it->next;

		if (it->kind == NQ_CONNECTED)
			natsConnection_Destroy(it->nc);
		natsMsg_Destroy(it->msg);
		free(it);
		it = next;
	}
}

static void nats_stop(pgo_sink_t *sink)
{
	struct nats_sink *s = ns(sink);

	pgo_sink_io_del(s->io);
	pgo_sink_timer_del(s->timer);
	s->io = NULL;
	s->timer = NULL;
	s->state = NS_IDLE;
	connector_join(s);
	close_queue(s);
	pub_forget(s);
	free(s->pubs);
	s->pubs = NULL;
	s->pubs_cap = 0;
	jsCtx_Destroy(s->js);
	s->js = NULL;
	if (s->nc) {
		natsConnection_Close(s->nc);
		natsConnection_Destroy(s->nc);
		s->nc = NULL;
	}
	for (size_t i = 0; i < s->n_graves; i++)
		natsConnection_Destroy(s->graves[i]);
	free(s->graves);
	s->graves = NULL;
	s->n_graves = 0;
	if (s->opts) {
		natsOptions_Destroy(s->opts);
		s->opts = NULL;
		/* Every thread of cnats ends here: nothing calls back any
		 * more.  No cnats object may be touched after this. */
		if (nats_CloseAndWait(5000) != NATS_OK)
			pgo_log(PGO_LOG_WARN, SUBJECT,
				"cnats' threads did not stop within 5 s");
	}
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pb->sent = false;
	if (s->efd >= 0)
		close(s->efd);
	s->efd = -1;
}

static int nats_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct nats_sink *s = ns(sink);
	struct nb_batch *pb;
	int64_t now = pgo_now_ms();

	if (!s->io) {
		pgo_sink_set_error(sink, "nats: not started (no host loop)");
		return PGO_ERR_INVALID;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	pb = calloc(1, sizeof(*pb));
	if (!pb) {
		pgo_sink_set_error(sink, "nats: out of memory");
		return PGO_ERR_NOMEM;
	}
	pb->batch = b;
	pb->left = b->n;
	pb->started = now;
	/* Waiting for the first connection: at most one attempt on every
	 * server. */
	pb->deadline =
		clamp_deadline(s, now + s->connect_timeout_ms + GRACE_MS);
	pb->prev = s->tail;
	if (s->tail)
		s->tail->next = pb;
	else
		s->head = pb;
	s->tail = pb;
	b->sink_state = pb;
	drain_queue(s);
	if (s->state == NS_UP) {
		send_batch(s, pb);
	} else if (s->state == NS_DOWN) {
		char msg[600];

		snprintf(msg, sizeof(msg), "nats %s: %s", s->where,
			 s->last_err[0] ? s->last_err : "unreachable");
		fail_rest(pb, msg);
	}
	finish_done(s);
	arm(s);
	return PGO_OK;
}

static void nats_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct nats_sink *s = ns(sink);
	struct nb_batch *pb = b->sink_state;

	if (!pb)
		return;
	pub_orphan(s, pb);
	unlink_batch(s, pb);
	free(pb);
	arm(s);
}

static void nats_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	struct nats_sink *s = ns(sink);

	s->drain_until = deadline_ms;
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pb->deadline = clamp_deadline(s, pb->deadline);
	arm(s);
}

static void nats_close(pgo_sink_t *sink)
{
	struct nats_sink *s = ns(sink);

	if (!s)
		return;
	if (s->io || s->opts)
		nats_stop(sink);
	while (s->head) {
		struct nb_batch *pb = s->head;

		unlink_batch(s, pb);
		free(pb);
	}
	free(s->url);
	free(s->subject);
	free(s->queue);
	free(s->creds);
	free(s->nkey);
	free(s->tls_ca);
	free(s->tls_cert);
	free(s->tls_key);
	pgo_buf_free(&s->subj);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
	free(s);
	sink->priv = NULL;
}

/* --- configure --- */

static char *dup_or_null(const char *v)
{
	return v && *v ? strdup(v) : NULL;
}

/* The seed of an NKey file: its first line that looks like one. */
static int read_seed(const char *path, char *seed, size_t size,
		     pgo_error_t *err)
{
	FILE *f = fopen(path, "r");
	char line[256];

	if (!f)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.nats_nkey %s: %s", path,
				     strerror(errno));
	seed[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *t = line + strspn(line, " \t");

		if (strncmp(t, "SU", 2) == 0) {
			t[strcspn(t, " \t\r\n")] = '\0';
			snprintf(seed, size, "%s", t);
			break;
		}
	}
	fclose(f);
	if (!seed[0])
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.nats_nkey %s: no user NKey seed "
				     "(SU...) in the file",
				     path);
	return PGO_OK;
}

static int check_file(const char *key, const char *path, pgo_error_t *err)
{
	if (path && access(path, R_OK) != 0)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s %s: %s", key,
				     path, strerror(errno));
	return PGO_OK;
}

static int configure(struct nats_sink *s, const pgo_conf_t *conf,
		     pgo_error_t *err)
{
	const char *url = pgo_conf_get_str(conf, "sink.nats_url");
	const char *subject = pgo_conf_get_str(conf, "sink.nats_subject");

	if (pgo_sink_template_check("sink.nats_subject", subject, err) !=
	    PGO_OK)
		return err->code;
	if (!*url || strspn(url, ", ") == strlen(url))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.nats_url is empty");
	s->url = strdup(url);
	s->subject = strdup(subject);
	s->queue = strdup(pgo_conf_values(conf)->queue);
	s->creds = dup_or_null(pgo_conf_get_str(conf, "sink.nats_creds"));
	s->nkey = dup_or_null(pgo_conf_get_str(conf, "sink.nats_nkey"));
	s->tls_ca = dup_or_null(pgo_conf_get_str(conf, "sink.nats_tls_ca"));
	s->tls_cert = dup_or_null(pgo_conf_get_str(conf, "sink.nats_tls_cert"));
	s->tls_key = dup_or_null(pgo_conf_get_str(conf, "sink.nats_tls_key"));
	if (!s->url || !s->subject || !s->queue)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
	s->timeout_ms = pgo_conf_get_duration(conf, "sink.nats_timeout");
	s->connect_timeout_ms =
		pgo_conf_get_duration(conf, "sink.nats_connect_timeout");
	s->fmt.subject = s->subject;
	s->fmt.queue = s->queue;
	s->fmt.cloudevents = pgo_conf_get_int(conf, "sink.nats_format") == 1;
	pgo_nats_url_describe(url, s->where, sizeof(s->where));
	s->secure = s->tls_ca || s->tls_cert || strstr(url, "tls://") ||
		    strstr(url, "TLS://");
	if (!s->tls_cert != !s->tls_key)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.nats_tls_cert and sink.nats_tls_key "
				     "go together");
	if (check_file("sink.nats_creds", s->creds, err) != PGO_OK ||
	    check_file("sink.nats_tls_ca", s->tls_ca, err) != PGO_OK ||
	    check_file("sink.nats_tls_cert", s->tls_cert, err) != PGO_OK ||
	    check_file("sink.nats_tls_key", s->tls_key, err) != PGO_OK)
		return err->code;
	if (s->nkey) {
		char seed[128];

		if (s->creds)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "sink.nats_creds and "
					     "sink.nats_nkey exclude each "
					     "other");
		if (read_seed(s->nkey, seed, sizeof(seed), err) != PGO_OK)
			return err->code;
		if (pgo_nats_nkey_public(seed, s->nkey_pub, sizeof(s->nkey_pub),
					 err) != PGO_OK) {
			char m[sizeof(err->msg)];

			snprintf(m, sizeof(m), "%s", err->msg);
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "sink.nats_nkey %s: %s", s->nkey,
					     m);
		}
		memset(seed, 0, sizeof(seed));
	}
	return PGO_OK;
}

int pgo_sink_nats_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	struct nats_sink *s = calloc(1, sizeof(*s));
	pgo_error_t err;

	if (!s) {
		pgo_sink_set_error(sink, "nats: out of memory");
		return PGO_ERR_NOMEM;
	}
	nats_close(sink); /* a reconfigure replaces the old state */
	s->sink = sink;
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	pgo_buf_init(&s->subj);
	sink->priv = s;
	pgo_error_clear(&err);
	if (configure(s, conf, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	return PGO_OK;
}

static int nats_open(pgo_sink_t *sink)
{
	struct nats_sink *s = ns(sink);

	if (!s || !s->url) {
		pgo_sink_set_error(sink, "nats sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT, "publishing to %s, subject %s%s",
		s->where, s->subject,
		s->fmt.cloudevents ? ", CloudEvents headers" : "");
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_nats_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "nats",
	.open = nats_open,
	.start = nats_start,
	.submit = nats_submit,
	.cancel = nats_cancel,
	.drain = nats_drain,
	.stop = nats_stop,
	.close = nats_close,
};
