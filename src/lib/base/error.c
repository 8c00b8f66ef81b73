/*
 * error.c — error codes and messages: pgo_strerror(), filling a
 * pgo_error_t, the one line a failed libpq call is reported by, the one
 * rule for a retriable PostgreSQL error (SQLSTATE classes), and the
 * blocking statement runner of the operator commands.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "pgoutbox.h"

const char *pgo_strerror(int code)
{
	switch (code) {
	case PGO_OK: return "success";
	case PGO_ERR_NOMEM: return "out of memory";
	case PGO_ERR_INVALID: return "invalid input";
	case PGO_ERR_CONFIG: return "configuration error";
	case PGO_ERR_DB: return "database error";
	case PGO_ERR_SCHEMA: return "schema mismatch";
	case PGO_ERR_SINK: return "sink error";
	case PGO_ERR_IO: return "I/O error";
	case PGO_ERR_CONNECT: return "cannot connect to PostgreSQL";
	case PGO_ERR_AGAIN: return "operation in progress";
	default: return "unknown error";
	}
}

int pgo_error_set(pgo_error_t *err, int code, int retriable, const char *fmt,
		  ...)
{
	if (err) {
		va_list ap;

		err->code = code;
		err->retriable = retriable;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

void pgo_error_clear(pgo_error_t *err)
{
	if (err) {
		err->code = PGO_OK;
		err->retriable = 0;
		err->msg[0] = '\0';
	}
}

const char *pgo_pq_msg(const PGconn *conn, const PGresult *res)
{
	static __thread char line[512];
	const char *m = NULL;
	size_t n;

	if (res)
		m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	if (!m && res)
		m = PQresultErrorMessage(res);
	if ((!m || !*m) && conn)
		m = PQerrorMessage(conn);
	if (!m || !*m)
		m = "unknown error";
	/* libpq messages may span lines ("ERROR:  x\nDETAIL: ..."): keep one.
	 */
	snprintf(line, sizeof(line), "%s", m);
	n = strcspn(line, "\n");
	line[n] = '\0';
	return line;
}

/* The SQLSTATE classes after which the same statement or transaction may
 * succeed when tried again; everything else (22 data, 23 integrity, 42
 * syntax or privilege, 3F no schema, 2x, P0 raised by a function, XX
 * internal...) fails the same way every time. */
static const char *const retriable_classes[] = {
	"08", /* connection exception */
	"40", /* transaction rollback: serialization failure, deadlock */
	"53", /* insufficient resources: disk full, out of memory, too
	       * many connections */
	"57", /* operator intervention: admin shutdown, cannot connect now,
	       * query canceled (57014: statement_timeout) */
	"58", /* system error: I/O error */
};

bool pgo_sqlstate_retriable(const char *sqlstate)
{
	if (!sqlstate || !*sqlstate)
		return true;
	if (strcmp(sqlstate, "55P03") == 0) /* lock_not_available */
		return true;
	for (size_t i = 0;
	     i < sizeof(retriable_classes) / sizeof(retriable_classes[0]); i++)
		if (strncmp(sqlstate, retriable_classes[i], 2) == 0)
			return true;
	return false;
}

bool pgo_pq_retriable(const PGconn *conn, const PGresult *res)
{
	if (!conn || PQstatus(conn) == CONNECTION_BAD || !res)
		return true;
	return pgo_sqlstate_retriable(
		PQresultErrorField(res, PG_DIAG_SQLSTATE));
}

PGresult *pgo_pq_run(PGconn *conn, const char *what, const char *sql, int n,
		     const char *const *params, pgo_error_t *err)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
			      "%s: %s", what, pgo_pq_msg(conn, res));
		PQclear(res);
		return NULL;
	}
	return res;
}
