/*
 * worker.c — `pgoutbox worker`: drains a work queue with one of three
 * handlers, in one poll() loop.  This file is the handle: its options,
 * new and destroy, metrics, a turn of the loop over the connections, and
 * run, which picks the mode.
 *
 *  sql     pgoutbox.work_sql() claims a batch with FOR UPDATE SKIP LOCKED
 *          and calls the function on each job in the same transaction,
 *          deleting it there: the job's effects commit exactly once.  Up to
 *          `concurrency` non-blocking connections (conn.c) run batches at
 *          once (sql_run.c).
 *  exec    lease mode: a short transaction leases jobs (locked_by,
 *          locked_until, epoch + 1, attempts + 1); each job runs as
 *          `sh -c CMD` in its own process group with the payload on stdin,
 *          outside any transaction (jobs.c); completion deletes the row
 *          only while the epoch is still ours, so a worker whose lease
 *          expired (and was taken over) cannot complete or fail the job.
 *          Heartbeats extend live leases every lease/3; a reaper returns
 *          expired leases and dead-letters jobs out of attempts (ops.c,
 *          lease.c, lease_run.c).
 *  C       lease mode with a callback, run synchronously.
 *
 * Lease mode talks to PostgreSQL over two non-blocking connections
 * (conn.c), one statement per round, so each is a short transaction of its
 * own.  Each mode turns one event loop (loop.c): the connections' sockets
 * are watchers that record what poll() saw, stepped after each turn; exec
 * jobs are runs of proc.c on the same loop (pidfds, stderr pipes, stdin
 * and timeouts are its watchers and timers), whose ends settle the jobs;
 * a stop request wakes the loop.  It never waits for the database nor for
 * a child.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queue/worker_int.h"
#include "base/abi.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "loop/proc.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"

int pgo_worker_opts_init(pgo_worker_opts_t *opts, size_t size)
{
	const pgo_worker_opts_t d = {
		.size = sizeof(d),
		.concurrency = 1,
		.batch = 100,
		.lease_ms = 30000,
		.timeout_ms = 25000,
		.max_attempts = 10,
		.retry_base_ms = 1000,
		.retry_max_ms = 300000,
		.poll_interval_ms = 5000,
		.reap_interval_ms = 5000,
	};

	return pgo_abi_init(PGO_ABI_WORKER_OPTS, opts, size, &d);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* A function name: [schema.]name, each an identifier (quoting happens in
 * SQL through regprocedure). */
static bool func_name_ok(const char *s)
{
	int dots = 0;

	if (!s || !*s || strlen(s) > 127)
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			if (++dots > 1 || p == s || !p[1])
				return false;
		} else if (!((*p >= 'a' && *p <= 'z') ||
			     (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || *p == '_')) {
			return false;
		}
	}
	return true;
}

/* The options' rules: one handler, a function name for --sql, the
 * bounds of the numbers. */
static int check_opts(const pgo_worker_opts_t *opts, pgo_error_t *err)
{
	if (pgo_ident_check(opts->queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	int handlers = (opts->exec_command != NULL) +
		       (opts->sql_function != NULL) + (opts->handler != NULL);
	if (handlers != 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "a worker needs exactly one handler: --exec CMD, "
			      "--sql FUNC or a C callback (%d given)",
			      handlers);
		return PGO_ERR_INVALID;
	}
	if (opts->sql_function && !func_name_ok(opts->sql_function)) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql \"%s\": give a function name, "
			      "[schema.]name, taking one jsonb argument",
			      opts->sql_function);
		return PGO_ERR_INVALID;
	}
	if (opts->concurrency < 1 || opts->concurrency > MAX_CONCURRENCY) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "concurrency must be 1 to %d, not %d",
			      MAX_CONCURRENCY, opts->concurrency);
		return PGO_ERR_INVALID;
	}
	if (opts->sql_function && opts->concurrency > PGO_ROUND_MAX * 4) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql: concurrency (connections) must be at "
			      "most %d",
			      PGO_ROUND_MAX * 4);
		return PGO_ERR_INVALID;
	}
	if (opts->lease_ms < 1000 || opts->max_attempts < 1 ||
	    opts->batch < 1 || opts->batch > 10000 || opts->timeout_ms < 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "bad worker options: lease at least 1s, "
			      "max attempts at least 1, batch 1 to 10000, "
			      "timeout above 0");
		return PGO_ERR_INVALID;
	}
	return PGO_OK;
}

