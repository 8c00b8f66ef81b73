/*
 * relay.c — the relay loop: slots, wake-ups, timers, signals and stats.
 *
 * A relay runs relay.in_flight slots; each slot is one connection running
 * one cycle at a time (claim.c): claim a batch in a transaction, hand it to
 * the sink, settle and COMMIT.  In the ordered and strict modes a slot is
 * also a lease holder (shards.c) and claims only what its leases cover.
 *
 * Wake-up: slot 0 LISTENs on the queue's channel; a notification, the
 * fallback poll timer, a retry coming due, a new lease or a batch that
 * was not empty starts a claim.  Producers notify only while the relay
 * holds or asks for the queue's sleeper lock (wake.c).  A lost notification
 * costs latency (up to the poll interval), never an event.  Signals only set
 * flags and wake the loop.
 *
 * Cold connections: in the ordered modes a producer's notification makes
 * every slot claim, since its event may be in any slot's shards.  A lone
 * producer writing a few keys leaves the other slots dry every time, and
 * their claims (a transaction each) took a fifth of its rate.  A slot
 * whose last COLD_AFTER claims woken by producers found nothing goes
 * cold: it claims COLD_MS after such a wake-up instead of at once (one
 * claim answering all the notifications meanwhile), until a claim finds
 * events.  Wake-ups of other kinds (the grant's own NOTIFY, the poll,
 * retries, a full batch) claim at once as before.
 *
 * One event loop (loop.c) waits for everything: each slot's socket, the
 * sink's own descriptors and timers (attached through the sink host), and
 * the wake-ups.  Each turn the relay schedules its work (claims, lease
 * rounds, chores), lets the loop wait until the nearest deadline, then
 * steps every connection.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relay/relay_int.h"
#include "relay/wal.h"
#include "base/arena.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

static void relay_error(pgo_relay_t *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void relay_error(pgo_relay_t *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->run.errmsg, sizeof(r->run.errmsg), fmt, ap);
	va_end(ap);
}

/* The slots' sessions: the relay's settings (claim.c), LISTEN on slot 0
 * only, the prepared claim, the checks a relay's session makes first. */
static void setup_sessions(pgo_relay_t *r, const struct pgo_conf_values *v)
{
	int n = 0;

	r->setup.subject = r->subject;
	r->setup.app_name = r->app_name;
	/* The settings of claim.c's settings_sql, for the session; through
	 * a transaction pooler, per transaction instead (local_sql). */
	r->setup.sql[n++] = r->sql.session;
	r->setup.local_sql = r->sql.local;
	if (v->listen)
		r->setup.sql[n++] = r->sql.listen;
	r->setup.sql[n] = NULL;
	r->setup.prep_name[0] = "pgoutbox_claim";
	r->setup.prep_sql[0] = r->sql.claim;
	r->setup.prep_name[1] = "pgoutbox_pages";
	r->setup.prep_sql[1] = "SELECT pg_relation_size(format('pgoutbox.%I', "
			       "$1::text)::regclass) / "
			       "current_setting('block_size')::bigint";
	r->setup.prep_name[2] = NULL;
	r->setup.check_schema = true;
	/* A fleet's relay: the addresses its start thread looked up. */
	r->setup.resolved = r->shared ? &r->resolved : NULL;
	/* A work queue's rows are jobs for workers: a relay would publish
	 * and delete them.  An adopted table (adopted.c) is relayed.  A
	 * queue captured through the WAL is streamed (wal.c), not claimed:
	 * a relay here did not see its capture at start (the database was
	 * unreachable), and a restart chooses right. */
	r->setup.refuse_sql =
		"SELECT CASE WHEN pgoutbox.queue_capture(name) = 'wal' THEN "
		"format('queue \"%s\" is captured through the WAL, which "
		"this relay could not read at start (the database was "
		"unreachable): start it again to stream the queue''s slot', "
		"name) "
		"ELSE format('queue \"%s\" is a work queue: its jobs are run "
		"by `pgoutbox worker --queue %s`, a relay would publish and "
		"delete them; relay an outbox queue', name, name) END "
		"FROM (SELECT $1::text AS name) q "
		"WHERE pgoutbox.queue_kind(name) NOT IN ('outbox', 'adopted') "
		"OR pgoutbox.queue_capture(name) = 'wal'";
	snprintf(r->queue, sizeof(r->queue), "%s", v->queue);
	r->setup.refuse_param[0] = r->queue;
	snprintf(r->missing_hint, sizeof(r->missing_hint),
		 "relay.queue \"%s\" is not a queue of this database (create "
		 "it with `pgoutbox queue create %s`, or fix --queue)",
		 v->queue, v->queue);
	r->setup.missing_hint = r->missing_hint;
	r->setup_quiet = r->setup;
	if (v->listen)
		r->setup_quiet.sql[n - 1] = NULL; /* the same, minus LISTEN */
}

