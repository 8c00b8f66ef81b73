/*
 * relay_int.h — what the relay's modules share: the relay handle, its
 * slots (one connection each, one claim/publish/settle cycle at a time)
 * and the claim, settle and shard-lease steps of a cycle.
 *
 *   relay.c   wiring and the loop: slots, wake-ups, timers, signals, stats
 *   cycle.c   a slot's state machine: claim -> publish -> settle, lease
 *             rounds and chores; the only writer of slot->state
 *   claim.c   the claim SQL of each mode, its parameters, the batch built
 *             from the claimed rows, the settle statements' parameters
 *   settle.c  the settle rules: a plan from the sink's verdicts (pure)
 *   adopted.c the map of an adopted table and the statements built from it
 *   shards.c  membership in every mode (with the mode check), shard
 *             leases in the ordered and strict modes
 *   observe.c metrics, /readyz, READY=1, the gauges read from the database
 *   wake.c    the wake-up handshake: the sleeper lock and its connection
 *   floor.c   the claim floor, probed on a connection of its own
 *   wal.c     a queue captured through the WAL: the streaming relay
 *             that runs instead of the slots (wal.h)
 *   fleet.c   many databases on one loop and one sink: a relay each,
 *             turned in halves (pgo_relay_turn_*), the sink's host
 *
 * Calls point one way, down this list (fleet.c above relay.c: it runs
 * its relays' turns and hands cycle.c the sink's done()): relay.c wires
 * the others and runs the turns; cycle.c calls claim.c, settle.c, shards.c,
 * floor.c and observe.c; shards.c calls observe.c; floor.c calls claim.c.
 * Nothing calls back into relay.c or cycle.c: what they share is the handle.
 * The decisions that need no server (the claim SQL, the slot's
 * transitions, what a claim or a lease round changed, the settle plan)
 * are pure functions declared here, tested by tests/unit/test_claim.c,
 * test_cycle.c, test_shards.c and test_settle.c.
 */
#ifndef PGO_RELAY_INT_H
#define PGO_RELAY_INT_H

#include <signal.h>

#include "db/conn.h"
#include "loop/loop.h"
#include "base/arena.h"
#include "base/buf.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define MAX_SLOTS 16

struct pgo_monitor;
typedef struct pgo_relay_metrics pgo_relay_metrics_t;

typedef enum slot_state {
	SLOT_IDLE = 0,	  /* no cycle running (connection READY or not) */
	SLOT_REBALANCING, /* the lease round is in flight */
	SLOT_CLAIMING,	  /* round 1 (BEGIN + claim) in flight */
	SLOT_PUBLISHING,  /* the sink has the batch */
	SLOT_SETTLING,	  /* round 2 (fix-ups + COMMIT) in flight */
	SLOT_CHORE	  /* maintenance or a health check in flight */
} slot_state_t;

/* What settling does with one event (beyond the sink's verdict). */
typedef struct settle_row {
	int row;	  /* row of the claim result */
	int attempts;	  /* attempts to store */
	int64_t delay_ms; /* retry after this long; -1: never (halted) */
} settle_row_t;

/* The relay's side of the wake-up handshake (wake.c). */
typedef enum wake_state {
	WAKE_OFF = 0,  /* relay.listen = off: poll only */
	WAKE_AWAKE,    /* no sleeper lock: producers need not notify */
	WAKE_ASKING,   /* waiting for the sleeper lock */
	WAKE_ASLEEP,   /* holding it: producers notify */
	WAKE_RELEASING /* unlock in flight */
} wake_state_t;

/* A connection cold to producers' notifications (relay.c): after this
 * many claims in a row woken by them found nothing, it looks every
 * COLD_MS instead of at every commit, until a claim finds events. */
#define COLD_AFTER 16
#define COLD_MS	   2

/* A slot's sweep of the heap below the claim floor (claim.c). */
typedef struct slot_sweep {
	bool in_claim; /* its claim in flight sweeps pages below */
	bool on;       /* a sweep goes on: the heap, page by page */
	int64_t at;    /* monotonic ms: the next sweep */
	int64_t floor; /* the floor when the sweep's claim was sent */
	int64_t page;  /* the sweep's next heap page */
	int64_t hi;    /* the claim in flight sweeps up to this page */
	int pages;     /* pages a sweep's claim reads, sized by time */
	int64_t start; /* monotonic ms: the sweep began */
	int64_t end;   /* the table's pages, as last read (-1: ?) */
	int64_t next;  /* ahead of its pace: the next part then */
} slot_sweep_t;

/* Woken by producers while asleep (relay.c): a connection whose claims
 * keep coming back dry looks only every COLD_MS. */
typedef struct slot_cold {
	int dry_wakes;	 /* such claims in a row that found nothing */
	int64_t at;	 /* a cold connection's next look (monotonic ms) */
	bool wake_claim; /* its claim in flight answers producers */
} slot_cold_t;

