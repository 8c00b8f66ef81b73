/*
 * cron_int.h — what the scheduler's files share: the scheduler handle,
 * the zones asked of PostgreSQL, and the rules of a pass over a
 * schedule's due ticks.
 *
 *   cronexpr.c  cron expressions and the next tick on a zone's wall clock
 *   cron.c      the schedules: the operator's add, remove, list, history
 *   zones.c     the zones' UTC offsets, asked of PostgreSQL and cached
 *   due.c       the due ticks and what becomes of each: on time, or
 *               missed and run or skipped by the schedule's policy; how
 *               long the scheduler sleeps (pure; tests/unit/test_cron.c)
 *   fire.c      one schedule in a pass: its due ticks through
 *               pgoutbox.cron_fire()'s compare-and-set
 *   scheduler.c the scheduler: its handle, connection, passes and timers
 */
#ifndef PGO_CRON_INT_H
#define PGO_CRON_INT_H

#include <signal.h>

#include "cron/cron.h"
#include "cron/cronexpr.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"

#define MAX_DUE	     1000000 /* ticks examined per schedule and pass */
#define MAX_RECORDED 1000    /* skipped ticks recorded per pass */
#define EXPIRE_EVERY 600000  /* ms between history retention passes */
#define PASS_MAX_MS  60000   /* a pass at least this often, whatever else */

/* Seconds since the epoch -> "2026-11-30T17:00:00Z" in buf. */
const char *pgo_cron_iso(int64_t t, char *buf, size_t len);

/* --- schedules (cron.c) --- */

/* A schedule's fields that may be left out of a cron add. */
typedef struct pgo_cron_def {
	const char *tz;	     /* IANA zone */
	const char *payload; /* JSON of the jobs */
	const char *overlap; /* skip, allow */
	const char *missed;  /* skip, run_once, catch_up */
	int catch_up_max;    /* 1..1000 */
} pgo_cron_def_t;

/* The fields a cron add writes: those s gives (a tz neither NULL nor "",
 * a catch_up_max above 0, other fields not NULL) over the existing
 * schedule's (old; NULL when there is none) over the defaults (UTC, {},
 * skip, run_once, 1).  out's strings point into s, old or constants. */
void pgo_cron_merge(const pgo_cron_schedule_t *s, const pgo_cron_def_t *old,
		    pgo_cron_def_t *out);

/* --- zones (zones.c) --- */

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

/* Whether tz stands for UTC (NULL and "" do). */
bool pgo_cron_is_utc(const char *tz);
void pgo_cron_zones_clear(zone_cache_t *c);
/* Zone tz with offsets for the instants PGO_CRON_ZONE_MARGIN before lo up
 * to hi: from the cache, else asked of PostgreSQL.  *out is NULL for UTC
 * (no question asked) and valid until the next call.  PGO_ERR_INVALID for
 * a zone PostgreSQL does not know, PGO_ERR_DB for other failures. */
int pgo_cron_zone_get(zone_cache_t *c, PGconn *conn, const char *tz, int64_t lo,
		      int64_t hi, const pgo_cron_zone_t **out,
		      pgo_error_t *err);
/* PGO_OK when PostgreSQL knows a zone of exactly this name (UTC needs no
 * question), else PGO_ERR_INVALID naming it, with the right spelling when
 * only the case is wrong (PostgreSQL itself would take any case). */
int pgo_cron_tz_check(PGconn *conn, const char *tz, pgo_error_t *err);

/* --- due ticks and the missed policy (due.c, pure) --- */

/* A schedule's policy for ticks missed while no scheduler ran. */
typedef enum pgo_cron_missed {
	PGO_CRON_MISSED_SKIP = 0,     /* record them skipped */
	PGO_CRON_MISSED_RUN_ONCE = 1, /* run the newest, skip the others */
	PGO_CRON_MISSED_CATCH_UP = 2  /* run the newest catch_up_max */
} pgo_cron_missed_t;

/* The policy named s ("skip", "run_once", "catch_up"); others skip. */
pgo_cron_missed_t pgo_cron_missed_kind(const char *s);

/* A schedule's due ticks: how many there were, the newest of them in a
 * ring (tick i, counted from the oldest, at ring[i % cap] while
 * count - i <= cap), and the first tick not due. */
