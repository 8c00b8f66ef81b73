/*
 * producer.c — writing events inside the caller's transaction.
 *
 * pgo_send() runs a prepared INSERT on the caller's connection, so the
 * event commits or rolls back with the caller's business rows; the
 * statement trigger on the queue table issues the wake-up NOTIFY, which
 * PostgreSQL delivers only at COMMIT.  pgo_send_bulk() streams many events
 * through one COPY, which fires the same statement trigger once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"

struct pgo_producer {
	PGconn *conn;	  /* borrowed from the caller */
	char queue[64];	  /* validated identifier */
	char stmt[96];	  /* prepared statement name on conn */
	bool checked;	  /* the queue is an outbox (looked up once) */
	bool may_insert;  /* the role may INSERT into its table (and the
			   * queue is captured by it, not the WAL) */
	bool prepared;	  /* stmt known to exist on conn */
	pgo_buf_t copy;	  /* COPY data being assembled */
	char errmsg[512]; /* last error */
};

static int fail(pgo_producer_t *p, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(pgo_producer_t *p, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->errmsg, sizeof(p->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

pgo_producer_t *pgo_producer_new(PGconn *conn, const char *queue,
				 pgo_error_t *err)
{
	pgo_producer_t *p;

	if (!queue)
		queue = "outbox";
	if (!conn) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no connection given");
		return NULL;
	}
	if (pgo_ident_check(queue, err) != PGO_OK)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	p->conn = conn;
	snprintf(p->queue, sizeof(p->queue), "%s", queue);
	snprintf(p->stmt, sizeof(p->stmt), "pgoutbox_send_%s", queue);
	pgo_buf_init(&p->copy);
	pgo_error_clear(err);
	return p;
}

void pgo_producer_destroy(pgo_producer_t *p)
{
	if (!p)
		return;
	pgo_buf_free(&p->copy);
	free(p);
}

const char *pgo_producer_errmsg(const pgo_producer_t *p)
{
	return p ? p->errmsg : "no producer";
}

/* Checks what can be checked without a round trip. */
static int check_msg(pgo_producer_t *p, const pgo_msg_t *m, size_t i)
{
	size_t n;

	if (!m->topic || !*m->topic)
		return fail(p, PGO_ERR_INVALID, "event %zu: topic is empty", i);
	if (!m->type)
		return fail(p, PGO_ERR_INVALID, "event %zu: type is NULL", i);
	if (!m->payload)
		return fail(p, PGO_ERR_INVALID,
			    "event %zu: payload is NULL (send \"null\")", i);
	n = strlen(m->payload);
	if (n > PGO_MAX_PAYLOAD)
		return fail(p, PGO_ERR_INVALID,
			    "event %zu: payload is %zu bytes, the limit is %d",
			    i, n, PGO_MAX_PAYLOAD);
	{
		const struct {
			const char *what, *text;
			size_t max;
		} caps[] = {{"topic", m->topic, PGO_MAX_TOPIC},
			    {"type", m->type, PGO_MAX_TYPE},
			    {"key", m->key, PGO_MAX_KEY},
			    {"headers", m->headers, PGO_MAX_HEADERS}};

		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
			if (caps[c].text &&
			    (n = strlen(caps[c].text)) > caps[c].max)
				return fail(p, PGO_ERR_INVALID,
					    "event %zu: %s is %zu bytes, the "
					    "limit is %zu",
					    i, caps[c].what, n, caps[c].max);
	}
	return PGO_OK;
}

/* Looks the queue up once: it must be an outbox (pgoutbox.outbox, or one
 * made with `queue create --kind outbox`), not a work queue or an adopted
 * table; and whether the role may INSERT into it (never into a queue
 * captured through the WAL: its events are messages that send_to()
 * writes, docs/wal.md).  The lookups
 * (queue_kind(), which any role may call, and the privilege of a table
 * found by to_regclass) cannot fail the caller's transaction the way a
 * privilege check of a missing table would.  what: "send" or
 * "send_bulk", for the message. */
static int check_queue(pgo_producer_t *p, const char *what)
{
	const char *params[1] = {p->queue};
	PGresult *res;
	const char *kind;

	if (p->checked)
		return PGO_OK;
	res = PQexecParams(p->conn,
			   "SELECT pgoutbox.queue_kind($1), "
			   "coalesce(has_table_privilege(to_regclass("
			   "format('pgoutbox.%I', $1::text)), 'INSERT'), "
			   "true) AND pgoutbox.queue_capture($1) IS "
			   "DISTINCT FROM 'wal'",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fail(p, PGO_ERR_DB, "%s: %s", what, pgo_pq_msg(p->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	kind = PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
	if (!kind || strcmp(kind, "outbox") != 0) {
		if (!kind)
			fail(p, PGO_ERR_INVALID,
			     "%s: no outbox queue named \"%s\" in this "
			     "database (create it with `pgoutbox queue create "
			     "--kind outbox %s`)",
			     what, p->queue, p->queue);
		else if (strcmp(kind, "work") == 0)
			fail(p, PGO_ERR_INVALID,
			     "%s: queue \"%s\" is a work queue, not an "
			     "outbox: enqueue its jobs (pgoutbox queue enqueue "
			     "%s, or pgoutbox.enqueue() in SQL)",
			     what, p->queue, p->queue);
		else
			fail(p, PGO_ERR_INVALID,
			     "%s: queue \"%s\" is an adopted table, not an "
			     "outbox of pgoutbox: write its rows into that "
			     "table",
			     what, p->queue);
		PQclear(res);
		return PGO_ERR_INVALID;
	}
	p->may_insert = PQgetvalue(res, 0, 1)[0] == 't';
	p->checked = true;
	PQclear(res);
	return PGO_OK;
}

/* Makes sure the send is prepared on this connection: an INSERT into the
 * queue table, or, for a role that may not insert there (the documented
 * producer role may only EXECUTE pgoutbox.send or pgoutbox.send_to,
 * SECURITY DEFINER functions), a call of one of them.  The lookup of
 * pg_prepared_statements cannot fail the caller's transaction the way a
 * blind EXECUTE of a missing statement would. */
static int ensure_prepared(pgo_producer_t *p)
{
	const char *params[1] = {p->stmt};
	char sql[256];
	PGresult *res;
	bool exists;
	int rc;

	if (p->prepared)
		return PGO_OK;
	rc = check_queue(p, "send");
	if (rc != PGO_OK)
		return rc;
	res = PQexecParams(
		p->conn,
		"SELECT EXISTS (SELECT 1 FROM pg_prepared_statements "
		"WHERE name = $1)",
		1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fail(p, PGO_ERR_DB, "send: %s", pgo_pq_msg(p->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	exists = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (!exists) {
		if (p->may_insert)
			snprintf(sql, sizeof(sql),
				 "INSERT INTO pgoutbox.\"%s\" "
				 "(topic, key, type, payload, headers) "
				 "VALUES ($1, $2, $3, $4::jsonb, "
				 "coalesce($5::jsonb, '{}')) RETURNING id",
				 p->queue);
		else if (strcmp(p->queue, "outbox") == 0)
			snprintf(sql, sizeof(sql),
				 "SELECT pgoutbox.send($1, $2, $3, $4::jsonb, "
				 "coalesce($5::jsonb, '{}'))");
		else /* a validated identifier: safe inside quotes */
			snprintf(sql, sizeof(sql),
				 "SELECT pgoutbox.send_to('%s', $1, $2, $3, "
				 "$4::jsonb, coalesce($5::jsonb, '{}'))",
				 p->queue);
		res = PQprepare(p->conn, p->stmt, sql, 5, NULL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fail(p, PGO_ERR_DB, "send: preparing: %s",
			     pgo_pq_msg(p->conn, res));
			PQclear(res);
			return PGO_ERR_DB;
		}
		PQclear(res);
	}
	p->prepared = true;
	return PGO_OK;
}

int pgo_send(pgo_producer_t *p, const pgo_msg_t *caller_msg, int64_t *id)
{
	pgo_msg_t full = {0}; /* the caller's; absent fields NULL */
	const pgo_msg_t *msg = &full;
	const char *params[5];
	pgo_error_t err;
	PGresult *res;
	int rc;

	if (!p || !caller_msg)
		return PGO_ERR_INVALID;
	if (pgo_abi_copy(PGO_ABI_MSG, &full, caller_msg, &err) != PGO_OK)
		return fail(p, PGO_ERR_INVALID, "send: %s", err.msg);
	rc = check_msg(p, msg, 0);
	if (rc != PGO_OK)
		return rc;
	rc = ensure_prepared(p);
	if (rc != PGO_OK)
		return rc;
	params[0] = msg->topic;
	params[1] = msg->key;
	params[2] = msg->type;
	params[3] = msg->payload;
	params[4] = msg->headers;
	res = PQexecPrepared(p->conn, p->stmt, 5, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fail(p, PGO_ERR_DB, "send: %s", pgo_pq_msg(p->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	if (id)
		*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	p->errmsg[0] = '\0';
	return PGO_OK;
}

/* Appends one COPY text-format field: backslash escapes, \N for NULL. */
static void copy_field(pgo_buf_t *b, const char *s, char end)
{
	if (!s) {
		pgo_buf_append(b, "\\N", 2);
	} else {
		const char *run = s;

		for (; *s; s++) {
			const char *esc = NULL;

			switch (*s) {
			case '\\': esc = "\\\\"; break;
			case '\t': esc = "\\t"; break;
			case '\n': esc = "\\n"; break;
			case '\r': esc = "\\r"; break;
			default: continue;
			}
			pgo_buf_append(b, run, (size_t)(s - run));
			pgo_buf_append(b, esc, 2);
			run = s + 1;
		}
		pgo_buf_append(b, run, (size_t)(s - run));
	}
	pgo_buf_append(b, &end, 1);
}

/* Drains the results of a COPY that failed or finished. */
static int copy_finish(pgo_producer_t *p, int rc)
{
	PGresult *res;

	while ((res = PQgetResult(p->conn)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK && rc == PGO_OK)
			rc = fail(p, PGO_ERR_DB, "send_bulk: %s",
				  pgo_pq_msg(p->conn, res));
		PQclear(res);
	}
	return rc;
}

/* Element i of a caller's array whose elements are stride bytes apart:
 * in place when the caller's pgo_msg_t is this build's, else copied into
 * *tmp with the fields an older one lacks NULL. */
static const pgo_msg_t *msg_at(const pgo_msg_t *msgs, size_t i, size_t stride,
			       pgo_msg_t *tmp)
{
	const char *elem = (const char *)msgs + i * stride;

	if (stride == sizeof(pgo_msg_t))
		return (const pgo_msg_t *)elem;
	memset(tmp, 0, sizeof(*tmp));
	memcpy(tmp, elem, stride < sizeof(*tmp) ? stride : sizeof(*tmp));
	return tmp;
}

/* pgo_send_bulk() for a role that may not insert into the queue's table
 * (the README's producer role): one call of pgoutbox.send_batch() or
 * send_batch_to() with the events as arrays, all or none as the COPY.
 * Without headers their array is NULL (send_batch gives '{}'). */
static int bulk_call(pgo_producer_t *p, const pgo_msg_t *msgs, size_t n,
		     size_t stride, bool headers)
{
	bool to = strcmp(p->queue, "outbox") != 0;
	pgo_buf_t arr[5]; /* topics, keys, types, payloads, headers */
	const char *params[6];
	PGresult *res;
	pgo_msg_t tmp;
	bool oom = false;
	int rc = PGO_OK, np = 0;

	for (int f = 0; f < 5; f++) {
		pgo_buf_init(&arr[f]);
		pgo_buf_puts(&arr[f], "{");
	}
	for (size_t i = 0; i < n; i++) {
		const pgo_msg_t *m = msg_at(msgs, i, stride, &tmp);
		const char *v[5] = {m->topic, m->key, m->type, m->payload,
				    m->headers};

		for (int f = 0; f < 5; f++) {
			if (i)
				pgo_buf_puts(&arr[f], ",");
			pgo_buf_array_elem(&arr[f], v[f]);
		}
	}
	if (to)
		params[np++] = p->queue;
	for (int f = 0; f < 5; f++) {
		pgo_buf_puts(&arr[f], "}");
		oom = oom || arr[f].oom;
		params[np++] = f < 4 || headers ? arr[f].data : NULL;
	}
	if (oom) {
		rc = fail(p, PGO_ERR_NOMEM, "send_bulk: out of memory");
	} else {
		res = PQexecParams(
			p->conn,
			to ? "SELECT cardinality(pgoutbox.send_batch_to($1, "
			     "$2::text[], $3::text[], $4::text[], $5::jsonb[], "
			     "$6::jsonb[]))"
			   : "SELECT cardinality(pgoutbox.send_batch("
			     "$1::text[], $2::text[], $3::text[], $4::jsonb[], "
			     "$5::jsonb[]))",
			np, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			rc = fail(p, PGO_ERR_DB, "send_bulk: %s",
				  pgo_pq_msg(p->conn, res));
		PQclear(res);
	}
	for (int f = 0; f < 5; f++)
		pgo_buf_free(&arr[f]);
	if (rc == PGO_OK)
		p->errmsg[0] = '\0';
	return rc;
}

int pgo_send_bulk(pgo_producer_t *p, const pgo_msg_t *msgs, size_t n)
{
	char sql[160];
	PGresult *res;
	pgo_error_t err;
	pgo_msg_t tmp;
	size_t stride;
	int rc = PGO_OK;
	bool headers = false;

	if (!p || (!msgs && n))
		return PGO_ERR_INVALID;
	if (n == 0)
		return PGO_OK;
	/* The array's step is the size its elements carry: all the same. */
	memcpy(&stride, msgs, sizeof(stride));
	if (pgo_abi_check(PGO_ABI_MSG, stride, &err) != PGO_OK)
		return fail(p, PGO_ERR_INVALID, "send_bulk: event 0: %s",
			    err.msg);
	for (size_t i = 0; i < n; i++) {
		const pgo_msg_t *m = msg_at(msgs, i, stride, &tmp);

		if (m->size != stride)
			return fail(p, PGO_ERR_INVALID,
				    "send_bulk: event %zu: pgo_msg_t.size is "
				    "%zu, event 0's is %zu: set .size = "
				    "sizeof(pgo_msg_t) in every element",
				    i, m->size, stride);
		rc = check_msg(p, m, i);
		if (rc != PGO_OK)
			return rc;
		if (m->headers)
			headers = true;
	}
	rc = check_queue(p, "send_bulk");
	if (rc != PGO_OK)
		return rc;
	if (!p->may_insert)
		return bulk_call(p, msgs, n, stride, headers);
	/* Without any headers the column is left to its default ('{}'), a
	 * constant: the server then parses one JSON value per row, not two. */
	snprintf(sql, sizeof(sql),
		 "COPY pgoutbox.\"%s\" (topic, key, type, payload%s) "
		 "FROM STDIN",
		 p->queue, headers ? ", headers" : "");
	res = PQexec(p->conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN) {
		fail(p, PGO_ERR_DB, "send_bulk: %s", pgo_pq_msg(p->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	PQclear(res);
	pgo_buf_reset(&p->copy);
	for (size_t i = 0; i < n && rc == PGO_OK; i++) {
		const pgo_msg_t *m = msg_at(msgs, i, stride, &tmp);

		copy_field(&p->copy, m->topic, '\t');
		copy_field(&p->copy, m->key, '\t');
		copy_field(&p->copy, m->type, '\t');
		if (headers) {
			copy_field(&p->copy, m->payload, '\t');
			copy_field(&p->copy, m->headers ? m->headers : "{}",
				   '\n');
		} else {
			copy_field(&p->copy, m->payload, '\n');
		}
		if (p->copy.oom)
			rc = fail(p, PGO_ERR_NOMEM, "send_bulk: out of memory");
		else if (p->copy.len >= 256 * 1024 || i + 1 == n) {
			if (PQputCopyData(p->conn, p->copy.data,
					  (int)p->copy.len) != 1)
				rc = fail(p, PGO_ERR_DB, "send_bulk: %s",
					  pgo_pq_msg(p->conn, NULL));
			pgo_buf_reset(&p->copy);
		}
	}
	if (PQputCopyEnd(p->conn, rc == PGO_OK ? NULL : p->errmsg) != 1 &&
	    rc == PGO_OK)
		rc = fail(p, PGO_ERR_DB, "send_bulk: %s",
			  pgo_pq_msg(p->conn, NULL));
	rc = copy_finish(p, rc);
	if (p->copy.cap > 1024 * 1024)
		pgo_buf_free(&p->copy);
	if (rc == PGO_OK)
		p->errmsg[0] = '\0';
	return rc;
}
