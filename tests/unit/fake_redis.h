/*
 * fake_redis.h — for the unit tests of the Redis sinks (test_redis.c,
 * test_sink_bullmq.c): a scripted fake Redis in the test's own process,
 * and a driver that hosts a sink the way the relay does (one pgo_loop_t,
 * a pgo_sink_host_t whose done() and health() record what they get,
 * pgo_sink_attach(), pgo_sink_submit(), turns of pgo_loop_run_once()).
 *
 * The fake records every command it gets (arguments joined by ' ', cut at
 * a NUL byte) and answers per its script: XADD with a stream id, SCRIPT
 * LOAD with the script's SHA-1, EVALSHA with the job id ob-<id> or
 * NOSCRIPT; an error for one event, a LOADING phase, a connection closed
 * after some commands, a slow AUTH, silence.
 */
#ifndef FAKE_REDIS_H
#define FAKE_REDIS_H

#include <stdbool.h>
#include <stdint.h>

#include "loop/loop.h"
#include "pgoutbox/sink.h"
#include "sinks/redis/redis.h"

#define FAKE_MAX_CMDS 4096

struct fake {
	int lfd, cfd; /* listening socket, the one client */
	int port;
	char in[1 << 20]; /* bytes received, unparsed */
	size_t in_len;
	char *cmds[FAKE_MAX_CMDS]; /* each command, arguments joined by ' ' */
	int ncmds;
	int connections; /* accepted so far */
	/* the script */
	const char *fail_id;  /* XADD/EVALSHA of this event id gets an error */
	const char *fail_raw; /* ... or these bytes, when set */
	int close_after;      /* close the client after this many XADDs or
			       * EVALSHAs (counted over all connections);
			       * 0 = never */
	int adds;	      /* XADDs and EVALSHAs seen */
	int loading;	      /* answer LOADING to this many adds */
	int noscript;	      /* answer NOSCRIPT to this many EVALSHAs */
	bool bad_sha;	      /* SCRIPT LOAD answers another SHA-1 */
	bool silent;	      /* never answer an add */
	int64_t hold_auth_ms; /* answer AUTH only after this long */
	int64_t auth_at;      /* when AUTH arrived */
	bool auth_pending;
	int add_before_auth_reply; /* protocol violations seen */
};

extern struct fake F;

/* Listens on a free port of 127.0.0.1 (or on port), forgetting what the
 * last fake saw. */
void fake_start(void);
void fake_start_on(int port);
/* Closes the client and the listening socket: nothing listens. */
void fake_stop(void);
void fake_close_client(void);
/* Accepts, reads and answers whatever is ready. */
void fake_step(void);
/* How many recorded commands start with prefix. */
int fake_count(const char *prefix);

/* A batch the test hands to the sink, and what the host saw of it. */
typedef struct job {
	pgo_batch_t b; /* first: done() finds the job from its batch */
	pgo_event_t ev[16];
	pgo_ack_t acks[16];
	const char *errors[16];
	int dones; /* pgo_sink_done() calls for it */
} job_t;

/* What the host's health() was told. */
struct health {
	int downs, ups;	  /* calls with up 0 and 1 */
	char reason[512]; /* of the last down */
};

extern struct health H;

/* A loop and a host for sink, attached (the sink's start() ran). */
void drv_attach(pgo_sink_t *sink);
/* The built-in sink name on the fake (sink.redis_url), configured with
 * the key/value pairs of kv (NULL-terminated; they may set another URL),
 * and attached. */
pgo_sink_t *drv_sink(const char *name, const char *const *kv);
/* Destroys the sink, then the loop. */
void drv_destroy(pgo_sink_t *sink);
/* Events first_id.. of topic; odd ones have no key. */
void job_init(job_t *j, int first_id, int n, const char *topic);
void job_submit(pgo_sink_t *sink, job_t *j);
/* Turns the loop (and the fake) until every job is done, failing the
 * test after limit_ms. */
void drive(job_t **jobs, int n, int64_t limit_ms);
/* Turns the loop (and the fake) for ms. */
void drive_for(int64_t ms);
/* Turns the loop (and the fake) until *flag is at least want. */
void drive_until(const int *flag, int want, int64_t limit_ms);
int count_acks(const job_t *j, pgo_ack_t a);

#endif /* FAKE_REDIS_H */
