/*
 * cmd_queue.c — `pgoutbox queue create|list|stats|dead|retry|purge|drop|
 * enqueue|pause|resume|set`: the operator's commands on queues (dead and
 * retry are the older names of `pgoutbox dead list|retry`, cmd_dead.c).  A
 * table maps each action to a short handler that checks its flags and calls
 * the library (queue.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "queue/queue.h"

static const char *const flags[] = {"--db", "--db-file", "--log-level", NULL};

/* The options of `pgoutbox queue`, each for one action (the help says
 * which); the text as given, checked by the action that uses it. */
static struct {
	const char *shards;	 /* create: shards of the queue */
	const char *kind;	 /* create: work or outbox */
	const char *capture;	 /* create: table or wal (an outbox's) */
	const char *dead_queue;	 /* retry: the queue the dead letter was in */
	const char *limit;	 /* dead: how many to show */
	const char *run_at;	 /* enqueue: not before */
	const char *priority;	 /* enqueue: higher runs first */
	const char *unique_key;	 /* enqueue: at most one queued job per key */
	const char *group;	 /* enqueue: the job's group */
	const char *depends_on;	 /* enqueue: ids done first, comma-separated */
	const char *group_conc;	 /* set: jobs of one group at once */
	const char *max_running; /* set: jobs of the queue at once */
	const char *rate;	 /* set: jobs started per second */
	const char *burst;	 /* set: the rate's bucket */
	const char *from;	 /* replay: published at or after */
	const char *to;		 /* replay: published before */
	const char *from_id;	 /* replay: ids from */
	const char *to_id;	 /* replay: ids up to */
	const char *topic;	 /* replay: of this topic only */
	const char *key;	 /* replay: of this key only */
	bool if_not_exists; /* create: an existing queue as asked is fine */
	bool dead_letters;  /* purge: the dead letters, not the jobs */
	bool yes;	    /* purge, drop: confirmed */
	bool fair;	    /* set: claims fair across groups (keys) */
	bool no_fair;	    /* set: ... no longer */
} opt = {.shards = "64",
	 .kind = "work",
	 .capture = "table",
	 .limit = "50",
	 .priority = "0"};

static const cli_opt_t opts[] = {
	{"--shards", "N", "create: shards of the queue (1-4096)", &opt.shards,
	 NULL},
	{"--kind", "KIND",
	 "create: work (the default: jobs for `pgoutbox worker`) or "
	 "outbox (events for `pgoutbox relay --queue NAME`)",
	 &opt.kind, NULL},
	{"--capture", "MODE",
	 "create: table (the default: a row per event) or wal (an outbox "
	 "written as logical messages, streamed from a replication slot; "
	 "docs/wal.md)",
	 &opt.capture, NULL},
	{"--if-not-exists", NULL,
	 "create: exit 0 when the queue exists with this kind and shards", NULL,
	 &opt.if_not_exists},
	{"--queue", "NAME", "retry: the dead letter's queue", &opt.dead_queue,
	 NULL},
	{"--limit", "N", "dead: how many to show (newest first)", &opt.limit,
	 NULL},
	{"--run-at", "TIME", "enqueue: not before (timestamptz)", &opt.run_at,
	 NULL},
	{"--priority", "N", "enqueue: higher runs first", &opt.priority, NULL},
	{"--unique-key", "KEY", "enqueue: at most one queued job per key",
	 &opt.unique_key, NULL},
	{"--group", "KEY",
	 "enqueue: the job's group (a tenant): capped by "
	 "--group-concurrency, claimed fairly across groups",
	 &opt.group, NULL},
	{"--depends-on", "ID,...",
	 "enqueue: jobs of the queue that must be done first (the job waits "
	 "while one is queued or a dead letter)",
	 &opt.depends_on, NULL},
	{"--group-concurrency", "N",
	 "set: jobs of one group running at once (1: in order; 0: no limit)",
	 &opt.group_conc, NULL},
	{"--max-running", "N",
	 "set: jobs of the queue running at once, all workers (0: no limit)",
	 &opt.max_running, NULL},
	{"--rate", "N",
	 "set: jobs started per second, all workers (0: no limit)", &opt.rate,
	 NULL},
	{"--burst", "N", "set: the rate's bucket (default: one second's worth)",
	 &opt.burst, NULL},
	{"--fair", NULL,
	 "set: claims fair across groups without a limit (an outbox: its "
	 "concurrent relays take keys round-robin; relays read it when they "
	 "start)",
	 NULL, &opt.fair},
	{"--no-fair", NULL, "set: claims no longer fair (without a limit)",
	 NULL, &opt.no_fair},
	{"--from", "TIME",
	 "replay: events published at or after TIME (timestamptz)", &opt.from,
	 NULL},
	{"--to", "TIME", "replay: events published before TIME", &opt.to, NULL},
	{"--from-id", "ID", "replay: events with ids from ID (0: all)",
	 &opt.from_id, NULL},
	{"--to-id", "ID", "replay: events with ids up to ID", &opt.to_id, NULL},
	{"--topic", "TOPIC", "replay: events of this topic only", &opt.topic,
	 NULL},
	{"--key", "KEY", "replay: events of this key only", &opt.key, NULL},
	{"--dead", NULL, "purge: the dead letters instead of the jobs", NULL,
	 &opt.dead_letters},
	{"--yes", NULL, "purge, drop: really delete", NULL, &opt.yes},
	{NULL, NULL, NULL, NULL, NULL},
};

