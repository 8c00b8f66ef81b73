/*
 * observe.c — what the relay tells its operator: its metrics, /readyz,
 * systemd's READY=1, and the gauges read from the database.
 *
 * The counters are the relay's own stats (r->stats.total, the numbers of the
 * stats log line), copied into the registry when a scrape comes; the
 * histograms are observed where a batch settles (cycle.c).  The gauges
 * that need a query (events pending and the age of the oldest due one,
 * dead letters per queue, what holds back vacuum) are read on a
 * connection of their own every metrics.interval, never per scrape and
 * never on a slot's connection, so neither a scrape nor the query delays
 * a claim.  With metrics.listen empty there is no endpoint and no gauge
 * connection; the counters cost what they did before.
 */
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "relay/relay_int.h"
#include "relay/wal.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* The relay's series, updated on its paths or before a scrape. */
struct pgo_relay_metrics {
	pgo_series_t *published, *retried, *dead, *batches, *wakeups;
	pgo_series_t *batch_seconds, *ack_seconds;
	pgo_series_t *shards, *takeovers, *mode_conflicts;
	pgo_series_t *sink_up, *outages;
	pgo_series_t *pg_conns, *reconnects;
	pgo_series_t *pending, *oldest_due;
	pgo_metric_t *dead_letters; /* per queue, from the query */
	pgo_series_t *xmin_age, *slot_xmin_age, *gauges_ok;
	/* A WAL queue's slot (wal.c): WAL it keeps, age of what it holds. */
	pgo_series_t *slot_lag_bytes, *slot_lag_seconds;
	/* An outage: from the sink's first "down" or refused batch to its
	 * "up" or the next batch it takes. */
	bool outage;
	bool served; /* metrics.listen is set: someone reads the histograms */
	char labels[256];  /* queue, sink, relay (a fleet's: database first) */
	char db_label[96]; /* a fleet's `database="name"`; "" for one */
	/* The gauge connection (metrics.listen set only). */
	pgo_conn_t conn;
	pgo_conn_setup_t setup;
	char app_name[64];
	char pending_sql[256];
	char slot_sql[256]; /* the queue's slot lag in bytes (0: none) */
	pgo_loop_io_t *io;
	short revents;
	bool busy;	    /* its round is in flight */
	bool conn_used;	    /* conn was initialized */
	int64_t next_query; /* monotonic ms */
	bool query_failed;  /* the last round failed (logged once) */
};

