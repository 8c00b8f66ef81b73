/*
 * cmd_run.c — `pgoutbox run --config FILE`: the relay, a worker and a cron
 * scheduler from one configuration, each in a child process supervised
 * here.
 *
 * The relay runs unless --no-relay; the worker when worker.queue is set;
 * the scheduler when cron.enabled is on.  A child that dies is restarted
 * after a second.  SIGTERM/SIGINT are forwarded to every child, which
 * finishes its work in flight; run exits 0 when all of them did.  SIGHUP
 * is forwarded to the relay (configuration reload).  With metrics.listen
 * host:PORT the relay serves its metrics on PORT, the worker on PORT+1 and
 * the scheduler on PORT+2.  Under systemd (Type=notify) the first of them
 * sends READY=1, STOPPING=1 and the watchdog's WATCHDOG=1.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pgo_int.h"

enum { ROLE_RELAY, ROLE_WORKER, ROLE_CRON, NROLES };
static const char *const role_names[NROLES] = {"relay", "worker", "cron"};

static volatile sig_atomic_t got_stop, got_hup;
/* The library object a child runs, for its signal handler. */
static pgo_relay_t *child_relay;
static pgo_worker_t *child_worker;
static pgo_scheduler_t *child_cron;

static void on_parent(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_stop = 1;
}

static void on_child(int sig)
{
	if (sig == SIGHUP) {
		if (child_relay)
			pgo_relay_request_reload(child_relay);
		return;
	}
	if (child_relay)
		pgo_relay_request_stop(child_relay);
	if (child_worker)
		pgo_worker_request_stop(child_worker);
	if (child_cron)
		pgo_scheduler_request_stop(child_cron);
}

/* metrics.listen "host:PORT" becomes "host:PORT+role" in each child (the
 * relay on PORT, the worker on PORT+1, the scheduler on PORT+2): one
 * process, one endpoint. */
static void child_listen(int role, pgo_conf_t *conf)
{
	const char *base = pgo_conf_get(conf, "metrics.listen");
	const char *colon = base ? strrchr(base, ':') : NULL;
	char addr[300];
	int port;

	if (!colon || role == 0)
		return;
	port = atoi(colon + 1);
	if (port <= 0)
		return; /* port 0 or garbage: each child as given */
	snprintf(addr, sizeof(addr), "%.*s:%d", (int)(colon - base), base,
		 port + role);
	pgo_conf_set(conf, "metrics.listen", addr, PGO_CONF_FLAG,
		     "--metrics-listen");
}

/* The one child that speaks systemd's notify protocol (the first role
 * started): READY=1 once it is connected, its loop feeds the watchdog.
 * The unit needs NotifyAccess=all (contrib/systemd/pgoutbox@.service). */
static int notify_role = -1;

static void child_notify(int role)
{
	char pid[24];

	if (role != notify_role) {
		unsetenv("NOTIFY_SOCKET");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		return;
	}
	/* systemd named the parent; sd_watchdog_enabled() checks the pid. */
	if (getenv("WATCHDOG_PID")) {
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		setenv("WATCHDOG_PID", pid, 1);
	}
}

static int child_main(int role, pgo_conf_t *conf)
{
	const struct sigaction sa = {.sa_handler = on_child};
	pgo_error_t err;
	int rc = PGO_OK;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	child_listen(role, conf);
	child_notify(role);
	if (role == ROLE_RELAY && !*pgo_conf_get(conf, "relay.name")) {
		char name[96], host[64];

		if (gethostname(host, sizeof(host)) != 0)
			strcpy(host, "relay");
		host[sizeof(host) - 1] = '\0';
		snprintf(name, sizeof(name), "%s-%d", host, (int)getpid());
		pgo_conf_set(conf, "relay.name", name, PGO_CONF_FLAG, "--name");
	}
	if (role == ROLE_RELAY) {
		pgo_sink_t *sink = pgo_sink_new(
			pgo_conf_get(conf, "relay.sink"), conf, &err);

		if (!sink) {
			cli_error("run", "relay: %s", err.msg);
			return EXIT_USAGE;
		}
		child_relay = pgo_relay_new(conf, sink, &err);
		if (!child_relay) {
			cli_error("run", "relay: %s", err.msg);
			pgo_sink_destroy(sink);
			return err.code == PGO_ERR_NOMEM ? EXIT_FAIL
							 : EXIT_USAGE;
		}
		rc = pgo_relay_run(child_relay);
		if (rc != PGO_OK)
			cli_error("run", "relay: %s",
				  pgo_relay_errmsg(child_relay));
		pgo_relay_destroy(child_relay);
		pgo_sink_destroy(sink);
	} else if (role == ROLE_WORKER) {
		pgo_worker_opts_t o;

		cli_worker_opts(conf, &o);
		child_worker = pgo_worker_new(conf, &o, &err);
		if (!child_worker) {
			cli_error("run", "worker: %s", err.msg);
			return EXIT_USAGE;
		}
		rc = pgo_worker_run(child_worker);
		if (rc != PGO_OK)
			cli_error("run", "worker: %s",
				  pgo_worker_errmsg(child_worker));
		pgo_worker_destroy(child_worker);
	} else {
		const struct pgo_conf_values *v = pgo_conf_values(conf);
		pgo_scheduler_opts_t o;

		pgo_scheduler_opts_init(&o, sizeof(o));
		o.grace_ms = v->cron_grace;
		o.history_keep_ms = v->cron_history_keep;
		child_cron = pgo_scheduler_new(conf, &o, &err);
		if (!child_cron) {
			cli_error("run", "cron: %s", err.msg);
			return EXIT_USAGE;
		}
		rc = pgo_scheduler_run(child_cron);
		pgo_scheduler_destroy(child_cron);
	}
	/* EXIT_USAGE: run stops instead of restarting the child (a queue
	 * or database that does not exist, a schema never migrated, a
	 * queue of the wrong kind, relays of another mode on the queue),
	 * as `pgoutbox relay` and `worker` exit 2 for them. */
	return rc == PGO_OK				       ? EXIT_OK
	       : rc == PGO_ERR_CONFIG || rc == PGO_ERR_INVALID ? EXIT_USAGE
							       : EXIT_FAIL;
}

