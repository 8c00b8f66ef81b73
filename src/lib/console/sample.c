/*
 * sample.c — throughput over the last 15 minutes, kept in memory: every
 * SAMPLE_EVERY_S the command's main thread reads, per database (each of
 * a fleet's) and per queue, the last value of its id sequence (what was ever
 * enqueued), what is pending and its dead letters.  Between two samples,
 * enqueued = Δsequence and done = enqueued − Δpending − Δdead (delivered, or
 * finished by a worker).  Levels are kept too: how long the oldest due item has
 * been due (the lag), a WAL queue's slot lag in bytes and seconds, and the age
 * of the oldest transaction holding back vacuum (held xmin). Nothing is written
 * to the database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console/console_int.h"
#include "base/buf.h"
#include "console/console.h"
#include "pgoutbox.h"

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sample_db(pgo_console_t *c)
{
	/* A WAL queue's slot as `status --json` reads it (outbox/status.c):
	 * bytes past its confirmed position, the streaming relay's flush
	 * lag in seconds. */
	static const char sql[] =
		"SELECT q.name, q.kind, CASE WHEN q.kind <> 'adopted' THEN "
		"coalesce(pg_sequence_last_value(pg_get_serial_sequence("
		"format('pgoutbox.%I', q.name), 'id')::regclass), 0) ELSE 0 "
		"END, (SELECT count(*) FROM pgoutbox.dead_letters d WHERE "
		"d.queue = q.name), q.capture IS NOT DISTINCT FROM 'wal', "
		"coalesce(pg_current_wal_lsn() - s.confirmed_flush_lsn, 0), "
		"coalesce(extract(epoch FROM r.flush_lag), 0) "
		"FROM pgoutbox.queues q LEFT JOIN pg_replication_slots s ON "
		"q.capture = 'wal' AND s.slot_name = 'pgoutbox_' || q.name AND "
		"s.database = current_database() LEFT JOIN pg_stat_replication "
		"r ON r.pid = s.active_pid ORDER BY q.name LIMIT 32";
	/* The relay's pgoutbox_oldest_xmin_age_seconds. */
	static const char xmin_sql[] =
		"SELECT coalesce(extract(epoch FROM max(age)), 0) FROM "
		"pgoutbox.health('0 seconds') WHERE kind = 'xmin'";
	char why[256], count[640];
	PGresult *res = console_query(c, sql, 0, NULL, why, sizeof(why)), *n;
	sample_t s = {0};

	if (!res)
		return;
	for (int i = 0; i < PQntuples(res) && i < SAMPLE_QUEUES; i++) {
		const char *name = PQgetvalue(res, i, 0);
		sample_q_t *q = &s.q[s.nq];

		/* Names come from pgoutbox.queues: identifiers, checked. */
		if (pgo_ident_check(name, NULL) != PGO_OK)
			continue;
		/* The oldest due item: the relay's
		 * pgoutbox_oldest_due_event_age_seconds, and what is pending,
		 * read from at most CONSOLE_COUNT_CAP rows, the first by the
		 * primary key.  Beyond the cap the rest is taken as dense in
		 * ids (max(id) less the cap's last): pending stays close
		 * enough for the done rate, and the work stays bounded.  An
		 * adopted queue's rows come from a function: counted in
		 * full, as before. */
		if (strcmp(PQgetvalue(res, i, 1), "adopted") == 0)
			snprintf(count, sizeof(count),
				 "SELECT count(*), coalesce(extract(epoch FROM "
				 "now() - min(run_at) FILTER (WHERE run_at <= "
				 "now())), 0) FROM "
				 "pgoutbox.adopted_pending('%s')",
				 name);
		else
			snprintf(count, sizeof(count),
				 "SELECT count(*) + CASE WHEN count(*) < %d "
				 "THEN "
				 "0 ELSE coalesce((SELECT max(id) FROM "
				 "pgoutbox.\"%s\") - max(s.id), 0) END, "
				 "coalesce(extract(epoch FROM now() - "
				 "min(run_at) FILTER (WHERE run_at <= now())), "
				 "0) FROM (SELECT id, run_at FROM "
				 "pgoutbox.\"%s\" ORDER BY id LIMIT %d) s",
				 CONSOLE_COUNT_CAP, name, name,
				 CONSOLE_COUNT_CAP);
		if (!(n = console_query(c, count, 0, NULL, why, sizeof(why))))
			continue;
		snprintf(q->name, sizeof(q->name), "%s", name);
		q->produced = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		q->dead = strtoll(PQgetvalue(res, i, 3), NULL, 10);
		q->wal = *PQgetvalue(res, i, 4) == 't';
		q->slot_bytes = strtod(PQgetvalue(res, i, 5), NULL);
		q->slot_s = strtod(PQgetvalue(res, i, 6), NULL);
		q->pending = strtoll(PQgetvalue(n, 0, 0), NULL, 10);
		q->lag_s = strtod(PQgetvalue(n, 0, 1), NULL);
		PQclear(n);
		s.nq++;
	}
	PQclear(res);
	if ((n = console_query(c, xmin_sql, 0, NULL, why, sizeof(why)))) {
		s.xmin_s = strtod(PQgetvalue(n, 0, 0), NULL);
		PQclear(n);
	}
	s.at = wall_ms();
	c->db->ring[c->db->ring_next] = s;
	c->db->ring_next = (c->db->ring_next + 1) % SAMPLES;
}

