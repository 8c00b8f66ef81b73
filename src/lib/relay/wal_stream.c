/*
 * wal_stream.c — the WAL relay's replication connection (wal.c has the
 * whole picture, docs/wal.md the why): the slot pgoutbox_<queue>
 * streams with pgoutput (proto_version 1, messages on, the empty
 * publication pgoutbox_wal), on a replication connection
 * (replication=database):
 *
 *   DOWN       no connection; at retry_at: connect (CONNECTING), check
 *              the slot (CHECKING; missing or lost: stop with an error),
 *              START_REPLICATION (STARTING).
 *              A slot another relay streams refuses us: stand by, try
 *              again every second (the slot's active flag elects).
 *   STREAMING  XLogData ('w') carries pgoutput's messages: 'B' opens a
 *              transaction, 'M' is one of its messages (ours by the
 *              prefix), 'R' and 'I' an adopted table's columns and
 *              inserts (wal_adopted.c), 'C' closes it with its end LSN;
 *              the transaction joins the FIFO of committed ones.
 *              Keepalives ('k') carry the server's sent position and
 *              may ask for a reply.
 *
 * The confirmed position wal.c moves goes to the server in standby
 * status updates ('r').
 *
 * Nothing blocks the relay's loop: the connection is made with
 * PQconnectPoll(), the slot's check and START_REPLICATION are sent with
 * PQsendQuery() (CONNECTING, CHECKING, STARTING, bounded together by
 * database.connect_timeout), the stream read with PQconsumeInput() and
 * PQgetCopyData() async.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "relay/wal_int.h"
#include "base/arena.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "relay/wal.h"
#include "sinks/sink_int.h"

/* PostgreSQL's epoch, 2000-01-01, in Unix seconds. */
#define PG_EPOCH_UNIX 946684800LL
/* Events read ahead of the sink at most: past this the stream waits
 * (TCP pushes back on the server's sender). */
#define WAL_READ_AHEAD 20000
/* A standby status update at least this often (ms). */
#define WAL_STATUS_MS 10000

/* --- the replication protocol --- */

static uint64_t get64(const char *p)
{
	uint32_t hi, lo;

	memcpy(&hi, p, 4);
	memcpy(&lo, p + 4, 4);
	return ((uint64_t)ntohl(hi) << 32) | ntohl(lo);
}

static void put64(char *p, uint64_t v)
{
	uint32_t hi = htonl((uint32_t)(v >> 32)), lo = htonl((uint32_t)v);

	memcpy(p, &hi, 4);
	memcpy(p + 4, &lo, 4);
}

