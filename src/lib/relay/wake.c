/*
 * wake.c — the relay's half of the wake-up handshake: producers NOTIFY
 * only while a relay holds or waits for the queue's sleeper lock
 * (sql/015_send_fast.sql explains the handshake and why it cannot miss a
 * commit).
 *
 * One connection of its own (it waits in a lock, where the LISTEN
 * connection must not), four states:
 *
 *   AWAKE     -> ASKING     every slot is idle with no claim to come (the
 *                           last ones found nothing), and the linger
 *                           below is over: pg_advisory_lock(), then one
 *                           NOTIFY
 *   ASKING    -> ASLEEP     granted: every producer that skipped its
 *                           NOTIFY has committed; claim once more (the
 *                           NOTIFY wakes the other relays of the queue)
 *   ASLEEP    -> RELEASING  notifications from two producers or more came
 *                           at once: they commit side by side, where
 *                           NOTIFY serializes them; awake, the relay
 *                           claims anyway (one producer alone pays
 *                           nothing for its NOTIFY, so the relay stays
 *                           asleep, however fast it commits)
 *   RELEASING -> AWAKE      every slot claims again, and all go on
 *                           claiming while any finds events (cycle.c)
 *
 * The linger: for WAKE_LINGER_FOR_MS after a release, a claim that finds
 * nothing is followed by another relay.wake_linger later, before the
 * relay asks for the lock; one that finds events starts it again.
 * Producers committing side by side find a claim every millisecond or so
 * and would otherwise send the relay to sleep after nearly every batch:
 * with 8 clients of send() 20,000 NOTIFYs in 10 s, one per 1.1 batches
 * (5,700 events/s); lingering 1 ms, about 200 (9,000 events/s).  Events
 * committed meanwhile wait for that claim, up to relay.wake_linger.  After
 * WAKE_LINGER_FOR_MS the relay asks at its next dry claim, so that a load
 * down to one producer lets it sleep again (the linger costs a lone
 * producer about a tenth of its rate).
 *
 * While the connection is down (or was lost, and the lock with it) the
 * relay cannot count on a NOTIFY, so it polls every WAKE_DOWN_POLL_MS.
 */
#include <stdio.h>
#include <string.h>

#include "relay/relay_int.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "queue/queue.h"

/* The fallback poll while the sleeper connection is not up. */
#define WAKE_DOWN_POLL_MS 50

/* How long after a release dry claims linger (the header). */
#define WAKE_LINGER_FOR_MS 1000

bool pgo_wake_init(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *q = v->queue;

	r->wake.state = WAKE_OFF;
	r->wake.linger_ms = (int)v->wake_linger;
	/* An adopted table's writers notify on their own (its trigger, or
	 * the application's channel): no handshake there. */
	if (!v->listen || r->adopted)
		return true;
	/* Queue names are validated identifiers: safe inside quotes. */
	snprintf(r->wake.lock_sql, sizeof(r->wake.lock_sql),
		 "SELECT pg_advisory_lock(pgoutbox.wake_ns('%s'), 0), "
		 "pg_notify('" PGO_CHANNEL_PREFIX "%s', '')",
		 q, q);
	snprintf(r->wake.unlock_sql, sizeof(r->wake.unlock_sql),
		 "SELECT pg_advisory_unlock(pgoutbox.wake_ns('%s'), 0)", q);
	r->wake.setup.subject = r->subject;
	r->wake.setup.app_name = r->app_name;
	/* It waits in a lock for as long as a producer's transaction runs. */
	r->wake.setup.sql[0] = "SET statement_timeout = 0";
	r->wake.setup.sql[1] = "SET lock_timeout = 0";
	r->wake.setup.sql[2] = NULL;
	pgo_conn_init(&r->wake.conn, r->conf, &r->wake.setup);
	r->wake.io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note,
				     &r->wake.revents);
	if (!r->wake.io)
		return false;
	r->wake.state = WAKE_AWAKE;
	return true;
}

void pgo_wake_close(pgo_relay_t *r)
{
	if (r->wake.state == WAKE_OFF)
		return;
	/* A backend left waiting in the lock would hold producers to
	 * NOTIFY until it is granted: cancel the wait first. */
	if (r->wake.state == WAKE_ASKING && r->wake.conn.pg) {
		PGcancel *c = PQgetCancel(r->wake.conn.pg);
		char buf[128];

		if (c) {
			PQcancel(c, buf, sizeof(buf));
			PQfreeCancel(c);
		}
	}
	pgo_conn_close(&r->wake.conn);
	r->wake.state = WAKE_AWAKE;
}

/* How many of the senders of the notifications just taken are not the
 * relay's own wake connection (its NOTIFY after a grant); *own: it is
 * one of them. */
static int senders(const pgo_relay_t *r, const pgo_conn_t *c, bool *own)
{
	int me = r->wake.conn.pg ? PQbackendPID(r->wake.conn.pg) : 0;
	int others = 0;

	*own = false;
	for (int i = 0; i < c->notify_senders; i++) {
		if (c->notify_pids[i] != me)
			others++;
		else
			*own = true;
	}
	return others;
}

/* The notifications just taken came from two producers or more (the
 * relay's own NOTIFY after a grant not counted). */
bool pgo_wake_side_by_side(const pgo_relay_t *r, const pgo_conn_t *c)
{
	bool own;

	return senders(r, c, &own) >= 2;
}

bool pgo_wake_own(const pgo_relay_t *r, const pgo_conn_t *c)
{
	bool own;

	senders(r, c, &own);
	return own;
}

