/*
 * wal.c — the relay of a queue captured through the WAL (docs/wal.md).
 *
 * Producers of such a queue write no row: send_to() emits a
 * transactional logical message with the prefix pgoutbox:<queue> whose
 * content is the event's envelope (wal_envelope() in sql/schema).  This
 * relay streams them from the logical replication slot pgoutbox_<queue>
 * (wal_stream.c: the connection, pgoutput's messages, the envelopes
 * parsed by wal_envelope.c); each committed transaction joins the FIFO
 * of committed ones.
 *
 * The FIFO's head transactions go to the sink as one batch (relay.batch
 * events, whole transactions, at least one); one batch at a time, so
 * the sink sees commit order.  The slot's confirmed position moves, by
 * standby status updates ('r'), only to the end LSN of a transaction
 * whose every event the sink acked, and past the server's sent position
 * only when nothing is waiting: a kill -9 anywhere loses nothing, and
 * redelivers only what was not confirmed.  Events the sink did not ack
 * are sent again (the acked ones of the batch are not) after a backoff
 * (relay.retry_base, doubling up to relay.retry_max), before anything
 * later: a retried event holds back the queue, and an unavailable sink
 * spends no attempt.  An event the sink rejects for good (PGO_ACK_DEAD),
 * or that used relay.max_attempts (unless relay.poison is halt), goes to
 * pgoutbox.dead_letters, as in table capture (wal_dead.c, without
 * blocking the loop), and counts as done: the slot moves past it once
 * it is there.
 *
 * In a fleet (fleet.c) the relay runs in the fleet's loop, its turn in
 * halves (pgo_wal_turn_prepare/step), its events given the
 * "pgoutbox-source" header; a slot missing or lost is retried there
 * (pgo_wal_refused()) instead of ending the run, so that the fleet's
 * other databases go on and this one resumes once the slot is back.
 *
 * This file: the FIFO, the batches and their settling, loading the
 * queue's capture, and the relay's loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "relay/wal_int.h"
#include "base/arena.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "relay/relay_int.h"
#include "relay/wal.h"
#include "sinks/sink_int.h"

/* --- the FIFO of committed transactions --- */

void pgo_wal_txn_free(wal_txn_t *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->evs[i].mem);
	free(t->evs);
	free(t);
}

void pgo_wal_fifo_clear(struct relay_wal *w)
{
	while (w->head) {
		wal_txn_t *t = w->head;

		w->head = t->next;
		pgo_wal_txn_free(t);
	}
	w->tail = NULL;
	if (w->cur)
		pgo_wal_txn_free(w->cur);
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
	pgo_wal_txn_free(t);
}

