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
 * Lease mode talks to PostgreSQL over one blocking connection: every
 * statement is a short single-statement transaction, and the loop never
 * waits on a child (exits arrive through pidfds, stderr through
 * non-blocking pipes).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"

extern char **environ;

#define MAX_CONCURRENCY 256
#define TAIL_MAX 2000     /* stderr kept per job for the error text */
#define REAP_TICK_MS 20   /* exit polling when pidfds are missing */

/* One running exec job. */
typedef struct job_run {
	bool used;
	int64_t id, epoch;
	int attempt;
	pid_t pid;
	int pidfd;        /* readable at exit; -1 when unsupported */
	int err_fd;       /* the child's stderr, non-blocking; -1 at EOF */
	bool exited;
	int status;       /* waitpid status */
	bool killed;      /* timed out: SIGKILL sent to the group */
	bool lost;        /* the lease is no longer ours */
	int64_t deadline; /* monotonic ms: kill after this */
	char tail[TAIL_MAX + 1];
	size_t tail_len;
} job_run_t;

struct pgo_worker {
	const pgo_conf_t *conf;
	pgo_worker_opts_t o;    /* strings below are our copies */
	char *queue, *name, *exec_command, *sql_function;
	char subject[160];
	char app_name[64];
	/* lease mode */
	PGconn *pg;             /* blocking; NULL while down */
	int64_t pg_retry_at, pg_backoff;
	bool pg_logged_down;
	job_run_t *jobs;        /* concurrency slots */
	int running;
	char claim_sql[1024], complete_sql[256], fail_sql[512], dead_sql[1024];
	char hb_sql[512], reap_sql[512], reap_dead_sql[1024], listen_sql[96];
	/* sql mode */
	pgo_conn_t *conns;
	bool *conn_more;
	pgo_conn_setup_t setup, setup_quiet;
	char work_sql[256];
	char batch_s[16], max_s[16], base_s[24], cap_s[24];
	/* common */
	int wake_pipe[2];
	volatile sig_atomic_t stop;
	pgo_worker_stats_t stats;
	int64_t next_retry;     /* earliest retry this worker scheduled */
	unsigned rnd;
	char errmsg[512];
};

void pgo_worker_opts_init(pgo_worker_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->concurrency = 1;
	o->batch = 100;
	o->lease_ms = 30000;
	o->timeout_ms = 25000;
	o->max_attempts = 10;
	o->retry_base_ms = 1000;
	o->retry_max_ms = 300000;
	o->poll_interval_ms = 5000;
	o->reap_interval_ms = 5000;
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
		} else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || *p == '_')) {
			return false;
		}
	}
	return true;
}

