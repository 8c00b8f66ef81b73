/*
 * wal.c — the relay of a queue captured through the WAL (docs/wal.md).
 *
 * Producers of such a queue write no row: send_to() emits a
 * transactional logical message with the prefix pgoutbox:<queue> whose
 * content is the event's envelope (wal_envelope() in sql/schema).  This
 * relay streams them from the logical replication slot pgoutbox_<queue>
 * with pgoutput (proto_version 1, messages on, the empty publication
 * pgoutbox_wal), on a replication connection (replication=database):
 *
 *   DOWN       no connection; at retry_at: connect (CONNECTING), check
 *              the slot (CHECKING; missing or lost: stop with an error),
 *              START_REPLICATION (STARTING).
 *              A slot another relay streams refuses us: stand by, try
 *              again every second (the slot's active flag elects).
 *   STREAMING  XLogData ('w') carries pgoutput's messages: 'B' opens a
 *              transaction, 'M' is one of its messages (ours by the
 *              prefix), 'C' closes it with its end LSN; the transaction
 *              joins the FIFO of committed ones.  Keepalives ('k') carry
 *              the server's sent position and may ask for a reply.
 *
 * The FIFO's head transactions go to the sink as one batch (relay.batch
 * events, whole transactions, at least one); one batch at a time, so
 * the sink sees commit order.  The slot's confirmed position moves, by
 * standby status updates ('r'), only to the end LSN of a transaction
 * whose every event the sink acked, and past the server's sent position
 * only when nothing is waiting: a kill -9 anywhere loses nothing, and
 * redelivers only what was not confirmed.  Events the sink did not ack
 * are sent again (the acked ones of the batch are not) after a backoff,
 * before anything later: a retried event holds back the queue, and an
 * unavailable sink spends no attempt.
 *
 * Nothing blocks the relay's loop: the connection is made with
 * PQconnectPoll(), the slot's check and START_REPLICATION are sent with
 * PQsendQuery() (CONNECTING, CHECKING, STARTING, bounded together by
 * database.connect_timeout), the stream read with PQconsumeInput() and
 * PQgetCopyData() async.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "relay/wal.h"

/* PostgreSQL's epoch, 2000-01-01, in Unix seconds. */
#define PG_EPOCH_UNIX 946684800LL
/* Events read ahead of the sink at most: past this the stream waits
 * (TCP pushes back on the server's sender). */
#define WAL_READ_AHEAD 20000
/* A standby status update at least this often (ms). */
#define WAL_STATUS_MS 10000

typedef struct wal_ev {
	pgo_event_t ev; /* its strings point into mem */
	char *mem;	/* malloc'd (pgo_wal_envelope()) */
	bool acked;	/* the sink acked it */
} wal_ev_t;

/* A committed transaction: its events of the queue, in order. */
typedef struct wal_txn {
	struct wal_txn *next;
	uint64_t end_lsn;  /* the end of its commit record */
	int64_t commit_us; /* its commit time, Unix us */
	size_t n, cap;
	wal_ev_t *evs;
} wal_txn_t;

typedef enum wal_state {
	WAL_DOWN = 0,	/* no connection; connect at retry_at */
	WAL_CONNECTING, /* PQconnectPoll() until it is made */
	WAL_CHECKING,	/* the slot's check in flight */
	WAL_STARTING,	/* START_REPLICATION in flight */
	WAL_STREAMING	/* in COPY BOTH: the stream */
} wal_state_t;

struct relay_wal {
	char slot[80];		/* pgoutbox_<queue> */
	char prefix[80];	/* pgoutbox:<queue> */
	PGconn *pg;		/* the replication connection */
	wal_state_t state;	/* see the header */
	pgo_loop_io_t *io;	/* its socket in the loop */
	short revents;		/* what the loop saw on it */
	int64_t retry_at;	/* DOWN: connect then (monotonic ms) */
	bool standing_by;	/* another relay streams: said so once */
	short want;		/* setup: the events libpq waits for */
	int64_t setup_until;	/* setup: give up then (monotonic ms) */
	PGresult *check;	/* CHECKING: the check's result */
	char last_err[256];	/* the last connection error logged */
	wal_txn_t *head, *tail; /* committed transactions, commit order */
	wal_txn_t *cur;		/* between 'B' and 'C' */
	size_t pending;		/* events in the FIFO */
	bool in_sink;		/* the sink holds batch */
	pgo_batch_t batch;	/* the batch in the sink */
	wal_ev_t **src;		/* batch event i -> its event */
	size_t batch_txns;	/* transactions the batch covers */
	pgo_arena_t *arena;	/* the batch's memory */
	uint64_t received;	/* the highest WAL end received */
	uint64_t confirmed;	/* the flush position to report */
	uint64_t reported;	/* the one last reported */
	uint64_t sent_end;	/* the last keepalive's sent position */
	int64_t next_status;	/* monotonic ms: the next status update */
	bool reply;		/* the server asked for one */
	int64_t backoff;	/* after a batch not all acked, ms */
	int64_t pause_until;	/* no batch before (monotonic ms) */
};

