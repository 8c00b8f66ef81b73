/*
 * consumer.c — `pgoutbox consume`: reading a Redis stream with a consumer
 * group and applying each message exactly once to PostgreSQL through the
 * inbox.  This file is the handle (options, new, destroy, metrics) and
 * the loop; consumer_int.h lists the files of the steps.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inbox/consumer_int.h"
#include "base/abi.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "inbox/consume.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"
#include "sinks/redis/conn.h"

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

/* The options' rules: a stream, a group, one handler, a function name
 * for --sql, the bounds of the numbers. */
static int check_opts(const pgo_consumer_opts_t *o, pgo_error_t *err)
{
	int handlers = (o->exec_command && *o->exec_command) +
		       (o->sql_function && *o->sql_function) +
		       (o->handler != NULL);

	if (!o->stream || !*o->stream || !o->group || !*o->group) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume needs a stream and a group");
		return PGO_ERR_INVALID;
	}
	if (handlers != 1) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume needs exactly one handler (--exec CMD "
			      "or --sql FUNCTION), not %d",
			      handlers);
		return PGO_ERR_INVALID;
	}
	if (o->sql_function && *o->sql_function &&
	    !function_name_ok(o->sql_function)) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "--sql \"%.80s\" is not a function name: use "
			      "[schema.]name in lower case ([a-z_][a-z0-9_]*)",
			      o->sql_function);
		return PGO_ERR_INVALID;
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
		return PGO_ERR_INVALID;
	}
	if (o->count > CONSUME_MAX_COUNT) {
		/* The Redis connection refuses replies of more than about a
		 * million elements (sinks/redis/conn.c). */
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "consume: count %d is over the limit of %d "
			      "entries per call",
			      o->count, CONSUME_MAX_COUNT);
		return PGO_ERR_INVALID;
	}
	return PGO_OK;
}

/* The statements that call the --sql function f ([schema.]name):
 * the call, the call run only for a fresh claim, and the signature and
 * name the connect checks.  PGO_ERR_NOMEM when out of memory. */
static int sql_names(pgo_consumer_t *c, const char *f)
{
	const char *dot = strchr(f, '.');

	if (dot)
		snprintf(c->sql_call, sizeof(c->sql_call),
			 "SELECT \"%.*s\".\"%s\"($1::jsonb)", (int)(dot - f), f,
			 dot + 1);
	else
		snprintf(c->sql_call, sizeof(c->sql_call),
			 "SELECT \"%s\"($1::jsonb)", f);
	if (dot)
		snprintf(c->sql_sig, sizeof(c->sql_sig),
			 "\"%.*s\".\"%s\"(jsonb)", (int)(dot - f), f, dot + 1);
	else
		snprintf(c->sql_sig, sizeof(c->sql_sig), "\"%s\"(jsonb)", f);
	c->sql_name = strdup(dot ? dot + 1 : f);
	if (!c->sql_name)
		return PGO_ERR_NOMEM;
	snprintf(c->sql_gated, sizeof(c->sql_gated),
		 "%s WHERE current_setting('pgoutbox.fresh') = "
		 "'true'",
		 c->sql_call);
	return PGO_OK;
}

pgo_consumer_t *pgo_consumer_new(const pgo_consumer_opts_t *opts,
				 pgo_error_t *err)
{
	pgo_consumer_opts_t full; /* opts over the defaults (abi.c) */
	const pgo_consumer_opts_t *o = &full;
	pgo_redis_url_t url;
	pgo_consumer_t *c;
	char host[128];
	bool oom = false;

	pgo_consumer_opts_init(&full, sizeof(full));
	if (pgo_abi_copy(PGO_ABI_CONSUMER_OPTS, &full, opts, err) != PGO_OK)
		return NULL;
	if (check_opts(o, err) != PGO_OK)
		return NULL;
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
	c->rio = pgo_loop_io_add(c->loop, -1, 0, pgo_consume_redis_io, c);
	if (!c->rio) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		pgo_consumer_destroy(c);
		return NULL;
	}
	if (o->sql_function && *o->sql_function &&
	    sql_names(c, o->sql_function) != PGO_OK) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		pgo_consumer_destroy(c);
		return NULL;
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
	pgo_consumer_set_pg_timeouts(c, PGO_CONSUME_CONNECT_TIMEOUT_MS, -1);
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

void pgo_consumer_set_pg_timeouts(pgo_consumer_t *c, int64_t connect_ms,
				  int64_t request_ms)
{
	c->pg_connect_timeout_ms = connect_ms;
	/* Longer than a statement may run, so that only a hang hits it. */
	if (request_ms < 0)
		request_ms = c->statement_timeout_ms
				     ? c->statement_timeout_ms +
					       PGO_CONSUME_REQUEST_MARGIN_MS
				     : 0;
	c->request_timeout_ms = request_ms;
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
void pgo_consume_sleep_until(pgo_consumer_t *c, int64_t deadline)
{
	while (!c->stop && pgo_now_ms() < deadline)
		if (pgo_loop_run_once(c->loop, deadline) < 0)
			break;
}

int64_t pgo_consume_next_backoff(int64_t b)
{
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

int64_t pgo_consume_retry_ms(int fail_count)
{
	int64_t b = BACKOFF_MIN_MS;

	for (int i = 1; i < fail_count && b < BACKOFF_MAX_MS; i++)
		b *= 2;
	return b > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b;
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
		rc = pgo_consume_ensure_pg(c);
		if (rc == PGO_ERR_SCHEMA || rc == PGO_ERR_INVALID) {
			pgo_log(PGO_LOG_ERROR, c->subject, "%s", c->errmsg);
			break;
		}
		if (rc == PGO_ERR_AGAIN) {
			pgo_consume_sleep_until(c, c->pg_retry_at);
			continue;
		}
		pgo_consume_maybe_maintain(c);
		if (pgo_consume_ensure_redis(c) != PGO_OK) {
			pgo_consume_sleep_until(c, c->redis_retry_at);
			continue;
		}
		pgo_monitor_ready(c->mon);
		if (pgo_consume_read_once(c) == DRILL) {
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