/* A queue name given to stats, dead, purge and create. */
static int check_name(const char *name)
{
	pgo_error_t err;

	if (pgo_ident_check(name, &err) != PGO_OK) {
		cli_error("queue", "queue %s", err.msg);
		return EXIT_USAGE;
	}
	return 0;
}

/* The end of an action: conn closed, rc the library's result, the error
 * printed when it failed. */
static int finish(PGconn *conn, int rc, const pgo_error_t *err)
{
	if (rc != PGO_OK)
		cli_error("queue", "%s", err->msg);
	PQfinish(conn);
	return rc == PGO_OK ? EXIT_OK : EXIT_FAIL;
}

/* create's flags and name, checked before connecting; 0 or EXIT_USAGE. */
static int check_create(const char *name, long long *shards)
{
	pgo_error_t err;

	if (check_name(name))
		return EXIT_USAGE;
	if (pgo_queue_name_check(name, &err) != PGO_OK) {
		cli_error("queue", "%s", err.msg);
		return EXIT_USAGE;
	}
	if (strcmp(opt.kind, "work") != 0 && strcmp(opt.kind, "outbox") != 0) {
		cli_error("queue", "--kind is work or outbox, not \"%s\"",
			  opt.kind);
		return EXIT_USAGE;
	}
	if (strcmp(opt.capture, "table") != 0 &&
	    strcmp(opt.capture, "wal") != 0) {
		cli_error("queue", "--capture is table or wal, not \"%s\"",
			  opt.capture);
		return EXIT_USAGE;
	}
	if (strcmp(opt.capture, "wal") == 0)
		opt.kind = "outbox"; /* only an outbox is captured so */
	return cli_parse_int("queue", "--shards", opt.shards, 1, 4096, shards);
}

/* --if-not-exists: queue name as it exists against the kind and shards
 * asked for.  EXIT_OK when it is as asked (said on stdout), EXIT_USAGE
 * when it is not (another kind or shards: the command asked for
 * something else), -1 when there is no such queue or it cannot be
 * read. */
