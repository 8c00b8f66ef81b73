/*
 * cron.c — distributed cron's schedules in pgoutbox.cron_schedules: the
 * operator's add, remove, list and history.  The scheduler that fires
 * them is scheduler.c (cron_int.h lists the files).
 *
 * Adding a schedule of an existing name replaces it: the fields given
 * replace its own, the others (zone, payload, policies) stay as they
 * were, and its ticks count from then.  Until it ticks, `cron list`
 * shows no last tick.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron/cron_int.h"
#include "base/abi.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "cron/cron.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

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
const char *pgo_cron_iso(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* The checks that need no database: the name, the expression (one that
 * never fires included), the queue's name, and the policies given. */
static int check_schedule(const pgo_cron_schedule_t *s, pgo_cron_expr_t *e,
			  pgo_error_t *err)
{
	int64_t next;
	pgo_error_t why;

	if (!name_ok(s->name))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "schedule name \"%s\": use 1 to 100 "
				     "characters of A-Z a-z 0-9 _ . : -",
				     s->name ? s->name : "");
	if (pgo_cron_parse(s->expr, e, err) != PGO_OK)
		return PGO_ERR_INVALID;
	/* "0 3 31 2 *" parses but never fires: say so now, not by silence.
	 * No zone makes a missing day exist. */
	if (pgo_cron_next(e, NULL, pgo_wall_us() / 1000000, &next, &why) !=
	    PGO_OK)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "cron \"%s\" never fires: %s", e->text,
				     why.msg);
	if (pgo_ident_check(s->queue, err) != PGO_OK) {
		char m[sizeof(err->msg)];

		snprintf(m, sizeof(m), "%s", err->msg);
		return pgo_error_set(err, PGO_ERR_INVALID, 0, "queue %s", m);
	}
	if (s->overlap && strcmp(s->overlap, "skip") != 0 &&
	    strcmp(s->overlap, "allow") != 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "overlap \"%s\": use skip or allow",
				     s->overlap);
	if (s->missed && strcmp(s->missed, "skip") != 0 &&
	    strcmp(s->missed, "run_once") != 0 &&
	    strcmp(s->missed, "catch_up") != 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "missed \"%s\": use skip, run_once or "
				     "catch_up",
				     s->missed);
	if (s->catch_up_max < 0 || s->catch_up_max > 1000)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "catch-up-max must be 1 to 1000, not %d",
				     s->catch_up_max);
	return PGO_OK;
}

void pgo_cron_merge(const pgo_cron_schedule_t *s, const pgo_cron_def_t *old,
		    pgo_cron_def_t *out)
{
	static const pgo_cron_def_t dflt = {"UTC", "{}", "skip", "run_once", 1};
	const pgo_cron_def_t *base = old ? old : &dflt;

	out->tz = s->tz && *s->tz ? s->tz : base->tz;
	out->payload = s->payload ? s->payload : base->payload;
	out->overlap = s->overlap ? s->overlap : base->overlap;
	out->missed = s->missed ? s->missed : base->missed;
	out->catch_up_max =
		s->catch_up_max > 0 ? s->catch_up_max : base->catch_up_max;
}

/* The schedule named name as stored, into *old (its strings in *res, to
 * clear), or *res NULL when there is none.  PGO_ERR_DB on failure. */
static int read_old(PGconn *conn, const char *name, PGresult **res,
		    pgo_cron_def_t *old, pgo_error_t *err)
{
	*res = pgo_pq_run(conn, "reading the schedule",
			  "SELECT tz, payload::text, overlap, missed, "
			  "catch_up_max FROM pgoutbox.cron_schedules "
			  "WHERE name = $1",
			  1, &name, err);
	if (!*res)
		return PGO_ERR_DB;
	if (PQntuples(*res) == 0) {
		PQclear(*res);
		*res = NULL;
		return PGO_OK;
	}
	old->tz = PQgetvalue(*res, 0, 0);
	old->payload = PQgetvalue(*res, 0, 1);
	old->overlap = PQgetvalue(*res, 0, 2);
	old->missed = PQgetvalue(*res, 0, 3);
	old->catch_up_max = atoi(PQgetvalue(*res, 0, 4));
	return PGO_OK;
}

/* PGO_OK when queue is a work queue, else PGO_ERR_INVALID saying how to
 * make it (PGO_ERR_DB when the question failed). */