typedef struct pgo_cron_due {
	int64_t *ring; /* the caller's, cap long */
	size_t cap;
	size_t count; /* due ticks found (at most the max asked) */
	int64_t next; /* the first tick after them: later than now, or
		       * still due when the max stopped the count
		       * (INT64_MAX: none) */
} pgo_cron_due_t;

/* Collects the ticks of e in zone from `first` (a due tick) on while they
 * are at or before now, at most max of them, into *d (ring and cap set). */
void pgo_cron_due_collect(const pgo_cron_expr_t *e, const pgo_cron_zone_t *zone,
			  int64_t first, double now, size_t max,
			  pgo_cron_due_t *d);

/* What a pass does with a schedule's due ticks. */
typedef struct pgo_cron_plan {
	size_t count;	/* due ticks */
	size_t nmissed; /* the oldest nmissed are older than the grace */
	size_t runs;	/* of those, the newest runs fire */
	size_t first;	/* ticks before this one are not recorded */
} pgo_cron_plan_t;

/* What becomes of one due tick. */
typedef enum pgo_cron_fate {
	PGO_TICK_ON_TIME = 0,	/* within the grace: fires */
	PGO_TICK_RUN = 1,	/* missed, fired by the policy */
	PGO_TICK_SKIP = 2,	/* missed, skipped by the policy */
	PGO_TICK_UNRECORDED = 3 /* missed and skipped, too old to record */
} pgo_cron_fate_t;

/* The plan for d's ticks: those older than grace_from (seconds) were
 * missed; the policy runs none, the newest one or the newest cmax of
 * them; of the skipped ones at most max_recorded are recorded (the
 * newest), and only those the ring still holds. */
void pgo_cron_plan(const pgo_cron_due_t *d, int64_t grace_from,
		   pgo_cron_missed_t missed, int cmax, size_t max_recorded,
		   pgo_cron_plan_t *p);
/* The fate of due tick i (0 the oldest). */
pgo_cron_fate_t pgo_cron_fate(const pgo_cron_plan_t *p, size_t i);
/* How long the scheduler sleeps before its next look at a schedule whose
 * next tick is `next` (seconds) by the database clock `dbnow` (seconds,
 * read elapsed_ms ago): until just after it. */
int64_t pgo_cron_wait_ms(int64_t next, double dbnow, int64_t elapsed_ms);
/* The pass's sleep shifted by the local clock's offset (a test's skew):
 * early wakers find nothing due and sleep the rest; never below 0 and,
 * when the offset would make it so, at most 100 ms. */
int64_t pgo_cron_skewed_sleep(int64_t sleep_ms, int64_t clock_offset_ms);

/* --- the scheduler (scheduler.c, fire.c) --- */

struct pgo_scheduler {
	const pgo_conf_t *conf;
	pgo_scheduler_opts_t o;
	char name[96];
	char subject[128];
	PGconn *pg;		      /* NULL while down */
	int64_t retry_at;	      /* down: reconnect at (monotonic ms) */
	int64_t backoff;	      /* ms: the next reconnect backoff */
	bool down_logged;	      /* "connection lost" said once */
	bool connected_once;	      /* up once: every failure is an outage */
	int refused;		      /* PGO_OK, or why the start was refused:
				       * no retry fixes it (conn.c's rule) */
	pgo_loop_t *loop;	      /* the one loop the scheduler runs on */
	pgo_loop_timer_t *pass_timer; /* the next pass over the schedules */
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

/* The connection was lost (why): closed, the zones forgotten, the next
 * connect scheduled with backoff. */
void pgo_sched_down(pgo_scheduler_t *s, const char *why);
/* pgo_pq_run() on the scheduler's connection with a deadline
 * (database.statement_timeout + 10 s, none without one) and the stop
 * request (db/conn.h's pgo_pq_exec): no reply in time drops the
 * connection (pgo_sched_down, s->pg NULL after); NULL and err on any
 * failure. */
PGresult *pgo_sched_run(pgo_scheduler_t *s, const char *what, const char *sql,
			int n, const char *const *params, pgo_error_t *err);
/* Handles one schedule (row of the pass's query, read at dbnow): finds
 * its due ticks by the database clock, applies the missed-tick policy and
 * fires them through the compare-and-set.  Returns the schedule's next
 * tick (seconds), or 0 when it has none. */
int64_t pgo_sched_handle(pgo_scheduler_t *s, PGresult *res, int row,
			 double dbnow);

#endif /* PGO_CRON_INT_H */
