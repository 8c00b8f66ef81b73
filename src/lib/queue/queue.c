/*
 * queue.c — named work queues: creating them, enqueueing jobs inside the
 * caller's transaction, and the operator's commands (list, stats, purge;
 * dead and retry check the queue and call dead.c).
 *
 * The SQL lives in sql/schema/functions/ (create_queue.sql,
 * enqueue.sql); names are checked here with pgo_ident_check() and again
 * in SQL, where they are quoted with format('%I').
 */
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "queue/queue.h"

struct pgo_enqueuer {
	PGconn *conn;	  /* borrowed from the caller */
	char queue[64];	  /* validated identifier */
	bool prepared;	  /* the statement exists on conn */
	char errmsg[512]; /* last error */
};

/* Named for its parameters: a statement of an older library (7
 * parameters: no group, no dependencies) in a pooled session must not be
 * taken for it. */
#define ENQUEUE_STMT "pgoutbox_enqueue_9"

/* True if s is exactly eight digits (a day's YYYYMMDD). */
static bool is_day(const char *s)
{
	int n = 0;

	while (s[n] >= '0' && s[n] <= '9')
		n++;
	return n == 8 && !s[n];
}

int pgo_queue_name_check(const char *name, pgo_error_t *err)
{
	size_t n;

	if (pgo_ident_check(name, err) != PGO_OK)
		return PGO_ERR_INVALID;
	n = strlen(name);
	if ((n >= 8 && strcmp(name + n - 8, "_archive") == 0) ||
	    (n >= 17 && strncmp(name + n - 17, "_archive_", 9) == 0 &&
	     is_day(name + n - 8)) ||
	    (strncmp(name, "inbox_", 6) == 0 && is_day(name + 6)) ||
	    (strncmp(name, "cron_history_", 13) == 0 && is_day(name + 13)))
		return pgo_error_set(
			err, PGO_ERR_INVALID, 0,
			"queue name \"%s\" is reserved: names ending in "
			"_archive or _archive_YYYYMMDD, inbox_YYYYMMDD and "
			"cron_history_YYYYMMDD are those of the archive, inbox "
			"and cron history partitions; choose another name",
			name);
	pgo_error_clear(err);
	return PGO_OK;
}

int pgo_queue_create(PGconn *conn, const char *name, int shards,
		     pgo_error_t *err)
{
	return pgo_queue_create_kind(conn, name, shards, "work", err);
}

int pgo_queue_create_kind(PGconn *conn, const char *name, int shards,
			  const char *kind, pgo_error_t *err)
{
	char nshards[16];
	const char *params[3] = {name, nshards, kind};
	PGresult *res;

	if (pgo_queue_name_check(name, err) != PGO_OK)
		return PGO_ERR_INVALID;
	if (shards < 1 || shards > 4096)
		return pgo_error_set(
			err, PGO_ERR_INVALID, 0,
			"shards must be between 1 and 4096, not %d", shards);
	if (!kind || (strcmp(kind, "work") != 0 && strcmp(kind, "outbox") != 0))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "a queue's kind is work or outbox, not "
				     "\"%s\"",
				     kind ? kind : "(null)");
	snprintf(nshards, sizeof(nshards), "%d", shards);
	/* A work queue through the function older schemas have too. */
	res = pgo_pq_run(conn, "creating the queue",
			 strcmp(kind, "work") == 0
				 ? "SELECT pgoutbox.create_queue($1, "
				   "$2::integer)"
				 : "SELECT pgoutbox.create_queue($1, "
				   "$2::integer, $3)",
			 strcmp(kind, "work") == 0 ? 2 : 3, params, err);
	if (!res)
		return PGO_ERR_DB;
	PQclear(res);
	pgo_error_clear(err);
	return PGO_OK;
}

pgo_enqueuer_t *pgo_enqueuer_new(PGconn *conn, const char *queue,
				 pgo_error_t *err)
{
	pgo_enqueuer_t *q;

	if (!conn) {
		pgo_error_set(err, PGO_ERR_INVALID, 0, "no connection given");
		return NULL;
	}
	if (pgo_ident_check(queue, err) != PGO_OK)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1, "out of memory");
		return NULL;
	}
	q->conn = conn;
	snprintf(q->queue, sizeof(q->queue), "%s", queue);
	pgo_error_clear(err);
	return q;
}

