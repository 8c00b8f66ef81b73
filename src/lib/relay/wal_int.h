/*
 * wal_int.h — what the files of the WAL relay share (not installed):
 * the relay's state (struct relay_wal), its FIFO of committed
 * transactions, and the calls between
 *
 *   wal.c           the relay's run: load, the loop, batches, settle
 *   wal_stream.c    the replication connection: setup, the stream,
 *                   pgoutput's messages, standby status updates
 *   wal_envelope.c  a logical message's envelope -> the event
 *   wal_adopted.c   an adopted table's inserts (pgoutput's Relation and
 *                   Insert) -> rows -> the events, by the table's map
 */
#ifndef PGO_RELAY_WAL_INT_H
#define PGO_RELAY_WAL_INT_H

#include "relay/wal.h"
#include "base/arena.h"
#include "base/buf.h"
#include "loop/loop.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

typedef struct wal_ev {
	pgo_event_t ev; /* its strings point into mem */
	char *mem;	/* malloc'd (pgo_wal_envelope()) */
	bool acked;	/* the sink acked it */
	bool row;	/* mem is an adopted table's row (a JSON object
			 * of its columns' text), ev not made yet */
} wal_ev_t;

/* A committed transaction: its events of the queue, in order. */
typedef struct wal_txn {
	struct wal_txn *next;
	uint64_t end_lsn;  /* the end of its commit record */
	int64_t commit_us; /* its commit time, Unix us */
	size_t n, cap;
	wal_ev_t *evs;
} wal_txn_t;

typedef enum wal_state {
	WAL_DOWN = 0,	/* no connection; connect at retry_at */
	WAL_CONNECTING, /* PQconnectPoll() until it is made */
	WAL_CHECKING,	/* the slot's check in flight */
	WAL_STARTING,	/* START_REPLICATION in flight */
	WAL_STREAMING	/* in COPY BOTH: the stream */
} wal_state_t;

struct relay_wal {
	char slot[80];		/* pgoutbox_<queue> */
	char prefix[80];	/* pgoutbox:<queue> */
	PGconn *pg;		/* the replication connection */
	wal_state_t state;	/* see wal_stream.c */
	pgo_loop_io_t *io;	/* its socket in the loop */
	short revents;		/* what the loop saw on it */
	int64_t retry_at;	/* DOWN: connect then (monotonic ms) */
	bool standing_by;	/* another relay streams: said so once */
	short want;		/* setup: the events libpq waits for */
	int64_t setup_until;	/* setup: give up then (monotonic ms) */
	PGresult *check;	/* CHECKING: the check's result */
	char last_err[512];	/* the last connection error logged */
	wal_txn_t *head, *tail; /* committed transactions, commit order */
	wal_txn_t *cur;		/* between 'B' and 'C' */
	size_t pending;		/* events in the FIFO */
	bool in_sink;		/* the sink holds batch */
	pgo_batch_t batch;	/* the batch in the sink */
	wal_ev_t **src;		/* batch event i -> its event */
	size_t batch_txns;	/* transactions the batch covers */
	pgo_arena_t *arena;	/* the batch's memory */
	uint64_t received;	/* the highest WAL end received */
	uint64_t confirmed;	/* the flush position to report */
	uint64_t reported;	/* the one last reported */
	uint64_t sent_end;	/* the last keepalive's sent position */
	int64_t next_status;	/* monotonic ms: the next status update */
	bool reply;		/* the server asked for one */
	PGconn *dead_pg;	/* plain SQL: dead letters, the map */
	/* An adopted table captured through the WAL (wal_adopted.c). */
	bool adopted;	/* streams its inserts, not messages */
	uint32_t relid; /* the table's oid */
	char **cols;	/* its columns, from the last Relation */
	size_t ncols;
	char *map_sql;	     /* rows -> events (malloc'd) */
	bool map_prepared;   /* as pgoutbox_map on dead_pg */
	bool map_stale;	     /* a Relation came since: prepare again */
	bool fatal;	     /* stop: the map no longer fits (errmsg) */
	bool eval_busy;	     /* the map's statement runs on dead_pg */
	size_t eval_n;	     /* for the FIFO's first eval_n rows */
	unsigned eval_epoch; /* sent at this epoch */
	PGresult *plain_res; /* dead_pg's result, while the end is not in */
	enum {
		WAL_PLAIN_DOWN = 0,
		WAL_PLAIN_CONNECTING, /* PQconnectPoll() driven by the loop */
		WAL_PLAIN_READY
	} plain_state;
	int64_t plain_until; /* connecting given up then (monotonic ms) */
	int64_t plain_limit; /* database.connect_timeout, ms */
	bool plain_failed;   /* connecting failed: plain_why says why */
	char plain_why[256];
	pgo_buf_t eval_rows; /* the rows' JSON while the map is prepared */
	bool eval_preparing; /* the map's PREPARE runs on dead_pg */
	/* Dead letters being written (wal_dead.c), and the settling of
	 * the batch that waits for them. */
	bool dead_busy;		  /* their INSERT runs or waits for dead_pg */
	bool dead_sent;		  /* it runs */
	pgo_buf_t dead_sql;	  /* the INSERT, until sent */
	const char **dead_params; /* its values (arena) */
	int dead_nparams;
	unsigned dead_epoch; /* sent at this epoch */
	size_t *dead_idx;    /* the batch's events written (arena) */
	size_t dead_n;
	size_t settle_failed;	 /* events of the batch not acked */
	long long settle_first;	 /* the first of them */
	bool settle_unavailable; /* one of them for an unavailable sink */
	char settle_why[200];	 /* its error */
	pgo_loop_io_t *plain_io; /* dead_pg's socket while it runs */
	short plain_revents;	 /* what the loop saw on it */
	unsigned epoch;		 /* +1 each time the stream is lost */
	int64_t backoff;	 /* after a batch not all acked, ms */
	int64_t pause_until;	 /* no batch before (monotonic ms) */
	int64_t refused_backoff; /* a fleet's: after a refusal, ms */
	int rc;			 /* how the run ends (PGO_OK: stopped) */
};

