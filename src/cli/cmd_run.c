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
 * sends READY=1, STOPPING=1 and the watchdog's WATCHDOG=1; with
 * console.enabled the first of them serves the console too, the others
 * only their metrics.
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
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

enum { ROLE_RELAY, ROLE_WORKER, ROLE_CRON, NROLES };
static const char *const role_names[NROLES] = {"relay", "worker", "cron"};

static volatile sig_atomic_t got_stop, got_hup;
/* The library object a child runs, for its signal handler. */
static pgo_relay_t *child_relay;
static pgo_fleet_t *child_fleet; /* the relay of many databases */
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
		if (child_fleet)
			pgo_fleet_request_reload(child_fleet);
		return;
	}
	if (child_relay)
		pgo_relay_request_stop(child_relay);
	if (child_fleet)
		pgo_fleet_request_stop(child_fleet);
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

/* The one child that serves the console ([console] enabled): the first
 * role started, on its metrics address.  One console is enough (each
 * shows every queue), and each would sample the database on a
 * connection of its own. */
static int console_role = -1;

static void child_console(int role, pgo_conf_t *conf)
{
	if (role != console_role)
		pgo_conf_set(conf, "console.enabled", "off", PGO_CONF_FLAG,
			     "console.enabled");
}

/* The one child that speaks systemd's notify protocol (the first role
 * started): READY=1 once it is connected, its loop feeds the watchdog.
 * The unit needs NotifyAccess=all (contrib/systemd/pgoutbox@.service.in). */
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

/* A relay name unique to this process unless relay.name is set. */
static void child_relay_name(pgo_conf_t *conf)
{
	char name[96], host[64];

	if (*pgo_conf_get(conf, "relay.name"))
		return;
	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "relay");
	host[sizeof(host) - 1] = '\0';
	snprintf(name, sizeof(name), "%s-%d", host, (int)getpid());
	pgo_conf_set(conf, "relay.name", name, PGO_CONF_FLAG, "--name");
}

/* The relay of many databases (docs/fleet.md): as child_relay_run(). */
static int child_fleet_run(pgo_conf_t *conf, pgo_sink_t *sink, bool *exit_now)
{
	pgo_fleet_t *fleet;
	pgo_error_t err;
	int rc;

	child_fleet = pgo_fleet_new(conf, sink, &err);
	if (!child_fleet) {
		cli_error("run", "relay: %s", err.msg);
		pgo_sink_destroy(sink);
		*exit_now = true;
		return err.code == PGO_ERR_NOMEM ? EXIT_FAIL : EXIT_USAGE;
	}
	rc = pgo_fleet_run(child_fleet);
	if (rc != PGO_OK)
		cli_error("run", "relay: %s", pgo_fleet_errmsg(child_fleet));
	fleet = child_fleet;
	child_fleet = NULL;
	pgo_fleet_destroy(fleet);
	pgo_sink_destroy(sink);
	return rc;
}

/* The child's role until it stops: a PGO_* result, or an exit code
 * (*exit_now set) when it could not start. */
static int child_relay_run(pgo_conf_t *conf, bool *exit_now)
{
	pgo_error_t err;
	pgo_sink_t *sink;
	int rc;

	child_relay_name(conf);
	sink = pgo_sink_new(pgo_conf_get(conf, "relay.sink"), conf, &err);
	if (!sink) {
		cli_error("run", "relay: %s", err.msg);
		*exit_now = true;
		return EXIT_USAGE;
	}
	if (pgo_conf_database_count(conf) > 0)
		return child_fleet_run(conf, sink, exit_now);
	child_relay = pgo_relay_new(conf, sink, &err);
	if (!child_relay) {
		cli_error("run", "relay: %s", err.msg);
		pgo_sink_destroy(sink);
		*exit_now = true;
		return err.code == PGO_ERR_NOMEM ? EXIT_FAIL : EXIT_USAGE;
	}
	rc = pgo_relay_run(child_relay);
	if (rc != PGO_OK)
		cli_error("run", "relay: %s", pgo_relay_errmsg(child_relay));
	pgo_relay_destroy(child_relay);
	pgo_sink_destroy(sink);
	return rc;
}