/* The worker's name: the one given, else host-pid. */
static char *default_name(const char *name)
{
	char host[64], buf[96];

	if (name && *name)
		return strdup(name);
	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "worker");
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, sizeof(buf), "%s-%d", host, (int)getpid());
	return strdup(buf);
}

/* --- metrics --- */

static const char *const outcomes[6] = {"done", "failed",  "dead",
					"lost", "timeout", "reaped"};

static void metrics_collect(void *arg)
{
	pgo_worker_t *w = arg;
	const uint64_t n[6] = {w->stats.done,	  w->stats.failed,
			       w->stats.dead,	  w->stats.lost,
			       w->stats.timeouts, w->stats.reaped};

	for (int i = 0; i < 6; i++)
		pgo_series_set(w->m_jobs[i], (double)n[i]);
}

static bool metrics_ready(void *arg, char *why, size_t size)
{
	pgo_worker_t *w = arg;

	if (w->stop)
		snprintf(why, size, "stopping");
	else if (!w->pg_up)
		snprintf(why, size, "postgresql: %s", w->pg_why);
	else
		snprintf(why, size, "ready: connected to PostgreSQL");
	return w->pg_up && !w->stop;
}

static int metrics_init(pgo_worker_t *w, pgo_error_t *err)
{
	const pgo_endpoint_probe_t probe = {metrics_collect, metrics_ready, w};
	pgo_metric_t *jobs;
	char labels[200];

	w->mon = pgo_monitor_new(w->loop, w->conf, w->subject, err);
	if (!w->mon)
		return err->code;
	pgo_monitor_probe(w->mon, &probe);
	snprintf(w->pg_why, sizeof(w->pg_why), "not connected yet");
	jobs = pgo_metrics_family(
		pgo_monitor_metrics(w->mon), PGO_METRIC_COUNTER,
		"pgoutbox_worker_jobs_total",
		"Jobs by outcome: done, failed (retried), dead "
		"(dead-lettered), "
		"lost (lease taken over), timeout (killed), reaped (expired "
		"leases this worker returned)",
		NULL, 0);
	for (int i = 0; i < 6; i++)
		w->m_jobs[i] = pgo_metric_series(
			jobs,
			pgo_metrics_labels(labels, sizeof(labels), "queue",
					   w->queue, "worker", w->name,
					   "outcome", outcomes[i], NULL));
	w->m_duration = pgo_metric_series(
		pgo_metrics_family(pgo_monitor_metrics(w->mon),
				   PGO_METRIC_HISTOGRAM,
				   "pgoutbox_worker_job_duration_seconds",
				   "How long an exec or callback job ran",
				   pgo_metrics_seconds_buckets,
				   pgo_metrics_seconds_nbuckets),
		pgo_metrics_labels(labels, sizeof(labels), "queue", w->queue,
				   "worker", w->name, NULL));
	return PGO_OK;
}

