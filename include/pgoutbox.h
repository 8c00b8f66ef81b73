/*
 * pgoutbox.h — the one public header of libpgoutbox.
 *
 * pgoutbox is a transactional outbox, work queue and relay that needs
 * nothing but PostgreSQL.  Producers write events inside their own
 * transaction; a relay claims committed events and publishes them through
 * a sink, deleting each row only after the sink acknowledged it.
 *
 * Conventions (libpq/hiredis style):
 *  - calls return 0 (PGO_OK) or a negative PGO_ERR_* code;
 *  - a handle keeps the text of its last error (pgo_*_errmsg());
 *    free functions without a handle fill a caller-supplied pgo_error_t;
 *  - opaque handles are made by *_new() and freed by *_destroy();
 *    *_destroy(NULL) is a no-op;
 *  - the library never prints and never aborts: it reports through the
 *    log callback set with pgo_log_set().
 */
#ifndef PGOUTBOX_H
#define PGOUTBOX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PGO_VERSION "0.1.0"

/* --- errors --- */

/* Return codes.  Values are never renumbered; new ones are appended. */
enum {
	PGO_OK = 0,
	PGO_ERR_NOMEM = -1,    /* out of memory */
	PGO_ERR_INVALID = -2,  /* bad argument or input (names what is wrong) */
	PGO_ERR_CONFIG = -3,   /* bad configuration (names file and line) */
	PGO_ERR_DB = -4,       /* PostgreSQL reported an error */
	PGO_ERR_SCHEMA = -5,   /* schema missing, older or newer than this build */
	PGO_ERR_SINK = -6,     /* the sink failed */
	PGO_ERR_IO = -7,       /* system call failed */
	PGO_ERR_CONNECT = -8,  /* could not connect to PostgreSQL */
	PGO_ERR_AGAIN = -9     /* not finished yet: wait and call again */
};

/* Error detail: the code, whether retrying the same operation may succeed,
 * and a message meant for a human operator. */
typedef struct pgo_error {
	int code;      /* PGO_OK or a PGO_ERR_* value */
	int retriable; /* 1: a later retry may succeed; 0: it will not */
	char msg[512]; /* NUL-terminated; empty when code == PGO_OK */
} pgo_error_t;

/* A static description of a PGO_ERR_* code ("out of memory", ...). */
const char *pgo_strerror(int code);

/* --- log --- */

typedef enum pgo_log_level {
	PGO_LOG_ERROR = 0,
	PGO_LOG_WARN = 1,
	PGO_LOG_INFO = 2,
	PGO_LOG_DEBUG = 3
} pgo_log_level_t;

/* A log sink.  subject names what the line concerns ("relay outbox",
 * "sink exec"); msg is one line without a trailing newline.  Both are only
 * valid during the call. */
typedef void (*pgo_log_fn)(void *ctx, pgo_log_level_t level,
			   const char *subject, const char *msg);

/* Sets the process-wide log callback and the most verbose level that is
 * formatted at all.  fn == NULL silences the library.  Not thread-safe:
 * call it once at start-up. */
void pgo_log_set(pgo_log_fn fn, void *ctx, pgo_log_level_t max_level);

/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
int pgo_log_level_parse(const char *s);

/* --- config --- */

/* Configuration: one declarative table of keys drives the INI file, the
 * PGOUTBOX_* environment and the command-line flags.  Keys are written
 * "section.name" (e.g. "relay.batch").  Later sources override earlier
 * ones: defaults < file < environment < flags. */
typedef struct pgo_conf pgo_conf_t;

/* Value origins, in override order. */
typedef enum pgo_conf_origin {
	PGO_CONF_DEFAULT = 0,
	PGO_CONF_FILE = 1,
	PGO_CONF_ENV = 2,
	PGO_CONF_FLAG = 3
} pgo_conf_origin_t;

/* A configuration holding every key at its default.  NULL on OOM. */
pgo_conf_t *pgo_conf_new(void);
void pgo_conf_destroy(pgo_conf_t *conf);

/* Reads an INI file.  On error returns PGO_ERR_CONFIG and the message
 * names the file, the line and what is wrong; keys already read stay set.
 * The path is remembered for pgo_conf_reload(). */
int pgo_conf_load_file(pgo_conf_t *conf, const char *path);

/* Reads PGOUTBOX_<SECTION>_<NAME> variables (and DATABASE_URL for
 * database.url) from envp (NULL-terminated, like environ).  Unknown
 * PGOUTBOX_* variables are an error. */
int pgo_conf_load_env(pgo_conf_t *conf, char *const *envp);

/* Sets one key from text.  origin says where it came from and where_ names
 * it in error messages (a flag "--batch", a file "relay.ini:12"). */
int pgo_conf_set(pgo_conf_t *conf, const char *key, const char *value,
		 pgo_conf_origin_t origin, const char *where_);

