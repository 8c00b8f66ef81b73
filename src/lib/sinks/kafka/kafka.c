/*
 * sinks/kafka/kafka.c — the Kafka sink: one message per event through an
 * idempotent librdkafka producer (acks=all, murmur2_random), an event
 * acknowledged when its delivery report says the broker holds it.
 *
 *   topic   sink.kafka_topic with {topic}, {queue}, {type} replaced
 *   key     the event's key (none when it is NULL)
 *   value   the payload's JSON as stored
 *   headers id, type, topic, created_at (or the CloudEvents ce_* set) and
 *           every entry of the event's headers object (sinks/kafka/kafka.h)
 *
 * librdkafka runs threads of its own; they never call into the relay.
 * Everything they report — delivery reports, errors, logs, statistics —
 * is put on librdkafka's main queue, which writes a byte to a pipe when
 * it gets work (rd_kafka_queue_io_event_enable()).  The pipe is a watcher
 * of the host's loop, whose callback serves the queue (rd_kafka_poll()),
 * so the verdicts and pgo_sink_done() happen on the loop's thread.
 *
 * A batch is done when every message has its report, and until then the
 * claim transaction holds the rows.  librdkafka itself never gives up on
 * a message (message.timeout.ms = 0): when messages time out, its
 * idempotent producer may write later messages of a partition without
 * the timed-out ones (librdkafka's INTRODUCTION, "Message timeout
 * considerations"), which broke per-key order across broker outages.
 * The wait is bounded here instead (sink.kafka_timeout, below
 * database.idle_tx_timeout): a batch past it goes back UNAVAILABLE and
 * its messages stay in librdkafka, which delivers them in order when it
 * can; the rows are claimed again and their new copies queue behind the
 * old ones.  A cancelled batch forgets its messages the same way; the
 * reports that still come for them are dropped (at least once, the same
 * id header).  A produce() refused at once (a full queue) stops the
 * batch there, so no later message of a key is produced without it.
 *
 * Health: librdkafka says when every broker is down (_ALL_BROKERS_DOWN);
 * the host is told and claiming pauses.  The statistics librdkafka emits
 * every second say when a broker is up again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/kafka/kafka.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define SUBJECT "sink kafka"

struct kbatch;

/* One message of a batch in librdkafka: its delivery report's opaque. */
struct kmsg {
	struct kbatch *kb;
	size_t i; /* index of the event in the batch */
};

/* One batch taken by submit(), in batch->sink_state until it is done or
 * cancelled; freed when it is neither the host's nor awaited. */
struct kbatch {
	struct kafka_sink *ks;
	pgo_batch_t *batch; /* NULL once cancelled (reports are dropped) */
	struct kbatch *prev, *next; /* the sink's batches, oldest first */
	size_t left;		    /* events without a verdict */
	size_t inflight;	    /* messages whose report is awaited */
	int64_t started;	    /* for the debug line */
	int64_t deadline;	    /* sink.kafka_timeout after submit */
	struct kmsg msgs[];	    /* one per event */
};

/* A topic's handle, made by rd_kafka_topic_new(): unlike a message to a
 * topic librdkafka has not seen, it asks for the topic's partitions and
 * leaders at once.  A topic first met through rd_kafka_producev() waits
 * for the topic scan librdkafka runs once a second: a first batch of
 * 992 ms in a drain whose other batches took 3.  Kept until stop. */
struct ktopic {
	struct ktopic *next;
	rd_kafka_topic_t *rkt;
	char name[];
};

#define MAX_TOPICS 1024 /* more are produced by name, without a handle */

struct kafka_sink {
	pgo_sink_t *sink;
	/* configuration, copied at configure */
	rd_kafka_conf_t *rconf; /* the producer's, kept for start() */
	char *topic_tmpl;	/* sink.kafka_topic */
	char *source_tmpl;	/* sink.kafka_ce_source */
	char *queue;		/* relay.queue, for {queue} */
	char *brokers;		/* sink.kafka_brokers, for log lines */
	pgo_kafka_format_t format;

