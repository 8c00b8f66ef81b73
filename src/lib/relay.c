/*
 * relay.c — the relay loop, concurrent mode: claim a batch with
 * FOR UPDATE SKIP LOCKED, hand it to the sink, and settle it in the same
 * transaction.
 *
 * One cycle on one connection ("slot"), two round trips:
 *   round 1: BEGIN; DELETE ... WHERE id = ANY(ARRAY(SELECT ... LIMIT n
 *            FOR UPDATE SKIP LOCKED)) RETURNING ...     -- the claim
 *   publish: the sink gives a verdict per event
 *   round 2: [re-insert retried rows; insert dead letters;] COMMIT
 * The rows are deleted inside the claim transaction, so a crash anywhere
 * before COMMIT (relay kill -9, lost connection, sink failure) rolls the
 * delete back and the events are claimed again: at least once.  Several
 * slots per relay and several relays share the work through SKIP LOCKED.
 *
 * Wake-up: every slot LISTENs on the queue's channel; a notification, the
 * fallback poll timer, a retry coming due or a full batch starts a claim.
 * A lost notification costs latency (up to the poll interval), never an
 * event.  Signals only set flags and write a self-pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"

#define MAX_SLOTS 16

typedef enum slot_state {
	SLOT_IDLE = 0,   /* connection READY (or not) and no cycle running */
	SLOT_CLAIMING,   /* round 1 in flight */
	SLOT_PUBLISHING, /* the sink has the batch */
	SLOT_SETTLING    /* round 2 in flight */
} slot_state_t;

typedef struct slot {
	int idx;
	pgo_conn_t conn;
	slot_state_t state;
	PGresult *claimed;  /* rows of the batch: events point into it */
	pgo_batch_t batch;  /* the batch the sink works on */
	pgo_arena_t *arena; /* per-cycle memory, reset after settling */
	int sink_fd;        /* PUBLISHING: what the sink waits for */
	short sink_events;
	int64_t sink_deadline;
	int64_t claim_started; /* monotonic ms, for the stats */
	int batch_limit;       /* batch size asked for in this claim */
	int n_ok, n_retry, n_dead;
} slot_t;

struct pgo_relay {
	pgo_conf_t *conf;
	pgo_sink_t *sink;
	char subject[160];       /* log prefix "relay outbox -> stdout" */
	char app_name[64];       /* application_name of the sessions */
	char claim_sql[512];
	char retry_sql[768];
	char dead_sql[768];
	char listen_sql[96];
	char set_sql[3][96];
	pgo_conn_setup_t setup;
	slot_t slots[MAX_SLOTS];
	int nslots;
	int wake_pipe[2];            /* self-pipe written by signal handlers */
	volatile sig_atomic_t stop;  /* SIGTERM/SIGINT seen */
	volatile sig_atomic_t reload; /* SIGHUP seen */
	bool kick;                   /* start a claim on an idle slot */
	bool more;                   /* last batch was full: claim on all */
	int64_t next_poll;           /* fallback poll (monotonic ms) */
	int64_t next_retry;          /* earliest retry this relay scheduled */
	int64_t next_stats;
	pgo_relay_stats_t stats;
	pgo_relay_stats_t stats_last; /* at the previous stats line */
	int64_t stats_last_at;       /* when that line was written */
	unsigned rnd;                /* jitter state */
	char errmsg[512];
};

