/*
 * wal_adopted.c — an adopted table captured through the WAL
 * (`pgoutbox adopt --capture wal`, docs/adopt.md): the relay streams the
 * table's inserts, not logical messages, so a row the application
 * deletes in the transaction that inserted it is still an event.
 *
 * The table is in the publication pgoutbox_wal, which publishes inserts
 * only; pgoutput sends a Relation message ('R': the table's oid and
 * columns, again after each change of its definition) before the first
 * Insert ('I') of the table in a session and after each change.  Each
 * Insert of the table, its columns as text ('t'; 'n' NULL), becomes a
 * row of its transaction: a JSON object of column name -> text.
 *
 * Before a batch goes to the sink, its rows become events by the map of
 * table-mode adoption (the same SQL expressions, the same NULL rules),
 * in one prepared statement over the plain connection (wal_plain.c),
 * connected, prepared, sent and read without blocking the loop: each
 * row is rebuilt as the table's row type from its columns' text (by
 * name, against the table's columns now: a column added since is NULL
 * in older rows) and the map evaluated over it.  The relay needs no
 * right on the table for that.  A map that no longer fits (a mapped
 * column renamed or dropped), or a row with a column the table has no
 * more, stops the relay with the error: unadopt and adopt again.
 *
 * An insert's values are always whole: PostgreSQL decodes TOASTed values
 * of an insert from the WAL; the unchanged-value marker ('u') belongs to
 * updates only, and one in an insert is logged and taken as NULL.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "relay/wal_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "relay/relay_int.h"

/* The map's statement, prepared once per connection: $1, a JSON array
 * of rows (objects of column -> text); one result row per row, in
 * order: id, topic, key, type, payload, headers, created_at (RFC 3339
 * UTC).  The row is rebuilt through the row type's text input
 * (record_in: every column's own input function, as COPY), the literal
 * made from the table's columns now, in attnum order (read once per
 * statement); and the row's columns the table has no more (renamed or
 * dropped since the row was written), which stop the relay rather than
 * go out as NULL.  The aliases do not shadow the table's columns. */
static const char MAP_SQL[] =
	"WITH pgoutbox_c AS MATERIALIZED (SELECT array_agg(a.attname::text "
	"ORDER BY a.attnum) AS pgoutbox_names FROM pg_catalog.pg_attribute a "
	"WHERE a.attrelid = %s::oid AND a.attnum > 0 AND NOT "
	"a.attisdropped) "
	"SELECT (t.%s)::text, %s, %s, %s, %s, coalesce(%s, '{}'), "
	"to_char(coalesce(%s, now()) AT TIME ZONE 'UTC', "
	"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
	"(SELECT string_agg(k, ', ') FROM jsonb_object_keys("
	"pgoutbox_r.pgoutbox_o) k WHERE k <> ALL(pgoutbox_c.pgoutbox_names)) "
	"FROM pgoutbox_c, jsonb_array_elements($1::jsonb) WITH ORDINALITY "
	"AS pgoutbox_r(pgoutbox_o, pgoutbox_n) "
	"CROSS JOIN LATERAL (SELECT (pgoutbox_s.pgoutbox_row).* FROM "
	"(SELECT ((SELECT '(' || string_agg(CASE WHEN "
	"pgoutbox_r.pgoutbox_o ->> u.pgoutbox_name IS NULL THEN '' ELSE "
	"'\"' || replace(replace(pgoutbox_r.pgoutbox_o ->> u.pgoutbox_name, "
	"'\\', '\\\\'), '\"', '\\\"') || '\"' END, ',' ORDER BY "
	"u.pgoutbox_ord) || ')' FROM unnest(pgoutbox_c.pgoutbox_names) "
	"WITH ORDINALITY u(pgoutbox_name, pgoutbox_ord)))::%s "
	"AS pgoutbox_row OFFSET 0) pgoutbox_s) t "
	"ORDER BY pgoutbox_r.pgoutbox_n";