	rd_kafka_t *rk;	       /* start to stop */
	struct ktopic *topics; /* the topics' handles, newest first */
	struct ktopic *last;   /* the last one used */
	size_t ntopics;
	rd_kafka_queue_t *mainq; /* its main queue */
	int wake[2];		 /* the pipe the main queue writes */
	pgo_sink_io_t *io;	 /* watches wake[0] */
	pgo_sink_timer_t *timer; /* the oldest live batch's deadline */
	int64_t timeout_ms;	 /* sink.kafka_timeout */
	struct kbatch *head, *tail;
	bool down;	    /* the host was told every broker is down */
	bool stopping;	    /* stop(): reports are not looked at */
	bool fatal;	    /* the idempotent producer failed for good */
	pgo_buf_t topic;    /* scratch: one expanded topic */
	pgo_buf_t source;   /* scratch: one expanded ce_source */
	char last_err[400]; /* the last error logged (logged once) */
};

static struct kafka_sink *ks_of(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- the pure parts (sinks/kafka/kafka.h) --- */

pgo_ack_t pgo_kafka_verdict(rd_kafka_resp_err_t err)
{
	switch (err) {
	case RD_KAFKA_RESP_ERR_NO_ERROR: return PGO_ACK_OK;
	/* The message itself, its topic or our rights: sending it again
	 * gets the same answer. */
	case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
	case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
	case RD_KAFKA_RESP_ERR_INVALID_RECORD:
	case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
	case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
	case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
	case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
	case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
	case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
	case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
	case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
	case RD_KAFKA_RESP_ERR_INVALID_REQUIRED_ACKS:
	case RD_KAFKA_RESP_ERR__INVALID_ARG: return PGO_ACK_DEAD;
	default:
		/* Timeouts, no leader, not enough replicas, transport,
		 * a full queue, brokers down, purged: not the event's
		 * fault. */
		return PGO_ACK_UNAVAILABLE;
	}
}

/* Adds a header with a NUL-terminated value (NULL: no value). */
static void hdr_add(rd_kafka_headers_t *h, const char *name, const char *v)
{
	(void)rd_kafka_header_add(h, name, -1, v, v ? -1 : 0);
}

static bool shadowed(const char *name, pgo_kafka_format_t format)
{
	static const char *const plain[] = {"id", "type", "topic", "created_at",
					    NULL};

	if (format == PGO_KAFKA_CLOUDEVENTS)
		return strncmp(name, "ce_", 3) == 0 ||
		       strcmp(name, "content-type") == 0;
	for (int i = 0; plain[i]; i++)
		if (strcmp(name, plain[i]) == 0)
			return true;
	return false;
}

rd_kafka_headers_t *pgo_kafka_headers(const pgo_event_t *ev,
				      pgo_kafka_format_t format,
				      const char *source)
{
	rd_kafka_headers_t *h = rd_kafka_headers_new(8);
	char id[24];
	json_t *obj;

	if (!h)
		return NULL;
	snprintf(id, sizeof(id), "%" PRId64, ev->id);
	if (format == PGO_KAFKA_CLOUDEVENTS) {
		hdr_add(h, "ce_specversion", "1.0");
		hdr_add(h, "ce_id", id);
		hdr_add(h, "ce_type", ev->type);
		hdr_add(h, "ce_source", source);
		if (ev->key)
			hdr_add(h, "ce_subject", ev->key);
		hdr_add(h, "ce_time", ev->created_at);
		hdr_add(h, "content-type", "application/json");
	} else {
		hdr_add(h, "id", id);
		hdr_add(h, "type", ev->type);
		hdr_add(h, "topic", ev->topic);
		hdr_add(h, "created_at", ev->created_at);
	}
	obj = ev->headers ? json_loads(ev->headers, JSON_DECODE_ANY, NULL)
			  : NULL;
	if (json_is_object(obj)) {
		const char *name;
		json_t *v;

		json_object_foreach(obj, name, v)
		{
			char *text;

			if (shadowed(name, format))
				continue;
			if (json_is_string(v)) {
				(void)rd_kafka_header_add(
					h, name, -1, json_string_value(v),
					(ssize_t)json_string_length(v));
			} else if (json_is_null(v)) {
				hdr_add(h, name, NULL);
			} else {
				text = json_dumps(v, JSON_COMPACT |
							     JSON_ENCODE_ANY);
				if (text)
					hdr_add(h, name, text);
				free(text);
			}
		}
	}
	json_decref(obj);
	return h;
}

/* --- batches and verdicts --- */

static void unlink_batch(struct kafka_sink *ks, struct kbatch *kb)
{
	if (kb->prev)
		kb->prev->next = kb->next;
	else
		ks->head = kb->next;
	if (kb->next)
		kb->next->prev = kb->prev;
	else
		ks->tail = kb->prev;
	kb->prev = kb->next = NULL;
}

static void verdict(struct kbatch *kb, size_t i, pgo_ack_t ack, const char *msg)
{
	if (pgo_batch_set(kb->batch, i, ack, msg))
		kb->left--;
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
static void finish_done(struct kafka_sink *ks)
{
	for (;;) {
		struct kbatch *kb = ks->head;
		pgo_batch_t *b;

		while (kb && (kb->left > 0 || !kb->batch))
			kb = kb->next;
		if (!kb)
			return;
		b = kb->batch;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"batch of %zu done in %" PRId64 " ms", b->n,
			pgo_now_ms() - kb->started);
		b->sink_state = NULL;
		if (kb->inflight > 0) {
			/* Decided before every report came (its deadline,
			 * a refused produce): the messages stay with
			 * librdkafka, their reports are dropped. */
			kb->batch = NULL;
		} else {
			unlink_batch(ks, kb);
			free(kb);
		}
		pgo_sink_done(ks->sink, b);
	}
}

/* The deadline of the oldest batch still waiting for reports. */
static void arm(struct kafka_sink *ks)
{
	int64_t at = 0;

	for (struct kbatch *kb = ks->head; kb; kb = kb->next)
		if (kb->batch && kb->left > 0 && (!at || kb->deadline < at))
			at = kb->deadline;
	if (ks->timer)
		pgo_sink_timer_set(ks->timer, at);
}

/* Batches past sink.kafka_timeout go back untouched. */
static void on_timer(void *arg)
{
	struct kafka_sink *ks = arg;
	int64_t now = pgo_now_ms();
	char msg[160];

	snprintf(msg, sizeof(msg),
		 "kafka %s: no delivery report within %" PRId64 " ms",
		 ks->brokers, ks->timeout_ms);
	for (struct kbatch *kb = ks->head; kb; kb = kb->next)
		if (kb->batch && kb->left > 0 && now >= kb->deadline) {
			pgo_batch_fail_rest(kb->batch, PGO_ACK_UNAVAILABLE,
					    msg);
			kb->left = 0;
		}
	finish_done(ks);
	arm(ks);
}

/* The text of a failure: what librdkafka says, and its error's name. */
static void fail_text(char *buf, size_t size, const char *topic,
		      rd_kafka_resp_err_t err, const char *why)
{
	snprintf(buf, size, "kafka: %s: %s (%s)", topic,
		 why && *why ? why : rd_kafka_err2str(err),
		 rd_kafka_err2name(err));
}

/* --- librdkafka's callbacks, served by rd_kafka_poll() on the loop --- */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
			void *opaque)
{
	struct kafka_sink *ks = opaque;
	struct kmsg *km = m->_private;
	struct kbatch *kb;
	char msg[400];

	(void)rk;
	if (ks->stopping || !km)
		return;
	kb = km->kb;
	kb->inflight--;
	if (!kb->batch) {
		/* Cancelled: its rows are back in the queue. */
		if (kb->inflight == 0) {
			unlink_batch(ks, kb);
			free(kb);
		}
		return;
	}
	if (m->err) {
		/* Not rd_kafka_message_errstr(): for a delivery report
		 * it may return the payload, which has no NUL. */
		fail_text(msg, sizeof(msg), rd_kafka_topic_name(m->rkt), m->err,
			  NULL);
		verdict(kb, km->i, pgo_kafka_verdict(m->err), msg);
	} else {
		verdict(kb, km->i, PGO_ACK_OK, NULL);
	}
}