void pgo_relay_build_sql(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	pgo_claim_sql_build(&r->sql, r->mode, r->fair, v);
	if (r->adopted)
		pgo_adopted_build_sql(r);
	setup_sessions(r, v);
	/* An adopted table has no claim floor (floor.c). */
	if (r->adopted)
		r->floor.used = false;
}

/* The relay.in_flight slots, each with its connection, leases, arena and
 * socket; false without memory. */
static bool init_slots(pgo_relay_t *r, pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);

	r->nslots = v->in_flight < 1	       ? 1
		    : v->in_flight > MAX_SLOTS ? MAX_SLOTS
					       : v->in_flight;
	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];

		s->idx = i;
		/* One connection LISTENs: a wake-up goes to every slot
		 * anyway, and each listener costs producers at commit. */
		pgo_conn_init(&s->conn, conf,
			      i == 0 ? &r->setup : &r->setup_quiet);
		pgo_shards_init(r, s);
		s->arena = pgo_arena_new(64 * 1024);
		s->io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note,
					&s->revents);
		if (!s->arena || !s->leases.shards || !s->leases.epochs ||
		    !s->leases.map || !s->io)
			return false;
	}
	return true;
}

/* The relay's handle on its own loop, or on a fleet's (sh); its
 * statements, slots and connections, the sink not attached.  NULL with
 * err filled. */
static pgo_relay_t *relay_make(pgo_conf_t *conf, pgo_sink_t *sink,
			       const pgo_relay_shared_t *sh, pgo_error_t *err)
{
	const struct pgo_conf_values *v;
	pgo_relay_t *r;

	if (!conf || !sink) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "pgo_relay_new: conf and sink are required");
		return NULL;
	}
	v = pgo_conf_values(conf);
	r = calloc(1, sizeof(*r));
	if (r && sh) {
		r->shared = true;
		r->loop = sh->loop;
		r->stats.mon = sh->mon;
		snprintf(r->database, sizeof(r->database), "%s",
			 sh->database ? sh->database : "");
	}
	if (!r || (!r->loop && !(r->loop = pgo_loop_new()))) {
		free(r);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory (or no pipe) for a relay");
		return NULL;
	}
	r->conf = conf;
	r->sink = sink;
	/* A fleet's relay names its database: "relay outbox@shard1 -> x". */
	snprintf(r->subject, sizeof(r->subject), "relay %s%s%s -> %s", v->queue,
		 r->database[0] ? "@" : "", r->database, pgo_sink_name(sink));
	snprintf(r->app_name, sizeof(r->app_name), "pgoutbox relay %s",
		 v->name && *v->name ? v->name : "");
	r->mode = v->mode;
	/* A fleet's relay reads these in a thread before its first turn
	 * (start.c), and builds its statements again then. */
	if (!r->shared && (pgo_adopted_load(r, err) != PGO_OK ||
			   pgo_wal_load(r, err) != PGO_OK)) {
		r->sink = NULL; /* not attached yet */
		pgo_relay_destroy(r);
		return NULL;
	}
	pgo_relay_build_sql(r);
	if (!init_slots(r, conf)) {
		pgo_relay_destroy(r);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for a relay");
		return NULL;
	}
	if (!pgo_wake_init(r) || !pgo_floor_init(r)) {
		pgo_relay_destroy(r);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for a relay");
		return NULL;
	}
	r->wake.setup.resolved = r->setup.resolved;
	r->floor.setup.resolved = r->setup.resolved;
	r->rnd = (unsigned)getpid() ^ (unsigned)pgo_wall_us();
	return r;
}

