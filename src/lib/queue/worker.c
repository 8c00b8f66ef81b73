/*
 * worker.c — `pgoutbox worker`: drains a work queue with one of three
 * handlers, in one poll() loop.
 *
 *  sql     pgoutbox.work_sql() claims a batch with FOR UPDATE SKIP LOCKED
 *          and calls the function on each job in the same transaction,
 *          deleting it there: the job's effects commit exactly once.  Up to
 *          `concurrency` non-blocking connections (conn.c) run batches at
 *          once.
 *  exec    lease mode: a short transaction leases jobs (locked_by,
 *          locked_until, epoch + 1, attempts + 1); each job runs as
 *          `sh -c CMD` in its own process group with the payload on stdin,
 *          outside any transaction; completion deletes the row only while
 *          the epoch is still ours, so a worker whose lease expired (and
 *          was taken over) cannot complete or fail the job.  Heartbeats
 *          extend live leases every lease/3; a reaper returns expired
 *          leases and dead-letters jobs out of attempts.
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/conn.h"
#include "metrics/metrics.h"
#include "loop/loop.h"
#include "loop/proc.h"

#define MAX_CONCURRENCY 256
#define TAIL_MAX	2000 /* stderr kept per job for the error text */
#define MAX_WAIT_MS	1000 /* the loop looks around at least this often */

/* One running exec job. */
typedef struct job_run {
	bool used;
	struct pgo_worker *w;
	int64_t id, epoch;
	int attempt;
	pgo_proc_t *proc; /* the command (proc.c ends it: done is job_done) */
	int64_t started;  /* monotonic ms, for its duration */
	bool lost;	  /* the lease is no longer ours: group killed */
	bool hb_sent;	  /* in the heartbeat in flight */
} job_run_t;

#define LEASE_CONNS 2

typedef enum op_kind {
	OP_SETTLE = 0, /* a job's outcome: complete, retry or dead letter */
	OP_CLAIM = 1,  /* lease more jobs */
	OP_HB = 2,     /* extend the leases of running jobs */
	OP_REAP = 3    /* return expired leases, dead-letter lost jobs */
} op_kind_t;

enum { VERDICT_OK = 0, VERDICT_RETRY = 1, VERDICT_DEAD = 2 };

/* One database operation of lease mode. */
typedef struct op {
	struct op *next;
	op_kind_t kind;
	int64_t id, epoch; /* SETTLE: the job and its lease */
	int attempt;
	int verdict;	  /* SETTLE: VERDICT_* */
	int64_t delay_ms; /* SETTLE, retry: the backoff */
	char *error;	  /* SETTLE: the error text (owned) */
	int tries;	  /* SETTLE: times sent again (lost connection,
			   * retriable failure) */
	int want;	  /* CLAIM: how many */
} op_t;