/* The connection as a member of the queue's relays (shards.c): in the
 * ordered and strict modes, its leases. */
typedef struct slot_leases {
	char member[96];       /* "<relay name>/<slot>" */
	int n;		       /* shards owned (strict: 1 = leader) */
	char *shards;	       /* PostgreSQL array literal "{0,1,...}" */
	char *epochs;	       /* their epochs, same order */
	char *map;	       /* the epochs by shard: "{NULL,7}" */
	char leader_epoch[24]; /* strict mode: epoch of the leader lease */
	int64_t next_round;    /* monotonic ms: the next lease round or beat */
	bool beating;	       /* its round in flight has the beat */
	bool leaving;	       /* shutdown: its leave() was sent */
	bool locking;	       /* ... after the rebalance lock */
} slot_leases_t;

typedef struct slot {
	int idx;		   /* its place in r->slots */
	pgo_conn_t conn;	   /* its connection (db/conn.c) */
	slot_state_t state;	   /* where its cycle is (cycle.c moves it) */
	PGresult *claimed;	   /* rows of the batch: events point into it */
	pgo_batch_t batch;	   /* the batch the sink works on */
	settle_row_t *fix;	   /* per event, filled when settling */
	pgo_arena_t *arena;	   /* per-cycle memory, reset after settling */
	pgo_loop_io_t *io;	   /* the connection's socket in the loop */
	short revents;		   /* what the loop saw on it this turn */
	int64_t claim_started;	   /* monotonic ms, for the stats */
	int batch_limit;	   /* batch size asked for in this claim */
	int batch_bytes;	   /* and its byte cap (relay.batch_bytes) */
	int n_ok, n_retry, n_dead; /* the batch's plan, counted if it commits */
	bool wants_claim;   /* woken while busy: claim after this cycle */
	bool more;	    /* its last batch was full: claim again */
	slot_sweep_t sweep; /* the sweep below the floor (claim.c) */
	slot_cold_t cold;   /* cold to producers' wake-ups (relay.c) */
	int64_t claim_us;   /* a claim round without a sweep, us (average) */
	/* The cycle's phases (monotonic us), logged at debug when it ends:
	 * the claim round sent, the claim back, the batch handed to the
	 * sink, its verdicts in, round 2 sent. */
	struct {
		int64_t sent, claim, submit, done, settle;
		bool sweep; /* the claim swept pages below the floor */
		int pages;  /* how many */
	} t;
	slot_leases_t leases; /* membership and leases (shards.c) */
} slot_t;

/* The SQL texts of a relay, built once at start from the queue and the
 * mode (claim.c; adopted.c for an adopted table). */
typedef struct pgo_relay_sql {
	char claim[16384];  /* round 1's claim, prepared as pgoutbox_claim */
	char retry[2048];   /* round 2: retried events back into the queue */
	char dead[2048];    /* round 2: events to pgoutbox.dead_letters */
	char done[2048];    /* adopted tables: the acked events' `done` */
	char listen[160];   /* LISTEN on the queue's channel (slot 0) */
	char session[1024]; /* the relay's settings for its sessions */
	char local[1024];   /* the same for one transaction (pooled) */
} pgo_relay_sql_t;

/* The claim floor (floor.c): no fresh row of the queue has a lower id,
 * now or later; claims start there.  Probed on a connection of its own. */
typedef struct relay_floor {
	int64_t id;		/* the floor: claims start at this id */
	char line[24];		/* pending line ("" = none), see 006 */
	char *writers;		/* its writers: a text[] literal */
	bool used;		/* relay.claim_floor, not adopted */
	bool probing;		/* a probe is in flight */
	bool wanted;		/* a claim went out since the last */
	int64_t next;		/* monotonic ms: the next probe */
	int64_t interval;	/* ms between probes, by the rate */
	bool off;		/* the probe failed: floor stays put */
	unsigned gen;		/* +1 at each reset to 0 */
	unsigned sent_gen;	/* of the probe in flight */
	pgo_conn_t conn;	/* the probes' connection */
	pgo_conn_setup_t setup; /* its setup: the relay's settings */
	pgo_loop_io_t *io;	/* its socket in the loop */
	short revents;		/* what the loop saw on it this turn */
} relay_floor_t;

/* The wake-up handshake (wake.c): the sleeper lock's connection. */
typedef struct relay_wake {
	wake_state_t state; /* where the handshake is (the header of wake.c) */
	bool busy;	    /* 2+ notifications at once while asleep: release */
	int64_t linger_until;	/* awake and dry: ask for the lock then */
	int64_t linger_end;	/* no lingering from then (0: none) */
	int linger_ms;		/* relay.wake_linger */
	pgo_conn_t conn;	/* the sleeper lock's connection */
	pgo_conn_setup_t setup; /* its setup: no timeouts */
	pgo_loop_io_t *io;	/* its socket in the loop */
	short revents;		/* what the loop saw on it this turn */
	char lock_sql[256];	/* take the lock, then NOTIFY */
	char unlock_sql[160];	/* give it back */
} relay_wake_t;