bool pgo_wal_adopted_init(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;
	pgo_buf_t b;

	w->adopted = true;
	w->relid = (uint32_t)strtoul(pgo_adopted_map(r, PGO_ADOPTED_RELID),
				     NULL, 10);
	pgo_buf_init(&b);
	pgo_buf_printf(&b, MAP_SQL, pgo_adopted_map(r, PGO_ADOPTED_RELID),
		       pgo_adopted_map(r, PGO_ADOPTED_EID),
		       pgo_adopted_map(r, PGO_ADOPTED_TOPIC),
		       pgo_adopted_map(r, PGO_ADOPTED_KEY),
		       pgo_adopted_map(r, PGO_ADOPTED_TYPE),
		       pgo_adopted_map(r, PGO_ADOPTED_PAYLOAD),
		       pgo_adopted_map(r, PGO_ADOPTED_HEADERS),
		       pgo_adopted_map(r, PGO_ADOPTED_CREATED),
		       pgo_adopted_map(r, PGO_ADOPTED_TBL));
	if (b.oom) {
		pgo_buf_free(&b);
		return false;
	}
	w->map_sql = b.data;
	return true;
}

static void cols_free(struct relay_wal *w)
{
	pgo_wal_cols_free(w->cols, w->ncols);
	w->cols = NULL;
	w->ncols = 0;
}

void pgo_wal_adopted_free(struct relay_wal *w)
{
	cols_free(w);
	free(w->map_sql);
	w->map_sql = NULL;
	PQclear(w->plain_res);
	w->plain_res = NULL;
	pgo_buf_free(&w->eval_rows);
}

