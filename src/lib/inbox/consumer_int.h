/*
 * consumer_int.h — what the files of `pgoutbox consume` share: the
 * consumer handle and the steps of its loop.
 *
 *   consumer.c       the handle: options, new and destroy, metrics, run
 *   consume_db.c     the PostgreSQL session: connect, the --sql function's
 *                    check, inbox maintenance
 *   consume_redis.c  the Redis connection: one command at a time on the
 *                    loop, the consumer group, XACK
 *   consume_apply.c  one message applied: inbox claim, handler, COMMIT
 *   consume_read.c   reading the stream: pending entries first, takeovers
 *                    (XAUTOCLAIM), new entries, a failure's retries
 */
#ifndef PGO_CONSUMER_INT_H
#define PGO_CONSUMER_INT_H

#include <signal.h>

#include "loop/proc.h"
#include "db/conn.h"
#include "inbox/consume.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "sinks/redis/conn.h"
#include "base/buf.h"
#include "pgoutbox.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define STATS_EVERY_MS 60000
#define ENTRY_ID_MAX   48
#define CONSUME_MAX_COUNT                                                      \
	100000 /* entries per XREADGROUP (sinks/redis/conn.c) */

/* The outcome of handling one entry. */
typedef enum outcome {
	DONE = 0,    /* committed (fresh or duplicate) */
	FAILED = 1,  /* rolled back: retry later */
	DB_LOST = 2, /* PostgreSQL went away: reconnect, retry */
	DRILL = 3    /* exit_after_commit reached: stop before XACK */
} outcome_t;

struct pgo_consumer {
	/* options, copied (see pgo_consumer_opts_t) */
	char *db_url, *stream, *group, *name, *exec_command, *start_id, *window;
	pgo_inbox_handler_fn handler;
	void *handler_ctx;
	int64_t exec_timeout_ms, claim_idle_ms, block_ms, maintain_every_ms,
		redis_timeout_ms, connect_timeout_ms, statement_timeout_ms;
	int64_t pg_connect_timeout_ms; /* a PostgreSQL connection attempt */
	int64_t request_timeout_ms;    /* a reply from PostgreSQL (0: none) */
	int count, max_attempts, exit_after_commit;
	char sql_call[160];  /* SELECT "schema"."func"($1::jsonb) */
	char sql_gated[224]; /* the same, run only for a fresh claim */
	char sql_sig[160];   /* "schema"."func"(jsonb): checked at connect */
	char *sql_name;	     /* func, for naming those of another signature */
	char subject[200];   /* log prefix: "consume STREAM -> GROUP" */

	/* Redis */
	pgo_redis_t redis;	/* one command at a time, see call() */
	pgo_loop_io_t *rio;	/* its socket, watched while a reply is due */
	bool group_ready;	/* XGROUP CREATE done on this connection */
	int64_t redis_retry_at; /* DOWN: the next connect (monotonic ms) */
	int64_t redis_backoff;	/* the current reconnect backoff, ms */
	/* PostgreSQL */
	PGconn *pg;	     /* NULL while down */
	int64_t pg_retry_at; /* down: the next connect (monotonic ms) */
	int64_t pg_backoff;  /* the current reconnect backoff, ms */
	bool pg_ever;	     /* connected once: every failure is an outage */
	/* the loop */
	pgo_loop_t *loop;	    /* every wait but libpq's turns it */
	volatile sig_atomic_t stop; /* a stop was requested (and the loop
				     * woken) */
	/* the exec handler's run in progress */
	bool exec_over;	     /* its done() came */
	int exec_rc;	     /* 0 or -1 */
	char *exec_why;	     /* where its failure is described */
	size_t exec_why_len; /* the room there */

	/* reading */
	bool pending_mode;		 /* re-read our pending entries
					  * before any new one */
	char cursor[ENTRY_ID_MAX];	 /* pending entries are read after
					  * it ("0", or a skipped entry) */
	int64_t next_autoclaim;		 /* the next XAUTOCLAIM scan */
	char claim_cursor[ENTRY_ID_MAX]; /* where that scan continues */
	int64_t next_maintain;		 /* the next inbox maintenance */
	int64_t next_stats;		 /* the next stats line */
	char last_failed[ENTRY_ID_MAX];	 /* entry that failed last */
	int fail_count;			 /* its consecutive failures */
	int commits;	   /* fresh commits, for exit_after_commit */
	bool warned_no_id; /* logged once: entries without "id" */
	pgo_consumer_stats_t stats;
	/* metrics (src/lib/metrics), when the CLI asked for them */
	pgo_monitor_t *mon;
	pgo_series_t *m_msgs[5]; /* processed duplicate failed skipped
				  * trimmed */
	pgo_buf_t json;		 /* the message for the exec handler */
	char errmsg[512];	 /* why run() failed */
};

