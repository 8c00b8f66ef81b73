/*
 * sql_run.c — the worker's sql mode: pgoutbox.work_sql() (sql/012) claims
 * a batch with FOR UPDATE SKIP LOCKED and calls the function on each job
 * in the same transaction, deleting it there, so a job's effects commit
 * exactly once.  Up to `concurrency` non-blocking connections (conn.c)
 * run batches at once; a full batch sends the next at once, a job that
 * failed brings the worker back when its retry is due (the notices of
 * work_sql), else it polls.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "queue/worker_int.h"
#include "base/log.h"
#include "base/time.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"

/* The notices of pgoutbox.work_sql (012_usability): a job failed, with its
 * id, attempt, error and retry delay (DETAIL "retry_in_ms=N"), or was
 * dead-lettered.  Logged, and the worker comes back when the retry is due
 * rather than at its next poll. */
static void on_work_notice(void *arg, const PGresult *res)
{
	pgo_worker_t *w = arg;
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

	if (!hint || strcmp(hint, "pgoutbox.work_sql") != 0) {
		const char *sev =
			PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
		bool warning = sev && strcmp(sev, "WARNING") == 0;

		pgo_log(warning ? PGO_LOG_WARN : PGO_LOG_DEBUG, w->subject,
			"server %s: %s", warning ? "warning" : "notice",
			msg ? msg : "?");
		return;
	}
	pgo_log(PGO_LOG_WARN, w->subject, "%s", msg ? msg : "");
	if (detail && strncmp(detail, "retry_in_ms=", 12) == 0) {
		int64_t due = pgo_now_ms() + strtoll(detail + 12, NULL, 10);

		if (!w->sql_retry_at || due < w->sql_retry_at)
			w->sql_retry_at = due;
	}
}

/* sql mode's loop state. */
typedef struct sql_loop {
	int64_t next_poll;     /* a batch on every free connection then */
	int64_t next_stats;    /* the next stats line (0: none) */
	bool stop_logged;      /* "stopping" said */
	const char *params[6]; /* pgoutbox.work_sql()'s */
} sql_loop_t;

/* The connections, their watchers and the statement's parameters; the
 * first batch at once. */
static int sql_start(pgo_worker_t *w, sql_loop_t *l)
{
	int n = w->o.concurrency;

	w->conns = calloc((size_t)n, sizeof(*w->conns));
	w->sio = calloc((size_t)n, sizeof(*w->sio));
	w->srevents = calloc((size_t)n, sizeof(*w->srevents));
	w->conn_more = calloc((size_t)n, sizeof(*w->conn_more));
	for (int i = 0; w->sio && w->srevents && i < n; i++)
		if (!(w->sio[i] = pgo_loop_io_add(w->loop, -1, 0,
						  pgo_worker_conn_io,
						  &w->srevents[i])))
			break;
	if (!w->conns || !w->sio || !w->srevents || !w->conn_more ||
	    !w->sio[n - 1]) {
		snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
		return PGO_ERR_NOMEM;
	}
	snprintf(w->batch_s, sizeof(w->batch_s), "%d", w->o.batch);
	snprintf(w->max_s, sizeof(w->max_s), "%d", w->o.max_attempts);
	snprintf(w->base_s, sizeof(w->base_s), "%" PRId64, w->o.retry_base_ms);
	snprintf(w->cap_s, sizeof(w->cap_s), "%" PRId64, w->o.retry_max_ms);
	l->params[0] = w->queue;
	l->params[1] = w->sql_function;
	l->params[2] = w->batch_s;
	l->params[3] = w->max_s;
	l->params[4] = w->base_s;
	l->params[5] = w->cap_s;
	w->setup = (pgo_conn_setup_t){
		.subject = w->subject,
		.app_name = w->app_name,
		.sql = {w->listen_sql, NULL},
		.prep_name = {"pgoutbox_work", NULL},
		.prep_sql = {w->work_sql, NULL},
		.check_schema = true,
		.refuse_sql = REFUSE_SQL,
		.refuse_param = {w->queue, NULL},
		.pooled = w->pooled,
		.notice = on_work_notice,
		.notice_arg = w,
	};
	pgo_worker_conns_init(w, w->conns, n, &w->setup, &w->setup_quiet, 0);
	if (w->o.stats_interval_ms > 0)
		l->next_stats = pgo_now_ms() + w->o.stats_interval_ms;
	w->kick = true;
	return PGO_OK;
}

/* Sends a batch on each ready connection when one is due (a kick, the
 * poll interval, a retry) or its last batch was full.  Counts the
 * connections busy into *busy; returns the nearest reconnect (0: none). */
