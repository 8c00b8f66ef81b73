/*
 * cmd_cron.c — `pgoutbox cron add|list|history|remove|run`: distributed
 * cron schedules and the scheduler.  A table maps each action to a short
 * handler that checks its flags and calls the library (cron.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "cron/cron.h"

static pgo_scheduler_t *running;

static void on_stop(int sig)
{
	(void)sig;
	if (running)
		pgo_scheduler_request_stop(running);
}

static const char *const flags[] = {"--db", "--db-file", "--log-level",
				    "--metrics-listen", NULL};

/* A duration with an optional sign ("+2s", "-500ms"). */
static bool signed_dur(const char *flag, const char *text, int64_t *ms)
{
	const char *why = NULL;
	int sign = 1;

	if (!text)
		return true;
	if (*text == '+' || *text == '-')
		sign = *text++ == '-' ? -1 : 1;
	if (pgo_parse_duration(text, ms, &why) != PGO_OK) {
		cli_error("cron", "%s \"%s\": %s", flag, text,
			  why ? why : "not a duration (like 2s, 500ms)");
		return false;
	}
	*ms *= sign;
	return true;
}

/* The options of `pgoutbox cron`, each for one action (the help says
 * which); the text as given, checked by the action that uses it. */
static struct {
	const char *queue;	  /* add: the work queue the jobs go to */
	const char *payload;	  /* add: each job's payload */
	const char *tz;		  /* add: IANA time zone */
	const char *overlap;	  /* add: skip or allow */
	const char *missed;	  /* add: skip, run_once or catch_up */
	const char *catch_up_max; /* add: catch_up's limit */
	const char *limit;	  /* history: how many ticks */
	const char *grace;	  /* run: later ticks count as missed */
	const char *clock_offset; /* run, tests: wake up late or early */
	const char *history_keep; /* run: delete older history */
	const char *name;	  /* run: instance name in logs */
} opt = {.limit = "50"};

