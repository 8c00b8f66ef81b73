/*
 * ops.c — lease mode's database side: a queue of operations run on
 * LEASE_CONNS non-blocking connections (conn.c), one statement per round,
 * so each is its own short transaction: outcomes of finished jobs first,
 * then the heartbeat, the reaper and a claim (lease.c decides which).
 * This file has their SQL, sends them and reads their results: a claim
 * starts jobs (jobs.c) or runs the callback, a heartbeat that did not
 * extend a lease kills its job, an outcome is sent again after a lost
 * connection.  Nothing here waits for the database or for a child.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "queue/worker_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "loop/proc.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"
#include "queue/queue.h"

void pgo_ops_build_sql(pgo_worker_t *w)
{
	const char *q = w->queue;

	/* The plain claim, unless the queue has controls (a row in
	 * pgoutbox.queue_controls: paused, limits, groups; see
	 * sql/schema/functions/claim_ids.sql), then pgoutbox.claim().  The
	 * row's lookup is an InitPlan, a one-time filter of each branch, in
	 * the statement's one snapshot: exactly one branch runs.  A job
	 * whose dependencies are not done waits (the condition of
	 * sql/schema/functions/deps_cond.sql). */
	snprintf(
		w->claim_sql, sizeof(w->claim_sql),
		"WITH p AS (UPDATE pgoutbox.\"%s\" j SET locked_by = $1, "
		"locked_until = now() + $2::bigint * interval '1 millisecond', "
		"epoch = j.epoch + 1, attempts = j.attempts + 1 "
		"WHERE j.id = ANY (ARRAY(SELECT id FROM pgoutbox.\"%s\" r "
		"WHERE NOT EXISTS (SELECT FROM pgoutbox.queue_controls c "
		"WHERE c.queue = $5::text) AND "
		"run_at <= now() AND (locked_until IS NULL OR "
		"locked_until < now()) AND attempts < $4::integer "
		"AND (r.depends_on IS NULL OR "
		"pgoutbox.deps_done($5::text, r.depends_on)) "
		"ORDER BY priority DESC, id LIMIT $3::integer "
		"FOR UPDATE SKIP LOCKED)) "
		"RETURNING j.id, j.epoch, j.attempts, j.topic::text, "
		"j.key::text, j.payload::jsonb) "
		"SELECT * FROM p UNION ALL SELECT * FROM pgoutbox.claim($5, "
		"$1, "
		"$2::bigint, $3::integer, $4::integer) "
		"WHERE EXISTS (SELECT FROM pgoutbox.queue_controls c "
		"WHERE c.queue = $5::text)",
		q, q);
	snprintf(w->complete_sql, sizeof(w->complete_sql),
		 "DELETE FROM pgoutbox.\"%s\" WHERE id = $1 AND epoch = $2", q);
	snprintf(w->fail_sql, sizeof(w->fail_sql),
		 "UPDATE pgoutbox.\"%s\" SET run_at = now() + $3::bigint * "
		 "interval '1 millisecond', last_error = $4, locked_by = NULL, "
		 "locked_until = NULL WHERE id = $1 AND epoch = $2",
		 q);
	snprintf(
		w->dead_sql, sizeof(w->dead_sql),
		"WITH d AS (DELETE FROM pgoutbox.\"%s\" WHERE id = $1 AND "
		"epoch = $2 RETURNING *) INSERT INTO pgoutbox.dead_letters "
		"(id, queue, topic, key, type, payload, headers, created_at, "
		"attempts, last_error, group_key) SELECT id, '%s', topic, key, "
		"type, payload, headers, created_at, attempts, $3, group_key "
		"FROM d "
		"ON CONFLICT (queue, id) DO UPDATE SET attempts = "
		"EXCLUDED.attempts, last_error = EXCLUDED.last_error, "
		"payload = EXCLUDED.payload, failed_at = now()",
		q, q);
	snprintf(w->hb_sql, sizeof(w->hb_sql),
		 "UPDATE pgoutbox.\"%s\" j SET locked_until = now() + "
		 "$2::bigint * interval '1 millisecond' FROM "
		 "unnest($3::bigint[], $4::bigint[]) AS h(id, epoch) "
		 "WHERE j.id = h.id AND j.epoch = h.epoch AND j.locked_by = $1 "
		 "RETURNING j.id",
		 q);
	snprintf(w->reap_sql, sizeof(w->reap_sql),
		 "UPDATE pgoutbox.\"%s\" SET locked_by = NULL, locked_until = "
		 "NULL, epoch = epoch + 1 WHERE id = ANY (ARRAY(SELECT id FROM "
		 "pgoutbox.\"%s\" WHERE locked_until < now() "
		 "FOR UPDATE SKIP LOCKED)) RETURNING id, locked_by",
		 q, q);
	snprintf(w->reap_dead_sql, sizeof(w->reap_dead_sql),
		 "WITH d AS (DELETE FROM pgoutbox.\"%s\" WHERE id = ANY "
		 "(ARRAY(SELECT id FROM pgoutbox.\"%s\" WHERE attempts >= "
		 "$1::integer AND (locked_until IS NULL OR locked_until < "
		 "now()) "
		 "FOR UPDATE SKIP LOCKED)) RETURNING *) "
		 "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, "
		 "type, "
		 "payload, headers, created_at, attempts, last_error, "
		 "group_key) SELECT id, '%s', topic, key, type, payload, "
		 "headers, created_at, attempts, coalesce(last_error || '; ', "
		 "'') || 'lease expired on the last attempt (worker lost)', "
		 "group_key FROM d "
		 "ON CONFLICT (queue, id) DO UPDATE SET attempts = "
		 "EXCLUDED.attempts, last_error = EXCLUDED.last_error, "
		 "failed_at = now()",
		 q, q, q);
	snprintf(w->listen_sql, sizeof(w->listen_sql), "LISTEN %s%s",
		 PGO_CHANNEL_PREFIX, q);
	snprintf(w->work_sql, sizeof(w->work_sql),
		 "SELECT claimed, done, failed, dead FROM pgoutbox.work_sql("
		 "$1, $2, $3::integer, $4::integer, $5::bigint, $6::bigint)");
}