/* When the slots claim, and the relay's other timers (relay.c). */
typedef struct relay_sched {
	bool kick;	       /* start a claim on an idle slot */
	bool more;	       /* last batch was full: claim on all */
	int64_t next_poll;     /* fallback poll (monotonic ms) */
	int64_t retry_due[32]; /* retries this relay scheduled (ms) */
	int nretry_due;	       /* how many of retry_due are set (cycle.c) */
	int64_t next_maintain; /* pgoutbox.maintain() due (ms) */
	int64_t next_health;   /* pgoutbox.health() due (ms) */
	bool chore_health;     /* the chore in flight: health (else
				* maintenance) */
} relay_sched_t;

/* The sink's outages: while down, no claims. */
typedef struct relay_outage {
	bool down;	     /* the sink said its downstream is down */
	char why[256];	     /* ... and why */
	int64_t pause_until; /* a batch was refused: no claims before */
	int64_t backoff;     /* current pause after an outage, ms */
} relay_outage_t;

/* What the relay tells its operator (relay.c, observe.c). */
typedef struct relay_stats {
	pgo_relay_stats_t total;      /* since the start */
	pgo_relay_stats_t last;	      /* at the previous stats line */
	int64_t last_at;	      /* when that line was written */
	int64_t next;		      /* the next stats line (0: none) */
	struct pgo_monitor *mon;      /* metrics, endpoint, sd_notify */
	pgo_relay_metrics_t *metrics; /* its series (observe.c) */
} relay_stats_t;

/* Membership (shards.c): slot 0 announces the relay in pgoutbox.relays
 * with its mode (pgoutbox.relay_beat()), so that relays of another mode
 * on the queue see each other. */
typedef struct relay_members {
	bool checked;		  /* the first beat is done: no claims before */
	bool beat_off;		  /* relay_beat() refused us: no beats */
	bool refused;		  /* the first beat found another mode: stop */
	char conflicts[512];	  /* the relays of another mode last logged */
	int64_t conflicts_logged; /* monotonic ms, when */
} relay_members_t;

/* How the run goes and how it ended. */
typedef struct relay_run {
	volatile sig_atomic_t stop;   /* SIGTERM/SIGINT seen (2: logged) */
	volatile sig_atomic_t reload; /* SIGHUP seen */
	int64_t drain_until;	      /* stopping: batches get until then */
	char errmsg[512];	      /* why it ended (pgo_relay_errmsg) */
	int fatal_code;		      /* of the setup refusal that ended it */
} relay_run_t;

/* A turn of the relay's loop (pgo_relay_turn_*): what its first half
 * decided for the second, and how the run stands. */
typedef struct relay_turn {
	int64_t retry_next; /* the next retry due (0: none) */
	bool paused;	    /* the sink's outage: no claims this turn */
	bool fatal;	    /* a fatal error ends the run */
} relay_turn_t;

/* What a relay of a fleet (fleet.c) shares with the fleet's other
 * relays: the loop, the sink (the fleet attaches it and is its host),
 * the metrics and their endpoint; and the name of its database. */
typedef struct pgo_relay_shared {
	pgo_loop_t *loop;
	struct pgo_monitor *mon;
	const char *database; /* in subjects, labels, the source header */
} pgo_relay_shared_t;

