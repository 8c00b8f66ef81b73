/*
 * cmd_worker.c — `pgoutbox worker`: drains a work queue with an exec or a
 * sql handler until SIGTERM.
 *
 * SIGTERM and SIGINT stop claiming, let running jobs finish (up to
 * --timeout), record them and exit 0.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "conf/conf.h"
#include "pgoutbox.h"

static pgo_worker_t *running;

static void on_stop(int sig)
{
	(void)sig;
	if (running)
		pgo_worker_request_stop(running);
}

static const char *const flags[] = {"--db", "--db-file", "--log-level",
				    "--metrics-listen", NULL};

static bool dur(const char *flag, const char *text, int64_t *ms)
{
	const char *why = NULL;

	if (!text)
		return true;
	if (pgo_parse_duration(text, ms, &why) != PGO_OK) {
		cli_error("worker", "%s \"%s\": %s", flag, text,
			  why ? why : "not a duration (like 250ms, 30s, 5m)");
		return false;
	}
	return true;
}

static bool num(const char *flag, const char *text, int lo, int hi, int *out)
{
	long long v;

	if (!text)
		return true;
	if (cli_parse_int("worker", flag, text, lo, hi, &v))
		return false;
	*out = (int)v;
	return true;
}

void cli_worker_opts(const pgo_conf_t *conf, pgo_worker_opts_t *o)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);

	pgo_worker_opts_init(o, sizeof(*o));
	o->queue = v->worker_queue && *v->worker_queue ? v->worker_queue : NULL;
	o->exec_command =
		v->worker_exec && *v->worker_exec ? v->worker_exec : NULL;
	o->sql_function =
		v->worker_sql && *v->worker_sql ? v->worker_sql : NULL;
	o->concurrency = v->worker_concurrency;
	o->batch = v->worker_batch;
	o->lease_ms = v->worker_lease;
	o->timeout_ms = v->worker_timeout;
	o->max_attempts = v->worker_max_attempts;
	o->retry_base_ms = v->worker_retry_base;
	o->retry_max_ms = v->worker_retry_max;
	o->poll_interval_ms = v->worker_poll_interval;
}

/* The options of `pgoutbox worker`, as given; each overrides its
 * [worker] key. */
static struct {
	const char *queue, *exec, *sql, *name;
	const char *concurrency, *batch, *max_attempts;	      /* numbers */
	const char *lease, *timeout, *retry_base, *retry_max; /* durations */
	const char *poll_interval, *reap_interval, *stats_interval;
} opt;