static uint32_t get32(const char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static uint16_t get16(const char *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return ntohs(v);
}

/* A NUL-terminated string at p, within end: its length, or -1. */
static long str_at(const char *p, const char *end)
{
	const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;

	return nul ? nul - p : -1;
}

void pgo_wal_cols_free(char **cols, size_t ncols)
{
	for (size_t i = 0; cols && i < ncols; i++)
		free(cols[i]);
	free(cols);
}

/* 'R': relid, namespace, name, replica identity, ncols, then per column
 * flags, name, type oid, typmod. */
int pgo_wal_relation(const char *m, size_t len, uint32_t *relid, char ***cols,
		     size_t *ncols)
{
	const char *p = m + 1, *end = m + len;
	char **c;
	uint16_t n;
	long l;

	*cols = NULL;
	*ncols = 0;
	if (len < 5 || m[0] != 'R')
		return -1;
	*relid = get32(p);
	p += 4;
	for (int i = 0; i < 2; i++) { /* namespace, name */
		if ((l = str_at(p, end)) < 0)
			return -1;
		p += l + 1;
	}
	if (end - p < 3)
		return -1;
	n = get16(p + 1);
	p += 3;
	if (!(c = calloc(n ? n : 1, sizeof(*c))))
		return -1;
	for (uint16_t i = 0; i < n; i++) {
		if (end - p < 1 || (l = str_at(p + 1, end)) < 0 ||
		    end - (p + 1 + l + 1) < 8 ||
		    !(c[i] = strndup(p + 1, (size_t)l))) {
			pgo_wal_cols_free(c, i);
			return -1;
		}
		p += 1 + l + 1 + 8;
	}
	*cols = c;
	*ncols = n;
	return 0;
}

/* Appends the JSON string of s[0..n) (PostgreSQL's text has no NUL). */
static void json_str_n(pgo_buf_t *b, const char *s, size_t n)
{
	char *t = strndup(s, n);

	if (!t) {
		b->oom = true;
		return;
	}
	pgo_buf_json_str(b, t);
	free(t);
}

/* 'I': relid, 'N', ncols, then per column 'n' (NULL), 'u' (unchanged:
 * updates only), or 't' (or 'b') with a length and the value. */
int pgo_wal_insert_row(const char *m, size_t len, char *const *cols,
		       size_t ncols, uint32_t *relid, pgo_buf_t *out,
		       size_t *unchanged)
{
	const char *p = m + 1, *end = m + len;
	bool first = true;
	uint16_t n;

	*unchanged = ncols;
	if (len < 8 || m[0] != 'I' || m[5] != 'N')
		return -1;
	*relid = get32(p);
	n = get16(p + 5);
	p += 7;
	pgo_buf_puts(out, "{");
	for (uint16_t i = 0; i < n; i++) {
		char kind;
		uint32_t l = 0;

		if (end - p < 1)
			return -1;
		kind = *p++;
		if (kind == 't' || kind == 'b') {
			if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
				return -1;
			l = get32(p);
			p += 4;
		} else if (kind != 'n' && kind != 'u') {
			return -1;
		}
		if (i < ncols) { /* more than the Relation said: skipped */
			if (!first)
				pgo_buf_puts(out, ",");
			first = false;
			pgo_buf_json_str(out, cols[i]);
			pgo_buf_puts(out, ":");
			if (kind == 't' || kind == 'b')
				json_str_n(out, p, l);
			else
				pgo_buf_puts(out, "null");
			if (kind == 'u' && *unchanged == ncols)
				*unchanged = i;
		}
		p += l;
	}
	pgo_buf_puts(out, "}");
	return 0;
}

/* 'R' of the table: its columns now (again after each change of its
 * definition). */
void pgo_wal_adopted_relation(pgo_relay_t *r, const char *m, size_t len)
{
	struct relay_wal *w = r->wal;
	uint32_t relid = 0;
	char **cols;
	size_t ncols;

	if (len < 5 || get32(m + 1) != w->relid)
		return;
	if (pgo_wal_relation(m, len, &relid, &cols, &ncols) != 0) {
		cols_free(w);
		pgo_log(PGO_LOG_ERROR, r->subject,
			"a Relation message of table %s could not be read: "
			"its inserts cannot be relayed until the next one",
			pgo_adopted_map(r, PGO_ADOPTED_TBL));
		return;
	}
	cols_free(w);
	w->cols = cols;
	w->ncols = ncols;
	/* The table's definition changed (or the stream began): the map's
	 * statement is prepared again, against the table as it is now (a
	 * plan made before would read a renamed column by its number). */
	w->map_stale = true;
	pgo_log(PGO_LOG_DEBUG, r->subject, "table %s: %zu columns",
		pgo_adopted_map(r, PGO_ADOPTED_TBL), w->ncols);
}

/* 'I' of the table: a row of the open transaction. */
void pgo_wal_adopted_insert(pgo_relay_t *r, const char *m, size_t len)
{
	struct relay_wal *w = r->wal;
	wal_txn_t *t = w->cur;
	wal_ev_t *e;
	pgo_buf_t b;
	uint32_t relid = 0;
	size_t unchanged;

	if (len < 8 || get32(m + 1) != w->relid || !t)
		return;
	if (!w->ncols) {
		pgo_log(PGO_LOG_ERROR, r->subject,
			"an insert into %s without its Relation message: not "
			"relayed",
			pgo_adopted_map(r, PGO_ADOPTED_TBL));
		return;
	}
	pgo_buf_init(&b);
	if (pgo_wal_insert_row(m, len, w->cols, w->ncols, &relid, &b,
			       &unchanged) != 0) {
		pgo_buf_free(&b);
		pgo_log(PGO_LOG_ERROR, r->subject,
			"an insert into %s could not be read: not relayed",
			pgo_adopted_map(r, PGO_ADOPTED_TBL));
		return;
	}
	if (unchanged < w->ncols)
		pgo_log(PGO_LOG_ERROR, r->subject,
			"an insert into %s has an unchanged TOAST value in "
			"column %s: taken as NULL",
			pgo_adopted_map(r, PGO_ADOPTED_TBL),
			w->cols[unchanged]);
	if (b.oom) {
		pgo_buf_free(&b);
		pgo_wal_drop(r, "out of memory");
		return;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		wal_ev_t *evs = realloc(t->evs, cap * sizeof(*evs));

		if (!evs) {
			pgo_buf_free(&b);
			pgo_wal_drop(r, "out of memory");
			return;
		}
		t->evs = evs;
		t->cap = cap;
	}
	e = &t->evs[t->n++];
	memset(e, 0, sizeof(*e));
	e->mem = b.data;
	e->row = true;
}

/* One event from result row i: its strings in one block. */
static bool make_event(wal_ev_t *e, PGresult *res, int i)
{
	size_t len[7], total = 0;
	char *mem, *p;
	const char *v[7];

	for (int c = 0; c < 7; c++) {
		v[c] = PQgetvalue(res, i, c);
		len[c] = strlen(v[c]) + 1;
		total += len[c];
	}
	if (!(mem = malloc(total)))
		return false;
	p = mem;
	for (int c = 0; c < 7; c++) {
		memcpy(p, v[c], len[c]);
		v[c] = p;
		p += len[c];
	}
	free(e->mem);
	e->mem = mem;
	e->row = false;
	memset(&e->ev, 0, sizeof(e->ev));
	e->ev.id = strtoll(v[0], NULL, 10);
	e->ev.topic = v[1];
	e->ev.key = PQgetisnull(res, i, 2) ? NULL : v[2];
	e->ev.type = v[3];
	e->ev.payload = v[4];
	e->ev.headers = v[5];
	e->ev.created_at = v[6];
	return true;
}

size_t pgo_wal_adopted_ready(const struct relay_wal *w, size_t k)
{
	size_t ready = 0;

	for (const wal_txn_t *t = w->head; t && ready < k; t = t->next) {
		for (size_t e = 0; e < t->n; e++)
			if (t->evs[e].row)
				return ready;
		ready++;
	}
	return ready;
}

/* The map's result is in: each row of the FIFO, in order, becomes its
 * event.  PGO_OK; PGO_ERR_DB (the connection failed: try again);
 * PGO_ERR_INVALID (w->fatal, errmsg set). */
static int evaluated(pgo_relay_t *r, PGconn *pg, PGresult *res)
{
	struct relay_wal *w = r->wal;
	int n = (int)w->eval_n, i = 0;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == n &&
	    PQnfields(res) == 8)
		for (int j = 0; j < n; j++)
			if (!PQgetisnull(res, j, 7)) {
				snprintf(r->run.errmsg, sizeof(r->run.errmsg),
					 "rows of adopted table %s streamed "
					 "from the WAL have columns the table "
					 "has no more (%s: renamed or dropped "
					 "since they were written): not "
					 "relayed with them as NULL; nothing "
					 "was confirmed past them: "
					 "`pgoutbox unadopt %s` and adopt it "
					 "again (its slot goes: what it kept "
					 "is lost)",
					 pgo_adopted_map(r, PGO_ADOPTED_TBL),
					 PQgetvalue(res, j, 7),
					 pgo_conf_values(r->conf)->queue);
				w->fatal = true;
				return PGO_ERR_INVALID;
			}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != n ||
	    PQnfields(res) != 8) {
		if (PQstatus(pg) != CONNECTION_OK) {
			pgo_log(PGO_LOG_WARN, r->subject,
				"cannot make the events of table %s (%s): "
				"trying again in a second",
				pgo_adopted_map(r, PGO_ADOPTED_TBL),
				pgo_pq_msg(pg, res));
			return PGO_ERR_DB;
		}
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "the map of adopted table %s does not fit its rows "
			 "streamed from the WAL (a mapped column renamed or "
			 "dropped?): %s; nothing was confirmed past them: "
			 "fix the table, or `pgoutbox unadopt %s` and adopt "
			 "it again (its slot goes: what it kept is lost)",
			 pgo_adopted_map(r, PGO_ADOPTED_TBL),
			 pgo_pq_msg(pg, res), pgo_conf_values(r->conf)->queue);
		w->fatal = true;
		return PGO_ERR_INVALID;
	}
	/* The rows sent were the FIFO's first ones; rows only join at its
	 * end, and none leaves before it is an event and acked. */
	for (wal_txn_t *t = w->head; t && i < n; t = t->next)
		for (size_t e = 0; e < t->n && i < n; e++)
			if (t->evs[e].row && !make_event(&t->evs[e], res, i++))
				return PGO_ERR_DB;
	return PGO_OK;
}