/* --- the envelope (pure) ---
 *
 * The payload and the headers go to the sinks as the text PostgreSQL
 * wrote (jsonb's output, as the table path gives them): jansson would
 * print them its own way (numbers as doubles, "1.10" as 1.1, big
 * integers refused), so a small scanner finds each value's extent and
 * copies it as is.  jansson decodes the strings (escapes, surrogate
 * pairs, UTF-8). */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* The end of the JSON string at p (at its quote), NULL when cut short. */
static const char *string_end(const char *p, const char *end)
{
	if (p >= end || *p != '"')
		return NULL;
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* The JSON string [p, e) decoded by jansson to *o (NUL-ended, no longer
 * than its text); false when it is not one. */
static bool decode_string(const char *p, const char *e, char **o)
{
	json_t *s = json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY, NULL);
	bool ok = json_is_string(s);

	if (ok) {
		size_t n = json_string_length(s);

		memcpy(*o, json_string_value(s), n + 1);
		*o += n + 1;
	}
	json_decref(s);
	return ok;
}

/* Skips one JSON value; returns the position after it, NULL when
 * malformed. */
static const char *json_skip(const char *p, const char *end)
{
	int depth = 0;

	p = skip_ws(p, end);
	do {
		if (p >= end)
			return NULL;
		if (*p == '"') {
			p = string_end(p, end);
			if (!p)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		else if (depth == 0) {
			/* A number or a literal: up to its end. */
			while (p < end && *p != ',' && *p != '}' && *p != ']' &&
			       *p != ' ' && *p != '\n')
				p++;
			return p;
		}
		p++;
	} while (depth > 0);
	return p;
}

/* What an envelope's fields have given so far. */
typedef struct env_seen {
	bool id, topic, payload;
} env_seen_t;

/* The value [v, after) of the field key into ev (strings copied to *o);
 * false when malformed. */
static bool env_field(pgo_event_t *ev, env_seen_t *seen, const char *key,
		      const char *v, const char *after, char **o)
{
	char *s = *o;

	if (strcmp(key, "payload") == 0 || strcmp(key, "headers") == 0) {
		memcpy(s, v, (size_t)(after - v));
		*o += after - v;
		*(*o)++ = '\0';
		if (key[0] == 'p') {
			ev->payload = s;
			seen->payload = true;
		} else {
			ev->headers = s;
		}
		return true;
	}
	if (strcmp(key, "id") == 0) {
		ev->id = strtoll(v, NULL, 10);
		seen->id = true;
		return true;
	}
	if (*v != '"')
		return true; /* null, or a field not ours */
	if (!decode_string(v, after, o))
		return false;
	if (strcmp(key, "topic") == 0) {
		ev->topic = s;
		seen->topic = true;
	} else if (strcmp(key, "key") == 0) {
		ev->key = s;
	} else if (strcmp(key, "type") == 0) {
		ev->type = s;
	} else if (strcmp(key, "created_at") == 0) {
		ev->created_at = s;
	}
	return true;
}

bool pgo_wal_envelope(const char *json, size_t len, pgo_event_t *ev, char **mem)
{
	const char *p = json, *end = json + len;
	char *o = malloc(len + 8);
	env_seen_t seen = {false, false, false};

	*mem = o;
	memset(ev, 0, sizeof(*ev));
	if (!o)
		return false;
	ev->type = ev->headers = "";
	p = skip_ws(p, end);
	if (p >= end || *p++ != '{')
		return false;
	for (;;) {
		const char *v, *after, *kend;
		char *key = o;

		p = skip_ws(p, end);
		if (p < end && *p == '}')
			break;
		kend = string_end(p, end);
		if (!kend || !decode_string(p, kend, &o))
			return false;
		p = skip_ws(kend, end);
		if (p >= end || *p++ != ':')
			return false;
		v = skip_ws(p, end);
		after = json_skip(v, end);
		if (!after || !env_field(ev, &seen, key, v, after, &o))
			return false;
		p = skip_ws(after, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			break;
		return false;
	}
	if (!ev->created_at)
		ev->created_at = "";
	return seen.id && seen.topic && seen.payload;
}

/* --- the FIFO of committed transactions --- */

static void txn_free(wal_txn_t *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->evs[i].mem);
	free(t->evs);
	free(t);
}

static void fifo_clear(struct relay_wal *w)
{
	while (w->head) {
		wal_txn_t *t = w->head;

		w->head = t->next;
		txn_free(t);
	}
	w->tail = NULL;
	if (w->cur)
		txn_free(w->cur);
	w->cur = NULL;
	w->pending = 0;
}

/* The head transaction is done: the slot may move past it. */
static void fifo_pop(struct relay_wal *w)
{
	wal_txn_t *t = w->head;

	if (t->end_lsn > w->confirmed)
		w->confirmed = t->end_lsn;
	w->pending -= t->n;
	w->head = t->next;
	if (!w->head)
		w->tail = NULL;
	txn_free(t);
}

static bool txn_acked(const wal_txn_t *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (!t->evs[i].acked)
			return false;
	return true;
}

/* --- the replication protocol --- */

static uint64_t get64(const char *p)
{
	uint32_t hi, lo;

	memcpy(&hi, p, 4);
	memcpy(&lo, p + 4, 4);
	return ((uint64_t)ntohl(hi) << 32) | ntohl(lo);
}

static void put64(char *p, uint64_t v)
{
	uint32_t hi = htonl((uint32_t)(v >> 32)), lo = htonl((uint32_t)v);

	memcpy(p, &hi, 4);
	memcpy(p + 4, &lo, 4);
}

static void lsn_text(uint64_t lsn, char out[24])
{
	snprintf(out, 24, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
}

static void set_io(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;
	short ev = 0;

	if (w->state == WAL_STREAMING) {
		if (w->pending < WAL_READ_AHEAD)
			ev |= POLLIN;
		if (PQisnonblocking(w->pg) && PQflush(w->pg) > 0)
			ev |= POLLOUT;
	} else if (w->state != WAL_DOWN) {
		ev = w->want;
		if (w->state != WAL_CONNECTING && PQflush(w->pg) > 0)
			ev |= POLLOUT;
	}
	pgo_loop_io_set(w->io, w->state != WAL_DOWN ? PQsocket(w->pg) : -1, ev);
}

/* The connection is gone: the batch in the sink is cancelled, what was
 * read is dropped (the slot sends it again), connect again in a
 * second. */
static void wal_drop(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (why)
		pgo_log(PGO_LOG_WARN, r->subject,
			"replication stream of slot %s lost (%s): "
			"reconnecting; what was not confirmed comes again",
			w->slot, why);
	if (w->in_sink)
		pgo_sink_cancel(r->sink, &w->batch);
	w->in_sink = false;
	pgo_arena_reset(w->arena);
	fifo_clear(w);
	PQfinish(w->pg);
	w->pg = NULL;
	w->state = WAL_DOWN;
	w->retry_at = pgo_now_ms() + 1000;
	w->sent_end = 0;
	r->stats.total.reconnects++;
	set_io(r);
}

/* Sends a standby status update: written, flushed and applied up to the
 * confirmed position. */
static void send_status(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	char msg[34];
	int64_t pg_us = pgo_wall_us() - PG_EPOCH_UNIX * 1000000LL;

	msg[0] = 'r';
	put64(msg + 1, w->confirmed);
	put64(msg + 9, w->confirmed);
	put64(msg + 17, w->confirmed);
	put64(msg + 25, (uint64_t)pg_us);
	msg[33] = 0;
	if (PQputCopyData(w->pg, msg, sizeof(msg)) <= 0 || PQflush(w->pg) < 0) {
		wal_drop(r, pgo_pq_msg(w->pg, NULL));
		return;
	}
	w->reported = w->confirmed;
	w->reply = false;
	w->next_status = now + WAL_STATUS_MS;
}

/* One pgoutput message of an XLogData. */
static void on_pgoutput(pgo_relay_t *r, const char *m, size_t len)
{
	struct relay_wal *w = r->wal;

	if (len < 1)
		return;
	switch (m[0]) {
	case 'B':
		if (len < 21)
			return;
		if (w->cur)
			txn_free(w->cur);
		w->cur = calloc(1, sizeof(*w->cur));
		if (w->cur)
			w->cur->commit_us = (int64_t)get64(m + 9) +
					    PG_EPOCH_UNIX * 1000000LL;
		return;
	case 'C':
		if (len < 26 || !w->cur)
			return;
		w->cur->end_lsn = get64(m + 10);
		/* Sent again after a reconnect (the server starts from the
		 * slot's confirmed position, which PostgreSQL before 17 may
		 * not have kept across its restart), acked by this relay
		 * already: not again. */
		if (w->cur->end_lsn <= w->confirmed) {
			txn_free(w->cur);
			w->cur = NULL;
			return;
		}
		if (w->tail)
			w->tail->next = w->cur;
		else
			w->head = w->cur;
		w->tail = w->cur;
		w->pending += w->cur->n;
		w->cur = NULL;
		return;
	case 'M': {
		/* flags, lsn, prefix\0, length, content */
		const char *prefix = m + 10, *nul;
		uint32_t n;
		wal_ev_t *e;

		if (len < 15 || !w->cur)
			return;
		nul = memchr(prefix, '\0', len - 10);
		if (!nul || (size_t)(nul + 5 - m) > len ||
		    strcmp(prefix, w->prefix) != 0)
			return;
		memcpy(&n, nul + 1, 4);
		n = ntohl(n);
		if ((size_t)(nul + 5 - m) + n > len)
			return;
		if (w->cur->n == w->cur->cap) {
			size_t cap = w->cur->cap ? w->cur->cap * 2 : 8;
			wal_ev_t *evs =
				realloc(w->cur->evs, cap * sizeof(*evs));

			if (!evs) {
				wal_drop(r, "out of memory");
				return;
			}
			w->cur->evs = evs;
			w->cur->cap = cap;
		}
		e = &w->cur->evs[w->cur->n];
		memset(e, 0, sizeof(*e));
		if (!pgo_wal_envelope(nul + 5, n, &e->ev, &e->mem)) {
			pgo_log(PGO_LOG_ERROR, r->subject,
				"a message with prefix %s is not an event's "
				"envelope: skipped (%.*s)",
				w->prefix, (int)(n > 200 ? 200 : n), nul + 5);
			free(e->mem);
			return;
		}
		w->cur->n++;
		return;
	}
	default: return; /* relations, types, origins: none of ours */
	}
}

/* Reads what the stream has (up to the read-ahead); false when the
 * connection was dropped. */
static bool wal_read(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	while (w->pending < WAL_READ_AHEAD) {
		char *buf = NULL;
		int n = PQgetCopyData(w->pg, &buf, 1);

		if (n == 0)
			return true;
		if (n < 0) {
			PGresult *res = PQgetResult(w->pg);
			char why[256];

			snprintf(why, sizeof(why), "%s",
				 n == -1 ? (res ? pgo_pq_msg(w->pg, res)
						: "the server ended the stream")
					 : pgo_pq_msg(w->pg, NULL));
			PQclear(res);
			wal_drop(r, why);
			return false;
		}
		if (buf[0] == 'w' && n >= 25) {
			uint64_t start = get64(buf + 1);

			if (start > w->received)
				w->received = start;
			on_pgoutput(r, buf + 25, (size_t)n - 25);
		} else if (buf[0] == 'k' && n >= 18) {
			uint64_t end = get64(buf + 1);

			if (end > w->sent_end)
				w->sent_end = end;
			if (buf[17])
				w->reply = true;
		}
		PQfreemem(buf);
		if (w->state != WAL_STREAMING)
			return false;
	}
	(void)now;
	return true;
}

/* --- batches --- */

static void settle(pgo_relay_t *r);

/* Hands the FIFO's head transactions to the sink. */
static void submit(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	pgo_batch_t *b = &w->batch;
	size_t n = 0, k = 0, i = 0;
	int rc;

	for (wal_txn_t *t = w->head; t; t = t->next) {
		if (k && n + t->n > (size_t)(v->batch > 0 ? v->batch : 1))
			break;
		n += t->n;
		k++;
	}
	pgo_arena_reset(w->arena);
	memset(b, 0, sizeof(*b));
	b->arena = w->arena;
	b->events = pgo_arena_alloc(w->arena, sizeof(*b->events) * (n + 1));
	b->acks = pgo_arena_alloc(w->arena, sizeof(*b->acks) * (n + 1));
	b->errors = pgo_arena_alloc(w->arena, sizeof(*b->errors) * (n + 1));
	w->src = pgo_arena_alloc(w->arena, sizeof(*w->src) * (n + 1));
	if (!b->events || !b->acks || !b->errors || !w->src) {
		w->pause_until = pgo_now_ms() + 1000;
		return;
	}
	{
		wal_txn_t *t = w->head;

		for (size_t j = 0; j < k; j++, t = t->next)
			for (size_t e = 0; e < t->n; e++) {
				if (t->evs[e].acked)
					continue;
				b->events[i] = t->evs[e].ev;
				b->acks[i] = PGO_ACK_NONE;
				b->errors[i] = NULL;
				w->src[i++] = &t->evs[e];
			}
	}
	b->n = i;
	w->batch_txns = k;
	w->in_sink = true;
	rc = pgo_sink_submit(r->sink, b);
	if (rc != PGO_OK) {
		pgo_batch_fail_rest(b, PGO_ACK_RETRY,
				    pgo_sink_errmsg(r->sink)[0]
					    ? pgo_sink_errmsg(r->sink)
					    : pgo_strerror(rc));
		settle(r);
	}
}

/* The sink's verdicts are in: acked events are done; the transactions
 * all acked leave the FIFO and the slot may move past them; the rest is
 * sent again after a backoff. */
static void settle(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	pgo_batch_t *b = &w->batch;
	size_t failed = 0;
	bool unavailable = false;
	long long first_id = 0;
	char why[200] = "";

	w->in_sink = false;
	for (size_t i = 0; i < b->n; i++) {
		if (b->acks[i] == PGO_ACK_OK) {
			w->src[i]->acked = true;
			r->stats.total.published++;
			continue;
		}
		if (!failed++) {
			first_id = (long long)b->events[i].id;
			snprintf(why, sizeof(why), "%s",
				 b->errors[i] ? b->errors[i] : "no verdict");
		}
		if (b->acks[i] == PGO_ACK_UNAVAILABLE) {
			unavailable = true;
			continue;
		}
		w->src[i]->ev.attempts++;
		r->stats.total.retried++;
	}
	pgo_observe_acked(r, b); /* before the events' memory goes */
	while (w->head && w->batch_txns && txn_acked(w->head)) {
		fifo_pop(w);
		w->batch_txns--;
	}
	r->stats.total.batches++;
	if (!failed) {
		w->backoff = 0;
		return;
	}
	w->backoff = pgo_cycle_backoff(w->backoff, v->retry_max);
	w->pause_until = pgo_now_ms() + w->backoff;
	pgo_log(PGO_LOG_WARN, r->subject,
		"%zu of %zu events not acked (event %lld: %s): %s, sent "
		"again in %lld ms, before anything later",
		failed, b->n, first_id, why,
		unavailable ? "the sink is unavailable (no attempt spent)"
			    : "retrying",
		(long long)w->backoff);
}

void pgo_wal_sink_done(void *ctx, pgo_batch_t *batch)
{
	pgo_relay_t *r = ctx;

	if (!r->wal || batch != &r->wal->batch || !r->wal->in_sink) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"sink %s: done() for a batch it does not hold "
			"(ignored)",
			pgo_sink_name(r->sink));
		return;
	}
	settle(r);
}

