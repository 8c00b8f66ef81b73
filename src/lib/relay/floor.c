/*
 * floor.c — the claim floor (sql/006_claim_floor.sql): an id below which
 * no fresh row of the queue is, now or later.  Claims start there
 * (claim.c), so they skip the index entries of rows already sent, which
 * a held xmin keeps from being cleaned.
 *
 * pgoutbox.claim_floor() moves it.  It reads the queue's sequence and
 * pg_locks, a few hundred microseconds of a backend's CPU, and it runs on
 * a connection of its own: it rode in front of a claim before, and every
 * claim that carried it waited for it (at 500 events/s its phase's p99
 * was 3.1 ms, ahead of the claim, issue 17).  Nothing waits for it now;
 * a claim uses whatever floor the relay has when it is sent.
 *
 * When: at most every FLOOR_PROBE_MIN_MS, and only after a claim went out
 * since the last probe (an idle relay probes nothing).  The interval
 * follows the rate: a probe that moved the floor by few ids doubles it
 * (up to FLOOR_PROBE_MAX_MS), one that moved it by many halves it: a
 * busy queue gets a probe every 5 ms, as when the probe rode in front of
 * the claims, and a quiet one ten a second.
 *
 * A lost slot connection sets the floor back to 0 (the server may have
 * undone acks, and their rows are back below it); a probe in flight then
 * belongs to the old floor, and its answer is dropped (the generation).
 * A probe that fails with an error leaves the floor where it is for the
 * rest of the run: claims are still right from any floor, only slower
 * under a held xmin.
 */
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"

/* The probe's interval: between these, following the rate. */
#define FLOOR_PROBE_MIN_MS 5
#define FLOOR_PROBE_MAX_MS 100
/* A probe that moved the floor by fewer ids than this probes less
 * often; by more than FLOOR_MOVED_HIGH, more often.  Under a held xmin
 * every id the floor trails by is a dead index entry each claim walks
 * (about 0.5 us each), and at 40,000 events/s a relay claims some 600
 * times a second: the floor must stay within a few hundred ids of the
 * newest row while events flow, so the interval grows only when it
 * hardly moves (thresholds of 512 and 2,048, tried first, let the floor
 * trail by over a thousand ids at that rate). */
#define FLOOR_MOVED_LOW	 64
#define FLOOR_MOVED_HIGH 512

bool pgo_floor_init(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	/* An adopted table has no floor: its rows are marked, not
	 * deleted, so the pending index is what skips the sent ones. */
	r->floor.used = v->claim_floor && !r->adopted;
	r->floor.interval = FLOOR_PROBE_MIN_MS;
	if (!r->floor.used)
		return true;
	r->floor.setup.subject = r->subject;
	r->floor.setup.app_name = r->app_name;
	/* The relay's settings: its timeouts bound the probe too. */
	r->floor.setup.sql[0] = r->sql.session;
	r->floor.setup.sql[1] = NULL;
	r->floor.setup.local_sql = r->sql.local;
	r->floor.setup.prep_name[0] = "pgoutbox_floor";
	r->floor.setup.prep_sql[0] =
		"SELECT new_floor, new_line, new_writers FROM "
		"pgoutbox.claim_floor($1, $2::bigint, $3::bigint, "
		"$4::text[])";
	r->floor.setup.prep_name[1] = NULL;
	pgo_conn_init(&r->floor.conn, r->conf, &r->floor.setup);
	r->floor.io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note,
				      &r->floor.revents);
	return r->floor.io != NULL;
}

void pgo_floor_pooled(pgo_relay_t *r)
{
	r->floor.setup.pooled = true;
}

void pgo_floor_close(pgo_relay_t *r)
{
	if (!r->floor.used)
		return;
	pgo_conn_close(&r->floor.conn);
	r->floor.probing = false;
}

void pgo_floor_free(pgo_relay_t *r)
{
	free(r->floor.writers);
	r->floor.writers = NULL;
}

void pgo_floor_claiming(pgo_relay_t *r)
{
	r->floor.wanted = true;
}

void pgo_floor_reset(pgo_relay_t *r)
{
	if (r->floor.id)
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"claim floor %lld -> 0 with a lost connection",
			(long long)r->floor.id);
	r->floor.id = 0;
	r->floor.line[0] = '\0';
	free(r->floor.writers);
	r->floor.writers = NULL;
	r->floor.next = 0;
	r->floor.interval = FLOOR_PROBE_MIN_MS;
	r->floor.gen++;
}