static bool txn_acked(const wal_txn_t *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (!t->evs[i].acked)
			return false;
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
	/* An adopted table's rows become events first (wal_adopted.c):
	 * the head transactions that are all events go now; when the head
	 * has rows, the map's statement runs, and the next turn after its
	 * result submits. */
	if (w->adopted) {
		size_t ready = pgo_wal_adopted_ready(w, k);

		if (!ready) {
			if (pgo_wal_adopted_eval(r, k) == PGO_ERR_DB)
				w->pause_until = pgo_now_ms() + 1000;
			return;
		}
		k = ready;
		n = 0;
		for (wal_txn_t *t = w->head; t && ready--; t = t->next)
			n += t->n;
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
				b->events[i].headers = pgo_claim_source_headers(
					r, w->arena, b->events[i].headers);
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

/* The sink's verdicts are in: acked events are done; dead ones are
 * written into dead_letters first (wal_dead.c, without blocking), then
 * pgo_wal_settled() finishes. */
static void settle(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	pgo_batch_t *b = &w->batch;
	size_t ndead = 0, *dead;

	w->in_sink = false;
	w->settle_failed = 0;
	w->settle_unavailable = false;
	w->dead_n = 0;
	dead = pgo_arena_alloc(w->arena, sizeof(*dead) * (b->n + 1));
	for (size_t i = 0; i < b->n; i++) {
		if (b->acks[i] == PGO_ACK_OK) {
			w->src[i]->acked = true;
			r->stats.total.published++;
			continue;
		}
		if (!w->settle_failed++) {
			w->settle_first = (long long)b->events[i].id;
			snprintf(w->settle_why, sizeof(w->settle_why), "%s",
				 b->errors[i] ? b->errors[i] : "no verdict");
		}
		if (b->acks[i] == PGO_ACK_UNAVAILABLE) {
			w->settle_unavailable = true;
			continue;
		}
		w->src[i]->ev.attempts++;
		if (dead && (b->acks[i] == PGO_ACK_DEAD ||
			     (v->poison != PGO_POISON_HALT &&
			      w->src[i]->ev.attempts >= v->max_attempts))) {
			dead[ndead++] = i;
			continue;
		}
		r->stats.total.retried++;
	}
	if (ndead && pgo_wal_dead_start(r, dead, ndead))
		return; /* pgo_wal_dead_poll() settles */
	w->dead_n = ndead;
	pgo_wal_settled(r, false);
}

/* The rest of settling: dead letters written count as done, and the
 * transactions all acked leave the FIFO so that the slot may move past
 * them; the rest is sent again after a backoff. */
void pgo_wal_settled(pgo_relay_t *r, bool dead_ok)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	pgo_batch_t *b = &w->batch;
	size_t failed = w->settle_failed;

	if (dead_ok) {
		/* Every dead event of the batch: dead_idx holds one per id,
		 * and a repeated id is done with its first. */
		for (size_t i = 0; i < b->n; i++) {
			bool was = false;

			for (size_t j = 0; j < w->dead_n && !was; j++)
				was = b->events[w->dead_idx[j]].id ==
				      b->events[i].id;
			if (!was || b->acks[i] == PGO_ACK_OK ||
			    b->acks[i] == PGO_ACK_UNAVAILABLE ||
			    w->src[i]->acked)
				continue;
			pgo_log(PGO_LOG_WARN, r->subject,
				"event %lld to dead letters after %d "
				"attempt%s: %s",
				(long long)b->events[i].id,
				w->src[i]->ev.attempts,
				w->src[i]->ev.attempts == 1 ? "" : "s",
				b->errors[i] ? b->errors[i] : "dead");
			w->src[i]->acked = true;
			r->stats.total.dead++;
			failed--;
		}
	} else {
		r->stats.total.retried += w->dead_n;
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
	/* As the table path's: a retry waits relay.retry_base, doubling up
	 * to relay.retry_max; an unavailable sink (no attempt spent) is
	 * tried again from 100 ms, doubling up to relay.reconnect_max. */
	if (w->settle_unavailable)
		w->backoff = pgo_cycle_backoff(w->backoff, v->reconnect_max);
	else if (!w->backoff)
		w->backoff = v->retry_base < v->retry_max ? v->retry_base
							  : v->retry_max;
	else
		w->backoff = pgo_cycle_backoff(w->backoff, v->retry_max);
	w->pause_until = pgo_now_ms() + w->backoff;
	pgo_log(PGO_LOG_WARN, r->subject,
		"%zu of %zu events not acked (event %lld: %s): %s, sent "
		"again in %lld ms, before anything later",
		failed, b->n, w->settle_first, w->settle_why,
		w->settle_unavailable
			? "the sink is unavailable (no attempt spent)"
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

const pgo_batch_t *pgo_wal_batch(const pgo_relay_t *r)
{
	return &r->wal->batch;
}

/* Moves the slot on where nothing waits, and starts the next batch. */
static void pump(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	while (!w->in_sink && !w->dead_busy && w->head && txn_acked(w->head))
		fifo_pop(w);
	/* Nothing read is waiting: everything the server had sent before
	 * its last keepalive is done. */
	if (!w->head && !w->cur && !w->in_sink && !w->dead_busy &&
	    w->sent_end > w->confirmed)
		w->confirmed = w->sent_end;
	if (w->in_sink || w->dead_busy || !w->head || r->run.stop ||
	    r->outage.down || w->fatal || now < w->pause_until)
		return;
	submit(r);
}

/* --- load, run --- */

double pgo_wal_lag_seconds(const pgo_relay_t *r)
{
	const struct relay_wal *w = r->wal;
	int64_t at = w->head ? w->head->commit_us : 0, now = pgo_wall_us();

	return at && now > at ? (double)(now - at) / 1e6 : 0.0;
}

int pgo_wal_attach(pgo_relay_t *r, pgo_error_t *err)
{
	const char *name = pgo_conf_values(r->conf)->queue;
	struct relay_wal *w;

	if (r->wal)
		return PGO_OK;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->arena = pgo_arena_new(64 * 1024))) {
		free(w);
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for a relay");
	}
	snprintf(w->slot, sizeof(w->slot), "pgoutbox_%s", name);
	snprintf(w->prefix, sizeof(w->prefix), "pgoutbox:%s", name);
	r->wal = w;
	if (r->adopted && !pgo_wal_adopted_init(r))
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for a relay");
	return PGO_OK;
}

int pgo_wal_load(pgo_relay_t *r, pgo_error_t *err)
{
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24];
	const char *name = pgo_conf_values(r->conf)->queue;
	PGconn *pg;
	PGresult *res;
	bool wal;

	/* An adopted table: adopted.c read its capture with the map. */
	if (r->adopted)
		return pgo_adopted_wal(r) ? pgo_wal_attach(r, err) : PGO_OK;
	pgo_conn_params(r->conf, r->app_name, keys, vals, timeout);
	pg = PQconnectdbParams(keys, vals, 1);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		PQfinish(pg);
		return PGO_OK; /* the slots report it */
	}
	res = PQexecParams(
		pg, "SELECT capture FROM pgoutbox.queues WHERE name = $1", 1,
		NULL, &name, NULL, NULL, 0);
	/* Otherwise a table queue, or a schema without capture. */
	wal = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	      strcmp(PQgetvalue(res, 0, 0), "wal") == 0;
	PQclear(res);
	PQfinish(pg);
	return wal ? pgo_wal_attach(r, err) : PGO_OK;
}