struct pgo_relay {
	/* What it relays, fixed at start. */
	pgo_conf_t *conf;  /* the configuration (reloadable keys change) */
	pgo_sink_t *sink;  /* where the events go */
	int mode;	   /* pgo_mode_t, fixed at start */
	bool fair;	   /* set_queue(fair): read at start (adopted.c) */
	char subject[160]; /* log prefix "relay outbox -> stdout" */
	char app_name[64]; /* application_name of the sessions */
	char queue[64];	   /* relay.queue (not reloadable), for the setup */
	/* An adopted table's map (adopted.c), NULL for pgoutbox's own
	 * queues: one row of pgoutbox.adopted. */
	PGresult *adopted;
	/* A queue captured through the WAL (wal.c), NULL for a table. */
	struct relay_wal *wal;
	bool pooled;	     /* through a transaction pooler (pooler.c) */
	pgo_relay_sql_t sql; /* its statements (claim.c) */
	/* The slots: one connection and one cycle each (cycle.c). */
	char missing_hint[256]; /* setup.missing_hint: relay.queue is wrong */
	pgo_conn_setup_t setup; /* slot 0: with LISTEN */
	pgo_conn_setup_t setup_quiet; /* the other slots: without */
	slot_t slots[MAX_SLOTS];      /* nslots of them are in use */
	int nslots;		      /* relay.in_flight, 1..MAX_SLOTS */
	pgo_loop_t *loop;	      /* the one loop: slots, sink, wake-ups */
	pgo_sink_host_t host;	      /* what the sink is attached with */
	unsigned rnd;		      /* jitter state (settle delays) */
	relay_sched_t sched;	      /* when to claim, chores' timers */
	relay_outage_t outage;	      /* the sink's outages */
	relay_floor_t floor;	      /* the claim floor (floor.c) */
	relay_wake_t wake;	      /* the sleeper lock (wake.c) */
	relay_members_t members; /* membership, the mode check (shards.c) */
	relay_stats_t stats;	 /* stats line, metrics (observe.c) */
	relay_run_t run;	 /* stop, reload, how it ended */
	relay_turn_t turn;	 /* the loop's turn (pgo_relay_turn_*) */
	/* A fleet's relay: the loop, sink and monitor are the fleet's. */
	bool shared;
	/* ... and what it reads before its first turn, read in a thread
	 * (start.c); NULL when none runs. */
	struct pgo_relay_start *start;
	/* Its host names' addresses, looked up in a thread (start.c), for
	 * its connections (pgo_conn_setup_t.resolved); NULL: libpq's. */
	pgo_resolved_t *resolved;
	struct pgo_relay_start *resolve;    /* a lookup running, or NULL */
	int64_t resolved_at;		    /* when the last one started */
	char database[PGO_DB_NAME_MAX + 1]; /* its name ("": one database) */
};

/* relay.c: a relay in a fleet's loop (fleet.c) */

/* A relay of conf's database into sink, on the fleet's loop and metrics
 * (sh); the sink is the fleet's to attach.  NULL with err filled. */
pgo_relay_t *pgo_relay_new_shared(pgo_conf_t *conf, pgo_sink_t *sink,
				  const pgo_relay_shared_t *sh,
				  pgo_error_t *err);
/* Before the first turn: the pooler probe (!wait, a fleet's relay: in
 * a thread with what the relay reads at start, start.c; PGO_ERR_AGAIN
 * until it is done and while the database cannot be reached; wait:
 * until it can, turning the loop), then the run's timers.
 * PGO_ERR_INVALID, PGO_ERR_SCHEMA (errmsg set) for a refusal.  A queue
 * captured through the WAL begins its stream instead (wal.c); the
 * turn's halves and the end go to wal.c likewise. */
int pgo_relay_begin(pgo_relay_t *r, bool wait);
/* The relay's statements and session setups, from its mode, fairness
 * and adopted table's map (claim.c, adopted.c). */
void pgo_relay_build_sql(pgo_relay_t *r);

/* start.c: what a fleet's relay reads before its first turn */

typedef struct pgo_relay_start pgo_relay_start_t;
/* Starts the thread (r->start) or takes what it found: PGO_OK and
 * *kind (the pooler) once it is done and the database answered;
 * PGO_ERR_AGAIN while it runs (r->start set: the loop is woken when it
 * is done) or after a failure worth a retry (r->start NULL); another
 * error (errmsg set) when the relay cannot run on this database. */
int pgo_start_step(pgo_relay_t *r, pgo_pooler_t *kind);
/* The relay gives its start thread up (NULL: none). */
void pgo_start_abandon(pgo_relay_start_t *j);
/* A running fleet relay's host names looked up again when due, in a
 * thread; the addresses found taken when it is done.  Returns when it
 * is next due (0: the loop is woken). */
int64_t pgo_start_resolve(pgo_relay_t *r, int64_t now);
/* The first half of a turn: timers, reload, stop, the slots' scheduling.
 * Returns the relay's deadline for the loop's wait (0: none), or sets
 * *over when the run is over (stopped and drained, or fatal). */
int64_t pgo_relay_turn_prepare(pgo_relay_t *r, int64_t now, bool *over);
/* The second half, after the loop's wait: every connection stepped. */
void pgo_relay_turn_step(pgo_relay_t *r);
/* The run is over: leave the memberships, close the connections.
 * PGO_OK, or the fatal error's code. */
int pgo_relay_end(pgo_relay_t *r);
/* Before pgo_relay_end(): sends the memberships' leave() without
 * waiting, so that a fleet ending many relays waits once for all. */
void pgo_relay_end_send(pgo_relay_t *r);
/* The sink host's health(), for one relay. */
void pgo_relay_sink_health(void *ctx, int up, const char *reason);
/* Slots inside a cycle. */
int pgo_relay_busy(const pgo_relay_t *r);

/* claim.c: SQL texts, parameters and the batch (no I/O) */

