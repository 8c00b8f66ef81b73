/*
 * worker_int.h — what the worker's files share: the worker handle, a
 * running exec job, the operations of lease mode, and the lease rules.
 *
 *   worker.c    the handle: options, new and destroy, metrics, a turn of
 *               the loop over the connections, run (picks the mode)
 *   lease.c     the lease rules, pure: a job's verdict and retry delay,
 *               which operation a free connection takes next, how long
 *               the loop may sleep, when a stop may end the run
 *               (tests/unit/test_lease.c)
 *   lease_run.c lease mode's loop (exec and C callback)
 *   ops.c       lease mode's operations: their SQL, sending them, their
 *               results (settle, claim, heartbeat, reap)
 *   jobs.c      exec jobs: sh -c CMD on the loop, its end, its error text
 *   sql_run.c   sql mode: pgoutbox.work_sql() batches on N connections
 */
#ifndef PGO_WORKER_INT_H
#define PGO_WORKER_INT_H

#include <signal.h>

#include "loop/proc.h"
#include "db/conn.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"

#define MAX_CONCURRENCY 256
#define TAIL_MAX	2000 /* stderr kept per job for the error text */
#define MAX_WAIT_MS	1000 /* the loop looks around at least this often */
#define LEASE_CONNS	2    /* lease mode's connections */
#define SETTLE_TRIES	3    /* an outcome is sent again at most this often */

/* One running exec job. */
typedef struct job_run {
	bool used;
	struct pgo_worker *w;
	int64_t id, epoch;
	int attempt;
	pgo_proc_t *proc; /* the command (proc.c ends it: done is job_done) */
	int64_t started;  /* monotonic ms, for its duration */
	bool lost;	  /* the lease is no longer ours: group killed */
	bool hb_sent;	  /* in the heartbeat in flight */
} job_run_t;

typedef enum op_kind {
	OP_NONE = -1,  /* nothing to do now */
	OP_SETTLE = 0, /* a job's outcome: complete, retry or dead letter */
	OP_CLAIM = 1,  /* lease more jobs */
	OP_HB = 2,     /* extend the leases of running jobs */
	OP_REAP = 3,   /* return expired leases, dead-letter lost jobs */
	OP_KINDS = 4
} op_kind_t;

/* What becomes of a job that ran. */
typedef enum lease_verdict {
	VERDICT_OK = 0,	   /* done: the row is deleted */
	VERDICT_RETRY = 1, /* failed: run_at moves by the backoff */
	VERDICT_DEAD = 2   /* failed its last attempt: dead-lettered */
} lease_verdict_t;

/* One database operation of lease mode. */
typedef struct op {
	struct op *next;
	op_kind_t kind;
	int64_t id, epoch; /* SETTLE: the job and its lease */
	int attempt;
	lease_verdict_t verdict; /* SETTLE */
	int64_t delay_ms;	 /* SETTLE, retry: the backoff */
	char *error;		 /* SETTLE: the error text (owned) */
	int tries;		 /* SETTLE: times sent again (lost connection,
				  * retriable failure) */
	int want;		 /* CLAIM: how many */
} op_t;

