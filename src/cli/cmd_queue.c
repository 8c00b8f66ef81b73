/*
 * cmd_queue.c — `pgoutbox queue create|list|stats|dead|retry|purge|enqueue`:
 * the operator's commands on work queues.  Each parses its flags and calls
 * the library (queue.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pgo_int.h"

static const char *const flags[] = {"--db", "--db-file", "--log-level", NULL};

static int parse_int(const char *what, const char *s, long long lo,
		     long long hi, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		cli_error("queue",
			  "%s must be a whole number from %lld to "
			  "%lld, not \"%s\"",
			  what, lo, hi, s);
		return EXIT_USAGE;
	}
	return 0;
}

int cmd_queue(int argc, char **argv)
{
	const char *shards_s = "64", *queue = NULL, *limit_s = "50";
	const char *kind = "work";
	const char *run_at = NULL, *prio_s = "0", *unique = NULL;
	bool yes = false, dead = false, x1 = false, x2 = false, x3 = false;
	bool x4 = false, x5 = false, x6 = false, x7 = false;
	const cli_opt_t opts[] = {
		{"--shards", "N", "create: shards of the queue (1-4096)",
		 &shards_s, &x1},
		{"--kind", "KIND",
		 "create: work (the default: jobs for `pgoutbox worker`) or "
		 "outbox (events for `pgoutbox relay --queue NAME`)",
		 &kind, &x7},
		{"--queue", "NAME", "retry: the dead letter's queue", &queue,
		 &x2},
		{"--limit", "N", "dead: how many to show (newest first)",
		 &limit_s, &x3},
		{"--run-at", "TIME", "enqueue: not before (timestamptz)",
		 &run_at, &x4},
		{"--priority", "N", "enqueue: higher runs first", &prio_s, &x5},
		{"--unique-key", "KEY",
		 "enqueue: at most one queued job per key", &unique, &x6},
		{"--dead", NULL, "purge: the dead letters instead of the jobs",
		 NULL, &dead},
		{"--yes", NULL, "purge: really delete", NULL, &yes},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "queue",
		.usage = "usage: pgoutbox queue create NAME [--shards N] "
			 "[--kind work|outbox]\n"
			 "       pgoutbox queue list\n"
			 "       pgoutbox queue stats NAME\n"
			 "       pgoutbox queue dead NAME [--limit N]\n"
			 "       pgoutbox queue retry ID --queue NAME\n"
			 "       pgoutbox queue purge NAME [--dead] --yes\n"
			 "       pgoutbox queue enqueue NAME PAYLOAD "
			 "[--run-at T] [--priority N] [--unique-key K]",
		.summary = "Manages work queues: tables pgoutbox.NAME drained "
			   "by `pgoutbox worker`.",
		.details =
			"Applications enqueue in their own transaction with\n"
			"  SELECT pgoutbox.enqueue('NAME', '{...}'::jsonb "
			"[, run_at, priority, unique_key]);\n"
			"`create --kind outbox` makes an outbox of its own "
			"instead (one per service\nsharing a database): "
			"producers write it with\n"
			"  SELECT pgoutbox.send_to('NAME', topic, key, type, "
			"payload [, headers]);\n"
			"and `pgoutbox relay --queue NAME` relays it.\n"
			"`retry` moves a dead letter back into its queue "
			"with its attempts reset.\n`purge` deletes every "
			"job of a queue (or with --dead its dead letters) "
			"and\nasks nothing: it requires --yes.",
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
	long long num = 0;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	cli_log_setup(cli.conf);
	sub = cli.args[0];
	rc = EXIT_USAGE;
	if (strcmp(sub, "list") == 0) {
		if (cli.nargs != 1)
			goto usage;
	} else if (strcmp(sub, "create") == 0 || strcmp(sub, "stats") == 0 ||
		   strcmp(sub, "dead") == 0 || strcmp(sub, "purge") == 0) {
		if (cli.nargs != 2)
			goto usage;
		if (pgo_ident_check(cli.args[1], &err) != PGO_OK) {
			cli_error("queue", "queue %s", err.msg);
			goto out;
		}
		if (strcmp(sub, "create") == 0 &&
		    pgo_queue_name_check(cli.args[1], &err) != PGO_OK) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
		if (strcmp(sub, "create") == 0 && strcmp(kind, "work") != 0 &&
		    strcmp(kind, "outbox") != 0) {
			cli_error("queue",
				  "--kind is work or outbox, not \"%s\"", kind);
			goto out;
		}
	} else if (strcmp(sub, "retry") == 0) {
		if (cli.nargs != 2 || !queue)
			goto usage;
		if (parse_int("ID", cli.args[1], 1, INT64_MAX, &num))
			goto out;
	} else if (strcmp(sub, "enqueue") == 0) {
		if (cli.nargs != 3)
			goto usage;
	} else {
		cli_error("queue",
			  "unknown subcommand \"%s\" (create, list, "
			  "stats, dead, retry, purge, enqueue)",
			  sub);
		goto out;
	}
	if (strcmp(sub, "purge") == 0 && !yes) {
		cli_error("queue",
			  "purge deletes every %s of queue %s: add "
			  "--yes to confirm",
			  dead ? "dead letter" : "job", cli.args[1]);
		goto out;
	}
	rc = EXIT_FAIL;
	conn = cli_connect(cli.conf, "pgoutbox queue");
	if (!conn)
		goto out;
	if (pgo_schema_check(conn, &err) != PGO_OK) {
		cli_error("queue", "%s", err.msg);
		goto out;
	}
	if (strcmp(sub, "create") == 0) {
		if (parse_int("--shards", shards_s, 1, 4096, &num)) {
			rc = EXIT_USAGE;
			goto out;
		}
		if (pgo_queue_create_kind(conn, cli.args[1], (int)num, kind,
					  &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
		printf("%s queue %s created (table pgoutbox.%s, %lld "
		       "shards)\n",
		       kind, cli.args[1], cli.args[1], num);
	} else if (strcmp(sub, "list") == 0) {
		if (pgo_queue_list(conn, stdout, &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
	} else if (strcmp(sub, "stats") == 0) {
		if (pgo_queue_stats(conn, cli.args[1], stdout, &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
	} else if (strcmp(sub, "dead") == 0) {
		if (parse_int("--limit", limit_s, 1, 100000, &num)) {
			rc = EXIT_USAGE;
			goto out;
		}
		if (pgo_queue_dead(conn, cli.args[1], (int)num, stdout, &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
	} else if (strcmp(sub, "retry") == 0) {
		if (pgo_queue_retry(conn, queue, num, &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
		printf("dead letter %lld moved back into queue %s\n", num,
		       queue);
	} else if (strcmp(sub, "purge") == 0) {
		int64_t count = 0;

		if (pgo_queue_purge(conn, cli.args[1], dead, &count, &err)) {
			cli_error("queue", "%s", err.msg);
			goto out;
		}
		printf("purged %lld %s from queue %s\n", (long long)count,
		       dead ? "dead letter(s)" : "job(s)", cli.args[1]);
	} else {
		pgo_enqueuer_t *q = pgo_enqueuer_new(conn, cli.args[1], &err);
		pgo_job_opts_t jo = {.size = sizeof(jo),
				     .run_at = run_at,
				     .unique_key = unique};
		int64_t id = 0;

		if (!q) {
			cli_error("queue", "%s", err.msg);
			rc = EXIT_USAGE;
			goto out;
		}
		if (parse_int("--priority", prio_s, -1000000, 1000000, &num)) {
			pgo_enqueuer_destroy(q);
			rc = EXIT_USAGE;
			goto out;
		}
		jo.priority = (int)num;
		if (pgo_enqueue(q, cli.args[2], &jo, &id) != PGO_OK) {
			cli_error("queue", "%s", pgo_enqueuer_errmsg(q));
			pgo_enqueuer_destroy(q);
			goto out;
		}
		pgo_enqueuer_destroy(q);
		printf("%lld\n", (long long)id);
	}
	rc = EXIT_OK;
	goto out;
usage:
	cli_error("queue", "wrong arguments for \"%s\" (see --help)", sub);
out:
	if (conn)
		PQfinish(conn);
	cli_free(&cli);
	return rc;
}