/* Moves the slot on where nothing waits, and starts the next batch. */
static void pump(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	while (!w->in_sink && w->head && txn_acked(w->head))
		fifo_pop(w);
	/* Nothing read is waiting: everything the server had sent before
	 * its last keepalive is done. */
	if (!w->head && !w->cur && !w->in_sink && w->sent_end > w->confirmed)
		w->confirmed = w->sent_end;
	if (w->in_sink || !w->head || r->run.stop || r->outage.down ||
	    now < w->pause_until)
		return;
	submit(r);
}

/* --- the connection --- */

static void log_down(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (strncmp(w->last_err, why, sizeof(w->last_err) - 1) == 0)
		return;
	snprintf(w->last_err, sizeof(w->last_err), "%s", why);
	pgo_log(PGO_LOG_WARN, r->subject, "slot %s: %s (retrying every second)",
		w->slot, why);
}

static void stand_by(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (!w->standing_by)
		pgo_log(PGO_LOG_INFO, r->subject,
			"slot %s is streamed by another relay (%s): standing "
			"by, trying every second",
			w->slot, why);
	w->standing_by = true;
}

/* Gives up this attempt: the connection closed, the next in a second. */
static void setup_failed(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	PQclear(w->check);
	w->check = NULL;
	PQfinish(w->pg);
	w->pg = NULL;
	w->state = WAL_DOWN;
	w->retry_at = pgo_now_ms() + 1000;
	set_io(r);
}