static void report_down(struct kafka_sink *ks, const char *why)
{
	if (ks->down)
		return;
	ks->down = true;
	pgo_sink_health(ks->sink, 0, why);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct kafka_sink *ks = opaque;
	char msg[400];

	if (ks->stopping)
		return;
	snprintf(msg, sizeof(msg), "kafka %s: %s (%s)", ks->brokers, reason,
		 rd_kafka_err2name((rd_kafka_resp_err_t)err));
	if (err == RD_KAFKA_RESP_ERR__FATAL) {
		char fatal[256];
		rd_kafka_resp_err_t ferr =
			rd_kafka_fatal_error(rk, fatal, sizeof(fatal));

		pgo_log(PGO_LOG_ERROR, SUBJECT,
			"fatal producer error: %s (%s); a new producer is made "
			"once the batches in flight are back",
			fatal, rd_kafka_err2name(ferr));
		ks->fatal = true;
		return;
	}
	if (strcmp(msg, ks->last_err) != 0) {
		pgo_log(PGO_LOG_WARN, SUBJECT, "%s", msg);
		snprintf(ks->last_err, sizeof(ks->last_err), "%s", msg);
	}
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN ||
	    (err == RD_KAFKA_RESP_ERR__RESOLVE && !ks->head))
		report_down(ks, msg);
}