static void relay_error(pgo_relay_t *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void relay_error(pgo_relay_t *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
}

/* Builds the SQL texts for the configured queue (a validated name). */
static void build_sql(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *q = v->queue;

	snprintf(r->claim_sql, sizeof(r->claim_sql),
		 "DELETE FROM pgoutbox.\"%s\" WHERE id = ANY(ARRAY("
		 "SELECT id FROM pgoutbox.\"%s\" WHERE run_at <= now() "
		 "ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)) "
		 "RETURNING id, topic, key, type, payload, headers, "
		 "created_at, attempts, run_at",
		 q, q);
	/* A retried event goes back in with its id, one more attempt and a
	 * later run_at, in the claim transaction. */
	snprintf(r->retry_sql, sizeof(r->retry_sql),
		 "INSERT INTO pgoutbox.\"%s\" (id, topic, key, type, payload, "
		 "headers, created_at, run_at, attempts, last_error) "
		 "SELECT id, topic, key, type, payload, headers, created_at, "
		 "now() + delay_ms * interval '1 millisecond', attempts, err "
		 "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "
		 "$5::jsonb[], $6::jsonb[], $7::timestamptz[], $8::bigint[], "
		 "$9::int[], $10::text[]) AS u(id, topic, key, type, payload, "
		 "headers, created_at, delay_ms, attempts, err)",
		 q);
	snprintf(r->dead_sql, sizeof(r->dead_sql),
		 "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, "
		 "type, payload, headers, created_at, attempts, last_error) "
		 "SELECT id, '%s', topic, key, type, payload, headers, "
		 "created_at, attempts, err FROM unnest($1::bigint[], "
		 "$2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], "
		 "$7::timestamptz[], $8::bigint[], $9::int[], $10::text[]) AS "
		 "u(id, topic, key, type, payload, headers, created_at, unused, "
		 "attempts, err) ON CONFLICT (queue, id) DO UPDATE SET "
		 "attempts = EXCLUDED.attempts, last_error = "
		 "EXCLUDED.last_error, failed_at = now()",
		 q);
	snprintf(r->listen_sql, sizeof(r->listen_sql),
		 "LISTEN \"" PGO_CHANNEL_PREFIX "%s\"", q);
	snprintf(r->set_sql[0], sizeof(r->set_sql[0]),
		 "SET statement_timeout = %lld",
		 (long long)v->statement_timeout);
	snprintf(r->set_sql[1], sizeof(r->set_sql[1]),
		 "SET lock_timeout = %lld", (long long)v->lock_timeout);
	snprintf(r->set_sql[2], sizeof(r->set_sql[2]),
		 "SET idle_in_transaction_session_timeout = %lld",
		 (long long)v->idle_tx_timeout);
}

pgo_relay_t *pgo_relay_new(pgo_conf_t *conf, pgo_sink_t *sink)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	pgo_relay_t *r;
	int n = 0;

	if (!conf || !sink)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->conf = conf;
	r->sink = sink;
	r->wake_pipe[0] = r->wake_pipe[1] = -1;
	if (pipe2(r->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(r);
		return NULL;
	}
	snprintf(r->subject, sizeof(r->subject), "relay %s -> %s", v->queue,
		 pgo_sink_name(sink));
	snprintf(r->app_name, sizeof(r->app_name), "pgoutbox relay %s",
		 v->name && *v->name ? v->name : "");
	build_sql(r);
	r->setup.subject = r->subject;
	r->setup.app_name = r->app_name;
	r->setup.sql[n++] = "SET TimeZone = 'UTC'";
	r->setup.sql[n++] = "SET DateStyle = 'ISO, YMD'";
	r->setup.sql[n++] = "SET extra_float_digits = 3";
	r->setup.sql[n++] = r->set_sql[0];
	r->setup.sql[n++] = r->set_sql[1];
	r->setup.sql[n++] = r->set_sql[2];
	if (v->listen)
		r->setup.sql[n++] = r->listen_sql;
	r->setup.sql[n] = NULL;
	r->setup.prep_name[0] = "pgoutbox_claim";
	r->setup.prep_sql[0] = r->claim_sql;
	r->setup.prep_name[1] = NULL;
	r->setup.check_schema = true;
	r->nslots = v->in_flight < 1 ? 1
		    : v->in_flight > MAX_SLOTS ? MAX_SLOTS
					       : v->in_flight;
	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];

		s->idx = i;
		s->sink_fd = -1;
		pgo_conn_init(&s->conn, conf, &r->setup);
		s->arena = pgo_arena_new(64 * 1024);
		if (!s->arena) {
			pgo_relay_destroy(r);
			return NULL;
		}
	}
	r->rnd = (unsigned)getpid() ^ (unsigned)pgo_wall_us();
	return r;
}