static int64_t sql_dispatch(pgo_worker_t *w, sql_loop_t *l, int64_t now,
			    int *busy)
{
	bool retry_due = w->sql_retry_at && now >= w->sql_retry_at;
	bool due = w->kick || now >= l->next_poll || retry_due;
	int64_t deadline = 0;

	if (due) {
		l->next_poll = now + w->o.poll_interval_ms;
		if (retry_due)
			w->sql_retry_at = 0;
	}
	*busy = 0;
	for (int i = 0; i < w->o.concurrency; i++) {
		pgo_conn_t *c = &w->conns[i];

		pgo_conn_kick(c, now);
		if (c->state == PGO_CONN_READY && !w->stop &&
		    (due || w->conn_more[i])) {
			pgo_conn_exec_prepared(c, "pgoutbox_work", 6,
					       l->params);
			pgo_conn_send(c);
		}
		if (c->state == PGO_CONN_BUSY || c->state == PGO_CONN_SETUP)
			(*busy)++;
		if (c->state == PGO_CONN_DOWN)
			deadline = pgo_deadline_min(deadline, c->retry_at);
	}
	w->kick = false;
	return deadline;
}

/* A batch came back on connection i: its counts, and whether that
 * connection goes on at once (a full batch).  PGO_ERR_CONFIG (errmsg
 * set) when the function or the queue does not exist. */
static int sql_round(pgo_worker_t *w, int i)
{
	pgo_conn_t *c = &w->conns[i];
	PGresult *r = c->round.res[0];

	w->conn_more[i] = false;
	if (c->round.failed) {
		pgo_log(PGO_LOG_WARN, w->subject, "batch failed: %s",
			c->round.err);
		if (strcmp(c->round.sqlstate, "42883") == 0 ||
		    strcmp(c->round.sqlstate, "42P01") == 0) {
			snprintf(w->errmsg, sizeof(w->errmsg), "%s",
				 c->round.err);
			pgo_conn_round_clear(c);
			return PGO_ERR_CONFIG;
		}
	} else if (r && PQntuples(r) == 1) {
		int claimed = atoi(PQgetvalue(r, 0, 0));
		int failed = atoi(PQgetvalue(r, 0, 2));
		int dead = atoi(PQgetvalue(r, 0, 3));

		w->stats.done += (uint64_t)atoi(PQgetvalue(r, 0, 1));
		w->stats.failed += (uint64_t)failed;
		w->stats.dead += (uint64_t)dead;
		if (failed || dead)
			pgo_log(PGO_LOG_INFO, w->subject,
				"%d job(s) failed, %d dead-lettered", failed,
				dead);
		w->conn_more[i] = claimed >= w->o.batch;
		if (claimed > 0)
			w->kick = true; /* others may help */
	}
	pgo_conn_round_clear(c);
	return PGO_OK;
}

int pgo_sql_run(pgo_worker_t *w)
{
	sql_loop_t l = {0};
	int n = w->o.concurrency, rc = sql_start(w, &l);

	if (rc != PGO_OK)
		return rc;
	for (;;) {
		int64_t now = pgo_now_ms(), deadline;
		int busy;

		if (w->stop && !l.stop_logged) {
			pgo_log(PGO_LOG_INFO, w->subject,
				"stopping after the batches in flight");
			l.stop_logged = true;
		}
		deadline = sql_dispatch(w, &l, now, &busy);
		if (w->stop && busy == 0)
			break;
		if (l.next_stats && now >= l.next_stats) {
			pgo_worker_log_stats(w, "stats");
			l.next_stats = now + w->o.stats_interval_ms;
		}
		if (!w->stop)
			deadline = pgo_deadline_min(
				pgo_deadline_min(deadline, l.next_poll),
				w->sql_retry_at);
		if (l.next_stats)
			deadline = pgo_deadline_min(deadline, l.next_stats);
		if (pgo_worker_turn(w, w->conns, w->sio, w->srevents, n,
				    deadline) != PGO_OK)
			return PGO_ERR_IO;
		for (int i = 0; i < n; i++) {
			pgo_conn_event_t ev = pgo_worker_step_conn(
				w, &w->conns[i], &w->srevents[i]);

			if (ev == PGO_CONN_EV_FATAL)
				return w->stop_code ? w->stop_code
						    : PGO_ERR_SCHEMA;
			if (ev == PGO_CONN_EV_ROUND &&
			    sql_round(w, i) != PGO_OK)
				return PGO_ERR_CONFIG;
		}
	}
	return PGO_OK;
}