int64_t pgo_floor_turn(pgo_relay_t *r, int64_t now)
{
	struct pollfd pfd;
	char floor[24];
	const char *params[4];

	if (!r->floor.used)
		return 0;
	pgo_conn_kick(&r->floor.conn, now);
	if (r->floor.wanted && !r->floor.off && !r->floor.probing &&
	    !r->run.stop && r->floor.conn.state == PGO_CONN_READY &&
	    now >= r->floor.next) {
		snprintf(floor, sizeof(floor), "%lld", (long long)r->floor.id);
		params[0] = pgo_conf_values(r->conf)->queue;
		params[1] = floor;
		params[2] = r->floor.line[0] ? r->floor.line : NULL;
		params[3] = r->floor.writers;
		pgo_conn_exec_prepared(&r->floor.conn, "pgoutbox_floor", 4,
				       params);
		if (pgo_conn_send(&r->floor.conn) == PGO_OK) {
			r->floor.probing = true;
			r->floor.wanted = false;
			r->floor.sent_gen = r->floor.gen;
			r->floor.next = now + r->floor.interval;
		}
	}
	pgo_conn_pollfd(&r->floor.conn, &pfd);
	pgo_loop_io_set(r->floor.io, pfd.fd, pfd.events);
	r->floor.revents = 0;
	if (r->floor.conn.state == PGO_CONN_DOWN)
		return r->floor.conn.retry_at;
	if (r->floor.wanted && !r->floor.probing && !r->floor.off &&
	    r->floor.conn.state == PGO_CONN_READY)
		return r->floor.next;
	return 0;
}

/* The probe came back: the new floor, and the line and writers to pass
 * back next time. */
static void probe_done(pgo_relay_t *r)
{
	PGresult *res = r->floor.conn.round.res[0];
	int64_t f, moved;
	char *w;

	r->floor.probing = false;
	if (r->floor.sent_gen != r->floor.gen)
		return; /* asked before the floor went back to 0 */
	if (r->floor.conn.round.failed || !res ||
	    PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		/* A floor that cannot move is still safe: claims go on from
		 * where it is, as they did before there was one.  A timeout
		 * or a lost connection: probe again later. */
		if (r->floor.conn.round.failed &&
		    pgo_sqlstate_retriable(r->floor.conn.round.sqlstate)) {
			pgo_log(PGO_LOG_DEBUG, r->subject,
				"claim floor probe: %s",
				r->floor.conn.round.err);
			return;
		}
		r->floor.off = true;
		pgo_log(PGO_LOG_WARN, r->subject,
			"the claim floor stays at %lld: pgoutbox.claim_floor() "
			"failed: %s",
			(long long)r->floor.id,
			r->floor.conn.round.err[0] ? r->floor.conn.round.err
						   : "no row");
		return;
	}
	f = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (!(w = strdup(PQgetvalue(res, 0, 2))))
		return; /* no memory: probe again later */
	moved = f > r->floor.id ? f - r->floor.id : 0;
	if (moved) {
		pgo_log(PGO_LOG_DEBUG, r->subject, "claim floor %lld -> %lld",
			(long long)r->floor.id, (long long)f);
		r->floor.id = f;
	}
	snprintf(r->floor.line, sizeof(r->floor.line), "%s",
		 PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
	free(r->floor.writers);
	r->floor.writers = w;
	/* A probe that only read the line moves nothing: no signal. */
	if (PQgetisnull(res, 0, 1) || !r->floor.line[0] || f == 0)
		return;
	if (moved > FLOOR_MOVED_HIGH && r->floor.interval > FLOOR_PROBE_MIN_MS)
		r->floor.interval /= 2;
	else if (moved < FLOOR_MOVED_LOW &&
		 r->floor.interval < FLOOR_PROBE_MAX_MS)
		r->floor.interval *= 2;
	if (r->floor.interval < FLOOR_PROBE_MIN_MS)
		r->floor.interval = FLOOR_PROBE_MIN_MS;
	if (r->floor.interval > FLOOR_PROBE_MAX_MS)
		r->floor.interval = FLOOR_PROBE_MAX_MS;
}

void pgo_floor_step(pgo_relay_t *r)
{
	pgo_conn_event_t ev;

	if (!r->floor.used)
		return;
	ev = pgo_conn_step(&r->floor.conn, r->floor.revents);
	r->floor.revents = 0;
	if (ev == PGO_CONN_EV_NONE &&
	    pgo_conn_expire(&r->floor.conn, pgo_now_ms(),
			    pgo_claim_round_limit(pgo_conf_values(r->conf))))
		ev = PGO_CONN_EV_LOST;
	switch (ev) {
	case PGO_CONN_EV_ROUND:
		if (pgo_log_max >= PGO_LOG_DEBUG)
			pgo_log(PGO_LOG_DEBUG, r->subject,
				"claim floor probe %.1f ms",
				(double)(pgo_now_us() -
					 r->floor.conn.round.sent_us) /
					1000.0);
		probe_done(r);
		pgo_conn_round_clear(&r->floor.conn);
		break;
	case PGO_CONN_EV_FATAL:
		pgo_log(PGO_LOG_WARN, r->subject,
			"claim floor connection: %s; the floor stays at %lld",
			r->floor.conn.fatal.msg, (long long)r->floor.id);
		r->floor.off = true;
		r->floor.probing = false;
		break;
	default: break;
	}
	if (r->floor.conn.state == PGO_CONN_DOWN)
		r->floor.probing = false;
}
