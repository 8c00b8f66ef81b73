/*
 * cmd_inbox.c — `pgoutbox inbox maintain`: create the inbox partitions
 * ahead and drop those older than the dedup window (what `pgoutbox
 * consume` does hourly), for consumers written in other languages: run it
 * daily from cron.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pgoutbox.h"

int cmd_inbox(int argc, char **argv)
{
	const char *window = NULL;
	static const char *const flags[] = {"--db", "--db-file", "--log-level",
					    NULL};
	const cli_opt_t opts[] = {
		{"--window", "INTERVAL",
		 "drop claims older than this (default '7 days')", &window,
		 NULL},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "inbox",
		.usage = "usage: pgoutbox inbox maintain [--window INTERVAL] "
			 "[--db URL]",
		.summary = "Maintains the inbox: creates the daily partitions "
			   "of today and the next two\ndays (UTC) and drops "
			   "those older than the dedup window.",
		.details = "Idempotent; safe from several hosts at once.  "
			   "`pgoutbox consume` runs it hourly;\nconsumers "
			   "that call pgoutbox.inbox_claim() from other "
			   "languages should run\nit at least daily (or "
			   "SELECT pgoutbox.inbox_maintain() themselves).",
		.opts = opts,
		.flags = flags,
		.min_args = 1,
		.max_args = 1,
		.args_help = "ACTION (the one action is maintain)",
	};
	pgo_error_t err;
	bool done;
	cli_t cli;
	PGconn *conn;
	int created = 0, dropped = 0, rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (strcmp(cli.args[0], "maintain") != 0) {
		cli_error("inbox",
			  "unknown action \"%s\" (the one action is "
			  "maintain)",
			  cli.args[0]);
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	conn = cli_connect(cli.conf, "pgoutbox inbox");
	if (!conn) {
		cli_free(&cli);
		return EXIT_FAIL;
	}
	rc = pgo_inbox_maintain(conn, window, &created, &dropped, &err);
	PQfinish(conn);
	cli_free(&cli);
	if (rc != PGO_OK) {
		cli_error("inbox", "%s", err.msg);
		return EXIT_FAIL;
	}
	printf("inbox partitions: %d created, %d dropped\n", created, dropped);
	return EXIT_OK;
}