struct pgo_worker {
	const pgo_conf_t *conf;
	pgo_worker_opts_t o; /* strings below are our copies */
	char *queue, *name, *exec_command, *sql_function;
	char subject[160];
	char app_name[64];
	/* lease mode */
	pgo_conn_t lconns[LEASE_CONNS];	 /* one statement per round each */
	pgo_loop_io_t *lio[LEASE_CONNS]; /* their sockets on the loop */
	short lrevents[LEASE_CONNS];	 /* what poll() saw this turn */
	op_t *inflight[LEASE_CONNS];	 /* the operation of each round */
	op_t *q_head, *q_tail;		 /* outcomes waiting for a connection */
	int q_len;
	int claim_want, claim_got; /* the last claim: asked, got */
	pgo_conn_setup_t lsetup, lsetup_quiet;
	char set_sql[64];
	job_run_t *jobs; /* concurrency slots */
	int running;
	char claim_sql[1024], complete_sql[256], fail_sql[512], dead_sql[1024];
	char hb_sql[512], reap_sql[512], reap_dead_sql[1024], listen_sql[96];
	/* sql mode */
	pgo_conn_t *conns;
	pgo_loop_io_t **sio; /* their sockets on the loop */
	short *srevents;     /* what poll() saw this turn */
	bool *conn_more;
	pgo_conn_setup_t setup, setup_quiet;
	char work_sql[256];
	char batch_s[16], max_s[16], base_s[24], cap_s[24];
	/* common */
	pgo_loop_t *loop; /* the one event loop of either mode */
	bool kick;	  /* claim now: a wake-up, a free slot, a full batch */
	volatile sig_atomic_t stop;
	pgo_worker_stats_t stats;
	/* metrics (src/lib/metrics): jobs by outcome, as in stats */
	pgo_monitor_t *mon;
	pgo_series_t *m_jobs[6]; /* done failed dead lost timeout reaped */
	pgo_series_t *m_duration;
	bool pg_up;	    /* every connection of the run is up */
	char pg_why[256];   /* ... else why not, for /readyz */
	int64_t next_retry; /* earliest retry this worker scheduled */
	unsigned rnd;
	char errmsg[512];
	bool pooled;	    /* through a transaction pooler (pooler.c) */
	char local_sql[96]; /* lease mode, pooled: set_sql per transaction */
	int stop_code; /* stop 2: why (PGO_ERR_CONFIG: a retry cannot help) */
	int64_t sql_retry_at; /* sql mode: the first retry due (0: none) */
};

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

/* The setup's refusal: the outbox's events are for relays (a worker would
 * fail on its missing columns forever). */
#define REFUSE_SQL                                                             \
	"SELECT format('queue \"%s\" is an outbox: its events are published "  \
	"by `pgoutbox relay --queue %s`; a worker runs the jobs of a work "    \
	"queue (pgoutbox queue create NAME)', name, name) "                    \
	"FROM (SELECT $1::text AS name) q "                                    \
	"WHERE pgoutbox.queue_kind(name) <> 'work'"

