/*
 * consumer.c — reading a Redis stream with a consumer group and applying
 * each message exactly once to PostgreSQL through the inbox.
 *
 * Per message (one at a time, in stream order):
 *   BEGIN; SELECT pgoutbox.inbox_claim(group, event id);
 *   fresh: run the handler (exec command, SQL function or C callback);
 *   COMMIT; then XACK.
 * A duplicate commits nothing new and is acked.  A failure rolls back and
 * leaves the entry pending; the consumer then re-reads its own pending
 * entries (XREADGROUP ... 0) before any new one, with a backoff, so a
 * failed message is retried before the ones after it (per-stream order).
 * A crash between COMMIT and XACK leaves the entry pending too: it comes
 * again and the inbox drops it.  Entries of consumers that died are taken
 * over with XAUTOCLAIM once idle for claim_idle.
 *
 * This is a process of its own handling one message at a time, so it
 * waits for each step in turn, each with a timeout, but every wait but
 * libpq's turns the consumer's event loop (loop.c): the Redis socket is a
 * watcher while a command waits for its reply (XREADGROUP BLOCK
 * included), the exec handler is a run of proc.c (the child-process
 * module shared with the exec sink and the worker) on the same loop, and
 * backoffs are loop turns with a deadline.  A stop request (SIGTERM) wakes
 * the loop, which interrupts a Redis wait and a backoff; the message at
 * hand is always finished first (its exec handler included).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/conn.h"
#include "loop/loop.h"
#include "loop/proc.h"
#include "metrics/metrics.h"
#include "sinks/redis/conn.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define STATS_EVERY_MS 60000
#define ENTRY_ID_MAX   48
#define CONSUME_MAX_COUNT                                                      \
	100000 /* entries per XREADGROUP (sinks/redis/conn.c) */

/* The outcome of handling one entry. */
typedef enum outcome {
	DONE = 0,    /* committed (fresh or duplicate) */
	FAILED = 1,  /* rolled back: retry later */
	DB_LOST = 2, /* PostgreSQL went away: reconnect, retry */
	DRILL = 3    /* exit_after_commit reached: stop before XACK */
} outcome_t;

struct pgo_consumer {
	/* options, copied (see pgo_consumer_opts_t) */
	char *db_url, *stream, *group, *name, *exec_command, *start_id, *window;
	pgo_inbox_handler_fn handler;
	void *handler_ctx;
	int64_t exec_timeout_ms, claim_idle_ms, block_ms, maintain_every_ms,
		redis_timeout_ms, connect_timeout_ms, statement_timeout_ms;
	int count, max_attempts, exit_after_commit;
	char sql_call[160];  /* SELECT "schema"."func"($1::jsonb) */
	char sql_gated[224]; /* the same, run only for a fresh claim */
	char sql_sig[160];   /* "schema"."func"(jsonb): checked at connect */
	char *sql_name;	     /* func, for naming those of another signature */
	char subject[200];   /* log prefix: "consume STREAM -> GROUP" */

	/* Redis */
	pgo_redis_t redis;	/* one command at a time, see call() */
	pgo_loop_io_t *rio;	/* its socket, watched while a reply is due */
	bool group_ready;	/* XGROUP CREATE done on this connection */
	int64_t redis_retry_at; /* DOWN: the next connect (monotonic ms) */
	int64_t redis_backoff;	/* the current reconnect backoff, ms */
	/* PostgreSQL */
	PGconn *pg;	     /* NULL while down */
	int64_t pg_retry_at; /* down: the next connect (monotonic ms) */
	int64_t pg_backoff;  /* the current reconnect backoff, ms */
	bool pg_ever;	     /* connected once: every failure is an outage */
	/* the loop */
	pgo_loop_t *loop;	    /* every wait but libpq's turns it */
	volatile sig_atomic_t stop; /* a stop was requested (and the loop
				     * woken) */
	/* the exec handler's run in progress */
	bool exec_over;	     /* its done() came */
	int exec_rc;	     /* 0 or -1 */
	char *exec_why;	     /* where its failure is described */
	size_t exec_why_len; /* the room there */

	/* reading */
	bool pending_mode;		 /* re-read our pending entries
					  * before any new one */
	char cursor[ENTRY_ID_MAX];	 /* pending entries are read after
					  * it ("0", or a skipped entry) */
	int64_t next_autoclaim;		 /* the next XAUTOCLAIM scan */
	char claim_cursor[ENTRY_ID_MAX]; /* where that scan continues */
	int64_t next_maintain;		 /* the next inbox maintenance */
	int64_t next_stats;		 /* the next stats line */
	char last_failed[ENTRY_ID_MAX];	 /* entry that failed last */
	int fail_count;			 /* its consecutive failures */
	int commits;	   /* fresh commits, for exit_after_commit */
	bool warned_no_id; /* logged once: entries without "id" */
	pgo_consumer_stats_t stats;
	/* metrics (src/lib/metrics), when the CLI asked for them */
	pgo_monitor_t *mon;
	pgo_series_t *m_msgs[5]; /* processed duplicate failed skipped
				  * trimmed */
	pgo_buf_t json;		 /* the message for the exec handler */
	char errmsg[512];	 /* why run() failed */
};

static void redis_io(void *arg, int fd, short revents);

/* --- options --- */

int pgo_consumer_opts_init(pgo_consumer_opts_t *opts, size_t size)
{
	const pgo_consumer_opts_t d = {
		.size = sizeof(d),
		.redis_url = "redis://localhost:6379/0",
		.exec_timeout_ms = 30000,
		.claim_idle_ms = 30000,
		.block_ms = 1000,
		.count = 100,
		.max_attempts = 10,
		.start_id = "0",
		.dedup_window = "7 days",
		.maintain_interval_ms = 3600 * 1000,
		.redis_timeout_ms = 5000,
		.redis_connect_timeout_ms = 2000,
		.statement_timeout_ms = 30000,
	};

	return pgo_abi_init(PGO_ABI_CONSUMER_OPTS, opts, size, &d);
}

