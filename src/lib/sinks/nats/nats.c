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
 *
 * This file: the loop's side (the queue's watcher, the states, the sink's
 * ops and its configuration); connect.c: cnats' threads and the options;
 * publish.c: the publishes, their PubAcks and the batches' verdicts.
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
#include "sinks/nats/nats_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/nats/nats.h"
#include "sinks/sink_int.h"

static struct nats_sink *ns(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- the connection, on the loop's thread --- */

static void report_down(struct nats_sink *s, const char *why)
{
	char msg[600];

	s->state = NS_DOWN;
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	snprintf(msg, sizeof(msg), "nats %s: %s", s->where, why);
	pgo_ns_fail_all(s, msg);
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
			pgo_ns_send_batch(s, pb);
}

static void on_connected(struct nats_sink *s, natsConnection *nc)
{
	jsOptions jo;
	natsStatus st;
	char url[256];

	pgo_ns_connector_join(s);
	s->nc = nc;
	jsOptions_Init(&jo);
	jo.PublishAsync.AckHandler = pgo_ns_on_puback;
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
		p = pgo_ns_pub_find(s, it->msg);
		if (p) {
			struct nb_batch *pb = p->pb;
			size_t ev = p->ev;

			pgo_ns_pub_del(s, p);
			if (pb) {
				pgo_ack_t ack = pgo_nats_verdict(
					it->status, it->err_code, it->text,
					natsMsg_GetSubject(it->msg), msg,
					sizeof(msg));

				pb->outstanding--;
				pgo_ns_verdict(pb, ev, ack, msg);
				/* No PubAck in time: the server is in
				 * doubt for the whole batch. */
				if (ack == PGO_ACK_UNAVAILABLE)
					pgo_ns_fail_rest(pb, msg);
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
		pgo_ns_pub_forget(s);
		jsCtx_Destroy(s->js);
		s->js = NULL;
		s->nc = NULL;
		if (pgo_ns_connector_start(s) != PGO_OK)
			pgo_log(PGO_LOG_ERROR, SUBJECT,
				"cannot start a thread to reconnect");
		break;
	case NQ_ERROR:
		pgo_log(PGO_LOG_WARN, SUBJECT, "%s: %s", s->where, it->text);
		break;
	}
}

/* Takes what cnats' threads queued (read the eventfd first: a pgo_ns_push after
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
	pgo_ns_finish_done(s);
	pgo_ns_arm(s);
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
		pgo_ns_fail_rest(pb, msg);
	}
	pgo_ns_finish_done(s);
	pgo_ns_arm(s);
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
	st = pgo_ns_make_options(s, &s->opts);
	if (st != NATS_OK) {
		pgo_sink_set_error(sink, "nats: %s", pgo_ns_last_error(st));
		return PGO_ERR_CONFIG;
	}
	s->state = NS_CONNECTING;
	s->closing = false;
	s->told_down = false;
	s->last_err[0] = '\0';
	if (pgo_ns_connector_start(s) != PGO_OK) {
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
	pgo_ns_connector_join(s);
	close_queue(s);
	pgo_ns_pub_forget(s);
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
	pb->deadline = pgo_ns_clamp_deadline(s, now + s->connect_timeout_ms +
							GRACE_MS);
	pb->prev = s->tail;
	if (s->tail)
		s->tail->next = pb;
	else
		s->head = pb;
	s->tail = pb;
	b->sink_state = pb;
	drain_queue(s);
	if (s->state == NS_UP) {
		pgo_ns_send_batch(s, pb);
	} else if (s->state == NS_DOWN) {
		char msg[600];

		snprintf(msg, sizeof(msg), "nats %s: %s", s->where,
			 s->last_err[0] ? s->last_err : "unreachable");
		pgo_ns_fail_rest(pb, msg);
	}
	pgo_ns_finish_done(s);
	pgo_ns_arm(s);
	return PGO_OK;
}

static void nats_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct nats_sink *s = ns(sink);
	struct nb_batch *pb = b->sink_state;

	if (!pb)
		return;
	pgo_ns_pub_orphan(s, pb);
	pgo_ns_unlink_batch(s, pb);
	free(pb);
	pgo_ns_arm(s);
}

static void nats_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	struct nats_sink *s = ns(sink);

	s->drain_until = deadline_ms;
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pb->deadline = pgo_ns_clamp_deadline(s, pb->deadline);
	pgo_ns_arm(s);
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

		pgo_ns_unlink_batch(s, pb);
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