static void lsn_text(uint64_t lsn, char out[24])
{
	snprintf(out, 24, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
}

void pgo_wal_set_io(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;
	short ev = 0;

	if (w->state == WAL_STREAMING) {
		if (w->pending < WAL_READ_AHEAD)
			ev |= POLLIN;
		if (PQisnonblocking(w->pg) && PQflush(w->pg) > 0)
			ev |= POLLOUT;
	} else if (w->state != WAL_DOWN) {
		ev = w->want;
		if (w->state != WAL_CONNECTING && PQflush(w->pg) > 0)
			ev |= POLLOUT;
	}
	pgo_loop_io_set(w->io, w->state != WAL_DOWN ? PQsocket(w->pg) : -1, ev);
}

/* The connection is gone: the batch in the sink is cancelled, what was
 * read is dropped (the slot sends it again), connect again in a
 * second. */
void pgo_wal_drop(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (why)
		pgo_log(PGO_LOG_WARN, r->subject,
			"replication stream of slot %s lost (%s): "
			"reconnecting; what was not confirmed comes again",
			w->slot, why);
	if (w->in_sink)
		pgo_sink_cancel(r->sink, &w->batch);
	w->in_sink = false;
	pgo_arena_reset(w->arena);
	pgo_wal_fifo_clear(w);
	w->epoch++; /* a map's result in flight is for rows gone */
	PQfinish(w->pg);
	w->pg = NULL;
	w->state = WAL_DOWN;
	w->retry_at = pgo_now_ms() + 1000;
	w->sent_end = 0;
	r->stats.total.reconnects++;
	pgo_wal_set_io(r);
}

/* Sends a standby status update: written, flushed and applied up to the
 * confirmed position. */
void pgo_wal_send_status(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	char msg[34];
	int64_t pg_us = pgo_wall_us() - PG_EPOCH_UNIX * 1000000LL;

	msg[0] = 'r';
	put64(msg + 1, w->confirmed);
	put64(msg + 9, w->confirmed);
	put64(msg + 17, w->confirmed);
	put64(msg + 25, (uint64_t)pg_us);
	msg[33] = 0;
	if (PQputCopyData(w->pg, msg, sizeof(msg)) <= 0 || PQflush(w->pg) < 0) {
		pgo_wal_drop(r, pgo_pq_msg(w->pg, NULL));
		return;
	}
	w->reported = w->confirmed;
	w->reply = false;
	w->next_status = now + WAL_STATUS_MS;
}

/* One pgoutput message of an XLogData. */
static void on_pgoutput(pgo_relay_t *r, const char *m, size_t len)
{
	struct relay_wal *w = r->wal;

	if (len < 1)
		return;
	switch (m[0]) {
	case 'B':
		if (len < 21)
			return;
		if (w->cur)
			pgo_wal_txn_free(w->cur);
		w->cur = calloc(1, sizeof(*w->cur));
		if (w->cur)
			w->cur->commit_us = (int64_t)get64(m + 9) +
					    PG_EPOCH_UNIX * 1000000LL;
		return;
	case 'C':
		if (len < 26 || !w->cur)
			return;
		w->cur->end_lsn = get64(m + 10);
		/* Sent again after a reconnect (the server starts from the
		 * slot's confirmed position, which PostgreSQL before 17 may
		 * not have kept across its restart), acked by this relay
		 * already: not again. */
		if (w->cur->end_lsn <= w->confirmed) {
			pgo_wal_txn_free(w->cur);
			w->cur = NULL;
			return;
		}
		if (w->tail)
			w->tail->next = w->cur;
		else
			w->head = w->cur;
		w->tail = w->cur;
		w->pending += w->cur->n;
		w->cur = NULL;
		return;
	case 'M': {
		/* flags, lsn, prefix\0, length, content */
		const char *prefix = m + 10, *nul;
		uint32_t n;
		wal_ev_t *e;

		if (len < 15 || !w->cur)
			return;
		nul = memchr(prefix, '\0', len - 10);
		if (!nul || (size_t)(nul + 5 - m) > len ||
		    strcmp(prefix, w->prefix) != 0)
			return;
		memcpy(&n, nul + 1, 4);
		n = ntohl(n);
		if ((size_t)(nul + 5 - m) + n > len)
			return;
		if (w->cur->n == w->cur->cap) {
			size_t cap = w->cur->cap ? w->cur->cap * 2 : 8;
			wal_ev_t *evs =
				realloc(w->cur->evs, cap * sizeof(*evs));

			if (!evs) {
				pgo_wal_drop(r, "out of memory");
				return;
			}
			w->cur->evs = evs;
			w->cur->cap = cap;
		}
		e = &w->cur->evs[w->cur->n];
		memset(e, 0, sizeof(*e));
		if (!pgo_wal_envelope(nul + 5, n, w->cur->commit_us, &e->ev,
				      &e->mem)) {
			pgo_log(PGO_LOG_ERROR, r->subject,
				"a message with prefix %s is not an event's "
				"envelope: skipped (%.*s)",
				w->prefix, (int)(n > 200 ? 200 : n), nul + 5);
			free(e->mem);
			return;
		}
		w->cur->n++;
		return;
	}
	case 'R':
		if (w->adopted)
			pgo_wal_adopted_relation(r, m, len);
		return;
	case 'I':
		if (w->adopted)
			pgo_wal_adopted_insert(r, m, len);
		return;
	default: return; /* types, origins: none of ours */
	}
}

/* Reads what the stream has (up to the read-ahead); false when the
 * connection was dropped. */
bool pgo_wal_read(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	while (w->pending < WAL_READ_AHEAD) {
		char *buf = NULL;
		int n = PQgetCopyData(w->pg, &buf, 1);

		if (n == 0)
			return true;
		if (n < 0) {
			PGresult *res = PQgetResult(w->pg);
			char why[256];

			snprintf(why, sizeof(why), "%s",
				 n == -1 ? (res ? pgo_pq_msg(w->pg, res)
						: "the server ended the stream")
					 : pgo_pq_msg(w->pg, NULL));
			PQclear(res);
			pgo_wal_drop(r, why);
			return false;
		}
		if (buf[0] == 'w' && n >= 25) {
			uint64_t start = get64(buf + 1);

			if (start > w->received)
				w->received = start;
			on_pgoutput(r, buf + 25, (size_t)n - 25);
		} else if (buf[0] == 'k' && n >= 18) {
			uint64_t end = get64(buf + 1);

			if (end > w->sent_end)
				w->sent_end = end;
			if (buf[17])
				w->reply = true;
		}
		PQfreemem(buf);
		if (w->state != WAL_STREAMING)
			return false;
	}
	(void)now;
	return true;
}

/* --- the connection --- */

static void log_down(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (strncmp(w->last_err, why, sizeof(w->last_err) - 1) == 0)
		return;
	snprintf(w->last_err, sizeof(w->last_err), "%s", why);
	pgo_log(PGO_LOG_WARN, r->subject, "slot %s: %s (retrying every second)",
		w->slot, why);
}

static void stand_by(pgo_relay_t *r, const char *why)
{
	struct relay_wal *w = r->wal;

	if (!w->standing_by)
		pgo_log(PGO_LOG_INFO, r->subject,
			"slot %s is streamed by another relay (%s): standing "
			"by, trying every second",
			w->slot, why);
	w->standing_by = true;
}

/* Gives up this attempt: the connection closed, the next in a second. */
static void setup_failed(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;

	PQclear(w->check);
	w->check = NULL;
	PQfinish(w->pg);
	w->pg = NULL;
	w->state = WAL_DOWN;
	w->retry_at = pgo_now_ms() + 1000;
	pgo_wal_set_io(r);
}

void pgo_wal_refused(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;

	w->refused_backoff = w->refused_backoff ? w->refused_backoff * 2 : 1000;
	if (w->refused_backoff > 30000)
		w->refused_backoff = 30000;
	if (strncmp(w->last_err, r->run.errmsg, sizeof(w->last_err) - 1) != 0) {
		snprintf(w->last_err, sizeof(w->last_err), "%s", r->run.errmsg);
		pgo_log(PGO_LOG_ERROR, r->subject,
			"%s (this database only: the others go on; tried "
			"again every %d s at most)",
			r->run.errmsg, 30);
	}
	r->run.errmsg[0] = '\0';
	setup_failed(r);
	w->retry_at = now + w->refused_backoff;
}

const char *pgo_wal_why(const pgo_relay_t *r)
{
	return r->wal->last_err;
}

/* Starts connecting (DOWN -> CONNECTING). */
void pgo_wal_connect(pgo_relay_t *r)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	struct relay_wal *w = r->wal;
	const char *keys[PGO_CONN_KEYS + 1], *vals[PGO_CONN_KEYS + 1];
	char timeout[24];
	/* In a fleet, the addresses its start thread looked up (as its
	 * other sessions'): libpq resolves no name on the loop. */
	int n = pgo_conn_params_resolved(r->conf, r->app_name, r->resolved,
					 keys, vals, timeout);

	keys[n] = "replication";
	vals[n++] = "database";
	keys[n] = NULL;
	vals[n] = NULL;
	w->pg = PQconnectStartParams(keys, vals, 1);
	w->setup_until = pgo_now_ms() +
			 (v->connect_timeout > 0 ? v->connect_timeout : 10000);
	if (!w->pg || PQstatus(w->pg) == CONNECTION_BAD) {
		log_down(r, w->pg ? pgo_pq_msg(w->pg, NULL) : "out of memory");
		setup_failed(r);
		return;
	}
	w->state = WAL_CONNECTING;
	w->want = POLLOUT; /* PQconnectPoll's first wait */
	pgo_wal_set_io(r);
}