/* [schema.]function with lower-case identifier parts. */
static bool function_name_ok(const char *s)
{
	int parts = 0;

	for (;;) {
		size_t n = 0;

		if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
			return false;
		while ((s[n] >= 'a' && s[n] <= 'z') ||
		       (s[n] >= '0' && s[n] <= '9') || s[n] == '_')
			n++;
		if (n > 63 || ++parts > 2)
			return false;
		s += n;
		if (!*s)
			return true;
		if (*s++ != '.')
			return false;
	}
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

pgo_consumer_t *pgo_consumer_new(const pgo_consumer_opts_t *opts,
				 pgo_error_t *err)
{
	pgo_consumer_opts_t full; /* opts over the defaults (abi.c) */
	const pgo_consumer_opts_t *o = &full;
	pgo_redis_url_t url;
	pgo_consumer_t *c;
	char host[128];
	int handlers;
	bool oom = false;

	pgo_consumer_opts_init(&full, sizeof(full));
	if (pgo_abi_copy(PGO_ABI_CONSUMER_OPTS, &full, opts, err) != PGO_OK)
		return NULL;
	handlers = (o->exec_command && *o->exec_command) +
		   (o->sql_function && *o->sql_function) + (o->handler != NULL);
	if (!o->stream || !*o->stream || !o->group || !*o->group) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume needs a stream and a group");
		return NULL;
	}
	if (handlers != 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume needs exactly one handler (--exec CMD "
			      "or --sql FUNCTION), not %d",
			      handlers);
		return NULL;
	}
	if (o->sql_function && *o->sql_function &&
	    !function_name_ok(o->sql_function)) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql \"%.80s\" is not a function name: use "
			      "[schema.]name in lower case ([a-z_][a-z0-9_]*)",
			      o->sql_function);
		return NULL;
	}
	if (o->count < 1 || o->max_attempts < 1 || o->block_ms < 0 ||
	    o->claim_idle_ms < 1 || o->exit_after_commit < 0) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume: count, max attempts and claim idle "
			      "must be positive, block and exit after commit "
			      "not negative (count %d, max attempts %d, claim "
			      "idle %" PRId64 " ms, block %" PRId64
			      " ms, exit after commit %d)",
			      o->count, o->max_attempts, o->claim_idle_ms,
			      o->block_ms, o->exit_after_commit);
		return NULL;
	}
	if (o->count > CONSUME_MAX_COUNT) {
		/* The Redis connection refuses replies of more than about a
		 * million elements (sinks/redis/conn.c). */
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume: count %d is over the limit of %d "
			      "entries per call",
			      o->count, CONSUME_MAX_COUNT);
		return NULL;
	}
	if (pgo_redis_url_parse(o->redis_url, &url, err) != PGO_OK ||
	    pgo_redis_url_supported(&url, err) != PGO_OK)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	pgo_redis_init(&c->redis, &url);
	pgo_buf_init(&c->json);
	if (!o->consumer || !*o->consumer) {
		if (gethostname(host, sizeof(host)) != 0)
			snprintf(host, sizeof(host), "consumer");
		host[sizeof(host) - 1] = '\0';
	}
	c->db_url = dup_or_null(o->db_url ? o->db_url : "", &oom);
	c->stream = dup_or_null(o->stream, &oom);
	c->group = dup_or_null(o->group, &oom);
	c->name = dup_or_null(o->consumer && *o->consumer ? o->consumer : host,
			      &oom);
	c->exec_command = o->exec_command && *o->exec_command
				  ? dup_or_null(o->exec_command, &oom)
				  : NULL;
	c->start_id = dup_or_null(o->start_id ? o->start_id : "0", &oom);
	c->window =
		dup_or_null(o->dedup_window ? o->dedup_window : "7 days", &oom);
	if (oom) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		pgo_consumer_destroy(c);
		return NULL;
	}
	c->loop = pgo_loop_new();
	if (!c->loop) {
		pgo_error_set(err, PGO_ERR_IO, 1,
			      "consume: event loop (wake-up pipe): %s",
			      strerror(errno));
		pgo_consumer_destroy(c);
		return NULL;
	}
	c->rio = pgo_loop_io_add(c->loop, -1, 0, redis_io, c);
	if (!c->rio) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		pgo_consumer_destroy(c);
		return NULL;
	}
	if (o->sql_function && *o->sql_function) {
		const char *dot = strchr(o->sql_function, '.');

		if (dot)
			snprintf(c->sql_call, sizeof(c->sql_call),
				 "SELECT \"%.*s\".\"%s\"($1::jsonb)",
				 (int)(dot - o->sql_function), o->sql_function,
				 dot + 1);
		else
			snprintf(c->sql_call, sizeof(c->sql_call),
				 "SELECT \"%s\"($1::jsonb)", o->sql_function);
		if (dot)
			snprintf(c->sql_sig, sizeof(c->sql_sig),
				 "\"%.*s\".\"%s\"(jsonb)",
				 (int)(dot - o->sql_function), o->sql_function,
				 dot + 1);
		else
			snprintf(c->sql_sig, sizeof(c->sql_sig),
				 "\"%s\"(jsonb)", o->sql_function);
		c->sql_name = strdup(dot ? dot + 1 : o->sql_function);
		if (!c->sql_name) {
			pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
			pgo_consumer_destroy(c);
			return NULL;
		}
		snprintf(c->sql_gated, sizeof(c->sql_gated),
			 "%s WHERE current_setting('pgoutbox.fresh') = "
			 "'true'",
			 c->sql_call);
	}
	c->handler = o->handler;
	c->handler_ctx = o->handler_ctx;
	c->exec_timeout_ms = o->exec_timeout_ms;
	c->claim_idle_ms = o->claim_idle_ms;
	c->block_ms = o->block_ms;
	c->maintain_every_ms = o->maintain_interval_ms;
	c->redis_timeout_ms = o->redis_timeout_ms;
	c->connect_timeout_ms = o->redis_connect_timeout_ms;
	c->statement_timeout_ms = o->statement_timeout_ms;
	c->count = o->count;
	c->max_attempts = o->max_attempts;
	c->exit_after_commit = o->exit_after_commit;
	c->redis_backoff = c->pg_backoff = BACKOFF_MIN_MS;
	snprintf(c->subject, sizeof(c->subject), "consume %.80s -> %.80s",
		 c->stream, c->group);
	pgo_error_clear(err);
	return c;
}