static pid_t start(int role, pgo_conf_t *conf)
{
	pid_t pid = fork();

	if (pid == 0) {
		int rc = child_main(role, conf);

		fflush(NULL);
		_exit(rc);
	}
	if (pid < 0)
		cli_error("run", "fork: %s", strerror(errno));
	else
		pgo_log(PGO_LOG_INFO, "run", "%s started (pid %d)",
			role_names[role], (int)pid);
	return pid;
}

int cmd_run(int argc, char **argv)
{
	static const char *const flags[] = {"--db", "--db-file", "--log-level",
					    "--metrics-listen", NULL};
	bool no_relay = false, done;
	const cli_opt_t opts[] = {
		{"--no-relay", NULL, "run only the worker and the scheduler",
		 NULL, &no_relay},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "run",
		.usage = "usage: pgoutbox run --config FILE [--no-relay]",
		.summary =
			"Runs the relay ([relay], [sink]), a worker ([worker], "
			"when worker.queue is set)\nand a cron scheduler "
			"([cron], when cron.enabled is on) from one "
			"configuration,\neach in a supervised child "
			"process.",
		.details = "A child that dies is restarted after a second.  "
			   "SIGTERM is forwarded to every\nchild, which "
			   "finishes its work in flight; run exits 0 when all "
			   "did.  SIGHUP\nis forwarded to the relay.",
		.opts = opts,
		.flags = flags,
	};
	const struct sigaction sa = {.sa_handler = on_parent};
	pid_t pids[NROLES] = {0};
	bool want[NROLES];
	int64_t restart_at[NROLES] = {0};
	cli_t cli;
	int rc, failed = 0, nwant = 0;
	const struct pgo_conf_values *v;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (pgo_conf_validate(cli.conf) != PGO_OK) {
		cli_error("run", "%s", pgo_conf_errmsg(cli.conf));
		cli_free(&cli);
		return EXIT_USAGE;
	}
	v = pgo_conf_values(cli.conf);
	want[ROLE_RELAY] = !no_relay;
	want[ROLE_WORKER] = v->worker_queue && *v->worker_queue;
	want[ROLE_CRON] = v->cron_enabled;
	if (want[ROLE_WORKER]) {
		pgo_worker_opts_t o;
		pgo_worker_t *w;
		pgo_error_t err;

		cli_worker_opts(cli.conf, &o);
		w = pgo_worker_new(cli.conf, &o, &err); /* check it now */
		if (!w) {
			cli_error("run", "[worker]: %s", err.msg);
			cli_free(&cli);
			return EXIT_USAGE;
		}
		pgo_worker_destroy(w);
	}
	for (int r = 0; r < NROLES; r++)
		nwant += want[r];
	if (nwant == 0) {
		cli_error("run", "nothing to run: set worker.queue or "
				 "cron.enabled, or drop --no-relay");
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	for (int r = 0; r < NROLES && notify_role < 0; r++)
		if (want[r])
			notify_role = r;
	for (int r = 0; r < NROLES; r++)
		if (want[r])
			pids[r] = start(r, cli.conf);
	for (bool stop_sent = false;;) {
		bool any = false;
		int status;
		pid_t pid;

		if (got_stop && !stop_sent) {
			for (int r = 0; r < NROLES; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGTERM);
			stop_sent = true;
		}
		if (got_hup) {
			got_hup = 0;
			if (pids[ROLE_RELAY] > 0)
				kill(pids[ROLE_RELAY], SIGHUP);
		}
		pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			for (int r = 0; r < NROLES; r++) {
				if (pids[r] != pid)
					continue;
				pids[r] = 0;
				if (got_stop) {
					if (!WIFEXITED(status) ||
					    WEXITSTATUS(status) != 0)
						failed++;
					pgo_log(PGO_LOG_INFO, "run",
						"%s stopped", role_names[r]);
				} else if (WIFEXITED(status) &&
					   WEXITSTATUS(status) == EXIT_USAGE) {
					pgo_log(PGO_LOG_ERROR, "run",
						"%s cannot run with this "
						"configuration; stopping",
						role_names[r]);
					got_stop = 1;
					failed++;
				} else {
					pgo_log(PGO_LOG_WARN, "run",
						"%s (pid %d) ended (%s %d); "
						"restarting it in 1 s",
						role_names[r], (int)pid,
						WIFEXITED(status) ? "exit"
								  : "signal",
						WIFEXITED(status)
							? WEXITSTATUS(status)
							: WTERMSIG(status));
					restart_at[r] = pgo_now_ms() + 1000;
				}
			}
			continue;
		}
		for (int r = 0; r < NROLES; r++) {
			if (!got_stop && want[r] && pids[r] == 0 &&
			    restart_at[r] && pgo_now_ms() >= restart_at[r]) {
				restart_at[r] = 0;
				pids[r] = start(r, cli.conf);
			}
			any |= pids[r] > 0;
		}
		if (got_stop && !any)
			break;
		{
			struct timespec ts = {0, 50 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
	}
	cli_free(&cli);
	return failed ? EXIT_FAIL : EXIT_OK;
}
