/*
 * cron.c — distributed cron: schedules in pgoutbox.cron_schedules, the
 * operator's commands, and the scheduler loop that any number of instances
 * may run at once.
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cron/cronexpr.h"
#include "metrics/metrics.h"
#include "loop/loop.h"
#include "pgo_int.h"

#define MAX_DUE	     1000000 /* ticks examined per schedule and pass */
#define MAX_RECORDED 1000    /* skipped ticks recorded per pass */
#define EXPIRE_EVERY 600000  /* ms between history retention passes */
#define PASS_MAX_MS  60000   /* a pass at least this often, whatever else */

static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 100)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("_.:-", *s)))
			return false;
	return true;
}

/* Seconds since the epoch -> "2026-11-30T17:00:00Z". */
static const char *iso(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* ============================= time zones ============================= */

/* A zone is asked for this much beyond what is needed, so a scheduler asks
 * again about once a week. */
#define ZONE_SLACK (7 * 86400LL)

/* One zone's offsets as PostgreSQL gave them: the storage behind z. */
typedef struct zone_entry {
	char *name;		  /* the schedule's tz, the cache key */
	pgo_tz_change_t *changes; /* z.changes */
	pgo_cron_zone_t z;	  /* the view pgo_cron_next reads */
} zone_entry_t;

/* The zones asked of PostgreSQL, kept while they cover what is asked. */
typedef struct zone_cache {
	zone_entry_t *e;
	size_t n, cap;
} zone_cache_t;

static bool is_utc(const char *tz)
{
	return !tz || !*tz || strcmp(tz, "UTC") == 0;
}

static void zone_entry_free(zone_entry_t *ent)
{
	free(ent->name);
	free(ent->changes);
	memset(ent, 0, sizeof(*ent));
}

static void zone_cache_clear(zone_cache_t *c)
{
	for (size_t i = 0; i < c->n; i++)
		zone_entry_free(&c->e[i]);
	free(c->e);
	memset(c, 0, sizeof(*c));
}

/* Asks PostgreSQL for the offsets of zone tz at the instants [from, to]
 * into *ent (empty).  PGO_ERR_INVALID for a zone PostgreSQL does not know,
 * PGO_ERR_DB for other failures. */
static int zone_load(PGconn *conn, const char *tz, int64_t from, int64_t to,
		     zone_entry_t *ent, pgo_error_t *err)
{
	char lo[24], hi[24];
	const char *p[3] = {tz, lo, hi};
	const char *state;
	PGresult *res;
	int n, rc;

	snprintf(lo, sizeof(lo), "%" PRId64, from);
	snprintf(hi, sizeof(hi), "%" PRId64, to);
	res = PQexecParams(conn,
			   "SELECT at, utc_offset FROM pgoutbox.tz_offsets($1, "
			   "$2::bigint, $3::bigint) ORDER BY at",
			   3, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		/* invalid_parameter_value: 'unknown time zone "X"' */
		if (state && strcmp(state, "22023") == 0)
			rc = pgo_error_set(err, PGO_ERR_INVALID, 0, "%s",
					   pgo_pq_msg(conn, res));
		else
			rc = pgo_error_set(err, PGO_ERR_DB,
					   PQstatus(conn) == CONNECTION_BAD,
					   "time zone \"%s\": %s", tz,
					   pgo_pq_msg(conn, res));
		PQclear(res);
		return rc;
	}
	n = PQntuples(res);
	ent->name = strdup(tz);
	ent->changes =
		n > 1 ? malloc((size_t)(n - 1) * sizeof(*ent->changes)) : NULL;
	if (n < 1 || !ent->name || (n > 1 && !ent->changes)) {
		PQclear(res);
		zone_entry_free(ent);
		return n < 1 ? pgo_error_set(err, PGO_ERR_DB, 0,
					     "time zone \"%s\": no offsets", tz)
			     : pgo_error_set(err, PGO_ERR_NOMEM, 1,
					     "out of memory");
	}
	/* Row 0 is the offset at `from`; the others are its changes. */
	for (int i = 1; i < n; i++) {
		ent->changes[i - 1].at =
			strtoll(PQgetvalue(res, i, 0), NULL, 10);
		ent->changes[i - 1].off = atoi(PQgetvalue(res, i, 1));
	}
	ent->z.name = ent->name;
	ent->z.from = from;
	ent->z.to = to;
	ent->z.off = atoi(PQgetvalue(res, 0, 1));
	ent->z.changes = ent->changes;
	ent->z.n = (size_t)(n - 1);
	PQclear(res);
	return PGO_OK;
}

/* Zone tz with offsets for the instants PGO_CRON_ZONE_MARGIN before lo up
 * to hi: from the cache, else asked of PostgreSQL.  *out is NULL for UTC
 * (no question asked) and valid until the next call. */
static int zone_get(zone_cache_t *c, PGconn *conn, const char *tz, int64_t lo,
		    int64_t hi, const pgo_cron_zone_t **out, pgo_error_t *err)
{
	zone_entry_t *ent = NULL, fresh = {0};
	int rc;

	*out = NULL;
	if (is_utc(tz))
		return PGO_OK;
	lo -= PGO_CRON_ZONE_MARGIN;
	for (size_t i = 0; i < c->n && !ent; i++)
		if (strcmp(c->e[i].name, tz) == 0)
			ent = &c->e[i];
	if (ent && ent->z.from <= lo && ent->z.to >= hi) {
		*out = &ent->z;
		return PGO_OK;
	}
	rc = zone_load(conn, tz, lo, hi + ZONE_SLACK, &fresh, err);
	if (rc != PGO_OK)
		return rc;
	if (!ent) {
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 8;
			zone_entry_t *e = realloc(c->e, cap * sizeof(*e));

			if (!e) {
				zone_entry_free(&fresh);
				return pgo_error_set(err, PGO_ERR_NOMEM, 1,
						     "out of memory");
			}
			c->e = e;
			c->cap = cap;
		}
		ent = &c->e[c->n++];
	} else {
		zone_entry_free(ent);
	}
	*ent = fresh;
	*out = &ent->z;
	return PGO_OK;
}