pgo_worker_t *pgo_worker_new(const pgo_conf_t *conf,
			     const pgo_worker_opts_t *caller_opts,
			     pgo_error_t *err)
{
	pgo_worker_opts_t full; /* the caller's over the defaults (abi.c) */
	const pgo_worker_opts_t *opts = &full;
	pgo_worker_t *w;

	if (!conf || !caller_opts) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no %s given",
			      !conf ? "configuration" : "options");
		return NULL;
	}
	pgo_worker_opts_init(&full, sizeof(full));
	if (pgo_abi_copy(PGO_ABI_WORKER_OPTS, &full, caller_opts, err) !=
	    PGO_OK)
		return NULL;
	if (check_opts(opts, err) != PGO_OK)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	w->conf = conf;
	w->o = *opts;
	w->queue = strdup(opts->queue);
	w->name = default_name(opts->name);
	w->exec_command = dup_or_null(opts->exec_command);
	w->sql_function = dup_or_null(opts->sql_function);
	if (opts->handler)
		w->o.concurrency = 1;
	w->jobs = calloc((size_t)w->o.concurrency, sizeof(*w->jobs));
	if (!w->queue || !w->name || !w->jobs ||
	    (opts->exec_command && !w->exec_command) ||
	    (opts->sql_function && !w->sql_function)) {
		pgo_worker_destroy(w);
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	w->loop = pgo_loop_new();
	if (!w->loop) {
		pgo_error_set(err, PGO_ERR_IO, 1,
			      "worker: event loop (wake-up pipe): %s",
			      strerror(errno));
		pgo_worker_destroy(w);
		return NULL;
	}
	w->o.queue = w->queue;
	w->o.name = w->name;
	w->o.exec_command = w->exec_command;
	w->o.sql_function = w->sql_function;
	snprintf(w->subject, sizeof(w->subject), "worker %s %s", w->queue,
		 w->sql_function   ? "sql"
		 : w->exec_command ? "exec"
				   : "callback");
	snprintf(w->app_name, sizeof(w->app_name), "pgoutbox worker %.40s",
		 w->name);
	w->rnd = (unsigned)getpid() ^ (unsigned)pgo_wall_us();
	pgo_ops_build_sql(w);
	if (metrics_init(w, err) != PGO_OK) {
		pgo_worker_destroy(w);
		return NULL;
	}
	pgo_error_clear(err);
	return w;
}

void pgo_worker_destroy(pgo_worker_t *w)
{
	if (!w)
		return;
	/* Jobs still running (a fatal error ended the run): killed, their
	 * leases expire and they run again. */
	for (int i = 0; w->jobs && i < w->o.concurrency; i++)
		if (w->jobs[i].used)
			pgo_proc_cancel(w->jobs[i].proc);
	for (int i = 0; i < LEASE_CONNS; i++) {
		pgo_conn_close(&w->lconns[i]);
		pgo_ops_free(w->inflight[i]);
	}
	while (w->q_head) {
		op_t *op = w->q_head;

		w->q_head = op->next;
		pgo_ops_free(op);
	}
	if (w->conns) {
		for (int i = 0; i < w->o.concurrency; i++)
			pgo_conn_close(&w->conns[i]);
	}
	free(w->conns);
	free(w->sio);
	free(w->srevents);
	free(w->conn_more);
	free(w->jobs);
	pgo_monitor_destroy(w->mon);
	pgo_loop_destroy(w->loop);
	free(w->queue);
	free(w->name);
	free(w->exec_command);
	free(w->sql_function);
	free(w);
}

void pgo_worker_request_stop(pgo_worker_t *w)
{
	w->stop = 1;
	pgo_loop_wake(w->loop);
}

void pgo_worker_get_stats(const pgo_worker_t *w, pgo_worker_stats_t *out)
{
	*out = w->stats;
}

const char *pgo_worker_errmsg(const pgo_worker_t *w)
{
	return w ? w->errmsg : "no worker";
}

double pgo_worker_jitter(pgo_worker_t *w)
{
	w->rnd = w->rnd * 1103515245u + 12345u;
	return (double)((w->rnd >> 8) & 0xffffff) / (double)0x1000000;
}

/* A connection's socket was ready: stepped after the loop's turn. */
void pgo_worker_conn_io(void *arg, int fd, short revents)
{
	(void)fd;
	*(short *)arg |= revents;
}

/* Points the connections' watchers at what each waits for now and turns
 * the loop once, at most until deadline (and MAX_WAIT_MS from now).
 * PGO_ERR_IO (errmsg set) when poll() failed. */