static int queue_exists(PGconn *conn, const char *name, long long shards)
{
	const char *params[1] = {name};
	PGresult *res = PQexecParams(conn,
				     "SELECT kind, shards FROM pgoutbox.queues "
				     "WHERE name = $1",
				     1, NULL, params, NULL, NULL, 0);
	int rc = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		const char *kind = PQgetvalue(res, 0, 0);
		long long have = atoll(PQgetvalue(res, 0, 1));

		if (strcmp(kind, opt.kind) == 0 && have == shards) {
			printf("%s queue %s exists (table pgoutbox.%s, %lld "
			       "shards): nothing done\n",
			       kind, name, name, have);
			rc = EXIT_OK;
		} else {
			cli_error(
				"queue",
				"queue %s exists with kind %s and %lld shards, "
				"not kind %s and %lld shards as asked: "
				"nothing done",
				name, kind, have, opt.kind, shards);
			rc = EXIT_USAGE;
		}
	}
	PQclear(res);
	return rc;
}

/* An outbox captured through the WAL: the slot and the queue
 * (pgoutbox.create_queue(..., capture)), in a transaction
 * of its own, since PostgreSQL makes a logical slot only in a
 * transaction that has written nothing. */
static int create_wal(PGconn *conn, const char *name, long long shards,
		      pgo_error_t *err)
{
	char nshards[16];
	const char *params[2] = {name, nshards};
	PGresult *res;
	int rc = PGO_OK;

	snprintf(nshards, sizeof(nshards), "%lld", shards);
	res = PQexecParams(conn,
			   "SELECT pgoutbox.create_queue($1, $2::integer, "
			   "'outbox', 'wal')",
			   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *hint =
			PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

		rc = pgo_error_set(err, PGO_ERR_DB, 0,
				   "creating the queue: %s%s%s",
				   pgo_pq_msg(conn, res), hint ? " " : "",
				   hint ? hint : "");
	}
	PQclear(res);
	return rc;
}

static int queue_create(cli_t *cli)
{
	const char *name = cli->args[1];
	pgo_error_t err;
	long long shards;
	PGconn *conn;
	int rc;

	if (check_create(name, &shards))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	if (opt.if_not_exists && (rc = queue_exists(conn, name, shards)) >= 0)
		goto out;
	if (strcmp(opt.capture, "wal") == 0)
		rc = create_wal(conn, name, shards, &err);
	else
		rc = pgo_queue_create_kind(conn, name, (int)shards, opt.kind,
					   &err);
	if (rc == PGO_OK && strcmp(opt.capture, "wal") == 0) {
		printf("outbox queue %s created, captured through the WAL "
		       "(slot pgoutbox_%s)\n",
		       name, name);
		rc = EXIT_OK;
	} else if (rc == PGO_OK) {
		printf("%s queue %s created (table pgoutbox.%s, %lld "
		       "shards)\n",
		       opt.kind, name, name, shards);
		rc = EXIT_OK;
	} else if (!opt.if_not_exists ||
		   /* or another deploy created it meanwhile */
		   (rc = queue_exists(conn, name, shards)) < 0) {
		cli_error("queue", "%s", err.msg);
		rc = EXIT_FAIL;
	}
out:
	PQfinish(conn);
	return rc;
}

static int queue_list(cli_t *cli)
{
	pgo_error_t err;
	PGconn *conn;
	int rc;

	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	return finish(conn, pgo_queue_list(conn, stdout, &err), &err);
}

static int queue_stats(cli_t *cli)
{
	pgo_error_t err;
	PGconn *conn;
	int rc;

	if (check_name(cli->args[1]))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	return finish(conn, pgo_queue_stats(conn, cli->args[1], stdout, &err),
		      &err);
}

static int queue_dead(cli_t *cli)
{
	pgo_error_t err;
	long long limit;
	PGconn *conn;
	int rc;

	if (check_name(cli->args[1]) ||
	    cli_parse_int("queue", "--limit", opt.limit, 1, 100000, &limit))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	return finish(
		conn,
		pgo_queue_dead(conn, cli->args[1], (int)limit, stdout, &err),
		&err);
}