/* The relay's series in the registry, labelled L. */
static void families(pgo_relay_t *r, pgo_relay_metrics_t *m, pgo_metrics_t *reg,
		     const char *L)
{
	const char *D = m->db_label; /* the series labelled by nothing else */

	const double *sb = pgo_metrics_seconds_buckets;
	int nb = pgo_metrics_seconds_nbuckets;

#define FAMILY(type, name, help, b, n)                                         \
	pgo_metric_series(pgo_metrics_family(reg, type, name, help, b, n), L)
	m->published =
		FAMILY(PGO_METRIC_COUNTER, "pgoutbox_events_published_total",
		       "Events the sink acknowledged and the relay "
		       "deleted (or archived)",
		       NULL, 0);
	m->retried = FAMILY(PGO_METRIC_COUNTER, "pgoutbox_events_retried_total",
			    "Events put back with a backoff after the sink "
			    "refused them",
			    NULL, 0);
	m->dead = FAMILY(PGO_METRIC_COUNTER,
			 "pgoutbox_events_dead_lettered_total",
			 "Events moved to pgoutbox.dead_letters", NULL, 0);
	m->batches = FAMILY(PGO_METRIC_COUNTER, "pgoutbox_batches_total",
			    "Batches settled (claimed, published, committed)",
			    NULL, 0);
	m->batch_seconds =
		FAMILY(PGO_METRIC_HISTOGRAM, "pgoutbox_batch_duration_seconds",
		       "From a batch's claim to its COMMIT", sb, nb);
	m->ack_seconds = FAMILY(
		PGO_METRIC_HISTOGRAM, "pgoutbox_commit_to_ack_seconds",
		"From an event's created_at (its transaction's time) to the "
		"sink's acknowledgement",
		sb, nb);
	m->wakeups = FAMILY(PGO_METRIC_COUNTER, "pgoutbox_notifications_total",
			    "NOTIFY wake-ups received", NULL, 0);
	/* Ordered and strict modes only: a concurrent relay holds none, and
	 * "no relay holds a shard" must not fire for it. */
	if (r->mode != PGO_MODE_CONCURRENT)
		m->shards = FAMILY(PGO_METRIC_GAUGE, "pgoutbox_shards_owned",
				   "Shard leases this relay holds (strict "
				   "mode: 1 while it leads)",
				   NULL, 0);
	m->takeovers =
		FAMILY(PGO_METRIC_COUNTER, "pgoutbox_lease_takeovers_total",
		       "Shard leases this relay took over from another relay "
		       "(one that died, or gave them up in a rebalance); not "
		       "first grants, nor leases moved between its own "
		       "connections",
		       NULL, 0);
	m->mode_conflicts = FAMILY(
		PGO_METRIC_GAUGE, "pgoutbox_relay_mode_conflicts",
		"Live relays of this relay's queue that run another relay.mode "
		"(not 0: the queue's per-key order is at risk)",
		NULL, 0);
	m->sink_up = FAMILY(PGO_METRIC_GAUGE, "pgoutbox_sink_up",
			    "1 while the sink takes events, 0 while it says "
			    "its downstream is unavailable",
			    NULL, 0);
	m->outages =
		FAMILY(PGO_METRIC_COUNTER, "pgoutbox_sink_outages_total",
		       "Times the sink went from up to unavailable", NULL, 0);
	m->pg_conns = FAMILY(PGO_METRIC_GAUGE, "pgoutbox_pg_connections",
			     "The relay's claiming connections to PostgreSQL "
			     "that are up",
			     NULL, 0);
	m->reconnects =
		FAMILY(PGO_METRIC_COUNTER, "pgoutbox_pg_reconnects_total",
		       "Claiming connections lost (each is reconnected "
		       "with a backoff)",
		       NULL, 0);
	m->pending = FAMILY(PGO_METRIC_GAUGE, "pgoutbox_events_pending",
			    "Events in the queue (read every metrics.interval)",
			    NULL, 0);
	m->oldest_due = FAMILY(PGO_METRIC_GAUGE,
			       "pgoutbox_oldest_due_event_age_seconds",
			       "How long the oldest event that is due has "
			       "been due (0: none)",
			       NULL, 0);
	m->slot_lag_bytes = FAMILY(
		PGO_METRIC_GAUGE, "pgoutbox_slot_lag_bytes",
		"WAL the queue's replication slot keeps past its confirmed "
		"position (WAL capture; 0: no slot)",
		NULL, 0);
	m->slot_lag_seconds = FAMILY(
		PGO_METRIC_GAUGE, "pgoutbox_slot_lag_seconds",
		"Age of the oldest commit this relay streamed and the sink "
		"has not acked (WAL capture; 0: none)",
		NULL, 0);
	m->dead_letters = pgo_metrics_family(
		reg, PGO_METRIC_GAUGE, "pgoutbox_dead_letters",
		"Rows in pgoutbox.dead_letters per queue", NULL, 0);
	m->xmin_age = pgo_metric_series(
		pgo_metrics_family(reg, PGO_METRIC_GAUGE,
				   "pgoutbox_oldest_xmin_age_seconds",
				   "Age of the oldest transaction holding back "
				   "vacuum (pgoutbox.health())",
				   NULL, 0),
		D);
	m->slot_xmin_age = pgo_metric_series(
		pgo_metrics_family(reg, PGO_METRIC_GAUGE,
				   "pgoutbox_slot_xmin_age_transactions",
				   "Transaction ids a replication slot pins "
				   "behind (0: none)",
				   NULL, 0),
		D);
	m->gauges_ok = FAMILY(PGO_METRIC_GAUGE,
			      "pgoutbox_gauges_last_success_timestamp_seconds",
			      "When the database gauges were last read (Unix "
			      "time)",
			      NULL, 0);
#undef FAMILY
}