int pgo_worker_turn(pgo_worker_t *w, const pgo_conn_t *conns,
		    pgo_loop_io_t **ios, short *revents, int n,
		    int64_t deadline)
{
	int rc;

	w->pg_up = true;
	for (int i = 0; i < n; i++) {
		struct pollfd pfd;

		if (conns[i].state < PGO_CONN_READY && w->pg_up) {
			w->pg_up = false;
			snprintf(w->pg_why, sizeof(w->pg_why),
				 "connection %d is not connected%s%.200s", i,
				 conns[i].last_err[0] ? ": " : "",
				 conns[i].last_err);
			w->pg_why[strcspn(w->pg_why, "\n")] = '\0';
		}
		pgo_conn_pollfd(&conns[i], &pfd);
		pgo_loop_io_set(ios[i], pfd.fd, pfd.events);
		revents[i] = 0;
	}
	if (w->pg_up)
		pgo_monitor_ready(w->mon);
	if (w->stop)
		pgo_monitor_stopping(w->mon);
	rc = pgo_loop_run_once(
		w->loop,
		pgo_deadline_min(deadline, pgo_now_ms() + MAX_WAIT_MS));
	if (rc < 0) {
		snprintf(w->errmsg, sizeof(w->errmsg), "poll: %s",
			 strerror(-rc));
		return PGO_ERR_IO;
	}
	return PGO_OK;
}

/* Starts n connections with setup; only the first one LISTENs: the others
 * get a copy (quiet) whose statements end where the LISTEN stands. */
void pgo_worker_conns_init(pgo_worker_t *w, pgo_conn_t *conns, int n,
			   pgo_conn_setup_t *setup, pgo_conn_setup_t *quiet,
			   int listen_at)
{
	*quiet = *setup;
	quiet->sql[listen_at] = NULL;
	for (int i = 0; i < n; i++)
		pgo_conn_init(&conns[i], w->conf, i == 0 ? setup : quiet);
}

/* Steps a connection with what poll() saw in the turn: a notification or
 * a new session kicks a claim; a fatal setup error fills errmsg. */
pgo_conn_event_t pgo_worker_step_conn(pgo_worker_t *w, pgo_conn_t *c,
				      short *revents)
{
	pgo_conn_event_t ev = pgo_conn_step(c, *revents);

	*revents = 0;
	if (c->notifies) {
		c->notifies = 0;
		w->kick = true;
	}
	if (ev == PGO_CONN_EV_READY) {
		w->kick = true;
		if (!w->said_started) {
			w->said_started = true;
			pgo_log(PGO_LOG_INFO, w->subject,
				"started as %s, concurrency %d, lease %" PRId64
				" ms",
				w->name, w->o.concurrency, w->o.lease_ms);
		}
	}
	if (ev == PGO_CONN_EV_FATAL) {
		snprintf(w->errmsg, sizeof(w->errmsg), "%s", c->fatal.msg);
		w->stop_code = c->fatal.code;
	}
	return ev;
}

void pgo_worker_log_stats(pgo_worker_t *w, const char *when)
{
	pgo_log(PGO_LOG_INFO, w->subject,
		"%s: done %" PRIu64 ", failed %" PRIu64 ", dead %" PRIu64
		", lost leases %" PRIu64 ", reaped %" PRIu64
		", timeouts %" PRIu64,
		when, w->stats.done, w->stats.failed, w->stats.dead,
		w->stats.lost, w->stats.reaped, w->stats.timeouts);
}

int pgo_worker_run(pgo_worker_t *w)
{
	pgo_pooler_t kind;
	int rc;

	/* "started as" comes with the first session (worker_event()). */
	/* Through a transaction pooler a session is not ours: no LISTEN,
	 * no prepared statement, settings per transaction (conn.c). */
	if (pgo_pooler_wait(w->conf, w->app_name, w->subject, w->loop, &w->stop,
			    &kind) == PGO_OK &&
	    kind >= PGO_POOLER_TRANSACTION) {
		w->pooled = true;
		pgo_log(PGO_LOG_WARN, w->subject,
			"the database connection goes through %s: no LISTEN, "
			"so new jobs are found by polling every %" PRId64
			" ms (--poll-interval); no prepared statements",
			pgo_pooler_name(kind), w->o.poll_interval_ms);
	}
	rc = w->sql_function ? pgo_sql_run(w) : pgo_lease_run(w);
	if (w->said_started)
		pgo_worker_log_stats(w, "stopped");
	return rc;
}
