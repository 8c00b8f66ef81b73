/*
 * cmd_console.c — `pgoutbox console`: the web console (docs/console.md)
 * until SIGTERM or SIGINT.  The pages are served by the console's own
 * thread; this one takes a throughput sample every few seconds, and on
 * SIGHUP reads the configuration again: the databases of its file's
 * [database NAME] sections from then on.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "base/log.h"
#include "console/console.h"
#include "conf/conf.h"
#include "pgoutbox.h"

static volatile sig_atomic_t stop, reload;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_reload(int sig)
{
	(void)sig;
	reload = 1;
}

/* SIGHUP: the file again (a bad one changes nothing), then its
 * databases. */
static void console_reload(pgo_console_t *c, pgo_conf_t *conf)
{
	extern char **environ;
	pgo_error_t err;

	reload = 0;
	if (pgo_conf_reload(conf, environ, NULL) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, "console",
			"reload failed, keeping the running configuration: %s",
			pgo_conf_errmsg(conf));
		return;
	}
	if (pgo_console_reload(c, conf, &err) != PGO_OK)
		pgo_log(PGO_LOG_ERROR, "console",
			"reload failed, keeping its databases: %s", err.msg);
}

static const char *const flags[] = {"--db", "--db-file", "--log-level", NULL};

int cmd_console(int argc, char **argv)
{
	const char *listen = NULL, *token = NULL;
	const cli_opt_t opts[] = {
		{"--listen", "HOST:PORT",
		 "where to serve (default: console.listen, 127.0.0.1:9188)",
		 &listen, NULL},
		/* Refused: a token on the command line shows in ps. */
		{"--token", "TOKEN", "", &token, NULL, true},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "console",
		.usage = "usage: pgoutbox console [--listen HOST:PORT] [--db "
			 "URL]",
		.summary = "Serves the web console: queues, dead letters, "
			   "cron, live.",
		.details = "Read-only unless console.token is set (from "
			   "PGOUTBOX_CONSOLE_TOKEN or the file\nconsole.token_"
			   "file, never the command line): an operator who "
			   "enters it in the\npage may retry and discard dead "
			   "letters and pause cron schedules.\nOver a fleet's "
			   "databases ([database NAME] sections, or --db given "
			   "more than\nonce) it shows each by its name; SIGHUP reads "
			   "the file again and shows its\nsections from then "
			   "on.  Listens on 127.0.0.1 unless told otherwise;\n"
			   "see docs/console.md.",
		.opts = opts,
		.flags = flags,
	};
	const struct sigaction sa = {.sa_handler = on_stop};
	const struct sigaction hup = {.sa_handler = on_reload};
	pgo_console_t *c;
	pgo_error_t err;
	bool done;
	cli_t cli;
	int rc;

	cli_catch_signals_early(true); /* a SIGHUP before the console runs is dropped */
	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (token) {
		cli_error("console",
			  "--token: the token is never taken from the command "
			  "line (ps shows it); set PGOUTBOX_CONSOLE_TOKEN or "
			  "console.token_file");
		cli_free(&cli);
		return EXIT_USAGE;
	}
	if (!listen)
		listen = pgo_conf_get(cli.conf, "console.listen");
	cli_log_setup(cli.conf);
	signal(SIGPIPE, SIG_IGN);
	c = pgo_console_new(cli.conf, listen, &err);
	if (!c) {
		cli_error("console", "%s", err.msg);
		cli_free(&cli);
		return cli_exit_code(err.code);
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &hup, NULL);
	if (cli_stop_early)
		stop = 1;
	while (!stop) {
		struct timespec tick = {0, 200 * 1000 * 1000};
		static int turns;

		if (reload)
			console_reload(c, cli.conf);
		if (turns++ % 25 == 0) /* every 5 s */
			pgo_console_sample(c);
		nanosleep(&tick, NULL);
	}
	pgo_console_destroy(c);
	cli_free(&cli);
	return EXIT_OK;
}
