/*
 * fleet.c — one process relaying many databases (shards): a relay per
 * database, each with its own connections, shard leases, claim floor
 * and queues, all on one event loop and into one sink (docs/fleet.md).
 *
 * The fleet owns the loop, the sink (it is the sink's host) and the
 * metrics endpoint; each relay (relay.c) runs its turns in halves: the
 * first schedules its slots and says how long the loop may wait, the
 * second steps its connections after the wait.  The sink's done() goes
 * to the relay whose slot holds the batch; health() goes to every relay.
 *
 * Fairness: every turn, each database schedules each of its idle slots
 * and steps each connection once, and a slot has at most one batch out
 * (relay.in_flight slots: at most that many batches per database at the
 * sink).  A busy database cannot take more than its slots; an idle one
 * costs its timers.  The order of the databases rotates every turn.
 *
 * A database that cannot be reached, or whose host hangs, pauses only
 * itself: no step of the loop waits for one database.  Its connections
 * reconnect with their own backoff (conn.c, non-blocking).  What a relay
 * reads before its first turn (the schema check, an adopted table's map,
 * the pooler probe) is read in a thread (start.c), where libpq may block
 * on a connect or a host name's resolution; until it succeeds the
 * database waits with a backoff of its own.  A database whose relay
 * ends with a fatal error (no schema, a newer one, relays of another
 * mode) stops alone, logged; the process exits with that error once
 * every database has stopped.
 *
 * A database whose queue is captured through the WAL runs the streaming
 * relay (wal.c) in the same halves: its replication connection in the
 * loop, its one batch at a time at the sink (done() finds it by the
 * batch's address too).  Its slot missing or lost is retried by that
 * relay with a backoff rather than ending it (wal_stream.c).
 *
 * SIGHUP with a file of sections re-reads them (fleet_reload); a file
 * left without any is refused, the databases kept.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "relay/relay_int.h"
#include "relay/wal.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

typedef enum fleet_db_state {
	DB_PROBING = 0, /* before its first turn: the pooler probe */
	DB_RUNNING,	/* its relay turns with the others */
	DB_OVER,	/* its run ended (stopped, or fatal: rc) */
	DB_ENDING	/* over in this turn: its leave() sent */
} fleet_db_state_t;

/* One database of the fleet. */
typedef struct fleet_db {
	char name[PGO_DB_NAME_MAX + 1]; /* in subjects, labels, headers */
	pgo_conf_t *conf;		/* its own: database.url is its URL */
	pgo_relay_t *relay;		/* its relay, on the fleet's loop */
	fleet_db_state_t state;		/* where its run is */
	int64_t probe_at;		/* DB_PROBING: the next try (ms) */
	int64_t backoff;		/* ... and the pause after a failure */
	int rc;				/* DB_OVER: how its run ended */
	bool removed; /* gone from the file (SIGHUP): stopping, then freed */
} fleet_db_t;

struct pgo_fleet {
	pgo_conf_t *conf;     /* the whole's (borrowed) */
	pgo_sink_t *sink;     /* the one sink (borrowed), attached here */
	pgo_loop_t *loop;     /* the one loop */
	pgo_monitor_t *mon;   /* metrics, endpoint, sd_notify */
	pgo_sink_host_t host; /* the fleet is the sink's host */
	fleet_db_t *dbs;      /* the databases */
	size_t n;	      /* how many */
	size_t first;	      /* the database that goes first this turn */
	bool attached;	      /* the sink is attached */
	bool from_file;	      /* [database NAME] sections: SIGHUP edits */
	bool stopping;	      /* the stop was passed on to every relay */
	char subject[64];     /* "fleet -> redis" */
	char errmsg[512];     /* why it ended */
	volatile sig_atomic_t stop, reload;
};

/* --- the sink's host --- */

/* done(): the relay whose slot holds the batch (a slot's batch lives in
 * the relay's handle, so its address says whose it is), or whose WAL
 * stream's batch it is. */
