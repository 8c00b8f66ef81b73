/*
 * start.c — what a fleet's relay reads before its first turn, read in a
 * thread of its own.
 *
 * A relay reads a few things once, before its slots connect: whether
 * the schema is one it runs with, whether its queue is an adopted table
 * (the map its statements are built from) or captured through the WAL,
 * whether its claims are fair, and whether a transaction pooler stands
 * between it and PostgreSQL (pooler.c).  A single relay reads them
 * blocking before its loop runs: it holds up no one.  A fleet's relays
 * share one loop (fleet.c), where a connect that waits for a host that
 * hangs (a stalled proxy, an address that drops SYNs) or a host name
 * that resolves slowly would hold every other database up.  So a
 * fleet's relay reads them in a thread: the thread connects
 * (pgo_pq_connect(), database.connect_timeout per host), reads, probes for a
 * pooler and wakes the loop; the relay, on the loop, takes what it found
 * (start_take()).
 *
 * The thread looks the URL's host names up first (pgo_conn_resolve()):
 * the relay's own connections, driven by the loop, are given those
 * addresses (hostaddr), so libpq never resolves a name inside the loop.
 * A running relay looks them up again in a thread of the same kind
 * every 30 s, every 2 s while its connections fail
 * (pgo_start_resolve()), and keeps the addresses it knows when a
 * lookup fails.
 *
 * The thread touches nothing of the relay's: it has copies of the
 * connection keywords and writes only into its job.  A relay destroyed
 * meanwhile (a stop, a database removed on SIGHUP) abandons the job: a
 * stop request cuts the thread's waits short and the thread frees the
 * job when it ends.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "relay/relay_int.h"
#include "relay/wal.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "pgoutbox.h"

struct pgo_relay_start {
	pthread_t thread;
	pthread_mutex_t mu;
	bool done;	  /* the thread is over (under mu) */
	bool abandoned;	  /* the relay gave it up (under mu) */
	pgo_loop_t *loop; /* woken when done (under mu) */
	volatile sig_atomic_t stop;
	/* In: the relay's connection keywords, copied. */
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char *copies[PGO_CONN_KEYS];
	char queue[64];
	char *url;	   /* database.url, for the lookup */
	int64_t limit;	   /* database.connect_timeout */
	bool resolve_only; /* only the lookup (pgo_start_resolve()) */
	/* Out. */
	pgo_resolved_t *resolved; /* the host names' addresses (or NULL) */
	int rc; /* PGO_OK, PGO_ERR_CONNECT, PGO_ERR_SCHEMA (err) */
	pgo_error_t err;
	bool wal; /* the queue is captured through the WAL */
	pgo_adopted_found_t found;
	int probe_rc; /* the pooler probe's: PGO_OK and kind, or probe_err */
	pgo_pooler_t kind;
	pgo_error_t probe_err;
};

