/*
 * cmd_migrate.c — `pgoutbox migrate`: apply the embedded migrations.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "pgoutbox.h"

static const char *const flags[] = {"--db", "--db-file", "--log-level", NULL};

static const char *target_arg;

static const cli_opt_t opts[] = {
	{"--to", "VERSION", "stop at this schema version (default: newest)",
	 &target_arg, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static const cli_cmd_t cmd = {
	.name = "migrate",
	.usage = "usage: pgoutbox migrate [--db URL] [--to VERSION]",
	.summary = "Creates schema pgoutbox or upgrades it to this build's "
		   "version.",
	.details = "Idempotent and safe to run from several instances at once "
		   "(one advisory lock,\none transaction).  A database whose "
		   "schema is newer than this build is refused\nand left "
		   "untouched.",
	.opts = opts,
	.flags = flags,
};

int cmd_migrate(int argc, char **argv)
{
	pgo_error_t err;
	bool done;
	cli_t cli;
	PGconn *conn;
	int from = 0, to = 0, rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	cli_log_setup(cli.conf);
	conn = cli_connect(cli.conf, "pgoutbox migrate");
	if (!conn) {
		cli_free(&cli);
		return EXIT_FAIL;
	}
	if (target_arg) {
		char *end;
		long t = strtol(target_arg, &end, 10);

		if (*end || t < 1 || t > pgo_schema_version()) {
			cli_error("migrate",
				  "--to: \"%s\" is not a schema "
				  "version (1 to %d)",
				  target_arg, pgo_schema_version());
			PQfinish(conn);
			cli_free(&cli);
			return EXIT_USAGE;
		}
		rc = pgo_migrate_to(conn, (int)t, &from, &to, &err);
	} else {
		rc = pgo_migrate(conn, &from, &to, &err);
	}
	PQfinish(conn);
	cli_free(&cli);
	if (rc != PGO_OK) {
		cli_error("migrate", "%s", err.msg);
		/* A newer schema, left untouched: 2; a database error: 1. */
		return cli_exit_code(rc);
	}
	if (from == to && target_arg && from > atoi(target_arg))
		/* Migrations are never undone: say so rather than "up to
		 * date". */
		printf("schema pgoutbox is at version %d, newer than --to %s: "
		       "nothing done (migrations are not undone)\n",
		       from, target_arg);
	else if (from == to)
		printf("schema pgoutbox is up to date (version %d)\n", to);
	else
		printf("schema pgoutbox migrated from version %d to %d\n", from,
		       to);
	return EXIT_OK;
}