static const cli_opt_t opts[] = {
	{"--queue", "NAME", "add: work queue the jobs go to", &opt.queue, NULL},
	{"--payload", "JSON",
	 "add: payload of each job (default {}; a replaced schedule keeps its "
	 "own)",
	 &opt.payload, NULL},
	{"--tz", "ZONE",
	 "add: IANA time zone (default UTC; a replaced schedule keeps its own)",
	 &opt.tz, NULL},
	{"--overlap", "POLICY", "add: skip (default) or allow", &opt.overlap,
	 NULL},
	{"--missed", "POLICY", "add: skip, run_once (default) or catch_up",
	 &opt.missed, NULL},
	{"--catch-up-max", "N", "add: catch_up runs at most N missed ticks",
	 &opt.catch_up_max, NULL},
	{"--limit", "N", "history: how many ticks (default 50)", &opt.limit,
	 NULL},
	{"--grace", "DUR", "run: later ticks count as missed (default 10s)",
	 &opt.grace, NULL},
	{"--clock-offset", "DUR",
	 "run, TEST ONLY: wake up this much late (+) or early (-)",
	 &opt.clock_offset, NULL, .hidden = true},
	{"--history-keep", "DUR",
	 "run: delete older history (default 7 days = 168h)", &opt.history_keep,
	 NULL},
	{"--name", "NAME", "run: instance name in logs", &opt.name, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

/* The end of an action: conn closed, rc the library's result, the error
 * printed when it failed. */
static int finish(PGconn *conn, int rc, const pgo_error_t *err)
{
	if (rc != PGO_OK)
		cli_error("cron", "%s", err->msg);
	PQfinish(conn);
	return rc == PGO_OK ? EXIT_OK : EXIT_FAIL;
}

/* add's flags that can be checked without the database; 0 or
 * EXIT_USAGE. */
static int check_add(void)
{
	json_error_t jerr;
	json_t *j;

	if (!opt.queue) {
		cli_error("cron", "add needs --queue");
		return EXIT_USAGE;
	}
	if (opt.payload) {
		j = json_loads(opt.payload, JSON_DECODE_ANY, &jerr);
		if (!j) {
			cli_error("cron",
				  "--payload is not valid JSON: line %d, "
				  "column %d: %s",
				  jerr.line, jerr.column, jerr.text);
			return EXIT_USAGE;
		}
		json_decref(j);
	}
	if (opt.catch_up_max &&
	    (atoi(opt.catch_up_max) < 1 || atoi(opt.catch_up_max) > 1000)) {
		cli_error("cron",
			  "--catch-up-max must be 1 to 1000, not \"%s\"",
			  opt.catch_up_max);
		return EXIT_USAGE;
	}
	return 0;
}

static int cron_add(cli_t *cli)
{
	pgo_cron_schedule_t s = {
		.size = sizeof(s),
		.name = cli->args[1],
		.expr = cli->args[2],
		.tz = opt.tz,
		.queue = opt.queue,
		.payload = opt.payload,
		.overlap = opt.overlap,
		.missed = opt.missed,
		.catch_up_max = opt.catch_up_max ? atoi(opt.catch_up_max) : 0,
	};
	pgo_error_t err;
	PGconn *conn;
	bool replaced = false;
	int rc;

	if (check_add())
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox cron", &rc);
	if (!conn)
		return rc;
	if (pgo_cron_put(conn, &s, &replaced, &err) != PGO_OK) {
		cli_error("cron", "%s", err.msg);
		PQfinish(conn);
		return err.code == PGO_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
	}
	printf("schedule %s %s\n", s.name, replaced ? "replaced" : "added");
	PQfinish(conn);
	return EXIT_OK;
}

static int cron_list(cli_t *cli)
{
	pgo_error_t err;
	PGconn *conn;
	int rc;

	conn = cli_connect_schema(cli->conf, "pgoutbox cron", &rc);
	if (!conn)
		return rc;
	return finish(conn, pgo_cron_list(conn, stdout, &err), &err);
}

static int cron_history(cli_t *cli)
{
	pgo_error_t err;
	PGconn *conn;
	int rc;

	conn = cli_connect_schema(cli->conf, "pgoutbox cron", &rc);
	if (!conn)
		return rc;
	return finish(conn,
		      pgo_cron_history(conn, cli->args[1], atoi(opt.limit),
				       stdout, &err),
		      &err);
}

static int cron_remove(cli_t *cli)
{
	pgo_error_t err;
	PGconn *conn;
	int rc;

	conn = cli_connect_schema(cli->conf, "pgoutbox cron", &rc);
	if (!conn)
		return rc;
	rc = pgo_cron_remove(conn, cli->args[1], &err);
	if (rc == PGO_OK)
		printf("schedule %s removed\n", cli->args[1]);
	return finish(conn, rc, &err);
}

/* The scheduler, until SIGTERM or SIGINT. */
static int cron_run(cli_t *cli)
{
	const struct sigaction stop = {.sa_handler = on_stop};
	pgo_scheduler_opts_t o;
	pgo_scheduler_t *s;
	pgo_error_t err;
	int rc;

	cli_catch_signals_early(false);
	pgo_scheduler_opts_init(&o, sizeof(o));
	o.name = opt.name;
	if (!signed_dur("--grace", opt.grace, &o.grace_ms) ||
	    !signed_dur("--clock-offset", opt.clock_offset,
			&o.clock_offset_ms) ||
	    !signed_dur("--history-keep", opt.history_keep, &o.history_keep_ms))
		return EXIT_USAGE;
	s = pgo_scheduler_new(cli->conf, &o, &err);
	if (!s) {
		cli_error("cron", "%s", err.msg);
		return EXIT_USAGE;
	}
	running = s;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	if (cli_stop_early)
		pgo_scheduler_request_stop(s);
	rc = cli_exit_code(pgo_scheduler_run(s));
	running = NULL;
	pgo_scheduler_destroy(s);
	return rc;
}

static const cli_sub_t actions[] = {
	{"add",
	 "add NAME 'EXPR' --queue Q [--payload JSON] [--tz ZONE]\n"
	 "              [--overlap skip|allow] [--missed "
	 "skip|run_once|catch_up] [--catch-up-max N]",
	 2, cron_add},
	{"list", "list", 0, cron_list},
	{"history", "history NAME [--limit N]", 1, cron_history},
	{"remove", "remove NAME", 1, cron_remove},
	{"run", "run [--grace DUR] [--metrics-listen ADDR]", 0, cron_run},
	{NULL, NULL, 0, NULL},
};

static const cli_cmd_t cmd = {
	.name = "cron",
	.subs = actions,
	.summary = "Distributed cron: each tick of a schedule is "
		   "enqueued exactly once, however\nmany `cron run` "
		   "instances are up.",
	.details = "EXPR has 5 fields (min hour dom mon dow), 6 with "
		   "seconds first, or is\n@yearly, @monthly, @weekly, "
		   "@daily, @hourly.  Ticks are computed in --tz with\n"
		   "daylight saving time handled (docs/cron.md).  "
		   "Every tick's outcome is kept\nin the history: "
		   "fired (with the job id) or skipped (with the "
		   "reason).",
	.opts = opts,
	.flags = flags,
	.min_args = 1,
	.max_args = 3,
};

int cmd_cron(int argc, char **argv)
{
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	cli_log_setup(cli.conf);
	rc = cli_run_sub(&cli, &cmd);
	cli_free(&cli);
	return rc;
}