/* PGO_OK when PostgreSQL knows a zone of exactly this name (UTC needs no
 * question), else PGO_ERR_INVALID naming it, with the right spelling when
 * only the case is wrong (PostgreSQL itself would take any case). */
static int tz_check(PGconn *conn, const char *tz, pgo_error_t *err)
{
	PGresult *res;
	int rc = PGO_OK;

	if (is_utc(tz))
		return PGO_OK;
	res = pgo_pq_run(
		conn, "checking the time zone",
		"SELECT name FROM pg_timezone_names WHERE lower(name) = "
		"lower($1) ORDER BY name = $1 DESC, name LIMIT 1",
		1, &tz, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "unknown time zone \"%.200s\" (see "
				   "pg_timezone_names)",
				   tz);
	else if (strcmp(PQgetvalue(res, 0, 0), tz) != 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "unknown time zone \"%.200s\" (did you mean "
				   "\"%s\"?)",
				   tz, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

/* ============================== schedules ============================== */

int pgo_cron_add(PGconn *conn, const pgo_cron_schedule_t *schedule,
		 pgo_error_t *err)
{
	pgo_cron_schedule_t full = {0}; /* the caller's; absent fields 0 */
	const pgo_cron_schedule_t *s = &full;
	const char *overlap, *missed, *tz;
	pgo_cron_expr_t e;
	char cmax[16];
	const char *p[8];
	PGresult *res;
	int rc;

	if (pgo_abi_copy(PGO_ABI_CRON_SCHEDULE, &full, schedule, err) != PGO_OK)
		return PGO_ERR_INVALID;
	overlap = s->overlap ? s->overlap : "skip";
	missed = s->missed ? s->missed : "run_once";
	tz = s->tz && *s->tz ? s->tz : "UTC";
	if (!name_ok(s->name))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "schedule name \"%s\": use 1 to 100 "
				     "characters of A-Z a-z 0-9 _ . : -",
				     s->name ? s->name : "");
	if (pgo_cron_parse(s->expr, &e, err) != PGO_OK)
		return PGO_ERR_INVALID;
	{
		/* "0 3 31 2 *" parses but never fires: say so now, not by
		 * silence.  No zone makes a missing day exist. */
		int64_t next;
		pgo_error_t why;

		if (pgo_cron_next(&e, NULL, pgo_wall_us() / 1000000, &next,
				  &why) != PGO_OK)
			return pgo_error_set(err, PGO_ERR_INVALID, 0,
					     "cron \"%s\" never fires: %s",
					     e.text, why.msg);
	}
	rc = tz_check(conn, tz, err);
	if (rc != PGO_OK)
		return rc;
	if (pgo_ident_check(s->queue, err) != PGO_OK) {
		char m[sizeof(err->msg)];

		snprintf(m, sizeof(m), "%s", err->msg);
		return pgo_error_set(err, PGO_ERR_INVALID, 0, "queue %s", m);
	}
	if (strcmp(overlap, "skip") != 0 && strcmp(overlap, "allow") != 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "overlap \"%s\": use skip or allow",
				     overlap);
	if (strcmp(missed, "skip") != 0 && strcmp(missed, "run_once") != 0 &&
	    strcmp(missed, "catch_up") != 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "missed \"%s\": use skip, run_once or "
				     "catch_up",
				     missed);
	if (s->catch_up_max < 0 || s->catch_up_max > 1000)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "catch-up-max must be 1 to 1000, not %d",
				     s->catch_up_max);
	if (s->catch_up_max > 1 && strcmp(missed, "catch_up") != 0)
		pgo_log(PGO_LOG_WARN, "cron",
			"schedule %s: catch-up-max %d is ignored with missed "
			"%s (it bounds missed catch_up)",
			s->name, s->catch_up_max, missed);
	res = pgo_pq_run(
		conn, "checking the queue",
		"SELECT 1 FROM pgoutbox.queues WHERE name = $1 AND kind = "
		"'work'",
		1, &s->queue, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "no work queue named \"%s\" (create it "
				     "with `pgoutbox queue create %s`)",
				     s->queue, s->queue);
	}
	PQclear(res);
	snprintf(cmax, sizeof(cmax), "%d",
		 s->catch_up_max ? s->catch_up_max : 1);
	p[0] = s->name;
	p[1] = e.text;
	p[2] = tz;
	p[3] = s->queue;
	p[4] = s->payload ? s->payload : "{}";
	p[5] = overlap;
	p[6] = missed;
	p[7] = cmax;
	/* Adding again replaces the definition; ticks count from now. */
	res = pgo_pq_run(
		conn, "adding the schedule",
		"INSERT INTO pgoutbox.cron_schedules AS c (name, expr, tz, "
		"queue, payload, overlap, missed, catch_up_max, last_tick) "
		"VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8::integer, "
		"date_trunc('second', now())) "
		"ON CONFLICT (name) DO UPDATE SET expr = EXCLUDED.expr, "
		"tz = EXCLUDED.tz, queue = EXCLUDED.queue, payload = "
		"EXCLUDED.payload, overlap = EXCLUDED.overlap, missed = "
		"EXCLUDED.missed, catch_up_max = EXCLUDED.catch_up_max, "
		"last_tick = EXCLUDED.last_tick, enabled = true",
		8, p, err);
	if (!res)
		return PGO_ERR_DB;
	PQclear(res);
	pgo_error_clear(err);
	return PGO_OK;
}

