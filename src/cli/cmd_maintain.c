/*
 * cmd_maintain.c — `pgoutbox maintain`: retention and health.
 *
 *   pgoutbox maintain                      create and drop partitions
 *   pgoutbox maintain --retention archive --queue Q [--days N]
 *                                          choose a queue's retention
 *   pgoutbox maintain --health             what holds back vacuum
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pgoutbox.h"

static const char *retention, *days;
static bool health;

static const cli_opt_t opts[] = {
	{"--retention", "delete|archive",
	 "set the queue's retention mode (with --queue, --days)", &retention,
	 NULL},
	{"--days", "N", "archive: keep this many days (default 7)", &days,
	 NULL},
	{"--health", NULL,
	 "report xmin holders, replication slots and dead "
	 "tuples instead",
	 NULL, &health},
	{NULL, NULL, NULL, NULL, NULL},
};

static const char *const flags[] = {"--db", "--db-file", "--queue", NULL};

static const cli_cmd_t cmd = {
	.name = "maintain",
	.usage = "usage: pgoutbox maintain [--retention delete|archive "
		 "[--days N]] [--health] [--queue Q]",
	.summary = "Creates the archive and inbox partitions ahead and drops "
		   "those past retention\n(never DELETE), from any number of "
		   "instances at once: one does the work.\nRelays run it "
		   "hourly.  --retention changes a queue's retention mode.",
	.opts = opts,
	.flags = flags,
};

/* Runs one query and prints its rows, one line each, fields separated. */
static int run(PGconn *conn, const char *sql, int n, const char *const *p,
	       PGresult **out)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, p, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
	    PQresultStatus(res) != PGRES_COMMAND_OK) {
		cli_error("maintain", "%s",
			  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
				  ? PQresultErrorField(res,
						       PG_DIAG_MESSAGE_PRIMARY)
				  : PQerrorMessage(conn));
		PQclear(res);
		return EXIT_FAIL;
	}
	*out = res;
	return EXIT_OK;
}

int cmd_maintain(int argc, char **argv)
{
	pgo_error_t err;
	PGresult *res = NULL;
	const char *queue;
	bool done;
	cli_t cli;
	PGconn *conn;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	queue = pgo_conf_get(cli.conf, "relay.queue");
	if (days && !retention) {
		cli_error("maintain", "--days goes with --retention archive "
				      "(it sets how long archived events are "
				      "kept)");
		cli_free(&cli);
		return EXIT_USAGE;
	}
	if (!days)
		days = "7";
	conn = cli_connect(cli.conf, "pgoutbox maintain");
	if (!conn) {
		cli_free(&cli);
		return EXIT_FAIL;
	}
	if (pgo_schema_check(conn, &err) != PGO_OK) {
		cli_error("maintain", "%s", err.msg);
		rc = cli_exit_code(err.code);
	} else if (retention) {
		const char *p[3] = {queue, retention, days};

		if (strcmp(retention, "delete") != 0 &&
		    strcmp(retention, "archive") != 0) {
			cli_error("maintain",
				  "--retention: \"%s\" is not "
				  "delete or archive",
				  retention);
			rc = EXIT_USAGE;
		} else if (atoi(days) < 1 || atoi(days) > 3650) {
			cli_error("maintain", "--days: \"%s\" is not 1 to 3650",
				  days);
			rc = EXIT_USAGE;
		} else {
			rc = run(conn,
				 "SELECT pgoutbox.set_retention($1, $2, "
				 "$3::int)",
				 3, p, &res);
			if (rc == EXIT_OK)
				printf("queue %s: retention %s%s%s%s\n", queue,
				       retention,
				       retention[0] == 'a' ? ", " : "",
				       retention[0] == 'a' ? days : "",
				       retention[0] == 'a' ? " days" : "");
		}
	} else if (health) {
		rc = run(conn,
			 "SELECT kind, subject, detail FROM "
			 "pgoutbox.health()",
			 0, NULL, &res);
		if (rc == EXIT_OK && PQntuples(res) == 0)
			printf("healthy: no transaction or slot pins xmin, "
			       "no table with many dead tuples\n");
		for (int i = 0; rc == EXIT_OK && i < PQntuples(res); i++)
			printf("%-12s %-32s %s\n", PQgetvalue(res, i, 0),
			       PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	} else {
		rc = run(conn,
			 "SELECT done, created, dropped FROM "
			 "pgoutbox.maintain()",
			 0, NULL, &res);
		if (rc == EXIT_OK) {
			if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
				printf("another instance is maintaining right "
				       "now: nothing to do\n");
			else
				printf("partitions created %s, dropped %s\n",
				       PQgetvalue(res, 0, 1),
				       PQgetvalue(res, 0, 2));
		}
	}
	PQclear(res);
	PQfinish(conn);
	cli_free(&cli);
	return rc;
}
