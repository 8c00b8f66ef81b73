/*
 * conn.h — one non-blocking PostgreSQL connection driven by an event loop.
 *
 * The connection is an explicit state machine (PgBouncer/pgqd style):
 * DOWN -> CONNECTING -> SETUP -> READY <-> BUSY, and back to DOWN with a
 * backoff whenever the server goes away.  Once connected it runs in libpq
 * pipeline mode: the owner queues several statements and a sync as one
 * "round" (one round trip), then collects the round's results.
 */
#ifndef PGO_CONN_H
#define PGO_CONN_H

#include <poll.h>
#include <signal.h>

#include "conf/conf.h"
#include "pgoutbox.h"

#define PGO_ROUND_MAX 16

/* An outage goes on: a summary is logged this often during its first
 * minute, then once a minute (PGO_CONN_REWARN_MS). */
#define PGO_CONN_REWARN_FIRST_MS PGO_SECONDS(5)
#define PGO_CONN_REWARN_MS	 PGO_MINUTES(1)
/* An outage is over once connections stayed up this long. */
#define PGO_CONN_QUIET_MS PGO_SECONDS(5)

/* The one rule for logging connection failures, for every runner (conn.c,
 * the pooler probe, cron, consume): the first failure of an outage is
 * logged with its reason, and the first reconnection; the failures and
 * reconnections after them only in a summary every few seconds while
 * the outage lasts (its reason the latest), so that a storm of
 * terminated sessions or a server flapping writes a few lines, not one
 * per connection and attempt.  An outage ends when its connections
 * stayed up for PGO_CONN_QUIET_MS. */
typedef struct pgo_outage {
	int64_t since;	   /* first failure of the outage; 0: none */
	int64_t warned;	   /* when the last line was logged */
	int64_t last_fail; /* the latest failure */
	int64_t last_up;   /* the latest reconnection */
	int fails;	   /* failures since the last line */
	int ups;	   /* reconnections since the last line */
	bool up_said;	   /* a reconnection was logged after the last line */
} pgo_outage_t;

/* A connection failed (lost: it had been up; else "cannot connect"). */
void pgo_outage_failed(pgo_outage_t *o, const char *subject, bool lost,
		       const char *why);
/* A connection came up: what (e.g. "connected to db on h:5432") is
 * logged at info for the first one of the outage, or the first after a
 * summary; at debug otherwise; NULL: nothing to say (a first session). */
void pgo_outage_up(pgo_outage_t *o, const char *subject, const char *what);
/* Whether an outage goes on: what follows from each failure (a relay's
 * leases lost and shared again) is logged at debug meanwhile. */
bool pgo_outage_on(const pgo_outage_t *o);
/* conn.c's outage of the connections logging as subject (one per
 * subject, so that a relay's many connections share theirs). */
pgo_outage_t *pgo_outage_of(const char *subject);

typedef enum pgo_conn_state {
	PGO_CONN_DOWN = 0,   /* no connection; a new attempt at retry_at */
	PGO_CONN_CONNECTING, /* PQconnectPoll() in progress */
	PGO_CONN_SETUP,	     /* the setup round (settings, checks) in flight */
	PGO_CONN_READY,	     /* idle, in pipeline mode, no round in flight */
	PGO_CONN_BUSY	     /* a round in flight */
} pgo_conn_state_t;

/* What pgo_conn_step() reports to the owner. */
typedef enum pgo_conn_event {
	PGO_CONN_EV_NONE = 0, /* nothing finished yet */
	PGO_CONN_EV_READY,    /* setup done: the connection is usable */
	PGO_CONN_EV_ROUND,    /* the round in flight finished */
	PGO_CONN_EV_LOST,     /* connection failed or lost: now DOWN */
	PGO_CONN_EV_FATAL     /* setup found what a retry cannot fix */
} pgo_conn_event_t;

/* The results of one round: one slot per statement, in order. */
typedef struct pgo_round {
	int nq;			      /* statements queued */
	int hidden;		      /* leading results to drop (local_sql) */
	int got;		      /* results collected */
	PGresult *res[PGO_ROUND_MAX]; /* owned by the round until taken */
	int64_t at[PGO_ROUND_MAX];    /* when each result was read (us) */
	int64_t sent_us;	      /* when the round was sent (us) */
	bool failed;		      /* some statement failed */
	char sqlstate[6];	      /* of the first failure */
	char err[512];		      /* message of the first failure */
} pgo_round_t;

