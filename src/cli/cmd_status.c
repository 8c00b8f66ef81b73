/*
 * cmd_status.c — `pgoutbox status`: the operator's view of a queue.
 */
#include <stdio.h>

#include "cli.h"

static const char *const flags[] = {"--db", "--db-file", "--queue", NULL};

static const cli_cmd_t cmd = {
	.name = "status",
	.usage = "usage: pgoutbox status [--db URL] [--queue NAME]",
	.summary = "Shows pending events per topic with the age of the "
		   "oldest, dead letters, and\nthe relays connected now.",
	.flags = flags,
};

int cmd_status(int argc, char **argv)
{
	pgo_error_t err;
	bool done;
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
	rc = pgo_status_print(conn, pgo_conf_get(cli.conf, "relay.queue"),
			      stdout, &err);
	PQfinish(conn);
	cli_free(&cli);
	if (rc != PGO_OK) {
		cli_error("status", "%s", err.msg);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
