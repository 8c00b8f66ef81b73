/*
 * inbox.c — the consumer-side inbox from C: claiming a message id inside
 * the caller's transaction, and the partition maintenance that expires old
 * claims.  The logic lives in SQL (sql/003_inbox.sql) so that consumers in
 * any language get the same guarantee; these are thin, checked calls.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "db/conn.h"
#include "inbox/consumer_int.h"
#include "pgoutbox.h"

int pgo_inbox_claim(PGconn *conn, const char *consumer, const char *message_id,
		    int *fresh, pgo_error_t *err)
{
	pgo_pq_wait_t how;

	return pgo_inbox_claim_within(conn, consumer, message_id, fresh, err, 0,
				      NULL, &how);
}

int pgo_inbox_claim_within(PGconn *conn, const char *consumer,
			   const char *message_id, int *fresh, pgo_error_t *err,
			   int64_t deadline, volatile sig_atomic_t *stop,
			   pgo_pq_wait_t *how)
{
	const char *params[2] = {consumer, message_id};
	PGresult *res;
	int rc = PGO_OK;
	char why[128];

	*how = PGO_PQ_READY;

	if (fresh)
		*fresh = 0;
	if (!conn || !consumer || !*consumer || !message_id || !*message_id)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "pgo_inbox_claim: %s must not be empty",
				     !conn		       ? "conn"
				     : !consumer || !*consumer ? "consumer"
							       : "message_id");
	if (PQtransactionStatus(conn) != PQTRANS_INTRANS)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "pgo_inbox_claim must run inside the "
				     "transaction that applies the message "
				     "(BEGIN first)");
	res = pgo_pq_exec(conn, "SELECT pgoutbox.inbox_claim($1, $2)", 2,
			  params, deadline, stop, how);
	if (!res)
		return pgo_error_set(
			err, PGO_ERR_DB, 1, "inbox claim of %.100s: %s",
			message_id,
			pgo_pq_wait_why(conn, *how, 0, why, sizeof(why)));
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
				   "inbox claim of %.100s: %s", message_id,
				   pgo_pq_msg(conn, res));
	} else {
		if (fresh)
			*fresh = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		pgo_error_clear(err);
	}
	PQclear(res);
	return rc;
}

int pgo_inbox_maintain(PGconn *conn, const char *window, int *created,
		       int *dropped, pgo_error_t *err)
{
	const char *params[1] = {window && *window ? window : "7 days"};
	PGresult *res;
	int rc = PGO_OK;

	if (created)
		*created = 0;
	if (dropped)
		*dropped = 0;
	if (!conn || PQtransactionStatus(conn) != PQTRANS_IDLE)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "pgo_inbox_maintain needs an idle "
				     "connection, not one inside a "
				     "transaction");
	/* One statement, so one implicit transaction: the DDL never waits
	 * behind a long transaction for more than the lock timeout. */
	res = PQexec(conn, "SET lock_timeout = '5s'");
	PQclear(res);
	res = PQexecParams(conn,
			   "SELECT created, dropped FROM "
			   "pgoutbox.inbox_maintain($1::interval)",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
				   "inbox maintenance: %s",
				   pgo_pq_msg(conn, res));
	} else {
		if (created)
			*created = atoi(PQgetvalue(res, 0, 0));
		if (dropped)
			*dropped = atoi(PQgetvalue(res, 0, 1));
		pgo_error_clear(err);
	}
	PQclear(res);
	res = PQexec(conn, "RESET lock_timeout");
	PQclear(res);
	return rc;
}