int pgo_observe_init(pgo_relay_t *r, pgo_error_t *err)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_relay_metrics_t *m = calloc(1, sizeof(*m));
	pgo_endpoint_probe_t probe = {pgo_observe_collect, pgo_observe_ready,
				      r};
	const char *L;

	if (!m)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for the relay's metrics");
	r->stats.metrics = m;
	if (!r->shared) {
		r->stats.mon =
			pgo_monitor_new(r->loop, r->conf, r->subject, err);
		if (!r->stats.mon)
			return err->code;
		pgo_monitor_probe(r->stats.mon, &probe);
	}
	if (r->database[0]) {
		pgo_metrics_labels(m->db_label, sizeof(m->db_label), "database",
				   r->database, NULL);
		L = pgo_metrics_labels(m->labels, sizeof(m->labels), "database",
				       r->database, "queue", v->queue, "sink",
				       pgo_sink_name(r->sink), "relay", v->name,
				       NULL);
	} else {
		L = pgo_metrics_labels(m->labels, sizeof(m->labels), "queue",
				       v->queue, "sink", pgo_sink_name(r->sink),
				       "relay", v->name, NULL);
	}
	families(r, m, pgo_monitor_metrics(r->stats.mon), L);
	pgo_series_set(m->sink_up, 1);
	if (!*v->metrics_listen)
		return PGO_OK;
	m->served = true;
	/* The gauges' own connection. */
	snprintf(m->app_name, sizeof(m->app_name), "pgoutbox metrics %s",
		 v->name);
	snprintf(m->pending_sql, sizeof(m->pending_sql),
		 "SELECT count(*), coalesce(extract(epoch FROM now() - "
		 "min(run_at) FILTER (WHERE run_at <= now())), 0) "
		 "FROM pgoutbox.\"%s\"",
		 v->queue);
	snprintf(m->slot_sql, sizeof(m->slot_sql),
		 "SELECT coalesce(max(pg_current_wal_lsn() - "
		 "confirmed_flush_lsn), 0) FROM pg_replication_slots "
		 "WHERE slot_name = 'pgoutbox_%s' AND database = "
		 "current_database()",
		 v->queue);
	m->setup.subject = r->subject;
	m->setup.app_name = m->app_name;
	m->setup.sql[0] = "SET statement_timeout = '10s'";
	m->setup.sql[1] = NULL;
	pgo_conn_init(&m->conn, r->conf, &m->setup);
	m->conn_used = true;
	m->io = pgo_loop_io_add(r->loop, -1, 0, pgo_loop_io_note, &m->revents);
	if (!m->io)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for the relay's metrics");
	return PGO_OK;
}

void pgo_observe_destroy(pgo_relay_t *r)
{
	pgo_relay_metrics_t *m = r->stats.metrics;

	if (m) {
		if (m->conn_used)
			pgo_conn_close(&m->conn);
		pgo_loop_io_del(m->io);
		free(m);
		r->stats.metrics = NULL;
	}
	if (!r->shared) /* a fleet's is the fleet's */
		pgo_monitor_destroy(r->stats.mon);
	r->stats.mon = NULL;
}

void pgo_observe_collect(void *arg)
{
	pgo_relay_t *r = arg;
	pgo_relay_metrics_t *m = r->stats.metrics;
	int conns = 0, owned = 0;

	for (int i = 0; i < r->nslots; i++) {
		const slot_t *s = &r->slots[i];

		if (s->conn.state == PGO_CONN_READY ||
		    s->conn.state == PGO_CONN_BUSY)
			conns++;
		owned += s->leases.n;
	}
	pgo_series_set(m->published, (double)r->stats.total.published);
	pgo_series_set(m->retried, (double)r->stats.total.retried);
	pgo_series_set(m->dead, (double)r->stats.total.dead);
	pgo_series_set(m->batches, (double)r->stats.total.batches);
	pgo_series_set(m->wakeups, (double)r->stats.total.wakeups);
	pgo_series_set(m->reconnects, (double)r->stats.total.reconnects);
	pgo_series_set(m->pg_conns, conns);
	pgo_series_set(m->shards, owned);
	pgo_series_set(m->sink_up, pgo_observe_sink_up(r) ? 1 : 0);
	if (r->wal)
		pgo_series_set(m->slot_lag_seconds, pgo_wal_lag_seconds(r));
}

bool pgo_observe_sink_up(const pgo_relay_t *r)
{
	return !r->outage.down &&
	       !(r->stats.metrics && r->stats.metrics->outage);
}

