/*
 * cmd_status.c — `pgoutbox status`: the operator's view of a queue, as
 * text or (--json) one JSON object; --watch writes it again every second
 * (text: the screen cleared first, like watch(1); JSON: one object a line)
 * until SIGINT or SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "outbox/status.h"
#include "pgoutbox.h"

static const char *const flags[] = {"--db", "--db-file", "--queue", NULL};

static volatile sig_atomic_t stop_watch;

static void on_stop(int sig)
{
	(void)sig;
	stop_watch = 1;
}

int cmd_status(int argc, char **argv)
{
	bool json = false, watch = false, done;
	const cli_opt_t opts[] = {
		{"--json", NULL,
		 "one JSON object with the same facts, for "
		 "scripts",
		 NULL, &json},
		{"--watch", NULL,
		 "refresh every second until interrupted (with --json: one "
		 "object a line)",
		 NULL, &watch},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "status",
		.usage = "usage: pgoutbox status [--db URL] [--queue NAME] "
			 "[--json] [--watch]",
		.summary = "Shows pending events per topic with the age of the "
			   "oldest, dead letters, and\nthe relays connected "
			   "now.",
		.opts = opts,
		.flags = flags,
	};
	const struct sigaction sa = {.sa_handler = on_stop};
	pgo_error_t err;
	cli_t cli;
	PGconn *conn;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	conn = cli_connect(cli.conf, "pgoutbox status");
	if (!conn) {
		cli_free(&cli);
		return EXIT_FAIL;
	}
	if (watch) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	do {
		if (watch && !json)
			fputs("\033[H\033[2J", stdout); /* home, clear */
		rc = pgo_status_write(conn,
				      pgo_conf_get(cli.conf, "relay.queue"),
				      json, stdout, &err);
		if (rc != PGO_OK && watch && !stop_watch) {
			/* Keep watching through a restart of the server. */
			printf("status: %s (retrying)\n", err.msg);
			if (PQstatus(conn) == CONNECTION_BAD)
				PQreset(conn);
			rc = PGO_OK;
		}
		fflush(stdout);
		if (rc != PGO_OK)
			break;
		if (watch) {
			struct timespec one = {1, 0};

			/* A signal cuts the sleep short. */
			nanosleep(&one, NULL);
		}
	} while (watch && !stop_watch);
	PQfinish(conn);
	cli_free(&cli);
	if (rc != PGO_OK)
		cli_error("status", "%s", err.msg);
	/* Never migrated, or another version: 2, as `relay` exits. */
	return cli_exit_code(rc == PGO_OK ? PGO_OK : err.code);
}
