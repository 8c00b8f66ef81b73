/*
 * wake.c — the relay's half of the wake-up handshake: producers NOTIFY
 * only while a relay holds or waits for the queue's sleeper lock
 * (sql/010_send_fast.sql explains the handshake and why it cannot miss a
 * commit).
 *
 * One connection of its own (it waits in a lock, where the LISTEN
 * connection must not), four states:
 *
 *   AWAKE     -> ASKING     a slot came back dry (its last claim found
 *                           nothing) and waits for nothing else:
 *                           pg_advisory_lock(), then one NOTIFY
 *   ASKING    -> ASLEEP     granted: every producer that skipped its
 *                           NOTIFY has committed; claim once more (the
 *                           NOTIFY wakes the other relays of the queue)
 *   ASLEEP    -> RELEASING  every slot found work again: producers need
 *                           not notify while the relay claims anyway
 *   RELEASING -> AWAKE
 *
 * While the connection is down (or was lost, and the lock with it) the
 * relay cannot count on a NOTIFY, so it polls every WAKE_DOWN_POLL_MS.
 */
#include <stdio.h>
#include <string.h>

#include "relay/relay_int.h"

/* The fallback poll while the sleeper connection is not up. */
#define WAKE_DOWN_POLL_MS 50

static void wake_io(void *arg, int fd, short revents)
{
	pgo_relay_t *r = arg;

	(void)fd;
	r->wake_revents |= revents;
}

bool pgo_wake_init(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *q = v->queue;

	r->wake = WAKE_OFF;
	if (!v->listen)
		return true;
	/* Queue names are validated identifiers: safe inside quotes. */
	snprintf(r->wake_lock_sql, sizeof(r->wake_lock_sql),
		 "SELECT pg_advisory_lock(pgoutbox.wake_ns('%s'), 0), "
		 "pg_notify('" PGO_CHANNEL_PREFIX "%s', '')",
		 q, q);
	snprintf(r->wake_unlock_sql, sizeof(r->wake_unlock_sql),
		 "SELECT pg_advisory_unlock(pgoutbox.wake_ns('%s'), 0)", q);
	r->wake_setup.subject = r->subject;
	r->wake_setup.app_name = r->app_name;
	/* It waits in a lock for as long as a producer's transaction runs. */
	r->wake_setup.sql[0] = "SET statement_timeout = 0";
	r->wake_setup.sql[1] = "SET lock_timeout = 0";
	r->wake_setup.sql[2] = NULL;
	pgo_conn_init(&r->wake_conn, r->conf, &r->wake_setup);
	r->wake_io = pgo_loop_io_add(r->loop, -1, 0, wake_io, r);
	if (!r->wake_io)
		return false;
	r->wake = WAKE_AWAKE;
	return true;
}

void pgo_wake_close(pgo_relay_t *r)
{
	if (r->wake == WAKE_OFF)
		return;
	/* A backend left waiting in the lock would hold producers to
	 * NOTIFY until it is granted: cancel the wait first. */
	if (r->wake == WAKE_ASKING && r->wake_conn.pg) {
		PGcancel *c = PQgetCancel(r->wake_conn.pg);
		char buf[128];

		if (c) {
			PQcancel(c, buf, sizeof(buf));
			PQfreeCancel(c);
		}
	}
	pgo_conn_close(&r->wake_conn);
	r->wake = WAKE_AWAKE;
}

/* A slot that may miss events without a NOTIFY: it claims, its last
 * claim came back empty, and nothing else will make it claim. */
static bool slot_dry(const pgo_relay_t *r, const slot_t *s)
{
	return (s->conn.state == PGO_CONN_READY ||
		s->conn.state == PGO_CONN_BUSY) &&
	       s->dry && (r->mode == PGO_MODE_CONCURRENT || s->nowned);
}