static int queue_retry(cli_t *cli)
{
	pgo_error_t err;
	long long id;
	PGconn *conn;
	int rc;

	if (!opt.dead_queue) {
		cli_error("queue", "retry: --queue is required (the queue "
				   "the dead letter came from)");
		return EXIT_USAGE;
	}
	if (cli_parse_int("queue", "ID", cli->args[1], 1, INT64_MAX, &id))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	rc = pgo_queue_retry(conn, opt.dead_queue, id, &err);
	if (rc == PGO_OK)
		printf("dead letter %lld moved back into queue %s\n", id,
		       opt.dead_queue);
	return finish(conn, rc, &err);
}

/* An outbox queue of its own, with its table and, captured through the
 * WAL, its replication slot (pgoutbox.drop_queue()). */
static int queue_drop(cli_t *cli)
{
	const char *name = cli->args[1];
	const char *params[1] = {name};
	PGresult *res;
	PGconn *conn;
	int rc;

	if (check_name(name))
		return EXIT_USAGE;
	if (!opt.yes) {
		cli_error("queue",
			  "drop deletes queue %s and its events not yet "
			  "relayed: add --yes to confirm",
			  name);
		return EXIT_USAGE;
	}
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	res = PQexecParams(conn, "SELECT pgoutbox.drop_queue($1)", 1, NULL,
			   params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		printf("queue %s dropped\n", name);
		rc = EXIT_OK;
	} else {
		cli_error("queue", "%s", pgo_pq_msg(conn, res));
		rc = EXIT_FAIL;
	}
	PQclear(res);
	PQfinish(conn);
	return rc;
}

static int queue_purge(cli_t *cli)
{
	const char *name = cli->args[1];
	pgo_error_t err;
	int64_t count = 0;
	PGconn *conn;
	int rc;

	if (check_name(name))
		return EXIT_USAGE;
	if (!opt.yes) {
		cli_error("queue",
			  "purge deletes every %s of queue %s: add "
			  "--yes to confirm",
			  opt.dead_letters ? "dead letter" : "job", name);
		return EXIT_USAGE;
	}
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	rc = pgo_queue_purge(conn, name, opt.dead_letters, &count, &err);
	if (rc == PGO_OK)
		printf("purged %lld %s from queue %s\n", (long long)count,
		       opt.dead_letters ? "dead letter(s)" : "job(s)", name);
	return finish(conn, rc, &err);
}

/* --depends-on: comma-separated ids into ids[max]; 0 or EXIT_USAGE. */
static int parse_ids(const char *s, int64_t *ids, size_t max, size_t *n)
{
	*n = 0;
	while (s && *s) {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(s, &end, 10);
		if (end == s || errno || v < 1 || (*end && *end != ',') ||
		    *n == max) {
			cli_error("queue",
				  "--depends-on takes up to %zu job ids "
				  "separated by commas, not \"%s\"",
				  max, opt.depends_on);
			return EXIT_USAGE;
		}
		ids[(*n)++] = v;
		s = *end ? end + 1 : end;
	}
	return 0;
}

static int queue_enqueue(cli_t *cli)
{
	pgo_job_opts_t job = {.size = sizeof(job),
			      .run_at = opt.run_at,
			      .unique_key = opt.unique_key,
			      .group_key = opt.group};
	int64_t deps[1000];
	pgo_enqueuer_t *q;
	pgo_error_t err;
	long long priority;
	int64_t id = 0;
	PGconn *conn;
	int rc;

	if (parse_ids(opt.depends_on, deps, 1000, &job.n_depends_on))
		return EXIT_USAGE;
	job.depends_on = deps;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	rc = EXIT_USAGE; /* a bad name or --priority */
	q = pgo_enqueuer_new(conn, cli->args[1], &err);
	if (!q)
		cli_error("queue", "%s", err.msg);
	else if (cli_parse_int("queue", "--priority", opt.priority, -1000000,
			       1000000, &priority) == 0) {
		job.priority = (int)priority;
		if (pgo_enqueue(q, cli->args[2], &job, &id) == PGO_OK) {
			printf("%lld\n", (long long)id);
			rc = EXIT_OK;
		} else {
			cli_error("queue", "%s", pgo_enqueuer_errmsg(q));
			rc = EXIT_FAIL;
		}
	}
	pgo_enqueuer_destroy(q);
	PQfinish(conn);
	return rc;
}