/* The statistics (every second): while the host thinks the cluster is
 * down, a broker in state UP brings it back. */
static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
	struct kafka_sink *ks = opaque;
	json_t *root, *brokers, *b;
	const char *name;
	bool up = false;

	(void)rk;
	if (!ks->down || ks->stopping)
		return 0;
	root = json_loadb(json, len, 0, NULL);
	brokers = json_object_get(root, "brokers");
	json_object_foreach(brokers, name, b)
	{
		const char *state =
			json_string_value(json_object_get(b, "state"));
		json_int_t id =
			json_integer_value(json_object_get(b, "nodeid"));

		if (id >= 0 && state && strcmp(state, "UP") == 0)
			up = true;
	}
	json_decref(root);
	if (up) {
		ks->down = false;
		ks->last_err[0] = '\0';
		pgo_log(PGO_LOG_INFO, SUBJECT, "kafka %s: a broker is up again",
			ks->brokers);
		pgo_sink_health(ks->sink, 1, NULL);
	}
	return 0; /* librdkafka frees json */
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac,
		   const char *buf)
{
	(void)rk;
	/* syslog levels: 0-3 errors, 4 warnings, 5-6 notices, 7 debug.
	 * Connection failures (FAIL) come through on_error() as well. */
	if (strcmp(fac, "FAIL") == 0)
		pgo_log(PGO_LOG_DEBUG, SUBJECT, "librdkafka %s: %s", fac, buf);
	else if (level <= 3)
		pgo_log(PGO_LOG_ERROR, SUBJECT, "librdkafka %s: %s", fac, buf);
	else if (level == 4)
		pgo_log(PGO_LOG_WARN, SUBJECT, "librdkafka %s: %s", fac, buf);
	else
		pgo_log(PGO_LOG_DEBUG, SUBJECT, "librdkafka %s: %s", fac, buf);
}

/* The main queue has work: serve it, then hand back finished batches. */
static void on_wake(void *arg, int fd, short revents)
{
	struct kafka_sink *ks = arg;
	char buf[256];

	(void)revents;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	if (!ks->rk)
		return;
	while (rd_kafka_poll(ks->rk, 0) > 0)
		;
	finish_done(ks);
	arm(ks);
}

/* --- ops --- */

static void kafka_close(pgo_sink_t *sink)
{
	struct kafka_sink *ks = ks_of(sink);

	if (!ks)
		return;
	if (ks->rconf)
		rd_kafka_conf_destroy(ks->rconf);
	free(ks->topic_tmpl);
	free(ks->source_tmpl);
	free(ks->queue);
	free(ks->brokers);
	pgo_buf_free(&ks->topic);
	pgo_buf_free(&ks->source);
	free(ks);
	sink->priv = NULL;
}