static void fleet_done(void *ctx, pgo_batch_t *batch)
{
	pgo_fleet_t *f = ctx;

	for (size_t i = 0; i < f->n; i++) {
		pgo_relay_t *r = f->dbs[i].relay;
		const char *lo = (const char *)r->slots;
		const char *hi = (const char *)(r->slots + MAX_SLOTS);

		if (r->wal && batch == pgo_wal_batch(r)) {
			pgo_wal_sink_done(r, batch);
			return;
		}
		if ((const char *)batch >= lo && (const char *)batch < hi) {
			pgo_cycle_sink_done(r, batch);
			return;
		}
	}
	pgo_log(PGO_LOG_ERROR, f->subject,
		"the sink finished a batch no database sent: dropped");
}

/* health(): the downstream is everyone's. */
static void fleet_health(void *ctx, int up, const char *reason)
{
	pgo_fleet_t *f = ctx;

	for (size_t i = 0; i < f->n; i++)
		if (f->dbs[i].relay)
			pgo_relay_sink_health(f->dbs[i].relay, up, reason);
}

/* --- metrics --- */

static void fleet_collect(void *arg)
{
	pgo_fleet_t *f = arg;

	for (size_t i = 0; i < f->n; i++)
		pgo_observe_collect(f->dbs[i].relay);
}

/* /readyz: every database's relay ready. */
static bool fleet_ready(void *arg, char *why, size_t size)
{
	pgo_fleet_t *f = arg;
	char one[400];

	for (size_t i = 0; i < f->n; i++) {
		fleet_db_t *d = &f->dbs[i];

		if (d->state == DB_PROBING) {
			snprintf(why, size, "database %s: not connected yet",
				 d->name);
			return false;
		}
		if (d->state == DB_OVER) {
			snprintf(why, size, "database %s: stopped", d->name);
			return false;
		}
		if (!pgo_observe_ready(d->relay, one, sizeof(one))) {
			snprintf(why, size, "database %s: %s", d->name, one);
			return false;
		}
	}
	snprintf(why, size, "ready: %zu database%s, sink %s up", f->n,
		 f->n == 1 ? "" : "s", pgo_sink_name(f->sink));
	return true;
}

/* --- the databases --- */

/* Database d's configuration (url) and relay; PGO_OK or the error. */
static int make_relay(pgo_fleet_t *f, fleet_db_t *d, const char *url,
		      pgo_error_t *err)
{
	extern char **environ;
	pgo_relay_shared_t sh = {.loop = f->loop, .mon = f->mon};
	char where[80];

	snprintf(where, sizeof(where), "[database %s]", d->name);
	d->conf = pgo_conf_for_database(f->conf, url, where, environ, err);
	if (!d->conf)
		return err->code;
	sh.database = d->name;
	d->relay = pgo_relay_new_shared(d->conf, f->sink, &sh, err);
	return d->relay ? PGO_OK : err->code;
}

/* Each database's configuration and relay; PGO_OK or the error. */
static int make_dbs(pgo_fleet_t *f, pgo_error_t *err)
{
	size_t n = pgo_conf_database_count(f->conf);
	pgo_conf_db_t *named = calloc(n ? n : 1, sizeof(*named));

	f->dbs = calloc(n ? n : 1, sizeof(*f->dbs));
	if (!named || !f->dbs) {
		free(named);
		return pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
	}
	f->n = n;
	if (pgo_conf_databases_named(f->conf, named, err) != PGO_OK) {
		free(named);
		return err->code;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(f->dbs[i].name, sizeof(f->dbs[i].name), "%s",
			 named[i].name);
		f->from_file = named[i].from_file;
	}
	for (size_t i = 0; i < n; i++)
		if (make_relay(f, &f->dbs[i], named[i].url, err) != PGO_OK)
			break;
	free(named);
	return n && f->dbs[n - 1].relay ? PGO_OK : err->code;
}