/* Starts connecting (DOWN -> CONNECTING). */
static void wal_connect(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	const char *keys[10], *vals[10];
	char timeout[24];
	int n = 0;

	pgo_conn_params(r->conf, r->app_name, keys, vals, timeout);
	while (keys[n] && n < 8)
		n++;
	keys[n] = "replication";
	vals[n++] = "database";
	keys[n] = NULL;
	vals[n] = NULL;
	w->pg = PQconnectStartParams(keys, vals, 1);
	w->setup_until = pgo_now_ms() +
			 (v->connect_timeout > 0 ? v->connect_timeout : 10000);
	if (!w->pg || PQstatus(w->pg) == CONNECTION_BAD) {
		log_down(r, w->pg ? pgo_pq_msg(w->pg, NULL) : "out of memory");
		setup_failed(r);
		return;
	}
	w->state = WAL_CONNECTING;
	w->want = POLLOUT; /* PQconnectPoll's first wait */
	set_io(r);
}

/* The slot's check came back (CHECKING): refuse, stand by, or start
 * streaming.  PGO_ERR_INVALID when no retry can help (errmsg set). */
static int checked(pgo_relay_t *r, PGresult *res)
{
	struct relay_wal *w = r->wal;
	char sql[512];

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_down(r, pgo_pq_msg(w->pg, res));
		setup_failed(r);
		return PGO_OK;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "logical") != 0) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "queue %s is captured through the WAL, and this "
			 "server runs wal_level = %s: set wal_level = logical "
			 "(ALTER SYSTEM SET wal_level = logical) and restart "
			 "PostgreSQL",
			 r->queue, PQgetvalue(res, 0, 0));
		return PGO_ERR_INVALID;
	}
	if (PQgetisnull(res, 0, 3)) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "the replication slot %s of queue %s is missing: "
			 "events sent since it went are lost; create it with "
			 "SELECT pg_create_logical_replication_slot('%s', "
			 "'pgoutput') (docs/wal.md)",
			 w->slot, r->queue, w->slot);
		return PGO_ERR_INVALID;
	}
	if (strcmp(PQgetvalue(res, 0, 1), "lost") == 0) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "the replication slot %s of queue %s is lost "
			 "(wal_status lost: max_slot_wal_keep_size removed "
			 "WAL it needed): events in that WAL are gone; drop "
			 "and create the slot again (docs/wal.md, \"A slot "
			 "pins WAL: lag\")",
			 w->slot, r->queue);
		return PGO_ERR_INVALID;
	}
	if (!PQgetisnull(res, 0, 2)) {
		char why[64];

		snprintf(why, sizeof(why), "pid %s", PQgetvalue(res, 0, 2));
		stand_by(r, why);
		setup_failed(r);
		return PGO_OK;
	}
	{
		uint64_t c = strtoull(PQgetvalue(res, 0, 3), NULL, 10);

		if (c > w->confirmed)
			w->confirmed = c;
	}
	snprintf(sql, sizeof(sql),
		 "START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '1', "
		 "publication_names 'pgoutbox_wal', messages 'true')",
		 w->slot);
	if (!PQsendQuery(w->pg, sql)) {
		log_down(r, pgo_pq_msg(w->pg, NULL));
		setup_failed(r);
		return PGO_OK;
	}
	w->state = WAL_STARTING;
	w->want = POLLIN;
	return PGO_OK;
}