void pgo_ops_free(op_t *op)
{
	if (op) {
		free(op->error);
		free(op);
	}
}

op_t *pgo_ops_new(op_kind_t kind, int want)
{
	op_t *op = calloc(1, sizeof(*op));

	if (op) {
		op->kind = kind;
		op->want = want;
	}
	return op;
}

op_t *pgo_ops_pop(pgo_worker_t *w)
{
	op_t *op = w->q_head;

	if (!op)
		return NULL;
	w->q_head = op->next;
	if (!w->q_head)
		w->q_tail = NULL;
	op->next = NULL;
	w->q_len--;
	return op;
}

/* Appends an outcome to the queue of operations. */
void pgo_ops_push_settle(pgo_worker_t *w, int64_t id, int64_t epoch,
			 int attempt, lease_verdict_t verdict,
			 const char *error)
{
	op_t *op = calloc(1, sizeof(*op));

	if (!op || (error && !(op->error = strdup(error)))) {
		free(op);
		pgo_log(PGO_LOG_ERROR, w->subject,
			"job %" PRId64 ": out of memory recording its outcome; "
			"it runs again when its lease expires",
			id);
		return;
	}
	op->kind = OP_SETTLE;
	op->id = id;
	op->epoch = epoch;
	op->attempt = attempt;
	op->verdict = verdict;
	if (verdict == VERDICT_RETRY) {
		op->delay_ms = pgo_lease_retry_delay(
			verdict, attempt, w->o.retry_base_ms, w->o.retry_max_ms,
			pgo_worker_jitter(w));
		w->next_retry = pgo_deadline_min(w->next_retry,
						 pgo_now_ms() + op->delay_ms);
	}
	if (w->q_tail)
		w->q_tail->next = op;
	else
		w->q_head = op;
	w->q_tail = op;
	w->q_len++;
}