/* The parameters of one claim round, pointing into itself and the slot. */
typedef struct pgo_claim_req {
	char limit[16], floor[24], bytes[16], lo[32], hi[32];
	const char *params[6]; /* of the prepared claim */
	int nparams;
	const char *pages[1]; /* of the table's size; pages[0] NULL: none */
} pgo_claim_req_t;

/* Builds every SQL text of a relay of pgoutbox's own queue v->queue in
 * the given mode (pgo_mode_t): session settings, LISTEN, claim, retry and
 * dead-letter statements; sql->done empty.  fair: the queue's claims are
 * fair across keys (set_queue(fair => true)); only the concurrent claim
 * differs.  Pure: the unit tests read what it writes. */
void pgo_claim_sql_build(pgo_relay_sql_t *sql, int mode, bool fair,
			 const struct pgo_conf_values *v);
/* Fills the next claim's parameters; decides whether it sweeps pages of
 * the table below the floor. */
void pgo_claim_prepare(pgo_relay_t *r, slot_t *s, int64_t now,
		       pgo_claim_req_t *q);
/* Whether a sweep going on is due for its next pages now; if not, its
 * next part's time goes to s->sweep.next. */
bool pgo_claim_sweep_due(const pgo_relay_t *r, slot_t *s, int64_t now);
/* The claim round's statement index of the claim (after the table's
 * size), and of the table's size (-1: not in the round). */
int pgo_claim_index(const slot_t *s);
int pgo_claim_pages_index(const slot_t *s);
/* How long a round trip to PostgreSQL may take before the connection is
 * dropped: statement_timeout plus lease_timeout. */
int64_t pgo_claim_round_limit(const struct pgo_conf_values *v);
/* The fallback poll's interval: relay.poll_interval, at most the sweep
 * interval of the claim floor. */
int64_t pgo_claim_poll_ms(const pgo_relay_t *r);
/* Whether a claim's result was cut by relay.batch or relay.batch_bytes:
 * more is waiting. */
bool pgo_claim_full(const slot_t *s, const PGresult *res);
/* A claim came back: moves the sweep on, and ends it at the table's end
 * (pages: the table's size in the round, or NULL) or when the claim
 * failed (res NULL). */
void pgo_claim_swept(pgo_relay_t *r, slot_t *s, const PGresult *res,
		     const PGresult *pages);
/* Builds s->batch from the claim result (taken over by the slot), in id
 * order.  Returns the number of events, or -1 without memory. */
int pgo_claim_batch(pgo_relay_t *r, slot_t *s, PGresult *res);
/* A fleet's relay names its database in an event's headers
 * ("pgoutbox-source", last, in arena); the headers as they are for a
 * relay of one database, or without memory. */
const char *pgo_claim_source_headers(const pgo_relay_t *r, pgo_arena_t *arena,
				     const char *headers);
/* The 10 array parameters of the retry or dead-letter INSERT for the
 * events whose verdict is kind (col[] initialized here; free them).
 * Returns how many, or -1 without memory. */
int pgo_claim_rows_params(const slot_t *s, pgo_ack_t kind, pgo_buf_t col[10]);
/* The ids published (ok) or not (!ok), as a bigint[] literal (ids
 * initialized here); false without memory. */
bool pgo_claim_ids(const pgo_batch_t *b, bool ok, pgo_buf_t *ids);
/* The shard of event i of the slot's batch (text). */
const char *pgo_claim_shard_of(const slot_t *s, size_t i);

/* adopted.c: relaying a table the application already has */

/* Reads the map of the configured queue when it is an adopted table
 * (blocking, before the loop runs): r->adopted set, or left NULL for one
 * of pgoutbox's own queues.  PGO_ERR_INVALID when the mode cannot relay
 * it. */
int pgo_adopted_load(pgo_relay_t *r, pgo_error_t *err);
/* What pgo_adopted_read() found on a connection (no relay, no log: a
 * fleet's start thread reads it, start.c). */
typedef struct pgo_adopted_found {
	PGresult *map;	/* the map's row; NULL: one of pgoutbox's own */
	bool fair;	/* own queue: set_queue(fair) */
	char warn[512]; /* the map could not be read: why ("": it was) */
} pgo_adopted_found_t;
void pgo_adopted_read(PGconn *pg, const char *queue, pgo_adopted_found_t *out);
/* Takes what was found into r (map moved): logged, the mode checked.
 * PGO_ERR_INVALID when the mode cannot relay it. */
int pgo_adopted_apply(pgo_relay_t *r, pgo_adopted_found_t *found,
		      pgo_error_t *err);
void pgo_adopted_free(pgo_relay_t *r);
/* Whether the adopted table is captured through the WAL (wal.c streams
 * its inserts; wal_adopted.c evaluates the map). */