int pgo_cron_remove(PGconn *conn, const char *name, pgo_error_t *err)
{
	PGresult *res = pgo_pq_run(
		conn, "removing the schedule",
		"DELETE FROM pgoutbox.cron_schedules WHERE name = $1", 1, &name,
		err);
	int rc = PGO_OK;

	if (!res)
		return PGO_ERR_DB;
	if (strcmp(PQcmdTuples(res), "0") == 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "no schedule named \"%s\"", name);
	PQclear(res);
	return rc;
}

int pgo_cron_list(PGconn *conn, FILE *out, pgo_error_t *err)
{
	zone_cache_t zones = {0};
	PGresult *res = pgo_pq_run(
		conn, "cron list",
		"SELECT name, expr, tz, queue, overlap, missed, catch_up_max, "
		"extract(epoch FROM last_tick)::bigint, enabled "
		"FROM pgoutbox.cron_schedules ORDER BY name",
		0, NULL, err);

	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "%-20s %-18s %-14s %-12s %-20s %-20s %s\n", "NAME", "EXPR",
		"TZ", "QUEUE", "LAST TICK", "NEXT TICK", "POLICY");
	for (int i = 0; i < PQntuples(res); i++) {
		const char *tz = PQgetvalue(res, i, 2);
		const pgo_cron_zone_t *zone;
		pgo_cron_expr_t e;
		char last[32] = "-", next[32] = "?", pol[64];
		int64_t lt = strtoll(PQgetvalue(res, i, 7), NULL, 10), nt;

		if (!PQgetisnull(res, i, 7))
			iso(lt, last, sizeof(last));
		if (pgo_cron_parse(PQgetvalue(res, i, 1), &e, NULL) == PGO_OK &&
		    zone_get(&zones, conn, tz, lt, lt + PGO_CRON_HORIZON, &zone,
			     NULL) == PGO_OK &&
		    pgo_cron_next(&e, zone, lt, &nt, NULL) == PGO_OK)
			iso(nt, next, sizeof(next));
		if (strcmp(PQgetvalue(res, i, 8), "t") != 0)
			snprintf(next, sizeof(next), "(disabled)");
		snprintf(pol, sizeof(pol), "overlap=%s missed=%s%s%s",
			 PQgetvalue(res, i, 4), PQgetvalue(res, i, 5),
			 strcmp(PQgetvalue(res, i, 5), "catch_up") == 0 ? ":"
									: "",
			 strcmp(PQgetvalue(res, i, 5), "catch_up") == 0
				 ? PQgetvalue(res, i, 6)
				 : "");
		fprintf(out, "%-20s %-18s %-14s %-12s %-20s %-20s %s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), last,
			next, pol);
	}
	zone_cache_clear(&zones);
	PQclear(res);
	return PGO_OK;
}