static void job_free(pgo_relay_start_t *j)
{
	for (int i = 0; i < PGO_CONN_KEYS; i++)
		free(j->copies[i]);
	free(j->url);
	pgo_resolved_free(j->resolved);
	PQclear(j->found.map);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

/* Whether queue is captured through the WAL (wal.c's pgo_wal_load()). */
static bool read_wal(PGconn *pg, const char *queue)
{
	PGresult *res = PQexecParams(
		pg, "SELECT capture FROM pgoutbox.queues WHERE name = $1", 1,
		NULL, &queue, NULL, NULL, 0);
	bool wal = PQresultStatus(res) == PGRES_TUPLES_OK &&
		   PQntuples(res) == 1 &&
		   strcmp(PQgetvalue(res, 0, 0), "wal") == 0;

	PQclear(res);
	return wal;
}

static void read_all(pgo_relay_start_t *j)
{
	pgo_pq_wait_t how;
	char why[256];
	PGconn *pg;

	/* The host names first, for the relay's connections (conn.c);
	 * this thread's own let libpq look them up. */
	if (pgo_conn_resolve(j->url, &j->resolved, why, sizeof(why)) !=
	    PGO_OK) {
		j->rc = pgo_error_set(&j->err, PGO_ERR_CONNECT, 1, "%s", why);
		return;
	}
	if (j->resolve_only)
		return;
	pg = pgo_pq_connect(j->keys, j->vals, j->limit, &j->stop, &how);
	if (!pg || how != PGO_PQ_READY) {
		j->rc = pgo_error_set(&j->err, PGO_ERR_CONNECT, 1, "%s",
				      !pg ? "out of memory"
				      : how == PGO_PQ_LOST
					      ? pgo_pq_msg(pg, NULL)
					      : pgo_pq_wait_why(pg, how,
								j->limit, why,
								sizeof(why)));
		PQfinish(pg);
		return;
	}
	/* As pgo_adopted_load(): a schema missing or of another version
	 * is refused first; a failure to read it is the slots' to say. */
	if (pgo_schema_check(pg, &j->err) == PGO_ERR_SCHEMA) {
		j->rc = PGO_ERR_SCHEMA;
		PQfinish(pg);
		return;
	}
	j->rc = PGO_OK;
	pgo_adopted_read(pg, j->queue, &j->found);
	j->wal = !j->found.map && read_wal(pg, j->queue);
	PQfinish(pg);
	j->probe_rc = pgo_pooler_probe_params(
		j->keys, j->vals, j->limit, &j->stop, &j->kind, &j->probe_err);
}

static void *start_main(void *arg)
{
	pgo_relay_start_t *j = arg;
	bool abandoned;

	read_all(j);
	pthread_mutex_lock(&j->mu);
	j->done = true;
	abandoned = j->abandoned;
	if (!abandoned)
		pgo_loop_wake(j->loop);
	pthread_mutex_unlock(&j->mu);
	if (abandoned)
		job_free(j);
	return NULL;
}

/* The job of relay r, its thread started; NULL without memory or a
 * thread. */
static pgo_relay_start_t *job_start(pgo_relay_t *r, bool resolve_only)
{
	const struct pgo_conf_values *v = pgo_conf_values(r->conf);
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24];
	pgo_relay_start_t *j = calloc(1, sizeof(*j));
	pthread_attr_t attr;
	bool ok;

	if (!j || pthread_mutex_init(&j->mu, NULL) != 0) {
		free(j);
		return NULL;
	}
	pgo_conn_params(r->conf, r->app_name, keys, vals, timeout);
	ok = true;
	for (int i = 0; keys[i]; i++) {
		j->keys[i] = keys[i]; /* static names */
		j->copies[i] = vals[i] ? strdup(vals[i]) : NULL;
		j->vals[i] = j->copies[i];
		ok = ok && (!vals[i] || j->copies[i]);
	}
	snprintf(j->queue, sizeof(j->queue), "%s", v->queue);
	j->url = strdup(v->db_url ? v->db_url : "");
	ok = ok && j->url;
	j->limit = v->connect_timeout;
	j->resolve_only = resolve_only;
	j->loop = r->loop;
	if (!ok || pthread_attr_init(&attr) != 0) {
		job_free(j);
		return NULL;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ok = pthread_create(&j->thread, &attr, start_main, j) == 0;
	pthread_attr_destroy(&attr);
	if (!ok) {
		job_free(j);
		return NULL;
	}
	return j;
}

void pgo_start_abandon(pgo_relay_start_t *j)
{
	bool done;

	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	done = j->done;
	j->abandoned = true;
	j->loop = NULL;
	j->stop = 1;
	pthread_mutex_unlock(&j->mu);
	if (done)
		job_free(j);
}

static bool job_done(pgo_relay_start_t *j)
{
	bool done;

	pthread_mutex_lock(&j->mu);
	done = j->done;
	pthread_mutex_unlock(&j->mu);
	return done;
}

static void refuse(pgo_relay_t *r, const char *msg)
{
	snprintf(r->run.errmsg, sizeof(r->run.errmsg), "%s", msg);
}

/* A failure to connect (or probe): PGO_ERR_AGAIN when waiting may help
 * (logged as an outage, as conn.c does), else PGO_OK and no pooler: the
 * slots' own sessions refuse the start with what to do. */
static int failed(pgo_relay_t *r, const char *why, pgo_pooler_t *kind)
{
	if (pgo_conn_start_refusal(r->conf, why, true, NULL) == PGO_OK) {
		pgo_outage_failed(pgo_outage_of(r->subject), r->subject, false,
				  why);
		return PGO_ERR_AGAIN;
	}
	*kind = PGO_POOLER_NONE;
	return PGO_OK;
}

/* What the thread found, taken into r. */
static int start_take(pgo_relay_t *r, pgo_relay_start_t *j, pgo_pooler_t *kind)
{
	pgo_error_t err;
	int rc;

	if (j->resolved) {
		pgo_resolved_free(r->resolved);
		r->resolved = j->resolved;
		j->resolved = NULL;
		r->resolved_at = pgo_now_ms();
	}
	if (j->rc == PGO_ERR_CONNECT)
		return failed(r, j->err.msg, kind);
	if (j->rc == PGO_ERR_SCHEMA) {
		refuse(r, j->err.msg);
		return PGO_ERR_SCHEMA;
	}
	/* Its stream begins once the database answered (relay.c's
	 * pgo_relay_begin()). */
	if (j->wal) {
		rc = pgo_wal_attach(r, &err);
		if (rc != PGO_OK) {
			refuse(r, err.msg);
			return rc;
		}
	}
	rc = pgo_adopted_apply(r, &j->found, &err);
	if (rc != PGO_OK) {
		refuse(r, err.msg);
		return rc;
	}
	if (pgo_adopted_wal(r)) {
		snprintf(r->run.errmsg, sizeof(r->run.errmsg),
			 "queue %s is a table adopted with capture wal, which "
			 "a fleet does not stream: run a relay of its own for "
			 "this database",
			 j->queue);
		return PGO_ERR_INVALID;
	}
	pgo_relay_build_sql(r);
	if (j->probe_rc != PGO_OK)
		return failed(r, j->probe_err.msg, kind);
	*kind = j->kind;
	return PGO_OK;
}

int pgo_start_step(pgo_relay_t *r, pgo_pooler_t *kind)
{
	pgo_relay_start_t *j = r->start;
	int rc;

	if (!j) {
		r->start = job_start(r, false);
		if (r->start)
			return PGO_ERR_AGAIN;
		refuse(r, "out of memory (or no thread) for a relay's start");
		return PGO_ERR_NOMEM;
	}
	if (!job_done(j))
		return PGO_ERR_AGAIN;
	r->start = NULL;
	rc = start_take(r, j, kind);
	job_free(j);
	return rc;
}

/* A running relay looks its host names up again this often, and this
 * often while its connections fail (a name may point elsewhere after a
 * failover). */
#define RESOLVE_EVERY_MS  PGO_SECONDS(30)
#define RESOLVE_OUTAGE_MS PGO_SECONDS(2)

int64_t pgo_start_resolve(pgo_relay_t *r, int64_t now)
{
	pgo_relay_start_t *j = r->resolve;
	int64_t due;

	if (!r->resolved)
		return 0; /* no name to look up (sockets, addresses) */
	if (j) {
		if (!job_done(j))
			return 0; /* the thread wakes the loop */
		r->resolve = NULL;
		if (j->resolved &&
		    !pgo_resolved_same(j->resolved, r->resolved)) {
			pgo_log(PGO_LOG_INFO, r->subject,
				"host addresses now %s (were %s)",
				j->resolved->hostaddr, r->resolved->hostaddr);
			pgo_resolved_free(r->resolved);
			r->resolved = j->resolved;
			j->resolved = NULL;
		}
		/* A lookup that failed keeps the addresses known. */
		job_free(j);
	}
	due = r->resolved_at + (pgo_outage_on(pgo_outage_of(r->subject))
					? RESOLVE_OUTAGE_MS
					: RESOLVE_EVERY_MS);
	if (now < due)
		return due;
	r->resolved_at = now;
	r->resolve = job_start(r, true);
	return r->resolve ? 0 : now + RESOLVE_OUTAGE_MS;
}