void pgo_relay_destroy(pgo_relay_t *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];

		if (s->state == SLOT_PUBLISHING && r->sink->ops->cancel)
			r->sink->ops->cancel(r->sink, &s->batch);
		PQclear(s->claimed);
		pgo_conn_close(&s->conn);
		pgo_arena_destroy(s->arena);
	}
	if (r->wake_pipe[0] >= 0)
		close(r->wake_pipe[0]);
	if (r->wake_pipe[1] >= 0)
		close(r->wake_pipe[1]);
	free(r);
}

void pgo_relay_request_stop(pgo_relay_t *r)
{
	int saved = errno;

	r->stop = 1;
	if (write(r->wake_pipe[1], "s", 1) < 0) {
		/* full pipe: the loop wakes anyway */
	}
	errno = saved;
}

void pgo_relay_request_reload(pgo_relay_t *r)
{
	int saved = errno;

	r->reload = 1;
	if (write(r->wake_pipe[1], "h", 1) < 0) {
		/* full pipe: the loop wakes anyway */
	}
	errno = saved;
}

void pgo_relay_get_stats(const pgo_relay_t *r, pgo_relay_stats_t *out)
{
	*out = r->stats;
}

const char *pgo_relay_errmsg(const pgo_relay_t *r)
{
	return r->errmsg;
}

/* A uniform number in [0,1) for backoff jitter. */
static double jitter(pgo_relay_t *r)
{
	r->rnd = r->rnd * 1103515245u + 12345u;
	return (double)((r->rnd >> 8) & 0xffffff) / (double)0x1000000;
}

/* "2026-11-30 16:53:33.123456+00" -> "2026-11-30T16:53:33.123456Z" */
static const char *rfc3339(pgo_arena_t *a, const char *pg)
{
	size_t n = strlen(pg);
	char *out = pgo_arena_alloc(a, n + 2);

	if (!out)
		return pg;
	memcpy(out, pg, n + 1);
	if (n > 10 && out[10] == ' ')
		out[10] = 'T';
	if (n > 3 && strcmp(out + n - 3, "+00") == 0)
		strcpy(out + n - 3, "Z");
	return out;
}

/* --- the cycle --- */

static void start_claim(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	char limit[16];
	const char *params[1] = {limit};

	s->batch_limit = v->batch;
	snprintf(limit, sizeof(limit), "%d", v->batch);
	pgo_conn_query(&s->conn, "BEGIN", 0, NULL);
	pgo_conn_exec_prepared(&s->conn, "pgoutbox_claim", 1, params);
	if (pgo_conn_send(&s->conn) != PGO_OK)
		return;
	s->state = SLOT_CLAIMING;
	s->claim_started = pgo_now_ms();
	r->next_poll = s->claim_started + v->poll_interval;
}

/* Ends a cycle: frees the batch and the claimed rows. */
static void end_cycle(slot_t *s)
{
	PQclear(s->claimed);
	s->claimed = NULL;
	memset(&s->batch, 0, sizeof(s->batch));
	pgo_arena_reset(s->arena);
	s->state = SLOT_IDLE;
}

static void settle(pgo_relay_t *r, slot_t *s);

