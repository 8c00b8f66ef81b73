/*
 * pgoutbox/sink.h — the sink interface (version 2), for the built-in sinks
 * and for sinks written in C by users.  Included by pgoutbox.h.
 *
 * A sink publishes the events of a batch to a downstream (a broker, an
 * endpoint, a command) and gives a verdict per event.  The relay deletes a
 * row only for PGO_ACK_OK, so a sink acknowledges only what the downstream
 * holds durably: no sink keeps an offline buffer of its own.
 *
 * A sink lives inside its host's single-threaded event loop:
 *  - open() configures it (no I/O needed yet; errors are reported at once);
 *  - start() is called when a host (the relay) has attached its loop: the
 *    sink may now watch file descriptors and arm timers through
 *    pgo_sink_io_add() and pgo_sink_timer_add();
 *  - submit() hands it a batch and must never block: the sink sends what
 *    it can, watches its sockets, and calls pgo_sink_done() once every
 *    event of the batch has a verdict (possibly from inside submit());
 *  - cancel() abandons a batch (the relay lost the claim): the sink stops
 *    working on it and never calls pgo_sink_done() for it;
 *  - drain() says the host is stopping (SIGTERM): finish what is in flight
 *    by the deadline, take nothing new;
 *  - stop() detaches it from the loop (delete every watcher), then
 *    close() frees it.
 * pgo_sink_health() tells the host the downstream is down (claiming pauses:
 * no batch is claimed only to fail) or up again.  A sink that reports
 * down must watch its downstream itself and report up when it recovers.
 *
 * Client libraries with threads of their own (librdkafka's delivery
 * reports, cnats' publish acks) must not call back into the host from
 * those threads.  Bridge them with a file descriptor: create an eventfd or
 * a pipe, watch it with pgo_sink_io_add(), have the library (or the
 * callback running on its thread) write to it — librdkafka does it with
 * rd_kafka_queue_io_event_enable() — and do the work, verdicts and
 * pgo_sink_done() included, in the fd's callback, on the loop's thread.
 * Every call of this header is for the loop's thread only.
 */
#ifndef PGOUTBOX_SINK_H
#define PGOUTBOX_SINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PGO_EXPORT
#define PGO_EXPORT __attribute__((visibility("default")))
#endif

/* The version of this interface; pgo_sink_ops_t.version must be it. */
#define PGO_SINK_API_VERSION 2

/* One claimed event as a sink sees it.  Every string is borrowed from the
 * batch and valid until the batch is done or cancelled.  key may be
 * NULL. */
typedef struct pgo_event {
	int64_t id;
	const char *topic;
	const char *key;
	const char *type;
	const char *payload;	/* JSON text */
	const char *headers;	/* JSON text */
	const char *created_at; /* RFC 3339, UTC */
	int attempts;		/* deliveries tried before this one */
} pgo_event_t;

/* A sink's verdict on one event.  Values are never renumbered. */
typedef enum pgo_ack {
	PGO_ACK_NONE = 0,  /* not decided yet: counts as a retriable failure */
	PGO_ACK_OK = 1,	   /* durably accepted downstream: the row may go */
	PGO_ACK_RETRY = 2, /* failed; try again after a backoff */
	PGO_ACK_DEAD = 3,  /* will never succeed: dead-letter it now */
	/* The downstream is unreachable (not this event's fault): the relay
	 * rolls the whole batch back untouched, spends no attempt, and
	 * pauses claiming with a backoff until the sink recovers. */
	PGO_ACK_UNAVAILABLE = 4
} pgo_ack_t;

/* A batch handed to a sink.  The sink fills acks[i] (and, for failures,
 * errors[i] through pgo_batch_fail()).  The batch and its events belong to
 * the host until pgo_sink_done() or cancel(). */
typedef struct pgo_batch {
	pgo_event_t *events;
	size_t n;
	pgo_ack_t *acks;
	const char **errors; /* per-event error text or NULL */
	void *sink_state;    /* the sink's own per-batch state */
	struct pgo_arena *arena;
} pgo_batch_t;

/* Records a failure of event i with a message (copied into the batch). */
PGO_EXPORT void pgo_batch_fail(pgo_batch_t *b, size_t i, pgo_ack_t verdict,
			       const char *msg);
/* Sets event i's verdict (with msg for a failure) unless it has one
 * already: 1 when it was set, 0 when i is out of range or decided. */
PGO_EXPORT int pgo_batch_set(pgo_batch_t *b, size_t i, pgo_ack_t verdict,
			     const char *msg);
/* Marks every event that has no verdict yet. */
PGO_EXPORT void pgo_batch_fail_rest(pgo_batch_t *b, pgo_ack_t verdict,
				    const char *msg);

typedef struct pgo_sink pgo_sink_t;
typedef struct pgo_conf pgo_conf_t;
typedef struct pgo_error pgo_error_t;