/* Queues the statement of op on connection i and sends it. */
void pgo_ops_send(pgo_worker_t *w, int i, op_t *op)
{
	pgo_conn_t *c = &w->lconns[i];
	char a[24], b[24], d[24], lease[24], lim[16], max[16];

	snprintf(lease, sizeof(lease), "%" PRId64, w->o.lease_ms);
	snprintf(max, sizeof(max), "%d", w->o.max_attempts);
	switch (op->kind) {
	case OP_SETTLE: {
		const char *p[4] = {a, b, NULL, NULL};

		snprintf(a, sizeof(a), "%" PRId64, op->id);
		snprintf(b, sizeof(b), "%" PRId64, op->epoch);
		if (op->verdict == VERDICT_OK) {
			pgo_conn_query(c, w->complete_sql, 2, p);
		} else if (op->verdict == VERDICT_DEAD) {
			p[2] = op->error;
			pgo_conn_query(c, w->dead_sql, 3, p);
		} else {
			snprintf(d, sizeof(d), "%" PRId64, op->delay_ms);
			p[2] = d;
			p[3] = op->error;
			pgo_conn_query(c, w->fail_sql, 4, p);
		}
		break;
	}
	case OP_CLAIM: {
		const char *p[5] = {w->name, lease, lim, max, w->queue};

		snprintf(lim, sizeof(lim), "%d", op->want);
		pgo_conn_query(c, w->claim_sql, 5, p);
		break;
	}
	case OP_HB: {
		pgo_buf_t ids, eps;
		const char *p[4];

		pgo_buf_init(&ids);
		pgo_buf_init(&eps);
		pgo_buf_puts(&ids, "{");
		pgo_buf_puts(&eps, "{");
		for (int s = 0; s < w->o.concurrency; s++) {
			job_run_t *j = &w->jobs[s];

			if (!j->used || j->lost)
				continue;
			j->hb_sent = true;
			pgo_buf_printf(&ids, "%s%" PRId64,
				       ids.len > 1 ? "," : "", j->id);
			pgo_buf_printf(&eps, "%s%" PRId64,
				       eps.len > 1 ? "," : "", j->epoch);
		}
		pgo_buf_puts(&ids, "}");
		pgo_buf_puts(&eps, "}");
		p[0] = w->name;
		p[1] = lease;
		p[2] = ids.oom ? "{}" : ids.data;
		p[3] = eps.oom ? "{}" : eps.data;
		pgo_conn_query(c, w->hb_sql, 4, p);
		pgo_buf_free(&ids);
		pgo_buf_free(&eps);
		break;
	}
	case OP_REAP: {
		const char *p[1] = {max};

		pgo_conn_query(c, w->reap_sql, 0, NULL);
		pgo_conn_query(c, w->reap_dead_sql, 1, p);
		break;
	}
	case OP_NONE:
	case OP_KINDS: break; /* not operations */
	}
	w->inflight[i] = op;
	/* A failed send drops the connection: the loop sees it DOWN with op
	 * in flight and hands op to pgo_ops_lost(). */
	(void)pgo_conn_send(c);
}

/* Puts an outcome back first in line to be sent again, at most
 * SETTLE_TRIES times; false (op untouched) once it was tried that often. */
static bool settle_again(pgo_worker_t *w, op_t *op)
{
	if (op->kind != OP_SETTLE || !pgo_lease_settle_again(++op->tries))
		return false;
	op->next = w->q_head;
	w->q_head = op;
	if (!w->q_tail)
		w->q_tail = op;
	w->q_len++;
	return true;
}

/* The connection went away with op in flight: outcomes are sent again
 * (a few times: a DELETE that did commit then finds no row and is logged
 * as a lost lease, which is harmless); the rest is simply redone. */