static void build_sql(pgo_worker_t *w)
{
	const char *q = w->queue;

	snprintf(
		w->claim_sql, sizeof(w->claim_sql),
		"UPDATE pgoutbox.\"%s\" j SET locked_by = $1, "
		"locked_until = now() + $2::bigint * interval '1 millisecond', "
		"epoch = j.epoch + 1, attempts = j.attempts + 1 "
		"WHERE j.id = ANY (ARRAY(SELECT id FROM pgoutbox.\"%s\" "
		"WHERE run_at <= now() AND (locked_until IS NULL OR "
		"locked_until < now()) AND attempts < $4::integer "
		"ORDER BY priority DESC, id LIMIT $3::integer "
		"FOR UPDATE SKIP LOCKED)) "
		"RETURNING j.id, j.epoch, j.attempts, j.topic, j.key, "
		"j.payload",
		q, q);
	snprintf(w->complete_sql, sizeof(w->complete_sql),
		 "DELETE FROM pgoutbox.\"%s\" WHERE id = $1 AND epoch = $2", q);
	snprintf(w->fail_sql, sizeof(w->fail_sql),
		 "UPDATE pgoutbox.\"%s\" SET run_at = now() + $3::bigint * "
		 "interval '1 millisecond', last_error = $4, locked_by = NULL, "
		 "locked_until = NULL WHERE id = $1 AND epoch = $2",
		 q);
	snprintf(w->dead_sql, sizeof(w->dead_sql),
		 "WITH d AS (DELETE FROM pgoutbox.\"%s\" WHERE id = $1 AND "
		 "epoch = $2 RETURNING *) INSERT INTO pgoutbox.dead_letters "
		 "(id, queue, topic, key, type, payload, headers, created_at, "
		 "attempts, last_error) SELECT id, '%s', topic, key, type, "
		 "payload, headers, created_at, attempts, $3 FROM d "
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
		 "payload, headers, created_at, attempts, last_error) "
		 "SELECT id, '%s', topic, key, type, payload, headers, "
		 "created_at, attempts, coalesce(last_error || '; ', '') || "
		 "'lease expired on the last attempt (worker lost)' FROM d "
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
	int handlers;
	char host[64];

	if (!conf || !caller_opts) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no %s given",
			      !conf ? "configuration" : "options");
		return NULL;
	}
	pgo_worker_opts_init(&full, sizeof(full));
	if (pgo_abi_copy(PGO_ABI_WORKER_OPTS, &full, caller_opts, err) !=
	    PGO_OK)
		return NULL;
	if (pgo_ident_check(opts->queue, err) != PGO_OK)
		return NULL;
	handlers = (opts->exec_command != NULL) + (opts->sql_function != NULL) +
		   (opts->handler != NULL);
	if (handlers != 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "a worker needs exactly one handler: --exec CMD, "
			      "--sql FUNC or a C callback (%d given)",
			      handlers);
		return NULL;
	}
	if (opts->sql_function && !func_name_ok(opts->sql_function)) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql \"%s\": give a function name, "
			      "[schema.]name, taking one jsonb argument",
			      opts->sql_function);
		return NULL;
	}
	if (opts->concurrency < 1 || opts->concurrency > MAX_CONCURRENCY) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "concurrency must be 1 to %d, not %d",
			      MAX_CONCURRENCY, opts->concurrency);
		return NULL;
	}
	if (opts->sql_function && opts->concurrency > PGO_ROUND_MAX * 4) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql: concurrency (connections) must be at "
			      "most %d",
			      PGO_ROUND_MAX * 4);
		return NULL;
	}
	if (opts->lease_ms < 1000 || opts->max_attempts < 1 ||
	    opts->batch < 1 || opts->batch > 10000 || opts->timeout_ms < 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "bad worker options: lease at least 1s, "
			      "max attempts at least 1, batch 1 to 10000, "
			      "timeout above 0");
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	w->conf = conf;
	w->o = *opts;
	w->queue = strdup(opts->queue);
	if (opts->name && *opts->name) {
		w->name = strdup(opts->name);
	} else {
		char buf[96];

		if (gethostname(host, sizeof(host)) != 0)
			strcpy(host, "worker");
		host[sizeof(host) - 1] = '\0';
		snprintf(buf, sizeof(buf), "%s-%d", host, (int)getpid());
		w->name = strdup(buf);
	}
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
	build_sql(w);
	if (metrics_init(w, err) != PGO_OK) {
		pgo_worker_destroy(w);
		return NULL;
	}
	pgo_error_clear(err);
	return w;
}

