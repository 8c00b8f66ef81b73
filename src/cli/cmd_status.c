/*
 * cmd_status.c — `pgoutbox status`: the operator's view of a queue, as
 * text or (--json) one JSON object; --watch writes it again every second
 * (text: the screen cleared first, like watch(1); JSON: one object a line)
 * until SIGINT or SIGTERM.  Given a fleet (--db more than once, or
 * [database NAME] sections), the view of every database, by name.
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

/* Waits a second, or less if a signal comes. */
static void pause_watch(void)
{
	struct timespec one = {1, 0};

	nanosleep(&one, NULL);
}

/* The fleet's status: every database's, a failing one's error row; the
 * others are still reported, and --watch goes on through failures. */
static int fleet_status(cli_t *cli, bool json, bool watch)
{
	pgo_status_fleet_t *s;
	pgo_error_t err;
	int rc;

	s = pgo_status_fleet_new(cli->conf, &err);
	if (!s) {
		cli_error("status", "%s", err.msg);
		return cli_exit_code(err.code);
	}
	do {
		if (watch && !json)
			fputs("\033[H\033[2J", stdout); /* home, clear */
		rc = pgo_status_fleet_write(
			s, pgo_conf_get(cli->conf, "relay.queue"), json, stdout,
			&stop_watch, &err);
		fflush(stdout);
		if (watch && !stop_watch)
			pause_watch();
	} while (watch && !stop_watch);
	pgo_status_fleet_destroy(s);
	if (watch)
		return EXIT_OK;
	if (rc != PGO_OK)
		cli_error("status", "%s", err.msg);
	/* Down: 1; not migrated or refused: 2, the graver. */
	return cli_exit_code(rc);
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
		.usage = "usage: pgoutbox status [--db URL]... [--queue NAME] "
			 "[--json] [--watch]",
		.summary = "Shows pending events per topic with the age of the "
			   "oldest, dead letters, and\nthe relays connected "
			   "now.",
		.details = "A fleet (--db given more than once, or [database "
			   "NAME] sections of the\n--config file, as for "
			   "`pgoutbox relay`): each database's report headed "
			   "by\nits name, then a \"fleet:\" line; with "
			   "--json one object whose \"databases\"\narray "
			   "holds each database's object with its "
			   "\"database\" name.  A database\nthat fails gets "
			   "an ERROR row (JSON: its \"error\"), the others "
			   "are still\nshown, and status exits 1 (2 when one "
			   "is not migrated or refuses the\nconnection for "
			   "good: no such database, authentication).",
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
	if (pgo_conf_database_count(cli.conf) > 0) {
		if (watch) {
			sigaction(SIGINT, &sa, NULL);
			sigaction(SIGTERM, &sa, NULL);
		}
		rc = fleet_status(&cli, json, watch);
		cli_free(&cli);
		return rc;
	}
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
		if (watch)
			pause_watch();
	} while (watch && !stop_watch);
	PQfinish(conn);
	cli_free(&cli);
	if (rc != PGO_OK)
		cli_error("status", "%s", err.msg);
	/* Never migrated, or another version: 2, as `relay` exits. */
	return cli_exit_code(rc == PGO_OK ? PGO_OK : err.code);
}