pgo_relay_t *pgo_relay_new_shared(pgo_conf_t *conf, pgo_sink_t *sink,
				  const pgo_relay_shared_t *sh,
				  pgo_error_t *err)
{
	pgo_relay_t *r = relay_make(conf, sink, sh, err);

	if (!r)
		return NULL;
	if (pgo_observe_init(r, err) != PGO_OK) {
		pgo_relay_destroy(r);
		return NULL;
	}
	pgo_error_clear(err);
	return r;
}

pgo_relay_t *pgo_relay_new(pgo_conf_t *conf, pgo_sink_t *sink, pgo_error_t *err)
{
	pgo_relay_t *r = relay_make(conf, sink, NULL, err);
	int rc;

	if (!r)
		return NULL;
	r->host.loop = r->loop;
	r->host.done = r->wal ? pgo_wal_sink_done : pgo_cycle_sink_done;
	r->host.health = pgo_relay_sink_health;
	r->host.ctx = r;
	rc = pgo_sink_attach(sink, &r->host);
	if (rc != PGO_OK) {
		pgo_error_set(err, rc, 0, "sink %s: %s", pgo_sink_name(sink),
			      pgo_sink_errmsg(sink)[0] ? pgo_sink_errmsg(sink)
						       : pgo_strerror(rc));
		r->sink = NULL; /* not attached: nothing to detach */
		pgo_relay_destroy(r);
		return NULL;
	}
	if (pgo_observe_init(r, err) != PGO_OK) {
		pgo_relay_destroy(r);
		return NULL;
	}
	pgo_error_clear(err);
	return r;
}

void pgo_relay_destroy(pgo_relay_t *r)
{
	if (!r)
		return;
	pgo_start_abandon(r->start);
	pgo_start_abandon(r->resolve);
	pgo_resolved_free(r->resolved);
	pgo_wake_close(r);
	pgo_floor_close(r);
	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];

		if (s->state == SLOT_PUBLISHING && r->sink)
			pgo_sink_cancel(r->sink, &s->batch);
		PQclear(s->claimed);
		pgo_conn_close(&s->conn);
		if (r->shared) /* the loop goes on without it */
			pgo_loop_io_del(s->io);
		pgo_arena_destroy(s->arena);
		pgo_shards_free(s);
	}
	if (r->shared) {
		pgo_loop_io_del(r->wake.io);
		pgo_loop_io_del(r->floor.io);
	}
	if (r->sink && !r->shared)
		pgo_sink_detach(r->sink);
	pgo_wal_free(r); /* its socket leaves the loop */
	pgo_observe_destroy(r);
	if (!r->shared)
		pgo_loop_destroy(r->loop);
	pgo_adopted_free(r);
	pgo_floor_free(r);
	free(r);
}

void pgo_relay_request_stop(pgo_relay_t *r)
{
	r->run.stop = 1;
	pgo_loop_wake(r->loop);
}

void pgo_relay_request_reload(pgo_relay_t *r)
{
	r->run.reload = 1;
	pgo_loop_wake(r->loop);
}

void pgo_relay_get_stats(const pgo_relay_t *r, pgo_relay_stats_t *out)
{
	*out = r->stats.total;
}

const char *pgo_relay_errmsg(const pgo_relay_t *r)
{
	return r->run.errmsg;
}

/* The sink host's health(): pause claiming while the downstream is
 * down. */