void pgo_consumer_destroy(pgo_consumer_t *c)
{
	if (!c)
		return;
	pgo_redis_close(&c->redis);
	if (c->pg)
		PQfinish(c->pg);
	pgo_monitor_destroy(c->mon);
	pgo_loop_destroy(c->loop);
	free(c->db_url);
	free(c->sql_name);
	free(c->stream);
	free(c->group);
	free(c->name);
	free(c->exec_command);
	free(c->start_id);
	free(c->window);
	pgo_buf_free(&c->json);
	free(c);
}

/* --- metrics --- */

static void metrics_collect(void *arg)
{
	pgo_consumer_t *c = arg;
	const uint64_t n[5] = {c->stats.processed, c->stats.duplicates,
			       c->stats.failed, c->stats.skipped,
			       c->stats.trimmed};

	for (int i = 0; i < 5; i++)
		pgo_series_set(c->m_msgs[i], (double)n[i]);
}

static bool metrics_ready(void *arg, char *why, size_t size)
{
	pgo_consumer_t *c = arg;

	if (c->stop)
		snprintf(why, size, "stopping");
	else if (!c->pg)
		snprintf(why, size, "postgresql: not connected");
	else if (c->redis.state != PGO_REDIS_UP)
		snprintf(why, size, "redis: not connected");
	else
		snprintf(why, size, "ready: connected to PostgreSQL and Redis");
	return !c->stop && c->pg && c->redis.state == PGO_REDIS_UP;
}

int pgo_consumer_monitor(pgo_consumer_t *c, const pgo_conf_t *conf,
			 pgo_error_t *err)
{
	static const char *const outcome[5] = {"processed", "duplicate",
					       "failed", "skipped", "trimmed"};
	const pgo_endpoint_probe_t probe = {metrics_collect, metrics_ready, c};
	pgo_metric_t *f;
	char l[300];

	c->mon = pgo_monitor_new(c->loop, conf, c->subject, err);
	if (!c->mon)
		return err->code;
	pgo_monitor_probe(c->mon, &probe);
	f = pgo_metrics_family(pgo_monitor_metrics(c->mon), PGO_METRIC_COUNTER,
			       "pgoutbox_consumer_messages_total",
			       "Stream entries by outcome: processed "
			       "(committed), duplicate (dropped by the inbox), "
			       "failed (rolled back), skipped (out of "
			       "attempts), trimmed (gone from the stream)",
			       NULL, 0);
	for (int i = 0; i < 5; i++)
		c->m_msgs[i] = pgo_metric_series(
			f, pgo_metrics_labels(l, sizeof(l), "stream", c->stream,
					      "group", c->group, "outcome",
					      outcome[i], NULL));
	return PGO_OK;
}

void pgo_consumer_request_stop(pgo_consumer_t *c)
{
	c->stop = 1;
	pgo_loop_wake(c->loop);
}

void pgo_consumer_get_stats(const pgo_consumer_t *c, pgo_consumer_stats_t *out)
{
	*out = c->stats;
}

const char *pgo_consumer_errmsg(const pgo_consumer_t *c)
{
	return c->errmsg;
}

/* Sleeps until deadline (monotonic ms) or a stop request. */
static void sleep_until(pgo_consumer_t *c, int64_t deadline)
{
	while (!c->stop && pgo_now_ms() < deadline)
		if (pgo_loop_run_once(c->loop, deadline) < 0)
			break;
}