/* Built once by the owner: what every new session runs first. */
typedef struct pgo_conn_setup {
	const char *subject;	  /* log prefix, e.g. "relay outbox" */
	const char *app_name;	  /* application_name of the session */
	const char *sql[10];	  /* statements, NULL-terminated */
	const char *prep_name[4]; /* statements to prepare (NULL-terminated) */
	const char *prep_sql[4];
	bool check_schema; /* read and check the schema version */
	/* A refusal of the owner's: a query (run after the schema check)
	 * whose first value, when a row comes back with a non-NULL one, is
	 * why this session must not go on (EV_FATAL, PGO_ERR_INVALID), e.g.
	 * a queue of the wrong kind.  Parameters are text. */
	const char *refuse_sql;
	const char *refuse_param[2]; /* NULL-terminated */
	/* Through a transaction pooler (pgo_pooler_probe): session state
	 * would stay behind on a server connection others share and be gone
	 * at the next transaction.  The setup then runs no sql[] (settings,
	 * LISTEN) and prepares nothing: pgo_conn_exec_prepared() sends the
	 * statement's text unnamed, and every round starts with local_sql
	 * (the settings as set_config(..., true), for that transaction only;
	 * its result is not part of the round). */
	bool pooled;
	const char *local_sql;
	/* What the first session's setup failing on a missing table or
	 * function most likely means, for the message ("relay.queue
	 * \"x\" is not a queue: ..."); NULL: the error alone. */
	const char *missing_hint;
	/* Receives the server's notices on every session instead of
	 * conn.c's (warnings logged, notices at debug); NULL: conn.c's. */
	PQnoticeReceiver notice;
	void *notice_arg;
	/* The addresses of the URL's host names, looked up in a thread
	 * (pgo_conn_resolve()), given to libpq (hostaddr) so that it
	 * resolves nothing while the loop waits; NULL, or *resolved NULL:
	 * libpq resolves them itself. */
	struct pgo_resolved *const *resolved;
} pgo_conn_setup_t;

typedef struct pgo_conn {
	PGconn *pg;
	pgo_conn_state_t state;
	PostgresPollingStatusType poll; /* what PQconnectPoll waits for */
	bool need_flush;     /* queued bytes not yet sent: wait for POLLOUT */
	int64_t retry_at;    /* DOWN: when to try again (monotonic ms) */
	int64_t sent_at;     /* SETUP, BUSY: when the round was sent */
	int64_t connect_by;  /* CONNECTING: when to give up (0: never) */
	int64_t backoff;     /* current reconnect backoff, ms */
	int64_t backoff_max; /* ceiling, ms */
	int notifies;	     /* notifications received since last taken */
	int notify_senders;  /* of them, from how many backends (up to 3) */
	int notify_pids[3];  /* those backends */
	bool ever_connected; /* for counting reconnects */
	const pgo_conf_t *conf;
	const pgo_conn_setup_t *setup;
	pgo_round_t round;  /* the round in flight or just finished */
	pgo_error_t fatal;  /* why EV_FATAL was reported */
	bool refused;	    /* DOWN with fatal set: the next step() reports
			     * EV_FATAL (a start that cannot succeed) */
	char last_err[256]; /* the last failure's reason, until set up again
			     * (/readyz says it) */
} pgo_conn_t;

void pgo_conn_init(pgo_conn_t *c, const pgo_conf_t *conf,
		   const pgo_conn_setup_t *setup);
/* The connection keywords and values of every pgoutbox session, for
 * PQconnectStartParams/PQconnectdbParams with expand_dbname 1,
 * NULL-terminated: connect_timeout, keepalives (idle 10 s, then 3 probes
 * 5 s apart) and tcp_user_timeout (25 s), then database.url (which
 * overrides any of them: libpq takes the last value of a keyword), then
 * application_name.  timeout is room for the connect_timeout text. */
#define PGO_CONN_KEYS		     12 /* room for one more, and NULL */
#define PGO_CONN_KEEPALIVES_IDLE     "10"
#define PGO_CONN_KEEPALIVES_INTERVAL "5"
#define PGO_CONN_KEEPALIVES_COUNT    "3"
#define PGO_CONN_TCP_USER_TIMEOUT    "25000" /* ms */
void pgo_conn_params(const pgo_conf_t *conf, const char *app_name,
		     const char *keys[PGO_CONN_KEYS],
		     const char *vals[PGO_CONN_KEYS], char timeout[24]);
/* pgo_conn_params(), then the addresses of the URL's names looked up
 * beforehand (pgo_conn_resolve(); NULL: none), so that libpq resolves
 * nothing (they come after the URL, so they win).  Arrays of
 * PGO_CONN_KEYS fit; returns the count of keywords. */
int pgo_conn_params_resolved(const pgo_conf_t *conf, const char *app_name,
			     const struct pgo_resolved *resolved,
			     const char *keys[PGO_CONN_KEYS],
			     const char *vals[PGO_CONN_KEYS], char timeout[24]);
/* The same for a runner that holds only the URL (NULL or "": libpq's
 * defaults) and its connect timeout (ms). */
