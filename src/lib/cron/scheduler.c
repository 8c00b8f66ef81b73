/*
 * scheduler.c — distributed cron's scheduler, which any number of
 * instances may run at once: its handle, its connection, its passes over
 * the schedules and its timers.
 *
 * Exactly once per tick: an instance that finds ticks due calls
 * pgoutbox.cron_fire(), which in ONE transaction compare-and-sets the
 * schedule's last_tick from the value the instance read to the newest tick
 * it handles, enqueues the jobs and records the history.  Of instances
 * racing for the same ticks exactly one wins the compare-and-set; the
 * others update 0 rows and do nothing.  "Now" is the DATABASE's clock
 * (SELECT now() in each loop), so the local clocks of the instances never
 * decide a tick; a skewed local clock only changes when an instance wakes
 * up (simulated with clock_offset_ms).
 *
 * Time zones come from the database too: the UTC offsets of a schedule's
 * zone over the stretch of time the ticks are computed in are asked of
 * pgoutbox.tz_offsets() (sql/009), so every instance uses the database's
 * tzdata, whatever the tzdata of its host.
 *
 * The scheduler runs on the event loop (loop.c) like the other runners:
 * one timer for the next pass (the nearest due tick, max_sleep_ms, or the
 * reconnect backoff while PostgreSQL is away), one for the history
 * retention pass, and pgo_loop_wake() for a stop request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cron/cron_int.h"
#include "db/conn.h"
#include "base/abi.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"

static void on_pass(void *arg);
static void on_expire(void *arg);

int pgo_scheduler_opts_init(pgo_scheduler_opts_t *opts, size_t size)
{
	const pgo_scheduler_opts_t d = {
		.size = sizeof(d),
		.grace_ms = 10000,
		.max_sleep_ms = 1000,
		.history_keep_ms = 7LL * 24 * 3600 * 1000,
	};

	return pgo_abi_init(PGO_ABI_SCHEDULER_OPTS, opts, size, &d);
}

/* --- metrics --- */

static void metrics_collect(void *arg)
{
	pgo_scheduler_t *s = arg;

	pgo_series_set(s->m_fired, (double)s->stats.fired);
	pgo_series_set(s->m_skipped, (double)s->stats.skipped);
	pgo_series_set(s->m_missed, (double)s->missed);
	pgo_series_set(s->m_elsewhere, (double)s->stats.lost_races);
}

static bool metrics_ready(void *arg, char *why, size_t size)
{
	pgo_scheduler_t *s = arg;

	if (s->stop)
		snprintf(why, size, "stopping");
	else if (!s->pg)
		snprintf(why, size, "postgresql: not connected");
	else
		snprintf(why, size, "ready: connected to PostgreSQL");
	return s->pg && !s->stop;
}

static int metrics_init(pgo_scheduler_t *s, pgo_error_t *err)
{
	const pgo_endpoint_probe_t probe = {metrics_collect, metrics_ready, s};
	pgo_metrics_t *reg;
	pgo_metric_t *ticks;
	char l[160];

	s->mon = pgo_monitor_new(s->loop, s->conf, s->subject, err);
	if (!s->mon)
		return err->code;
	pgo_monitor_probe(s->mon, &probe);
	reg = pgo_monitor_metrics(s->mon);
	ticks = pgo_metrics_family(reg, PGO_METRIC_COUNTER,
				   "pgoutbox_cron_ticks_total",
				   "Ticks this scheduler decided: fired (a job "
				   "enqueued) or skipped (overlap or missed "
				   "policy)",
				   NULL, 0);
	s->m_fired = pgo_metric_series(
		ticks, pgo_metrics_labels(l, sizeof(l), "scheduler", s->name,
					  "outcome", "fired", NULL));
	s->m_skipped = pgo_metric_series(
		ticks, pgo_metrics_labels(l, sizeof(l), "scheduler", s->name,
					  "outcome", "skipped", NULL));
	pgo_metrics_labels(l, sizeof(l), "scheduler", s->name, NULL);
	s->m_missed = pgo_metric_series(
		pgo_metrics_family(reg, PGO_METRIC_COUNTER,
				   "pgoutbox_cron_ticks_missed_total",
				   "Ticks found later than cron.grace (no "
				   "scheduler was running); each also fired "
				   "or skipped by its missed policy",
				   NULL, 0),
		l);
	s->m_elsewhere = pgo_metric_series(
		pgo_metrics_family(reg, PGO_METRIC_COUNTER,
				   "pgoutbox_cron_ticks_elsewhere_total",
				   "Ticks another scheduler instance handled "
				   "first",
				   NULL, 0),
		l);
	return PGO_OK;
}