void pgo_enqueuer_destroy(pgo_enqueuer_t *q)
{
	free(q);
}

const char *pgo_enqueuer_errmsg(const pgo_enqueuer_t *q)
{
	return q ? q->errmsg : "no enqueuer";
}

/* Prepares the call on this connection once; a lookup first, since a
 * failed statement would abort the caller's transaction. */
static int ensure_prepared(pgo_enqueuer_t *q)
{
	const char *name = ENQUEUE_STMT;
	PGresult *res;
	bool exists;

	if (q->prepared)
		return PGO_OK;
	res = PQexecParams(
		q->conn, "SELECT 1 FROM pg_prepared_statements WHERE name = $1",
		1, NULL, &name, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(q->errmsg, sizeof(q->errmsg), "enqueue: %s",
			 pgo_pq_msg(q->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	exists = PQntuples(res) > 0;
	PQclear(res);
	if (!exists) {
		res = PQprepare(q->conn, ENQUEUE_STMT,
				"SELECT pgoutbox.enqueue($1, $2::jsonb, "
				"coalesce($3::timestamptz, now()), "
				"$4::integer, $5, coalesce($6, 'job'), $7, "
				"group_key => $8, depends_on => $9::bigint[])",
				9, NULL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(q->errmsg, sizeof(q->errmsg),
				 "enqueue: preparing: %s",
				 pgo_pq_msg(q->conn, res));
			PQclear(res);
			return PGO_ERR_DB;
		}
		PQclear(res);
	}
	q->prepared = true;
	return PGO_OK;
}

/* ids as a bigint[] literal ("{1,2,3}"), malloc'd; NULL when out of
 * memory. */
static char *deps_text(const int64_t *ids, size_t n)
{
	char *s = malloc(n * 21 + 3), *p = s;

	if (!s)
		return NULL;
	*p++ = '{';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%lld", i ? "," : "", (long long)ids[i]);
	*p++ = '}';
	*p = '\0';
	return s;
}

int pgo_enqueue(pgo_enqueuer_t *q, const char *payload,
		const pgo_job_opts_t *job_opts, int64_t *id)
{
	pgo_job_opts_t full = {0}; /* the caller's; absent fields 0 */
	const pgo_job_opts_t *opts = &full;
	const char *params[9];
	char *deps = NULL; /* depends_on as an array literal */
	pgo_error_t err;
	char prio[16];
	PGresult *res;
	int rc;

	if (!q)
		return PGO_ERR_INVALID;
	if (job_opts &&
	    pgo_abi_copy(PGO_ABI_JOB_OPTS, &full, job_opts, &err) != PGO_OK) {
		snprintf(q->errmsg, sizeof(q->errmsg), "enqueue: %.500s",
			 err.msg);
		return PGO_ERR_INVALID;
	}
	if (!payload) {
		snprintf(q->errmsg, sizeof(q->errmsg),
			 "enqueue: payload is NULL (send \"null\")");
		return PGO_ERR_INVALID;
	}
	if (strlen(payload) > PGO_MAX_PAYLOAD) {
		snprintf(q->errmsg, sizeof(q->errmsg),
			 "enqueue: payload is %zu bytes, the limit is %d",
			 strlen(payload), PGO_MAX_PAYLOAD);
		return PGO_ERR_INVALID;
	}
	if (opts->n_depends_on > 10000 ||
	    (opts->n_depends_on > 0 && !opts->depends_on)) {
		snprintf(q->errmsg, sizeof(q->errmsg),
			 "enqueue: depends_on must hold n_depends_on ids, at "
			 "most 10000 (%zu given)",
			 opts->n_depends_on);
		return PGO_ERR_INVALID;
	}
	rc = ensure_prepared(q);
	if (rc != PGO_OK)
		return rc;
	snprintf(prio, sizeof(prio), "%d", opts->priority);
	params[0] = q->queue;
	params[1] = payload;
	params[2] = opts->run_at;
	params[3] = prio;
	params[4] = opts->unique_key;
	params[5] = opts->topic;
	params[6] = opts->key;
	params[7] = opts->group_key;
	params[8] = NULL;
	if (opts->n_depends_on > 0) {
		deps = deps_text(opts->depends_on, opts->n_depends_on);
		if (!deps) {
			snprintf(q->errmsg, sizeof(q->errmsg),
				 "enqueue: out of memory");
			return PGO_ERR_NOMEM;
		}
		params[8] = deps;
	}
	res = PQexecPrepared(q->conn, ENQUEUE_STMT, 9, params, NULL, NULL, 0);
	free(deps);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(q->errmsg, sizeof(q->errmsg), "enqueue: %s",
			 pgo_pq_msg(q->conn, res));
		PQclear(res);
		return PGO_ERR_DB;
	}
	if (id)
		*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	q->errmsg[0] = '\0';
	return PGO_OK;
}

/* --- operator commands --- */

int pgo_queue_list(PGconn *conn, FILE *out, pgo_error_t *err)
{
	PGresult *res =
		pgo_pq_run(conn, "queue list",
			   "SELECT q.name, q.kind, q.shards, "
			   "(SELECT count(*) FROM pgoutbox.dead_letters d "
			   "  WHERE d.queue = q.name) "
			   "FROM pgoutbox.queues q ORDER BY q.name",
			   0, NULL, err);

	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "%-32s %-7s %7s %9s %7s %5s\n", "QUEUE", "KIND", "PENDING",
		"RUNNING", "DEAD", "SHARDS");
	for (int i = 0; i < PQntuples(res); i++) {
		const char *name = PQgetvalue(res, i, 0);
		const char *kind = PQgetvalue(res, i, 1);
		bool work = strcmp(kind, "work") == 0;
		char sql[512];
		PGresult *c;

		if (pgo_ident_check(name, NULL) != PGO_OK)
			continue;
		/* An adopted table lives in the application's schema: its
		 * pending rows come through the map (sql/013_adopt.sql). */
		if (strcmp(kind, "adopted") == 0)
			snprintf(sql, sizeof(sql),
				 "SELECT count(*), NULL FROM "
				 "pgoutbox.adopted_pending('%s')",
				 name);
		else
			snprintf(
				sql, sizeof(sql),
				"SELECT count(*) FILTER (WHERE locked_until IS "
				"NULL OR locked_until < now()), count(*) "
				"FILTER (WHERE locked_until >= now()) FROM "
				"pgoutbox.\"%s\"",
				name);
		c = pgo_pq_run(conn, "queue list", sql, 0, NULL, err);
		if (!c) {
			PQclear(res);
			return PGO_ERR_DB;
		}
		fprintf(out, "%-32s %-7s %7s %9s %7s %5s\n", name, kind,
			PQgetvalue(c, 0, 0), work ? PQgetvalue(c, 0, 1) : "-",
			PQgetvalue(res, i, 3), PQgetvalue(res, i, 2));
		PQclear(c);
	}
	PQclear(res);
	return PGO_OK;
}

/* The queue must exist as a registered work queue (or the outbox). */
static int check_queue(PGconn *conn, const char *queue, bool work_only,
		       pgo_error_t *err)
{
	PGresult *res;
	int rc = PGO_OK;

	if (pgo_ident_check(queue, err) != PGO_OK)
		return PGO_ERR_INVALID;
	res = pgo_pq_run(conn, "queue",
			 "SELECT kind FROM pgoutbox.queues WHERE name = $1", 1,
			 &queue, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "no queue named \"%s\" (pgoutbox queue "
				   "list shows them)",
				   queue);
	else if (work_only && strcmp(PQgetvalue(res, 0, 0), "work") != 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "\"%s\" is not a work queue but %s (its "
				   "events: pgoutbox status --queue %s; a work "
				   "queue: pgoutbox queue create NAME)",
				   queue,
				   strcmp(PQgetvalue(res, 0, 0), "outbox") == 0
					   ? "an outbox"
					   : "an adopted table",
				   queue);
	PQclear(res);
	return rc;
}

int pgo_queue_stats(PGconn *conn, const char *queue, FILE *out,
		    pgo_error_t *err)
{
	char sql[1024];
	const char *p[1] = {queue};
	PGresult *res;
	int rc = check_queue(conn, queue, true, err);

	if (rc != PGO_OK)
		return rc;
	snprintf(
		sql, sizeof(sql),
		"SELECT count(*), "
		"count(*) FILTER (WHERE run_at <= now() AND (locked_until IS "
		"NULL OR locked_until < now())), "
		"count(*) FILTER (WHERE run_at > now() AND attempts = 0), "
		"count(*) FILTER (WHERE run_at > now() AND attempts > 0 AND "
		"(locked_until IS NULL OR locked_until < now())), "
		"count(*) FILTER (WHERE locked_until >= now()), "
		"count(*) FILTER (WHERE locked_until < now()), "
		"coalesce(date_trunc('second', now() - min(run_at) FILTER "
		"(WHERE run_at <= now() AND locked_until IS NULL))::text, "
		"'-'), "
		"(SELECT count(*) FROM pgoutbox.dead_letters WHERE queue = $1) "
		"FROM pgoutbox.\"%s\"",
		queue);
	res = pgo_pq_run(conn, "queue stats", sql, 1, p, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out,
		"queue %s\n"
		"  jobs            %s\n"
		"  ready           %s (oldest waiting %s)\n"
		"  scheduled       %s (run_at in the future)\n"
		"  retrying        %s (failed, waiting for their backoff)\n"
		"  running         %s (leased)\n"
		"  lease expired   %s (reaped or re-claimed soon)\n"
		"  dead letters    %s\n",
		queue, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
		PQgetvalue(res, 0, 6), PQgetvalue(res, 0, 2),
		PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4),
		PQgetvalue(res, 0, 5), PQgetvalue(res, 0, 7));
	PQclear(res);
	/* Jobs held by their dependencies (deps_cond.sql's condition). */
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM pgoutbox.\"%s\" j WHERE j.depends_on IS "
		 "NOT NULL AND (EXISTS (SELECT FROM pgoutbox.\"%s\" d WHERE "
		 "d.id = ANY (j.depends_on)) OR EXISTS (SELECT FROM "
		 "pgoutbox.dead_letters x WHERE x.queue = $1 AND x.id = ANY "
		 "(j.depends_on)))",
		 queue, queue);
	res = pgo_pq_run(conn, "queue stats", sql, 1, p, err);
	if (!res)
		return PGO_ERR_DB;
	fprintf(out, "  held            %s (waiting for jobs they depend on)\n",
		PQgetvalue(res, 0, 0));
	PQclear(res);
	snprintf(sql, sizeof(sql),
		 "SELECT locked_by, count(*) FROM pgoutbox.\"%s\" WHERE "
		 "locked_until >= now() GROUP BY 1 ORDER BY 1",
		 queue);
	res = pgo_pq_run(conn, "queue stats", sql, 0, NULL, err);
	if (!res)
		return PGO_ERR_DB;
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(out, "  worker %-40s %s running\n",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
	/* Paused or not, and its limits (controls.c). */
	return pgo_queue_controls(conn, queue, out, err);
}