pgo_fleet_t *pgo_fleet_new(pgo_conf_t *conf, pgo_sink_t *sink, pgo_error_t *err)
{
	pgo_endpoint_probe_t probe;
	pgo_fleet_t *f;
	int rc;

	if (!conf || !sink || !pgo_conf_database_count(conf)) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "pgo_fleet_new: conf with databases and a sink "
			      "are required");
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->loop = pgo_loop_new())) {
		free(f);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory (or no pipe) for a fleet");
		return NULL;
	}
	f->conf = conf;
	f->sink = sink;
	snprintf(f->subject, sizeof(f->subject), "fleet -> %s",
		 pgo_sink_name(sink));
	f->mon = pgo_monitor_new(f->loop, conf, f->subject, err);
	if (!f->mon || make_dbs(f, err) != PGO_OK) {
		pgo_fleet_destroy(f);
		return NULL;
	}
	probe = (pgo_endpoint_probe_t){fleet_collect, fleet_ready, f};
	pgo_monitor_probe(f->mon, &probe);
	f->host.loop = f->loop;
	f->host.done = fleet_done;
	f->host.health = fleet_health;
	f->host.ctx = f;
	rc = pgo_sink_attach(sink, &f->host);
	if (rc != PGO_OK) {
		pgo_error_set(err, rc, 0, "sink %s: %s", pgo_sink_name(sink),
			      pgo_sink_errmsg(sink)[0] ? pgo_sink_errmsg(sink)
						       : pgo_strerror(rc));
		pgo_fleet_destroy(f);
		return NULL;
	}
	f->attached = true;
	pgo_error_clear(err);
	return f;
}

void pgo_fleet_destroy(pgo_fleet_t *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		pgo_relay_destroy(f->dbs[i].relay);
		pgo_conf_destroy(f->dbs[i].conf);
	}
	if (f->attached)
		pgo_sink_detach(f->sink);
	free(f->dbs);
	pgo_monitor_destroy(f->mon);
	pgo_loop_destroy(f->loop);
	free(f);
}

void pgo_fleet_request_stop(pgo_fleet_t *f)
{
	f->stop = 1;
	pgo_loop_wake(f->loop);
}

void pgo_fleet_request_reload(pgo_fleet_t *f)
{
	f->reload = 1;
	pgo_loop_wake(f->loop);
}

const char *pgo_fleet_errmsg(const pgo_fleet_t *f)
{
	return f->errmsg;
}

/* --- the loop --- */

/* A stop asked for: every relay finishes its batches in flight; the
 * sink drains once for all. */
static void fleet_stop(pgo_fleet_t *f, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(f->conf);

	f->stopping = true;
	for (size_t i = 0; i < f->n; i++) {
		fleet_db_t *d = &f->dbs[i];

		if (d->state == DB_RUNNING)
			pgo_relay_request_stop(d->relay);
		else if (d->state == DB_PROBING)
			d->state = DB_OVER;
	}
	pgo_sink_drain(f->sink, now + v->drain_timeout);
}

/* The database of the file named name, or NULL; its url in *url. */
static bool in_file(const pgo_fleet_t *f, const char *name, const char **url)
{
	const char *n;
	bool file;

	for (size_t i = 0; pgo_conf_database(f->conf, i, &n, url, &file); i++)
		if (file && n && strcmp(n, name) == 0)
			return true;
	return false;
}

/* A database added to the file: its relay joins the loop. */
static void add_db(pgo_fleet_t *f, const char *name, const char *url)
{
	fleet_db_t *grown = realloc(f->dbs, (f->n + 1) * sizeof(*grown));
	fleet_db_t *d;
	pgo_error_t err;

	if (!grown) {
		pgo_log(PGO_LOG_ERROR, f->subject,
			"database %s: out of memory: not added", name);
		return;
	}
	f->dbs = grown;
	d = &f->dbs[f->n];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	if (!*url || make_relay(f, d, url, &err) != PGO_OK) {
		pgo_log(PGO_LOG_ERROR, f->subject, "database %s: not added: %s",
			name, *url ? err.msg : "it has no url");
		pgo_relay_destroy(d->relay);
		pgo_conf_destroy(d->conf);
		return;
	}
	f->n++;
	pgo_log(PGO_LOG_INFO, f->subject, "database %s added", name);
}

/* The [database NAME] sections of the file read last. */
static size_t file_dbs(const pgo_fleet_t *f)
{
	const char *name, *url;
	size_t n = 0;
	bool file;

	for (size_t i = 0; pgo_conf_database(f->conf, i, &name, &url, &file);
	     i++)
		n += file;
	return n;
}