int pgo_sink_kafka_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	struct kafka_sink *ks;
	pgo_error_t err;

	if (pgo_sink_kafka_validate(conf, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		pgo_sink_set_error(sink, "kafka: out of memory");
		return PGO_ERR_NOMEM;
	}
	kafka_close(sink); /* a reconfigure replaces the old state */
	sink->priv = ks;
	ks->sink = sink;
	ks->wake[0] = ks->wake[1] = -1;
	pgo_buf_init(&ks->topic);
	pgo_buf_init(&ks->source);
	ks->format =
		(pgo_kafka_format_t)pgo_conf_get_int(conf, "sink.kafka_format");
	ks->timeout_ms = pgo_conf_get_duration(conf, "sink.kafka_timeout");
	ks->rconf = pgo_kafka_conf_build(conf, &err);
	if (!ks->rconf) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	ks->topic_tmpl = strdup(pgo_conf_get_str(conf, "sink.kafka_topic"));
	ks->source_tmpl =
		strdup(pgo_conf_get_str(conf, "sink.kafka_ce_source"));
	ks->brokers = strdup(pgo_conf_get_str(conf, "sink.kafka_brokers"));
	ks->queue = strdup(v->queue);
	if (!ks->topic_tmpl || !ks->source_tmpl || !ks->brokers || !ks->queue) {
		pgo_sink_set_error(sink, "kafka: out of memory");
		return PGO_ERR_NOMEM;
	}
	rd_kafka_conf_set_opaque(ks->rconf, ks);
	rd_kafka_conf_set_dr_msg_cb(ks->rconf, on_delivery);
	rd_kafka_conf_set_error_cb(ks->rconf, on_error);
	rd_kafka_conf_set_stats_cb(ks->rconf, on_stats);
	rd_kafka_conf_set_log_cb(ks->rconf, on_log);
	return PGO_OK;
}