static int queue_pause_resume(cli_t *cli, bool paused)
{
	const char *name = cli->args[1];
	pgo_error_t err;
	PGconn *conn;
	int rc, changed = 0;

	if (check_name(name))
		return EXIT_USAGE;
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	rc = pgo_queue_pause(conn, name, paused, &changed, &err);
	if (rc == PGO_OK)
		printf("queue %s %s%s\n", name, changed ? "" : "was already ",
		       paused ? "paused" : (changed ? "resumed" : "running"));
	return finish(conn, rc, &err);
}

static int queue_pause(cli_t *cli)
{
	return queue_pause_resume(cli, true);
}

static int queue_resume(cli_t *cli)
{
	return queue_pause_resume(cli, false);
}

/* A limit of set: -1 (keep) when not given. */
static int parse_limit(const char *what, const char *s, long long *out)
{
	*out = -1;
	return s ? cli_parse_int("queue", what, s, 0, INT32_MAX, out) : 0;
}

static int queue_set(cli_t *cli)
{
	const char *name = cli->args[1];
	long long g, m, b;
	double rate = -1;
	pgo_error_t err;
	PGconn *conn;
	char *end;
	int rc;

	if (check_name(name) ||
	    parse_limit("--group-concurrency", opt.group_conc, &g) ||
	    parse_limit("--max-running", opt.max_running, &m) ||
	    parse_limit("--burst", opt.burst, &b))
		return EXIT_USAGE;
	if (opt.rate) {
		rate = strtod(opt.rate, &end);
		if (end == opt.rate || *end || !(rate >= 0 && rate <= 1e9)) {
			cli_error("queue",
				  "--rate must be a number of jobs per "
				  "second from 0 to 1e9, not \"%s\"",
				  opt.rate);
			return EXIT_USAGE;
		}
	}
	if (opt.fair && opt.no_fair) {
		cli_error("queue", "--fair and --no-fair: one or the other");
		return EXIT_USAGE;
	}
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	rc = PGO_OK;
	/* An outbox takes --fair alone: its limits are refused. */
	if (g >= 0 || m >= 0 || rate >= 0 || b >= 0 ||
	    !(opt.fair || opt.no_fair))
		rc = pgo_queue_set(conn, name, (int)g, (int)m, rate, (int)b,
				   &err);
	if (rc == PGO_OK && (opt.fair || opt.no_fair))
		rc = pgo_queue_set_fair(conn, name, opt.fair, &err);
	if (rc == PGO_OK)
		rc = pgo_queue_controls(conn, name, stdout, &err);
	return finish(conn, rc, &err);
}

/* Archived events sent again: pgoutbox.replay() in its own transaction
 * (sql/schema/functions/replay.sql). */
static int queue_replay(cli_t *cli)
{
	const char *name = cli->args[1];
	const char *p[7] = {name,    opt.from,	  opt.to,   opt.topic,
			    opt.key, opt.from_id, opt.to_id};
	long long id;
	PGresult *res;
	PGconn *conn;
	int rc;

	if (check_name(name) ||
	    (opt.from_id && cli_parse_int("queue", "--from-id", opt.from_id, 0,
					  INT64_MAX, &id)) ||
	    (opt.to_id &&
	     cli_parse_int("queue", "--to-id", opt.to_id, 0, INT64_MAX, &id)))
		return EXIT_USAGE;
	if (!opt.from && !opt.to && !opt.from_id && !opt.to_id) {
		cli_error("queue", "replay: give --from/--to (publication "
				   "time) or --from-id/--to-id; --from-id 0 "
				   "replays the whole archive");
		return EXIT_USAGE;
	}
	conn = cli_connect_schema(cli->conf, "pgoutbox queue", &rc);
	if (!conn)
		return rc;
	res = PQexecParams(conn,
			   "SELECT pgoutbox.replay($1, $2::timestamptz, "
			   "$3::timestamptz, $4, $5, $6::bigint, $7::bigint)",
			   7, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		printf("queued %s archived event(s) of %s again (header "
		       "pgoutbox-replay-of)\n",
		       PQgetvalue(res, 0, 0), name);
		rc = EXIT_OK;
	} else {
		const char *hint =
			PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

		cli_error("queue", "%s%s%s", pgo_pq_msg(conn, res),
			  hint ? " " : "", hint ? hint : "");
		rc = EXIT_FAIL;
	}
	PQclear(res);
	PQfinish(conn);
	return rc;
}