static int child_worker_run(pgo_conf_t *conf, bool *exit_now)
{
	pgo_worker_opts_t o;
	pgo_error_t err;
	int rc;

	cli_worker_opts(conf, &o);
	child_worker = pgo_worker_new(conf, &o, &err);
	if (!child_worker) {
		cli_error("run", "worker: %s", err.msg);
		*exit_now = true;
		return EXIT_USAGE;
	}
	rc = pgo_worker_run(child_worker);
	if (rc != PGO_OK)
		cli_error("run", "worker: %s", pgo_worker_errmsg(child_worker));
	pgo_worker_destroy(child_worker);
	return rc;
}

static int child_cron_run(pgo_conf_t *conf, bool *exit_now)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	pgo_scheduler_opts_t o;
	pgo_error_t err;
	int rc;

	pgo_scheduler_opts_init(&o, sizeof(o));
	o.grace_ms = v->cron_grace;
	o.history_keep_ms = v->cron_history_keep;
	child_cron = pgo_scheduler_new(conf, &o, &err);
	if (!child_cron) {
		cli_error("run", "cron: %s", err.msg);
		*exit_now = true;
		return EXIT_USAGE;
	}
	rc = pgo_scheduler_run(child_cron);
	pgo_scheduler_destroy(child_cron);
	return rc;
}

static int child_main(int role, pgo_conf_t *conf)
{
	static int (*const run_role[NROLES])(pgo_conf_t *, bool *) = {
		[ROLE_RELAY] = child_relay_run,
		[ROLE_WORKER] = child_worker_run,
		[ROLE_CRON] = child_cron_run,
	};
	const struct sigaction sa = {.sa_handler = on_child};
	bool exit_now = false;
	int rc;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	child_listen(role, conf);
	child_console(role, conf);
	child_notify(role);
	rc = run_role[role](conf, &exit_now);
	if (exit_now)
		return rc;
	/* EXIT_USAGE: run stops instead of restarting the child (a queue
	 * or database that does not exist, a schema never migrated, a
	 * queue of the wrong kind, relays of another mode on the queue),
	 * as `pgoutbox relay` and `worker` exit 2 for them. */
	return cli_exit_code(rc);
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

/* The children run supervises: one per role wanted. */
typedef struct supervisor {
	pgo_conf_t *conf;
	bool want[NROLES];
	pid_t pids[NROLES];	    /* 0: not running */
	int64_t restart_at[NROLES]; /* when to start it again, 0: never */
	int failed;		    /* children that ended badly */
	bool refused; /* one could not run with this configuration */
} supervisor_t;

/* Child pid of role r ended with status: stopped, refused (which stops
 * run), or restarted in a second. */
static void child_ended(supervisor_t *sv, int r, pid_t pid, int status)
{
	sv->pids[r] = 0;
	if (got_stop) {
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			sv->failed++;
		pgo_log(PGO_LOG_INFO, "run", "%s stopped", role_names[r]);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_USAGE) {
		pgo_log(PGO_LOG_ERROR, "run",
			"%s cannot run with this configuration; stopping",
			role_names[r]);
		got_stop = 1;
		sv->failed++;
		sv->refused = true;
	} else {
		pgo_log(PGO_LOG_WARN, "run",
			"%s (pid %d) ended (%s %d); restarting it in 1 s",
			role_names[r], (int)pid,
			WIFEXITED(status) ? "exit" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status)
					  : WTERMSIG(status));
		sv->restart_at[r] = pgo_now_ms() + 1000;
	}
}

/* Starts the children whose restart is due; true while any runs. */
static bool restart_due(supervisor_t *sv)
{
	bool any = false;

	for (int r = 0; r < NROLES; r++) {
		if (!got_stop && sv->want[r] && sv->pids[r] == 0 &&
		    sv->restart_at[r] && pgo_now_ms() >= sv->restart_at[r]) {
			sv->restart_at[r] = 0;
			sv->pids[r] = start(r, sv->conf);
		}
		any |= sv->pids[r] > 0;
	}
	return any;
}