/* --- consumer.c --- */

/* Sleeps until deadline (monotonic ms) or a stop request. */
void pgo_consume_sleep_until(pgo_consumer_t *c, int64_t deadline);
/* A reconnect backoff doubled, up to BACKOFF_MAX_MS. */
int64_t pgo_consume_next_backoff(int64_t b);
/* How long a message that failed fail_count times in a row (1 or more)
 * waits before it is tried again: BACKOFF_MIN_MS doubled per failure
 * after the first, at most BACKOFF_MAX_MS. */
int64_t pgo_consume_retry_ms(int fail_count);

/* --- consume_db.c --- */

/* Drops the PostgreSQL connection (logged with why) and schedules the
 * next connect with backoff. */
void pgo_consume_pg_lost(pgo_consumer_t *c, const char *why);
/* Runs a command that returns no rows; false on failure (logged; a
 * connection that failed, hung past the request timeout or was cut short
 * by a stop is dropped). */
bool pgo_consume_pg_cmd(pgo_consumer_t *c, const char *sql);
/* The deadline of a request sent now (0: none). */
int64_t pgo_consume_deadline(const pgo_consumer_t *c);
/* A request ended without its reply (how, pgo_pq_wait_t): the connection
 * is dropped, logged as an outage (pgo_consume_pg_lost) unless a stop cut
 * it short. */
void pgo_consume_pg_failed(pgo_consumer_t *c, pgo_pq_wait_t how);
/* Connects when needed.  Returns PGO_OK when connected, PGO_ERR_AGAIN to
 * wait for the backoff, PGO_ERR_SCHEMA when the database lacks the inbox
 * or PGO_ERR_INVALID when the --sql function does not exist (fatal,
 * errmsg set). */
int pgo_consume_ensure_pg(pgo_consumer_t *c);
/* The inbox's partitions, every maintain interval. */
void pgo_consume_maybe_maintain(pgo_consumer_t *c);

/* --- inbox.c --- */

/* pgo_inbox_claim() with a deadline and a stop flag (pgo_pq_exec()):
 * when its query got no reply, PGO_ERR_DB and *how says why. */
int pgo_inbox_claim_within(PGconn *conn, const char *consumer,
			   const char *message_id, int *fresh, pgo_error_t *err,
			   int64_t deadline, volatile sig_atomic_t *stop,
			   pgo_pq_wait_t *how);

/* --- consume_redis.c --- */

/* The Redis socket is ready: pgo_consume_call() does the I/O after the
 * turn. */
void pgo_consume_redis_io(void *arg, int fd, short revents);
/* One command and its reply, connecting first when down, turning the
 * loop meanwhile: at most the reply timeout plus extra_ms (plus the
 * connect).  NULL when Redis failed, the time ran out or a stop was
 * requested (the connection is then closed, the error logged). */
redisReply *pgo_consume_call(pgo_consumer_t *c, int64_t extra_ms, int argc,
			     const char **argv);
/* Connects and makes sure the group exists.  PGO_ERR_AGAIN: wait. */
int pgo_consume_ensure_redis(pgo_consumer_t *c);
/* Acks an entry; not acked, it comes again and the inbox drops it. */
void pgo_consume_xack(pgo_consumer_t *c, const char *entry_id);

/* --- consume_apply.c --- */

/* The inbox's message id of m: "SOURCE/ID" for an event of a relay
 * fleet (its "pgoutbox-source" header), else the event id; in buf or
 * m->id. */
const char *pgo_consume_inbox_key(const pgo_inbox_msg_t *m, char *buf,
				  size_t size);
/* BEGIN; claim; handler (exec or C); COMMIT. */
outcome_t pgo_consume_handle_one(pgo_consumer_t *c, const pgo_inbox_msg_t *m);
/* The same for the SQL handler, in one round trip (a pipeline). */
outcome_t pgo_consume_handle_one_sql(pgo_consumer_t *c,
				     const pgo_inbox_msg_t *m);

/* --- consume_read.c --- */

/* One read (pending, autoclaim or new) and its entries.  DRILL ends the
 * run. */
outcome_t pgo_consume_read_once(pgo_consumer_t *c);

#endif /* PGO_CONSUMER_INT_H */