bool pgo_adopted_wal(const pgo_relay_t *r);
/* One expression (or name) of the map, borrowed from r->adopted. */
typedef enum pgo_adopted_col {
	PGO_ADOPTED_TBL = 0, /* "schema"."table" */
	PGO_ADOPTED_EID,     /* the quoted bigint event id column */
	PGO_ADOPTED_TOPIC,
	PGO_ADOPTED_KEY,
	PGO_ADOPTED_TYPE,
	PGO_ADOPTED_PAYLOAD,
	PGO_ADOPTED_HEADERS,
	PGO_ADOPTED_CREATED,
	PGO_ADOPTED_RELID /* the table's oid, as text */
} pgo_adopted_col_t;
const char *pgo_adopted_map(const pgo_relay_t *r, pgo_adopted_col_t col);
/* Builds the claim, LISTEN, retry, dead-letter and done statements from
 * the map into r->sql, over what pgo_claim_sql_build() wrote (pure). */
void pgo_adopted_build_sql(pgo_relay_t *r);

/* settle.c: the settle rules (pure) */

typedef struct pgo_settle_rules {
	int mode;   /* pgo_mode_t */
	int poison; /* pgo_poison_t */
	int max_attempts;
	int64_t retry_base, retry_max; /* ms */
} pgo_settle_rules_t;

typedef struct pgo_settle_plan {
	bool unavailable;	   /* roll everything back, spend nothing */
	int n_ok, n_retry, n_dead; /* the batch's plan, counted if it commits */
	int n_halted;		   /* of n_retry: kept with no run time */
	size_t first_failed; /* first event not OK (n: none), for the log */
	/* Ordered modes: events the sink took although an earlier event of
	 * their key failed in the same batch, so a consumer may already
	 * have them out of order; the first such, for the log. */
	int n_overtaken;
	size_t first_overtaken, overtaken_behind;
} pgo_settle_plan_t;

/* Decides each event's fate from the sink's verdicts: b->acks[i] ends as
 * OK, RETRY or DEAD (b->errors[i] says why), fix[i] gets the attempts to
 * store and the retry delay (-1: halted).  failed is scratch of b->n
 * entries (ordered modes).  jitter(ctx) returns a value in [0,1). */
void pgo_settle_plan(const pgo_settle_rules_t *rules, pgo_batch_t *b,
		     settle_row_t *fix, size_t *failed,
		     double (*jitter)(void *ctx), void *ctx,
		     pgo_settle_plan_t *plan);

/* cycle.c: a slot's state machine (the only writer of slot->state) */

/* What moves a slot from one state to the next. */
typedef enum slot_event {
	SLOT_EV_CLAIM_SENT,    /* IDLE -> CLAIMING: round 1 sent */
	SLOT_EV_LEASE_SENT,    /* IDLE -> REBALANCING: a lease round sent */
	SLOT_EV_CHORE_SENT,    /* IDLE -> CHORE: maintenance or health sent */
	SLOT_EV_ROWS,	       /* CLAIMING -> PUBLISHING: the sink has them */
	SLOT_EV_END_TX,	       /* CLAIMING, PUBLISHING -> SETTLING: nothing
				* to publish (empty, failed, no memory):
				* COMMIT or ROLLBACK sent */
	SLOT_EV_VERDICTS,      /* PUBLISHING -> SETTLING: the sink's
				* verdicts in (ok, failed or unavailable),
				* round 2 sent */
	SLOT_EV_SETTLE_FAILED, /* SETTLING -> SETTLING: round 2 failed, its
				* ROLLBACK sent */
	SLOT_EV_SETTLED,       /* SETTLING -> IDLE: round 2 came back */
	SLOT_EV_ROUND_DONE,    /* REBALANCING, CHORE -> IDLE */
	SLOT_EV_SEND_FAILED,   /* any -> IDLE: a round could not be sent,
				* the connection is down */
	SLOT_EV_LOST,	       /* any -> IDLE: the connection was lost; it
				* reconnects (conn.c), the cycle is over */
	SLOT_EV_ABANDONED      /* any -> IDLE: stopping, out of time */
} slot_event_t;

/* The state after ev in state from; from itself when ev cannot happen
 * there (pure: the transitions of the header of cycle.c). */
slot_state_t pgo_slot_next(slot_state_t from, slot_event_t ev);

/* What a claim's answer decides for the slot and the relay. */
typedef struct pgo_claim_outcome {
	bool more;	/* the slot claims again at once */
	int relay_more; /* r->sched.more becomes this (-1: unchanged) */
	int dry_wakes;	/* the slot's dry claims after producers' NOTIFYs */
	bool went_cold; /* this claim made the slot cold (COLD_AFTER) */
} pgo_claim_outcome_t;