/* The map is not prepared on the connection (new, or a Relation came
 * since): PREPARE it, DEALLOCATE first when stale, in one simple query;
 * its result is read as the statement's, then the statement goes.
 * Neither blocks. */
static bool send_prepare(pgo_relay_t *r, PGconn *pg, char *why, size_t size)
{
	struct relay_wal *w = r->wal;
	pgo_buf_t sql;
	bool sent;

	pgo_buf_init(&sql);
	if (w->map_prepared)
		pgo_buf_puts(&sql, "DEALLOCATE pgoutbox_map; ");
	pgo_buf_puts(&sql, "PREPARE pgoutbox_map AS ");
	pgo_buf_puts(&sql, w->map_sql);
	if (sql.oom) {
		pgo_buf_free(&sql);
		snprintf(why, size, "out of memory");
		return false;
	}
	w->map_prepared = false;
	w->map_stale = false;
	sent = pgo_wal_plain_sent(r, pg, PQsendQuery(pg, sql.data), why, size);
	pgo_buf_free(&sql);
	return sent;
}

/* Sends the map's statement over the rows kept in eval_rows: prepared
 * when that worked, else as it is (its error then says why). */
static bool send_map(pgo_relay_t *r, PGconn *pg, char *why, size_t size)
{
	struct relay_wal *w = r->wal;
	const char *param = w->eval_rows.data;

	return pgo_wal_plain_sent(
		r, pg,
		w->map_prepared ? PQsendQueryPrepared(pg, "pgoutbox_map", 1,
						      &param, NULL, NULL, 0)
				: PQsendQueryParams(pg, w->map_sql, 1, NULL,
						    &param, NULL, NULL, 0),
		why, size);
}