/* Round 1 came back: build the batch and hand it to the sink. */
static void claimed(pgo_relay_t *r, slot_t *s)
{
	pgo_batch_t *b = &s->batch;
	PGresult *res;
	int n, rc;

	if (s->conn.round.failed) {
		pgo_log(PGO_LOG_WARN, r->subject, "claim failed: %s",
			s->conn.round.err);
		pgo_conn_round_clear(&s->conn);
		pgo_conn_query(&s->conn, "ROLLBACK", 0, NULL);
		s->state = SLOT_SETTLING;
		if (pgo_conn_send(&s->conn) != PGO_OK)
			end_cycle(s);
		return;
	}
	res = pgo_conn_take(&s->conn, 1);
	pgo_conn_round_clear(&s->conn);
	n = PQntuples(res);
	if (n == 0) {
		r->more = false;
		PQclear(res);
		pgo_conn_query(&s->conn, "COMMIT", 0, NULL);
		s->state = SLOT_SETTLING;
		if (pgo_conn_send(&s->conn) != PGO_OK)
			end_cycle(s);
		return;
	}
	/* A full batch says more is waiting: keep every slot claiming. */
	r->more = n >= s->batch_limit;
	s->claimed = res;
	b->n = (size_t)n;
	b->arena = s->arena;
	b->events = pgo_arena_alloc(s->arena, sizeof(*b->events) * b->n);
	b->acks = pgo_arena_alloc(s->arena, sizeof(*b->acks) * b->n);
	b->errors = pgo_arena_alloc(s->arena, sizeof(*b->errors) * b->n);
	if (!b->events || !b->acks || !b->errors) {
		/* Without memory nothing can be published: roll back. */
		pgo_log(PGO_LOG_ERROR, r->subject, "out of memory for a batch");
		pgo_conn_query(&s->conn, "ROLLBACK", 0, NULL);
		s->state = SLOT_SETTLING;
		if (pgo_conn_send(&s->conn) != PGO_OK)
			end_cycle(s);
		return;
	}
	for (int i = 0; i < n; i++) {
		pgo_event_t *e = &b->events[i];

		e->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		e->topic = PQgetvalue(res, i, 1);
		e->key = PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2);
		e->type = PQgetvalue(res, i, 3);
		e->payload = PQgetvalue(res, i, 4);
		e->headers = PQgetvalue(res, i, 5);
		e->created_at = rfc3339(s->arena, PQgetvalue(res, i, 6));
		e->attempts = atoi(PQgetvalue(res, i, 7));
		b->acks[i] = PGO_ACK_NONE;
		b->errors[i] = NULL;
	}
	s->state = SLOT_PUBLISHING;
	s->sink_fd = -1;
	s->sink_events = 0;
	s->sink_deadline = 0;
	rc = r->sink->ops->publish(r->sink, b, &s->sink_fd, &s->sink_events,
				   &s->sink_deadline);
	if (rc == PGO_ERR_AGAIN)
		return;
	if (rc != PGO_OK)
		pgo_batch_fail_rest(b, PGO_ACK_RETRY,
				    r->sink->errmsg[0] ? r->sink->errmsg
						       : pgo_strerror(rc));
	settle(r, s);
}

/* Appends the text arrays of one kind of failure to the round. */
static void queue_failures(pgo_relay_t *r, slot_t *s, pgo_ack_t kind,
			   const char *sql)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_buf_t col[10];
	const char *params[10];
	pgo_batch_t *b = &s->batch;
	PGresult *res = s->claimed;
	int count = 0;

	for (int c = 0; c < 10; c++) {
		pgo_buf_init(&col[c]);
		pgo_buf_puts(&col[c], "{");
	}
	for (size_t i = 0; i < b->n; i++) {
		int row = (int)i;
		char num[32];
		int attempts;

		if (b->acks[i] != kind)
			continue;
		attempts = b->events[i].attempts + 1;
		if (count++ > 0)
			for (int c = 0; c < 10; c++)
				pgo_buf_puts(&col[c], ",");
		pgo_buf_puts(&col[0], PQgetvalue(res, row, 0));
		for (int c = 1; c <= 5; c++)
			pgo_buf_array_elem(&col[c],
					   PQgetisnull(res, row, c)
						   ? NULL
						   : PQgetvalue(res, row, c));
		pgo_buf_array_elem(&col[6], PQgetvalue(res, row, 6));
		snprintf(num, sizeof(num), "%lld",
			 (long long)pgo_backoff_ms(attempts, v->retry_base,
						   v->retry_max, jitter(r)));
		pgo_buf_puts(&col[7], num);
		if (kind == PGO_ACK_RETRY) {
			/* Wake up when the retry comes due. */
			int64_t due = pgo_now_ms() + atoll(num);

			if (!r->next_retry || due < r->next_retry)
				r->next_retry = due;
		}
		snprintf(num, sizeof(num), "%d", attempts);
		pgo_buf_puts(&col[8], num);
		pgo_buf_array_elem(&col[9], b->errors[i] ? b->errors[i]
							 : "failed");
	}
	for (int c = 0; c < 10; c++) {
		pgo_buf_puts(&col[c], "}");
		params[c] = col[c].data;
	}
	if (count > 0) {
		bool oom = false;

		for (int c = 0; c < 10; c++)
			oom |= col[c].oom;
		if (oom)
			s->conn.round.failed = true; /* forces a rollback */
		else
			pgo_conn_query(&s->conn, sql, 10, params);
	}
	for (int c = 0; c < 10; c++)
		pgo_buf_free(&col[c]);
}