bool pgo_observe_ready(void *arg, char *why, size_t size)
{
	pgo_relay_t *r = arg;

	if (r->run.stop) {
		snprintf(why, size, "stopping");
		return false;
	}
	if (r->wal && !pgo_wal_connected(r)) {
		snprintf(why, size, "postgresql: not streaming the slot%s%s",
			 pgo_wal_why(r)[0] ? ": " : " yet", pgo_wal_why(r));
		why[strcspn(why, "\n")] = '\0';
		return false;
	}
	for (int i = 0; i < r->nslots && !r->wal; i++) {
		const slot_t *s = &r->slots[i];

		if (s->conn.state != PGO_CONN_READY &&
		    s->conn.state != PGO_CONN_BUSY) {
			snprintf(why, size,
				 "postgresql: connection %d is not "
				 "connected%s%s",
				 i, s->conn.last_err[0] ? ": " : "",
				 s->conn.last_err);
			why[strcspn(why, "\n")] = '\0';
			return false;
		}
	}
	if (r->outage.down) {
		snprintf(why, size, "sink %s down: %s", pgo_sink_name(r->sink),
			 r->outage.why[0] ? r->outage.why : "no reason");
		why[strcspn(why, "\n")] = '\0';
		return false;
	}
	if (r->stats.metrics->outage) {
		snprintf(why, size,
			 "sink %s unavailable: it refused the last batch",
			 pgo_sink_name(r->sink));
		return false;
	}
	if (r->wal)
		snprintf(why, size,
			 "ready: streaming the slot (or standing by), sink "
			 "%s up",
			 pgo_sink_name(r->sink));
	else
		snprintf(why, size, "ready: %d connection%s, sink %s up",
			 r->nslots, r->nslots == 1 ? "" : "s",
			 pgo_sink_name(r->sink));
	return true;
}

void pgo_observe_sink(pgo_relay_t *r, bool up)
{
	pgo_relay_metrics_t *m = r->stats.metrics;

	if (!m) /* health() while attaching, before the metrics exist */
		return;
	if (!up && !m->outage)
		pgo_series_add(m->outages, 1);
	m->outage = !up;
}

void pgo_observe_takeovers(pgo_relay_t *r, int n)
{
	if (n > 0)
		pgo_series_add(r->stats.metrics->takeovers, n);
}

void pgo_observe_mode_conflicts(pgo_relay_t *r, int n)
{
	pgo_series_set(r->stats.metrics->mode_conflicts, n);
}

void pgo_observe_settled(pgo_relay_t *r, const slot_t *s, int64_t now)
{
	pgo_relay_metrics_t *m = r->stats.metrics;

	pgo_series_observe(m->batch_seconds,
			   (double)(now - s->claim_started) / 1000.0);
}

void pgo_observe_acked(pgo_relay_t *r, const pgo_batch_t *b)
{
	pgo_relay_metrics_t *m = r->stats.metrics;
	int64_t wall;

	if (!m->served) /* nobody scrapes: spare the batch the parsing */
		return;
	wall = pgo_wall_us();
	for (size_t i = 0; i < b->n; i++) {
		int64_t at;

		if (b->acks[i] != PGO_ACK_OK)
			continue;
		if (pgo_parse_rfc3339_us(b->events[i].created_at, &at) == 0)
			pgo_series_observe(m->ack_seconds,
					   wall > at ? (double)(wall - at) / 1e6
						     : 0.0);
	}
}

/* The labels of a queue's dead letters: `queue="q"`, or for a fleet's
 * relay `database="name",queue="q"`. */
static const char *dl_labels(const pgo_relay_metrics_t *m, char *buf,
			     size_t size, const char *queue)
{
	if (!m->db_label[0])
		return pgo_metrics_labels(buf, size, "queue", queue, NULL);
	snprintf(buf, size, "%s,", m->db_label);
	pgo_metrics_labels(buf + strlen(buf), size - strlen(buf), "queue",
			   queue, NULL);
	return buf;
}