void console_sample_take(pgo_console_t *c)
{
	console_db_t *was = c->db;

	/* One after the other: a database down costs its turn only (a
	 * refused connection at once, one that does not answer its
	 * connect_timeout, then no try before its backoff is over). */
	for (int i = 0; i < c->ndb; i++) {
		c->db = &c->dbs[i];
		sample_db(c);
	}
	c->db = was;
}

static const sample_q_t *find_q(const sample_t *s, const char *name)
{
	for (int i = 0; i < s->nq; i++)
		if (strcmp(s->q[i].name, name) == 0)
			return &s->q[i];
	return NULL;
}

/* `,"key":[...]` of one queue's level (lag, slot) at each sample but the
 * first, as the rates are; null where a sample lacks the queue. */
static void levels(pgo_buf_t *b, const char *key, const sample_t *const *order,
		   int n, const char *name, int which)
{
	pgo_buf_printf(b, ",\"%s\":[", key);
	for (int i = 1; i < n; i++) {
		const sample_q_t *z = find_q(order[i], name);

		pgo_buf_puts(b, i > 1 ? "," : "");
		if (!z)
			pgo_buf_puts(b, "null");
		else
			pgo_buf_printf(b, "%.2f",
				       which == 0   ? z->lag_s
				       : which == 1 ? z->slot_bytes
						    : z->slot_s);
	}
	pgo_buf_puts(b, "]");
}

void console_series_json(const pgo_console_t *c, pgo_buf_t *b)
{
	const sample_t *order[SAMPLES], *last = NULL;
	int n = 0;

	/* Oldest first; a gap (PostgreSQL down) simply has no sample. */
	for (int i = 0; i < SAMPLES; i++) {
		const sample_t *s =
			&c->db->ring[(c->db->ring_next + i) % SAMPLES];

		if (s->at)
			order[n++] = s;
	}
	if (n)
		last = order[n - 1];
	pgo_buf_printf(b, "{\"every_s\":%d,\"t\":[", SAMPLE_EVERY_S);
	for (int i = 1; i < n; i++)
		pgo_buf_printf(b, "%s%lld", i > 1 ? "," : "",
			       (long long)order[i]->at);
	pgo_buf_puts(b, "],\"xmin_s\":[");
	for (int i = 1; i < n; i++)
		pgo_buf_printf(b, "%s%.2f", i > 1 ? "," : "", order[i]->xmin_s);
	pgo_buf_puts(b, "],\"queues\":{");
	for (int k = 0; last && k < last->nq; k++) {
		const char *name = last->q[k].name;

		pgo_buf_puts(b, k ? "," : "");
		pgo_buf_json_str(b, name);
		for (int dir = 0; dir < 2; dir++) {
			pgo_buf_puts(b, dir ? "],\"out\":[" : ":{\"in\":[");
			for (int i = 1; i < n; i++) {
				const sample_q_t *a = find_q(order[i - 1],
							     name),
						 *z = find_q(order[i], name);
				double secs = (double)(order[i]->at -
						       order[i - 1]->at) /
					      1000.0;
				double v = 0;

				if (a && z && secs > 0) {
					int64_t in = z->produced - a->produced;

					v = dir ? (double)(in -
							   (z->pending -
							    a->pending) -
							   (z->dead - a->dead))
						: (double)in;
					v = v < 0 ? 0 : v / secs;
				}
				pgo_buf_printf(b, "%s%.2f", i > 1 ? "," : "",
					       v);
			}
		}
		pgo_buf_puts(b, "]");
		levels(b, "lag", order, n, name, 0);
		if (last->q[k].wal) {
			levels(b, "slot_bytes", order, n, name, 1);
			levels(b, "slot_s", order, n, name, 2);
		}
		pgo_buf_puts(b, "}");
	}
	pgo_buf_puts(b, "}}");
}