void pgo_wal_free(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	if (!w)
		return;
	pgo_wal_fifo_clear(w);
	pgo_loop_io_del(w->io);
	PQclear(w->check);
	PQfinish(w->pg);
	PQfinish(w->dead_pg);
	pgo_buf_free(&w->dead_sql);
	pgo_wal_adopted_free(w);
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

/* The connection's part of a turn: connect, the setup's steps, read the
 * stream, start a batch, report the position.  PGO_ERR_INVALID when no
 * retry can help (logged). */
static int wal_turn(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	if (w->state == WAL_DOWN && !r->run.stop && now >= w->retry_at)
		pgo_wal_connect(r);
	/* The setup steps when libpq's socket is ready (or its time is
	 * up), as PQconnectPoll() wants. */
	if (w->state != WAL_DOWN && w->state != WAL_STREAMING &&
	    (w->revents || now >= w->setup_until)) {
		w->revents = 0;
		if (pgo_wal_setup_step(r, now) != PGO_OK) {
			/* A fleet's other databases go on: this one tries
			 * again (the slot may be created, wal_level fixed). */
			if (r->shared) {
				pgo_wal_refused(r, now);
				return PGO_OK;
			}
			pgo_log(PGO_LOG_ERROR, r->subject, "%s", r->run.errmsg);
			return PGO_ERR_INVALID;
		}
		pgo_wal_set_io(r);
	}
	if (w->state == WAL_STREAMING && w->revents) {
		if (!PQconsumeInput(w->pg))
			pgo_wal_drop(r, pgo_pq_msg(w->pg, NULL));
		w->revents = 0;
	}
	pgo_wal_plain_step(r, now);
	if (w->adopted && w->eval_busy)
		pgo_wal_adopted_poll(r);
	if (w->dead_busy)
		pgo_wal_dead_poll(r);
	if (w->state == WAL_STREAMING && pgo_wal_read(r, now))
		pump(r, now);
	if (w->fatal) {
		pgo_log(PGO_LOG_ERROR, r->subject, "%s", r->run.errmsg);
		return PGO_ERR_INVALID;
	}
	if (w->state == WAL_STREAMING &&
	    (w->reply || w->confirmed > w->reported || now >= w->next_status))
		pgo_wal_send_status(r, now);
	return PGO_OK;
}

/* When the loop wakes up at the latest. */
static int64_t turn_deadline(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	int64_t deadline = now + 1000;

	if (w->state == WAL_STREAMING) {
		pgo_wal_set_io(r);
		deadline = pgo_deadline_min(deadline, w->next_status);
		if (w->head && !w->in_sink && w->pause_until > now)
			deadline = pgo_deadline_min(deadline, w->pause_until);
	} else if (w->state == WAL_DOWN) {
		deadline = pgo_deadline_min(deadline, w->retry_at);
	} else {
		deadline = pgo_deadline_min(deadline, w->setup_until);
	}
	if (r->run.stop)
		deadline = pgo_deadline_min(deadline, r->run.drain_until);
	deadline = pgo_wal_plain_deadline(r, deadline);
	return pgo_deadline_min(deadline, pgo_observe_turn(r, now));
}

/* The loop is over: the batch in the sink cancelled, the last position
 * reported, the connection closed. */
static void wal_close(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	if (w->in_sink)
		pgo_sink_cancel(r->sink, &w->batch);
	w->in_sink = false;
	if (w->state == WAL_STREAMING && w->confirmed > w->reported)
		pgo_wal_send_status(r, pgo_now_ms());
	PQclear(w->check);
	w->check = NULL;
	if (w->pg) {
		PQfinish(w->pg);
		w->pg = NULL;
	}
	w->state = WAL_DOWN;
	pgo_loop_io_del(w->io);
	w->io = NULL;
	/* Connecting, or a statement in flight, goes with the loop. */
	if (w->plain_state != WAL_PLAIN_READY || w->dead_busy || w->eval_busy)
		pgo_wal_plain_close(r);
	if (w->plain_io)
		pgo_loop_io_del(w->plain_io);
	w->plain_io = NULL;
	/* Dead letters in flight: their events were not confirmed, so they
	 * come again (and are upserted) if the INSERT did not commit. */
	w->dead_busy = false;
	w->eval_busy = false;
	pgo_buf_free(&w->dead_sql);
	pgo_buf_free(&w->eval_rows);
}

int pgo_wal_begin(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;

	w->io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note, &w->revents);
	if (w->io &&
	    !(w->plain_io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note,
					    &w->plain_revents))) {
		pgo_loop_io_del(w->io);
		w->io = NULL;
	}
	if (!w->io) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg), "out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_log(PGO_LOG_INFO, r->subject,
		"starting: capture wal, slot %s, batch %d", w->slot, v->batch);
	return PGO_OK;
}