/* START_REPLICATION came back (STARTING). */
static void started(pgo_relay_t *r, PGresult *res)
{
	struct relay_wal *w = r->wal;
	char lsn[24];

	if (PQresultStatus(res) != PGRES_COPY_BOTH) {
		const char *msg = pgo_pq_msg(w->pg, res);

		if (strstr(msg, "is active for PID"))
			stand_by(r, msg);
		else
			log_down(r, msg);
		setup_failed(r);
		return;
	}
	w->state = WAL_STREAMING;
	w->standing_by = false;
	w->last_err[0] = '\0';
	w->reported = w->confirmed;
	w->next_status = pgo_now_ms() + WAL_STATUS_MS;
	lsn_text(w->confirmed, lsn);
	pgo_log(PGO_LOG_INFO, r->subject, "streaming slot %s from %s", w->slot,
		lsn);
	set_io(r);
}

/* Drives the connection's setup without blocking: connecting, the
 * slot's check, START_REPLICATION.  PGO_ERR_INVALID when no retry can
 * help (errmsg set). */
static int wal_setup_step(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	PGresult *res;
	int rc = PGO_OK;

	if (now >= w->setup_until) {
		log_down(r, "timed out connecting (database.connect_timeout)");
		setup_failed(r);
		return PGO_OK;
	}
	if (w->state == WAL_CONNECTING) {
		char sql[512];

		switch (PQconnectPoll(w->pg)) {
		case PGRES_POLLING_READING: w->want = POLLIN; return PGO_OK;
		case PGRES_POLLING_WRITING: w->want = POLLOUT; return PGO_OK;
		case PGRES_POLLING_OK: break;
		default:
			log_down(r, pgo_pq_msg(w->pg, NULL));
			setup_failed(r);
			return PGO_OK;
		}
		PQsetnonblocking(w->pg, 1);
		/* Replication connections take the simple protocol only. */
		snprintf(sql, sizeof(sql),
			 "SELECT current_setting('wal_level'), s.wal_status, "
			 "s.active_pid, s.confirmed_flush_lsn - '0/0' "
			 "FROM (SELECT 1) x LEFT JOIN pg_replication_slots s "
			 "ON s.slot_name = '%s' AND s.database = "
			 "current_database()",
			 w->slot);
		if (!PQsendQuery(w->pg, sql)) {
			log_down(r, pgo_pq_msg(w->pg, NULL));
			setup_failed(r);
			return PGO_OK;
		}
		w->state = WAL_CHECKING;
		w->want = POLLIN;
		return PGO_OK;
	}
	/* CHECKING, STARTING: a query in flight. */
	if (!PQconsumeInput(w->pg) || PQflush(w->pg) < 0) {
		log_down(r, pgo_pq_msg(w->pg, NULL));
		setup_failed(r);
		return PGO_OK;
	}
	if (PQisBusy(w->pg))
		return PGO_OK;
	res = PQgetResult(w->pg);
	if (w->state == WAL_STARTING) {
		started(r, res);
		PQclear(res);
		return PGO_OK;
	}
	/* CHECKING: its one result; what follows (NULL) is read at once
	 * when the server's ReadyForQuery is in, else on the next turn. */
	if (res) {
		w->check = res;
		if (PQisBusy(w->pg))
			return PGO_OK;
		res = PQgetResult(w->pg);
	}
	while (res) { /* more than one result: not ours to read */
		PQclear(res);
		if (PQisBusy(w->pg))
			return PGO_OK;
		res = PQgetResult(w->pg);
	}
	res = w->check;
	w->check = NULL;
	rc = checked(r, res);
	PQclear(res);
	return rc;
}