static int64_t next_backoff(int64_t b)
{
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

/* --- PostgreSQL --- */

static void pg_lost(pgo_consumer_t *c, const char *why)
{
	pgo_log(PGO_LOG_WARN, c->subject, "PostgreSQL: %s; reconnecting", why);
	PQfinish(c->pg);
	c->pg = NULL;
	c->pg_retry_at = pgo_now_ms() + c->pg_backoff;
	c->pg_backoff = next_backoff(c->pg_backoff);
}

/* Runs a command that returns no rows; false on failure (logged). */
static bool pg_cmd(pgo_consumer_t *c, const char *sql)
{
	PGresult *res = PQexec(c->pg, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		pgo_log(PGO_LOG_WARN, c->subject, "%s: %s", sql,
			pgo_pq_msg(c->pg, res));
	PQclear(res);
	return ok;
}

/* The --sql function must exist with one jsonb argument, as the handler
 * calls it: a typo would otherwise fail every message max_attempts times
 * and skip it, order lost.  PGO_ERR_INVALID (errmsg set) when it does not,
 * PGO_ERR_AGAIN when the check itself failed (the connection is dropped),
 * PGO_OK otherwise. */
static int check_function(pgo_consumer_t *c)
{
	const char *params[2] = {c->sql_sig, c->sql_name};
	PGresult *res;

	if (!c->sql_name)
		return PGO_OK;
	res = PQexecParams(c->pg,
			   "SELECT to_regprocedure($1) IS NOT NULL, "
			   "(SELECT string_agg(p.oid::regprocedure::text, ', ' "
			   "ORDER BY 1) FROM pg_catalog.pg_proc p "
			   "WHERE p.proname = $2)",
			   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		pg_lost(c, pgo_pq_msg(c->pg, res));
		PQclear(res);
		return PGO_ERR_AGAIN;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		snprintf(c->errmsg, sizeof(c->errmsg),
			 "--sql: no function %s in this database (the "
			 "handler takes the message's payload as its one "
			 "jsonb argument)%s%s: create it or fix the name",
			 c->sql_sig,
			 PQgetisnull(res, 0, 1) ? "" : "; there is only ",
			 PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
		PQclear(res);
		return PGO_ERR_INVALID;
	}
	PQclear(res);
	return PGO_OK;
}

/* Connects when needed.  Returns PGO_OK when connected, PGO_ERR_AGAIN to
 * wait for the backoff, or PGO_ERR_SCHEMA when the database lacks the
 * inbox (fatal). */
static int ensure_pg(pgo_consumer_t *c)
{
	const char *keys[] = {"dbname", "application_name", "connect_timeout",
			      NULL};
	const char *vals[] = {c->db_url, "pgoutbox consume", "10", NULL};
	pgo_error_t err;
	char sql[96];
	int rc;

	if (c->pg && PQstatus(c->pg) == CONNECTION_OK)
		return PGO_OK;
	if (c->pg)
		pg_lost(c, pgo_pq_msg(c->pg, NULL));
	if (pgo_now_ms() < c->pg_retry_at)
		return PGO_ERR_AGAIN;
	c->pg = PQconnectdbParams(keys, vals, 1);
	/* At start, what no retry fixes stops here (conn.c's rule). */
	if (c->pg && PQstatus(c->pg) != CONNECTION_OK && !c->pg_ever &&
	    pgo_conn_url_refusal(c->db_url, pgo_pq_msg(c->pg, NULL), true,
				 &err) != PGO_OK) {
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", err.msg);
		PQfinish(c->pg);
		c->pg = NULL;
		return PGO_ERR_INVALID;
	}
	if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
		pgo_log(PGO_LOG_WARN, c->subject,
			"cannot connect to PostgreSQL: %s",
			c->pg ? pgo_pq_msg(c->pg, NULL) : "out of memory");
		PQfinish(c->pg);
		c->pg = NULL;
		c->pg_retry_at = pgo_now_ms() + c->pg_backoff;
		c->pg_backoff = next_backoff(c->pg_backoff);
		return PGO_ERR_AGAIN;
	}
	if (pgo_schema_check(c->pg, &err) != PGO_OK) {
		/* A schema that is missing or too old is fatal here; a failed
		 * read of it may go away (pgo_pq_retriable's rule). */
		if (err.code == PGO_ERR_DB && err.retriable) {
			pg_lost(c, err.msg);
			return PGO_ERR_AGAIN;
		}
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", err.msg);
		return PGO_ERR_SCHEMA;
	}
	rc = check_function(c);
	if (rc != PGO_OK)
		return rc;
	snprintf(sql, sizeof(sql), "SET statement_timeout = %" PRId64,
		 c->statement_timeout_ms);
	if (!pg_cmd(c, sql)) {
		pg_lost(c, "setting up the session failed");
		return PGO_ERR_AGAIN;
	}
	c->pg_backoff = BACKOFF_MIN_MS;
	c->pg_ever = true;
	c->pending_mode = true; /* anything in flight may have failed */
	pgo_log(PGO_LOG_INFO, c->subject, "connected to PostgreSQL");
	return PGO_OK;
}

static void maybe_maintain(pgo_consumer_t *c)
{
	pgo_error_t err;
	int created, dropped;

	if (pgo_now_ms() < c->next_maintain)
		return;
	c->next_maintain = pgo_now_ms() + c->maintain_every_ms;
	if (pgo_inbox_maintain(c->pg, c->window, &created, &dropped, &err) !=
	    PGO_OK) {
		pgo_log(PGO_LOG_WARN, c->subject,
			"%s (retried in %" PRId64 " s)", err.msg,
			c->maintain_every_ms / 1000);
		return;
	}
	if (created || dropped)
		pgo_log(PGO_LOG_INFO, c->subject,
			"inbox partitions: %d created, %d dropped (window %s)",
			created, dropped, c->window);
}

/* --- Redis --- */

static void redis_lost(pgo_consumer_t *c)
{
	if (!c->stop)
		pgo_log(PGO_LOG_WARN, c->subject, "Redis: %s; reconnecting",
			c->redis.err);
	pgo_redis_close(&c->redis);
	c->group_ready = false;
	c->redis_retry_at = pgo_now_ms() + c->redis_backoff;
	c->redis_backoff = next_backoff(c->redis_backoff);
}

/* The Redis socket is ready: call() does the I/O after the turn. */
static void redis_io(void *arg, int fd, short revents)
{
	(void)arg;
	(void)fd;
	(void)revents;
}

/* One command and its reply, connecting first when down, turning the
 * loop meanwhile: at most the reply timeout plus extra_ms (plus the
 * connect).  NULL when Redis failed, the time ran out or a stop was
 * requested (the connection is then closed, the error logged). */
static redisReply *call(pgo_consumer_t *c, int64_t extra_ms, int argc,
			const char **argv)
{
	pgo_redis_t *rd = &c->redis;
	int64_t timeout = c->redis_timeout_ms + extra_ms, deadline;
	redisReply *r = NULL;
	size_t lens[16];
	int rc;

	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	if ((rd->state == PGO_REDIS_DOWN &&
	     pgo_redis_connect(rd, c->connect_timeout_ms) != PGO_OK) ||
	    pgo_redis_append(rd, argc, argv, lens) != PGO_OK) {
		redis_lost(c);
		return NULL;
	}
	deadline = pgo_now_ms() + timeout +
		   (rd->state == PGO_REDIS_UP ? 0 : c->connect_timeout_ms);
	while (pgo_redis_io(rd) == PGO_OK &&
	       pgo_redis_next_reply(rd, &r) == PGO_OK && !r) {
		if (c->stop) {
			snprintf(rd->err, sizeof(rd->err), "interrupted");
			break;
		}
		if (pgo_now_ms() >= deadline) {
			snprintf(rd->err, sizeof(rd->err),
				 "no reply within %" PRId64 " ms", timeout);
			break;
		}
		pgo_loop_io_set(c->rio, rd->fd, pgo_redis_events(rd));
		rc = pgo_loop_run_once(c->loop, deadline);
		pgo_loop_io_set(c->rio, -1, 0);
		if (rc < 0) {
			snprintf(rd->err, sizeof(rd->err), "poll: %s",
				 strerror(-rc));
			break;
		}
	}
	if (!r)
		redis_lost(c);
	return r;
}

/* Connects and makes sure the group exists.  PGO_ERR_AGAIN: wait. */
static int ensure_redis(pgo_consumer_t *c)
{
	const char *argv[] = {"XGROUP", "CREATE",    c->stream,
			      c->group, c->start_id, "MKSTREAM"};
	redisReply *r;
	char where[300];

	if (c->group_ready && c->redis.state == PGO_REDIS_UP)
		return PGO_OK;
	if (pgo_now_ms() < c->redis_retry_at)
		return PGO_ERR_AGAIN;
	r = call(c, 0, 6, argv);
	if (!r)
		return PGO_ERR_AGAIN;
	if (r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "BUSYGROUP", 9) != 0) {
		snprintf(c->redis.err, sizeof(c->redis.err),
			 "XGROUP CREATE: %s", r->str);
		freeReplyObject(r);
		redis_lost(c);
		return PGO_ERR_AGAIN;
	}
	freeReplyObject(r);
	pgo_redis_url_describe(&c->redis.url, where, sizeof(where));
	pgo_log(PGO_LOG_INFO, c->subject, "reading from %s as consumer %s",
		where, c->name);
	c->group_ready = true;
	c->redis_backoff = BACKOFF_MIN_MS;
	/* First our own pending entries: a crash may have left some. */
	c->pending_mode = true;
	snprintf(c->cursor, sizeof(c->cursor), "0");
	return PGO_OK;
}

static void xack(pgo_consumer_t *c, const char *entry_id)
{
	const char *argv[] = {"XACK", c->stream, c->group, entry_id};
	redisReply *r = call(c, 0, 4, argv);

	/* Not acked: the entry comes again and the inbox drops it. */
	if (r && r->type == REDIS_REPLY_ERROR)
		pgo_log(PGO_LOG_WARN, c->subject, "XACK %s: %s", entry_id,
			r->str);
	freeReplyObject(r);
}

/* --- the message --- */

/* The value of field name in an entry's field array, or dflt. */
static const char *field(const redisReply *fields, const char *name,
			 const char *dflt)
{
	for (size_t i = 0; i + 1 < fields->elements; i += 2) {
		const redisReply *k = fields->element[i];
		const redisReply *v = fields->element[i + 1];

		if (k->type == REDIS_REPLY_STRING &&
		    strcmp(k->str, name) == 0 && v->type == REDIS_REPLY_STRING)
			return v->str;
	}
	return dflt;
}

/* The message JSON the exec handler reads on stdin. */
/* Whether id is an event id as the relay writes it (a decimal bigint
 * without leading zeros): then it is a JSON number, as in the relay's
 * NDJSON; any other message id (another producer's) stays a string. */
static bool id_is_number(const char *id)
{
	size_t n = strspn(id, "0123456789");

	return n > 0 && id[n] == '\0' && (n == 1 || id[0] != '0') &&
	       (n < 19 || (n == 19 && strcmp(id, "9223372036854775807") <= 0));
}

static void message_json(pgo_buf_t *b, const pgo_inbox_msg_t *m)
{
	pgo_buf_reset(b);
	pgo_buf_puts(b, "{\"entry_id\":");
	pgo_buf_json_str(b, m->entry_id);
	pgo_buf_puts(b, ",\"id\":");
	if (id_is_number(m->id))
		pgo_buf_puts(b, m->id);
	else
		pgo_buf_json_str(b, m->id);
	pgo_buf_puts(b, ",\"topic\":");
	pgo_buf_json_str(b, m->topic);
	pgo_buf_puts(b, ",\"key\":");
	pgo_buf_json_str(b, m->key);
	pgo_buf_puts(b, ",\"type\":");
	pgo_buf_json_str(b, m->type);
	pgo_buf_puts(b, ",\"payload\":");
	pgo_buf_puts(b, *m->payload ? m->payload : "null");
	pgo_buf_puts(b, ",\"headers\":");
	pgo_buf_puts(b, *m->headers ? m->headers : "{}");
	pgo_buf_puts(b, ",\"created_at\":");
	pgo_buf_json_str(b, m->created_at);
	pgo_buf_puts(b, "}\n");
}

/* --- handlers --- */

static int handle_sql(pgo_consumer_t *c, const pgo_inbox_msg_t *m, char *why,
		      size_t len)
{
	const char *params[1] = {m->payload};
	PGresult *res = PQexecParams(c->pg, c->sql_call, 1, NULL, params, NULL,
				     NULL, 0);
	int rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : -1;

	if (rc != 0)
		snprintf(why, len, "%s", pgo_pq_msg(c->pg, res));
	PQclear(res);
	return rc;
}

/* The exec handler's run ended. */
static void exec_done(void *arg, const pgo_proc_result_t *res)
{
	pgo_consumer_t *c = arg;

	c->exec_over = true;
	c->exec_rc = -1;
	if (res->end == PGO_PROC_EXITED && res->status == 0)
		c->exec_rc = 0;
	else if (res->end == PGO_PROC_EXITED)
		snprintf(c->exec_why, c->exec_why_len,
			 "command exited with status %d", res->status);
	else if (res->end == PGO_PROC_SIGNALED)
		snprintf(c->exec_why, c->exec_why_len,
			 "command killed by signal %d", res->status);
	else if (res->end == PGO_PROC_TIMED_OUT)
		snprintf(c->exec_why, c->exec_why_len,
			 "command timed out after %" PRId64 " ms",
			 c->exec_timeout_ms);
	else
		snprintf(c->exec_why, c->exec_why_len,
			 "command exit status unknown (child reaped "
			 "elsewhere)");
}

/* Runs sh -c CMD with the message on stdin (stdout and stderr are the
 * consumer's) and waits for it, turning the loop: a stop request does not
 * cut it short. */
static int handle_exec(pgo_consumer_t *c, const pgo_inbox_msg_t *m, char *why,
		       size_t len)
{
	char id_var[160], entry_var[96];
	const char *env[] = {id_var, entry_var, NULL};
	pgo_proc_spec_t spec;
	pgo_proc_t *proc;
	const char *what;
	int rc;

	message_json(&c->json, m);
	if (c->json.oom) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	snprintf(id_var, sizeof(id_var), "PGOUTBOX_MESSAGE_ID=%.120s", m->id);
	snprintf(entry_var, sizeof(entry_var), "PGOUTBOX_ENTRY_ID=%s",
		 m->entry_id);
	spec = (pgo_proc_spec_t){
		.command = c->exec_command,
		.env = env,
		.input = c->json.data,
		.input_len = c->json.len,
		.timeout_ms = c->exec_timeout_ms,
		.subject = c->subject,
		.done = exec_done,
		.arg = c,
	};
	c->exec_over = false;
	c->exec_why = why;
	c->exec_why_len = len;
	rc = pgo_proc_start(c->loop, &spec, &proc, &what);
	if (rc != 0) {
		snprintf(why, len, "%s: %s", what, strerror(rc));
		return -1;
	}
	while (!c->exec_over) {
		rc = pgo_loop_run_once(c->loop, 0);
		if (rc < 0) {
			pgo_proc_cancel(proc);
			snprintf(why, len, "poll: %s", strerror(-rc));
			return -1;
		}
	}
	return c->exec_rc;
}

/* Ends the transaction with ROLLBACK, telling a lost connection apart. */
static outcome_t roll_back(pgo_consumer_t *c)
{
	if (PQstatus(c->pg) != CONNECTION_OK) {
		pg_lost(c, "connection lost");
		return DB_LOST;
	}
	PQclear(PQexec(c->pg, "ROLLBACK"));
	if (PQstatus(c->pg) != CONNECTION_OK) {
		pg_lost(c, "connection lost");
		return DB_LOST;
	}
	return FAILED;
}

/* After a claim that said fresh or duplicate and a COMMIT. */
static outcome_t committed(pgo_consumer_t *c, const pgo_inbox_msg_t *m,
			   int fresh)
{
	if (!fresh) {
		c->stats.duplicates++;
		pgo_log(PGO_LOG_INFO, c->subject,
			"event %s (entry %s) again: already in the inbox, "
			"skipped",
			m->id, m->entry_id);
		return DONE;
	}
	c->stats.processed++;
	if (c->exit_after_commit && ++c->commits >= c->exit_after_commit)
		return DRILL;
	return DONE;
}

/* The SQL handler in one round trip: BEGIN, the claim (its verdict kept
 * in a transaction-local setting), the handler (its WHERE runs it only
 * for a fresh claim) and COMMIT, as one pipeline.  A failure aborts the
 * statements after it, COMMIT included. */
static outcome_t handle_one_sql(pgo_consumer_t *c, const pgo_inbox_msg_t *m)
{
	static const char *const what[] = {"BEGIN", "inbox claim", "handler",
					   "COMMIT"};
	const char *claim[2] = {c->group, m->id};
	const char *payload[1] = {m->payload};
	char why[512] = "";
	int fresh = 0, idx = 0, failed_at = -1, nulls = 0;

	if (!PQenterPipelineMode(c->pg) ||
	    !PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQsendQueryParams(c->pg,
			       "SELECT set_config('pgoutbox.fresh', "
			       "pgoutbox.inbox_claim($1, $2)::text, true)",
			       2, NULL, claim, NULL, NULL, 0) ||
	    !PQsendQueryParams(c->pg, c->sql_gated, 1, NULL, payload, NULL,
			       NULL, 0) ||
	    !PQsendQueryParams(c->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQpipelineSync(c->pg)) {
		pg_lost(c, pgo_pq_msg(c->pg, NULL));
		return DB_LOST;
	}
	for (;;) {
		PGresult *r = PQgetResult(c->pg);
		ExecStatusType st;

		if (!r) {
			/* One NULL ends each statement; two in a row: the
			 * connection has nothing more to give. */
			if (++nulls > 1) {
				pg_lost(c, "connection lost in a pipeline");
				return DB_LOST;
			}
			continue;
		}
		nulls = 0;
		st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			if (failed_at < 0 && st != PGRES_PIPELINE_ABORTED) {
				failed_at = idx < 4 ? idx : 3;
				snprintf(why, sizeof(why), "%s",
					 pgo_pq_msg(c->pg, r));
			}
		} else if (idx == 1 && PQntuples(r) == 1) {
			fresh = strcmp(PQgetvalue(r, 0, 0), "true") == 0;
		}
		PQclear(r);
		idx++;
	}
	if (!PQexitPipelineMode(c->pg) || PQstatus(c->pg) != CONNECTION_OK) {
		pg_lost(c, "connection lost");
		return DB_LOST;
	}
	if (failed_at >= 0) {
		if (failed_at == 2)
			pgo_log(PGO_LOG_WARN, c->subject,
				"event %s (entry %s): handler failed: %s",
				m->id, m->entry_id,
				why[0] ? why : "no reason given");
		else
			pgo_log(PGO_LOG_WARN, c->subject, "event %s: %s: %s",
				m->id, what[failed_at], why);
		c->stats.failed++;
		return roll_back(c);
	}
	return committed(c, m, fresh);
}

/* BEGIN; claim; handler; COMMIT. */
static outcome_t handle_one(pgo_consumer_t *c, const pgo_inbox_msg_t *m)
{
	pgo_error_t err;
	char why[512] = "";
	int fresh = 0, rc;
	PGresult *res;

	if (!pg_cmd(c, "BEGIN"))
		return roll_back(c);
	if (pgo_inbox_claim(c->pg, c->group, m->id, &fresh, &err) != PGO_OK) {
		pgo_log(PGO_LOG_WARN, c->subject, "%s", err.msg);
		c->stats.failed++;
		return roll_back(c);
	}
	if (fresh) {
		if (c->handler)
			rc = c->handler(c->handler_ctx, c->pg, m, why,
					sizeof(why));
		else if (c->exec_command)
			rc = handle_exec(c, m, why, sizeof(why));
		else
			rc = handle_sql(c, m, why, sizeof(why));
		if (rc != 0) {
			pgo_log(PGO_LOG_WARN, c->subject,
				"event %s (entry %s): handler failed: %s",
				m->id, m->entry_id,
				why[0] ? why : "no reason given");
			c->stats.failed++;
			return roll_back(c);
		}
	}
	res = PQexec(c->pg, "COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK ||
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
		pgo_log(PGO_LOG_WARN, c->subject, "event %s: COMMIT failed: %s",
			m->id, pgo_pq_msg(c->pg, res));
		PQclear(res);
		c->stats.failed++;
		return roll_back(c);
	}
	PQclear(res);
	return committed(c, m, fresh);
}

/* A failure of entry_id: count it; after max_attempts give up on it. */
static void note_failure(pgo_consumer_t *c, const char *entry_id,
			 const char *event_id)
{
	if (strcmp(c->last_failed, entry_id) == 0) {
		c->fail_count++;
	} else {
		snprintf(c->last_failed, sizeof(c->last_failed), "%s",
			 entry_id);
		c->fail_count = 1;
	}
	c->pending_mode = true;
	if (c->fail_count >= c->max_attempts) {
		pgo_log(PGO_LOG_ERROR, c->subject,
			"event %s (entry %s) failed %d times: skipping it; it "
			"stays pending in the group (XPENDING lists it, "
			"XCLAIM retries it)",
			event_id, entry_id, c->fail_count);
		c->stats.skipped++;
		/* Later pending reads start after it. */
		snprintf(c->cursor, sizeof(c->cursor), "%s", entry_id);
		c->last_failed[0] = '\0';
		c->fail_count = 0;
		return;
	}
	{
		int64_t b = BACKOFF_MIN_MS;

		for (int i = 1; i < c->fail_count && b < BACKOFF_MAX_MS; i++)
			b *= 2;
		sleep_until(c,
			    pgo_now_ms() +
				    (b > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b));
	}
}

/* Handles the entries of one read (an array of [id, fields]) in order.
 * Stops at the first failure (the rest stay pending, read again in order)
 * or when a stop is requested.  Returns DRILL to end the run. */
static outcome_t handle_entries(pgo_consumer_t *c, const redisReply *entries)
{
	for (size_t i = 0; entries && i < entries->elements; i++) {
		const redisReply *e = entries->element[i];
		const redisReply *f;
		pgo_inbox_msg_t m;
		outcome_t o;

		if (c->stop)
			return DONE;
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
		    e->element[0]->type != REDIS_REPLY_STRING)
			continue;
		m.entry_id = e->element[0]->str;
		f = e->element[1];
		if (f->type != REDIS_REPLY_ARRAY) {
			/* Pending, but trimmed from the stream (MAXLEN). */
			pgo_log(PGO_LOG_ERROR, c->subject,
				"entry %s was trimmed from the stream before "
				"it "
				"was processed: acking it, its event is lost "
				"to this consumer",
				m.entry_id);
			c->stats.trimmed++;
			xack(c, m.entry_id);
			continue;
		}
		m.id = field(f, "id", NULL);
		if (!m.id || !*m.id) {
			if (!c->warned_no_id)
				pgo_log(PGO_LOG_WARN, c->subject,
					"entry %s has no \"id\" field: "
					"deduplicating on entry ids instead",
					m.entry_id);
			c->warned_no_id = true;
			m.id = m.entry_id;
		}
		m.topic = field(f, "topic", "");
		m.key = field(f, "key", "");
		m.type = field(f, "type", "");
		m.payload = field(f, "payload", "null");
		m.headers = field(f, "headers", "{}");
		m.created_at = field(f, "created_at", "");
		o = c->handler || c->exec_command ? handle_one(c, &m)
						  : handle_one_sql(c, &m);
		if (o == DRILL)
			return DRILL;
		if (o == DB_LOST) {
			c->pending_mode = true;
			return DONE;
		}
		if (o == FAILED) {
			note_failure(c, m.entry_id, m.id);
			return DONE;
		}
		if (strcmp(c->last_failed, m.entry_id) == 0)
			c->last_failed[0] = '\0';
		xack(c, m.entry_id);
		if (c->redis.state == PGO_REDIS_DOWN)
			return DONE;
	}
	return DONE;
}