static void eval_failed(pgo_relay_t *r, const char *why)
{
	pgo_log(PGO_LOG_WARN, r->subject,
		"cannot make the events of table %s (%s): trying again in a "
		"second",
		pgo_adopted_map(r, PGO_ADOPTED_TBL), why);
}

int pgo_wal_adopted_eval(pgo_relay_t *r, size_t k)
{
	struct relay_wal *w = r->wal;
	pgo_buf_t *rows = &w->eval_rows;
	PGconn *pg;
	char why[256];
	size_t n = 0;
	int rc;

	if (w->eval_busy)
		return PGO_ERR_AGAIN;
	/* Connecting does not block: the loop drives it, and this is asked
	 * again on a later turn. */
	rc = pgo_wal_plain(r, &pg, why, sizeof(why));
	if (rc == PGO_ERR_AGAIN)
		return PGO_ERR_AGAIN;
	if (rc != PGO_OK) {
		eval_failed(r, why);
		return PGO_ERR_DB;
	}
	pgo_buf_free(rows);
	pgo_buf_puts(rows, "[");
	{
		wal_txn_t *t = w->head;

		for (size_t j = 0; j < k && t; j++, t = t->next)
			for (size_t e = 0; e < t->n; e++)
				if (t->evs[e].row) {
					pgo_buf_puts(rows, n++ ? "," : "");
					pgo_buf_puts(rows, t->evs[e].mem);
				}
	}
	pgo_buf_puts(rows, "]");
	if (!n) {
		pgo_buf_free(rows);
		return PGO_OK;
	}
	if (rows->oom) {
		pgo_buf_free(rows);
		eval_failed(r, "out of memory");
		return PGO_ERR_DB;
	}
	/* Neither statement blocks the loop: their results are read by
	 * pgo_wal_adopted_poll() when the socket has them. */
	w->eval_preparing = !w->map_prepared || w->map_stale;
	if (!(w->eval_preparing ? send_prepare(r, pg, why, sizeof(why))
				: send_map(r, pg, why, sizeof(why)))) {
		pgo_buf_free(rows);
		eval_failed(r, why);
		return PGO_ERR_DB;
	}
	w->eval_busy = true;
	w->eval_n = n;
	w->eval_epoch = w->epoch;
	return PGO_ERR_AGAIN;
}

void pgo_wal_adopted_poll(pgo_relay_t *r)
{
	struct relay_wal *w = r->wal;
	PGresult *res;
	char why[256];
	int rc;

	if (!w->eval_busy)
		return;
	rc = pgo_wal_plain_result(r, &res, why, sizeof(why));
	if (rc == PGO_ERR_AGAIN)
		return;
	if (rc == PGO_OK && w->eval_preparing) {
		/* Not prepared (the map does not parse): the statement run as
		 * it is says why. */
		w->map_prepared = PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
		w->eval_preparing = false;
		if (send_map(r, w->dead_pg, why, sizeof(why)))
			return;
		rc = PGO_ERR_DB;
		res = NULL;
	}
	if (rc == PGO_ERR_DB)
		eval_failed(r, why);
	else if (w->eval_epoch == w->epoch) /* else its rows are gone */
		rc = evaluated(r, w->dead_pg, res);
	PQclear(res);
	pgo_buf_free(&w->eval_rows);
	w->eval_busy = false;
	if (rc == PGO_ERR_DB)
		w->pause_until = pgo_now_ms() + 1000;
}