static void free_op(op_t *op)
{
	if (op) {
		free(op->error);
		free(op);
	}
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
		free_op(w->inflight[i]);
	}
	while (w->q_head) {
		op_t *op = w->q_head;

		w->q_head = op->next;
		free_op(op);
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

static double jitter(pgo_worker_t *w)
{
	w->rnd = w->rnd * 1103515245u + 12345u;
	return (double)((w->rnd >> 8) & 0xffffff) / (double)0x1000000;
}

/* A connection's socket was ready: stepped after the loop's turn. */
static void conn_io(void *arg, int fd, short revents)
{
	(void)fd;
	*(short *)arg |= revents;
}

/* Points the connections' watchers at what each waits for now and turns
 * the loop once, at most until deadline (and MAX_WAIT_MS from now).
 * PGO_ERR_IO (errmsg set) when poll() failed. */
static int turn(pgo_worker_t *w, const pgo_conn_t *conns, pgo_loop_io_t **ios,
		short *revents, int n, int64_t deadline)
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
static void conns_init(pgo_worker_t *w, pgo_conn_t *conns, int n,
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
static pgo_conn_event_t step_conn(pgo_worker_t *w, pgo_conn_t *c,
				  short *revents)
{
	pgo_conn_event_t ev = pgo_conn_step(c, *revents);

	*revents = 0;
	if (c->notifies) {
		c->notifies = 0;
		w->kick = true;
	}
	if (ev == PGO_CONN_EV_READY)
		w->kick = true;
	if (ev == PGO_CONN_EV_FATAL) {
		snprintf(w->errmsg, sizeof(w->errmsg), "%s", c->fatal.msg);
		w->stop_code = c->fatal.code;
	}
	return ev;
}

static void log_stats(pgo_worker_t *w, const char *when)
{
	pgo_log(PGO_LOG_INFO, w->subject,
		"%s: done %" PRIu64 ", failed %" PRIu64 ", dead %" PRIu64
		", lost leases %" PRIu64 ", reaped %" PRIu64
		", timeouts %" PRIu64,
		when, w->stats.done, w->stats.failed, w->stats.dead,
		w->stats.lost, w->stats.reaped, w->stats.timeouts);
}

/* ===================== lease mode (exec, C callback) ===================== */

/*
 * The database side is a queue of operations run on LEASE_CONNS
 * non-blocking connections (conn.c), one statement per round, so each is
 * its own short transaction: outcomes of finished jobs first, then the
 * heartbeat, the reaper and a claim.  Nothing here waits for the database
 * or for a child.
 */

static void job_done(void *arg, const pgo_proc_result_t *res);

/* Starts sh -c CMD for a claimed job: payload on stdin, stderr's tail
 * kept, stdout the worker's, own process group, killed after the
 * timeout.  Returns 0 or an errno value. */
static int spawn_job(pgo_worker_t *w, job_run_t *j, const char *payload)
{
	char v_id[48], v_att[48], v_q[96];
	const char *env[] = {v_id, v_att, v_q, NULL};
	pgo_proc_spec_t spec = {
		.command = w->exec_command,
		.env = env,
		.input = payload,
		.input_len = strlen(payload),
		.err_tail = TAIL_MAX,
		.timeout_ms = w->o.timeout_ms,
		.subject = w->subject,
		.done = job_done,
		.arg = j,
	};
	const char *what;

	snprintf(v_id, sizeof(v_id), "PGOUTBOX_JOB_ID=%" PRId64, j->id);
	snprintf(v_att, sizeof(v_att), "PGOUTBOX_JOB_ATTEMPT=%d", j->attempt);
	snprintf(v_q, sizeof(v_q), "PGOUTBOX_QUEUE=%s", w->queue);
	return pgo_proc_start(w->loop, &spec, &j->proc, &what);
}

/* The error text of a failed job: the reason, then the stderr tail. */
static void job_error(const pgo_proc_result_t *res, const char *reason,
		      char *out, size_t size)
{
	size_t len = res->err_len;

	while (len > 0 &&
	       (res->err[len - 1] == '\n' || res->err[len - 1] == ' '))
		len--;
	if (len)
		snprintf(out, size, "%s; stderr: %.*s", reason, (int)len,
			 res->err);
	else
		snprintf(out, size, "%s", reason);
}

/* A one-line copy of text for the log: line breaks become " | ". */
static void one_line(const char *s, char *out, size_t size)
{
	size_t o = 0;

	for (; s && *s && o + 4 < size; s++) {
		if (*s == '\n') {
			memcpy(out + o, " | ", 3);
			o += 3;
		} else if ((unsigned char)*s < 0x20) {
			out[o++] = ' ';
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
}

/* Appends an outcome to the queue of operations. */
static void push_settle(pgo_worker_t *w, int64_t id, int64_t epoch, int attempt,
			int verdict, const char *error)
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
		op->delay_ms = pgo_backoff_ms(attempt, w->o.retry_base_ms,
					      w->o.retry_max_ms, jitter(w));
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
static void send_op(pgo_worker_t *w, int i, op_t *op)
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
		const char *p[4] = {w->name, lease, lim, max};

		snprintf(lim, sizeof(lim), "%d", op->want);
		pgo_conn_query(c, w->claim_sql, 4, p);
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
	}
	w->inflight[i] = op;
	/* A failed send drops the connection: the loop sees it DOWN with op
	 * in flight and hands op to lease_lost(). */
	(void)pgo_conn_send(c);
}

/* Puts an outcome back first in line to be sent again, at most 3 times;
 * false (op untouched) once it was tried that often. */
static bool settle_again(pgo_worker_t *w, op_t *op)
{
	if (op->kind != OP_SETTLE || ++op->tries > 3)
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
static void lease_lost(pgo_worker_t *w, int i)
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
	free_op(op);
}

static void settle_done(pgo_worker_t *w, op_t *op, PGresult *res)
{
	char line[TAIL_MAX + 600];
	bool ok = op->verdict == VERDICT_OK;

	one_line(op->error, line, sizeof(line));
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
			push_settle(w, id, epoch, attempt,
				    hr == 0 ? VERDICT_OK
				    : attempt >= w->o.max_attempts
					    ? VERDICT_DEAD
					    : VERDICT_RETRY,
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
			rc = spawn_job(w, j, payload);
			if (rc != 0) {
				char msg[160];

				snprintf(msg, sizeof(msg),
					 "cannot start the command: %s",
					 strerror(rc));
				memset(j, 0, sizeof(*j));
				w->running--;
				push_settle(w, id, epoch, attempt,
					    attempt >= w->o.max_attempts
						    ? VERDICT_DEAD
						    : VERDICT_RETRY,
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
static void lease_round(pgo_worker_t *w, int i)
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
	free_op(op);
}

static bool op_inflight(pgo_worker_t *w, op_kind_t kind)
{
	for (int i = 0; i < LEASE_CONNS; i++)
		if (w->inflight[i] && w->inflight[i]->kind == kind)
			return true;
	return false;
}

/* A job's command ended: its outcome joins the queue of operations. */
static void job_done(void *arg, const pgo_proc_result_t *res)
{
	job_run_t *j = arg;
	pgo_worker_t *w = j->w;
	char reason[128], error[TAIL_MAX + 160];
	bool ok = false;

	switch (res->end) {
	case PGO_PROC_TIMED_OUT:
		w->stats.timeouts++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " timed out after %" PRId64
			" ms: its process group was killed",
			j->id, w->o.timeout_ms);
		snprintf(reason, sizeof(reason),
			 "timed out after %" PRId64
			 " ms (process group killed)",
			 w->o.timeout_ms);
		break;
	case PGO_PROC_EXITED:
		ok = res->status == 0;
		snprintf(reason, sizeof(reason), "exit status %d", res->status);
		break;
	case PGO_PROC_SIGNALED:
		snprintf(reason, sizeof(reason), "killed by signal %d",
			 res->status);
		break;
	case PGO_PROC_LOST:
		snprintf(reason, sizeof(reason),
			 "exit status unknown (child reaped elsewhere)");
		break;
	}
	pgo_series_observe(w->m_duration,
			   (double)(pgo_now_ms() - j->started) / 1000.0);
	if (j->lost) {
		w->stats.lost++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " ended after its lease was lost; not "
			"recorded",
			j->id);
	} else {
		if (!ok)
			job_error(res, reason, error, sizeof(error));
		push_settle(w, j->id, j->epoch, j->attempt,
			    ok				      ? VERDICT_OK
			    : j->attempt >= w->o.max_attempts ? VERDICT_DEAD
							      : VERDICT_RETRY,
			    ok ? NULL : error);
	}
	memset(j, 0, sizeof(*j));
	w->running--;
	w->kick = true;
}

static int run_lease(pgo_worker_t *w)
{
	int n = w->o.concurrency;
	int64_t next_poll = 0, next_hb = 0, next_reap = 0, next_stats = 0;
	int64_t stop_deadline = 0;
	bool stop_logged = false;
	const struct pgo_conf_values *v = pgo_conf_values(w->conf);

	for (int i = 0; i < LEASE_CONNS; i++) {
		w->lio[i] = pgo_loop_io_add(w->loop, -1, 0, conn_io,
					    &w->lrevents[i]);
		if (!w->lio[i]) {
			snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
			return PGO_ERR_NOMEM;
		}
	}
	snprintf(w->set_sql, sizeof(w->set_sql), "SET statement_timeout = %lld",
		 (long long)v->statement_timeout);
	snprintf(w->local_sql, sizeof(w->local_sql),
		 "SELECT set_config('statement_timeout', '%lld', true)",
		 (long long)v->statement_timeout);
	w->lsetup = (pgo_conn_setup_t){
		.subject = w->subject,
		.app_name = w->app_name,
		.sql = {w->set_sql, w->listen_sql, NULL},
		.check_schema = true,
		.refuse_sql = REFUSE_SQL,
		.refuse_param = {w->queue, NULL},
		.pooled = w->pooled,
		.local_sql = w->local_sql,
	};
	conns_init(w, w->lconns, LEASE_CONNS, &w->lsetup, &w->lsetup_quiet, 1);
	if (w->o.stats_interval_ms > 0)
		next_stats = pgo_now_ms() + w->o.stats_interval_ms;
	w->kick = true;
	for (;;) {
		int64_t now = pgo_now_ms(), deadline = 0;
		int busy = 0;
		bool idle = false;

		if (w->stop == 2)
			break;
		if (w->stop && !stop_logged) {
			pgo_log(PGO_LOG_INFO, w->subject,
				"stopping: claiming no more, %d job(s) still "
				"running",
				w->running);
			stop_logged = true;
			stop_deadline = now + w->o.timeout_ms + 10000;
		}
		for (int i = 0; i < LEASE_CONNS; i++)
			busy += w->inflight[i] != NULL;
		if (w->stop && w->running == 0 && busy == 0 &&
		    (!w->q_head || now >= stop_deadline)) {
			if (w->q_head)
				pgo_log(PGO_LOG_WARN, w->subject,
					"stopping with %d outcome(s) not "
					"recorded (database unreachable); "
					"those jobs run again after their "
					"lease",
					w->q_len);
			break;
		}
		if (next_stats && now >= next_stats) {
			log_stats(w, "stats");
			next_stats = now + w->o.stats_interval_ms;
		}
		/* Give each idle connection its next operation. */
		for (int i = 0; i < LEASE_CONNS; i++) {
			pgo_conn_t *c = &w->lconns[i];
			op_t *op = NULL;

			pgo_conn_kick(c, now);
			if (c->state == PGO_CONN_DOWN)
				deadline =
					pgo_deadline_min(deadline, c->retry_at);
			if (c->state != PGO_CONN_READY || w->inflight[i])
				continue;
			if (w->q_head) {
				op = w->q_head;
				w->q_head = op->next;
				if (!w->q_head)
					w->q_tail = NULL;
				op->next = NULL;
				w->q_len--;
			} else if (w->running > 0 && now >= next_hb &&
				   !op_inflight(w, OP_HB)) {
				op = calloc(1, sizeof(*op));
				if (op)
					op->kind = OP_HB;
				next_hb = now + w->o.lease_ms / 3;
			} else if (!w->stop && now >= next_reap &&
				   !op_inflight(w, OP_REAP)) {
				op = calloc(1, sizeof(*op));
				if (op)
					op->kind = OP_REAP;
				next_reap = now + w->o.reap_interval_ms;
			} else if (!w->stop && w->running < n &&
				   (w->kick || now >= next_poll ||
				    (w->next_retry && now >= w->next_retry)) &&
				   !op_inflight(w, OP_CLAIM)) {
				/* A retry this worker scheduled is due. */
				if (w->next_retry && now >= w->next_retry)
					w->next_retry = 0;
				op = calloc(1, sizeof(*op));
				if (op) {
					op->kind = OP_CLAIM;
					op->want = w->o.handler
							   ? w->o.batch
							   : n - w->running;
				}
				w->kick = false;
				next_poll = now + w->o.poll_interval_ms;
			}
			if (op)
				send_op(w, i, op);
		}

		/* Timers that start an operation matter only while a
		 * connection can take it; otherwise a round's end or a
		 * reconnect wakes the loop. */
		for (int i = 0; i < LEASE_CONNS; i++)
			idle |= w->lconns[i].state == PGO_CONN_READY &&
				!w->inflight[i];
		if (idle && !w->stop) {
			if (w->running < n && !op_inflight(w, OP_CLAIM)) {
				deadline =
					pgo_deadline_min(deadline, next_poll);
				deadline = pgo_deadline_min(deadline,
							    w->next_retry);
			}
			if (!op_inflight(w, OP_REAP))
				deadline =
					pgo_deadline_min(deadline, next_reap);
		}
		if (idle && w->running > 0 && !op_inflight(w, OP_HB))
			deadline = pgo_deadline_min(deadline, next_hb);
		if (next_stats)
			deadline = pgo_deadline_min(deadline, next_stats);
		/* The jobs' pipes, pidfds and timeouts are on the loop
		 * already (proc.c): jobs end inside the turn (job_done), the
		 * connections are stepped after it. */
		if (turn(w, w->lconns, w->lio, w->lrevents, LEASE_CONNS,
			 deadline) != PGO_OK)
			return PGO_ERR_IO;
		for (int i = 0; i < LEASE_CONNS; i++) {
			pgo_conn_t *c = &w->lconns[i];
			pgo_conn_event_t ev = step_conn(w, c, &w->lrevents[i]);

			if (ev == PGO_CONN_EV_FATAL) {
				w->stop = 2;
				w->stop_code = c->fatal.code;
			} else if (ev == PGO_CONN_EV_ROUND) {
				bool was_claim =
					w->inflight[i] &&
					w->inflight[i]->kind == OP_CLAIM;

				lease_round(w, i);
				/* A full claim: more may be waiting. */
				if (was_claim &&
				    w->claim_got >= w->claim_want &&
				    w->claim_got > 0)
					w->kick = true;
			}
			if (c->state == PGO_CONN_DOWN && w->inflight[i])
				lease_lost(w, i);
		}
	}
	return w->stop == 2 ? (w->stop_code ? w->stop_code : PGO_ERR_INVALID)
			    : PGO_OK;
}

/* =========================== sql handler mode =========================== */

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

static int run_sql(pgo_worker_t *w)
{
	int n = w->o.concurrency;
	int64_t next_poll = 0, next_stats = 0;
	bool stop_logged = false;
	const char *params[6] = {w->queue, w->sql_function, w->batch_s,
				 w->max_s, w->base_s,	    w->cap_s};

	w->conns = calloc((size_t)n, sizeof(*w->conns));
	w->sio = calloc((size_t)n, sizeof(*w->sio));
	w->srevents = calloc((size_t)n, sizeof(*w->srevents));
	w->conn_more = calloc((size_t)n, sizeof(*w->conn_more));
	for (int i = 0; w->sio && w->srevents && i < n; i++)
		if (!(w->sio[i] = pgo_loop_io_add(w->loop, -1, 0, conn_io,
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
	conns_init(w, w->conns, n, &w->setup, &w->setup_quiet, 0);
	if (w->o.stats_interval_ms > 0)
		next_stats = pgo_now_ms() + w->o.stats_interval_ms;
	w->kick = true;
	for (;;) {
		int64_t now = pgo_now_ms(), deadline = 0;
		int busy = 0;
		bool due = w->kick || now >= next_poll ||
			   (w->sql_retry_at && now >= w->sql_retry_at);

		if (due) {
			next_poll = now + w->o.poll_interval_ms;
			if (w->sql_retry_at && now >= w->sql_retry_at)
				w->sql_retry_at = 0;
		}
		if (w->stop && !stop_logged) {
			pgo_log(PGO_LOG_INFO, w->subject,
				"stopping after the batches in flight");
			stop_logged = true;
		}
		for (int i = 0; i < n; i++) {
			pgo_conn_t *c = &w->conns[i];

			pgo_conn_kick(c, now);
			if (c->state == PGO_CONN_READY && !w->stop &&
			    (due || w->conn_more[i])) {
				pgo_conn_exec_prepared(c, "pgoutbox_work", 6,
						       params);
				pgo_conn_send(c);
			}
			if (c->state == PGO_CONN_BUSY ||
			    c->state == PGO_CONN_SETUP)
				busy++;
			if (c->state == PGO_CONN_DOWN)
				deadline =
					pgo_deadline_min(deadline, c->retry_at);
		}
		w->kick = false;
		if (w->stop && busy == 0)
			break;
		if (next_stats && now >= next_stats) {
			log_stats(w, "stats");
			next_stats = now + w->o.stats_interval_ms;
		}
		if (!w->stop)
			deadline = pgo_deadline_min(
				pgo_deadline_min(deadline, next_poll),
				w->sql_retry_at);
		if (next_stats)
			deadline = pgo_deadline_min(deadline, next_stats);
		if (turn(w, w->conns, w->sio, w->srevents, n, deadline) !=
		    PGO_OK)
			return PGO_ERR_IO;
		for (int i = 0; i < n; i++) {
			pgo_conn_t *c = &w->conns[i];
			pgo_conn_event_t ev = step_conn(w, c, &w->srevents[i]);

			if (ev == PGO_CONN_EV_FATAL)
				return w->stop_code ? w->stop_code
						    : PGO_ERR_SCHEMA;
			if (ev != PGO_CONN_EV_ROUND)
				continue;
			w->conn_more[i] = false;
			if (c->round.failed) {
				pgo_log(PGO_LOG_WARN, w->subject,
					"batch failed: %s", c->round.err);
				if (strcmp(c->round.sqlstate, "42883") == 0 ||
				    strcmp(c->round.sqlstate, "42P01") == 0) {
					snprintf(w->errmsg, sizeof(w->errmsg),
						 "%s", c->round.err);
					pgo_conn_round_clear(c);
					return PGO_ERR_CONFIG;
				}
			} else if (c->round.res[0] &&
				   PQntuples(c->round.res[0]) == 1) {
				PGresult *r = c->round.res[0];
				int claimed = atoi(PQgetvalue(r, 0, 0));
				int failed = atoi(PQgetvalue(r, 0, 2));
				int dead = atoi(PQgetvalue(r, 0, 3));

				w->stats.done +=
					(uint64_t)atoi(PQgetvalue(r, 0, 1));
				w->stats.failed += (uint64_t)failed;
				w->stats.dead += (uint64_t)dead;
				if (failed || dead)
					pgo_log(PGO_LOG_INFO, w->subject,
						"%d job(s) failed, %d "
						"dead-lettered",
						failed, dead);
				w->conn_more[i] = claimed >= w->o.batch;
				if (claimed > 0)
					w->kick = true; /* others may help */
			}
			pgo_conn_round_clear(c);
		}
	}
	return PGO_OK;
}

int pgo_worker_run(pgo_worker_t *w)
{
	pgo_pooler_t kind;
	int rc;

	pgo_log(PGO_LOG_INFO, w->subject,
		"started as %s, concurrency %d, lease %" PRId64 " ms", w->name,
		w->o.concurrency, w->o.lease_ms);
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
	rc = w->sql_function ? run_sql(w) : run_lease(w);
	log_stats(w, "stopped");
	return rc;
}