/* The entries of our stream in an XREADGROUP reply, or NULL. */
static const redisReply *read_entries(const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		return NULL;
	r = r->element[0];
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[1]->type != REDIS_REPLY_ARRAY)
		return NULL;
	return r->element[1];
}

/* XAUTOCLAIM: takes over entries idle longer than claim_idle. */
static outcome_t autoclaim(pgo_consumer_t *c)
{
	char idle[24], count[16];
	const char *argv[] = {"XAUTOCLAIM", c->stream,	     c->group, c->name,
			      idle,	    c->claim_cursor, "COUNT",  count};
	redisReply *r;
	outcome_t o = DONE;

	snprintf(idle, sizeof(idle), "%" PRId64, c->claim_idle_ms);
	snprintf(count, sizeof(count), "%d", c->count);
	if (!c->claim_cursor[0])
		snprintf(c->claim_cursor, sizeof(c->claim_cursor), "0-0");
	r = call(c, 0, 8, argv);
	if (!r)
		return DONE;
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING) {
		snprintf(c->claim_cursor, sizeof(c->claim_cursor), "%s",
			 r->element[0]->str);
		if (r->element[1]->type == REDIS_REPLY_ARRAY &&
		    r->element[1]->elements > 0) {
			pgo_log(PGO_LOG_INFO, c->subject,
				"took over %zu entries idle for more than "
				"%" PRId64 " ms",
				r->element[1]->elements, c->claim_idle_ms);
			o = handle_entries(c, r->element[1]);
		}
	} else if (r->type == REDIS_REPLY_ERROR) {
		pgo_log(PGO_LOG_WARN, c->subject, "XAUTOCLAIM: %s", r->str);
	}
	/* A full scan done: wait before the next one. */
	if (strcmp(c->claim_cursor, "0-0") == 0)
		c->next_autoclaim =
			pgo_now_ms() + (c->claim_idle_ms / 2 > 500
						? c->claim_idle_ms / 2
						: 500);
	freeReplyObject(r);
	return o;
}

