/*
 * cmd_cron.c — `pgoutbox cron add|list|history|remove|run`: distributed
 * cron schedules and the scheduler.  Each subcommand parses its flags and
 * calls the library (cron.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "pgo_int.h"

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

int cmd_cron(int argc, char **argv)
{
	const char *queue = NULL, *payload = "{}", *tz = NULL, *overlap = NULL;
	const char *missed = NULL, *cmax = NULL, *limit = "50", *grace = NULL;
	const char *offset = NULL, *name = NULL, *keep = NULL;
	const cli_opt_t opts[] = {
		{"--queue", "NAME", "add: work queue the jobs go to", &queue,
		 NULL},
		{"--payload", "JSON", "add: payload of each job (default {})",
		 &payload, NULL},
		{"--tz", "ZONE", "add: IANA time zone (default UTC)", &tz,
		 NULL},
		{"--overlap", "POLICY", "add: skip (default) or allow",
		 &overlap, NULL},
		{"--missed", "POLICY",
		 "add: skip, run_once (default) or "
		 "catch_up",
		 &missed, NULL},
		{"--catch-up-max", "N",
		 "add: catch_up runs at most N missed "
		 "ticks",
		 &cmax, NULL},
		{"--limit", "N", "history: how many ticks (default 50)", &limit,
		 NULL},
		{"--grace", "DUR",
		 "run: later ticks count as missed (default "
		 "10s)",
		 &grace, NULL},
		{"--clock-offset", "DUR",
		 "run, TEST ONLY: wake up this much "
		 "late (+) or early (-)",
		 &offset, NULL},
		{"--history-keep", "DUR",
		 "run: delete older history (default "
		 "7 days = 168h)",
		 &keep, NULL},
		{"--name", "NAME", "run: instance name in logs", &name, NULL},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "cron",
		.usage = "usage: pgoutbox cron add NAME 'EXPR' --queue Q "
			 "[--payload JSON] [--tz ZONE]\n"
			 "              [--overlap skip|allow] [--missed "
			 "skip|run_once|catch_up] [--catch-up-max N]\n"
			 "       pgoutbox cron list\n"
			 "       pgoutbox cron history NAME [--limit N]\n"
			 "       pgoutbox cron remove NAME\n"
			 "       pgoutbox cron run [--grace DUR] "
			 "[--metrics-listen ADDR]",
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
	const char *sub;
	pgo_error_t err;
	PGconn *conn = NULL;
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	cli_log_setup(cli.conf);
	sub = cli.args[0];
	rc = EXIT_USAGE;
	if (strcmp(sub, "run") == 0) {
		pgo_scheduler_opts_t o;
		pgo_scheduler_t *s;
		const struct sigaction stop = {.sa_handler = on_stop};

		cli_catch_signals_early(false);
		pgo_scheduler_opts_init(&o, sizeof(o));
		o.name = name;
		if (cli.nargs != 1 ||
		    !signed_dur("--grace", grace, &o.grace_ms) ||
		    !signed_dur("--clock-offset", offset, &o.clock_offset_ms) ||
		    !signed_dur("--history-keep", keep, &o.history_keep_ms))
			goto out;
		s = pgo_scheduler_new(cli.conf, &o, &err);
		if (!s) {
			cli_error("cron", "%s", err.msg);
			goto out;
		}
		running = s;
		sigaction(SIGTERM, &stop, NULL);
		sigaction(SIGINT, &stop, NULL);
		if (cli_stop_early)
			pgo_scheduler_request_stop(s);
		rc = pgo_scheduler_run(s) == PGO_OK ? EXIT_OK : EXIT_FAIL;
		running = NULL;
		pgo_scheduler_destroy(s);
		goto out;
	}
	if (strcmp(sub, "add") == 0) {
		json_error_t jerr;
		json_t *j;

		if (cli.nargs != 3) {
			cli_error("cron", "add needs NAME and 'EXPR'");
			goto out;
		}
		if (!queue) {
			cli_error("cron", "add needs --queue");
			goto out;
		}
		j = json_loads(payload, JSON_DECODE_ANY, &jerr);
		if (!j) {
			cli_error("cron",
				  "--payload is not valid JSON: line %d, "
				  "column %d: %s",
				  jerr.line, jerr.column, jerr.text);
			goto out;
		}
		json_decref(j);
	} else if (strcmp(sub, "list") == 0) {
		if (cli.nargs != 1)
			goto wrong;
	} else if (strcmp(sub, "history") == 0 || strcmp(sub, "remove") == 0) {
		if (cli.nargs != 2)
			goto wrong;
	} else {
		cli_error("cron",
			  "unknown subcommand \"%s\" (add, list, history, "
			  "remove, run)",
			  sub);
		goto out;
	}
	rc = EXIT_FAIL;
	conn = cli_connect(cli.conf, "pgoutbox cron");
	if (!conn)
		goto out;
	if (pgo_schema_check(conn, &err) != PGO_OK) {
		cli_error("cron", "%s", err.msg);
		goto out;
	}
	if (strcmp(sub, "add") == 0) {
		pgo_cron_schedule_t s = {
			.size = sizeof(s),
			.name = cli.args[1],
			.expr = cli.args[2],
			.tz = tz,
			.queue = queue,
			.payload = payload,
			.overlap = overlap,
			.missed = missed,
			.catch_up_max = cmax ? atoi(cmax) : 0,
		};

		if (cmax && (s.catch_up_max < 1 || s.catch_up_max > 1000)) {
			cli_error("cron",
				  "--catch-up-max must be 1 to 1000, "
				  "not \"%s\"",
				  cmax);
			rc = EXIT_USAGE;
			goto out;
		}
		if (pgo_cron_add(conn, &s, &err) != PGO_OK) {
			cli_error("cron", "%s", err.msg);
			rc = err.code == PGO_ERR_INVALID ? EXIT_USAGE
							 : EXIT_FAIL;
			goto out;
		}
		printf("schedule %s added\n", cli.args[1]);
	} else if (strcmp(sub, "list") == 0) {
		if (pgo_cron_list(conn, stdout, &err) != PGO_OK) {
			cli_error("cron", "%s", err.msg);
			goto out;
		}
	} else if (strcmp(sub, "history") == 0) {
		if (pgo_cron_history(conn, cli.args[1], atoi(limit), stdout,
				     &err) != PGO_OK) {
			cli_error("cron", "%s", err.msg);
			goto out;
		}
	} else {
		if (pgo_cron_remove(conn, cli.args[1], &err) != PGO_OK) {
			cli_error("cron", "%s", err.msg);
			goto out;
		}
		printf("schedule %s removed\n", cli.args[1]);
	}
	rc = EXIT_OK;
	goto out;
wrong:
	cli_error("cron", "wrong arguments for \"%s\" (see --help)", sub);
out:
	if (conn)
		PQfinish(conn);
	cli_free(&cli);
	return rc;
}