/* The current value of a key as text (as `config show` prints it), or NULL
 * for an unknown key.  The pointer is valid until the next set or reload. */
const char *pgo_conf_get(const pgo_conf_t *conf, const char *key);

/* Checks the cross-key rules (e.g. sink.exec needs sink.exec_command). */
int pgo_conf_validate(pgo_conf_t *conf);

/* Re-reads the remembered file and environment, then re-applies the flags.
 * Only keys marked reloadable change; a changed non-reloadable key is
 * reported through the log and keeps its old value.  On error nothing
 * changes.  *changed receives how many keys changed (may be NULL). */
int pgo_conf_reload(pgo_conf_t *conf, char *const *envp, int *changed);

/* Writes every key as INI text with its value, origin and help. */
void pgo_conf_show(const pgo_conf_t *conf, FILE *out);

/* Writes the reference table (Markdown) of every key, for the docs. */
void pgo_conf_reference(FILE *out);

/* The key a command-line flag sets ("--batch" -> "relay.batch"), or NULL
 * when no key has that flag. */
const char *pgo_conf_key_for_flag(const char *flag);

/* Text of the last error on this configuration ("" when none). */
const char *pgo_conf_errmsg(const pgo_conf_t *conf);

/* --- schema --- */

/* The newest schema version this build knows. */
int pgo_schema_version(void);

/* Applies every missing migration in one transaction under an advisory
 * lock, so concurrent callers are safe.  *from and *to (may be NULL)
 * receive the versions before and after.  A database whose schema is newer
 * than this build is refused with PGO_ERR_SCHEMA and left untouched.
 * conn must be idle (not inside a transaction). */
int pgo_migrate(PGconn *conn, int *from, int *to, pgo_error_t *err);

/* Checks that the schema exists and matches this build: PGO_ERR_SCHEMA
 * with a message saying what to do when it is missing, older or newer. */
int pgo_schema_check(PGconn *conn, pgo_error_t *err);

/* Validates a queue name: a lower-case SQL identifier of at most 48
 * characters ([a-z_][a-z0-9_]*).  Returns PGO_OK or PGO_ERR_INVALID with a
 * message naming the problem. */
int pgo_ident_check(const char *name, pgo_error_t *err);

/* --- producer --- */

/* One event to send.  payload and headers are JSON text; key and headers
 * may be NULL (headers then default to {}).  topic and type must not be
 * NULL. */
typedef struct pgo_msg {
	const char *topic;
	const char *key;
	const char *type;
	const char *payload;
	const char *headers;
} pgo_msg_t;

/* The largest payload accepted, in bytes of JSON text. */
#define PGO_MAX_PAYLOAD (1024 * 1024)

typedef struct pgo_producer pgo_producer_t;

/* A producer writing to queue (NULL = "outbox") through the caller's
 * connection.  The connection is borrowed: it must outlive the producer
 * and stay in blocking mode.  Events are written inside whatever
 * transaction the caller has open; they become visible, and the relay is
 * woken, only when the caller commits.  NULL on OOM or a bad queue name
 * (*err says which; err may be NULL). */
pgo_producer_t *pgo_producer_new(PGconn *conn, const char *queue,
				 pgo_error_t *err);
void pgo_producer_destroy(pgo_producer_t *p);

/* Sends one event through a prepared statement (prepared on first use on
 * this connection).  *id (may be NULL) receives the event id.  On a
 * database error the caller's transaction is aborted, as with any failed
 * statement: roll it back. */
int pgo_send(pgo_producer_t *p, const pgo_msg_t *msg, int64_t *id);

/* Sends n events with one COPY.  All or none: on error nothing of this
 * call is written and the caller's transaction is aborted.  Ids are not
 * returned. */
int pgo_send_bulk(pgo_producer_t *p, const pgo_msg_t *msgs, size_t n);

/* Text of the producer's last error ("" when none). */
const char *pgo_producer_errmsg(const pgo_producer_t *p);

/* --- sink --- */

/* One claimed event as a sink sees it.  Every string is borrowed from the
 * batch and valid until the publish completes.  key may be NULL. */
typedef struct pgo_event {
	int64_t id;
	const char *topic;
	const char *key;
	const char *type;
	const char *payload;    /* JSON text */
	const char *headers;    /* JSON text */
	const char *created_at; /* RFC 3339, UTC */
	int attempts;           /* deliveries tried before this one */
} pgo_event_t;

/* A sink's verdict on one event. */
typedef enum pgo_ack {
	PGO_ACK_NONE = 0,  /* not decided yet: counts as a retriable failure */
	PGO_ACK_OK = 1,    /* durably accepted downstream: the row may go */
	PGO_ACK_RETRY = 2, /* failed; try again after a backoff */
	PGO_ACK_DEAD = 3   /* will never succeed: dead-letter it now */
} pgo_ack_t;

/* A batch handed to a sink.  The sink fills acks[i] (and, for failures,
 * may set errors[i] with pgo_batch_fail()). */
