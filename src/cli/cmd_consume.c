/*
 * cmd_consume.c — `pgoutbox consume`: read a Redis stream with a consumer
 * group and apply each message exactly once through the inbox.  Parses
 * flags and runs pgo_consumer_run() until SIGTERM.
 *
 * Exit status: 0 after SIGTERM/SIGINT (the message at hand finished),
 * 1 for what retrying cannot fix, 2 for bad flags, 3 after the
 * --exit-after-commit fault drill.
 */
#include <ctype.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "inbox/consume.h"
#include "pgoutbox.h"

#define EXIT_DRILL 3

static pgo_consumer_t *running;

static void on_stop(int sig)
{
	(void)sig;
	if (running)
		pgo_consumer_request_stop(running);
}

/* "250ms", "30s", "5m", "1h" -> ms; -1 when malformed. */
static int64_t duration_ms(const char *s)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
	char *end;
	long long n;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	n = strtoll(s, &end, 10);
	if (n < 0 || n > 24LL * 3600000)
		return -1;
	if (!*end)
		return n == 0 ? 0 : -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].unit) == 0)
			return n * units[i].ms;
	return -1;
}

/* Parses an optional duration flag into *ms; false (with a message) when
 * it is malformed. */
static bool duration_opt(const char *flag, const char *text, int64_t *ms)
{
	int64_t v;

	if (!text)
		return true;
	v = duration_ms(text);
	if (v < 0) {
		cli_error("consume",
			  "%s \"%s\" is not a duration (like 250ms, 30s, 5m)",
			  flag, text);
		return false;
	}
	*ms = v;
	return true;
}

static bool int_opt(const char *flag, const char *text, int min, int *out)
{
	char *end;
	long v;

	if (!text)
		return true;
	v = strtol(text, &end, 10);
	if (!*text || *end || v < min || v > 1000000) {
		cli_error("consume", "%s \"%s\" must be a whole number from %d",
			  flag, text, min);
		return false;
	}
	*out = (int)v;
	return true;
}

/* The options of `pgoutbox consume`, as given. */
static struct {
	const char *stream, *group, *consumer; /* where to read, as whom */
	const char *exec, *sql;		       /* the handler */
	const char *exec_timeout, *claim_idle, *block; /* durations */
	const char *count, *max_attempts;	       /* numbers */
	const char *from;			       /* a new group's start */
	const char *dedup_window;		       /* inbox claims kept */
	const char *exit_after_commit;		       /* fault drills */
	const char *request_timeout;		       /* a reply from PG */
} opt;

static const char *const flags[] = {
	"--db",	       "--db-file",	   "--redis", "--redis-file",
	"--log-level", "--metrics-listen", NULL};

static const cli_opt_t opts[] = {
	{"--stream", "NAME", "stream to read (required)", &opt.stream, NULL},
	{"--group", "NAME",
	 "consumer group, also the inbox's consumer (required)", &opt.group,
	 NULL},
	{"--consumer", "NAME",
	 "name in the group, stable across restarts (default: host "
	 "name)",
	 &opt.consumer, NULL},
	{"--exec", "CMD",
	 "handler: sh -c CMD, message JSON on stdin, exit 0 = done", &opt.exec,
	 NULL},
	{"--sql", "FUNCTION",
	 "handler: [schema.]FUNCTION(payload jsonb) in the inbox "
	 "transaction",
	 &opt.sql, NULL},
	{"--exec-timeout", "DURATION",
	 "kill the exec handler after this (default 30s)", &opt.exec_timeout,
	 NULL},
	{"--claim-idle", "DURATION",
	 "take over other consumers' entries idle this long (default "
	 "30s)",
	 &opt.claim_idle, NULL},
	{"--block", "DURATION", "XREADGROUP BLOCK for new entries (default 1s)",
	 &opt.block, NULL},
	{"--count", "N", "entries read per call (default 100, at most 100000)",
	 &opt.count, NULL},
	{"--max-attempts", "N",
	 "failures of one entry before it is skipped (default 10)",
	 &opt.max_attempts, NULL},
	{"--from", "ID", "where a group created now starts: 0 (default) or $",
	 &opt.from, NULL},
	{"--dedup-window", "INTERVAL",
	 "inbox claims kept this long (default '7 days')", &opt.dedup_window,
	 NULL},
	{"--request-timeout", "DURATION",
	 "give up on a database reply after this: reconnect, retry the "
	 "message (default database.statement_timeout + 10s, 0 = never)",
	 &opt.request_timeout, NULL},
	{"--exit-after-commit", "N",
	 "fault drills: exit 3 right after the Nth commit, before its "
	 "XACK",
	 &opt.exit_after_commit, NULL, .hidden = true},
	{NULL, NULL, NULL, NULL, NULL},
};