/* wal.c: the FIFO. */
void pgo_wal_txn_free(wal_txn_t *t);
/* Frees every transaction read, the open one too. */
void pgo_wal_fifo_clear(struct relay_wal *w);

/* wal_adopted.c: an adopted table's inserts. */
/* Builds the map's statement: false without memory. */
bool pgo_wal_adopted_init(pgo_relay_t *r);
void pgo_wal_adopted_free(struct relay_wal *w);
/* pgoutput's 'R' and 'I' messages (the table's; others ignored). */
void pgo_wal_adopted_relation(pgo_relay_t *r, const char *m, size_t len);
void pgo_wal_adopted_insert(pgo_relay_t *r, const char *m, size_t len);
/* How many of the first k transactions hold no row (all events). */
size_t pgo_wal_adopted_ready(const struct relay_wal *w, size_t k);
/* Sends the map's statement for the rows of the first k transactions:
 * PGO_ERR_AGAIN while it runs (pgo_wal_adopted_poll() reads its result);
 * PGO_OK when they hold none; PGO_ERR_DB to try again later. */
int pgo_wal_adopted_eval(pgo_relay_t *r, size_t k);
/* Reads the statement's result when in: the rows become events, or
 * w->fatal (errmsg set) when the map does not fit them, or a pause
 * when the connection failed. */
void pgo_wal_adopted_poll(pgo_relay_t *r);

/* wal_plain.c: the connection of plain SQL (dead letters, the map).
 * PGO_OK with it in *pg when it is up; PGO_ERR_AGAIN while it connects
 * (started when down: the loop drives it, ask again on a later turn);
 * PGO_ERR_DB when connecting failed (why filled, once). */
int pgo_wal_plain(pgo_relay_t *r, PGconn **pg, char *why, size_t size);
/* One step of connecting, when the socket is ready or time is up. */
void pgo_wal_plain_step(pgo_relay_t *r, int64_t now);
/* deadline, or earlier while connecting. */
int64_t pgo_wal_plain_deadline(const pgo_relay_t *r, int64_t deadline);
/* Closes it (a statement in flight is gone). */
void pgo_wal_plain_close(pgo_relay_t *r);
/* After PQsend*() on it (sent: what that returned): watches the socket;
 * false (why filled, the connection closed) when it was not sent. */
bool pgo_wal_plain_sent(pgo_relay_t *r, PGconn *pg, int sent, char *why,
			size_t size);
/* Reads the result of the statement sent on it: PGO_ERR_AGAIN while it
 * is not all in (the socket watched for it); PGO_OK with its result in
 * *res (the first error of several, else the first; NULL when none
 * came; the caller clears it); PGO_ERR_DB when the connection failed
 * (why filled, the connection closed). */
int pgo_wal_plain_result(pgo_relay_t *r, PGresult **res, char *why,
			 size_t size);

/* wal_dead.c: dead letters.  Makes the INSERT of the batch's events
 * idx[0..n) (at most one row per id; idx is reordered and kept) and
 * sends it, now or once the plain connection is up: true, the batch
 * settled by pgo_wal_dead_poll() (perhaps already); false (logged) when
 * out of memory. */
bool pgo_wal_dead_start(pgo_relay_t *r, size_t *idx, size_t n);
/* Sends the INSERT once the plain connection is up, and reads its
 * result when in; then pgo_wal_settled() (not written: false). */
void pgo_wal_dead_poll(pgo_relay_t *r);
/* wal.c: the batch settled, its dead letters written (dead_ok) or not. */
void pgo_wal_settled(pgo_relay_t *r, bool dead_ok);

/* wal_stream.c: the connection. */
/* The loop's watch on the socket, for the state. */
void pgo_wal_set_io(pgo_relay_t *r);
/* The connection is gone (why logged when not NULL): see there. */
void pgo_wal_drop(pgo_relay_t *r, const char *why);
/* Starts connecting (DOWN -> CONNECTING). */
void pgo_wal_connect(pgo_relay_t *r);
/* One step of the setup; PGO_ERR_INVALID when no retry can help
 * (errmsg set). */
int pgo_wal_setup_step(pgo_relay_t *r, int64_t now);
/* A fleet's relay refused (errmsg: slot missing or lost, wal_level):
 * logged as an ERROR when new, tried again after a backoff. */
void pgo_wal_refused(pgo_relay_t *r, int64_t now);
/* Reads what the stream has; false when it went down meanwhile. */
bool pgo_wal_read(pgo_relay_t *r, int64_t now);
/* A standby status update at the confirmed position. */
void pgo_wal_send_status(pgo_relay_t *r, int64_t now);

#endif