typedef struct pgo_batch {
	pgo_event_t *events;
	size_t n;
	pgo_ack_t *acks;
	const char **errors; /* per-event error text or NULL */
	void *sink_state;    /* the sink's own per-publish state */
	struct pgo_arena *arena;
} pgo_batch_t;

/* Records a failure of event i with a message (copied into the batch). */
void pgo_batch_fail(pgo_batch_t *b, size_t i, pgo_ack_t verdict,
		    const char *msg);
/* Marks every event that has no verdict yet. */
void pgo_batch_fail_rest(pgo_batch_t *b, pgo_ack_t verdict,
			 const char *msg);

typedef struct pgo_sink pgo_sink_t;

/* What a sink implements.  publish() may finish at once (return PGO_OK
 * with every ack set) or return PGO_ERR_AGAIN after filling *pfd (fd and
 * events; fd -1 for none) and *deadline_ms (CLOCK_MONOTONIC ms, 0 for
 * none); the relay then calls resume() when the fd is ready or the
 * deadline passed, until it returns PGO_OK.  A sink must not buffer: an
 * ack means the downstream holds the message durably.  Any other return
 * fails the events that have no verdict yet as retriable. */
typedef struct pgo_sink_ops {
	const char *name;
	int (*open)(pgo_sink_t *sink);
	int (*publish)(pgo_sink_t *sink, pgo_batch_t *batch, int *fd,
		       short *events, int64_t *deadline_ms);
	int (*resume)(pgo_sink_t *sink, pgo_batch_t *batch, short revents,
		      int *fd, short *events, int64_t *deadline_ms);
	/* Abandons a pending publish (shutdown): frees sink_state. */
	void (*cancel)(pgo_sink_t *sink, pgo_batch_t *batch);
	void (*close)(pgo_sink_t *sink);
} pgo_sink_ops_t;

/* A sink by name ("stdout", "exec") configured from conf, or one with the
 * caller's ops (ops must outlive the sink; priv is passed through).
 * NULL on error, with *err filled. */
pgo_sink_t *pgo_sink_new(const char *name, const pgo_conf_t *conf,
			 pgo_error_t *err);
pgo_sink_t *pgo_sink_new_custom(const pgo_sink_ops_t *ops, void *priv);
void pgo_sink_destroy(pgo_sink_t *sink);
/* The caller's priv of a custom sink, or the built-in's state. */
void *pgo_sink_priv(pgo_sink_t *sink);
const char *pgo_sink_name(const pgo_sink_t *sink);
/* Lets a sink set the error text reported for a failed call. */
void pgo_sink_set_error(pgo_sink_t *sink, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *pgo_sink_errmsg(const pgo_sink_t *sink);

/* Writes one event as an NDJSON line (with '\n') into buf; returns the
 * length, or the size needed when it does not fit (like snprintf). */
size_t pgo_event_ndjson(const pgo_event_t *ev, char *buf, size_t size);

/* --- relay --- */

typedef struct pgo_relay pgo_relay_t;

/* Counters since the relay started. */
typedef struct pgo_relay_stats {
	uint64_t published;  /* events acked by the sink and deleted */
	uint64_t retried;    /* events returned for a later attempt */
	uint64_t dead;       /* events moved to dead letters */
	uint64_t batches;    /* claim/publish/ack cycles committed */
	uint64_t reconnects; /* connections re-established after a loss */
	uint64_t wakeups;    /* notifications received */
} pgo_relay_stats_t;

/* A relay of the configured queue into sink.  conf and sink are borrowed
 * and must outlive the relay.  NULL on OOM. */
pgo_relay_t *pgo_relay_new(pgo_conf_t *conf, pgo_sink_t *sink);
void pgo_relay_destroy(pgo_relay_t *relay);

/* Runs the event loop until a stop is requested, then finishes the batches
 * in flight and returns PGO_OK.  Returns an error only for what retrying
 * cannot fix (a schema newer than this build, a sink that cannot open).
 * Losing PostgreSQL is not fatal: the relay reconnects with backoff. */
int pgo_relay_run(pgo_relay_t *relay);

/* Async-signal-safe: asks the loop to stop (SIGTERM) or to reload the
 * configuration (SIGHUP). */
void pgo_relay_request_stop(pgo_relay_t *relay);
void pgo_relay_request_reload(pgo_relay_t *relay);

void pgo_relay_get_stats(const pgo_relay_t *relay, pgo_relay_stats_t *out);
const char *pgo_relay_errmsg(const pgo_relay_t *relay);

/* --- status --- */

/* Writes a human-readable report of the queue: pending events and the age
 * of the oldest per topic, dead letters, relays connected. */
int pgo_status_print(PGconn *conn, const char *queue, FILE *out,
		     pgo_error_t *err);

#ifdef __cplusplus
}
#endif

#endif /* PGOUTBOX_H */