struct pgo_worker {
	const pgo_conf_t *conf;
	pgo_worker_opts_t o; /* strings below are our copies */
	char *queue, *name, *exec_command, *sql_function;
	char subject[160];
	char app_name[64];
	/* lease mode */
	pgo_conn_t lconns[LEASE_CONNS];	 /* one statement per round each */
	pgo_loop_io_t *lio[LEASE_CONNS]; /* their sockets on the loop */
	short lrevents[LEASE_CONNS];	 /* what poll() saw this turn */
	op_t *inflight[LEASE_CONNS];	 /* the operation of each round */
	op_t *q_head, *q_tail;		 /* outcomes waiting for a connection */
	int q_len;
	int claim_want, claim_got; /* the last claim: asked, got */
	pgo_conn_setup_t lsetup, lsetup_quiet;
	char set_sql[64];
	job_run_t *jobs; /* concurrency slots */
	int running;
	char claim_sql[2048], complete_sql[256], fail_sql[512], dead_sql[1024];
	char hb_sql[512], reap_sql[512], reap_dead_sql[1024], listen_sql[96];
	/* sql mode */
	pgo_conn_t *conns;
	pgo_loop_io_t **sio; /* their sockets on the loop */
	short *srevents;     /* what poll() saw this turn */
	bool *conn_more;
	pgo_conn_setup_t setup, setup_quiet;
	char work_sql[256];
	char batch_s[16], max_s[16], base_s[24], cap_s[24];
	/* common */
	pgo_loop_t *loop; /* the one event loop of either mode */
	bool kick;	  /* claim now: a wake-up, a free slot, a full batch */
	volatile sig_atomic_t stop;
	pgo_worker_stats_t stats;
	/* metrics (src/lib/metrics): jobs by outcome, as in stats */
	pgo_monitor_t *mon;
	pgo_series_t *m_jobs[6]; /* done failed dead lost timeout reaped */
	pgo_series_t *m_duration;
	bool pg_up;	    /* every connection of the run is up */
	char pg_why[256];   /* ... else why not, for /readyz */
	int64_t next_retry; /* earliest retry this worker scheduled */
	unsigned rnd;
	char errmsg[512];
	bool pooled;	    /* through a transaction pooler (pooler.c) */
	char local_sql[96]; /* lease mode, pooled: set_sql per transaction */
	int stop_code; /* stop 2: why (PGO_ERR_CONFIG: a retry cannot help) */
	bool said_started;    /* "started as" logged: at the first session, so
			       * that a refused start's first line is why */
	int64_t sql_retry_at; /* sql mode: the first retry due (0: none) */
};

/* The setup's refusal: the outbox's events are for relays (a worker would
 * fail on its missing columns forever). */
#define REFUSE_SQL                                                             \
	"SELECT format('queue \"%s\" is an outbox: its events are published "  \
	"by `pgoutbox relay --queue %s`; a worker runs the jobs of a work "    \
	"queue (pgoutbox queue create NAME)', name, name) "                    \
	"FROM (SELECT $1::text AS name) q "                                    \
	"WHERE pgoutbox.queue_kind(name) <> 'work'"

/* --- the lease rules (lease.c, pure) --- */

/* What lease mode decides its next operation and its sleep from: the
 * worker's state at `now`, copied so the rules can be tested alone. */
typedef struct lease_view {
	int64_t now;		 /* monotonic ms */
	int queued;		 /* outcomes waiting for a connection */
	int running;		 /* jobs running */
	int capacity;		 /* concurrency: jobs that may run at once */
	bool stop;		 /* a stop was requested: claim no more */
	bool kick;		 /* claim now */
	bool inflight[OP_KINDS]; /* an operation of that kind is in flight */
	int64_t next_hb;	 /* the next heartbeat */
	int64_t next_reap;	 /* the next reaper round */
	int64_t next_poll;	 /* a claim at the latest then */
	int64_t next_retry;	 /* the earliest retry scheduled (0: none) */
} lease_view_t;

/* A job's verdict: done when ok, else dead on its last attempt (attempt
 * counts from 1 and includes this run), else retried. */
lease_verdict_t pgo_lease_verdict(bool ok, int attempt, int max_attempts);
/* The retry delay of a verdict: the backoff of `attempt` for RETRY
 * (pgo_backoff_ms, rnd in [0,1)), 0 otherwise.  The job's run_at moves
 * that far from the database's now. */
int64_t pgo_lease_retry_delay(lease_verdict_t v, int attempt, int64_t base,
			      int64_t max, double rnd);
/* How often the leases of running jobs are extended: a third of the
 * lease, so a lease survives two lost heartbeats. */
int64_t pgo_lease_hb_every(int64_t lease_ms);
/* The operation a free connection takes now, in this order: an outcome
 * waiting, a heartbeat due (jobs running), a reaper round due, a claim
 * (room for jobs, and a kick, the poll interval or a scheduled retry
 * due); at most one heartbeat, reap or claim in flight at a time, and no
 * reap or claim once stopping.  OP_NONE: nothing now. */