/* One read (pending, autoclaim or new) and its entries. */
static outcome_t read_once(pgo_consumer_t *c)
{
	char count[16], block[24];
	const char *argv[12] = {"XREADGROUP", "GROUP", c->group,
				c->name,      "COUNT", count};
	const redisReply *entries;
	redisReply *r;
	outcome_t o;
	int argc = 6;

	snprintf(count, sizeof(count), "%d", c->count);
	if (!c->pending_mode && pgo_now_ms() >= c->next_autoclaim) {
		o = autoclaim(c);
		if (o != DONE || c->pending_mode || c->stop ||
		    c->redis.state == PGO_REDIS_DOWN)
			return o;
	}
	if (!c->pending_mode) {
		snprintf(block, sizeof(block), "%" PRId64, c->block_ms);
		argv[argc++] = "BLOCK";
		argv[argc++] = block;
	}
	argv[argc++] = "STREAMS";
	argv[argc++] = c->stream;
	argv[argc++] = c->pending_mode ? c->cursor : ">";
	r = call(c, c->pending_mode ? 0 : c->block_ms, argc, argv);
	if (!r)
		return DONE;
	if (r->type == REDIS_REPLY_ERROR) {
		pgo_log(PGO_LOG_WARN, c->subject, "XREADGROUP: %s", r->str);
		/* NOGROUP: the stream or group was deleted; recreate it. */
		c->group_ready = strncmp(r->str, "NOGROUP", 7) != 0;
		freeReplyObject(r);
		sleep_until(c, pgo_now_ms() + BACKOFF_MIN_MS);
		return DONE;
	}
	entries = read_entries(r);
	if (c->pending_mode && (!entries || entries->elements == 0))
		c->pending_mode = false; /* caught up: new entries next */
	o = handle_entries(c, entries);
	freeReplyObject(r);
	return o;
}