void pgo_conn_params_url(const char *db_url, int64_t connect_timeout_ms,
			 const char *app_name, const char *keys[PGO_CONN_KEYS],
			 const char *vals[PGO_CONN_KEYS], char timeout[24]);
/* A URL's hosts with their names looked up (pgo_conn_resolve()): libpq's
 * host, hostaddr and port lists, an item per address. */
typedef struct pgo_resolved {
	char *host;	/* each name once per address */
	char *hostaddr; /* its address ("": libpq's, a socket or a number) */
	char *port;	/* NULL: the URL's (one port for all) */
} pgo_resolved_t;
/* Looks up the host names of url (else PGHOST) with getaddrinfo(),
 * blocking (a thread's work): *out the lists, every address of each name
 * (up to 8), an empty hostaddr for a host that needs no lookup (a
 * socket, a numeric address) or whose lookup failed while another's
 * succeeded.  PGO_OK with *out NULL when there is nothing to look up
 * (sockets, numeric addresses, hostaddr given); PGO_ERR_CONNECT (why
 * set) when no name could be looked up. */
int pgo_conn_resolve(const char *url, pgo_resolved_t **out, char *why,
		     size_t why_len);
void pgo_resolved_free(pgo_resolved_t *r);
bool pgo_resolved_same(const pgo_resolved_t *a, const pgo_resolved_t *b);
/* Puts r's keywords at keys[n] on (room for 3 and NULL); the new n. */
int pgo_resolved_params(const pgo_resolved_t *r, const char **keys,
			const char **vals, int n);
/* Closes the connection (if any) and frees the round's results. */
void pgo_conn_close(pgo_conn_t *c);
/* Starts connecting if DOWN and retry_at has passed. */
void pgo_conn_kick(pgo_conn_t *c, int64_t now);
/* Fills pfd for poll(); fd -1 when there is nothing to wait for. */
void pgo_conn_pollfd(const pgo_conn_t *c, struct pollfd *pfd);
/* Drives the state machine after poll() (revents may be 0). */
pgo_conn_event_t pgo_conn_step(pgo_conn_t *c, short revents);

/* Queues a statement of the next round (READY only).  Values are text. */
void pgo_conn_query(pgo_conn_t *c, const char *sql, int n,
		    const char *const *values);
void pgo_conn_exec_prepared(pgo_conn_t *c, const char *name, int n,
			    const char *const *values);
/* Asks the server to send what it has so far (after the statement just
 * queued) instead of at the round's end, so that the statement's
 * round.at[] is the time it finished: for the timings logged at debug. */
void pgo_conn_flush_request(pgo_conn_t *c);
/* Ends the round with a sync and sends it: READY -> BUSY.  Returns
 * PGO_ERR_CONNECT (and the connection goes DOWN) when sending fails. */
int pgo_conn_send(pgo_conn_t *c);
/* Takes ownership of result i of the finished round. */
PGresult *pgo_conn_take(pgo_conn_t *c, int i);
/* Frees the results of the finished round. */
void pgo_conn_round_clear(pgo_conn_t *c);

/* When the round in flight (or the setup) has waited limit ms for its
 * reply (0: none in flight, or no limit); while connecting to a single
 * host, when database.connect_timeout has passed. */
int64_t pgo_conn_round_deadline(const pgo_conn_t *c, int64_t limit);
/* Drops the connection when that deadline has passed: the server, or
 * the path to it, hangs (a stalled proxy the kernel keeps ACKing).
 * limit only concerns rounds: a connect's deadline is always applied.
 * Returns true if it did. */
bool pgo_conn_expire(pgo_conn_t *c, int64_t now, int64_t limit);

/* Drops the connection and schedules a reconnect with backoff. */
void pgo_conn_drop(pgo_conn_t *c, const char *why);

/* Whether libpq accepts database.url (and the PG* variables) as
 * connection settings: its parser for the syntax and keywords, then its
 * own checks of the values (sslmode, integers, services) in a connection
 * started towards a socket that does not exist, so that nothing goes
 * over the network.  PGO_OK, or PGO_ERR_CONFIG with libpq's complaint. */
int pgo_conn_check_settings(const pgo_conf_t *conf, pgo_error_t *err);
/* The same for a database URL (NULL or "": libpq's defaults). */
int pgo_conn_check_url(const char *url, pgo_error_t *err);
/* The one rule for a first connection's failure (why: libpq's message):
 * PGO_ERR_CONFIG, err's one line saying what is wrong and what to do,
 * when no retry can fix it: a database or role that does not exist, an
 * authentication refused (password, pg_hba.conf, NOLOGIN, no password
 * given), settings libpq refuses (with check_url:
 * pgo_conn_check_settings()), no database configured at all.  PGO_OK
 * when waiting may help (the server is down or unreachable).  Runners
 * apply it until their first session came up, and wait out every
 * failure after. */