/* `queue dead` and `queue retry`: the dead letters' own calls (dead.c)
 * after the queue is checked. */
int pgo_queue_dead(PGconn *conn, const char *queue, int limit, FILE *out,
		   pgo_error_t *err)
{
	int rc = check_queue(conn, queue, false, err);

	if (rc != PGO_OK)
		return rc;
	return pgo_dead_list(conn, queue, NULL, NULL, limit, out, err);
}

int pgo_queue_retry(PGconn *conn, const char *queue, int64_t id,
		    pgo_error_t *err)
{
	int64_t moved = 0;
	int rc = check_queue(conn, queue, false, err);

	if (rc == PGO_OK)
		rc = pgo_dead_retry(conn, queue, &id, 1, NULL, NULL, &moved,
				    err);
	if (rc == PGO_OK && moved == 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "no dead letter %lld in queue %s",
				   (long long)id, queue);
	return rc;
}

int pgo_queue_purge(PGconn *conn, const char *queue, int dead, int64_t *count,
		    pgo_error_t *err)
{
	char sql[256];
	const char *p[1] = {queue};
	PGresult *res;
	int rc = check_queue(conn, queue, false, err);

	if (rc != PGO_OK)
		return rc;
	if (dead)
		snprintf(sql, sizeof(sql),
			 "DELETE FROM pgoutbox.dead_letters WHERE queue = $1");
	else
		snprintf(sql, sizeof(sql), "DELETE FROM pgoutbox.\"%s\"",
			 queue);
	res = pgo_pq_run(conn, "queue purge", sql, dead ? 1 : 0,
			 dead ? p : NULL, err);
	if (!res)
		return PGO_ERR_DB;
	if (count)
		*count = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return PGO_OK;
}