void pgo_relay_sink_health(void *ctx, int up, const char *reason)
{
	pgo_relay_t *r = ctx;

	pgo_observe_sink(r, up != 0);
	if (!up) {
		if (!r->outage.down)
			pgo_log(PGO_LOG_WARN, r->subject,
				"sink down (%s): claiming paused",
				reason && *reason ? reason : "no reason given");
		r->outage.down = true;
		snprintf(r->outage.why, sizeof(r->outage.why), "%s",
			 reason ? reason : "");
		return;
	}
	if (r->outage.down) {
		pgo_log(PGO_LOG_INFO, r->subject, "sink up again: claiming");
		/* The sink knows: no need to wait out the backoff that
		 * batches refused during the outage built up. */
		r->outage.pause_until = 0;
		r->outage.backoff = 0;
		r->sched.kick = true;
		pgo_loop_wake(r->loop);
	}
	r->outage.down = false;
	r->outage.why[0] = '\0';
}

/* --- the loop --- */

static void log_stats(pgo_relay_t *r, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_relay_stats_t *a = &r->stats.total, *b = &r->stats.last;
	double secs = (double)(now - r->stats.last_at) / 1000.0;

	pgo_log(PGO_LOG_INFO, r->subject,
		"stats: published %llu (%.0f/s), retried %llu, dead %llu, "
		"batches %llu, notifications %llu, connections lost %llu",
		(unsigned long long)a->published,
		secs > 0 ? (double)(a->published - b->published) / secs : 0.0,
		(unsigned long long)a->retried, (unsigned long long)a->dead,
		(unsigned long long)a->batches, (unsigned long long)a->wakeups,
		(unsigned long long)a->reconnects);
	r->stats.last = *a;
	r->stats.last_at = now;
	r->stats.next = v->stats_interval ? now + v->stats_interval : 0;
}

static void do_reload(pgo_relay_t *r)
{
	extern char **environ;
	int changed = 0;

	r->run.reload = 0;
	if (pgo_conf_reload(r->conf, environ, &changed) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"reload failed, keeping the running configuration: %s",
			pgo_conf_errmsg(r->conf));
		return;
	}
	pgo_log_max = (pgo_log_level_t)pgo_conf_values(r->conf)->log_level;
	pgo_log(PGO_LOG_INFO, r->subject,
		"configuration reloaded: %d key%s "
		"changed",
		changed, changed == 1 ? "" : "s");
}

/* Stopping: the sink had relay.drain_timeout to finish; roll back the
 * batches it still holds (they are claimed again later). */
static void drain_expired(pgo_relay_t *r)
{
	for (int i = 0; i < r->nslots; i++)
		pgo_cycle_abandon(r, &r->slots[i]);
}

/* Stop requested: claim nothing more and let the sink drain. */
static void begin_stop(pgo_relay_t *r, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	r->run.stop = 2;
	r->run.drain_until = now + v->drain_timeout;
	pgo_log(PGO_LOG_INFO, r->subject,
		"stopping: finishing the batches in flight");
	pgo_observe_stopping(r);
	if (!r->shared) /* a fleet drains its sink once, for all */
		pgo_sink_drain(r->sink, r->run.drain_until);
}

/* What one turn waits for at most: the relay's own deadlines (the sink's
 * timers are in the loop already). */
