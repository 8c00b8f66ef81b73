/*
 * cmd_dead.c — `pgoutbox dead list|show|retry|discard`: the dead letters
 * of work queues and outboxes.  Retry and discard act on the ids given
 * (--ids), or on every dead letter of the queue matching --topic and
 * --type (--all when there is no filter), in one statement each
 * (pgoutbox.dead_retry / dead_discard); the library is dead.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pgoutbox.h"

static const char *const flags[] = {"--db", "--db-file", "--log-level", NULL};

/* The options of `pgoutbox dead`: the filter, and list's limit. */
static struct {
	const char *queue; /* the dead letters' queue */
	const char *ids;   /* retry, discard: "1,2,3" */
	const char *topic; /* only of this topic */
	const char *type;  /* only of this type */
	const char *limit; /* list: how many */
	bool all;	   /* retry, discard: every one matching */
} opt = {.limit = "50"};

static const cli_opt_t opts[] = {
	{"--queue", "NAME", "the dead letters' queue (required but for list)",
	 &opt.queue, NULL},
	{"--ids", "ID,...", "retry, discard: these dead letters", &opt.ids,
	 NULL},
	{"--topic", "TOPIC", "only those of this topic", &opt.topic, NULL},
	{"--type", "TYPE", "only those of this type", &opt.type, NULL},
	{"--all", NULL,
	 "retry, discard: every dead letter of the queue (that matches "
	 "--topic and --type)",
	 NULL, &opt.all},
	{"--limit", "N", "list: how many to show (newest first)", &opt.limit,
	 NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static int need_queue(const char *action)
{
	pgo_error_t err;

	if (!opt.queue) {
		cli_error("dead", "%s: --queue NAME is required", action);
		return EXIT_USAGE;
	}
	if (pgo_ident_check(opt.queue, &err) != PGO_OK) {
		cli_error("dead", "queue %s", err.msg);
		return EXIT_USAGE;
	}
	return 0;
}

static int finish(PGconn *conn, int rc, const pgo_error_t *err)
{
	if (rc != PGO_OK)
		cli_error("dead", "%s", err->msg);
	PQfinish(conn);
	return cli_exit_code(rc);
}

static int dead_list(cli_t *cli)
{
	pgo_error_t err;
	long long limit;
	PGconn *conn;
	int rc;

	if (cli_parse_int("dead", "--limit", opt.limit, 1, 100000, &limit))
		return EXIT_USAGE;
	if (opt.queue && need_queue("list"))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox dead", &rc);
	if (!conn)
		return rc;
	rc = pgo_dead_list(conn, opt.queue, opt.topic, opt.type, (int)limit,
			   stdout, &err);
	return finish(conn, rc, &err);
}

static int dead_show(cli_t *cli)
{
	pgo_error_t err;
	long long id;
	PGconn *conn;
	int rc;

	if (need_queue("show") ||
	    cli_parse_int("dead", "ID", cli->args[1], 1, INT64_MAX, &id))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox dead", &rc);
	if (!conn)
		return rc;
	return finish(conn, pgo_dead_show(conn, opt.queue, id, stdout, &err),
		      &err);
}

/* --ids as numbers in ids (at most max); their count, or -1 with the
 * error printed. */
static int parse_ids(int64_t *ids, int max)
{
	char buf[4096], *save = NULL, *tok;
	long long id;
	int n = 0;

	if (strlen(opt.ids) >= sizeof(buf)) {
		cli_error("dead",
			  "--ids: too long (at most %zu characters; "
			  "use --topic/--type or several runs)",
			  sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, opt.ids);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == max) {
			cli_error("dead", "--ids: at most %d ids", max);
			return -1;
		}
		if (cli_parse_int("dead", "an id of --ids", tok, 1, INT64_MAX,
				  &id))
			return -1;
		ids[n++] = id;
	}
	if (n == 0)
		cli_error("dead", "--ids: no id given");
	return n ? n : -1;
}

/* retry and discard: the filter checked, then one statement. */
static int dead_act(cli_t *cli, bool retry)
{
	const char *action = retry ? "retry" : "discard";
	int64_t ids[1024], count = 0;
	pgo_error_t err;
	PGconn *conn;
	int rc, n = 0;

	if (need_queue(action))
		return EXIT_USAGE;
	if (opt.ids && opt.all) {
		cli_error("dead", "%s: --ids and --all exclude each other",
			  action);
		return EXIT_USAGE;
	}
	if (!opt.ids && !opt.all && !opt.topic && !opt.type) {
		cli_error("dead",
			  "%s: say which dead letters: --ids ID,..., "
			  "--topic, --type, or --all",
			  action);
		return EXIT_USAGE;
	}
	if (opt.ids && (n = parse_ids(ids, 1024)) < 0)
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox dead", &rc);
	if (!conn)
		return rc;
	rc = retry ? pgo_dead_retry(conn, opt.queue, n ? ids : NULL, n,
				    opt.topic, opt.type, &count, &err)
		   : pgo_dead_discard(conn, opt.queue, n ? ids : NULL, n,
				      opt.topic, opt.type, &count, &err);
	if (rc == PGO_OK)
		printf("%lld dead letter(s) %s queue %s\n", (long long)count,
		       retry ? "moved back into" : "discarded from", opt.queue);
	if (rc == PGO_OK && n && count < n)
		fprintf(stderr,
			"pgoutbox dead: %d of the ids given are not dead "
			"letters of queue %s\n",
			n - (int)count, opt.queue);
	return finish(conn, rc, &err);
}

static int dead_retry(cli_t *cli)
{
	return dead_act(cli, true);
}

static int dead_discard(cli_t *cli)
{
	return dead_act(cli, false);
}

static const cli_sub_t actions[] = {
	{"list", "list [--queue NAME] [--topic T] [--type T] [--limit N]", 0,
	 dead_list},
	{"show", "show ID --queue NAME", 1, dead_show},
	{"retry",
	 "retry --queue NAME (--ids ID,... | --all) [--topic T] [--type T]", 0,
	 dead_retry},
	{"discard",
	 "discard --queue NAME (--ids ID,... | --all) [--topic T] [--type T]",
	 0, dead_discard},
	{NULL, NULL, 0, NULL},
};

static const cli_cmd_t cmd = {
	.name = "dead",
	.subs = actions,
	.summary = "Lists, shows, retries and discards dead letters.",
	.details = "Dead letters are the jobs and events that failed their "
		   "last attempt\n(pgoutbox.dead_letters).  `retry` moves "
		   "them back into their queue with\ntheir ids, attempts "
		   "reset, due now (a queue captured through the WAL gets "
		   "them as new\nlogical messages with their ids, streamed "
		   "after what is already in it);\n`discard` deletes them.  "
		   "Each runs in "
		   "one\ntransaction, on the --ids given or on every dead "
		   "letter of the queue that\nmatches --topic and --type "
		   "(--all: no filter).  In SQL:\n"
		   "  SELECT pgoutbox.dead_retry('NAME', ids => '{1,2}');\n"
		   "  SELECT pgoutbox.dead_discard('NAME', topic => 'T');",
	.opts = opts,
	.flags = flags,
	.min_args = 1,
	.max_args = 2,
};

int cmd_dead(int argc, char **argv)
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