static const cli_cmd_t cmd = {
	.name = "consume",
	.usage = "usage: pgoutbox consume --stream NAME --group NAME "
		 "(--exec CMD | --sql FUNCTION) [options]",
	.summary = "Reads a Redis stream with a consumer group and "
		   "applies each message exactly once\nto PostgreSQL "
		   "through the inbox (pgoutbox.inbox_claim).",
	.details = "Per message: BEGIN; inbox claim; the handler (unless "
		   "a duplicate); COMMIT; XACK.\nA failure rolls back "
		   "and the entry is retried before newer ones.  A crash "
		   "between\nCOMMIT and XACK redelivers the message; the "
		   "inbox drops it.  The database comes\nfrom --db or "
		   "DATABASE_URL; the inbox partitions are maintained "
		   "hourly.\nThe connection has the relay's TCP "
		   "keepalives (10s idle, 3 probes 5s apart),\n"
		   "tcp_user_timeout=25000 and database.connect_timeout; "
		   "keywords in the URL\noverride them.  SIGTERM finishes "
		   "the message at hand (a database that does not\n"
		   "answer within 0.5s rolls it back) and exits 0 with a "
		   "stats line.",
	.opts = opts,
	.flags = flags,
};

/* The consumer's options from the flags and the configuration; false
 * (the error printed) when one is malformed. */
static bool consumer_opts(const pgo_conf_t *conf, pgo_consumer_opts_t *o,
			  int64_t *connect_ms, int64_t *request_ms)
{
	*connect_ms = PGO_CONSUME_CONNECT_TIMEOUT_MS;
	*request_ms = -1;
	pgo_consumer_opts_init(o, sizeof(*o));
	o->db_url = pgo_conf_get(conf, "database.url");
	o->redis_url = pgo_conf_get(conf, "sink.redis_url");
	o->stream = opt.stream;
	o->group = opt.group;
	o->consumer = opt.consumer;
	o->exec_command = opt.exec;
	o->sql_function = opt.sql;
	if (opt.from)
		o->start_id = opt.from;
	if (opt.dedup_window)
		o->dedup_window = opt.dedup_window;
	if (!duration_opt("--exec-timeout", opt.exec_timeout,
			  &o->exec_timeout_ms) ||
	    !duration_opt("--claim-idle", opt.claim_idle, &o->claim_idle_ms) ||
	    !duration_opt("--block", opt.block, &o->block_ms) ||
	    !int_opt("--count", opt.count, 1, &o->count) ||
	    !int_opt("--max-attempts", opt.max_attempts, 1, &o->max_attempts) ||
	    !int_opt("--exit-after-commit", opt.exit_after_commit, 1,
		     &o->exit_after_commit) ||
	    !duration_opt("sink.redis_timeout",
			  pgo_conf_get(conf, "sink.redis_timeout"),
			  &o->redis_timeout_ms) ||
	    !duration_opt("sink.redis_connect_timeout",
			  pgo_conf_get(conf, "sink.redis_connect_timeout"),
			  &o->redis_connect_timeout_ms) ||
	    !duration_opt("database.statement_timeout",
			  pgo_conf_get(conf, "database.statement_timeout"),
			  &o->statement_timeout_ms) ||
	    !duration_opt("database.connect_timeout",
			  pgo_conf_get(conf, "database.connect_timeout"),
			  connect_ms) ||
	    !duration_opt("--request-timeout", opt.request_timeout, request_ms))
		return false;
	if (o->claim_idle_ms < 1) {
		cli_error("consume", "--claim-idle must be positive");
		return false;
	}
	return true;
}

/* Runs c until a stop request; the result of pgo_consumer_run(). */
static int consume(pgo_consumer_t *c)
{
	const struct sigaction stop = {.sa_handler = on_stop};
	pgo_consumer_stats_t st;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	running = c;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	if (cli_stop_early)
		pgo_consumer_request_stop(c);
	rc = pgo_consumer_run(c);
	running = NULL;
	pgo_consumer_get_stats(c, &st);
	if (rc != PGO_OK)
		cli_error("consume", "%s", pgo_consumer_errmsg(c));
	fprintf(stderr,
		"pgoutbox consume: processed %" PRIu64
		", duplicates skipped %" PRIu64 ", failed %" PRIu64
		", skipped %" PRIu64 "\n",
		st.processed, st.duplicates, st.failed, st.skipped);
	/* Refused at start (no such --sql, never migrated): 2. */
	if (rc != PGO_OK)
		return cli_exit_code(rc);
	return st.drill_exit ? EXIT_DRILL : EXIT_OK;
}

int cmd_consume(int argc, char **argv)
{
	pgo_consumer_opts_t o;
	pgo_consumer_t *c;
	pgo_error_t err;
	int64_t connect_ms, request_ms;
	bool done;
	cli_t cli;
	int rc;

	cli_catch_signals_early(false);
	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (!consumer_opts(cli.conf, &o, &connect_ms, &request_ms)) {
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	c = pgo_consumer_new(&o, &err);
	if (!c || pgo_consumer_monitor(c, cli.conf, &err) != PGO_OK) {
		cli_error("consume", "%s", err.msg);
		pgo_consumer_destroy(c);
		cli_free(&cli);
		return EXIT_USAGE;
	}
	pgo_consumer_set_pg_timeouts(c, connect_ms, request_ms);
	rc = consume(c);
	pgo_consumer_destroy(c);
	cli_free(&cli);
	return rc;
}