pgo_scheduler_t *pgo_scheduler_new(const pgo_conf_t *conf,
				   const pgo_scheduler_opts_t *caller_opts,
				   pgo_error_t *err)
{
	pgo_scheduler_opts_t full; /* the caller's over the defaults */
	const pgo_scheduler_opts_t *opts = &full;
	pgo_scheduler_t *s;
	char host[64];

	if (!conf || !caller_opts) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no %s given",
			      !conf ? "configuration" : "options");
		return NULL;
	}
	pgo_scheduler_opts_init(&full, sizeof(full));
	if (pgo_abi_copy(PGO_ABI_SCHEDULER_OPTS, &full, caller_opts, err) !=
	    PGO_OK)
		return NULL;
	if (opts->grace_ms < 0 || opts->max_sleep_ms < 10) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "bad scheduler options: grace must not be "
			      "negative (%" PRId64 " ms), max sleep at least "
			      "10 ms (%" PRId64 " ms)",
			      opts->grace_ms, opts->max_sleep_ms);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	if (!(s->loop = pgo_loop_new())) {
		pgo_error_set(err, PGO_ERR_IO, 1,
			      "cron: event loop (wake-up pipe): %s",
			      strerror(errno));
		free(s);
		return NULL;
	}
	if (!(s->pass_timer = pgo_loop_timer_add(s->loop, 0, on_pass, s)) ||
	    !(s->expire_timer = pgo_loop_timer_add(s->loop, 0, on_expire, s))) {
		pgo_loop_destroy(s->loop);
		free(s);
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	s->conf = conf;
	s->o = *opts;
	if (opts->name && *opts->name) {
		snprintf(s->name, sizeof(s->name), "%s", opts->name);
	} else {
		if (gethostname(host, sizeof(host)) != 0)
			strcpy(host, "cron");
		host[sizeof(host) - 1] = '\0';
		snprintf(s->name, sizeof(s->name), "%s-%d", host,
			 (int)getpid());
	}
	s->o.name = s->name;
	snprintf(s->subject, sizeof(s->subject), "cron %s", s->name);
	s->backoff = 100;
	if (metrics_init(s, err) != PGO_OK) {
		pgo_scheduler_destroy(s);
		return NULL;
	}
	pgo_error_clear(err);
	return s;
}

void pgo_scheduler_destroy(pgo_scheduler_t *s)
{
	if (!s)
		return;
	if (s->pg)
		PQfinish(s->pg);
	pgo_cron_zones_clear(&s->zones);
	pgo_monitor_destroy(s->mon);
	pgo_loop_destroy(s->loop); /* and its timers */
	free(s);
}

void pgo_scheduler_request_stop(pgo_scheduler_t *s)
{
	s->stop = 1;
	pgo_loop_wake(s->loop); /* async-signal-safe, keeps errno */
}

void pgo_scheduler_get_stats(const pgo_scheduler_t *s,
			     pgo_scheduler_stats_t *out)
{
	*out = s->stats;
}

const char *pgo_scheduler_errmsg(const pgo_scheduler_t *s)
{
	return s ? s->errmsg : "no scheduler";
}

void pgo_sched_down(pgo_scheduler_t *s, const char *why)
{
	const struct pgo_conf_values *v = pgo_conf_values(s->conf);

	/* conn.c's rule (pgo_outage_t): a storm writes a few lines. */
	pgo_outage_failed(pgo_outage_of(s->subject), s->subject,
			  s->connected_once, why);
	s->down_logged = true;
	if (s->pg)
		PQfinish(s->pg);
	s->pg = NULL;
	/* A new connection may see new tzdata (a server restarted after a
	 * tzdata upgrade): ask again. */
	pgo_cron_zones_clear(&s->zones);
	s->retry_at = pgo_now_ms() + s->backoff;
	s->backoff = s->backoff * 2 > v->reconnect_max ? v->reconnect_max
						       : s->backoff * 2;
}

/* Ends the scheduler's run: its start was refused for why (code: the
 * PGO_ERR_* that pgo_scheduler_run returns). */
static void sched_refuse(pgo_scheduler_t *s, int code, const char *why)
{
	snprintf(s->errmsg, sizeof(s->errmsg), "%s", why);
	PQfinish(s->pg);
	s->pg = NULL;
	s->refused = code;
	s->stop = 1;
}

