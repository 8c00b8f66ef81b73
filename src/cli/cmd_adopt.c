/*
 * cmd_adopt.c — `pgoutbox adopt SCHEMA.TABLE --name NAME [map]` and
 * `pgoutbox unadopt NAME`: relay the outbox table an application already
 * has (docs/adopt.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pgoutbox.h"

static void print_line(void *ctx, const char *line)
{
	(void)ctx;
	printf("%s\n", line);
}

static const char *const flags[] = {"--db", "--db-file", NULL};

/* adopt's map, filled by the flags (the table is the argument). */
static pgo_adopt_map_t map;
static const char *shards_arg; /* --shards as given */
static const char *capture;    /* --capture: table (NULL) or wal */

static const cli_opt_t adopt_opts[] = {
	{"--name", "NAME", "the queue name relays use (required)", &map.name,
	 NULL},
	{"--id", "COLUMN", "the primary key column (default id)", &map.id,
	 NULL},
	{"--topic", "SQL",
	 "topic: a column or a quoted constant, e.g. \"'orders'\" "
	 "(default aggregatetype)",
	 &map.topic, NULL},
	{"--key", "SQL",
	 "key (ordering): a column or an expression, e.g. "
	 "\"payload->>'chat_id'\" (default aggregateid)",
	 &map.key, NULL},
	{"--type", "SQL", "event type (default type)", &map.type, NULL},
	{"--payload", "SQL",
	 "payload: json, jsonb, text or bytea (default payload)", &map.payload,
	 NULL},
	{"--headers", "SQL", "headers: a json(b) object (default none)",
	 &map.headers, NULL},
	{"--created-at", "SQL",
	 "creation time (default: the time of the claim)", &map.created, NULL},
	{"--pending", "SQL",
	 "predicate of unsent rows, e.g. \"sent_at IS NULL\" "
	 "(default: every row)",
	 &map.pending, NULL},
	{"--done", "SQL",
	 "once sent: delete (default), or an assignment such as "
	 "\"sent_at = now()\"",
	 &map.done, NULL},
	{"--channel", "NAME",
	 "LISTEN on the application's own NOTIFY channel (then no "
	 "trigger is added)",
	 &map.channel, NULL},
	{"--shards", "N",
	 "shards of the ordered modes (default 64); 0: concurrent "
	 "mode only, no shard column",
	 &shards_arg, NULL},
	{"--capture", "MODE",
	 "table (default): the relay claims the rows; wal: it streams "
	 "each row's insert from a replication slot, so rows the "
	 "application deletes in the inserting transaction are relayed "
	 "too (wal_level = logical; no --pending, --done, --channel)",
	 &capture, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};
static const cli_cmd_t adopt_cmd = {
	.name = "adopt",
	.usage = "usage: pgoutbox adopt SCHEMA.TABLE --name NAME "
		 "[--id COL] [--topic SQL] [--key SQL] [--type SQL]\n"
		 "         [--payload SQL] [--headers SQL] "
		 "[--created-at SQL] [--pending SQL] [--done SQL]\n"
		 "         [--channel NAME] [--shards N] [--capture MODE]",
	.summary = "Lets the relay drain an outbox table the "
		   "application already has, as queue NAME\n"
		   "(`pgoutbox relay --queue NAME`).  Checks the table "
		   "and the map, adds only what\nthe relay needs in "
		   "one transaction and lists it; `pgoutbox unadopt "
		   "NAME` removes it.",
	.details = "Defaults follow Debezium's outbox table (id, "
		   "aggregatetype, aggregateid, type,\npayload), every "
		   "row pending and deleted once sent.  With --capture "
		   "wal the relay streams\nthe table's inserts from the "
		   "slot pgoutbox_NAME instead (docs/adopt.md).  See "
		   "docs/adopt.md.",
	.opts = adopt_opts,
	.flags = flags,
	.min_args = 1,
	.max_args = 1,
	.args_help = "SCHEMA.TABLE: the application's outbox table",
};
int cmd_adopt(int argc, char **argv)
{
	pgo_error_t err;
	PGconn *conn = NULL;
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &adopt_cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	rc = EXIT_USAGE;
	map.table = cli.args[0];
	map.shards = 64;
	if (!map.name) {
		cli_error("adopt", "--name is required");
		goto out;
	}
	if (shards_arg) {
		char *end;
		long n = strtol(shards_arg, &end, 10);

		if (!*shards_arg || *end || n < 0 || n > 4096) {
			cli_error("adopt",
				  "--shards must be a number from 0 to 4096, "
				  "not \"%s\"",
				  shards_arg);
			goto out;
		}
		map.shards = (int)n;
	}
	if (capture && strcmp(capture, "table") != 0 &&
	    strcmp(capture, "wal") != 0) {
		cli_error("adopt", "--capture is table or wal, not \"%s\"",
			  capture);
		goto out;
	}
	rc = EXIT_FAIL;
	conn = cli_connect(cli.conf, "pgoutbox adopt");
	if (!conn)
		goto out;
	if (pgo_adopt_capture(conn, &map, capture, print_line, NULL, &err) !=
	    PGO_OK) {
		cli_error("adopt", "%s", err.msg);
		/* A map that does not fit is the operator's to fix. */
		rc = err.retriable ? EXIT_FAIL : EXIT_USAGE;
		goto out;
	}
	rc = EXIT_OK;
out:
	if (conn)
		PQfinish(conn);
	cli_free(&cli);
	return rc;
}

int cmd_unadopt(int argc, char **argv)
{
	const cli_cmd_t cmd = {
		.name = "unadopt",
		.usage = "usage: pgoutbox unadopt NAME",
		.summary = "Removes what `pgoutbox adopt` added to the table "
			   "of NAME, and the map, in one\ntransaction; the "
			   "application's rows stay as they are.",
		.flags = flags,
		.min_args = 1,
		.max_args = 1,
		.args_help = "NAME: the queue name given to adopt --name",
	};
	pgo_error_t err;
	PGconn *conn = NULL;
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	rc = EXIT_FAIL;
	conn = cli_connect(cli.conf, "pgoutbox unadopt");
	if (!conn)
		goto out;
	if (pgo_unadopt(conn, cli.args[0], print_line, NULL, &err) != PGO_OK) {
		cli_error("unadopt", "%s", err.msg);
		rc = err.retriable ? EXIT_FAIL : EXIT_USAGE;
		goto out;
	}
	rc = EXIT_OK;
out:
	if (conn)
		PQfinish(conn);
	cli_free(&cli);
	return rc;
}
