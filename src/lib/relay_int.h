/*
 * relay_int.h — what the relay's modules share: the relay handle, its
 * slots (one connection each, one claim/publish/settle cycle at a time)
 * and the claim, settle and shard-lease steps of a cycle.
 *
 *   relay.c   the loop: slots, wake-ups, timers, signals, stats
 *   claim.c   the claim SQL of each mode, building a batch from the
 *             claimed rows, the verdict rules, the settle round
 *   shards.c  ordered and strict modes: membership and shard leases
 */
#ifndef PGO_RELAY_INT_H
#define PGO_RELAY_INT_H

#include <signal.h>

#include "conn.h"
#include "loop.h"

#define MAX_SLOTS 16

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

typedef struct slot {
	int idx;
	pgo_conn_t conn;
	slot_state_t state;
	PGresult *claimed;     /* rows of the batch: events point into it */
	pgo_batch_t batch;     /* the batch the sink works on */
	settle_row_t *fix;     /* per event, filled when settling */
	pgo_arena_t *arena;    /* per-cycle memory, reset after settling */
	pgo_loop_io_t *io;     /* the connection's socket in the loop */
	short revents;	       /* what the loop saw on it this turn */
	int64_t claim_started; /* monotonic ms, for the stats */
	int batch_limit;       /* batch size asked for in this claim */
	int n_ok, n_retry, n_dead;
	bool wants_claim;    /* woken while busy: claim after this cycle */
	bool more;	     /* its last batch was full: claim again */
	bool probe;	     /* its claim round starts with the floor probe */
	bool sweep;	     /* its claim in flight starts from id 0 */
	bool sweeping;	     /* claims start from 0 until one is not full */
	int64_t sweep_at;    /* monotonic ms: the next sweep */
	int64_t sweep_floor; /* the floor when the sweep was sent */
	/* Ordered and strict modes: this connection's leases. */
	char member[96];	/* "<relay name>/<slot>" */
	int nowned;		/* shards owned (strict: 1 = leader) */
	char *owned_shards;	/* PostgreSQL array literal "{0,1,...}" */
	char *owned_epochs;	/* their epochs, same order */
	char leader_epoch[24];	/* strict mode: epoch of the leader lease */
	int64_t next_rebalance; /* monotonic ms */
} slot_t;

struct pgo_relay {
	pgo_conf_t *conf;
	pgo_sink_t *sink;
	int mode;	   /* pgo_mode_t, fixed at start */
	char subject[160]; /* log prefix "relay outbox -> stdout" */
	char app_name[64]; /* application_name of the sessions */
	char claim_sql[4096];
	char retry_sql[1024];
	char dead_sql[1024];
	char listen_sql[96];
	char set_sql[3][96];
	pgo_conn_setup_t setup;	      /* slot 0: with LISTEN */
	pgo_conn_setup_t setup_quiet; /* the other slots: without */
	slot_t slots[MAX_SLOTS];
	int nslots;
	pgo_loop_t *loop;	      /* the one loop: slots, sink, wake-ups */
	pgo_sink_host_t host;	      /* what the sink is attached with */
	bool sink_down;		      /* the sink said its downstream is down */
	char sink_down_why[256];      /* ... and why */
	int64_t drain_until;	      /* stopping: batches get until then */
	volatile sig_atomic_t stop;   /* SIGTERM/SIGINT seen (2: logged) */
	volatile sig_atomic_t reload; /* SIGHUP seen */
	bool kick;		      /* start a claim on an idle slot */
	bool more;		      /* last batch was full: claim on all */
	int64_t next_poll;	      /* fallback poll (monotonic ms) */
	int64_t retry_due[32];	      /* retries this relay scheduled (ms) */
	int nretry_due;
	int64_t sink_pause_until; /* the sink is down: no claims before */
	int64_t sink_backoff;	  /* current pause after an outage, ms */
	int64_t next_maintain;	  /* pgoutbox.maintain() due (ms) */
	int64_t next_health;	  /* pgoutbox.health() due (ms) */
	bool chore_health;	  /* the chore in flight: health (else
				   * maintenance) */
	int64_t next_stats;
	pgo_relay_stats_t stats;
	pgo_relay_stats_t stats_last; /* at the previous stats line */
	int64_t stats_last_at;	      /* when that line was written */
	/* The claim floor (claim.c): no fresh row of the queue has a lower
	 * id, now or later; claims start there. */
	int64_t floor;
	char floor_line[24]; /* pending line ("" = none), see 006 */
	char *floor_writers; /* its writers: a text[] literal */
	bool floor_probing;  /* a probe rides on some slot's claim */
	int64_t floor_next;  /* monotonic ms: the next probe */
	bool floor_off;	     /* the probe failed: floor stays put */
	unsigned rnd;	     /* jitter state */
	char errmsg[512];
};

/* claim.c */
/* Builds every SQL text of the relay: session settings, LISTEN, claim,
 * retry and dead-letter statements for the configured queue and mode. */
void pgo_claim_build_sql(pgo_relay_t *r);
/* Queues BEGIN + the claim on the slot's connection (READY). */
void pgo_claim_send(pgo_relay_t *r, slot_t *s);
/* The claim round's statement index of the claim (after the probe). */
int pgo_claim_index(const slot_t *s);
/* Takes the floor probe's result out of a finished claim round. */
void pgo_claim_floor_done(pgo_relay_t *r, slot_t *s);
/* The fallback poll's interval: relay.poll_interval, at most the sweep
 * interval of the claim floor. */
int64_t pgo_claim_poll_ms(const pgo_relay_t *r);
/* A claim came back: ends a sweep that reached the floor. */
void pgo_claim_swept(pgo_relay_t *r, slot_t *s, const PGresult *res);
/* Builds s->batch from the claim result (taken over by the slot), in id
 * order.  Returns the number of events, or -1 without memory. */
int pgo_claim_batch(pgo_relay_t *r, slot_t *s, PGresult *res);
/* Applies the verdict rules, queues the fix-ups and COMMIT. */
void pgo_claim_settle(pgo_relay_t *r, slot_t *s);
double pgo_relay_jitter(pgo_relay_t *r);
/* Remembers that a retry comes due at `due` (monotonic ms). */
void pgo_relay_retry_at(pgo_relay_t *r, int64_t due);

/* shards.c */
void pgo_shards_init(pgo_relay_t *r, slot_t *s);
void pgo_shards_free(slot_t *s);
/* The slot's leases are gone (connection lost or new). */
void pgo_shards_reset(pgo_relay_t *r, slot_t *s);
/* True when the slot should run a lease round now. */
bool pgo_shards_due(pgo_relay_t *r, slot_t *s, int64_t now);
void pgo_shards_send(pgo_relay_t *r, slot_t *s);
/* The lease round came back: adopt the owned shards. */
void pgo_shards_done(pgo_relay_t *r, slot_t *s);
/* Shutdown: releases the slot's leases and member row (blocking, short). */
void pgo_shards_leave(pgo_relay_t *r, slot_t *s);

#endif