/* The gauge round came back. */
static void gauges_done(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_relay_metrics_t *m = r->stats.metrics;
	pgo_round_t *round = &m->conn.round;
	PGresult *res;
	char labels[256];

	m->busy = false;
	if (round->failed || round->got < 5) {
		if (!m->query_failed)
			pgo_log(PGO_LOG_WARN, r->subject,
				"metrics: reading the gauges failed: %s",
				round->err);
		m->query_failed = true;
		pgo_conn_round_clear(&m->conn);
		return;
	}
	m->query_failed = false;
	res = round->res[0];
	pgo_series_set(m->pending, strtod(PQgetvalue(res, 0, 0), NULL));
	pgo_series_set(m->oldest_due, strtod(PQgetvalue(res, 0, 1), NULL));
	res = round->res[1];
	if (m->db_label[0]) { /* a fleet's: this database's series only */
		char prefix[100];

		snprintf(prefix, sizeof(prefix), "%s,", m->db_label);
		pgo_metric_clear_prefix(m->dead_letters, prefix);
	} else {
		pgo_metric_clear(m->dead_letters);
	}
	pgo_series_set(pgo_metric_series(
			       m->dead_letters,
			       dl_labels(m, labels, sizeof(labels), v->queue)),
		       0);
	for (int i = 0; i < PQntuples(res); i++)
		pgo_series_set(
			pgo_metric_series(m->dead_letters,
					  dl_labels(m, labels, sizeof(labels),
						    PQgetvalue(res, i, 0))),
			strtod(PQgetvalue(res, i, 1), NULL));
	pgo_series_set(m->slot_xmin_age,
		       strtod(PQgetvalue(round->res[2], 0, 0), NULL));
	pgo_series_set(m->slot_lag_bytes,
		       strtod(PQgetvalue(round->res[3], 0, 0), NULL));
	pgo_series_set(m->xmin_age,
		       strtod(PQgetvalue(round->res[4], 0, 0), NULL));
	pgo_series_set(m->gauges_ok, (double)(pgo_wall_us() / 1000000));
	pgo_conn_round_clear(&m->conn);
}

int64_t pgo_observe_turn(pgo_relay_t *r, int64_t now)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	pgo_relay_metrics_t *m = r->stats.metrics;
	struct pollfd pfd;
	bool all_up = true;

	/* READY=1 once every claiming connection is up. */
	for (int i = 0; i < r->nslots && !r->wal; i++)
		if (r->slots[i].conn.state < PGO_CONN_READY)
			all_up = false;
	if (r->wal && !pgo_wal_connected(r))
		all_up = false;
	if (all_up)
		pgo_monitor_ready(r->stats.mon);
	if (!m->conn_used)
		return 0;
	pgo_conn_kick(&m->conn, now);
	if (!m->busy && !r->run.stop && m->conn.state == PGO_CONN_READY &&
	    now >= m->next_query) {
		pgo_conn_query(&m->conn, m->pending_sql, 0, NULL);
		pgo_conn_query(&m->conn,
			       "SELECT queue, count(*) FROM "
			       "pgoutbox.dead_letters GROUP BY queue "
			       "ORDER BY queue",
			       0, NULL);
		pgo_conn_query(&m->conn,
			       "SELECT coalesce(max(greatest(age(xmin), "
			       "age(catalog_xmin))), 0) FROM "
			       "pg_replication_slots",
			       0, NULL);
		pgo_conn_query(&m->conn, m->slot_sql, 0, NULL);
		/* Last: it needs EXECUTE on pgoutbox.health(), as the
		 * relay's health check does. */
		pgo_conn_query(&m->conn,
			       "SELECT coalesce(extract(epoch FROM max(age)), "
			       "0) FROM pgoutbox.health('0 seconds') WHERE "
			       "kind = 'xmin'",
			       0, NULL);
		if (pgo_conn_send(&m->conn) == PGO_OK)
			m->busy = true;
		m->next_query = now + v->metrics_interval;
	}
	pgo_conn_pollfd(&m->conn, &pfd);
	pgo_loop_io_set(m->io, pfd.fd, pfd.events);
	m->revents = 0;
	if (m->conn.state == PGO_CONN_DOWN)
		return m->conn.retry_at;
	return m->busy || m->conn.state != PGO_CONN_READY ? 0 : m->next_query;
}

void pgo_observe_step(pgo_relay_t *r)
{
	pgo_relay_metrics_t *m = r->stats.metrics;
	pgo_conn_event_t ev;

	if (!m->conn_used)
		return;
	ev = pgo_conn_step(&m->conn, m->revents);
	m->revents = 0;
	switch (ev) {
	case PGO_CONN_EV_ROUND: gauges_done(r); break;
	case PGO_CONN_EV_LOST: m->busy = false; break;
	case PGO_CONN_EV_READY: m->next_query = 0; break;
	default: break;
	}
	if (m->conn.state == PGO_CONN_DOWN)
		m->busy = false;
}

void pgo_observe_stopping(pgo_relay_t *r)
{
	pgo_monitor_stopping(r->stats.mon);
}