void pgo_wake_schedule(pgo_relay_t *r, int64_t now)
{
	bool asleep = false, working = true;

	if (r->wake == WAKE_OFF)
		return;
	pgo_conn_kick(&r->wake_conn, now);
	if (r->wake_conn.state == PGO_CONN_BUSY)
		return; /* asking or releasing */
	if (r->wake_conn.state != PGO_CONN_READY) {
		/* No handshake: producers may skip their NOTIFY. */
		r->next_poll =
			pgo_deadline_min(r->next_poll, now + WAKE_DOWN_POLL_MS);
		return;
	}
	for (int i = 0; i < r->nslots; i++) {
		const slot_t *s = &r->slots[i];

		if (!slot_dry(r, s))
			continue;
		working = false;
		if (s->state == SLOT_IDLE && s->conn.state == PGO_CONN_READY &&
		    !s->more && !s->wants_claim)
			asleep = true;
	}
	if (r->kick || r->more || r->stop)
		asleep = false;
	if (r->wake == WAKE_AWAKE && asleep) {
		pgo_conn_query(&r->wake_conn, r->wake_lock_sql, 0, NULL);
		if (pgo_conn_send(&r->wake_conn) == PGO_OK)
			r->wake = WAKE_ASKING;
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"wake-up: asking for the sleeper lock");
	} else if (r->wake == WAKE_ASLEEP && working) {
		pgo_conn_query(&r->wake_conn, r->wake_unlock_sql, 0, NULL);
		if (pgo_conn_send(&r->wake_conn) == PGO_OK)
			r->wake = WAKE_RELEASING;
		pgo_log(PGO_LOG_DEBUG, r->subject,
			"wake-up: releasing the sleeper lock");
	}
}

void pgo_wake_pollfd(pgo_relay_t *r, int64_t *deadline)
{
	struct pollfd pfd;

	if (r->wake == WAKE_OFF)
		return;
	pgo_conn_pollfd(&r->wake_conn, &pfd);
	pgo_loop_io_set(r->wake_io, pfd.fd, pfd.events);
	r->wake_revents = 0;
	if (r->wake_conn.state == PGO_CONN_DOWN)
		*deadline = pgo_deadline_min(*deadline, r->wake_conn.retry_at);
}

void pgo_wake_step(pgo_relay_t *r)
{
	pgo_conn_event_t ev;

	if (r->wake == WAKE_OFF)
		return;
	ev = pgo_conn_step(&r->wake_conn, r->wake_revents);
	r->wake_revents = 0;
	switch (ev) {
	case PGO_CONN_EV_ROUND:
		if (r->wake_conn.round.failed) {
			pgo_log(PGO_LOG_WARN, r->subject,
				"wake-up lock: %s: polling until it is back",
				r->wake_conn.round.err);
			pgo_conn_round_clear(&r->wake_conn);
			/* The lock's state is unknown: start afresh. */
			pgo_conn_drop(&r->wake_conn, "wake-up lock failed");
			r->wake = WAKE_AWAKE;
			r->kick = true;
			break;
		}
		pgo_conn_round_clear(&r->wake_conn);
		if (r->wake == WAKE_ASKING) {
			/* Granted: the re-check.  Our NOTIFY does it for the
			 * other relays of the queue. */
			r->wake = WAKE_ASLEEP;
			r->kick = true;
		} else if (r->wake == WAKE_RELEASING) {
			r->wake = WAKE_AWAKE;
		}
		break;
	case PGO_CONN_EV_LOST:
		/* The session's lock went with it (or goes soon): from now
		 * on producers may skip their NOTIFY. */
		r->wake = WAKE_AWAKE;
		r->kick = true;
		break;
	case PGO_CONN_EV_FATAL:
		/* The slots' own setup reports what is fatal; this one has
		 * no checks of its own. */
		pgo_log(PGO_LOG_WARN, r->subject, "wake-up connection: %s",
			r->wake_conn.fatal.msg);
		r->wake = WAKE_AWAKE;
		break;
	default: break;
	}
}