/* A claim found n rows (full: cut by relay.batch or batch_bytes) in the
 * relay's mode and wake-up state; wake_claim: it answered producers'
 * notifications, after dry_wakes dry ones (pure). */
void pgo_cycle_claim_outcome(int mode, wake_state_t wake, int n, bool full,
			     bool wake_claim, int dry_wakes,
			     pgo_claim_outcome_t *out);
/* The pause after the sink refused a batch as unavailable: 100 ms, then
 * doubling, at most max (pure). */
int64_t pgo_cycle_backoff(int64_t backoff, int64_t max);

/* What round 2 sends after the sink's verdicts (pgo_cycle_round2()). */
#define PGO_ROUND2_ROLLBACK  0x01u /* the sink is down: all back */
#define PGO_ROUND2_UNARCHIVE 0x02u /* failed events leave the archive */
#define PGO_ROUND2_DONE	     0x04u /* adopted: the acked rows' `done` */
#define PGO_ROUND2_RETRY     0x08u /* retried events back in */
#define PGO_ROUND2_DEAD	     0x10u /* events to dead letters */
#define PGO_ROUND2_COMMIT    0x20u /* and COMMIT */
/* The statements of round 2 for a settle plan (pure). */
unsigned pgo_cycle_round2(const pgo_settle_plan_t *plan, bool adopted);

/* Starts a claim round on an idle, ready slot. */
void pgo_cycle_claim(pgo_relay_t *r, slot_t *s);
/* Starts a lease round (ordered, strict) on an idle, ready slot. */
void pgo_cycle_rebalance(pgo_relay_t *r, slot_t *s);
/* Starts a chore (maintenance or health) on slot 0 when one is due;
 * true when it did. */
bool pgo_cycle_chore(pgo_relay_t *r, slot_t *s, int64_t now);
/* The slot's round came back: go on with the cycle. */
void pgo_cycle_round(pgo_relay_t *r, slot_t *s);
/* The sink host's done(). */
void pgo_cycle_sink_done(void *ctx, pgo_batch_t *batch);
/* The connection was lost: cancel the publish, forget the batch. */
void pgo_cycle_lost(pgo_relay_t *r, slot_t *s);
/* Stopping and out of time: roll back a batch the sink still holds. */
void pgo_cycle_abandon(pgo_relay_t *r, slot_t *s);

/* The earliest retry the settled batches scheduled (0: none); drops
 * those already due and says so through *due_now. */
int64_t pgo_cycle_next_retry(pgo_relay_t *r, int64_t now, bool *due_now);

/* observe.c: metrics, readiness, the database gauges */

/* Makes the registry, the endpoint (metrics.listen) and the gauges'
 * connection; PGO_ERR_INVALID when the endpoint cannot listen. */
int pgo_observe_init(pgo_relay_t *r, pgo_error_t *err);
void pgo_observe_destroy(pgo_relay_t *r);
/* Before the loop's turn: READY=1 once connected, the gauge query when
 * due; returns its deadline (0: none). */
int64_t pgo_observe_turn(pgo_relay_t *r, int64_t now);
/* After the loop's turn: drives the gauges' connection. */
void pgo_observe_step(pgo_relay_t *r);
/* Before a scrape: the counters and the gauges kept in memory. */
void pgo_observe_collect(void *relay);
/* /readyz: every claiming connection up and the sink taking events;
 * false with why. */
bool pgo_observe_ready(void *relay, char *why, size_t size);
void pgo_observe_stopping(pgo_relay_t *r);
/* The sink takes events (not down, no batch refused since). */
bool pgo_observe_sink_up(const pgo_relay_t *r);
/* The sink said down or refused a batch as unavailable (up false), or
 * said up or took a batch (up true): outages are counted here. */
void pgo_observe_sink(pgo_relay_t *r, bool up);
/* A lease round won n shards the slot did not hold. */
void pgo_observe_takeovers(pgo_relay_t *r, int n);
/* A beat found n live relays of the queue in another mode. */
void pgo_observe_mode_conflicts(pgo_relay_t *r, int n);
/* The sink's verdicts are in: commit-to-ack of the acknowledged events. */
void pgo_observe_acked(pgo_relay_t *r, const pgo_batch_t *b);
/* A batch committed: its duration. */
void pgo_observe_settled(pgo_relay_t *r, const slot_t *s, int64_t now);

/* floor.c: the claim floor and its probes */

/* Sets up the probes' connection (relay.claim_floor on, not an adopted
 * table); false without memory.  After the statements are built. */