static void sched_connect(pgo_scheduler_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(s->conf);
	char timeout[24], app[80], what[512];
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	pgo_error_t err;
	pgo_pq_wait_t how;

	snprintf(app, sizeof(app), "pgoutbox cron %.50s", s->name);
	pgo_conn_params(s->conf, app, keys, vals, timeout);
	s->pg = pgo_pq_connect(keys, vals, v->connect_timeout, &s->stop, &how);
	if (how == PGO_PQ_STOPPED) {
		PQfinish(s->pg);
		s->pg = NULL;
		return;
	}
	/* At start, what no retry fixes stops the scheduler (conn.c's rule);
	 * after a first session every failure is an outage. */
	if (how == PGO_PQ_LOST && s->pg && !s->connected_once &&
	    pgo_conn_start_refusal(s->conf, pgo_pq_msg(s->pg, NULL), true,
				   &err) != PGO_OK) {
		sched_refuse(s, err.code, err.msg);
		return;
	}
	if (how != PGO_PQ_READY) {
		char why[512];

		if (how == PGO_PQ_TIMEOUT)
			snprintf(why, sizeof(why),
				 "no answer to connecting within %lld ms "
				 "(server or network hung)",
				 (long long)v->connect_timeout);
		else
			pgo_pq_wait_why(s->pg, how, 0, why, sizeof(why));
		pgo_sched_down(s, why);
		return;
	}
	if (pgo_schema_check(s->pg, &err) != PGO_OK) {
		/* A schema missing or of another version is refused; a failed
		 * read of it may pass (pgo_pq_retriable's rule). */
		if (!(err.code == PGO_ERR_DB && err.retriable) &&
		    !s->connected_once) {
			sched_refuse(s, err.code, err.msg);
			return;
		}
		pgo_sched_down(s, err.msg);
		return;
	}
	if (!s->connected_once)
		pgo_log(PGO_LOG_INFO, s->subject,
			"started (grace %" PRId64 " ms, clock offset %" PRId64
			" ms)",
			s->o.grace_ms, s->o.clock_offset_ms);
	s->connected_once = true;
	/* Which server: after a failover, the promoted one. */
	snprintf(what, sizeof(what), "connected again to %s on %s:%s",
		 PQdb(s->pg), PQhost(s->pg), PQport(s->pg));
	pgo_outage_up(pgo_outage_of(s->subject), s->subject,
		      s->down_logged ? what : NULL);
	s->down_logged = false;
	s->backoff = 100;
}

PGresult *pgo_sched_run(pgo_scheduler_t *s, const char *what, const char *sql,
			int n, const char *const *params, pgo_error_t *err)
{
	const struct pgo_conf_values *v = pgo_conf_values(s->conf);
	int64_t limit = v->statement_timeout
				? v->statement_timeout + PGO_SECONDS(10)
				: 0;
	pgo_pq_wait_t how;
	char why[256];
	PGresult *res;
	ExecStatusType st;

	res = pgo_pq_exec(s->pg, sql, n, params,
			  limit ? pgo_now_ms() + limit : 0, &s->stop, &how);
	if (!res) {
		/* No reply (a hung server or path), a stop, or the connection
		 * lost: down, and made again with backoff. */
		pgo_error_set(
			err, PGO_ERR_DB, 1, "%s: %s", what,
			pgo_pq_wait_why(s->pg, how, limit, why, sizeof(why)));
		if (how == PGO_PQ_STOPPED) {
			PQfinish(s->pg);
			s->pg = NULL;
		} else {
			pgo_sched_down(s, err->msg);
		}
		return NULL;
	}
	st = PQresultStatus(res);
	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(s->pg, res),
			      "%s: %s", what, pgo_pq_msg(s->pg, res));
		PQclear(res);
		return NULL;
	}
	return res;
}

/* Drops the history partitions (UTC days) older than history_keep_ms and
 * creates the next ones: no DELETE, no dead tuples (sql/008). */
static void expire_history(pgo_scheduler_t *s)
{
	char keep[32];
	const char *p[1] = {keep};
	pgo_error_t err;
	PGresult *r;

	snprintf(keep, sizeof(keep), "%" PRId64, s->o.history_keep_ms);
	r = pgo_sched_run(
		s, "expiring history",
		"SELECT created, dropped FROM pgoutbox.cron_history_maintain("
		"CASE WHEN $1::bigint > 0 THEN $1::bigint * interval "
		"'1 millisecond' END)",
		1, p, &err);
	if (r) {
		if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 1), "0") != 0)
			pgo_log(PGO_LOG_INFO, s->subject,
				"dropped %s day(s) of history older than "
				"%" PRId64 " ms",
				PQgetvalue(r, 0, 1), s->o.history_keep_ms);
		PQclear(r);
	} else {
		/* The history is kept meanwhile; say why, e.g. a role
		 * without EXECUTE on cron_history_maintain (docs/queue.md). */
		pgo_log(PGO_LOG_WARN, s->subject,
			"%s; the history is kept until this works", err.msg);
	}
}