op_kind_t pgo_lease_next_op(const lease_view_t *v);
/* The jobs a claim asks for: a callback runs a whole batch in turn, exec
 * jobs fill the free slots. */
int pgo_lease_claim_want(bool callback, int batch, int capacity, int running);
/* A claim that got all it asked for (and something): more may wait. */
bool pgo_lease_claim_full(int got, int want);
/* When the loop must look again for the timers (0: none), given whether
 * a connection is free to take an operation: a claim's poll and retry,
 * the reaper (not while stopping) and the heartbeat. */
int64_t pgo_lease_wake_at(const lease_view_t *v, bool free_conn);
/* Whether a stopping worker may end: nothing running or in flight, and
 * no outcome waiting unless the stop's deadline passed. */
bool pgo_lease_may_end(const lease_view_t *v, int busy, int64_t deadline);
/* Whether an outcome that failed to be recorded is sent again: its
 * tries (already counted) are at most SETTLE_TRIES. */
bool pgo_lease_settle_again(int tries);

/* --- worker.c --- */

/* A uniform value in [0,1) from the worker's own generator. */
double pgo_worker_jitter(pgo_worker_t *w);
/* A connection's socket was ready (arg: its revents): stepped after the
 * loop's turn. */
void pgo_worker_conn_io(void *arg, int fd, short revents);
/* Points the connections' watchers at what each waits for now and turns
 * the loop once, at most until deadline (and MAX_WAIT_MS from now).
 * PGO_ERR_IO (errmsg set) when poll() failed. */
int pgo_worker_turn(pgo_worker_t *w, const pgo_conn_t *conns,
		    pgo_loop_io_t **ios, short *revents, int n,
		    int64_t deadline);
/* Starts n connections with setup; only the first one LISTENs: the others
 * get a copy (quiet) whose statements end where the LISTEN stands. */
void pgo_worker_conns_init(pgo_worker_t *w, pgo_conn_t *conns, int n,
			   pgo_conn_setup_t *setup, pgo_conn_setup_t *quiet,
			   int listen_at);
/* Steps a connection with what poll() saw in the turn: a notification or
 * a new session kicks a claim; a fatal setup error fills errmsg. */
pgo_conn_event_t pgo_worker_step_conn(pgo_worker_t *w, pgo_conn_t *c,
				      short *revents);
void pgo_worker_log_stats(pgo_worker_t *w, const char *when);

/* --- lease mode (lease_run.c, ops.c, jobs.c) --- */

int pgo_lease_run(pgo_worker_t *w);
/* Builds lease mode's statements for w->queue, and LISTEN's. */
void pgo_ops_build_sql(pgo_worker_t *w);
void pgo_ops_free(op_t *op);
/* A new operation of kind (CLAIM: asking for want jobs); NULL: no memory. */
op_t *pgo_ops_new(op_kind_t kind, int want);
/* Takes the first outcome waiting, or NULL. */
op_t *pgo_ops_pop(pgo_worker_t *w);
/* Appends a job's outcome to the queue of operations (with its retry
 * delay, scheduling the worker's next look). */
void pgo_ops_push_settle(pgo_worker_t *w, int64_t id, int64_t epoch,
			 int attempt, lease_verdict_t verdict,
			 const char *error);
/* Queues the statement of op on connection i and sends it. */
void pgo_ops_send(pgo_worker_t *w, int i, op_t *op);
/* Whether an operation of kind is in flight. */
bool pgo_ops_inflight(const pgo_worker_t *w, op_kind_t kind);
/* A round finished on connection i. */
void pgo_ops_round(pgo_worker_t *w, int i);
/* Connection i went away with its operation in flight. */
void pgo_ops_lost(pgo_worker_t *w, int i);
/* Starts sh -c CMD for a claimed job (jobs.c).  Returns 0 or an errno
 * value. */
int pgo_jobs_spawn(pgo_worker_t *w, job_run_t *j, const char *payload);
/* A one-line copy of text for the log: line breaks become " | ". */
void pgo_jobs_one_line(const char *s, char *out, size_t size);

/* --- sql mode (sql_run.c) --- */

int pgo_sql_run(pgo_worker_t *w);

#endif /* PGO_WORKER_INT_H */