bool pgo_wal_connected(const pgo_relay_t *r)
{
	return r->wal->state == WAL_STREAMING || r->wal->standing_by;
}

double pgo_wal_lag_seconds(const pgo_relay_t *r)
{
	const struct relay_wal *w = r->wal;
	int64_t at = w->head ? w->head->commit_us : 0, now = pgo_wall_us();

	return at && now > at ? (double)(now - at) / 1e6 : 0.0;
}

/* --- load, run --- */

int pgo_wal_load(pgo_relay_t *r, pgo_error_t *err)
{
	const char *keys[10], *vals[10];
	char timeout[24];
	const char *name = pgo_conf_values(r->conf)->queue;
	PGconn *pg;
	PGresult *res;
	struct relay_wal *w;

	(void)err;
	if (r->adopted)
		return PGO_OK;
	pgo_conn_params(r->conf, r->app_name, keys, vals, timeout);
	pg = PQconnectdbParams(keys, vals, 1);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		PQfinish(pg);
		return PGO_OK; /* the slots report it */
	}
	res = PQexecParams(
		pg, "SELECT capture FROM pgoutbox.queues WHERE name = $1", 1,
		NULL, &name, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
	    strcmp(PQgetvalue(res, 0, 0), "wal") != 0) {
		PQclear(res);
		PQfinish(pg);
		return PGO_OK; /* a table queue, or a schema without capture */
	}
	PQclear(res);
	PQfinish(pg);
	w = calloc(1, sizeof(*w));
	if (!w || !(w->arena = pgo_arena_new(64 * 1024))) {
		free(w);
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for a relay");
	}
	snprintf(w->slot, sizeof(w->slot), "pgoutbox_%s", name);
	snprintf(w->prefix, sizeof(w->prefix), "pgoutbox:%s", name);
	r->wal = w;
	return PGO_OK;
}

