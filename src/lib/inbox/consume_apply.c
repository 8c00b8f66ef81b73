/*
 * consume_apply.c — one stream entry applied exactly once: BEGIN, the
 * inbox claim of its event id, the handler (exec command, C callback or
 * SQL function) when the claim is fresh, COMMIT.  A duplicate commits
 * nothing new; a failure rolls back.  The SQL handler's four statements
 * go as one pipeline.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inbox/consumer_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "loop/loop.h"
#include "loop/proc.h"
#include "pgoutbox.h"

/* Whether id is an event id as the relay writes it (a decimal bigint
 * without leading zeros): then it is a JSON number, as in the relay's
 * NDJSON; any other message id (another producer's) stays a string. */
static bool id_is_number(const char *id)
{
	size_t n = strspn(id, "0123456789");

	return n > 0 && id[n] == '\0' && (n == 1 || id[0] != '0') &&
	       (n < 19 || (n == 19 && strcmp(id, "9223372036854775807") <= 0));
}

/* The message JSON the exec handler reads on stdin. */
static void message_json(pgo_buf_t *b, const pgo_inbox_msg_t *m)
{
	pgo_buf_reset(b);
	pgo_buf_puts(b, "{\"entry_id\":");
	pgo_buf_json_str(b, m->entry_id);
	pgo_buf_puts(b, ",\"id\":");
	if (id_is_number(m->id))
		pgo_buf_puts(b, m->id);
	else
		pgo_buf_json_str(b, m->id);
	pgo_buf_puts(b, ",\"topic\":");
	pgo_buf_json_str(b, m->topic);
	pgo_buf_puts(b, ",\"key\":");
	pgo_buf_json_str(b, m->key);
	pgo_buf_puts(b, ",\"type\":");
	pgo_buf_json_str(b, m->type);
	pgo_buf_puts(b, ",\"payload\":");
	pgo_buf_puts(b, *m->payload ? m->payload : "null");
	pgo_buf_puts(b, ",\"headers\":");
	pgo_buf_puts(b, *m->headers ? m->headers : "{}");
	pgo_buf_puts(b, ",\"created_at\":");
	pgo_buf_json_str(b, m->created_at);
	pgo_buf_puts(b, "}\n");
}

static int handle_sql(pgo_consumer_t *c, const pgo_inbox_msg_t *m, char *why,
		      size_t len)
{
	const char *params[1] = {m->payload};
	pgo_pq_wait_t how;
	PGresult *res = pgo_pq_exec(c->pg, c->sql_call, 1, params,
				    pgo_consume_deadline(c), &c->stop, &how);
	int rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : -1;

	if (!res) {
		/* roll_back() sees the connection gone. */
		pgo_consume_pg_failed(c, how);
		snprintf(why, len, "no reply from PostgreSQL");
		return -1;
	}
	if (rc != 0)
		snprintf(why, len, "%s", pgo_pq_msg(c->pg, res));
	PQclear(res);
	return rc;
}

/* The exec handler's run ended. */
static void exec_done(void *arg, const pgo_proc_result_t *res)
{
	pgo_consumer_t *c = arg;

	c->exec_over = true;
	c->exec_rc = -1;
	if (res->end == PGO_PROC_EXITED && res->status == 0)
		c->exec_rc = 0;
	else if (res->end == PGO_PROC_EXITED)
		snprintf(c->exec_why, c->exec_why_len,
			 "command exited with status %d", res->status);
	else if (res->end == PGO_PROC_SIGNALED)
		snprintf(c->exec_why, c->exec_why_len,
			 "command killed by signal %d", res->status);
	else if (res->end == PGO_PROC_TIMED_OUT)
		snprintf(c->exec_why, c->exec_why_len,
			 "command timed out after %" PRId64 " ms",
			 c->exec_timeout_ms);
	else
		snprintf(c->exec_why, c->exec_why_len,
			 "command exit status unknown (child reaped "
			 "elsewhere)");
}

/* Runs sh -c CMD with the message on stdin (stdout and stderr are the
 * consumer's) and waits for it, turning the loop: a stop request does not
 * cut it short. */