/* The slot's check came back (CHECKING): refuse, stand by, or start
 * streaming.  PGO_ERR_INVALID when no retry can help (errmsg set). */
static int checked(pgo_relay_t *r, PGresult *res)
{
	struct relay_wal *w = r->wal;
	char sql[512];

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_down(r, pgo_pq_msg(w->pg, res));
		setup_failed(r);
		return PGO_OK;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "logical") != 0) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "queue %s is captured through the WAL, and this "
			 "server runs wal_level = %s: set wal_level = logical "
			 "(ALTER SYSTEM SET wal_level = logical) and restart "
			 "PostgreSQL",
			 r->queue, PQgetvalue(res, 0, 0));
		return PGO_ERR_INVALID;
	}
	if (PQgetisnull(res, 0, 3)) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "the replication slot %s of queue %s is missing: "
			 "events sent since it went are lost; create it with "
			 "SELECT pg_create_logical_replication_slot('%s', "
			 "'pgoutput') (docs/wal.md)",
			 w->slot, r->queue, w->slot);
		return PGO_ERR_INVALID;
	}
	if (strcmp(PQgetvalue(res, 0, 1), "lost") == 0) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "the replication slot %s of queue %s is lost "
			 "(wal_status lost: max_slot_wal_keep_size removed "
			 "WAL it needed): events in that WAL are gone; drop "
			 "and create the slot again (docs/wal.md, \"A slot "
			 "pins WAL: lag\")",
			 w->slot, r->queue);
		return PGO_ERR_INVALID;
	}
	if (!PQgetisnull(res, 0, 2)) {
		char why[64];

		snprintf(why, sizeof(why), "pid %s", PQgetvalue(res, 0, 2));
		stand_by(r, why);
		setup_failed(r);
		return PGO_OK;
	}
	{
		uint64_t c = strtoull(PQgetvalue(res, 0, 3), NULL, 10);

		if (c > w->confirmed)
			w->confirmed = c;
	}
	snprintf(sql, sizeof(sql),
		 "START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '1', "
		 "publication_names 'pgoutbox_wal', messages 'true')",
		 w->slot);
	if (!PQsendQuery(w->pg, sql)) {
		log_down(r, pgo_pq_msg(w->pg, NULL));
		setup_failed(r);
		return PGO_OK;
	}
	w->state = WAL_STARTING;
	w->want = POLLIN;
	return PGO_OK;
}