/* SIGHUP: every database's relay reloads its configuration; a fleet of
 * [database NAME] sections adds the sections that are new and stops the
 * relays of those that are gone.  A file left without any section is
 * refused: the fleet keeps serving its databases (stopping the process
 * stops them all). */
static void fleet_reload(pgo_fleet_t *f)
{
	extern char **environ;
	const char *name, *url;
	size_t n = f->n;
	bool file;

	f->reload = 0;
	if (f->from_file && !f->stopping) {
		if (pgo_conf_reload(f->conf, environ, NULL) != PGO_OK) {
			pgo_log(PGO_LOG_ERROR, f->subject,
				"reload failed, keeping the databases: %s",
				pgo_conf_errmsg(f->conf));
			return;
		}
		if (!file_dbs(f)) {
			pgo_log(PGO_LOG_ERROR, f->subject,
				"reload refused: the file has no [database "
				"NAME] section left; keeping the %zu "
				"database%s served and their configuration "
				"(to stop them all, stop the process)",
				f->n, f->n == 1 ? "" : "s");
			return;
		}
	}
	for (size_t i = 0; i < f->n; i++)
		pgo_relay_request_reload(f->dbs[i].relay);
	if (!f->from_file || f->stopping)
		return;
	for (size_t i = 0; i < n; i++) {
		fleet_db_t *d = &f->dbs[i];

		if (d->removed)
			continue;
		if (!in_file(f, d->name, &url)) {
			pgo_log(PGO_LOG_INFO, f->subject,
				"database %s removed: stopping its relay",
				d->name);
			d->removed = true;
			if (d->state == DB_RUNNING)
				pgo_relay_request_stop(d->relay);
			else
				d->state = DB_OVER;
		} else if (strcmp(url, pgo_conf_get(d->conf, "database.url")) !=
			   0) {
			pgo_log(PGO_LOG_WARN, f->subject,
				"database %s: its url changed, which needs a "
				"restart (or remove the section, reload, add "
				"it back, reload); keeping the old one",
				d->name);
		}
	}
	for (size_t i = 0; pgo_conf_database(f->conf, i, &name, &url, &file);
	     i++) {
		bool known = false;

		for (size_t j = 0; j < f->n && !known; j++)
			known = strcmp(f->dbs[j].name, name) == 0;
		if (file && !known)
			add_db(f, name, url);
	}
	/* The console on the metrics address shows the file's databases. */
	pgo_monitor_console_reload(f->mon, f->conf);
}

/* Frees the databases removed whose relay has stopped. */
static void reap(pgo_fleet_t *f)
{
	char prefix[PGO_DB_NAME_MAX + 16];

	for (size_t i = 0; i < f->n;) {
		fleet_db_t *d = &f->dbs[i];

		if (!d->removed || d->state != DB_OVER) {
			i++;
			continue;
		}
		pgo_log(PGO_LOG_INFO, f->subject, "database %s stopped",
			d->name);
		/* Its series go too: `database="NAME"` and what follows. */
		snprintf(prefix, sizeof(prefix), "database=\"%s\"", d->name);
		pgo_metrics_clear_prefix(pgo_monitor_metrics(f->mon), prefix);
		pgo_relay_destroy(d->relay);
		pgo_conf_destroy(d->conf);
		memmove(d, d + 1, (f->n - i - 1) * sizeof(*d));
		f->n--;
	}
	if (f->n && f->first >= f->n)
		f->first = 0;
}