static int handle_exec(pgo_consumer_t *c, const pgo_inbox_msg_t *m, char *why,
		       size_t len)
{
	char id_var[160], entry_var[96];
	const char *env[] = {id_var, entry_var, NULL};
	pgo_proc_spec_t spec;
	pgo_proc_t *proc;
	const char *what;
	int rc;

	message_json(&c->json, m);
	if (c->json.oom) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	snprintf(id_var, sizeof(id_var), "PGOUTBOX_MESSAGE_ID=%.120s", m->id);
	snprintf(entry_var, sizeof(entry_var), "PGOUTBOX_ENTRY_ID=%s",
		 m->entry_id);
	spec = (pgo_proc_spec_t){
		.command = c->exec_command,
		.env = env,
		.input = c->json.data,
		.input_len = c->json.len,
		.timeout_ms = c->exec_timeout_ms,
		.subject = c->subject,
		.done = exec_done,
		.arg = c,
	};
	c->exec_over = false;
	c->exec_why = why;
	c->exec_why_len = len;
	rc = pgo_proc_start(c->loop, &spec, &proc, &what);
	if (rc != 0) {
		snprintf(why, len, "%s: %s", what, strerror(rc));
		return -1;
	}
	while (!c->exec_over) {
		rc = pgo_loop_run_once(c->loop, 0);
		if (rc < 0) {
			pgo_proc_cancel(proc);
			snprintf(why, len, "poll: %s", strerror(-rc));
			return -1;
		}
	}
	return c->exec_rc;
}

/* Ends the transaction with ROLLBACK, telling a lost connection apart. */
static outcome_t roll_back(pgo_consumer_t *c)
{
	pgo_pq_wait_t how;
	PGresult *res;

	if (!c->pg)
		return DB_LOST; /* dropped already (and said why) */
	if (PQstatus(c->pg) != CONNECTION_OK) {
		pgo_consume_pg_lost(c, "connection lost");
		return DB_LOST;
	}
	res = pgo_pq_exec(c->pg, "ROLLBACK", 0, NULL, pgo_consume_deadline(c),
			  &c->stop, &how);
	if (!res) {
		pgo_consume_pg_failed(c, how);
		return DB_LOST;
	}
	PQclear(res);
	if (PQstatus(c->pg) != CONNECTION_OK) {
		pgo_consume_pg_lost(c, "connection lost");
		return DB_LOST;
	}
	return FAILED;
}

/* After a claim that said fresh or duplicate and a COMMIT. */
static outcome_t committed(pgo_consumer_t *c, const pgo_inbox_msg_t *m,
			   int fresh)
{
	if (!fresh) {
		c->stats.duplicates++;
		pgo_log(PGO_LOG_INFO, c->subject,
			"event %s (entry %s) again: already in the inbox, "
			"skipped",
			m->id, m->entry_id);
		return DONE;
	}
	c->stats.processed++;
	if (c->exit_after_commit && ++c->commits >= c->exit_after_commit)
		return DRILL;
	return DONE;
}

const char *pgo_consume_inbox_key(const pgo_inbox_msg_t *m, char *buf,
				  size_t size)
{
	if (!m->source || !*m->source)
		return m->id;
	snprintf(buf, size, "%s/%s", m->source, m->id);
	return buf;
}

/* The SQL handler in one round trip: BEGIN, the claim (its verdict kept
 * in a transaction-local setting), the handler (its WHERE runs it only
 * for a fresh claim) and COMMIT, as one pipeline.  A failure aborts the
 * statements after it, COMMIT included. */
