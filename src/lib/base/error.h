/*
 * error.h — filling a pgo_error_t, the one line a failed libpq call is
 * reported by, and the one rule for "may trying again succeed?" after
 * PostgreSQL failed (SQLSTATE classes), for every module.
 */
#ifndef PGO_BASE_ERROR_H
#define PGO_BASE_ERROR_H

#include <stdbool.h>

#include "pgoutbox.h"

/* Fills err (NULL allowed) and returns code, so callers can
 * `return pgo_error_set(err, PGO_ERR_INVALID, 0, "...")`. */
int pgo_error_set(pgo_error_t *err, int code, int retriable, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));
void pgo_error_clear(pgo_error_t *err);
/* The primary message of a failed result or connection, one line. */
const char *pgo_pq_msg(const PGconn *conn, const PGresult *res);
/* Runs one statement with text parameters on a blocking connection (the
 * operator commands); NULL with err filled (what: the step, in the
 * message; retriable by the one rule) on an error. */
PGresult *pgo_pq_run(PGconn *conn, const char *what, const char *sql, int n,
		     const char *const *params, pgo_error_t *err);
/* The one rule for "may trying again succeed?" after PostgreSQL failed,
 * for every module (a pgo_error_t's retriable, whether an outcome is sent
 * again).  Retriable: a lost connection (conn NULL or CONNECTION_BAD, or
 * no result: libpq ran out of memory or lost the server), an error without
 * a SQLSTATE (libpq's own), and the SQLSTATE classes 08 (connection), 40
 * (serialization failure, deadlock), 53 (insufficient resources), 57
 * (operator intervention: shutdown, statement_timeout's 57014), 58
 * (system error) plus 55P03 (lock_not_available: lock_timeout).  Anything
 * else fails the same way again.  res is the failed result (borrowed). */
bool pgo_pq_retriable(const PGconn *conn, const PGresult *res);
/* The same rule on a SQLSTATE alone (NULL or "": none was given). */
bool pgo_sqlstate_retriable(const char *sqlstate);

#endif /* PGO_BASE_ERROR_H */