/* A database before its first turn: the pooler probe when due. */
static int64_t probe_db(pgo_fleet_t *f, fleet_db_t *d, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(d->conf);
	int rc;

	if (now < d->probe_at)
		return d->probe_at;
	rc = pgo_relay_begin(d->relay, false);
	if (rc == PGO_OK) {
		d->state = DB_RUNNING;
		d->backoff = 0;
		return 0;
	}
	if (rc == PGO_ERR_AGAIN && d->relay->start)
		return 0; /* its start thread wakes the loop when done */
	if (rc != PGO_ERR_AGAIN) {
		d->state = DB_OVER;
		d->rc = rc;
		pgo_log(PGO_LOG_ERROR, f->subject,
			"database %s stopped (the others go on): %s", d->name,
			pgo_relay_errmsg(d->relay));
		return 0;
	}
	d->backoff = d->backoff ? d->backoff * 2 : 100;
	if (d->backoff > v->reconnect_max)
		d->backoff = v->reconnect_max;
	d->probe_at = now + d->backoff;
	return d->probe_at;
}

/* The first half of the turn for every database, in rotating order.
 * Returns the loop's deadline; *live: databases still running. */
static int64_t prepare_all(pgo_fleet_t *f, int64_t now, size_t *live)
{
	int64_t deadline = 0;

	*live = 0;
	for (size_t k = 0; k < f->n; k++) {
		fleet_db_t *d = &f->dbs[(f->first + k) % f->n];
		bool over = false;
		int64_t dl;

		if (d->state == DB_PROBING)
			deadline =
				pgo_deadline_min(deadline, probe_db(f, d, now));
		if (d->state == DB_OVER)
			continue; /* ended in an earlier turn, or its probe */
		(*live)++;
		if (d->state != DB_RUNNING)
			continue;
		deadline = pgo_deadline_min(deadline,
					    pgo_start_resolve(d->relay, now));
		dl = pgo_relay_turn_prepare(d->relay, now, &over);
		if (!over) {
			deadline = pgo_deadline_min(deadline, dl);
			continue;
		}
		(*live)--;
		d->state = DB_ENDING;
		pgo_relay_end_send(d->relay);
	}
	/* The relays over in this turn: their leave() went out together,
	 * each waits for its own answers now. */
	for (size_t i = 0; i < f->n; i++) {
		fleet_db_t *d = &f->dbs[i];

		if (d->state != DB_ENDING)
			continue;
		d->state = DB_OVER;
		d->rc = pgo_relay_end(d->relay);
		if (d->rc != PGO_OK)
			pgo_log(PGO_LOG_ERROR, f->subject,
				"database %s stopped (the others go on): %s",
				d->name, pgo_relay_errmsg(d->relay));
	}
	return deadline;
}

/* The run's end: the first database's error, or PGO_OK. */
static int fleet_result(pgo_fleet_t *f)
{
	for (size_t i = 0; i < f->n; i++) {
		if (f->dbs[i].rc == PGO_OK)
			continue;
		snprintf(f->errmsg, sizeof(f->errmsg), "database %s: %s",
			 f->dbs[i].name, pgo_relay_errmsg(f->dbs[i].relay));
		return f->dbs[i].rc;
	}
	return PGO_OK;
}

int pgo_fleet_run(pgo_fleet_t *f)
{
	char names[512] = "";

	for (size_t i = 0; i < f->n; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
			 "%s%s", i ? ", " : "", f->dbs[i].name);
	pgo_log(PGO_LOG_INFO, f->subject, "starting: %zu database%s (%s)", f->n,
		f->n == 1 ? "" : "s", names);
	for (;;) {
		int64_t now = pgo_now_ms(), deadline;
		size_t live;
		int rc;

		if (f->stop && !f->stopping)
			fleet_stop(f, now);
		if (f->reload)
			fleet_reload(f);
		reap(f);
		deadline = prepare_all(f, now, &live);
		if (!live)
			break;
		rc = pgo_loop_run_once(f->loop, deadline);
		if (rc < 0) {
			snprintf(f->errmsg, sizeof(f->errmsg), "poll: %s",
				 strerror(-rc));
			return PGO_ERR_IO;
		}
		for (size_t k = 0; k < f->n; k++) {
			fleet_db_t *d = &f->dbs[(f->first + k) % f->n];

			if (d->state == DB_RUNNING)
				pgo_relay_turn_step(d->relay);
		}
		f->first = f->n ? (f->first + 1) % f->n : 0;
	}
	pgo_log(PGO_LOG_INFO, f->subject, "stopped");
	return fleet_result(f);
}
