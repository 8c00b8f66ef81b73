/*
 * fire.c — one schedule in a scheduler's pass.  Exactly once per tick: an
 * instance that finds ticks due calls pgoutbox.cron_fire(), which in ONE
 * transaction compare-and-sets the schedule's last_tick from the value
 * the instance read to the newest tick it handles, enqueues the jobs and
 * records the history.  Of instances racing for the same ticks exactly
 * one wins the compare-and-set; the others update 0 rows and do nothing.
 * Which ticks are due and what becomes of each is due.c's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cron/cron_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

/* A schedule's row in the pass's query (scheduler.c). */
typedef struct sched_row {
	const char *name, *expr, *tz, *missed;
	int cmax;     /* catch_up_max */
	int64_t prev; /* last_tick, seconds */
} sched_row_t;

/* The arrays cron_fire() takes: the ticks, whether each fires, and the
 * reason recorded with it. */
typedef struct due_arrays {
	pgo_buf_t ticks, fire, reasons;
	int n;
} due_arrays_t;

static void arrays_add(due_arrays_t *d, int64_t tick, bool fire,
		       const char *reason)
{
	pgo_buf_printf(&d->ticks, "%s%" PRId64, d->n ? "," : "", tick);
	pgo_buf_printf(&d->fire, "%s%s", d->n ? "," : "", fire ? "t" : "f");
	if (d->n)
		pgo_buf_puts(&d->reasons, ",");
	pgo_buf_array_elem(&d->reasons, reason);
	d->n++;
}

static void arrays_free(due_arrays_t *d)
{
	pgo_buf_free(&d->ticks);
	pgo_buf_free(&d->fire);
	pgo_buf_free(&d->reasons);
}

/* The arrays of the recorded ticks of due by plan; logs how many older
 * missed ticks are left out of the history. */
static void arrays_build(pgo_scheduler_t *s, const sched_row_t *row,
			 const pgo_cron_due_t *due, const pgo_cron_plan_t *plan,
			 due_arrays_t *d)
{
	char reason[160];

	pgo_buf_init(&d->ticks);
	pgo_buf_init(&d->fire);
	pgo_buf_init(&d->reasons);
	pgo_buf_puts(&d->ticks, "{");
	pgo_buf_puts(&d->fire, "{");
	pgo_buf_puts(&d->reasons, "{");
	for (size_t i = plan->first; i < plan->count; i++) {
		int64_t tick = due->ring[i % due->cap];

		switch (pgo_cron_fate(plan, i)) {
		case PGO_TICK_ON_TIME: arrays_add(d, tick, true, NULL); break;
		case PGO_TICK_RUN:
			snprintf(reason, sizeof(reason),
				 "missed (no scheduler was running): %s, %zu "
				 "of %zu missed tick(s) run",
				 row->missed, plan->runs, plan->nmissed);
			arrays_add(d, tick, true, reason);
			break;
		case PGO_TICK_SKIP:
		case PGO_TICK_UNRECORDED:
			snprintf(reason, sizeof(reason),
				 "missed (no scheduler was running): %s "
				 "policy",
				 row->missed);
			arrays_add(d, tick, false, reason);
			break;
		}
	}
	pgo_buf_puts(&d->ticks, "}");
	pgo_buf_puts(&d->fire, "}");
	pgo_buf_puts(&d->reasons, "}");
	if (plan->first)
		pgo_log(PGO_LOG_WARN, s->subject,
			"schedule %s: %zu older missed ticks are not recorded "
			"in the history",
			row->name, plan->first);
}