outcome_t pgo_consume_handle_one_sql(pgo_consumer_t *c,
				     const pgo_inbox_msg_t *m)
{
	static const char *const what[] = {"BEGIN", "inbox claim", "handler",
					   "COMMIT"};
	char key[256];
	const char *claim[2] = {c->group,
				pgo_consume_inbox_key(m, key, sizeof(key))};
	const char *payload[1] = {m->payload};
	char why[512] = "";
	int fresh = 0, idx = 0, failed_at = -1, nulls = 0;
	int64_t deadline = pgo_consume_deadline(c);

	if (!PQenterPipelineMode(c->pg) ||
	    !PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQsendQueryParams(c->pg,
			       "SELECT set_config('pgoutbox.fresh', "
			       "pgoutbox.inbox_claim($1, $2)::text, true)",
			       2, NULL, claim, NULL, NULL, 0) ||
	    !PQsendQueryParams(c->pg, c->sql_gated, 1, NULL, payload, NULL,
			       NULL, 0) ||
	    !PQsendQueryParams(c->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQpipelineSync(c->pg)) {
		pgo_consume_pg_lost(c, pgo_pq_msg(c->pg, NULL));
		return DB_LOST;
	}
	for (;;) {
		pgo_pq_wait_t how = pgo_pq_await(c->pg, deadline, &c->stop);
		PGresult *r;
		ExecStatusType st;

		/* A hung server or path: the transaction rolls back with the
		 * session, the message comes again (the inbox drops it if its
		 * COMMIT did go through). */
		if (how != PGO_PQ_READY) {
			pgo_consume_pg_failed(c, how);
			return DB_LOST;
		}
		r = PQgetResult(c->pg);

		if (!r) {
			/* One NULL ends each statement; two in a row: the
			 * connection has nothing more to give. */
			if (++nulls > 1) {
				pgo_consume_pg_lost(
					c, "connection lost in a pipeline");
				return DB_LOST;
			}
			continue;
		}
		nulls = 0;
		st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			if (failed_at < 0 && st != PGRES_PIPELINE_ABORTED) {
				failed_at = idx < 4 ? idx : 3;
				snprintf(why, sizeof(why), "%s",
					 pgo_pq_msg(c->pg, r));
			}
		} else if (idx == 1 && PQntuples(r) == 1) {
			fresh = strcmp(PQgetvalue(r, 0, 0), "true") == 0;
		}
		PQclear(r);
		idx++;
	}
	if (!PQexitPipelineMode(c->pg) || PQstatus(c->pg) != CONNECTION_OK) {
		pgo_consume_pg_lost(c, "connection lost");
		return DB_LOST;
	}
	if (failed_at >= 0) {
		if (failed_at == 2)
			pgo_log(PGO_LOG_WARN, c->subject,
				"event %s (entry %s): handler failed: %s",
				m->id, m->entry_id,
				why[0] ? why : "no reason given");
		else
			pgo_log(PGO_LOG_WARN, c->subject, "event %s: %s: %s",
				m->id, what[failed_at], why);
		c->stats.failed++;
		return roll_back(c);
	}
	return committed(c, m, fresh);
}

/* BEGIN; claim; handler; COMMIT. */
outcome_t pgo_consume_handle_one(pgo_consumer_t *c, const pgo_inbox_msg_t *m)
{
	pgo_error_t err;
	pgo_pq_wait_t how;
	char why[512] = "";
	int fresh = 0, rc;
	PGresult *res;

	if (!pgo_consume_pg_cmd(c, "BEGIN"))
		return roll_back(c);
	char key[256];

	if (pgo_inbox_claim_within(c->pg, c->group,
				   pgo_consume_inbox_key(m, key, sizeof(key)),
				   &fresh, &err, pgo_consume_deadline(c),
				   &c->stop, &how) != PGO_OK) {
		if (how != PGO_PQ_READY) {
			pgo_consume_pg_failed(c, how);
			return DB_LOST;
		}
		pgo_log(PGO_LOG_WARN, c->subject, "%s", err.msg);
		c->stats.failed++;
		return roll_back(c);
	}
	if (fresh) {
		if (c->handler)
			rc = c->handler(c->handler_ctx, c->pg, m, why,
					sizeof(why));
		else if (c->exec_command)
			rc = handle_exec(c, m, why, sizeof(why));
		else
			rc = handle_sql(c, m, why, sizeof(why));
		if (rc != 0 && !c->pg)
			return DB_LOST; /* no reply: dropped, said why */
		if (rc != 0) {
			pgo_log(PGO_LOG_WARN, c->subject,
				"event %s (entry %s): handler failed: %s",
				m->id, m->entry_id,
				why[0] ? why : "no reason given");
			c->stats.failed++;
			return roll_back(c);
		}
	}
	res = pgo_pq_exec(c->pg, "COMMIT", 0, NULL, pgo_consume_deadline(c),
			  &c->stop, &how);
	if (!res) {
		/* Committed or not: the message comes again, and the inbox
		 * tells. */
		pgo_consume_pg_failed(c, how);
		return DB_LOST;
	}
	if (PQresultStatus(res) != PGRES_COMMAND_OK ||
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
		pgo_log(PGO_LOG_WARN, c->subject, "event %s: COMMIT failed: %s",
			m->id, pgo_pq_msg(c->pg, res));
		PQclear(res);
		c->stats.failed++;
		return roll_back(c);
	}
	PQclear(res);
	return committed(c, m, fresh);
}