static int64_t turn_deadline(pgo_relay_t *r, int64_t retry_next, bool paused)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	int64_t deadline = 0;

	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];
		struct pollfd pfd;

		pgo_conn_pollfd(&s->conn, &pfd);
		pgo_loop_io_set(s->io, pfd.fd, pfd.events);
		s->revents = 0;
		deadline = pgo_deadline_min(
			deadline, pgo_conn_round_deadline(
					  &s->conn, pgo_claim_round_limit(v)));
		if (s->conn.state == PGO_CONN_DOWN)
			deadline = pgo_deadline_min(deadline, s->conn.retry_at);
		/* A membership round waits for the slot to be idle: a past
		 * due time must not spin the loop meanwhile. */
		if (!r->run.stop)
			deadline = pgo_deadline_min(deadline,
						    pgo_shards_next(r, s));
		/* A sweep ahead of its pace: its next part (claim.c). */
		if (!r->run.stop && !paused && s->sweep.next &&
		    s->state == SLOT_IDLE)
			deadline = pgo_deadline_min(deadline, s->sweep.next);
		if (!r->run.stop && !paused && s->cold.at &&
		    s->state == SLOT_IDLE)
			deadline = pgo_deadline_min(deadline, s->cold.at);
	}
	pgo_wake_pollfd(r, &deadline);
	if (r->run.stop)
		return pgo_deadline_min(deadline, r->run.drain_until);
	deadline = pgo_deadline_min(deadline, r->sched.next_poll);
	deadline = pgo_deadline_min(deadline, retry_next);
	/* Chores wait for slot 0 (no busy loop while it is down or
	 * working). */
	if (r->slots[0].state == SLOT_IDLE &&
	    r->slots[0].conn.state == PGO_CONN_READY) {
		if (v->maintain_interval)
			deadline = pgo_deadline_min(deadline,
						    r->sched.next_maintain);
		if (v->stats_interval)
			deadline = pgo_deadline_min(deadline,
						    r->sched.next_health);
	}
	if (paused && !r->outage.down)
		deadline = pgo_deadline_min(deadline, r->outage.pause_until);
	return pgo_deadline_min(deadline, r->stats.next);
}

/* After the loop's turn: drive every connection and react to what it
 * reports.  Returns false when a fatal error ends the relay. */
static bool step_slots(pgo_relay_t *r)
{
	bool ok = true;

	for (int i = 0; i < r->nslots; i++) {
		slot_t *s = &r->slots[i];
		pgo_conn_event_t ev = pgo_conn_step(&s->conn, s->revents);

		s->revents = 0;
		/* No reply in time: the server or the path hangs.  Drop the
		 * connection (the others fence this member meanwhile). */
		if (ev == PGO_CONN_EV_NONE &&
		    pgo_conn_expire(
			    &s->conn, pgo_now_ms(),
			    pgo_claim_round_limit(pgo_conf_values(r->conf))))
			ev = PGO_CONN_EV_LOST;
		switch (ev) {
		case PGO_CONN_EV_ROUND: pgo_cycle_round(r, s); break;
		case PGO_CONN_EV_LOST: pgo_cycle_lost(r, s); break;
		case PGO_CONN_EV_READY:
			pgo_shards_reset(r, s);
			r->sched.kick = true;
			break;
		case PGO_CONN_EV_FATAL:
			r->run.fatal_code = s->conn.fatal.code;
			relay_error(r, "%s", s->conn.fatal.msg);
			pgo_log(PGO_LOG_ERROR, r->subject, "%s",
				s->conn.fatal.msg);
			ok = false;
			break;
		default: break;
		}
		/* A drop inside pgo_conn_step() mid-cycle: the server rolls
		 * the claim back, so cancel the publish too. */
		if (s->conn.state == PGO_CONN_DOWN && s->state != SLOT_IDLE)
			pgo_cycle_lost(r, s);
	}
	pgo_wake_step(r);
	pgo_floor_step(r);
	return ok;
}

/* Through a transaction pooler a session is not ours: the ordered modes
 * (shard leases are session advisory locks) are refused, the concurrent
 * mode runs without LISTEN, prepared statements and session settings.
 * A fleet's relay (!wait) learns it, and what relay_make() reads for a
 * single relay, from its start thread (start.c).  PGO_ERR_AGAIN: not
 * yet; else PGO_ERR_INVALID (or the start's error), errmsg set, for a
 * refusal. */