static const cli_sub_t actions[] = {
	{"create",
	 "create NAME [--shards N] [--kind work|outbox] [--capture table|wal] "
	 "[--if-not-exists]",
	 1, queue_create},
	{"list", "list", 0, queue_list},
	{"stats", "stats NAME", 1, queue_stats},
	{"dead", "dead NAME [--limit N] (as: pgoutbox dead list --queue NAME)",
	 1, queue_dead},
	{"retry", "retry ID --queue NAME (as: pgoutbox dead retry)", 1,
	 queue_retry},
	{"purge", "purge NAME [--dead] --yes", 1, queue_purge},
	{"drop", "drop NAME --yes", 1, queue_drop},
	{"enqueue",
	 "enqueue NAME PAYLOAD [--run-at T] [--priority N] [--unique-key K] "
	 "[--group KEY] [--depends-on ID,...]",
	 2, queue_enqueue},
	{"pause", "pause NAME", 1, queue_pause},
	{"resume", "resume NAME", 1, queue_resume},
	{"set",
	 "set NAME [--group-concurrency N] [--max-running N] [--rate N] "
	 "[--burst N] [--fair|--no-fair]",
	 1, queue_set},
	{"replay",
	 "replay NAME [--from T] [--to T] [--from-id N] [--to-id N] "
	 "[--topic T] [--key K]",
	 1, queue_replay},
	{NULL, NULL, 0, NULL},
};

static const cli_cmd_t cmd = {
	.name = "queue",
	.subs = actions,
	.summary = "Manages work queues: tables pgoutbox.NAME drained "
		   "by `pgoutbox worker`.",
	.details = "Applications enqueue in their own transaction with\n"
		   "  SELECT pgoutbox.enqueue('NAME', '{...}'::jsonb "
		   "[, run_at, priority, unique_key,\n"
		   "   topic, key, group_key, depends_on]);\n"
		   "`create --kind outbox` makes an outbox of its own "
		   "instead (one per service\nsharing a database): "
		   "producers write it with\n"
		   "  SELECT pgoutbox.send_to('NAME', topic, key, type, "
		   "payload [, headers]);\n"
		   "and `pgoutbox relay --queue NAME` relays it.\n"
		   "`retry` moves a dead letter back into its queue "
		   "with its attempts reset.\n`purge` deletes every "
		   "job of a queue (or with --dead its dead letters) "
		   "and\nasks nothing: it requires --yes.\n"
		   "`pause` stops the claims of the workers (or of an "
		   "outbox's relays; producers\nstill enqueue) until "
		   "`resume`; `set` sets the limits of a work queue (0\n"
		   "removes one), or with --fair makes the claims of a "
		   "queue (an outbox's too) fair\nacross groups, and "
		   "prints them.\n"
		   "`replay` queues archived events again (retention "
		   "archive keeps them), new ids\nin their original order, "
		   "each with the header pgoutbox-replay-of: ORIGINAL_ID.",
	.opts = opts,
	.flags = flags,
	.min_args = 1,
	.max_args = 3,
};

int cmd_queue(int argc, char **argv)
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