int pgo_cron_history(PGconn *conn, const char *name, int limit, FILE *out,
		     pgo_error_t *err)
{
	char lim[16];
	const char *p[2] = {name, lim};
	PGresult *res;

	snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 50);
	res = pgo_pq_run(conn, "cron history",
			 "SELECT to_char(tick AT TIME ZONE 'UTC', "
			 "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), outcome, "
			 "coalesce(job_id::text, '-'), coalesce(reason, ''), "
			 "to_char(recorded_at AT TIME ZONE 'UTC', "
			 "'HH24:MI:SS.MS') FROM pgoutbox.cron_history "
			 "WHERE name = $1 ORDER BY tick DESC LIMIT $2::integer",
			 2, p, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "%-20s %-8s %-10s %-13s %s\n", "TICK", "OUTCOME", "JOB",
		"RECORDED", "REASON");
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "%-20s %-8s %-10s %-13s %s\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
			PQgetvalue(res, i, 2), PQgetvalue(res, i, 4),
			PQgetvalue(res, i, 3));
	if (PQntuples(res) == 0)
		fprintf(out, "(no ticks recorded for \"%s\")\n", name);
	PQclear(res);
	return PGO_OK;
}

/* ============================== scheduler ============================== */

struct pgo_scheduler {
	const pgo_conf_t *conf;
	pgo_scheduler_opts_t o;
	char name[96];
	char subject[128];
	PGconn *pg;			/* NULL while down */
	int64_t retry_at;		/* down: reconnect at (monotonic ms) */
	int64_t backoff;		/* ms: the next reconnect backoff */
	bool down_logged;		/* "connection lost" said once */
	pgo_loop_t *loop;		/* the one loop the scheduler runs on */
	pgo_loop_timer_t *pass_timer;	/* the next pass over the schedules */
	pgo_loop_timer_t *expire_timer; /* the next history retention pass */
	bool expire_pending;		/* expiry came due while down */
	volatile sig_atomic_t stop;	/* set by pgo_scheduler_request_stop */
	zone_cache_t zones; /* the schedules' zones, asked of this pg */
	pgo_scheduler_stats_t stats;
	uint64_t missed; /* ticks found past the grace (fired or skipped) */
	/* metrics (src/lib/metrics) */
	pgo_monitor_t *mon;
	pgo_series_t *m_fired, *m_skipped, *m_missed, *m_elsewhere;
	char errmsg[512];
};

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
	zone_cache_clear(&s->zones);
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

