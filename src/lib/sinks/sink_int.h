/*
 * sinks/sink_int.h — what the sinks share with the rest of the library:
 * the sink registry's rows, the host side of the sink interface
 * (sinks/registry.c) and the name templates every sink uses
 * (sinks/template.c).  Each sink's own declarations live in its folder
 * (sinks/<name>/<name>.h).
 */
#ifndef PGO_SINK_INT_H
#define PGO_SINK_INT_H

#include "base/buf.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* --- the registry and the host --- */

struct pgo_loop;

/* What a host (the relay) gives the sink it attaches: its loop, and where
 * done() and health() go. */
typedef struct pgo_sink_host {
	struct pgo_loop *loop;
	void (*done)(void *ctx, pgo_batch_t *batch);
	void (*health)(void *ctx, int up, const char *reason);
	void *ctx;
} pgo_sink_host_t;

struct pgo_sink {
	const pgo_sink_ops_t *ops;
	void *priv;
	const pgo_sink_host_t *host; /* NULL while detached */
	char name[32];
	char errmsg[512];
};

/*
 * A row of the sink registry (sinks/registry.c): a built-in sink.  Everything
 * about a sink that is not its code is here.  Each sink's folder declares its
 * row as PGO_SINK_ROW_<name> in sinks/<folder>/<folder>.h, and its
 * meson.build names the sink, so that adding one is its folder, a build
 * option, its tests and its doc page (docs/architecture.md, "Adding a sink").
 */
typedef struct pgo_sink_def {
	const char *name; /* relay.sink value; its keys are sink.<name>_* */
	/* The keys' prefix when it is not the name (rabbitmq: "amqp"). */
	const char *key_prefix;
	const pgo_sink_ops_t *ops;
	/* Reads the sink's keys of conf into the sink; NULL: none. */
	int (*configure)(pgo_sink_t *sink, const pgo_conf_t *conf);
	const char *summary; /* one line, for --help and the docs */
	const char *details; /* more lines for `relay --help`, or NULL */
	/* The keys the sink reads, in section [sink] and named
	 * sink.<name>_* (or sink.<key_prefix>_*), ended by a row with key
	 * NULL; NULL: none. */
	const pgo_conf_key_t *keys;
	/* Cross-key rules pgo_conf_validate() checks when relay.sink is
	 * this sink: PGO_OK, or PGO_ERR_CONFIG with err's message; NULL:
	 * none. */
	int (*validate)(const pgo_conf_t *conf, pgo_error_t *err);
	/* An INI section of the sink's own ("kafka") whose lines pass
	 * through: each "name = value" is appended as a "name=value" line
	 * to the key ini_key ("sink.kafka_conf"); NULL: none. */
	const char *ini_section;
	const char *ini_key;
} pgo_sink_def_t;

/* The registry, ended by a row with name NULL. */
extern const pgo_sink_def_t pgo_sink_defs[];
/* The known names, ", "-separated, for help and errors. */
const char *pgo_sink_known(void);

/* Attaches the host (its loop) and calls start(); PGO_OK or the sink's
 * error.  Detach calls stop(). */
int pgo_sink_attach(pgo_sink_t *sink, const pgo_sink_host_t *host);
void pgo_sink_detach(pgo_sink_t *sink);
/* The host's side of the ops: submit, cancel and drain. */
int pgo_sink_submit(pgo_sink_t *sink, pgo_batch_t *batch);
void pgo_sink_cancel(pgo_sink_t *sink, pgo_batch_t *batch);
void pgo_sink_drain(pgo_sink_t *sink, int64_t deadline_ms);

/* --- sink name templates (sinks/template.c) --- */

/* The placeholders a template key accepts. */
#define PGO_TMPL_TOPIC 1u /* {topic}: the event's topic */
#define PGO_TMPL_QUEUE 2u /* {queue}: relay.queue */
#define PGO_TMPL_TYPE  4u /* {type}: the event's type */
/* PGO_OK, or PGO_ERR_CONFIG naming key when tmpl is empty or has a
 * placeholder that is not among allowed. */
int pgo_template_check(const char *key, const char *tmpl, unsigned allowed,
		       pgo_error_t *err);
/* tmpl with the placeholders replaced (a NULL value leaves its
 * placeholder as it is), in buf (reset first); NULL on OOM.  Valid until
 * buf changes. */
const char *pgo_template_expand(pgo_buf_t *buf, const char *tmpl,
				const char *topic, const char *queue,
				const char *type);
/* The templates of sink.redis_stream, sink.bullmq_queue, sink.nats_subject
 * and sink.amqp_routing_key: {topic} and {queue}. */
static inline int pgo_sink_template_check(const char *key, const char *tmpl,
					  pgo_error_t *err)
{
	return pgo_template_check(key, tmpl, PGO_TMPL_TOPIC | PGO_TMPL_QUEUE,
				  err);
}
static inline const char *pgo_sink_template_expand(pgo_buf_t *buf,
						   const char *tmpl,
						   const char *topic,
						   const char *queue)
{
	return pgo_template_expand(buf, tmpl, topic, queue, NULL);
}
/* Templates with any placeholder names (NULL-ended) whose values may be
 * percent-encoded (sink.http_url: {topic}, {type}, {key}): the same
 * messages as pgo_template_check(); a NULL value expands to "". */
int pgo_template_check_names(const char *key, const char *tmpl,
			     const char *const *names, pgo_error_t *err);
const char *pgo_template_expand_names(pgo_buf_t *buf, const char *tmpl,
				      const char *const *names,
				      const char *const *values,
				      bool url_escape);

/* --- borrowed from a sink's folder by another module --- */

/* Appends a nats:// or tls:// URL (or a comma-separated list of them) to
 * b with every password or token as "***"; false (nothing appended) when
 * url is not one.  conf.c masks sink.nats_url with it (sinks/nats/message.c,
 * built with the nats sink). */
bool pgo_nats_url_mask(const char *url, pgo_buf_t *b);

#endif /* PGO_SINK_INT_H */