int64_t pgo_wal_turn_prepare(pgo_relay_t *r, int64_t now, bool *over)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;

	*over = false;
	if (r->run.stop == 1) {
		r->run.stop = 2;
		r->run.drain_until = now + v->drain_timeout;
		pgo_log(PGO_LOG_INFO, r->subject,
			"stopping: finishing the batch in flight");
		pgo_observe_stopping(r);
		if (!r->shared) /* a fleet drains its sink once, for all */
			pgo_sink_drain(r->sink, r->run.drain_until);
	}
	if (r->run.reload)
		wal_reload(r);
	if (r->run.stop &&
	    ((!w->in_sink && !w->dead_busy) || now >= r->run.drain_until)) {
		*over = true;
		return 0;
	}
	w->rc = wal_turn(r, now);
	if (w->rc != PGO_OK) {
		*over = true;
		return 0;
	}
	return turn_deadline(r, now);
}

void pgo_wal_turn_step(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	pgo_observe_step(r);
	/* A batch the sink settled inside the turn: confirm it at once. */
	if (w->state == WAL_STREAMING) {
		pump(r, pgo_now_ms());
		if (w->confirmed > w->reported)
			pgo_wal_send_status(r, pgo_now_ms());
	}
}

int pgo_wal_end(pgo_relay_t *r)
{
	int rc = r->wal->rc;

	wal_close(r);
	if (rc == PGO_OK)
		pgo_log(PGO_LOG_INFO, r->subject, "stopped (%llu events acked)",
			(unsigned long long)r->stats.total.published);
	return rc;
}

int pgo_wal_run(pgo_relay_t *r)
{
	int rc = pgo_wal_begin(r);

	if (rc != PGO_OK)
		return rc;
	for (;;) {
		bool over;
		int64_t deadline = pgo_wal_turn_prepare(r, pgo_now_ms(), &over);
		int prc;

		if (over)
			break;
		prc = pgo_loop_run_once(r->loop, deadline);
		if (prc < 0 && prc != -EINTR) {
			snprintf(r->run.errmsg, sizeof(r->run.errmsg),
				 "poll: %s", strerror(-prc));
			r->wal->rc = PGO_ERR_IO;
			break;
		}
		pgo_wal_turn_step(r);
	}
	return pgo_wal_end(r);
}