/* A slot that claims: connected, and in the ordered modes owning shards. */
static bool claims(const pgo_relay_t *r, const slot_t *s)
{
	return (s->conn.state == PGO_CONN_READY ||
		s->conn.state == PGO_CONN_BUSY) &&
	       (r->mode == PGO_MODE_CONCURRENT || s->leases.n);
}

void pgo_wake_schedule(pgo_relay_t *r, int64_t now)
{
	bool asleep = true;
	int claiming = 0;

	if (r->wake.state == WAKE_OFF)
		return;
	pgo_conn_kick(&r->wake.conn, now);
	if (r->wake.conn.state == PGO_CONN_BUSY)
		return; /* asking or releasing */
	if (r->wake.conn.state != PGO_CONN_READY) {
		/* No handshake: producers may skip their NOTIFY. */
		r->sched.next_poll = pgo_deadline_min(r->sched.next_poll,
						      now + WAKE_DOWN_POLL_MS);
		return;
	}
	/* Asleep: every slot that claims is idle with no claim to come (a
	 * claim that found events while the relay was awake asks for the
	 * next one, cycle.c). */
	for (int i = 0; i < r->nslots; i++) {
		const slot_t *s = &r->slots[i];

		if (!claims(r, s))
			continue;
		claiming++;
		if (s->state != SLOT_IDLE || s->conn.state != PGO_CONN_READY ||
		    s->more || s->wants_claim)
			asleep = false;
	}
	if (!claiming || r->sched.kick || r->sched.more || r->run.stop)
		asleep = false;
	/* The linger (the header): a claim that found events starts it
	 * again; while it runs, a claim at its end instead of the lock. */
	if (r->wake.state == WAKE_AWAKE && !asleep && r->sched.more)
		r->wake.linger_until = 0;
	if (r->wake.state == WAKE_AWAKE && asleep && now < r->wake.linger_end) {
		if (r->wake.linger_until == 0)
			r->wake.linger_until = now + r->wake.linger_ms;
		if (now < r->wake.linger_until) {
			r->sched.next_poll = pgo_deadline_min(
				r->sched.next_poll, r->wake.linger_until);
			asleep = false;
		}
	}
	if (r->wake.state == WAKE_AWAKE && asleep) {
		r->wake.linger_until = 0;
		pgo_conn_query(&r->wake.conn, r->wake.lock_sql, 0, NULL);
		if (pgo_conn_send(&r->wake.conn) == PGO_OK)
			r->wake.state = WAKE_ASKING;
	} else if (r->wake.state == WAKE_ASLEEP && r->wake.busy) {
		pgo_conn_query(&r->wake.conn, r->wake.unlock_sql, 0, NULL);
		if (pgo_conn_send(&r->wake.conn) == PGO_OK)
			r->wake.state = WAKE_RELEASING;
	}
	r->wake.busy = false;
}

void pgo_wake_pollfd(pgo_relay_t *r, int64_t *deadline)
{
	struct pollfd pfd;

	if (r->wake.state == WAKE_OFF)
		return;
	pgo_conn_pollfd(&r->wake.conn, &pfd);
	pgo_loop_io_set(r->wake.io, pfd.fd, pfd.events);
	r->wake.revents = 0;
	if (r->wake.conn.state == PGO_CONN_DOWN)
		*deadline = pgo_deadline_min(*deadline, r->wake.conn.retry_at);
}

void pgo_wake_step(pgo_relay_t *r)
{
	pgo_conn_event_t ev;

	if (r->wake.state == WAKE_OFF)
		return;
	ev = pgo_conn_step(&r->wake.conn, r->wake.revents);
	r->wake.revents = 0;
	switch (ev) {
	case PGO_CONN_EV_ROUND:
		if (r->wake.conn.round.failed) {
			pgo_log(PGO_LOG_WARN, r->subject,
				"wake-up lock: %s: polling until it is back",
				r->wake.conn.round.err);
			pgo_conn_round_clear(&r->wake.conn);
			/* The lock's state is unknown: start afresh. */
			pgo_conn_drop(&r->wake.conn, "wake-up lock failed");
			r->wake.state = WAKE_AWAKE;
			r->sched.kick = true;
			break;
		}
		pgo_conn_round_clear(&r->wake.conn);
		if (r->wake.state == WAKE_ASKING) {
			/* Granted: the re-check.  Our NOTIFY does it, for the
			 * other relays of the queue as well, when it reaches
			 * slot 0 (the LISTEN connection); a kick as well would
			 * claim twice.  A slot 0 inside a cycle gets it only
			 * once its transaction ends: kick now. */
			r->wake.state = WAKE_ASLEEP;
			if (r->slots[0].state != SLOT_IDLE ||
			    r->slots[0].conn.state != PGO_CONN_READY)
				r->sched.kick = true;
		} else if (r->wake.state == WAKE_RELEASING) {
			/* From now on producers may skip their NOTIFY: every
			 * slot looks again, and goes on while it finds any. */
			r->wake.state = WAKE_AWAKE;
			r->sched.kick = true;
			r->wake.linger_end = pgo_now_ms() + WAKE_LINGER_FOR_MS;
			if (r->wake.linger_ms <= 0)
				r->wake.linger_end = 0;
		}
		break;
	case PGO_CONN_EV_LOST:
		/* The session's lock went with it (or goes soon): from now
		 * on producers may skip their NOTIFY. */
		r->wake.state = WAKE_AWAKE;
		r->sched.kick = true;
		break;
	case PGO_CONN_EV_FATAL:
		/* The slots' own setup reports what is fatal; this one has
		 * no checks of its own. */
		pgo_log(PGO_LOG_WARN, r->subject, "wake-up connection: %s",
			r->wake.conn.fatal.msg);
		r->wake.state = WAKE_AWAKE;
		break;
	default: break;
	}
}