/* One pass over the enabled schedules: fires what is due and returns how
 * long to sleep until the next pass (ms).  now is when the pass began. */
static int64_t pass(pgo_scheduler_t *s, int64_t now)
{
	int64_t sleep_ms = s->o.max_sleep_ms;
	pgo_error_t err;
	PGresult *res;

	if (!s->pg && now >= s->retry_at)
		sched_connect(s);
	if (!s->pg)
		return s->retry_at - now;
	res = pgo_sched_run(
		s, "reading schedules",
		"SELECT extract(epoch FROM now())::float8, name, expr, tz, "
		"extract(epoch FROM last_tick)::bigint, missed, "
		"catch_up_max FROM pgoutbox.cron_schedules WHERE enabled "
		"ORDER BY name",
		0, NULL, &err);
	if (!res) {
		if (s->pg)
			pgo_sched_down(s, err.msg);
		return s->retry_at - pgo_now_ms();
	}
	for (int i = 0; i < PQntuples(res) && s->pg; i++) {
		double dbnow = strtod(PQgetvalue(res, i, 0), NULL);
		int64_t next = pgo_sched_handle(s, res, i, dbnow);
		int64_t ms;

		if (next <= 0)
			continue;
		ms = pgo_cron_wait_ms(next, dbnow, pgo_now_ms() - now);
		if (ms < sleep_ms)
			sleep_ms = ms;
	}
	PQclear(res);
	if (s->pg && s->expire_pending) {
		/* Expiry came due while PostgreSQL was away: now. */
		s->expire_pending = false;
		pgo_loop_timer_set(s->expire_timer, pgo_now_ms());
	}
	return pgo_cron_skewed_sleep(sleep_ms, s->o.clock_offset_ms);
}

/* The pass timer: a pass, then the timer is armed for the next one. */
static void on_pass(void *arg)
{
	pgo_scheduler_t *s = arg;
	int64_t sleep_ms;

	if (s->stop)
		return;
	sleep_ms = pass(s, pgo_now_ms());
	if (s->pg)
		pgo_monitor_ready(s->mon);
	if (sleep_ms < 1)
		sleep_ms = 1;
	if (sleep_ms > PASS_MAX_MS)
		sleep_ms = PASS_MAX_MS;
	pgo_loop_timer_set(s->pass_timer, pgo_now_ms() + sleep_ms);
}

/* The history timer: a retention pass every EXPIRE_EVERY, on the pass's
 * connection; while that is down, the next pass that connects asks for
 * it. */
static void on_expire(void *arg)
{
	pgo_scheduler_t *s = arg;

	if (s->stop)
		return;
	if (!s->pg) {
		s->expire_pending = true;
		return;
	}
	expire_history(s);
	pgo_loop_timer_set(s->expire_timer, pgo_now_ms() + EXPIRE_EVERY);
}

int pgo_scheduler_run(pgo_scheduler_t *s)
{
	int64_t now = pgo_now_ms();

	/* "started" comes with the first session (sched_connect()), so that
	 * a refused start's first line is why. */
	/* The first pass at once, then the first retention pass in the same
	 * turn (timers due together run in the order they were added). */
	pgo_loop_timer_set(s->pass_timer, now);
	pgo_loop_timer_set(s->expire_timer, now);
	while (!s->stop) {
		int rc = pgo_loop_run_once(s->loop, 0);

		if (s->stop)
			pgo_monitor_stopping(s->mon);

		if (rc < 0) {
			snprintf(s->errmsg, sizeof(s->errmsg), "poll: %s",
				 strerror(-rc));
			pgo_log(PGO_LOG_ERROR, s->subject, "%s", s->errmsg);
			return PGO_ERR_IO;
		}
	}
	if (s->refused != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, s->subject, "%s", s->errmsg);
		return s->refused;
	}
	pgo_log(PGO_LOG_INFO, s->subject,
		"stopped: fired %" PRIu64 ", skipped %" PRIu64
		", ticks won by other instances %" PRIu64,
		s->stats.fired, s->stats.skipped, s->stats.lost_races);
	return PGO_OK;
}