void pgo_wal_free(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	if (!w)
		return;
	fifo_clear(w);
	PQclear(w->check);
	PQfinish(w->pg);
	pgo_arena_destroy(w->arena);
	free(w);
	r->wal = NULL;
}

/* SIGHUP: the reloadable keys, as the table path's loop does (the
 * stream itself has none: relay.batch and the backoffs are read where
 * they are used). */
static void wal_reload(pgo_relay_t *r)
{
	extern char **environ;
	int changed = 0;

	r->run.reload = 0;
	if (pgo_conf_reload(r->conf, environ, &changed) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"reload failed, keeping the running configuration: %s",
			pgo_conf_errmsg(r->conf));
		return;
	}
	pgo_log_max = (pgo_log_level_t)pgo_conf_values(r->conf)->log_level;
	pgo_log(PGO_LOG_INFO, r->subject,
		"configuration reloaded: %d key%s changed", changed,
		changed == 1 ? "" : "s");
}

int pgo_wal_run(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	int rc = PGO_OK;

	w->io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note, &w->revents);
	if (!w->io) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg), "out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_log(PGO_LOG_INFO, r->subject,
		"starting: capture wal, slot %s, batch %d", w->slot, v->batch);
	for (;;) {
		int64_t now = pgo_now_ms(), deadline = now + 1000;

		if (r->run.stop == 1) {
			r->run.stop = 2;
			r->run.drain_until = now + v->drain_timeout;
			pgo_log(PGO_LOG_INFO, r->subject,
				"stopping: finishing the batch in flight");
			pgo_sink_drain(r->sink, r->run.drain_until);
		}
		if (r->run.reload)
			wal_reload(r);
		if (r->run.stop && (!w->in_sink || now >= r->run.drain_until))
			break;
		if (w->state == WAL_DOWN && !r->run.stop && now >= w->retry_at)
			wal_connect(r);
		/* The setup steps when libpq's socket is ready (or its time
		 * is up), as PQconnectPoll() wants. */
		if (w->state != WAL_DOWN && w->state != WAL_STREAMING &&
		    (w->revents || now >= w->setup_until)) {
			w->revents = 0;
			if (wal_setup_step(r, now) != PGO_OK) {
				pgo_log(PGO_LOG_ERROR, r->subject, "%s",
					r->run.errmsg);
				rc = PGO_ERR_INVALID;
				break;
			}
			set_io(r);
		}
		if (w->state == WAL_STREAMING) {
			if (w->revents) {
				if (!PQconsumeInput(w->pg))
					wal_drop(r, pgo_pq_msg(w->pg, NULL));
				w->revents = 0;
			}
		}
		if (w->state == WAL_STREAMING && wal_read(r, now))
			pump(r, now);
		if (w->state == WAL_STREAMING &&
		    (w->reply || w->confirmed > w->reported ||
		     now >= w->next_status))
			send_status(r, now);
		if (w->state == WAL_STREAMING) {
			set_io(r);
			deadline = pgo_deadline_min(deadline, w->next_status);
			if (w->head && !w->in_sink && w->pause_until > now)
				deadline = pgo_deadline_min(deadline,
							    w->pause_until);
		} else if (w->state == WAL_DOWN) {
			deadline = pgo_deadline_min(deadline, w->retry_at);
		} else {
			deadline = pgo_deadline_min(deadline, w->setup_until);
		}
		if (r->run.stop)
			deadline =
				pgo_deadline_min(deadline, r->run.drain_until);
		deadline = pgo_deadline_min(deadline, pgo_observe_turn(r, now));
		int prc = pgo_loop_run_once(r->loop, deadline);

		if (prc < 0 && prc != -EINTR) {
			snprintf(r->run.errmsg, sizeof(r->run.errmsg),
				 "poll: %s", strerror(-prc));
			rc = PGO_ERR_IO;
			break;
		}
		pgo_observe_step(r);
		/* A batch the sink settled inside the turn: confirm it at
		 * once. */
		if (w->state == WAL_STREAMING) {
			pump(r, pgo_now_ms());
			if (w->confirmed > w->reported)
				send_status(r, pgo_now_ms());
		}
	}
	if (w->in_sink)
		pgo_sink_cancel(r->sink, &w->batch);
	w->in_sink = false;
	if (w->state == WAL_STREAMING && w->confirmed > w->reported)
		send_status(r, pgo_now_ms());
	PQclear(w->check);
	w->check = NULL;
	if (w->pg) {
		PQfinish(w->pg);
		w->pg = NULL;
	}
	w->state = WAL_DOWN;
	pgo_loop_io_del(w->io);
	w->io = NULL;
	if (rc == PGO_OK)
		pgo_log(PGO_LOG_INFO, r->subject, "stopped (%llu events acked)",
			(unsigned long long)r->stats.total.published);
	return rc;
}