static void build_sql(pgo_worker_t *w)
{
	const char *q = w->queue;

	snprintf(w->claim_sql, sizeof(w->claim_sql),
		 "UPDATE pgoutbox.\"%s\" j SET locked_by = $1, "
		 "locked_until = now() + $2::bigint * interval '1 millisecond', "
		 "epoch = j.epoch + 1, attempts = j.attempts + 1 "
		 "WHERE j.id = ANY (ARRAY(SELECT id FROM pgoutbox.\"%s\" "
		 "WHERE run_at <= now() AND (locked_until IS NULL OR "
		 "locked_until < now()) AND attempts < $4::integer "
		 "ORDER BY priority DESC, id LIMIT $3::integer "
		 "FOR UPDATE SKIP LOCKED)) "
		 "RETURNING j.id, j.epoch, j.attempts, j.topic, j.key, j.payload",
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
		 "$1::integer AND (locked_until IS NULL OR locked_until < now()) "
		 "FOR UPDATE SKIP LOCKED)) RETURNING *) "
		 "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, "
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

pgo_worker_t *pgo_worker_new(const pgo_conf_t *conf,
			     const pgo_worker_opts_t *opts, pgo_error_t *err)
{
	pgo_worker_t *w;
	int handlers;
	char host[64];

	if (!conf || !opts) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no options given");
		return NULL;
	}
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
	if (opts->exec_command && opts->timeout_ms >= opts->lease_ms * 10) {
		/* Heartbeats keep the lease; only a sanity bound. */
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	w->conf = conf;
	w->o = *opts;
	w->wake_pipe[0] = w->wake_pipe[1] = -1;
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
	    (opts->sql_function && !w->sql_function) ||
	    pipe2(w->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		pgo_worker_destroy(w);
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	w->o.queue = w->queue;
	w->o.name = w->name;
	w->o.exec_command = w->exec_command;
	w->o.sql_function = w->sql_function;
	snprintf(w->subject, sizeof(w->subject), "worker %s %s", w->queue,
		 w->sql_function ? "sql" : w->exec_command ? "exec" : "callback");
	snprintf(w->app_name, sizeof(w->app_name), "pgoutbox worker %.40s",
		 w->name);
	w->rnd = (unsigned)getpid() ^ (unsigned)pgo_wall_us();
	w->pg_backoff = 100;
	build_sql(w);
	pgo_error_clear(err);
	return w;
}

void pgo_worker_destroy(pgo_worker_t *w)
{
	if (!w)
		return;
	if (w->pg)
		PQfinish(w->pg);
	if (w->conns) {
		for (int i = 0; i < w->o.concurrency; i++)
			pgo_conn_close(&w->conns[i]);
	}
	free(w->conns);
	free(w->conn_more);
	for (int i = 0; w->jobs && i < w->o.concurrency; i++) {
		if (w->jobs[i].pidfd >= 0 && w->jobs[i].used)
			close(w->jobs[i].pidfd);
		if (w->jobs[i].err_fd >= 0 && w->jobs[i].used)
			close(w->jobs[i].err_fd);
	}
	free(w->jobs);
	if (w->wake_pipe[0] >= 0)
		close(w->wake_pipe[0]);
	if (w->wake_pipe[1] >= 0)
		close(w->wake_pipe[1]);
	free(w->queue);
	free(w->name);
	free(w->exec_command);
	free(w->sql_function);
	free(w);
}

void pgo_worker_request_stop(pgo_worker_t *w)
{
	int saved = errno;

	w->stop = 1;
	if (w->wake_pipe[1] >= 0)
		(void)!write(w->wake_pipe[1], "s", 1);
	errno = saved;
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

static void drain_wake(pgo_worker_t *w)
{
	char buf[64];

	while (read(w->wake_pipe[0], buf, sizeof(buf)) > 0)
		;
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

static int64_t min_deadline(int64_t a, int64_t b)
{
	return a == 0 ? b : (b == 0 || a < b ? a : b);
}


static void pg_down(pgo_worker_t *w, const char *why)
{
	const struct pgo_conf_values *v = pgo_conf_values(w->conf);

	if (!w->pg_logged_down)
		pgo_log(PGO_LOG_WARN, w->subject,
			"database connection lost: %s; reconnecting with "
			"backoff",
			why);
	w->pg_logged_down = true;
	if (w->pg)
		PQfinish(w->pg);
	w->pg = NULL;
	w->pg_retry_at = pgo_now_ms() + w->pg_backoff;
	w->pg_backoff *= 2;
	if (w->pg_backoff > v->reconnect_max)
		w->pg_backoff = v->reconnect_max;
}

/* Connects (blocking, bounded by database.connect_timeout) and LISTENs. */
static void pg_connect(pgo_worker_t *w)
{
	const struct pgo_conf_values *v = pgo_conf_values(w->conf);
	char timeout[24], stmt[64];
	const char *keys[] = {"connect_timeout", "dbname", "application_name",
			      NULL};
	const char *vals[] = {timeout, v->db_url && *v->db_url ? v->db_url : NULL,
			      w->app_name, NULL};
	PGresult *res;
	pgo_error_t err;

	snprintf(timeout, sizeof(timeout), "%lld",
		 (long long)(v->connect_timeout + 999) / 1000);
	if (!vals[1]) {
		keys[1] = "application_name";
		vals[1] = w->app_name;
		keys[2] = NULL;
	}
	w->pg = PQconnectdbParams(keys, vals, 1);
	if (!w->pg || PQstatus(w->pg) != CONNECTION_OK) {
		pg_down(w, w->pg ? pgo_pq_msg(w->pg, NULL) : "out of memory");
		return;
	}
	if (pgo_schema_check(w->pg, &err) != PGO_OK) {
		pg_down(w, err.msg);
		return;
	}
	snprintf(stmt, sizeof(stmt), "SET statement_timeout = %lld",
		 (long long)v->statement_timeout);
	res = PQexec(w->pg, stmt);
	PQclear(res);
	res = PQexec(w->pg, w->listen_sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		pg_down(w, pgo_pq_msg(w->pg, res));
		PQclear(res);
		return;
	}
	PQclear(res);
	if (w->pg_logged_down)
		pgo_log(PGO_LOG_INFO, w->subject, "connected again");
	w->pg_logged_down = false;
	w->pg_backoff = 100;
	PQsetnonblocking(w->pg, 0);
}

/* Runs one statement; NULL when it failed (the connection is dropped when
 * it is gone; a statement error is logged). */
static PGresult *pg_run(pgo_worker_t *w, const char *what, const char *sql,
			int n, const char *const *params)
{
	PGresult *res;
	ExecStatusType st;

	if (!w->pg)
		return NULL;
	res = PQexecParams(w->pg, sql, n, NULL, params, NULL, NULL, 0);
	st = PQresultStatus(res);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return res;
	if (PQstatus(w->pg) == CONNECTION_BAD) {
		pg_down(w, pgo_pq_msg(w->pg, res));
	} else {
		const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		pgo_log(PGO_LOG_WARN, w->subject, "%s: %s", what,
			pgo_pq_msg(w->pg, res));
		/* A missing table will not come back by retrying fast. */
		if (code && strcmp(code, "42P01") == 0) {
			snprintf(w->errmsg, sizeof(w->errmsg),
				 "queue pgoutbox.%s does not exist (create it "
				 "with `pgoutbox queue create %s`)",
				 w->queue, w->queue);
			w->stop = 2;
		}
	}
	PQclear(res);
	return NULL;
}

static void tail_append(job_run_t *j, const char *p, size_t n)
{
	if (n >= TAIL_MAX) {
		memcpy(j->tail, p + n - TAIL_MAX, TAIL_MAX);
		j->tail_len = TAIL_MAX;
	} else {
		if (j->tail_len + n > TAIL_MAX) {
			size_t drop = j->tail_len + n - TAIL_MAX;

			memmove(j->tail, j->tail + drop, j->tail_len - drop);
			j->tail_len -= drop;
		}
		memcpy(j->tail + j->tail_len, p, n);
		j->tail_len += n;
	}
	j->tail[j->tail_len] = '\0';
}

static void drain_stderr(job_run_t *j)
{
	char buf[4096];

	while (j->err_fd >= 0) {
		ssize_t n = read(j->err_fd, buf, sizeof(buf));

		if (n > 0) {
			tail_append(j, buf, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		close(j->err_fd);
		j->err_fd = -1;
	}
}

static void check_exit(job_run_t *j)
{
	int status;
	pid_t r;

	if (j->exited)
		return;
	r = waitpid(j->pid, &status, WNOHANG);
	if (r == j->pid || (r < 0 && errno == ECHILD)) {
		j->exited = true;
		j->status = r == j->pid ? status : 0;
		if (j->pidfd >= 0)
			close(j->pidfd);
		j->pidfd = -1;
	}
}

/* Starts sh -c CMD for a claimed job: payload on stdin (a memfd, so
 * nothing blocks however large it is), stderr to a pipe, own group. */
static int spawn_job(pgo_worker_t *w, job_run_t *j, const char *payload)
{
	static const int reset[] = {SIGPIPE, SIGTERM, SIGHUP, SIGINT,
				    SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2};
	char *argv[] = {"sh", "-c", w->exec_command, NULL};
	char v_id[48], v_att[48], v_q[96];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl, none;
	int errp[2] = {-1, -1}, in = -1, rc;
	size_t n = 0, len = strlen(payload), o = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = malloc((n + 4) * sizeof(*env));
	if (!env)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PGOUTBOX_JOB_", 13) != 0 &&
		    strncmp(environ[i], "PGOUTBOX_QUEUE=", 15) != 0)
			env[o++] = environ[i];
	snprintf(v_id, sizeof(v_id), "PGOUTBOX_JOB_ID=%" PRId64, j->id);
	snprintf(v_att, sizeof(v_att), "PGOUTBOX_JOB_ATTEMPT=%d", j->attempt);
	snprintf(v_q, sizeof(v_q), "PGOUTBOX_QUEUE=%s", w->queue);
	env[o++] = v_id;
	env[o++] = v_att;
	env[o++] = v_q;
	env[o] = NULL;

	in = memfd_create("pgoutbox-job", MFD_CLOEXEC);
	if (in < 0) {
		free(env);
		return errno;
	}
	for (size_t off = 0; off < len;) {
		ssize_t k = write(in, payload + off, len - off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = errno ? errno : EIO;
			close(in);
			free(env);
			return rc;
		}
		off += (size_t)k;
	}
	lseek(in, 0, SEEK_SET);
	if (pipe2(errp, O_CLOEXEC) != 0) {
		rc = errno;
		close(in);
		free(env);
		return rc;
	}
	sigemptyset(&none);
	sigemptyset(&dfl);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		sigaddset(&dfl, reset[i]);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_init(&fa);
	rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
						     POSIX_SPAWN_SETSIGDEF |
						     POSIX_SPAWN_SETSIGMASK);
	if (!rc)
		rc = posix_spawnattr_setpgroup(&attr, 0);
	if (!rc)
		rc = posix_spawnattr_setsigdefault(&attr, &dfl);
	if (!rc)
		rc = posix_spawnattr_setsigmask(&attr, &none);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, errp[1],
						      STDERR_FILENO);
	if (!rc)
		rc = posix_spawn(&j->pid, "/bin/sh", &fa, &attr, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(env);
	close(in);
	close(errp[1]);
	if (rc != 0) {
		close(errp[0]);
		return rc;
	}
	j->err_fd = errp[0];
	fcntl(j->err_fd, F_SETFL, fcntl(j->err_fd, F_GETFL) | O_NONBLOCK);
#ifdef SYS_pidfd_open
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
#else
	j->pidfd = -1;
#endif
	return 0;
}

/* The error text of a failed job: the reason, then the stderr tail. */
static void job_error(const job_run_t *j, const char *reason, char *out,
		      size_t size)
{
	size_t len = j->tail_len;

	while (len > 0 && (j->tail[len - 1] == '\n' || j->tail[len - 1] == ' '))
		len--;
	if (len)
		snprintf(out, size, "%s; stderr: %.*s", reason, (int)len,
			 j->tail);
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

/* Records a job's outcome: complete (DELETE while the epoch is ours),
 * retry after a backoff, or dead letters after max_attempts. */
static void settle(pgo_worker_t *w, int64_t id, int64_t epoch, int attempt,
		   bool ok, const char *error)
{
	char ids[24], eps[24], delay[24];
	const char *p[4] = {ids, eps, NULL, NULL};
	PGresult *res;
	bool dead = !ok && attempt >= w->o.max_attempts;
	char line[TAIL_MAX + 600];

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	snprintf(eps, sizeof(eps), "%" PRId64, epoch);
	if (ok) {
		res = pg_run(w, "completing a job", w->complete_sql, 2, p);
	} else if (dead) {
		p[2] = error;
		res = pg_run(w, "dead-lettering a job", w->dead_sql, 3, p);
	} else {
		snprintf(delay, sizeof(delay), "%" PRId64,
			 pgo_backoff_ms(attempt, w->o.retry_base_ms,
					w->o.retry_max_ms, jitter(w)));
		p[2] = delay;
		p[3] = error;
		res = pg_run(w, "failing a job", w->fail_sql, 4, p);
		w->next_retry = min_deadline(w->next_retry,
					     pgo_now_ms() + atoll(delay));
	}
	if (!res) {
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 ": its outcome could not be recorded; "
			"it runs again when its lease expires",
			id);
		return;
	}
	one_line(error, line, sizeof(line));
	if (strcmp(PQcmdTuples(res), "0") == 0) {
		w->stats.lost++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " epoch %" PRId64 ": lease lost (expired "
			"and taken over); its %s is not recorded",
			id, epoch, ok ? "completion" : "failure");
	} else if (ok) {
		w->stats.done++;
		pgo_log(PGO_LOG_DEBUG, w->subject, "job %" PRId64 " done", id);
	} else if (dead) {
		w->stats.dead++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " dead-lettered after %d attempts: %s",
			id, attempt, line);
	} else {
		w->stats.failed++;
		pgo_log(PGO_LOG_INFO, w->subject,
			"job %" PRId64 " attempt %d failed, retried after %s "
			"ms: %s",
			id, attempt, delay, line);
	}
	PQclear(res);
}

static void finish_job(pgo_worker_t *w, job_run_t *j)
{
	char reason[128], error[TAIL_MAX + 160];
	bool ok = false;

	drain_stderr(j);
	if (j->err_fd >= 0)
		close(j->err_fd);
	j->err_fd = -1;
	if (j->killed)
		snprintf(reason, sizeof(reason),
			 "timed out after %" PRId64 " ms (process group killed)",
			 w->o.timeout_ms);
	else if (WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0)
		ok = true;
	else if (WIFEXITED(j->status))
		snprintf(reason, sizeof(reason), "exit status %d",
			 WEXITSTATUS(j->status));
	else if (WIFSIGNALED(j->status))
		snprintf(reason, sizeof(reason), "killed by signal %d",
			 WTERMSIG(j->status));
	else
		snprintf(reason, sizeof(reason), "ended abnormally");
	if (j->lost) {
		w->stats.lost++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " ended after its lease was lost; not "
			"recorded",
			j->id);
	} else {
		if (!ok)
			job_error(j, reason, error, sizeof(error));
		settle(w, j->id, j->epoch, j->attempt, ok, ok ? NULL : error);
	}
	memset(j, 0, sizeof(*j));
	j->pidfd = j->err_fd = -1;
	w->running--;
}

/* Claims up to n jobs; returns how many (or -1 on error).  Exec: each is
 * spawned at once.  Callback: run right here, one at a time. */
static int claim(pgo_worker_t *w, int n)
{
	char lease[24], lim[16], max[16];
	const char *p[4] = {w->name, lease, lim, max};
	PGresult *res;
	int got;

	snprintf(lease, sizeof(lease), "%" PRId64, w->o.lease_ms);
	snprintf(lim, sizeof(lim), "%d", n);
	snprintf(max, sizeof(max), "%d", w->o.max_attempts);
	res = pg_run(w, "claiming jobs", w->claim_sql, 4, p);
	if (!res)
		return -1;
	got = PQntuples(res);
	for (int r = 0; r < got; r++) {
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
			int hr = w->o.handler(w->o.handler_ctx, &job, errbuf,
					      sizeof(errbuf));

			if (hr != 0 && !errbuf[0])
				snprintf(errbuf, sizeof(errbuf),
					 "handler returned %d", hr);
			settle(w, id, epoch, attempt, hr == 0,
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
			j->id = id;
			j->epoch = epoch;
			j->attempt = attempt;
			j->pidfd = j->err_fd = -1;
			j->deadline = pgo_now_ms() + w->o.timeout_ms;
			w->running++;
			rc = spawn_job(w, j, payload);
			if (rc != 0) {
				char msg[160];

				snprintf(msg, sizeof(msg),
					 "cannot start the command: %s",
					 strerror(rc));
				memset(j, 0, sizeof(*j));
				j->pidfd = j->err_fd = -1;
				w->running--;
				settle(w, id, epoch, attempt, false, msg);
			}
			break;
		}
	}
	PQclear(res);
	return got;
}

/* Extends the leases of the running jobs; jobs whose lease is gone are
 * killed (someone else may run them now). */
static void heartbeat(pgo_worker_t *w)
{
	pgo_buf_t ids, eps;
	char lease[24];
	const char *p[4];
	PGresult *res;

	if (w->running == 0)
		return;
	pgo_buf_init(&ids);
	pgo_buf_init(&eps);
	pgo_buf_puts(&ids, "{");
	pgo_buf_puts(&eps, "{");
	for (int s = 0; s < w->o.concurrency; s++) {
		job_run_t *j = &w->jobs[s];

		if (!j->used || j->lost || j->exited)
			continue;
		pgo_buf_printf(&ids, "%s%" PRId64, ids.len > 1 ? "," : "",
			       j->id);
		pgo_buf_printf(&eps, "%s%" PRId64, eps.len > 1 ? "," : "",
			       j->epoch);
	}
	pgo_buf_puts(&ids, "}");
	pgo_buf_puts(&eps, "}");
	snprintf(lease, sizeof(lease), "%" PRId64, w->o.lease_ms);
	p[0] = w->name;
	p[1] = lease;
	p[2] = ids.data;
	p[3] = eps.data;
	res = ids.oom || eps.oom ? NULL
				 : pg_run(w, "heartbeat", w->hb_sql, 4, p);
	if (res) {
		for (int s = 0; s < w->o.concurrency; s++) {
			job_run_t *j = &w->jobs[s];
			bool live = false;

			if (!j->used || j->lost || j->exited)
				continue;
			for (int r = 0; r < PQntuples(res); r++)
				if (strtoll(PQgetvalue(res, r, 0), NULL, 10) ==
				    j->id)
					live = true;
			if (!live) {
				j->lost = true;
				pgo_log(PGO_LOG_WARN, w->subject,
					"job %" PRId64 " epoch %" PRId64
					": lease lost; killing its process "
					"group",
					j->id, j->epoch);
				if (kill(-j->pid, SIGKILL) < 0)
					kill(j->pid, SIGKILL);
			}
		}
		PQclear(res);
	}
	pgo_buf_free(&ids);
	pgo_buf_free(&eps);
}

/* Returns expired leases and dead-letters jobs out of attempts. */
static void reap(pgo_worker_t *w)
{
	char max[16];
	const char *p[1] = {max};
	PGresult *res = pg_run(w, "reaping expired leases", w->reap_sql, 0,
			       NULL);

	if (res) {
		int n = PQntuples(res);

		if (n > 0) {
			w->stats.reaped += (uint64_t)n;
			pgo_log(PGO_LOG_WARN, w->subject,
				"returned %d expired lease%s (first: job %s "
				"of %s)",
				n, n == 1 ? "" : "s", PQgetvalue(res, 0, 0),
				PQgetisnull(res, 0, 1) ? "?"
						       : PQgetvalue(res, 0, 1));
		}
		PQclear(res);
	}
	snprintf(max, sizeof(max), "%d", w->o.max_attempts);
	res = pg_run(w, "dead-lettering lost jobs", w->reap_dead_sql, 1, p);
	if (res) {
		if (strcmp(PQcmdTuples(res), "0") != 0)
			pgo_log(PGO_LOG_WARN, w->subject,
				"dead-lettered %s job(s) whose last attempt's "
				"lease expired",
				PQcmdTuples(res));
		PQclear(res);
	}
}

static int run_lease(pgo_worker_t *w)
{
	int n = w->o.concurrency;
	struct pollfd *pfd = calloc((size_t)(2 + 2 * n), sizeof(*pfd));
	int64_t next_poll = 0, next_hb = 0, next_reap = 0, next_stats = 0;
	bool kick = true, stop_logged = false;

	if (!pfd) {
		snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
		return PGO_ERR_NOMEM;
	}
	if (w->o.stats_interval_ms > 0)
		next_stats = pgo_now_ms() + w->o.stats_interval_ms;
	for (;;) {
		int64_t now = pgo_now_ms(), deadline = 0;
		int np = 0, timeout;

		if (w->stop == 2) {
			free(pfd);
			return PGO_ERR_INVALID;
		}
		if (w->stop && !stop_logged) {
			pgo_log(PGO_LOG_INFO, w->subject,
				"stopping: claiming no more, %d job(s) still "
				"running",
				w->running);
			stop_logged = true;
		}
		if (w->stop && w->running == 0)
			break;
		if (!w->pg && now >= w->pg_retry_at) {
			pg_connect(w);
			kick = true;
		}
		if (w->pg && !w->stop && now >= next_reap) {
			reap(w);
			next_reap = now + w->o.reap_interval_ms;
		}
		if (w->pg && w->running > 0 && now >= next_hb) {
			heartbeat(w);
			next_hb = now + w->o.lease_ms / 3;
		}
		while (w->pg && !w->stop && w->running < n &&
		       (kick || now >= next_poll)) {
			/* A callback runs a claimed batch one job after the
			 * other: the lease must cover the whole batch. */
			int want = w->o.handler ? w->o.batch : n - w->running;
			int got = claim(w, want);

			if (got < 0)
				break;
			if (w->running == got && got > 0)
				next_hb = now + w->o.lease_ms / 3;
			kick = got == want;
			if (!kick)
				next_poll = now + w->o.poll_interval_ms;
			if (w->o.handler)
				now = pgo_now_ms();
			if (w->o.handler && w->stop)
				break;
		}
		if (w->next_retry && w->next_retry < next_poll) {
			next_poll = w->next_retry;
			w->next_retry = 0;
		}
		if (next_stats && now >= next_stats) {
			log_stats(w, "stats");
			next_stats = now + w->o.stats_interval_ms;
		}
		/* Timeouts: kill the whole process group. */
		for (int s = 0; s < n; s++) {
			job_run_t *j = &w->jobs[s];

			if (!j->used || j->exited)
				continue;
			if (!j->killed && now >= j->deadline) {
				j->killed = true;
				w->stats.timeouts++;
				pgo_log(PGO_LOG_WARN, w->subject,
					"job %" PRId64 " timed out after %" PRId64
					" ms: killing its process group",
					j->id, w->o.timeout_ms);
				if (kill(-j->pid, SIGKILL) < 0)
					kill(j->pid, SIGKILL);
			}
			if (!j->killed)
				deadline = min_deadline(deadline, j->deadline);
		}

		pfd[np++] = (struct pollfd){.fd = w->wake_pipe[0],
					    .events = POLLIN};
		if (w->pg)
			pfd[np++] = (struct pollfd){.fd = PQsocket(w->pg),
						    .events = POLLIN};
		for (int s = 0; s < n; s++) {
			job_run_t *j = &w->jobs[s];

			if (!j->used)
				continue;
			if (j->err_fd >= 0)
				pfd[np++] = (struct pollfd){.fd = j->err_fd,
							    .events = POLLIN};
			if (j->pidfd >= 0 && !j->exited)
				pfd[np++] = (struct pollfd){.fd = j->pidfd,
							    .events = POLLIN};
			if (j->pidfd < 0 && !j->exited)
				deadline = min_deadline(deadline,
							now + REAP_TICK_MS);
		}
		if (!w->pg)
			deadline = min_deadline(deadline, w->pg_retry_at);
		else if (!w->stop) {
			if (w->running < n)
				deadline = min_deadline(deadline, next_poll);
			deadline = min_deadline(deadline, next_reap);
		}
		if (w->pg && w->running > 0)
			deadline = min_deadline(deadline, next_hb);
		if (next_stats)
			deadline = min_deadline(deadline, next_stats);
		timeout = deadline == 0 ? 1000
			  : deadline <= now ? 0
					    : (int)(deadline - now);
		if (timeout > 1000)
			timeout = 1000;
		if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR) {
			snprintf(w->errmsg, sizeof(w->errmsg), "poll: %s",
				 strerror(errno));
			free(pfd);
			return PGO_ERR_IO;
		}
		drain_wake(w);
		if (w->pg) {
			PGnotify *nt;

			if (!PQconsumeInput(w->pg)) {
				pg_down(w, pgo_pq_msg(w->pg, NULL));
			} else {
				while ((nt = PQnotifies(w->pg)) != NULL) {
					kick = true;
					PQfreemem(nt);
				}
			}
		}
		for (int s = 0; s < n; s++) {
			job_run_t *j = &w->jobs[s];

			if (!j->used)
				continue;
			drain_stderr(j);
			check_exit(j);
			if (j->exited) {
				finish_job(w, j);
				kick = true;
			}
		}
	}
	free(pfd);
	return PGO_OK;
}

/* =========================== sql handler mode =========================== */

static int run_sql(pgo_worker_t *w)
{
	int n = w->o.concurrency;
	struct pollfd *pfd = calloc((size_t)(n + 1), sizeof(*pfd));
	int64_t next_poll = 0, next_stats = 0;
	bool kick = true, stop_logged = false;
	const char *params[6] = {w->queue, w->sql_function, w->batch_s,
				 w->max_s, w->base_s, w->cap_s};

	w->conns = calloc((size_t)n, sizeof(*w->conns));
	w->conn_more = calloc((size_t)n, sizeof(*w->conn_more));
	if (!pfd || !w->conns || !w->conn_more) {
		free(pfd);
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
	};
	w->setup_quiet = w->setup;
	w->setup_quiet.sql[0] = NULL;
	for (int i = 0; i < n; i++)
		pgo_conn_init(&w->conns[i], w->conf,
			      i == 0 ? &w->setup : &w->setup_quiet);
	if (w->o.stats_interval_ms > 0)
		next_stats = pgo_now_ms() + w->o.stats_interval_ms;

	for (;;) {
		int64_t now = pgo_now_ms(), deadline = 0;
		int busy = 0, timeout;
		bool due = kick || now >= next_poll;

		if (due)
			next_poll = now + w->o.poll_interval_ms;
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
				deadline = min_deadline(deadline, c->retry_at);
		}
		kick = false;
		if (w->stop && busy == 0)
			break;
		if (next_stats && now >= next_stats) {
			log_stats(w, "stats");
			next_stats = now + w->o.stats_interval_ms;
		}
		pfd[0] = (struct pollfd){.fd = w->wake_pipe[0], .events = POLLIN};
		for (int i = 0; i < n; i++)
			pgo_conn_pollfd(&w->conns[i], &pfd[i + 1]);
		if (!w->stop)
			deadline = min_deadline(deadline, next_poll);
		if (next_stats)
			deadline = min_deadline(deadline, next_stats);
		timeout = deadline == 0 ? 1000
			  : deadline <= now ? 0
					    : (int)(deadline - now);
		if (timeout > 1000)
			timeout = 1000;
		if (poll(pfd, (nfds_t)(n + 1), timeout) < 0 && errno != EINTR) {
			snprintf(w->errmsg, sizeof(w->errmsg), "poll: %s",
				 strerror(errno));
			free(pfd);
			return PGO_ERR_IO;
		}
		drain_wake(w);
		for (int i = 0; i < n; i++) {
			pgo_conn_t *c = &w->conns[i];
			pgo_conn_event_t ev = pgo_conn_step(c, pfd[i + 1].revents);

			if (c->notifies) {
				c->notifies = 0;
				kick = true;
			}
			if (ev == PGO_CONN_EV_FATAL) {
				snprintf(w->errmsg, sizeof(w->errmsg), "%s",
					 c->fatal.msg);
				free(pfd);
				return PGO_ERR_SCHEMA;
			}
			if (ev == PGO_CONN_EV_READY)
				kick = true;
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
					free(pfd);
					return PGO_ERR_INVALID;
				}
			} else if (c->round.res[0] &&
				   PQntuples(c->round.res[0]) == 1) {
				PGresult *r = c->round.res[0];
				int claimed = atoi(PQgetvalue(r, 0, 0));
				int failed = atoi(PQgetvalue(r, 0, 2));
				int dead = atoi(PQgetvalue(r, 0, 3));

				w->stats.done += (uint64_t)atoi(PQgetvalue(r, 0, 1));
				w->stats.failed += (uint64_t)failed;
				w->stats.dead += (uint64_t)dead;
				if (failed &&
				    now + w->o.retry_base_ms / 2 < next_poll)
					next_poll = now + w->o.retry_base_ms / 2;
				if (failed || dead)
					pgo_log(PGO_LOG_INFO, w->subject,
						"%d job(s) failed, %d "
						"dead-lettered",
						failed, dead);
				w->conn_more[i] = claimed >= w->o.batch;
				if (claimed > 0)
					kick = true; /* others may help */
			}
			pgo_conn_round_clear(c);
		}
	}
	free(pfd);
	return PGO_OK;
}

int pgo_worker_run(pgo_worker_t *w)
{
	int rc;

	pgo_log(PGO_LOG_INFO, w->subject,
		"started as %s, concurrency %d, lease %" PRId64 " ms", w->name,
		w->o.concurrency, w->o.lease_ms);
	rc = w->sql_function ? run_sql(w) : run_lease(w);
	log_stats(w, "stopped");
	return rc;
}