static int check_queue(PGconn *conn, const char *queue, pgo_error_t *err)
{
	PGresult *res = pgo_pq_run(conn, "checking the queue",
				   "SELECT 1 FROM pgoutbox.queues WHERE name = "
				   "$1 AND kind = 'work'",
				   1, &queue, err);
	int n;

	if (!res)
		return PGO_ERR_DB;
	n = PQntuples(res);
	PQclear(res);
	if (n == 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "no work queue named \"%s\" (create it "
				     "with `pgoutbox queue create %s`)",
				     queue, queue);
	return PGO_OK;
}

/* Writes the schedule: a new row, or the existing one replaced, its
 * ticks counting from now: last_tick is the second of created_at (set
 * again on a replace) until the first tick, which is how `cron list`
 * knows a schedule that has not ticked. */
static int upsert(PGconn *conn, const pgo_cron_schedule_t *s,
		  const pgo_cron_expr_t *e, const pgo_cron_def_t *d,
		  pgo_error_t *err)
{
	char cmax[16];
	const char *p[8] = {s->name,	e->text,    d->tz,     s->queue,
			    d->payload, d->overlap, d->missed, cmax};
	PGresult *res;

	snprintf(cmax, sizeof(cmax), "%d", d->catch_up_max);
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
		"last_tick = EXCLUDED.last_tick, created_at = now(), "
		"enabled = true",
		8, p, err);
	if (!res)
		return PGO_ERR_DB;
	PQclear(res);
	return PGO_OK;
}

int pgo_cron_put(PGconn *conn, const pgo_cron_schedule_t *schedule,
		 bool *replaced, pgo_error_t *err)
{
	pgo_cron_schedule_t s = {0}; /* the caller's; absent fields 0 */
	pgo_cron_def_t old, d;
	PGresult *old_res = NULL;
	pgo_cron_expr_t e;
	int rc;

	if (replaced)
		*replaced = false;
	if (pgo_abi_copy(PGO_ABI_CRON_SCHEDULE, &s, schedule, err) != PGO_OK)
		return PGO_ERR_INVALID;
	rc = check_schedule(&s, &e, err);
	if (rc == PGO_OK)
		rc = read_old(conn, s.name, &old_res, &old, err);
	if (rc != PGO_OK)
		return rc;
	pgo_cron_merge(&s, old_res ? &old : NULL, &d);
	/* A zone given is checked; one kept was checked when it was. */
	if (s.tz && *s.tz)
		rc = pgo_cron_tz_check(conn, s.tz, err);
	if (rc == PGO_OK)
		rc = check_queue(conn, s.queue, err);
	if (rc == PGO_OK && s.catch_up_max > 1 &&
	    strcmp(d.missed, "catch_up") != 0)
		pgo_log(PGO_LOG_WARN, "cron",
			"schedule %s: catch-up-max %d is ignored with missed "
			"%s (it bounds missed catch_up)",
			s.name, s.catch_up_max, d.missed);
	if (rc == PGO_OK)
		rc = upsert(conn, &s, &e, &d, err);
	if (rc == PGO_OK && replaced)
		*replaced = old_res != NULL;
	PQclear(old_res);
	if (rc == PGO_OK)
		pgo_error_clear(err);
	return rc;
}

int pgo_cron_add(PGconn *conn, const pgo_cron_schedule_t *schedule,
		 pgo_error_t *err)
{
	return pgo_cron_put(conn, schedule, NULL, err);
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
		"extract(epoch FROM last_tick)::bigint, enabled, "
		"last_tick <> date_trunc('second', created_at) "
		"FROM pgoutbox.cron_schedules "
		"ORDER BY name",
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

		/* Until its first tick, last_tick is the second the
		 * schedule was added in (its ticks count from then, and
		 * every tick is after it): no tick to show. */
		if (strcmp(PQgetvalue(res, i, 9), "t") == 0)
			pgo_cron_iso(lt, last, sizeof(last));
		if (pgo_cron_parse(PQgetvalue(res, i, 1), &e, NULL) == PGO_OK &&
		    pgo_cron_zone_get(&zones, conn, tz, lt,
				      lt + PGO_CRON_HORIZON, &zone,
				      NULL) == PGO_OK &&
		    pgo_cron_next(&e, zone, lt, &nt, NULL) == PGO_OK)
			pgo_cron_iso(nt, next, sizeof(next));
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
	pgo_cron_zones_clear(&zones);
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