static void sched_down(pgo_scheduler_t *s, const char *why)
{
	const struct pgo_conf_values *v = pgo_conf_values(s->conf);

	if (!s->down_logged)
		pgo_log(PGO_LOG_WARN, s->subject,
			"database connection lost: %s; reconnecting with "
			"backoff",
			why);
	s->down_logged = true;
	if (s->pg)
		PQfinish(s->pg);
	s->pg = NULL;
	/* A new connection may see new tzdata (a server restarted after a
	 * tzdata upgrade): ask again. */
	zone_cache_clear(&s->zones);
	s->retry_at = pgo_now_ms() + s->backoff;
	s->backoff = s->backoff * 2 > v->reconnect_max ? v->reconnect_max
						       : s->backoff * 2;
}

static void sched_connect(pgo_scheduler_t *s)
{
	const struct pgo_conf_values *v = pgo_conf_values(s->conf);
	char timeout[24], app[80];
	const char *keys[] = {"connect_timeout", "dbname", "application_name",
			      NULL};
	const char *vals[] = {
		timeout, v->db_url && *v->db_url ? v->db_url : NULL, app, NULL};
	pgo_error_t err;

	snprintf(timeout, sizeof(timeout), "%lld",
		 (long long)(v->connect_timeout + 999) / 1000);
	snprintf(app, sizeof(app), "pgoutbox cron %.50s", s->name);
	if (!vals[1]) {
		keys[1] = "application_name";
		vals[1] = app;
		keys[2] = NULL;
	}
	s->pg = PQconnectdbParams(keys, vals, 1);
	if (!s->pg || PQstatus(s->pg) != CONNECTION_OK) {
		sched_down(s,
			   s->pg ? pgo_pq_msg(s->pg, NULL) : "out of memory");
		return;
	}
	if (pgo_schema_check(s->pg, &err) != PGO_OK) {
		sched_down(s, err.msg);
		return;
	}
	if (s->down_logged)
		pgo_log(PGO_LOG_INFO, s->subject, "connected again");
	s->down_logged = false;
	s->backoff = 100;
}

/* A growable set of ticks with what to do with each. */
typedef struct due {
	pgo_buf_t ticks, fire, reasons;
	int n;
} due_t;

static void due_add(due_t *d, int64_t tick, bool fire, const char *reason)
{
	pgo_buf_printf(&d->ticks, "%s%" PRId64, d->n ? "," : "", tick);
	pgo_buf_printf(&d->fire, "%s%s", d->n ? "," : "", fire ? "t" : "f");
	if (d->n)
		pgo_buf_puts(&d->reasons, ",");
	pgo_buf_array_elem(&d->reasons, reason);
	d->n++;
}

/* Handles one schedule: finds its due ticks by the database clock, applies
 * the missed-tick policy and fires them through the compare-and-set.
 * Returns the schedule's next tick (seconds), or 0 when it has none. */