static const cli_opt_t opts[] = {
	{"--queue", "NAME", "work queue to drain (required)", &opt.queue, NULL},
	{"--exec", "CMD",
	 "handler: sh -c CMD per job, payload on stdin, "
	 "exit 0 = done",
	 &opt.exec, NULL},
	{"--sql", "FUNC",
	 "handler: FUNC(payload jsonb) in the claim "
	 "transaction",
	 &opt.sql, NULL},
	{"--concurrency", "N",
	 "jobs at once (exec) or connections "
	 "(sql); default 1",
	 &opt.concurrency, NULL},
	{"--batch", "N", "sql: jobs per transaction (default 100)", &opt.batch,
	 NULL},
	{"--lease", "DUR",
	 "exec: lease length, heartbeat every third "
	 "(default 30s)",
	 &opt.lease, NULL},
	{"--timeout", "DUR",
	 "exec: kill the job's process group after "
	 "(default 25s)",
	 &opt.timeout, NULL},
	{"--max-attempts", "N", "then dead letters (default 10)",
	 &opt.max_attempts, NULL},
	{"--retry-base", "DUR", "first backoff, doubling (default 1s)",
	 &opt.retry_base, NULL},
	{"--retry-max", "DUR", "backoff ceiling (default 5m)", &opt.retry_max,
	 NULL},
	{"--poll-interval", "DUR",
	 "poll when no wake-up came "
	 "(default 5s)",
	 &opt.poll_interval, NULL},
	{"--reap-interval", "DUR",
	 "return expired leases this often "
	 "(default 5s)",
	 &opt.reap_interval, NULL},
	{"--stats-interval", "DUR", "log a stats line (default off)",
	 &opt.stats_interval, NULL},
	{"--name", "NAME", "locked_by of this worker (default host-pid)",
	 &opt.name, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static const cli_cmd_t cmd = {
	.name = "worker",
	.usage = "usage: pgoutbox worker --queue NAME (--exec CMD | "
		 "--sql FUNC) [--concurrency N] [options]",
	.summary = "Runs the jobs of a work queue until SIGTERM.",
	.details = "--exec: each job is leased (locked_by, locked_until, "
		   "a "
		   "new epoch) in a short\ntransaction, then runs as "
		   "`sh -c CMD` in its own process group with "
		   "the\npayload "
		   "on stdin and PGOUTBOX_JOB_ID, PGOUTBOX_JOB_ATTEMPT, "
		   "PGOUTBOX_QUEUE set.\nExit 0 completes it; anything "
		   "else "
		   "retries it after a backoff, with the\nstderr tail as "
		   "its error, and after --max-attempts it goes to dead "
		   "letters.\nA job whose lease expired (its worker died "
		   "or froze) runs again elsewhere;\nthe old worker "
		   "cannot "
		   "complete it then (the epoch fences it).\n"
		   "--sql: FUNC(payload jsonb) runs inside the "
		   "transaction "
		   "that claims and\ndeletes the job: its effects commit "
		   "exactly once.\nSIGTERM stops claiming, lets running "
		   "jobs finish and exits 0.",
	.opts = opts,
	.flags = flags,
};

/* The worker's options: the [worker] keys, then the flags; false (the
 * error printed) when one is missing or malformed. */
static bool worker_opts(const pgo_conf_t *conf, pgo_worker_opts_t *o)
{
	cli_worker_opts(conf, o);
	if (opt.queue)
		o->queue = opt.queue;
	if (opt.exec || opt.sql) { /* a flag's handler replaces the file's */
		o->exec_command = opt.exec;
		o->sql_function = opt.sql;
	}
	o->name = opt.name;
	if (!o->queue) {
		cli_error("worker", "--queue is required");
		return false;
	}
	return num("--concurrency", opt.concurrency, 1, 256, &o->concurrency) &&
	       num("--batch", opt.batch, 1, 10000, &o->batch) &&
	       num("--max-attempts", opt.max_attempts, 1, 1000,
		   &o->max_attempts) &&
	       dur("--lease", opt.lease, &o->lease_ms) &&
	       dur("--timeout", opt.timeout, &o->timeout_ms) &&
	       dur("--retry-base", opt.retry_base, &o->retry_base_ms) &&
	       dur("--retry-max", opt.retry_max, &o->retry_max_ms) &&
	       dur("--poll-interval", opt.poll_interval,
		   &o->poll_interval_ms) &&
	       dur("--reap-interval", opt.reap_interval,
		   &o->reap_interval_ms) &&
	       dur("--stats-interval", opt.stats_interval,
		   &o->stats_interval_ms);
}

int cmd_worker(int argc, char **argv)
{
	const struct sigaction stop = {.sa_handler = on_stop};
	pgo_worker_opts_t o;
	pgo_worker_t *w;
	pgo_error_t err;
	bool done;
	cli_t cli;
	int rc;

	cli_catch_signals_early(false);
	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (!worker_opts(cli.conf, &o)) {
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	w = pgo_worker_new(cli.conf, &o, &err);
	if (!w) {
		cli_error("worker", "%s", err.msg);
		cli_free(&cli);
		return EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	running = w;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	if (cli_stop_early)
		pgo_worker_request_stop(w);
	rc = pgo_worker_run(w);
	running = NULL;
	if (rc != PGO_OK)
		cli_error("worker", "%s", pgo_worker_errmsg(w));
	pgo_worker_destroy(w);
	cli_free(&cli);
	/* A refusal at start (a queue of the wrong kind, the ordered modes
	 * through a transaction pooler, no such database or queue, never
	 * migrated) is configuration. */
	return cli_exit_code(rc);
}