static int check_pooler(pgo_relay_t *r, bool wait)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_pooler_t kind;

	if (!wait) {
		/* A fleet's relay: the probe and what a relay reads at
		 * start, in a thread (start.c); the fleet asks again. */
		int rc = pgo_start_step(r, &kind);

		if (rc != PGO_OK)
			return rc;
	} else if (pgo_pooler_wait(r->conf, r->app_name, r->subject, r->loop,
				   &r->run.stop, &kind) != PGO_OK) {
		return PGO_OK; /* stopped first */
	}
	if (kind < PGO_POOLER_TRANSACTION)
		return PGO_OK; /* a session of our own */
	if (kind == PGO_POOLER_STATEMENT) {
		relay_error(r,
			    "the database connection goes through %s: a relay "
			    "claims in transactions; connect it to PostgreSQL "
			    "directly or through a pool in session or "
			    "transaction mode",
			    pgo_pooler_name(kind));
		return PGO_ERR_INVALID;
	}
	if (r->mode != PGO_MODE_CONCURRENT) {
		relay_error(
			r,
			"the database connection goes through %s: the %s mode "
			"needs a session of its own (its shard leases are "
			"session advisory locks, which would stay on server "
			"connections others get); connect this relay to "
			"PostgreSQL directly or through a pool in session "
			"mode, "
			"or run --mode concurrent through the pooler",
			pgo_pooler_name(kind),
			r->mode == PGO_MODE_ORDERED ? "ordered" : "strict");
		return PGO_ERR_INVALID;
	}
	r->pooled = true;
	r->setup.pooled = true;
	r->setup_quiet.pooled = true;
	pgo_floor_pooled(r);
	/* No LISTEN, and a session advisory lock would stay on a server
	 * connection others get: no wake-up handshake either. */
	pgo_wake_close(r);
	r->wake.state = WAKE_OFF;
	pgo_log(PGO_LOG_WARN, r->subject,
		"the database connection goes through %s: no LISTEN, so new "
		"events are found by the fallback poll every %lld ms "
		"(relay.poll_interval); no prepared statements; settings per "
		"transaction",
		pgo_pooler_name(kind), (long long)v->poll_interval);
	return PGO_OK;
}

/* The run's timers at the start; the line that says how it runs. */
static void run_start(pgo_relay_t *r, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);

	r->sched.kick = true;
	r->stats.last_at = now;
	r->sched.next_maintain = now; /* once at start, then on the interval */
	r->sched.next_health =
		now + (v->stats_interval ? v->stats_interval : 0);
	r->sched.next_poll = now + pgo_claim_poll_ms(r);
	r->stats.next = v->stats_interval ? now + v->stats_interval : 0;
	pgo_log(PGO_LOG_INFO, r->subject,
		"starting: %s mode, batch %d, %d connection%s, %s%s, "
		"fallback poll %lld ms",
		r->mode == PGO_MODE_CONCURRENT ? "concurrent"
		: r->mode == PGO_MODE_ORDERED  ? "ordered"
					       : "strict",
		v->batch, r->nslots, r->nslots == 1 ? "" : "s",
		v->listen && !r->pooled
			? "LISTEN (and a sleeper-lock connection)"
			: "no LISTEN (poll only)",
		r->floor.used ? ", a claim-floor connection" : "",
		(long long)v->poll_interval);
}

/* The turn's timers: a stop or reload asked for, the stats line, the
 * fallback poll, retries coming due.  Returns the next retry (0: none). */
static int64_t turn_timers(pgo_relay_t *r, int64_t now)
{
	int64_t retry_next;
	bool due_now;

	if (r->run.stop == 1)
		begin_stop(r, now);
	if (r->run.reload)
		do_reload(r);
	if (r->stats.next && now >= r->stats.next)
		log_stats(r, now);
	if (now >= r->sched.next_poll) {
		r->sched.kick = true;
		r->sched.next_poll = now + pgo_claim_poll_ms(r);
	}
	retry_next = pgo_cycle_next_retry(r, now, &due_now);
	if (due_now)
		r->sched.kick = true;
	return retry_next;
}

/* The slot's notifications since the last turn: counted, and they kick
 * a claim.  *producers: producers sent them while the relay slept (not
 * its own NOTIFY after a grant), and no kick was pending before the
 * turn (kicked). */
static void take_notifies(pgo_relay_t *r, slot_t *s, bool kicked,
			  bool *producers)
{
	if (!s->conn.notifies)
		return;
	/* Notifications from two producers or more at once while asleep:
	 * they commit side by side, where each NOTIFY costs them
	 * (wake.c). */
	if (r->wake.state == WAKE_ASLEEP && pgo_wake_side_by_side(r, &s->conn))
		r->wake.busy = true;
	r->stats.total.wakeups += (uint64_t)s->conn.notifies;
	if (!kicked && r->wake.state == WAKE_ASLEEP &&
	    r->mode != PGO_MODE_CONCURRENT && !pgo_wake_own(r, &s->conn))
		*producers = true;
	s->conn.notifies = 0;
	r->sched.kick = true;
}