bool pgo_floor_init(pgo_relay_t *r);
/* Through a transaction pooler: no session state on its connection. */
void pgo_floor_pooled(pgo_relay_t *r);
/* Closes the connection (a probe in flight is dropped). */
void pgo_floor_close(pgo_relay_t *r);
/* Frees what the floor keeps. */
void pgo_floor_free(pgo_relay_t *r);
/* A claim went out: the floor may move, probe when due. */
void pgo_floor_claiming(pgo_relay_t *r);
/* Back to 0, claims from id 0 again: with a lost connection. */
void pgo_floor_reset(pgo_relay_t *r);
/* Before the loop's turn: sends a probe when due, registers the socket;
 * returns its deadline (0: none). */
int64_t pgo_floor_turn(pgo_relay_t *r, int64_t now);
/* After the loop's turn: drives the connection, takes a probe's answer. */
void pgo_floor_step(pgo_relay_t *r);

/* wake.c: the sleeper lock */

/* Sets up the sleeper connection (relay.listen on); false without
 * memory. */
bool pgo_wake_init(pgo_relay_t *r);
/* Closes it (cancelling a wait for the lock); the lock goes with it. */
void pgo_wake_close(pgo_relay_t *r);
/* Once a turn, after the slots were scheduled: asks for the lock when a
 * slot is about to depend on a NOTIFY, releases it when every slot found
 * work; polls soon while the connection is down. */
bool pgo_wake_side_by_side(const pgo_relay_t *r, const pgo_conn_t *c);
/* One of the notifications came from the relay's own wake connection. */
bool pgo_wake_own(const pgo_relay_t *r, const pgo_conn_t *c);
void pgo_wake_schedule(pgo_relay_t *r, int64_t now);
/* Registers the connection's socket for the turn. */
void pgo_wake_pollfd(pgo_relay_t *r, int64_t *deadline);
/* Drives the connection after the turn. */
void pgo_wake_step(pgo_relay_t *r);

/* shards.c: membership (every mode) and shard leases (ordered modes).
 * A slot's membership round is its lease round, which on slot 0 starts
 * with the relay's beat; a concurrent relay's slot 0 runs the beat
 * alone. */
void pgo_shards_init(pgo_relay_t *r, slot_t *s);
void pgo_shards_free(slot_t *s);
/* The slot's leases are gone (connection lost or new). */
void pgo_shards_reset(pgo_relay_t *r, slot_t *s);
/* When the slot's next membership round is due (monotonic ms; 0: it
 * runs none now: not a member, not idle and connected, or waiting for
 * slot 0's first beat). */
int64_t pgo_shards_next(const pgo_relay_t *r, const slot_t *s);
/* True when the slot should run its membership round now. */
bool pgo_shards_due(pgo_relay_t *r, slot_t *s, int64_t now);
/* Queues the membership round; false when it could not be sent. */
bool pgo_shards_send(pgo_relay_t *r, slot_t *s);
/* The round came back: the beat's verdict (the first one refuses to run
 * next to relays of another mode: r->refused), the owned shards. */
void pgo_shards_done(pgo_relay_t *r, slot_t *s);
/* Shutdown: releases the slot's leases and member row (blocking, short). */
void pgo_shards_leave(pgo_relay_t *r, slot_t *s);
/* The same in two steps: the statement sent (false: nothing to leave or
 * it could not be sent), then its answer waited for. */
bool pgo_shards_leave_send(pgo_relay_t *r, slot_t *s);
void pgo_shards_leave_finish(pgo_relay_t *r, slot_t *s);

/* What a lease round changed for a slot (pgo_shards_change()). */
typedef struct pgo_lease_change {
	bool changed;	 /* the shards or their epochs changed: new map */
	int gained;	 /* shards it holds now and did not before */
	int released;	 /* shards it held and gave up */
	bool kick;	 /* it holds shards: claim at once (a backlog) */
	bool others_now; /* it holds fewer: the relay's other slots run
			  * their lease round at once, for the freed ones */
} pgo_lease_change_t;

/* Whether a lease last held by owner (NULL or "": never held) is taken
 * over from another relay by member ("<relay>/<slot>"): not a first
 * grant, not a lease moved between the relay's own connections as they
 * share the shards out, nor one a relay restarted under its name takes
 * back (pure). */
bool pgo_shards_foreign(const char *owner, const char *member);
/* How many elements of the integer array literal `from` ("{1,2}") the
 * literal `set` lacks (pure). */
int pgo_shards_missing(const char *set, const char *from);
/* From the shards and epochs a slot held (literals) to those a lease
 * round gave it (pure). */
void pgo_shards_change(const char *old_shards, const char *old_epochs,
		       const char *shards, const char *epochs,
		       pgo_lease_change_t *out);
/* The ordered claim's epoch map: element shard + 1 is the epoch of an
 * owned shard, NULL for the others, max(all, highest shard + 1) elements
 * ("{NULL,7,7,NULL}").  Malloc'd; NULL without memory (pure). */
char *pgo_shards_epoch_map(const char *shards, const char *epochs, int all);

#endif