/* The sink gave its verdicts: send round 2 (fix-ups and COMMIT). */
static void settle(pgo_relay_t *r, slot_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_batch_t *b = &s->batch;

	s->n_ok = s->n_retry = s->n_dead = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (b->acks[i] == PGO_ACK_NONE) {
			b->acks[i] = PGO_ACK_RETRY;
			b->errors[i] = "the sink gave no verdict";
		}
		/* Out of attempts: a retry becomes a dead letter. */
		if (b->acks[i] == PGO_ACK_RETRY &&
		    b->events[i].attempts + 1 >= v->max_attempts)
			b->acks[i] = PGO_ACK_DEAD;
		switch (b->acks[i]) {
		case PGO_ACK_OK: s->n_ok++; break;
		case PGO_ACK_RETRY: s->n_retry++; break;
		default: s->n_dead++; break;
		}
	}
	if (s->n_retry)
		queue_failures(r, s, PGO_ACK_RETRY, r->retry_sql);
	if (s->n_dead)
		queue_failures(r, s, PGO_ACK_DEAD, r->dead_sql);
	if (s->n_retry || s->n_dead) {
		size_t first = 0;

		while (first < b->n && b->acks[first] == PGO_ACK_OK)
			first++;
		pgo_log(PGO_LOG_WARN, r->subject,
			"batch of %zu: %d published, %d to retry, %d "
			"dead-lettered; event %lld: %s",
			b->n, s->n_ok, s->n_retry, s->n_dead,
			(long long)b->events[first].id,
			b->errors[first] ? b->errors[first] : "failed");
	}
	pgo_conn_query(&s->conn, "COMMIT", 0, NULL);
	s->state = SLOT_SETTLING;
	if (pgo_conn_send(&s->conn) != PGO_OK) {
		pgo_log(PGO_LOG_WARN, r->subject,
			"lost the connection before COMMIT: %zu events go "
			"back to the queue and will be sent again",
			b->n);
		end_cycle(s);
	}
}

/* Round 2 came back. */
static void settled(pgo_relay_t *r, slot_t *s)
{
	if (s->conn.round.failed) {
		if (s->batch.n)
			pgo_log(PGO_LOG_WARN, r->subject,
				"settling a batch of %zu failed (%s): the "
				"events stay queued and will be sent again",
				s->batch.n, s->conn.round.err);
		/* The transaction is aborted: end it. */
		pgo_conn_round_clear(&s->conn);
		end_cycle(s);
		pgo_conn_query(&s->conn, "ROLLBACK", 0, NULL);
		s->state = SLOT_SETTLING;
		if (pgo_conn_send(&s->conn) != PGO_OK)
			end_cycle(s);
		return;
	}
	pgo_conn_round_clear(&s->conn);
	if (s->batch.n) {
		r->stats.published += (uint64_t)s->n_ok;
		r->stats.retried += (uint64_t)s->n_retry;
		r->stats.dead += (uint64_t)s->n_dead;
		r->stats.batches++;
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"slot %d: batch of %zu settled in %lld ms", s->idx,
			s->batch.n, (long long)(pgo_now_ms() - s->claim_started));
	}
	end_cycle(s);
}

/* The connection of a slot was lost mid-cycle. */
static void slot_lost(pgo_relay_t *r, slot_t *s)
{
	if (s->state == SLOT_PUBLISHING && r->sink->ops->cancel)
		r->sink->ops->cancel(r->sink, &s->batch);
	if (s->state != SLOT_IDLE && s->batch.n)
		pgo_log(PGO_LOG_WARN, r->subject,
			"connection lost with a batch of %zu in flight: it "
			"was rolled back and will be sent again",
			s->batch.n);
	end_cycle(s);
	r->stats.reconnects++;
}

/* --- the loop --- */