void pgo_ops_lost(pgo_worker_t *w, int i)
{
	op_t *op = w->inflight[i];

	w->inflight[i] = NULL;
	if (!op)
		return;
	if (settle_again(w, op))
		return;
	if (op->kind == OP_SETTLE)
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 ": its outcome could not be recorded; "
			"it runs again when its lease expires",
			op->id);
	if (op->kind == OP_HB)
		for (int s = 0; s < w->o.concurrency; s++)
			w->jobs[s].hb_sent = false;
	pgo_ops_free(op);
}

static void settle_done(pgo_worker_t *w, op_t *op, PGresult *res)
{
	char line[TAIL_MAX + 600];
	bool ok = op->verdict == VERDICT_OK;

	pgo_jobs_one_line(op->error, line, sizeof(line));
	if (strcmp(PQcmdTuples(res), "0") == 0) {
		w->stats.lost++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " epoch %" PRId64
			": lease lost (expired "
			"and taken over); its %s is not recorded",
			op->id, op->epoch, ok ? "completion" : "failure");
	} else if (ok) {
		w->stats.done++;
		pgo_log(PGO_LOG_DEBUG, w->subject, "job %" PRId64 " done",
			op->id);
	} else if (op->verdict == VERDICT_DEAD) {
		w->stats.dead++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " dead-lettered after %d attempts: %s",
			op->id, op->attempt, line);
	} else {
		w->stats.failed++;
		pgo_log(PGO_LOG_INFO, w->subject,
			"job %" PRId64
			" attempt %d failed, retried after %" PRId64 " ms: %s",
			op->id, op->attempt, op->delay_ms, line);
	}
}

/* A claim came back: exec jobs start now; a callback runs them here. */
static void claim_done(pgo_worker_t *w, PGresult *res)
{
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
		int64_t epoch = strtoll(PQgetvalue(res, r, 1), NULL, 10);
		int attempt = atoi(PQgetvalue(res, r, 2));
		const char *payload = PQgetvalue(res, r, 5);

		if (w->o.handler) {
			pgo_job_t job = {
				.id = id,
				.epoch = epoch,
				.attempt = attempt,
				.queue = w->queue,
				.topic = PQgetvalue(res, r, 3),
				.key = PQgetisnull(res, r, 4)
					       ? NULL
					       : PQgetvalue(res, r, 4),
				.payload = payload,
			};
			char errbuf[512] = "";
			int64_t t0 = pgo_now_ms();
			int hr = w->o.handler(w->o.handler_ctx, &job, errbuf,
					      sizeof(errbuf));

			pgo_series_observe(w->m_duration,
					   (double)(pgo_now_ms() - t0) /
						   1000.0);

			if (hr != 0 && !errbuf[0])
				snprintf(errbuf, sizeof(errbuf),
					 "handler returned %d", hr);
			pgo_ops_push_settle(
				w, id, epoch, attempt,
				pgo_lease_verdict(hr == 0, attempt,
						  w->o.max_attempts),
				hr == 0 ? NULL : errbuf);
			continue;
		}
		for (int s = 0; s < w->o.concurrency; s++) {
			job_run_t *j = &w->jobs[s];
			int rc;

			if (j->used)
				continue;
			memset(j, 0, sizeof(*j));
			j->used = true;
			j->w = w;
			j->id = id;
			j->epoch = epoch;
			j->attempt = attempt;
			j->started = pgo_now_ms();
			w->running++;
			rc = pgo_jobs_spawn(w, j, payload);
			if (rc != 0) {
				char msg[160];

				snprintf(msg, sizeof(msg),
					 "cannot start the command: %s",
					 strerror(rc));
				memset(j, 0, sizeof(*j));
				w->running--;
				pgo_ops_push_settle(
					w, id, epoch, attempt,
					pgo_lease_verdict(false, attempt,
							  w->o.max_attempts),
					msg);
			}
			break;
		}
	}
}