/* Runs the children until a stop request and all of them ended. */
static void supervise(supervisor_t *sv)
{
	for (int r = 0; r < NROLES; r++)
		if (sv->want[r])
			sv->pids[r] = start(r, sv->conf);
	for (bool stop_sent = false;;) {
		const struct timespec pause = {0, 50 * 1000 * 1000};
		int status;
		pid_t pid;

		if (got_stop && !stop_sent) {
			for (int r = 0; r < NROLES; r++)
				if (sv->pids[r] > 0)
					kill(sv->pids[r], SIGTERM);
			stop_sent = true;
		}
		if (got_hup) {
			got_hup = 0;
			if (sv->pids[ROLE_RELAY] > 0)
				kill(sv->pids[ROLE_RELAY], SIGHUP);
		}
		pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			for (int r = 0; r < NROLES; r++)
				if (sv->pids[r] == pid)
					child_ended(sv, r, pid, status);
			continue;
		}
		if (!restart_due(sv) && got_stop)
			break;
		nanosleep(&pause, NULL);
	}
}

/* Which roles the configuration asks for; EXIT_USAGE (the error
 * printed) when none, or when the worker's settings cannot work. */
static int roles_wanted(const pgo_conf_t *conf, bool no_relay,
			bool want[NROLES])
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);

	want[ROLE_RELAY] = !no_relay;
	want[ROLE_WORKER] = v->worker_queue && *v->worker_queue;
	want[ROLE_CRON] = v->cron_enabled;
	if (want[ROLE_WORKER]) {
		pgo_worker_opts_t o;
		pgo_worker_t *w;
		pgo_error_t err;

		cli_worker_opts(conf, &o);
		w = pgo_worker_new(conf, &o, &err); /* check it now */
		if (!w) {
			cli_error("run", "[worker]: %s", err.msg);
			return EXIT_USAGE;
		}
		pgo_worker_destroy(w);
	}
	if (!want[ROLE_RELAY] && !want[ROLE_WORKER] && !want[ROLE_CRON]) {
		cli_error("run", "nothing to run: set worker.queue or "
				 "cron.enabled, or drop --no-relay");
		return EXIT_USAGE;
	}
	return 0;
}

static bool no_relay;

static const cli_opt_t opts[] = {
	{"--no-relay", NULL, "run only the worker and the scheduler", NULL,
	 &no_relay},
	{NULL, NULL, NULL, NULL, NULL},
};

static const char *const flags[] = {"--db", "--db-file", "--log-level",
				    "--metrics-listen", NULL};

static const cli_cmd_t cmd = {
	.name = "run",
	.usage = "usage: pgoutbox run --config FILE [--no-relay]",
	.summary = "Runs the relay ([relay], [sink]), a worker ([worker], "
		   "when worker.queue is set)\nand a cron scheduler "
		   "([cron], when cron.enabled is on) from one "
		   "configuration,\neach in a supervised child "
		   "process.",
	.details = "A child that dies is restarted after a second.  "
		   "SIGTERM is forwarded to every\nchild, which "
		   "finishes its work in flight; run exits 0 when all "
		   "did.  SIGHUP\nis forwarded to the relay.  A child that "
		   "cannot run with this configuration\n(exit 2) stops them "
		   "all, and run exits 2.  With metrics.listen host:PORT the "
		   "relay serves\nits metrics on PORT, the worker on PORT+1, "
		   "the scheduler on PORT+2; with\nconsole.enabled the "
		   "first of them serves the console too.",
	.opts = opts,
	.flags = flags,
};

int cmd_run(int argc, char **argv)
{
	const struct sigaction sa = {.sa_handler = on_parent};
	supervisor_t sv = {0};
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (pgo_conf_validate(cli.conf) != PGO_OK) {
		cli_error("run", "%s", pgo_conf_errmsg(cli.conf));
		cli_free(&cli);
		return EXIT_USAGE;
	}
	if (roles_wanted(cli.conf, no_relay, sv.want) != 0) {
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	for (int r = 0; r < NROLES && notify_role < 0; r++)
		if (sv.want[r])
			notify_role = console_role = r;
	sv.conf = cli.conf;
	supervise(&sv);
	cli_free(&cli);
	/* 2 when a child refused: restarting run would refuse again. */
	return sv.refused ? EXIT_USAGE : sv.failed ? EXIT_FAIL : EXIT_OK;
}