static void log_stats(pgo_relay_t *r, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_relay_stats_t *a = &r->stats, *b = &r->stats_last;
	double secs = (double)(now - r->stats_last_at) / 1000.0;

	pgo_log(PGO_LOG_INFO, r->subject,
		"stats: published %llu (%.0f/s), retried %llu, dead %llu, "
		"batches %llu, notifications %llu, connections lost %llu",
		(unsigned long long)a->published,
		secs > 0 ? (double)(a->published - b->published) / secs : 0.0,
		(unsigned long long)a->retried, (unsigned long long)a->dead,
		(unsigned long long)a->batches,
		(unsigned long long)a->wakeups,
		(unsigned long long)a->reconnects);
	r->stats_last = *a;
	r->stats_last_at = now;
	r->next_stats = v->stats_interval ? now + v->stats_interval : 0;
}

static void do_reload(pgo_relay_t *r)
{
	extern char **environ;
	int changed = 0;

	r->reload = 0;
	if (pgo_conf_reload(r->conf, environ, &changed) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"reload failed, keeping the running configuration: %s",
			pgo_conf_errmsg(r->conf));
		return;
	}
	pgo_log_max = (pgo_log_level_t)pgo_conf_values(r->conf)->log_level;
	pgo_log(PGO_LOG_INFO, r->subject, "configuration reloaded: %d key%s "
		"changed", changed, changed == 1 ? "" : "s");
}