/* START_REPLICATION came back (STARTING). */
static void started(pgo_relay_t *r, PGresult *res)
{
	struct relay_wal *w = r->wal;
	char lsn[24];

	if (PQresultStatus(res) != PGRES_COPY_BOTH) {
		const char *msg = pgo_pq_msg(w->pg, res);

		if (strstr(msg, "is active for PID"))
			stand_by(r, msg);
		else
			log_down(r, msg);
		setup_failed(r);
		return;
	}
	w->state = WAL_STREAMING;
	w->standing_by = false;
	w->refused_backoff = 0;
	w->last_err[0] = '\0';
	w->reported = w->confirmed;
	w->next_status = pgo_now_ms() + WAL_STATUS_MS;
	lsn_text(w->confirmed, lsn);
	pgo_log(PGO_LOG_INFO, r->subject, "streaming slot %s from %s", w->slot,
		lsn);
	pgo_wal_set_io(r);
}

/* Drives the connection's setup without blocking: connecting, the
 * slot's check, START_REPLICATION.  PGO_ERR_INVALID when no retry can
 * help (errmsg set). */
int pgo_wal_setup_step(pgo_relay_t *r, int64_t now)
{
	struct relay_wal *w = r->wal;
	PGresult *res;
	int rc = PGO_OK;

	if (now >= w->setup_until) {
		log_down(r, "timed out connecting (database.connect_timeout)");
		setup_failed(r);
		return PGO_OK;
	}
	if (w->state == WAL_CONNECTING) {
		char sql[512];

		switch (PQconnectPoll(w->pg)) {
		case PGRES_POLLING_READING: w->want = POLLIN; return PGO_OK;
		case PGRES_POLLING_WRITING: w->want = POLLOUT; return PGO_OK;
		case PGRES_POLLING_OK: break;
		default:
			log_down(r, pgo_pq_msg(w->pg, NULL));
			setup_failed(r);
			return PGO_OK;
		}
		PQsetnonblocking(w->pg, 1);
		/* Replication connections take the simple protocol only. */
		snprintf(sql, sizeof(sql),
			 "SELECT current_setting('wal_level'), s.wal_status, "
			 "s.active_pid, s.confirmed_flush_lsn - '0/0' "
			 "FROM (SELECT 1) x LEFT JOIN pg_replication_slots s "
			 "ON s.slot_name = '%s' AND s.database = "
			 "current_database()",
			 w->slot);
		if (!PQsendQuery(w->pg, sql)) {
			log_down(r, pgo_pq_msg(w->pg, NULL));
			setup_failed(r);
			return PGO_OK;
		}
		w->state = WAL_CHECKING;
		w->want = POLLIN;
		return PGO_OK;
	}
	/* CHECKING, STARTING: a query in flight. */
	if (!PQconsumeInput(w->pg) || PQflush(w->pg) < 0) {
		log_down(r, pgo_pq_msg(w->pg, NULL));
		setup_failed(r);
		return PGO_OK;
	}
	if (PQisBusy(w->pg))
		return PGO_OK;
	res = PQgetResult(w->pg);
	if (w->state == WAL_STARTING) {
		started(r, res);
		PQclear(res);
		return PGO_OK;
	}
	/* CHECKING: its one result; what follows (NULL) is read at once
	 * when the server's ReadyForQuery is in, else on the next turn. */
	if (res) {
		w->check = res;
		if (PQisBusy(w->pg))
			return PGO_OK;
		res = PQgetResult(w->pg);
	}
	while (res) { /* more than one result: not ours to read */
		PQclear(res);
		if (PQisBusy(w->pg))
			return PGO_OK;
		res = PQgetResult(w->pg);
	}
	res = w->check;
	w->check = NULL;
	rc = checked(r, res);
	PQclear(res);
	return rc;
}

bool pgo_wal_connected(const pgo_relay_t *r)
{
	return r->wal->state == WAL_STREAMING || r->wal->standing_by;
}