static int kafka_open(pgo_sink_t *sink)
{
	struct kafka_sink *ks = ks_of(sink);

	if (!ks || !ks->rconf) {
		pgo_sink_set_error(sink, "kafka sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT,
		"publishing to %s, topic %s, format %s (librdkafka %s)",
		ks->brokers, ks->topic_tmpl,
		ks->format == PGO_KAFKA_CLOUDEVENTS ? "cloudevents" : "plain",
		rd_kafka_version_str());
	return PGO_OK;
}

/* The handle of a topic (struct ktopic), made the first time; NULL when
 * librdkafka refuses the name or MAX_TOPICS are kept. */
static rd_kafka_topic_t *topic_of(struct kafka_sink *ks, const char *name)
{
	struct ktopic *t;
	size_t len;

	if (ks->last && strcmp(ks->last->name, name) == 0)
		return ks->last->rkt;
	for (t = ks->topics; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return (ks->last = t)->rkt;
	if (ks->ntopics >= MAX_TOPICS)
		return NULL;
	len = strlen(name);
	t = malloc(sizeof(*t) + len + 1);
	if (!t)
		return NULL;
	memcpy(t->name, name, len + 1);
	t->rkt = rd_kafka_topic_new(ks->rk, name, NULL);
	if (!t->rkt) {
		free(t);
		return NULL;
	}
	t->next = ks->topics;
	ks->topics = ks->last = t;
	ks->ntopics++;
	return t->rkt;
}

/* Makes the producer and bridges its main queue to the pipe. */
static int producer_new(struct kafka_sink *ks)
{
	rd_kafka_conf_t *c = rd_kafka_conf_dup(ks->rconf);
	char why[512];

	if (!c) {
		pgo_sink_set_error(ks->sink, "kafka: out of memory");
		return PGO_ERR_NOMEM;
	}
	/* Connecting starts here, in librdkafka's threads: unreachable
	 * brokers are an outage (reported through health), not an error. */
	ks->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, why, sizeof(why));
	if (!ks->rk) {
		rd_kafka_conf_destroy(c);
		pgo_sink_set_error(ks->sink, "kafka: %s", why);
		return PGO_ERR_CONFIG;
	}
	ks->stopping = false;
	ks->fatal = false;
	rd_kafka_set_log_queue(ks->rk, NULL); /* logs to the main queue */
	ks->mainq = rd_kafka_queue_get_main(ks->rk);
	rd_kafka_queue_io_event_enable(ks->mainq, ks->wake[1], "1", 1);
	/* A topic that no event picks ({queue} at most) is known now: its
	 * partitions and leaders are learnt while the relay starts. */
	if (!strstr(ks->topic_tmpl, "{topic}") &&
	    !strstr(ks->topic_tmpl, "{type}")) {
		const char *topic = pgo_template_expand(
			&ks->topic, ks->topic_tmpl, NULL, ks->queue, NULL);

		if (topic)
			(void)topic_of(ks, topic);
	}
	return PGO_OK;
}

/* Ends the producer at once: what it still holds is dropped, its
 * reports are not looked at (the batches' rows are rolled back). */
static void producer_destroy(struct kafka_sink *ks)
{
	if (!ks->rk)
		return;
	ks->stopping = true;
	while (ks->topics) {
		struct ktopic *t = ks->topics;

		ks->topics = t->next;
		rd_kafka_topic_destroy(t->rkt);
		free(t);
	}
	ks->last = NULL;
	ks->ntopics = 0;
	rd_kafka_purge(ks->rk, RD_KAFKA_PURGE_F_QUEUE |
				       RD_KAFKA_PURGE_F_INFLIGHT |
				       RD_KAFKA_PURGE_F_NON_BLOCKING);
	rd_kafka_queue_io_event_enable(ks->mainq, -1, NULL, 0);
	rd_kafka_queue_destroy(ks->mainq);
	ks->mainq = NULL;
	rd_kafka_destroy(ks->rk);
	ks->rk = NULL;
}

static int kafka_start(pgo_sink_t *sink)
{
	struct kafka_sink *ks = ks_of(sink);
	int rc;

	if (pipe2(ks->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
		pgo_sink_set_error(sink, "kafka: pipe: %s", strerror(errno));
		ks->wake[0] = ks->wake[1] = -1;
		return PGO_ERR_IO;
	}
	rc = producer_new(ks);
	if (rc != PGO_OK)
		return rc;
	ks->io = pgo_sink_io_add(sink, ks->wake[0], POLLIN, on_wake, ks);
	ks->timer = pgo_sink_timer_add(sink, 0, on_timer, ks);
	if (!ks->io || !ks->timer) {
		pgo_sink_set_error(sink, "kafka: out of memory");
		return PGO_ERR_NOMEM;
	}
	/* Whatever came before the fd was set. */
	on_wake(ks, ks->wake[0], POLLIN);
	return PGO_OK;
}

static void kafka_stop(pgo_sink_t *sink)
{
	struct kafka_sink *ks = ks_of(sink);

	pgo_sink_io_del(ks->io);
	ks->io = NULL;
	pgo_sink_timer_del(ks->timer);
	ks->timer = NULL;
	/* Batches still held are forgotten (their rows are rolled back);
	 * so are the messages librdkafka still has. */
	producer_destroy(ks);
	while (ks->head) {
		struct kbatch *kb = ks->head;

		unlink_batch(ks, kb);
		if (kb->batch)
			kb->batch->sink_state = NULL;
		free(kb);
	}
	for (int i = 0; i < 2; i++)
		if (ks->wake[i] >= 0) {
			close(ks->wake[i]);
			ks->wake[i] = -1;
		}
	ks->down = false;
}

/* Produces event i of kb's batch, or gives it its verdict at once. */
static void produce(struct kafka_sink *ks, struct kbatch *kb, size_t i)
{
	const pgo_event_t *ev = &kb->batch->events[i];
	const char *topic, *source = NULL;
	rd_kafka_topic_t *rkt;
	rd_kafka_headers_t *h;
	rd_kafka_vu_t vu[6];
	rd_kafka_error_t *error;
	rd_kafka_resp_err_t err;
	char msg[400];

	topic = pgo_template_expand(&ks->topic, ks->topic_tmpl, ev->topic,
				    ks->queue, ev->type);
	if (ks->format == PGO_KAFKA_CLOUDEVENTS)
		source = pgo_template_expand(&ks->source, ks->source_tmpl,
					     ev->topic, ks->queue, ev->type);
	h = topic && (source || ks->format != PGO_KAFKA_CLOUDEVENTS)
		    ? pgo_kafka_headers(ev, ks->format, source)
		    : NULL;
	if (!h) {
		verdict(kb, i, PGO_ACK_RETRY, "kafka: out of memory");
		return;
	}
	kb->msgs[i] = (struct kmsg){.kb = kb, .i = i};
	rkt = topic_of(ks, topic);
	vu[0].vtype = rkt ? RD_KAFKA_VTYPE_RKT : RD_KAFKA_VTYPE_TOPIC;
	if (rkt)
		vu[0].u.rkt = rkt;
	else
		vu[0].u.cstr = topic;
	vu[1].vtype = RD_KAFKA_VTYPE_KEY;
	vu[1].u.mem.ptr = (void *)ev->key;
	vu[1].u.mem.size = ev->key ? strlen(ev->key) : 0;
	vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
	vu[2].u.mem.ptr = (void *)ev->payload;
	vu[2].u.mem.size = strlen(ev->payload);
	vu[3].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
	vu[3].u.i = RD_KAFKA_MSG_F_COPY;
	vu[4].vtype = RD_KAFKA_VTYPE_HEADERS;
	vu[4].u.headers = h;
	vu[5].vtype = RD_KAFKA_VTYPE_OPAQUE;
	vu[5].u.ptr = &kb->msgs[i];
	error = rd_kafka_produceva(ks->rk, vu, sizeof(vu) / sizeof(*vu));
	err = error ? rd_kafka_error_code(error) : RD_KAFKA_RESP_ERR_NO_ERROR;
	if (error)
		rd_kafka_error_destroy(error);
	if (err) {
		rd_kafka_headers_destroy(h);
		fail_text(msg, sizeof(msg), topic, err, NULL);
		verdict(kb, i, pgo_kafka_verdict(err), msg);
		return;
	}
	kb->inflight++;
}

static int kafka_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct kafka_sink *ks = ks_of(sink);
	struct kbatch *kb;

	if (!ks->rk || !ks->io) {
		pgo_sink_set_error(sink, "kafka: not started (no host loop)");
		return PGO_ERR_INVALID;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	/* After a fatal error (the idempotent producer lost its sequence)
	 * librdkafka refuses everything: start a new producer, with a new
	 * producer id, once no batch waits on the old one. */
	if (ks->fatal && !ks->head) {
		producer_destroy(ks);
		if (producer_new(ks) != PGO_OK)
			return PGO_ERR_SINK;
		pgo_log(PGO_LOG_INFO, SUBJECT,
			"new producer after a fatal error");
	}
	kb = calloc(1, sizeof(*kb) + b->n * sizeof(struct kmsg));
	if (!kb) {
		pgo_sink_set_error(sink, "kafka: out of memory");
		return PGO_ERR_NOMEM;
	}
	kb->ks = ks;
	kb->batch = b;
	kb->left = b->n;
	kb->started = pgo_now_ms();
	kb->deadline = kb->started + ks->timeout_ms;
	kb->prev = ks->tail;
	if (ks->tail)
		ks->tail->next = kb;
	else
		ks->head = kb;
	ks->tail = kb;
	b->sink_state = kb;
	for (size_t i = 0; i < b->n; i++) {
		produce(ks, kb, i);
		if (b->acks[i] != PGO_ACK_UNAVAILABLE)
			continue;
		/* Refused at once (a full queue, say): nothing after it is
		 * produced, so no later message of its key goes first. */
		pgo_batch_fail_rest(b, PGO_ACK_UNAVAILABLE, b->errors[i]);
		kb->left = 0;
		break;
	}
	/* Reports that are already there, and batches failed whole. */
	while (rd_kafka_poll(ks->rk, 0) > 0)
		;
	finish_done(ks);
	arm(ks);
	return PGO_OK;
}

static void kafka_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct kafka_sink *ks = ks_of(sink);
	struct kbatch *kb = b->sink_state;

	if (!kb)
		return;
	b->sink_state = NULL;
	kb->batch = NULL;
	if (kb->inflight == 0) {
		unlink_batch(ks, kb);
		free(kb);
	}
}

const pgo_sink_ops_t pgo_sink_kafka_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "kafka",
	.open = kafka_open,
	.start = kafka_start,
	.submit = kafka_submit,
	.cancel = kafka_cancel,
	.stop = kafka_stop,
	.close = kafka_close,
};