/* One slot's work for the turn: its lease round when due, slot 0's
 * chores, else a claim when anything asks for one.  Returns true when it
 * claimed. */
static bool schedule_slot(pgo_relay_t *r, slot_t *s, int64_t now, bool paused,
			  bool producers)
{
	if (s->sweep.next && now >= s->sweep.next) {
		s->sweep.next = 0;
		s->wants_claim = true;
	}
	if (s->cold.at && now >= s->cold.at) {
		s->cold.at = 0;
		s->wants_claim = true;
	}
	if (pgo_shards_due(r, s, now)) {
		pgo_cycle_rebalance(r, s);
		return false;
	}
	/* Nothing before the first beat said that no relay of another mode
	 * runs on the queue. */
	if (!r->members.checked)
		return false;
	if (s->idx == 0 && pgo_cycle_chore(r, s, now))
		return false;
	if (s->state != SLOT_IDLE || s->conn.state != PGO_CONN_READY ||
	    paused || (r->mode != PGO_MODE_CONCURRENT && !s->leases.n))
		return false;
	s->cold.wake_claim =
		producers && !r->sched.more && !s->more && !s->wants_claim;
	if (s->cold.wake_claim && s->cold.dry_wakes >= COLD_AFTER) {
		/* Cold: it looks at COLD_MS. */
		if (!s->cold.at)
			s->cold.at = now + COLD_MS;
		return false;
	}
	if (!r->sched.kick && !r->sched.more && !s->more && !s->wants_claim)
		return false;
	s->wants_claim = false;
	s->cold.at = 0;
	if (r->mode == PGO_MODE_CONCURRENT)
		r->sched.kick = false;
	pgo_cycle_claim(r, s);
	return true;
}

/* Lease rounds, then claims on idle, connected slots.  In the ordered
 * modes a wake-up goes to every slot, since the event may be in any
 * slot's shards. */
static void schedule_slots(pgo_relay_t *r, int64_t now, bool paused)
{
	unsigned claimed = 0;	/* slots that claim from this turn */
	bool producers = false; /* the kick: producers' NOTIFYs only */
	/* Every slot LISTENs, so one NOTIFY reaches each of them in the
	 * same turn: whether producers woke the relay is decided against
	 * the kick from before the turn, not the one the first slot's
	 * notifications just set. */
	bool kicked = r->sched.kick;

	for (int i = 0; i < r->nslots && !r->run.stop; i++) {
		slot_t *s = &r->slots[i];

		pgo_conn_kick(&s->conn, now);
		take_notifies(r, s, kicked, &producers);
		if (schedule_slot(r, s, now, paused, producers))
			claimed |= 1u << i;
	}
	if (r->mode != PGO_MODE_CONCURRENT && r->sched.kick && !paused) {
		/* Busy slots claim once their cycle ends: their claim may
		 * have been taken before the commit that woke us.  One that
		 * claimed in this turn did so after reading every
		 * notification of it: it sees those commits. */
		for (int i = 0; i < r->nslots; i++)
			if (r->slots[i].state != SLOT_IDLE &&
			    !(claimed & (1u << i)))
				r->slots[i].wants_claim = true;
		r->sched.kick = false;
	}
}

int pgo_relay_busy(const pgo_relay_t *r)
{
	int busy = 0;

	for (int i = 0; i < r->nslots; i++)
		if (r->slots[i].state != SLOT_IDLE)
			busy++;
	return busy;
}

/* The run is over: leave the memberships (unless a fatal error ended
 * it), close every connection. */