static int64_t min_deadline(int64_t a, int64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

int pgo_relay_run(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct pollfd pfd[1 + 2 * MAX_SLOTS];
	int owner[1 + 2 * MAX_SLOTS]; /* slot index * 2 (+1 for the sink) */
	int64_t now = pgo_now_ms();
	bool fatal = false;

	r->kick = true;
	r->stats_last_at = now;
	r->next_poll = now + v->poll_interval;
	r->next_stats = v->stats_interval ? now + v->stats_interval : 0;
	pgo_log(PGO_LOG_INFO, r->subject,
		"starting: batch %d, %d connection%s, %s, fallback poll %lld ms",
		v->batch, r->nslots, r->nslots == 1 ? "" : "s",
		v->listen ? "LISTEN" : "no LISTEN (poll only)",
		(long long)v->poll_interval);
	for (;;) {
		int64_t deadline = 0;
		int timeout, nfds = 0, busy = 0;

		now = pgo_now_ms();
		if (r->reload)
			do_reload(r);
		v = pgo_conf_values(r->conf);
		if (r->next_stats && now >= r->next_stats)
			log_stats(r, now);
		if (now >= r->next_poll) {
			r->kick = true;
			r->next_poll = now + v->poll_interval;
		}
		if (r->next_retry && now >= r->next_retry) {
			r->kick = true;
			r->next_retry = 0;
		}
		/* Start claims on idle, connected slots. */
		for (int i = 0; i < r->nslots && !r->stop; i++) {
			slot_t *s = &r->slots[i];

			pgo_conn_kick(&s->conn, now);
			if (s->state != SLOT_IDLE ||
			    s->conn.state != PGO_CONN_READY)
				continue;
			if (s->conn.notifies) {
				r->stats.wakeups += (uint64_t)s->conn.notifies;
				s->conn.notifies = 0;
				r->kick = true;
			}
			if (r->kick || r->more) {
				r->kick = false;
				start_claim(r, s);
			}
		}
		/* Stop once every batch in flight has settled. */
		for (int i = 0; i < r->nslots; i++)
			if (r->slots[i].state != SLOT_IDLE)
				busy++;
		if ((r->stop && busy == 0) || fatal)
			break;

		pfd[nfds].fd = r->wake_pipe[0];
		pfd[nfds].events = POLLIN;
		owner[nfds++] = -1;
		for (int i = 0; i < r->nslots; i++) {
			slot_t *s = &r->slots[i];

			pgo_conn_pollfd(&s->conn, &pfd[nfds]);
			if (pfd[nfds].fd >= 0)
				owner[nfds++] = i * 2;
			if (s->conn.state == PGO_CONN_DOWN)
				deadline = min_deadline(deadline,
							s->conn.retry_at);
			if (s->state == SLOT_PUBLISHING) {
				if (s->sink_fd >= 0) {
					pfd[nfds].fd = s->sink_fd;
					pfd[nfds].events = s->sink_events;
					pfd[nfds].revents = 0;
					owner[nfds++] = i * 2 + 1;
				}
				deadline = min_deadline(deadline,
							s->sink_deadline);
			}
		}
		if (!r->stop) {
			deadline = min_deadline(deadline, r->next_poll);
			deadline = min_deadline(deadline, r->next_retry);
			deadline = min_deadline(deadline, r->next_stats);
		}
		timeout = -1;
		if (deadline) {
			int64_t t = deadline - pgo_now_ms();

			timeout = t < 0 ? 0 : t > 60000 ? 60000 : (int)t;
		}
		if (poll(pfd, (nfds_t)nfds, timeout) < 0 && errno != EINTR) {
			relay_error(r, "poll: %s", strerror(errno));
			return PGO_ERR_IO;
		}
		now = pgo_now_ms();
		if (pfd[0].revents & POLLIN) {
			char drain[64];

			while (read(r->wake_pipe[0], drain, sizeof(drain)) > 0) {
			}
		}
		if (r->stop == 1) {
			r->stop = 2;
			pgo_log(PGO_LOG_INFO, r->subject,
				"stopping: finishing the batches in flight");
		}
		/* Sinks first (they may hand work to their connections). */
		for (int k = 1; k < nfds; k++) {
			slot_t *s = &r->slots[owner[k] / 2];
			int rc;

			if (!(owner[k] & 1) || s->state != SLOT_PUBLISHING ||
			    !pfd[k].revents)
				continue;
			rc = r->sink->ops->resume(r->sink, &s->batch,
						  pfd[k].revents, &s->sink_fd,
						  &s->sink_events,
						  &s->sink_deadline);
			if (rc == PGO_ERR_AGAIN)
				continue;
			if (rc != PGO_OK)
				pgo_batch_fail_rest(&s->batch, PGO_ACK_RETRY,
						    r->sink->errmsg);
			settle(r, s);
		}
		for (int i = 0; i < r->nslots; i++) {
			slot_t *s = &r->slots[i];
			short revents = 0;
			pgo_conn_event_t ev;

			/* Sink deadlines: resume with no events. */
			if (s->state == SLOT_PUBLISHING && s->sink_deadline &&
			    now >= s->sink_deadline) {
				int rc = r->sink->ops->resume(
					r->sink, &s->batch, 0, &s->sink_fd,
					&s->sink_events, &s->sink_deadline);

				if (rc != PGO_ERR_AGAIN) {
					if (rc != PGO_OK)
						pgo_batch_fail_rest(
							&s->batch,
							PGO_ACK_RETRY,
							r->sink->errmsg);
					settle(r, s);
				}
			}
			for (int k = 1; k < nfds; k++)
				if (owner[k] == i * 2)
					revents = pfd[k].revents;
			ev = pgo_conn_step(&s->conn, revents);
			switch (ev) {
			case PGO_CONN_EV_ROUND:
				if (s->state == SLOT_CLAIMING)
					claimed(r, s);
				else if (s->state == SLOT_SETTLING)
					settled(r, s);
				else
					pgo_conn_round_clear(&s->conn);
				break;
			case PGO_CONN_EV_LOST:
				slot_lost(r, s);
				break;
			case PGO_CONN_EV_READY:
				r->kick = true;
				break;
			case PGO_CONN_EV_FATAL:
				relay_error(r, "%s", s->conn.fatal.msg);
				pgo_log(PGO_LOG_ERROR, r->subject, "%s",
					s->conn.fatal.msg);
				fatal = true;
				break;
			default:
				break;
			}
			/* A drop inside pgo_conn_step() mid-cycle: the
			 * server rolls the claim back, so cancel the
			 * publish too. */
			if (s->conn.state == PGO_CONN_DOWN &&
			    s->state != SLOT_IDLE)
				slot_lost(r, s);
		}
	}
	for (int i = 0; i < r->nslots; i++)
		pgo_conn_close(&r->slots[i].conn);
	if (fatal)
		return PGO_ERR_SCHEMA;
	log_stats(r, pgo_now_ms());
	pgo_log(PGO_LOG_INFO, r->subject, "stopped");
	return PGO_OK;
}