static int64_t handle_schedule(pgo_scheduler_t *s, PGresult *res, int row,
			       double dbnow)
{
	const char *name = PQgetvalue(res, row, 1);
	const char *expr = PQgetvalue(res, row, 2);
	const char *tz = PQgetvalue(res, row, 3);
	const char *missed = PQgetvalue(res, row, 5);
	int cmax = atoi(PQgetvalue(res, row, 6));
	int64_t prev, t, next = 0, newest, *ring = NULL;
	int64_t grace_from = (int64_t)(dbnow - (double)s->o.grace_ms / 1000.0);
	int64_t now_s = (int64_t)dbnow;
	size_t count = 0, nmissed = 0, late_at = 0,
	       ringcap = MAX_RECORDED + 1000;
	const pgo_cron_zone_t *zone;
	pgo_cron_expr_t e;
	pgo_error_t err;
	due_t d = {0};
	char prev_s[24], when[32], reason[160];
	const char *params[5];
	PGresult *r;
	int fired;

	if (PQgetisnull(res, row, 4)) {
		const char *p[1] = {name};

		r = pgo_pq_run(
			s->pg, "starting a schedule",
			"UPDATE pgoutbox.cron_schedules SET last_tick = "
			"date_trunc('second', now()) WHERE name = $1 AND "
			"last_tick IS NULL",
			1, p, &err);
		PQclear(r);
		return 0;
	}
	prev = strtoll(PQgetvalue(res, row, 4), NULL, 10);
	/* The ticks after prev up to now, and the one after them: the zone
	 * is needed from prev (or now) to 5 years after now (or prev). */
	if (pgo_cron_parse(expr, &e, &err) != PGO_OK ||
	    zone_get(&s->zones, s->pg, tz, prev < now_s ? prev : now_s,
		     (prev > now_s ? prev : now_s) + PGO_CRON_HORIZON, &zone,
		     &err) != PGO_OK ||
	    pgo_cron_next(&e, zone, prev, &next, &err) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, s->subject, "schedule %s: %s", name,
			err.msg);
		if (PQstatus(s->pg) == CONNECTION_BAD)
			sched_down(s, err.msg);
		return 0;
	}
	if ((double)next > dbnow)
		return next;
	/* The due ticks; only the newest ones are kept (a long outage of an
	 * every-second schedule has many). */
	ring = malloc(ringcap * sizeof(*ring));
	if (!ring)
		return next;
	for (t = next; count < MAX_DUE && (double)t <= dbnow;) {
		ring[count % ringcap] = t;
		count++;
		if (pgo_cron_next(&e, zone, t, &t, &err) != PGO_OK) {
			t = INT64_MAX;
			break;
		}
	}
	next = t;
	/* Ticks within the grace period are on time; older ones were
	 * missed (no instance was running). */
	for (late_at = 0; late_at < count && late_at < ringcap; late_at++)
		if (ring[(count - 1 - late_at) % ringcap] < grace_from)
			break;
	nmissed = count - late_at; /* the oldest nmissed ticks */
	pgo_buf_init(&d.ticks);
	pgo_buf_init(&d.fire);
	pgo_buf_init(&d.reasons);
	pgo_buf_puts(&d.ticks, "{");
	pgo_buf_puts(&d.fire, "{");
	pgo_buf_puts(&d.reasons, "{");
	{
		size_t first = count > ringcap ? count - ringcap : 0;
		size_t runs = 0, unrecorded = 0;

		if (strcmp(missed, "run_once") == 0)
			runs = nmissed ? 1 : 0;
		else if (strcmp(missed, "catch_up") == 0)
			runs = nmissed < (size_t)cmax ? nmissed : (size_t)cmax;
		if (nmissed > MAX_RECORDED + runs)
			first = nmissed - MAX_RECORDED - runs > first
					? nmissed - MAX_RECORDED - runs
					: first;
		unrecorded = first;
		for (size_t i = first; i < count; i++) {
			int64_t tick = ring[i % ringcap];

			if (i >= nmissed) {
				due_add(&d, tick, true, NULL);
			} else if (i >= nmissed - runs) {
				snprintf(reason, sizeof(reason),
					 "missed (no scheduler was running): "
					 "%s, %zu of %zu missed tick(s) run",
					 missed, runs, nmissed);
				due_add(&d, tick, true, reason);
			} else {
				snprintf(reason, sizeof(reason),
					 "missed (no scheduler was running): "
					 "%s policy",
					 missed);
				due_add(&d, tick, false, reason);
			}
		}
		if (unrecorded)
			pgo_log(PGO_LOG_WARN, s->subject,
				"schedule %s: %zu older missed ticks are not "
				"recorded in the history",
				name, unrecorded);
	}
	newest = ring[(count - 1) % ringcap];
	free(ring);
	pgo_buf_puts(&d.ticks, "}");
	pgo_buf_puts(&d.fire, "}");
	pgo_buf_puts(&d.reasons, "}");
	snprintf(prev_s, sizeof(prev_s), "%" PRId64, prev);
	params[0] = name;
	params[1] = prev_s;
	params[2] = d.ticks.data;
	params[3] = d.fire.data;
	params[4] = d.reasons.data;
	r = d.ticks.oom || d.fire.oom || d.reasons.oom
		    ? NULL
		    : pgo_pq_run(s->pg, "firing",
				 "SELECT pgoutbox.cron_fire($1, $2::bigint, "
				 "$3::bigint[], $4::boolean[], $5::text[])",
				 5, params, &err);
	pgo_buf_free(&d.ticks);
	pgo_buf_free(&d.fire);
	pgo_buf_free(&d.reasons);
	if (!r) {
		pgo_log(PGO_LOG_WARN, s->subject, "schedule %s: %s", name,
			err.msg);
		if (PQstatus(s->pg) == CONNECTION_BAD)
			sched_down(s, err.msg);
		return next;
	}
	fired = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (fired < 0) {
		s->stats.lost_races++;
		pgo_log(PGO_LOG_DEBUG, s->subject,
			"schedule %s: tick %s handled by another instance",
			name, iso(newest, when, sizeof(when)));
		return next;
	}
	s->stats.fired += (uint64_t)fired;
	s->stats.skipped += (uint64_t)(d.n - fired);
	s->missed += (uint64_t)nmissed;
	pgo_log(PGO_LOG_INFO, s->subject,
		"schedule %s: %d tick(s) up to %s: %d fired, %d skipped", name,
		d.n, iso(newest, when, sizeof(when)), fired, d.n - fired);
	return next;
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
	r = pgo_pq_run(
		s->pg, "expiring history",
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
	res = pgo_pq_run(
		s->pg, "reading schedules",
		"SELECT extract(epoch FROM now())::float8, name, expr, tz, "
		"extract(epoch FROM last_tick)::bigint, missed, "
		"catch_up_max FROM pgoutbox.cron_schedules WHERE enabled "
		"ORDER BY name",
		0, NULL, &err);
	if (!res) {
		sched_down(s, err.msg);
		return s->retry_at - pgo_now_ms();
	}
	for (int i = 0; i < PQntuples(res) && s->pg; i++) {
		double dbnow = strtod(PQgetvalue(res, i, 0), NULL);
		int64_t next = handle_schedule(s, res, i, dbnow);
		int64_t ms;

		if (next <= 0)
			continue;
		/* Time left by the database clock since the query; the work
		 * above took some of it. */
		ms = (int64_t)(((double)next - dbnow) * 1000.0) + 1 -
		     (pgo_now_ms() - now);
		if (ms < sleep_ms)
			sleep_ms = ms;
	}
	PQclear(res);
	if (s->pg && s->expire_pending) {
		/* Expiry came due while PostgreSQL was away: now. */
		s->expire_pending = false;
		pgo_loop_timer_set(s->expire_timer, pgo_now_ms());
	}
	if (sleep_ms < 0)
		sleep_ms = 0;
	/* A skewed local clock wakes up early or late; the tick decision is
	 * the database's either way.  Early wakers find nothing due and
	 * sleep the rest. */
	if (sleep_ms + s->o.clock_offset_ms > 5)
		sleep_ms += s->o.clock_offset_ms;
	else if (sleep_ms > 100)
		sleep_ms = 100;
	return sleep_ms;
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

	pgo_log(PGO_LOG_INFO, s->subject,
		"started (grace %" PRId64 " ms, clock offset %" PRId64 " ms)",
		s->o.grace_ms, s->o.clock_offset_ms);
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
	pgo_log(PGO_LOG_INFO, s->subject,
		"stopped: fired %" PRIu64 ", skipped %" PRIu64
		", ticks won by other instances %" PRIu64,
		s->stats.fired, s->stats.skipped, s->stats.lost_races);
	return PGO_OK;
}