/* Fires the planned ticks through the compare-and-set and counts them. */
static void fire(pgo_scheduler_t *s, const sched_row_t *row,
		 const pgo_cron_due_t *due, const pgo_cron_plan_t *plan)
{
	int64_t newest = due->ring[(due->count - 1) % due->cap];
	due_arrays_t d = {0};
	char prev_s[24], when[32];
	const char *params[5];
	pgo_error_t err;
	PGresult *r;
	int fired;

	arrays_build(s, row, due, plan, &d);
	snprintf(prev_s, sizeof(prev_s), "%" PRId64, row->prev);
	params[0] = row->name;
	params[1] = prev_s;
	params[2] = d.ticks.data;
	params[3] = d.fire.data;
	params[4] = d.reasons.data;
	r = d.ticks.oom || d.fire.oom || d.reasons.oom
		    ? NULL
		    : pgo_sched_run(s, "firing",
				    "SELECT pgoutbox.cron_fire($1, $2::bigint, "
				    "$3::bigint[], $4::boolean[], $5::text[])",
				    5, params, &err);
	arrays_free(&d);
	if (!r) {
		pgo_log(PGO_LOG_WARN, s->subject, "schedule %s: %s", row->name,
			err.msg);
		if (s->pg && PQstatus(s->pg) == CONNECTION_BAD)
			pgo_sched_down(s, err.msg);
		return;
	}
	fired = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (fired < 0) {
		s->stats.lost_races++;
		pgo_log(PGO_LOG_DEBUG, s->subject,
			"schedule %s: tick %s handled by another instance",
			row->name, pgo_cron_iso(newest, when, sizeof(when)));
		return;
	}
	s->stats.fired += (uint64_t)fired;
	s->stats.skipped += (uint64_t)(d.n - fired);
	s->missed += (uint64_t)plan->nmissed;
	pgo_log(PGO_LOG_INFO, s->subject,
		"schedule %s: %d tick(s) up to %s: %d fired, %d skipped",
		row->name, d.n, pgo_cron_iso(newest, when, sizeof(when)), fired,
		d.n - fired);
}

/* A schedule never started (last_tick NULL): its ticks count from now. */
static void start(pgo_scheduler_t *s, const char *name)
{
	const char *p[1] = {name};
	pgo_error_t err;

	PQclear(pgo_sched_run(s, "starting a schedule",
			      "UPDATE pgoutbox.cron_schedules SET last_tick = "
			      "date_trunc('second', now()) WHERE name = $1 AND "
			      "last_tick IS NULL",
			      1, p, &err));
}

/* The first tick after the row's last one, into *next, with the
 * expression and zone it was computed in.  PGO_ERR_INVALID (logged) when
 * the expression, the zone or the tick cannot be had. */
static int first_tick(pgo_scheduler_t *s, const sched_row_t *row, int64_t now_s,
		      pgo_cron_expr_t *e, const pgo_cron_zone_t **zone,
		      int64_t *next)
{
	int64_t prev = row->prev;
	pgo_error_t err;

	/* The ticks after prev up to now, and the one after them: the zone
	 * is needed from prev (or now) to 5 years after now (or prev). */
	if (pgo_cron_parse(row->expr, e, &err) == PGO_OK &&
	    pgo_cron_zone_get(&s->zones, s->pg, row->tz,
			      prev < now_s ? prev : now_s,
			      (prev > now_s ? prev : now_s) + PGO_CRON_HORIZON,
			      zone, &err) == PGO_OK &&
	    pgo_cron_next(e, *zone, prev, next, &err) == PGO_OK)
		return PGO_OK;
	pgo_log(PGO_LOG_ERROR, s->subject, "schedule %s: %s", row->name,
		err.msg);
	if (s->pg && PQstatus(s->pg) == CONNECTION_BAD)
		pgo_sched_down(s, err.msg);
	return PGO_ERR_INVALID;
}

int64_t pgo_sched_handle(pgo_scheduler_t *s, PGresult *res, int row_i,
			 double dbnow)
{
	sched_row_t row = {
		.name = PQgetvalue(res, row_i, 1),
		.expr = PQgetvalue(res, row_i, 2),
		.tz = PQgetvalue(res, row_i, 3),
		.missed = PQgetvalue(res, row_i, 5),
		.cmax = atoi(PQgetvalue(res, row_i, 6)),
	};
	int64_t grace_from = (int64_t)(dbnow - (double)s->o.grace_ms / 1000.0);
	pgo_cron_due_t due = {.cap = MAX_RECORDED + 1000};
	const pgo_cron_zone_t *zone;
	pgo_cron_plan_t plan;
	pgo_cron_expr_t e;
	int64_t next = 0;

	if (PQgetisnull(res, row_i, 4)) {
		start(s, row.name);
		return 0;
	}
	row.prev = strtoll(PQgetvalue(res, row_i, 4), NULL, 10);
	if (first_tick(s, &row, (int64_t)dbnow, &e, &zone, &next) != PGO_OK)
		return 0;
	if ((double)next > dbnow)
		return next;
	due.ring = malloc(due.cap * sizeof(*due.ring));
	if (!due.ring)
		return next;
	pgo_cron_due_collect(&e, zone, next, dbnow, MAX_DUE, &due);
	pgo_cron_plan(&due, grace_from, pgo_cron_missed_kind(row.missed),
		      row.cmax, MAX_RECORDED, &plan);
	fire(s, &row, &due, &plan);
	free(due.ring);
	return due.next;
}