static void log_stats(pgo_consumer_t *c, const char *what)
{
	pgo_log(PGO_LOG_INFO, c->subject,
		"%s: processed %" PRIu64 ", duplicates skipped %" PRIu64
		", failed %" PRIu64 ", skipped %" PRIu64,
		what, c->stats.processed, c->stats.duplicates, c->stats.failed,
		c->stats.skipped);
	c->next_stats = pgo_now_ms() + STATS_EVERY_MS;
}

int pgo_consumer_run(pgo_consumer_t *c)
{
	int rc = PGO_OK;

	pgo_log(PGO_LOG_INFO, c->subject, "starting as consumer %s (%s)",
		c->name,
		c->exec_command ? "exec handler"
		: c->handler	? "C handler"
				: c->sql_call);
	c->next_stats = pgo_now_ms() + STATS_EVERY_MS;
	while (!c->stop) {
		int64_t now = pgo_now_ms();

		if (now >= c->next_stats)
			log_stats(c, "stats");
		rc = ensure_pg(c);
		if (rc == PGO_ERR_SCHEMA || rc == PGO_ERR_INVALID) {
			pgo_log(PGO_LOG_ERROR, c->subject, "%s", c->errmsg);
			break;
		}
		if (rc == PGO_ERR_AGAIN) {
			sleep_until(c, c->pg_retry_at);
			continue;
		}
		maybe_maintain(c);
		if (ensure_redis(c) != PGO_OK) {
			sleep_until(c, c->redis_retry_at);
			continue;
		}
		pgo_monitor_ready(c->mon);
		if (read_once(c) == DRILL) {
			c->stats.drill_exit = 1;
			pgo_log(PGO_LOG_WARN, c->subject,
				"stopping after %d commits, before acking the "
				"last one (exit_after_commit drill)",
				c->commits);
			break;
		}
	}
	pgo_monitor_stopping(c->mon);
	log_stats(c, "stopped");
	pgo_redis_close(&c->redis);
	return rc == PGO_ERR_SCHEMA || rc == PGO_ERR_INVALID ? rc : PGO_OK;
}