int pgo_conn_start_refusal(const pgo_conf_t *conf, const char *why,
			   bool check_url, pgo_error_t *err);
/* The same for a runner that holds only the URL (db_url NULL or "":
 * libpq's defaults). */
int pgo_conn_url_refusal(const char *db_url, const char *why, bool check_url,
			 pgo_error_t *err);

/* --- one request at a time with a deadline (blocking runners) --- */

/* For a runner that does one thing at a time (consume): libpq used
 * without blocking, so that a server or a path that hangs (a host gone
 * without a word, a stalled proxy the kernel keeps ACKing) costs at most
 * the deadline, and a stop request ends a wait within half a second (a
 * healthy server's reply still taken meanwhile).  Deadlines are
 * monotonic ms (pgo_now_ms()), 0 for none; stop may be NULL. */
typedef enum pgo_pq_wait {
	PGO_PQ_READY = 0, /* done (a result can be read without blocking) */
	PGO_PQ_LOST,	  /* the connection failed (PQerrorMessage says) */
	PGO_PQ_TIMEOUT,	  /* the deadline passed first */
	PGO_PQ_STOPPED	  /* *stop was set first */
} pgo_pq_wait_t;

/* Sends what libpq holds and waits until PQgetResult() would not block. */
pgo_pq_wait_t pgo_pq_await(PGconn *pg, int64_t deadline,
			   volatile sig_atomic_t *stop);
/* PQconnectdbParams (expand_dbname 1) that gives up on a host after
 * per_host_ms (0: never) or at a stop, and tries the hosts of a list
 * (host=a,b) one at a time as libpq does: the connection, *how READY when
 * it is up; otherwise the last attempt's failed or unfinished connection
 * (PQfinish it; NULL: out of memory) and why. */
PGconn *pgo_pq_connect(const char *const *keys, const char *const *vals,
		       int64_t per_host_ms, volatile sig_atomic_t *stop,
		       pgo_pq_wait_t *how);
/* PQexecParams (text values) with a deadline: the last result, as
 * PQexec() (the caller clears it), *how READY; NULL and why otherwise,
 * the connection then unusable (drop it). */
PGresult *pgo_pq_exec(PGconn *pg, const char *sql, int n,
		      const char *const *values, int64_t deadline,
		      volatile sig_atomic_t *stop, pgo_pq_wait_t *how);
/* What went wrong, for the log: libpq's message, or "no reply from
 * PostgreSQL within limit ms (...)", or "stopping".  Returns buf. */
const char *pgo_pq_wait_why(PGconn *pg, pgo_pq_wait_t how, int64_t limit,
			    char *buf, size_t len);

/* --- pooler.c --- */

/* What stands between a runner and PostgreSQL. */
typedef enum pgo_pooler {
	PGO_POOLER_NONE = 0,	    /* PostgreSQL itself */
	PGO_POOLER_SESSION = 1,	    /* a pooler that keeps the session ours */
	PGO_POOLER_TRANSACTION = 2, /* a server connection per transaction */
	PGO_POOLER_STATEMENT = 3    /* per statement: no transactions */
} pgo_pooler_t;

/* Finds out with two connections of conf's database (see
 * pooler.c for how).  PGO_OK and *kind, or PGO_ERR_CONNECT / PGO_ERR_DB
 * with err set (retriable as libpq's rule says). */
int pgo_pooler_probe(const pgo_conf_t *conf, const char *app_name,
		     pgo_pooler_t *kind, pgo_error_t *err);
/* The same with the connection keywords given (pgo_conn_params()), no
 * step waiting longer than limit_ms (0: 10 s), ended by *stop (may be
 * NULL); touches nothing else, so a thread may run it. */
int pgo_pooler_probe_params(const char *const *keys, const char *const *vals,
			    int64_t limit_ms, volatile sig_atomic_t *stop,
			    pgo_pooler_t *kind, pgo_error_t *err);
/* The probe until it answers, at start: a failure is logged once and
 * tried again with backoff, turning loop meanwhile (a stop request wakes
 * it).  PGO_OK and *kind; PGO_ERR_AGAIN when *stop was set first.  A
 * failure no retry can fix (pgo_conn_start_refusal()) ends the wait with
 * PGO_OK and PGO_POOLER_NONE: the session's own setup refuses it. */
struct pgo_loop;
int pgo_pooler_wait(const pgo_conf_t *conf, const char *app_name,
		    const char *subject, struct pgo_loop *loop,
		    volatile sig_atomic_t *stop, pgo_pooler_t *kind);
/* "a transaction pooler (...)" for the refusals and the log. */
const char *pgo_pooler_name(pgo_pooler_t kind);

#endif
