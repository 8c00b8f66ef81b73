/*
 * sinks/redis/pipeline.h — the Redis pipeline under both Redis sinks
 * (sinks/redis/streams.c: one XADD per event; sinks/redis/bullmq.c: one EVALSHA
 * per event): everything about talking to Redis that is not what the commands
 * say.
 *
 * A pipeline owns one non-blocking connection (sinks/redis/conn.h) on the
 * host's event loop: one socket watcher and one timer registered through the
 * sink host (pgoutbox/sink.h) serve every batch in flight.  It connects
 * when the first batch comes (with sink.redis_connect_timeout, AUTH and
 * SELECT from the URL), pipelines the commands of every batch on that one
 * connection, matches each reply to its event through a FIFO of awaited
 * replies, enforces sink.redis_timeout per batch, and reconnects with a
 * backoff.
 *
 * Redis down is an outage, not the events' fault: the events get
 * PGO_ACK_UNAVAILABLE (no attempt spent) — or, with sink.redis_wait, their
 * batch waits that long for Redis inside its claim transaction and is
 * sent again on the next connection — and the host is told through
 * pgo_sink_health(): down when a connect fails or a busy connection is
 * lost, up once a connection is ready again.  While down the pipeline
 * keeps reconnecting on its timer by itself, with or without batches.
 *
 * The sink plugs in two callbacks: send() queues the command of one event
 * (pgo_redis_pipe_command()), reply() turns its reply into a verdict
 * (pgo_redis_pipe_verdict()).  A batch is done (pgo_sink_done()) when its
 * last verdict is set.  The name templates both sinks use ({topic},
 * {queue}) are every sink's: pgo_sink_template_*() of sinks/sink_int.h.
 */
#ifndef PGO_REDIS_PIPE_H
#define PGO_REDIS_PIPE_H

#include "sinks/redis/conn.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

typedef struct pgo_redis_pipe pgo_redis_pipe_t;

/* What a sink plugs into its pipeline.  arg is passed back. */
typedef struct pgo_redis_pipe_hooks {
	const char *subject; /* log subject: "sink redis" */
	const char *label;   /* starts verdict texts: "redis" */
	/* Queues the command(s) of event i of b, which has no verdict yet,
	 * with pgo_redis_pipe_command(), or gives the event its verdict at
	 * once (a bad queue name) with pgo_redis_pipe_verdict(). */
	void (*send)(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i);
	/* The reply to a command queued for event i of b with tag, or
	 * (b NULL) to one of the connection's own commands.  For an event,
	 * set its verdict.  Returns false when the reply makes the
	 * connection useless (why says how, one line): it is dropped. */
	bool (*reply)(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i,
		      int tag, const redisReply *reply, char *why,
		      size_t whylen);
	void *arg;
} pgo_redis_pipe_hooks_t;

/* A pipeline for sink, configured from the sink.redis_* keys of v (the
 * URL and the timeouts, copied; hooks must outlive it).  NULL with *err
 * filled for a bad or unsupported URL, a sink.redis_wait that does not
 * fit in database.idle_tx_timeout, or OOM. */
pgo_redis_pipe_t *pgo_redis_pipe_new(pgo_sink_t *sink, const pgo_conf_t *conf,
				     const pgo_redis_pipe_hooks_t *hooks,
				     pgo_error_t *err);
/* Frees the pipeline and closes its connection (NULL: no-op).  Batches
 * still held are forgotten, never done. */
void pgo_redis_pipe_destroy(pgo_redis_pipe_t *p);
/* host:port/db, for log lines (never the password). */
const char *pgo_redis_pipe_where(const pgo_redis_pipe_t *p);

/* Counts the connections made: a sink that sets up a connection (SCRIPT
 * LOAD) remembers the count it did it for. */
uint64_t pgo_redis_pipe_generation(const pgo_redis_pipe_t *p);

/* Inside send(): queues one command for event i of b, or (b NULL) one of
 * the connection's own whose reply goes to reply() with b NULL and tag.
 * Out of memory breaks the connection (the pipeline drops it, and event
 * i fails as retriable). */
void pgo_redis_pipe_command(pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i,
			    int tag, int argc, const char **argv,
			    const size_t *lens);
/* Sets the verdict of event i of a batch the pipeline holds (a second
 * verdict for the same event is ignored). */
void pgo_redis_pipe_verdict(pgo_batch_t *b, size_t i, pgo_ack_t ack,
			    const char *msg);

/* The sink ops of a Redis sink whose state (pgo_sink_priv()) starts with
 * its pgo_redis_pipe_t pointer: start and stop add and delete the
 * watchers; submit, cancel and drain as pgoutbox/sink.h says. */
int pgo_redis_pipe_sink_start(pgo_sink_t *sink);
int pgo_redis_pipe_sink_submit(pgo_sink_t *sink, pgo_batch_t *b);
void pgo_redis_pipe_sink_cancel(pgo_sink_t *sink, pgo_batch_t *b);
void pgo_redis_pipe_sink_drain(pgo_sink_t *sink, int64_t deadline_ms);
void pgo_redis_pipe_sink_stop(pgo_sink_t *sink);

#endif /* PGO_REDIS_PIPE_H */