static int run_end(pgo_relay_t *r, bool fatal)
{
	pgo_wake_close(r);
	pgo_floor_close(r);
	for (int i = 0; i < r->nslots && !fatal; i++)
		if (!r->slots[i].leases.leaving)
			pgo_shards_leave_send(r, &r->slots[i]);
	for (int i = 0; i < r->nslots; i++) {
		pgo_shards_leave_finish(r, &r->slots[i]);
		pgo_conn_close(&r->slots[i].conn);
	}
	if (fatal)
		return r->run.fatal_code ? r->run.fatal_code : PGO_ERR_SCHEMA;
	log_stats(r, pgo_now_ms());
	pgo_log(PGO_LOG_INFO, r->subject, "stopped");
	return PGO_OK;
}

int pgo_relay_begin(pgo_relay_t *r, bool wait)
{
	int rc;

	if (r->wal)
		return pgo_wal_begin(r);
	rc = check_pooler(r, wait);
	if (rc == PGO_ERR_AGAIN)
		return rc;
	/* A fleet's relay learns in its start thread (start.c) whether its
	 * queue is captured through the WAL: then its stream begins. */
	if (rc == PGO_OK && r->wal)
		return pgo_wal_begin(r);
	if (rc != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, r->subject, "%s", r->run.errmsg);
		return rc;
	}
	run_start(r, pgo_now_ms());
	return PGO_OK;
}

int64_t pgo_relay_turn_prepare(pgo_relay_t *r, int64_t now, bool *over)
{
	relay_turn_t *t = &r->turn;
	int64_t deadline;

	if (r->wal)
		return pgo_wal_turn_prepare(r, now, over);
	t->retry_next = turn_timers(r, now);
	t->paused = r->outage.down || now < r->outage.pause_until;
	schedule_slots(r, now, t->paused);
	pgo_wake_schedule(r, now);
	if (r->run.stop && now >= r->run.drain_until)
		drain_expired(r);
	/* Stop once every batch in flight has settled. */
	*over = (r->run.stop && pgo_relay_busy(r) == 0) || t->fatal;
	if (*over)
		return 0;
	/* The sink's watchers and timers run inside the loop's wait (and
	 * may settle batches); the slots' sockets are stepped after it. */
	deadline = turn_deadline(r, t->retry_next, t->paused);
	deadline = pgo_deadline_min(deadline, pgo_floor_turn(r, now));
	return pgo_deadline_min(deadline, pgo_observe_turn(r, now));
}

void pgo_relay_turn_step(pgo_relay_t *r)
{
	if (r->wal) {
		pgo_wal_turn_step(r);
		return;
	}
	if (!step_slots(r) || r->members.refused)
		r->turn.fatal = true;
	pgo_observe_step(r);
}

void pgo_relay_end_send(pgo_relay_t *r)
{
	if (r->wal)
		return; /* a replication connection: nothing to leave */
	/* As run_end() goes: the sleeper lock and the floor's probe go
	 * first. */
	pgo_wake_close(r);
	pgo_floor_close(r);
	for (int i = 0; i < r->nslots && !r->turn.fatal; i++)
		pgo_shards_leave_send(r, &r->slots[i]);
}

int pgo_relay_end(pgo_relay_t *r)
{
	if (r->wal)
		return pgo_wal_end(r);
	return run_end(r, r->turn.fatal);
}

int pgo_relay_run(pgo_relay_t *r)
{
	int rc;

	if (r->wal)
		return pgo_wal_run(r);
	if (r->shared) {
		relay_error(r, "a fleet's relay runs in the fleet's loop");
		return PGO_ERR_INVALID;
	}
	if (pgo_relay_begin(r, true) != PGO_OK)
		return PGO_ERR_INVALID;
	for (;;) {
		bool over;
		int64_t deadline =
			pgo_relay_turn_prepare(r, pgo_now_ms(), &over);

		if (over)
			break;
		rc = pgo_loop_run_once(r->loop, deadline);
		if (rc < 0) {
			relay_error(r, "poll: %s", strerror(-rc));
			return PGO_ERR_IO;
		}
		pgo_relay_turn_step(r);
	}
	return pgo_relay_end(r);
}