/* Jobs whose lease the heartbeat did not extend are lost: kill them. */
static void hb_done(pgo_worker_t *w, PGresult *res)
{
	for (int s = 0; s < w->o.concurrency; s++) {
		job_run_t *j = &w->jobs[s];
		bool live = false;

		if (!j->used || !j->hb_sent)
			continue;
		j->hb_sent = false;
		if (j->lost)
			continue;
		for (int r = 0; r < PQntuples(res); r++)
			if (strtoll(PQgetvalue(res, r, 0), NULL, 10) == j->id)
				live = true;
		if (!live) {
			j->lost = true;
			pgo_log(PGO_LOG_WARN, w->subject,
				"job %" PRId64 " epoch %" PRId64
				": lease lost; killing its process group",
				j->id, j->epoch);
			pgo_proc_kill(j->proc);
		}
	}
}

static void reap_done(pgo_worker_t *w, PGresult *reaped, PGresult *dead)
{
	int n = reaped ? PQntuples(reaped) : 0;

	if (n > 0) {
		w->stats.reaped += (uint64_t)n;
		pgo_log(PGO_LOG_WARN, w->subject,
			"returned %d expired lease%s (first: job %s of %s)", n,
			n == 1 ? "" : "s", PQgetvalue(reaped, 0, 0),
			PQgetisnull(reaped, 0, 1) ? "?"
						  : PQgetvalue(reaped, 0, 1));
	}
	if (dead && strcmp(PQcmdTuples(dead), "0") != 0)
		pgo_log(PGO_LOG_WARN, w->subject,
			"dead-lettered %s job(s) whose last attempt's lease "
			"expired",
			PQcmdTuples(dead));
}

/* A round finished on connection i. */
void pgo_ops_round(pgo_worker_t *w, int i)
{
	pgo_conn_t *c = &w->lconns[i];
	op_t *op = w->inflight[i];

	w->inflight[i] = NULL;
	if (!op) {
		pgo_conn_round_clear(c);
		return;
	}
	if (c->round.failed) {
		static const char *const what[] = {"recording an outcome",
						   "claiming jobs", "heartbeat",
						   "reaping expired leases"};

		pgo_log(PGO_LOG_WARN, w->subject, "%s: %s", what[op->kind],
			c->round.err);
		if (strcmp(c->round.sqlstate, "42P01") == 0) {
			snprintf(w->errmsg, sizeof(w->errmsg),
				 "queue pgoutbox.%s does not exist (create it "
				 "with `pgoutbox queue create %s`)",
				 w->queue, w->queue);
			w->stop = 2;
			w->stop_code = PGO_ERR_CONFIG;
		}
		/* A deadlock, a lock or statement timeout rolled the
		 * outcome back: it may well go through when sent again. */
		if (pgo_sqlstate_retriable(c->round.sqlstate) &&
		    settle_again(w, op)) {
			pgo_conn_round_clear(c);
			return;
		}
		if (op->kind == OP_SETTLE)
			pgo_log(PGO_LOG_WARN, w->subject,
				"job %" PRId64 ": its outcome was not "
				"recorded; it runs again when its lease "
				"expires",
				op->id);
		if (op->kind == OP_HB)
			for (int s = 0; s < w->o.concurrency; s++)
				w->jobs[s].hb_sent = false;
	} else if (op->kind == OP_SETTLE) {
		settle_done(w, op, c->round.res[0]);
	} else if (op->kind == OP_CLAIM) {
		w->claim_got = PQntuples(c->round.res[0]);
		claim_done(w, c->round.res[0]);
	} else if (op->kind == OP_HB) {
		hb_done(w, c->round.res[0]);
	} else {
		reap_done(w, c->round.res[0], c->round.res[1]);
	}
	pgo_conn_round_clear(c);
	if (op->kind == OP_CLAIM)
		w->claim_want = op->want;
	pgo_ops_free(op);
}

bool pgo_ops_inflight(const pgo_worker_t *w, op_kind_t kind)
{
	for (int i = 0; i < LEASE_CONNS; i++)
		if (w->inflight[i] && w->inflight[i]->kind == kind)
			return true;
	return false;
}