/* What a sink implements.  Only version, name and submit are required. */
typedef struct pgo_sink_ops {
	int version;	  /* PGO_SINK_API_VERSION */
	const char *name; /* in logs and errors */
	/* Configures the sink (pgo_sink_new() has read its keys) and checks
	 * what can be checked without I/O.  PGO_OK, or an error with the
	 * text set by pgo_sink_set_error(). */
	int (*open)(pgo_sink_t *sink);
	/* A host attached its loop: start watching, connecting.  PGO_OK or
	 * an error that stops the host (with the text set). */
	int (*start)(pgo_sink_t *sink);
	/* Takes a batch; never blocks.  PGO_OK: the sink calls
	 * pgo_sink_done() later (or already did).  Anything else: the sink
	 * did not take it and will not call done; the events without a
	 * verdict fail as retriable with the sink's error text. */
	int (*submit)(pgo_sink_t *sink, pgo_batch_t *batch);
	/* Abandons a batch taken by submit(): drop its state; no done. */
	void (*cancel)(pgo_sink_t *sink, pgo_batch_t *batch);
	/* The host stops: finish the batches in flight by deadline_ms
	 * (CLOCK_MONOTONIC ms); what is left then is cancelled. */
	void (*drain)(pgo_sink_t *sink, int64_t deadline_ms);
	/* The host detaches its loop: delete every watcher and timer. */
	void (*stop)(pgo_sink_t *sink);
	/* Frees the sink's state. */
	void (*close)(pgo_sink_t *sink);
} pgo_sink_ops_t;

/* --- the host's services, for sinks (loop thread only) --- */

typedef struct pgo_loop_io pgo_sink_io_t;
typedef struct pgo_loop_timer pgo_sink_timer_t;
/* fd is ready; revents as poll() reports them. */
typedef void (*pgo_sink_io_fn)(void *arg, int fd, short revents);
/* The timer came due; it is disarmed (re-arm or delete it). */
typedef void (*pgo_sink_timer_fn)(void *arg);

/* Watches fd for events (POLLIN | POLLOUT); events 0 watches nothing yet.
 * Valid between start() and stop().  NULL on OOM or with no host. */
PGO_EXPORT pgo_sink_io_t *pgo_sink_io_add(pgo_sink_t *sink, int fd,
					  short events, pgo_sink_io_fn fn,
					  void *arg);
/* Changes the watched fd or events (fd -1 or events 0: nothing). */
PGO_EXPORT void pgo_sink_io_set(pgo_sink_io_t *io, int fd, short events);
/* Stops watching (NULL: no-op).  Safe inside any callback. */
PGO_EXPORT void pgo_sink_io_del(pgo_sink_io_t *io);
/* A one-shot timer at at_ms (CLOCK_MONOTONIC ms, see pgo_sink_now_ms();
 * 0: disarmed).  NULL on OOM or with no host. */
PGO_EXPORT pgo_sink_timer_t *pgo_sink_timer_add(pgo_sink_t *sink, int64_t at_ms,
						pgo_sink_timer_fn fn,
						void *arg);
/* Re-arms (at_ms > 0) or disarms (0) a timer. */
PGO_EXPORT void pgo_sink_timer_set(pgo_sink_timer_t *t, int64_t at_ms);
/* Deletes a timer (NULL: no-op).  Safe inside any callback. */
PGO_EXPORT void pgo_sink_timer_del(pgo_sink_timer_t *t);
/* CLOCK_MONOTONIC in milliseconds: the clock of timers and deadlines. */
PGO_EXPORT int64_t pgo_sink_now_ms(void);

/* Every event of batch has its verdict: the host settles it.  Call once
 * per submitted batch; the batch is the host's again after the call. */
PGO_EXPORT void pgo_sink_done(pgo_sink_t *sink, pgo_batch_t *batch);
/* The downstream is down (up 0, reason: one line, copied) or up again
 * (up 1, reason may be NULL).  Down pauses claiming until up. */
PGO_EXPORT void pgo_sink_health(pgo_sink_t *sink, int up, const char *reason);

/* --- making sinks --- */

/* A built-in sink by name ("stdout", "exec", "redis", "bullmq": those of
 * the registry this build has, see pgo_sink_list()) configured from
 * conf's sink.* keys (conf may be destroyed afterwards:
 * the sink keeps copies).  NULL with *err filled for an unknown name (the
 * message lists the known ones), a bad configuration or OOM. */
PGO_EXPORT pgo_sink_t *pgo_sink_new(const char *name, const pgo_conf_t *conf,
				    pgo_error_t *err);
/* A sink with the caller's ops (they must outlive the sink; priv is passed
 * through, see pgo_sink_priv()); open() is called here.  NULL with *err
 * filled when ops is not version PGO_SINK_API_VERSION, has no submit, or
 * open() failed. */
PGO_EXPORT pgo_sink_t *pgo_sink_new_custom(const pgo_sink_ops_t *ops,
					   void *priv, pgo_error_t *err);
/* Calls close() and frees the sink (NULL: no-op).  Destroy the relay that
 * uses the sink first. */
PGO_EXPORT void pgo_sink_destroy(pgo_sink_t *sink);
/* The caller's priv of a custom sink, or the built-in's state. */
PGO_EXPORT void *pgo_sink_priv(pgo_sink_t *sink);
PGO_EXPORT const char *pgo_sink_name(const pgo_sink_t *sink);
/* Sets the error text reported for a failed call of the sink's ops. */
PGO_EXPORT void pgo_sink_set_error(pgo_sink_t *sink, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
PGO_EXPORT const char *pgo_sink_errmsg(const pgo_sink_t *sink);

/* Writes one event as an NDJSON line (with '\n') into buf; returns the
 * length, or the size needed when it does not fit (like snprintf). */
PGO_EXPORT size_t pgo_event_ndjson(const pgo_event_t *ev, char *buf,
				   size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PGOUTBOX_SINK_H */
