/*
 * pgoutbox.h — the public header of libpgoutbox (it includes the
 * generated pgoutbox/version.h).
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

#include "pgoutbox/version.h" /* PGO_VERSION, PGO_VERSION_NUM */

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a function of the API.  libpgoutbox is built with
 * -fvisibility=hidden: only what carries PGO_EXPORT is exported, under the
 * version node PGOUTBOX_0 of src/lib/exports.txt (checked by
 * tests/integration/t_exports.sh). */
#ifndef PGO_EXPORT
#if defined(__GNUC__) && __GNUC__ >= 4
#define PGO_EXPORT __attribute__((visibility("default")))
#else
#define PGO_EXPORT
#endif
#endif

/* --- version --- */

/* The version of the library this program runs with, as PGO_VERSION_NUM
 * (MAJOR * 10000 + MINOR * 100 + PATCH) and as PGO_VERSION ("0.1.0") of
 * the headers it was built with; the two differ when a newer libpgoutbox
 * is installed under an older program.  The string is static. */
PGO_EXPORT int pgo_version(void);
PGO_EXPORT const char *pgo_version_str(void);

/* What stays stable while the soname is libpgoutbox.so.0 (symbol version
 * PGOUTBOX_0), so a program keeps working with a newer library:
 *  - no exported function is removed or changes its signature; enum
 *    values and PGO_ERR_* codes are never renumbered;
 *  - opaque handles (pgo_relay_t, pgo_worker_t, ...) may change freely;
 *  - a struct the caller fills and passes in (pgo_msg_t, pgo_job_opts_t,
 *    pgo_cron_schedule_t and the *_opts_t) begins with `size_t size`,
 *    the sizeof() the caller was compiled with: the *_opts_init()
 *    functions take it and set it, the others need .size =
 *    sizeof(the type).  New fields are only appended; the library reads
 *    an older, smaller struct's fields and gives the rest their
 *    defaults, and refuses a size it does not know (size 0, or a newer
 *    pgoutbox.h than the library) with PGO_ERR_INVALID and a message;
 *  - pgo_sink_ops_t carries the interface's version instead
 *    (PGO_SINK_API_VERSION, pgoutbox/sink.h);
 *  - a struct the library fills for a callback to read (pgo_job_t,
 *    pgo_inbox_msg_t) may gain fields at its end: read it through the
 *    pointer given;
 *  - pgo_error_t and the *_stats_t structs the caller allocates for the
 *    library to fill are frozen: a new counter needs a new function. */

/* --- errors --- */

/* Return codes.  Values are never renumbered; new ones are appended. */
enum {
	PGO_OK = 0,
	PGO_ERR_NOMEM = -1,   /* out of memory */
	PGO_ERR_INVALID = -2, /* bad argument or input (names what is wrong) */
	PGO_ERR_CONFIG = -3,  /* bad configuration (names file and line) */
	PGO_ERR_DB = -4,      /* PostgreSQL reported an error */
	PGO_ERR_SCHEMA =
		-5,	   /* schema missing, older or newer than this build */
	PGO_ERR_SINK = -6, /* the sink failed */
	PGO_ERR_IO = -7,   /* system call failed */
	PGO_ERR_CONNECT = -8, /* could not connect to PostgreSQL */
	PGO_ERR_AGAIN = -9    /* not finished yet: wait and call again */
};

/* Error detail: the code, whether retrying the same operation may succeed,
 * and a message meant for a human operator.  After a PostgreSQL error one
 * rule decides retriable everywhere: a lost connection, and the SQLSTATE
 * classes 08 (connection), 40 (serialization failure, deadlock), 53
 * (insufficient resources), 57 (shutdown, statement_timeout) and 58
 * (system error) plus 55P03 (lock_timeout) are retriable; the others
 * (bad data, constraint violations, missing objects or privileges...)
 * are not. */
typedef struct pgo_error {
	int code;      /* PGO_OK or a PGO_ERR_* value */
	int retriable; /* 1: a later retry may succeed; 0: it will not */
	char msg[512]; /* NUL-terminated; empty when code == PGO_OK */
} pgo_error_t;

/* A static description of a PGO_ERR_* code ("out of memory", ...). */
PGO_EXPORT const char *pgo_strerror(int code);

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
PGO_EXPORT void pgo_log_set(pgo_log_fn fn, void *ctx,
			    pgo_log_level_t max_level);

/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
PGO_EXPORT int pgo_log_level_parse(const char *s);

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
PGO_EXPORT pgo_conf_t *pgo_conf_new(void);
PGO_EXPORT void pgo_conf_destroy(pgo_conf_t *conf);

/* Reads an INI file.  On error returns PGO_ERR_CONFIG and the message
 * names the file, the line and what is wrong; keys already read stay set.
 * The path is remembered for pgo_conf_reload(). */
PGO_EXPORT int pgo_conf_load_file(pgo_conf_t *conf, const char *path);

/* Reads PGOUTBOX_<SECTION>_<NAME> variables (and DATABASE_URL for
 * database.url) from envp (NULL-terminated, like environ; NULL reads
 * nothing).  Unknown PGOUTBOX_* variables are an error, but for those the
 * exec sink sets for its commands (PGOUTBOX_BATCH_SIZE, _FIRST_ID,
 * _LAST_ID). */
PGO_EXPORT int pgo_conf_load_env(pgo_conf_t *conf, char *const *envp);

/* Sets one key from text.  origin says where it came from and where_ names
 * it in error messages (a flag "--batch", a file "relay.ini:12"). */
PGO_EXPORT int pgo_conf_set(pgo_conf_t *conf, const char *key,
			    const char *value, pgo_conf_origin_t origin,
			    const char *where_);

/* The current value of a key as text (as `config show` prints it), or NULL
 * for an unknown key.  The pointer is valid until the next set or reload. */
PGO_EXPORT const char *pgo_conf_get(const pgo_conf_t *conf, const char *key);

/* Checks the cross-key rules (e.g. sink.exec needs sink.exec_command). */
PGO_EXPORT int pgo_conf_validate(pgo_conf_t *conf);

/* Re-reads the remembered file and environment, then re-applies what
 * pgo_conf_set() set (the flags), and validates the result as a whole.
 * Only keys marked reloadable change; a changed non-reloadable key is
 * reported through the log and keeps its old value.  On error nothing
 * changes.  *changed receives how many keys changed (may be NULL). */
PGO_EXPORT int pgo_conf_reload(pgo_conf_t *conf, char *const *envp,
			       int *changed);

/* Writes every key as INI text with its value, origin and help. */
PGO_EXPORT void pgo_conf_show(const pgo_conf_t *conf, FILE *out);

/* Writes the reference table (Markdown) of every key, for the docs. */
PGO_EXPORT void pgo_conf_reference(FILE *out);

/* The key a command-line flag sets ("--batch" -> "relay.batch"), or NULL
 * when no key has that flag. */
PGO_EXPORT const char *pgo_conf_key_for_flag(const char *flag);

/* Text of the last error on this configuration ("" when none). */
PGO_EXPORT const char *pgo_conf_errmsg(const pgo_conf_t *conf);

/* Adds a database to the configuration's fleet (docs/fleet.md): name is
 * that of a [database NAME] section (letters, digits, '_', '-'), or NULL
 * for a --db flag given more than once (the fleet names it from the
 * URL's dbname, or db1, db2, ... when those are not unique).  The file's
 * [database NAME] sections are added by pgo_conf_load_file().  PGO_OK,
 * or PGO_ERR_CONFIG for a bad or repeated name. */
PGO_EXPORT int pgo_conf_add_database(pgo_conf_t *conf, const char *name,
				     const char *url, const char *where_);
/* How many databases the fleet has (0: one relay of database.url). */
PGO_EXPORT size_t pgo_conf_database_count(const pgo_conf_t *conf);

/* --- schema --- */

/* The newest schema version this build knows. */
PGO_EXPORT int pgo_schema_version(void);

/* Applies every missing migration in one transaction under an advisory
 * lock, so concurrent callers are safe.  *from and *to (may be NULL)
 * receive the versions before and after.  A database whose schema is newer
 * than this build is refused with PGO_ERR_SCHEMA and left untouched.
 * conn must be idle (not inside a transaction). */
PGO_EXPORT int pgo_migrate(PGconn *conn, int *from, int *to, pgo_error_t *err);

/* Like pgo_migrate(), stopping at version target (1 .. newest): for
 * stepwise upgrades and for testing them.  A database already past target
 * is left as it is. */
PGO_EXPORT int pgo_migrate_to(PGconn *conn, int target, int *from, int *to,
			      pgo_error_t *err);

/* Checks that the schema exists and matches this build: PGO_ERR_SCHEMA
 * with a message saying what to do when it is missing, older or newer. */
PGO_EXPORT int pgo_schema_check(PGconn *conn, pgo_error_t *err);

/* Validates a queue name: a lower-case SQL identifier of at most 48
 * characters ([a-z_][a-z0-9_]*) not starting with "pg_".  Returns PGO_OK
 * or PGO_ERR_INVALID with a message naming the problem. */
PGO_EXPORT int pgo_ident_check(const char *name, pgo_error_t *err);

/* --- producer --- */

/* One event to send.  payload and headers are JSON text; key and headers
 * may be NULL (headers then default to {}).  topic and type must not be
 * NULL.  size must be sizeof(pgo_msg_t) in every element, arrays too:
 * pgo_send_bulk() steps through an array by its first element's size, so
 * a pgo_msg_t that grows in a later release still reads the arrays of
 * programs built before. */
typedef struct pgo_msg {
	size_t size; /* sizeof(pgo_msg_t) */
	const char *topic;
	const char *key;
	const char *type;
	const char *payload;
	const char *headers;
} pgo_msg_t;

/* The largest payload accepted, in bytes of JSON text. */
#define PGO_MAX_PAYLOAD (1024 * 1024)
/* The other caps, in bytes, enforced by every queue table at INSERT
 * (sql/012_caps.sql) and checked by pgo_send() before a round trip. */
#define PGO_MAX_TOPIC	256
#define PGO_MAX_TYPE	256
#define PGO_MAX_KEY	1024
#define PGO_MAX_HEADERS (64 * 1024)

typedef struct pgo_producer pgo_producer_t;

/* A producer writing to queue (NULL = "outbox"; another name: an outbox
 * queue of its own, `pgoutbox queue create --kind outbox NAME`) through
 * the caller's connection.  The connection is borrowed: it must outlive the
 * producer and stay in blocking mode.  Events are written inside whatever
 * transaction the caller has open; they become visible, and the relay is
 * woken, only when the caller commits.  NULL when it cannot be made, with
 * *err saying why (err may be NULL): no connection or a bad queue name
 * (PGO_ERR_INVALID), out of memory (PGO_ERR_NOMEM); *err is cleared on
 * success. */
PGO_EXPORT pgo_producer_t *pgo_producer_new(PGconn *conn, const char *queue,
					    pgo_error_t *err);
PGO_EXPORT void pgo_producer_destroy(pgo_producer_t *p);

/* Sends one event through a prepared statement (prepared on first use on
 * this connection): an INSERT into the queue, or, when the role may not
 * insert into the queue's table (the producer role of the README, which
 * may only EXECUTE pgoutbox.send or pgoutbox.send_to), a call of
 * pgoutbox.send() (the outbox) or pgoutbox.send_to() (another outbox
 * queue).  *id (may be NULL) receives the event id.  A bad event, or a
 * queue that does not exist or is no outbox (a work queue, an adopted
 * table), is refused with PGO_ERR_INVALID before anything is written
 * (the caller's transaction is left as it was).  On a
 * database error the caller's transaction is aborted, as with any failed
 * statement: roll it back. */
PGO_EXPORT int pgo_send(pgo_producer_t *p, const pgo_msg_t *msg, int64_t *id);

/* Sends n events with one COPY, or, for a role that may not insert into
 * the queue's table (the producer role of the README), with one call of
 * pgoutbox.send_batch() (the outbox) or pgoutbox.send_batch_to().
 * All or none: every event and the queue (as for pgo_send) are checked
 * first, and a bad one (PGO_ERR_INVALID, the message names its index)
 * sends nothing; on any later error nothing of this call is written and
 * the caller's transaction is aborted.  Ids are not returned. */
PGO_EXPORT int pgo_send_bulk(pgo_producer_t *p, const pgo_msg_t *msgs,
			     size_t n);

/* Text of the producer's last error ("" when none). */
PGO_EXPORT const char *pgo_producer_errmsg(const pgo_producer_t *p);

/* --- sink --- */

/* The sink interface, version 2: events, batches, verdicts, the ops a
 * sink implements and the host services it uses (an event loop's fds and
 * timers, done, health). */
#include "pgoutbox/sink.h"

/* Writes the built-in sinks of this build for --help: per sink a line
 * "  name  summary", more lines about it and the flags of its keys, all
 * from the sink registry. */
PGO_EXPORT void pgo_sink_list(FILE *out);

/* --- relay --- */

typedef struct pgo_relay pgo_relay_t;

/* Counters since the relay started. */
typedef struct pgo_relay_stats {
	uint64_t published;  /* events acked by the sink and deleted */
	uint64_t retried;    /* events returned for a later attempt */
	uint64_t dead;	     /* events moved to dead letters */
	uint64_t batches;    /* claim/publish/ack cycles committed */
	uint64_t reconnects; /* connections re-established after a loss */
	uint64_t wakeups;    /* notifications received */
} pgo_relay_stats_t;

/* A relay of the configured queue into sink.  conf and sink are borrowed
 * and must outlive the relay; the relay attaches the sink to its event
 * loop (the sink's start()) and detaches it when destroyed.  NULL with
 * *err filled (err may be NULL) on OOM or when the sink cannot start. */
PGO_EXPORT pgo_relay_t *pgo_relay_new(pgo_conf_t *conf, pgo_sink_t *sink,
				      pgo_error_t *err);
PGO_EXPORT void pgo_relay_destroy(pgo_relay_t *relay);

/* Runs the event loop until a stop is requested, then finishes the batches
 * in flight (the sink's drain(), at most relay.drain_timeout; what is left
 * then is rolled back and sent again later) and returns PGO_OK.  Returns an
 * error only for what retrying cannot fix (a schema newer than this build, a
 * sink that cannot open; PGO_ERR_INVALID for a queue that is not an outbox,
 * or for the ordered and strict modes through a transaction pooler, which
 * it probes for first).  Losing PostgreSQL is not fatal: the relay
 * reconnects with backoff. */
PGO_EXPORT int pgo_relay_run(pgo_relay_t *relay);

/* Async-signal-safe: asks the loop to stop (SIGTERM) or to reload the
 * configuration (SIGHUP). */
PGO_EXPORT void pgo_relay_request_stop(pgo_relay_t *relay);
PGO_EXPORT void pgo_relay_request_reload(pgo_relay_t *relay);

PGO_EXPORT void pgo_relay_get_stats(const pgo_relay_t *relay,
				    pgo_relay_stats_t *out);
PGO_EXPORT const char *pgo_relay_errmsg(const pgo_relay_t *relay);

/* --- fleet --- */

/* One process relaying many databases (docs/fleet.md): a relay per
 * database of the configuration's fleet (pgo_conf_add_database(), the
 * file's [database NAME] sections), each with its own connections,
 * shard leases and claim floor, on one event loop into one sink; every
 * event gets a "pgoutbox-source" header naming its database. */
typedef struct pgo_fleet pgo_fleet_t;

/* conf (with databases) and sink are borrowed and must outlive the
 * fleet, which attaches the sink to its loop.  NULL with *err filled on
 * OOM, a bad database list, a refusal at start or a sink that cannot
 * start. */
PGO_EXPORT pgo_fleet_t *pgo_fleet_new(pgo_conf_t *conf, pgo_sink_t *sink,
				      pgo_error_t *err);
PGO_EXPORT void pgo_fleet_destroy(pgo_fleet_t *fleet);
/* Runs every database's relay until a stop is requested (then as
 * pgo_relay_run() does, for all).  A database whose relay ends with an
 * error stops alone; returns PGO_OK, or once all have stopped the first
 * one's error (pgo_fleet_errmsg() names the database). */
PGO_EXPORT int pgo_fleet_run(pgo_fleet_t *fleet);
/* Async-signal-safe: stop (SIGTERM), reload (SIGHUP). */
PGO_EXPORT void pgo_fleet_request_stop(pgo_fleet_t *fleet);
PGO_EXPORT void pgo_fleet_request_reload(pgo_fleet_t *fleet);
PGO_EXPORT const char *pgo_fleet_errmsg(const pgo_fleet_t *fleet);

/* --- inbox --- */

/* The inbox drops duplicate deliveries on the consumer side: a message id
 * is claimed once per logical consumer within a dedup window (7 days by
 * default), in the same transaction as the message's effects.  Rows expire
 * by dropping daily partitions (pgo_inbox_maintain), never by DELETE. */

/* Claims message_id for consumer inside the caller's open transaction
 * (PGO_ERR_INVALID when conn is not inside one).  *fresh is 1 for a first
 * delivery and 0 for a duplicate.  Apply the message's effects in the same
 * transaction and COMMIT: a rollback releases the claim, so the message is
 * applied when it comes again.  On PGO_ERR_DB the transaction is aborted:
 * roll it back; err->retriable says whether trying again may help.  Needs
 * READ COMMITTED (the default) or SERIALIZABLE isolation. */
PGO_EXPORT int pgo_inbox_claim(PGconn *conn, const char *consumer,
			       const char *message_id, int *fresh,
			       pgo_error_t *err);

/* Creates the inbox partitions of today and the next two days (UTC) and
 * drops those wholly older than window (a PostgreSQL interval, e.g.
 * "7 days"; NULL means 7 days).  Idempotent and safe from several
 * processes.  Runs its own transaction: conn must be idle.  *created and
 * *dropped (may be NULL) receive how many partitions were. */
PGO_EXPORT int pgo_inbox_maintain(PGconn *conn, const char *window,
				  int *created, int *dropped, pgo_error_t *err);

/* A message as a consumer's handler sees it: the fields of a stream entry
 * written by the redis sink.  Strings are borrowed for the duration of the
 * call; a missing field reads "" (payload "null", headers "{}"). */
typedef struct pgo_inbox_msg {
	const char *entry_id; /* the Redis stream entry id */
	const char *id;	      /* the event id: the dedup key */
	const char *topic;
	const char *key; /* "" when the event had none */
	const char *type;
	const char *payload;	/* JSON text */
	const char *headers;	/* JSON text */
	const char *created_at; /* RFC 3339, UTC */
	/* The "pgoutbox-source" header: the database a relay fleet took it
	 * from (docs/fleet.md), "" for none.  The inbox claims "SOURCE/ID"
	 * then, since ids are unique per database only. */
	const char *source;
} pgo_inbox_msg_t;

/* A C handler: applies msg on conn, inside the consumer's transaction that
 * already holds the inbox claim.  Returns 0 to commit; anything else rolls
 * back (the message comes again later) with a reason in errbuf. */
typedef int (*pgo_inbox_handler_fn)(void *ctx, PGconn *conn,
				    const pgo_inbox_msg_t *msg, char *errbuf,
				    size_t errlen);

/* What a consumer reads and how it handles it.  Start from
 * pgo_consumer_opts_init(&opts, sizeof(opts)), then set the stream, the
 * group and exactly one handler.  Strings are copied by
 * pgo_consumer_new(). */
typedef struct pgo_consumer_opts {
	size_t size;		  /* sizeof(pgo_consumer_opts_t), set by
				   * pgo_consumer_opts_init() */
	const char *db_url;	  /* libpq conninfo or URL ("" = libpq env) */
	const char *redis_url;	  /* redis://[user:password@]host[:port][/db] */
	const char *stream;	  /* the stream to read */
	const char *group;	  /* consumer group; also the inbox's
				   * consumer name, so the processes of a
				   * group share deduplication */
	const char *consumer;	  /* name within the group; NULL: host name.
				   * Keep it stable across restarts: a
				   * restarted consumer re-reads its own
				   * pending entries first */
	const char *exec_command; /* handler: sh -c CMD, message JSON on
				   * stdin, exit 0 = success */
	const char *sql_function; /* handler: [schema.]func(payload jsonb),
				   * called in the inbox transaction */
	pgo_inbox_handler_fn handler; /* handler: a C function */
	void *handler_ctx;
	int64_t exec_timeout_ms;  /* the exec handler is killed after this */
	int64_t claim_idle_ms;	  /* XAUTOCLAIM entries idle this long */
	int64_t block_ms;	  /* XREADGROUP BLOCK */
	int count;		  /* entries read per call, 1..100000 */
	int max_attempts;	  /* a failing entry is retried this often,
				   * then skipped (left pending, logged) */
	const char *start_id;	  /* where a group created here starts:
				   * "0" (the whole stream) or "$" */
	const char *dedup_window; /* interval for pgo_inbox_maintain() */
	int64_t maintain_interval_ms; /* how often to run it */
	int64_t redis_timeout_ms;     /* a Redis reply, beyond BLOCK */
	int64_t redis_connect_timeout_ms;
	int64_t statement_timeout_ms; /* of the database session; 0 = none */
	int exit_after_commit; /* fault drills: stop right after this many
				* commits, before their XACK (0 = off) */
} pgo_consumer_opts_t;

/* Counters since the consumer started. */
typedef struct pgo_consumer_stats {
	uint64_t processed;  /* handled and committed (then acked) */
	uint64_t duplicates; /* dropped by the inbox (acked) */
	uint64_t failed;     /* handler or transaction failures, rolled
			      * back; the entry stays pending */
	uint64_t skipped;    /* gave up after max_attempts; left pending */
	uint64_t trimmed;    /* pending entries Redis no longer had */
	int drill_exit;	     /* run() stopped for exit_after_commit */
} pgo_consumer_stats_t;

typedef struct pgo_consumer pgo_consumer_t;

/* Fills opts, of size bytes (sizeof(opts) as the caller compiled it),
 * with the defaults: redis_url redis://localhost:6379/0, exec timeout
 * 30 s, claim_idle 30 s, block 1 s, count 100, max_attempts 10, start
 * "0", window "7 days", maintenance hourly, Redis timeouts 5 s (reply)
 * and 2 s (connect), statement timeout 30 s; no stream, group or handler.
 * Returns PGO_ERR_INVALID for a size this library does not know, setting
 * only opts->size, so pgo_consumer_new() refuses it with a message. */
PGO_EXPORT int pgo_consumer_opts_init(pgo_consumer_opts_t *opts, size_t size);

/* A consumer.  NULL when it cannot be made, with *err saying why (err may
 * be NULL): bad options, opts->size included (PGO_ERR_INVALID), a Redis
 * URL that does not parse or needs what this build lacks
 * (PGO_ERR_CONFIG), out of memory (PGO_ERR_NOMEM), no wake-up pipe
 * (PGO_ERR_IO); *err is cleared on success.  Nothing is connected before
 * pgo_consumer_run(). */
PGO_EXPORT pgo_consumer_t *pgo_consumer_new(const pgo_consumer_opts_t *opts,
					    pgo_error_t *err);
PGO_EXPORT void pgo_consumer_destroy(pgo_consumer_t *c);

/* Reads and handles messages until a stop is requested, finishing the
 * message at hand; returns PGO_OK then (or after the exit_after_commit
 * drill).  For each message: BEGIN, inbox claim, handler (when fresh),
 * COMMIT, then XACK; a failure rolls back and leaves the entry pending,
 * to be retried before newer ones.  Losing Redis or PostgreSQL is not
 * fatal: it reconnects with backoff.  The errors returned are what
 * retrying cannot fix: PGO_ERR_SCHEMA when the database has no pgoutbox
 * schema or one this build does not match, PGO_ERR_INVALID when it has no
 * sql_function(jsonb) (checked at each connect, before any message);
 * pgo_consumer_errmsg() says which.  The URLs were checked by
 * pgo_consumer_new(). */
PGO_EXPORT int pgo_consumer_run(pgo_consumer_t *c);

/* Async-signal-safe: asks run() to stop after the message at hand. */
PGO_EXPORT void pgo_consumer_request_stop(pgo_consumer_t *c);

PGO_EXPORT void pgo_consumer_get_stats(const pgo_consumer_t *c,
				       pgo_consumer_stats_t *out);
PGO_EXPORT const char *pgo_consumer_errmsg(const pgo_consumer_t *c);

/* --- queue --- */

/* Work queues: tables pgoutbox.<name> with the outbox's columns plus a
 * priority, a unique key and a lease epoch (see docs/queue.md). */

/* Creates work queue name (pgo_ident_check rules; names of the
 * partitions pgoutbox makes, <queue>_archive[_YYYYMMDD], inbox_YYYYMMDD
 * and cron_history_YYYYMMDD, are refused with PGO_ERR_INVALID) with shards
 * shards (1..4096; 64 is the usual) in its own statement.  PGO_ERR_DB when
 * it exists already. */
PGO_EXPORT int pgo_queue_create(PGconn *conn, const char *name, int shards,
				pgo_error_t *err);

/* Options of one job: size = sizeof(pgo_job_opts_t); every other field
 * may be 0/NULL. */
typedef struct pgo_job_opts {
	size_t size;		/* sizeof(pgo_job_opts_t) */
	const char *run_at;	/* timestamptz text; NULL = now */
	int priority;		/* higher runs first */
	const char *unique_key; /* at most one queued job per key: enqueueing
				 * again returns the queued job's id */
	const char *topic;	/* NULL = "job" */
	const char *key;	/* aggregate id (shard), may be NULL */
	/* after 0.2.0 (an older caller's struct: NULL) */
	const char *group_key;	   /* the job's group (a tenant): the queue's
				    * group_concurrency caps each group's
				    * running jobs, claims are fair across
				    * groups; NULL = none */
	const int64_t *depends_on; /* ids of jobs of the queue that must be
				    * done first (not claimed while one is
				    * queued or dead); NULL = none */
	size_t n_depends_on;	   /* how many ids depends_on holds */
} pgo_job_opts_t;

typedef struct pgo_enqueuer pgo_enqueuer_t;

/* An enqueuer writing into work queue `queue` through the caller's
 * connection (borrowed: it must outlive the enqueuer and stay blocking).
 * NULL when it cannot be made, with *err saying why (err may be NULL): no
 * connection or a bad queue name (PGO_ERR_INVALID), out of memory
 * (PGO_ERR_NOMEM); *err is cleared on success. */
PGO_EXPORT pgo_enqueuer_t *pgo_enqueuer_new(PGconn *conn, const char *queue,
					    pgo_error_t *err);
PGO_EXPORT void pgo_enqueuer_destroy(pgo_enqueuer_t *q);

/* Enqueues one job (payload: JSON text) inside whatever transaction the
 * caller has open, through a statement prepared once on the connection;
 * workers are woken at COMMIT.  *id (may be NULL) receives the job id, or
 * with opts->unique_key the id of the job already queued under that key.
 * opts may be NULL.  Bad input (PGO_ERR_INVALID) is refused before
 * anything is sent; on PGO_ERR_DB the caller's transaction is aborted:
 * roll it back. */
PGO_EXPORT int pgo_enqueue(pgo_enqueuer_t *q, const char *payload,
			   const pgo_job_opts_t *opts, int64_t *id);
PGO_EXPORT const char *pgo_enqueuer_errmsg(const pgo_enqueuer_t *q);

/* Operator commands (each its own statement; output for humans). */
PGO_EXPORT int pgo_queue_list(PGconn *conn, FILE *out, pgo_error_t *err);
/* Counts of the queue's jobs by state, running jobs per worker, then the
 * line of pgo_queue_controls(). */
PGO_EXPORT int pgo_queue_stats(PGconn *conn, const char *queue, FILE *out,
			       pgo_error_t *err);
/* The newest `limit` dead letters of a queue with their errors. */
PGO_EXPORT int pgo_queue_dead(PGconn *conn, const char *queue, int limit,
			      FILE *out, pgo_error_t *err);
/* Moves dead letter id back into its queue (same id, attempts 0):
 * pgo_dead_retry() of one id; PGO_ERR_INVALID when there is none. */
PGO_EXPORT int pgo_queue_retry(PGconn *conn, const char *queue, int64_t id,
			       pgo_error_t *err);
/* Deletes every job of the queue (dead: its dead letters instead);
 * *count (may be NULL) receives how many. */
PGO_EXPORT int pgo_queue_purge(PGconn *conn, const char *queue, int dead,
			       int64_t *count, pgo_error_t *err);

/* --- queue controls --- */

/* Steering a work queue (docs/queue.md, "Controls"); each call is one
 * statement of the SQL API, which checks the queue (PGO_ERR_DB when it
 * is not a work queue) and wakes its workers at COMMIT. */

/* Pauses (paused != 0: pgoutbox.pause) or resumes (pgoutbox.resume) a
 * work queue: while paused its workers claim nothing, producers still
 * enqueue.  *changed (may be NULL) is 1 when it was not so already. */
PGO_EXPORT int pgo_queue_pause(PGconn *conn, const char *queue, int paused,
			       int *changed, pgo_error_t *err);
/* Sets a work queue's limits (pgoutbox.set_queue): a value < 0 keeps the
 * limit as it is, 0 removes it.  group_concurrency: jobs of one group
 * running at once (1: one after the other); max_running: jobs running at
 * once across all workers; rate_per_s and burst: jobs started per second
 * across all workers, a token bucket of burst tokens. */
PGO_EXPORT int pgo_queue_set(PGconn *conn, const char *queue,
			     int group_concurrency, int max_running,
			     double rate_per_s, int burst, pgo_error_t *err);
/* Makes the claims of a queue fair across groups without a limit (fair
 * != 0), or no longer (pgoutbox.set_queue(queue, fair => ...)): a work
 * queue's groups, or an outbox's keys (captured in its table; its
 * concurrent relays read it when they start). */
PGO_EXPORT int pgo_queue_set_fair(PGconn *conn, const char *queue, int fair,
				  pgo_error_t *err);
/* One line: whether the queue is paused, and its limits. */
PGO_EXPORT int pgo_queue_controls(PGconn *conn, const char *queue, FILE *out,
				  pgo_error_t *err);

/* Dead letters (pgoutbox.dead_letters).  A filter: queue (required for
 * retry and discard; NULL lists every queue's), ids (n_ids of them;
 * NULL or 0: every one), topic and type (NULL: any). */

/* The newest `limit` dead letters matching the filter, with errors. */
PGO_EXPORT int pgo_dead_list(PGconn *conn, const char *queue, const char *topic,
			     const char *type, int limit, FILE *out,
			     pgo_error_t *err);
/* Every field of one dead letter; PGO_ERR_INVALID when there is none. */
PGO_EXPORT int pgo_dead_show(PGconn *conn, const char *queue, int64_t id,
			     FILE *out, pgo_error_t *err);
/* Moves the dead letters matching the filter back into their queue in
 * one statement (same ids and groups, attempts reset, due now);
 * *count (may be NULL) receives how many. */
PGO_EXPORT int pgo_dead_retry(PGconn *conn, const char *queue,
			      const int64_t *ids, int n_ids, const char *topic,
			      const char *type, int64_t *count,
			      pgo_error_t *err);
/* Deletes the dead letters matching the filter in one statement. */
PGO_EXPORT int pgo_dead_discard(PGconn *conn, const char *queue,
				const int64_t *ids, int n_ids,
				const char *topic, const char *type,
				int64_t *count, pgo_error_t *err);

/* --- worker --- */

/* One leased job as a handler sees it; strings are borrowed for the call. */
typedef struct pgo_job {
	int64_t id;
	int64_t epoch; /* the lease's fencing token */
	int attempt;   /* 1 for the first run */
	const char *queue;
	const char *topic;
	const char *key;     /* may be NULL */
	const char *payload; /* JSON text */
} pgo_job_t;

/* A C handler: returns 0 when the job is done, anything else to fail it
 * (errbuf, errlen bytes, may receive the reason).  It runs outside any
 * transaction, in the worker's thread, on the jobs of one lease claim
 * (opts.batch of them) one after the other: the lease (opts.lease_ms)
 * must outlast the whole claim, since heartbeats wait until the last
 * handler returns. */
typedef int (*pgo_job_handler_fn)(void *ctx, const pgo_job_t *job, char *errbuf,
				  size_t errlen);

/* Start from pgo_worker_opts_init(&opts, sizeof(opts)), then set the
 * queue and exactly one handler. */
typedef struct pgo_worker_opts {
	size_t size; /* sizeof(pgo_worker_opts_t), set by
		      * pgo_worker_opts_init() */
	const char *queue;
	const char *name; /* locked_by; NULL: "<host>-<pid>" */
	/* Exactly one handler: */
	const char *exec_command;   /* sh -c CMD, payload on stdin */
	const char *sql_function;   /* [schema.]func(payload jsonb), called
				     * in the claim transaction */
	pgo_job_handler_fn handler; /* a C function, run on `batch` jobs
				     * per lease claim, one after the other */
	void *handler_ctx;
	int concurrency;       /* jobs (exec) or connections (sql); 1
				* with a C handler */
	int batch;	       /* sql: jobs per transaction; callback:
				* jobs per lease claim */
	int64_t lease_ms;      /* lease length; heartbeat every third */
	int64_t timeout_ms;    /* exec: the process group is killed */
	int max_attempts;      /* then dead letters */
	int64_t retry_base_ms; /* backoff before retry n: retry_base_ms *
				* 2^(n-1), at most retry_max_ms, half
				* of it random */
	int64_t retry_max_ms;
	int64_t poll_interval_ms;  /* fallback poll besides LISTEN */
	int64_t reap_interval_ms;  /* expired leases are returned this often */
	int64_t stats_interval_ms; /* periodic stats line; 0 = off */
} pgo_worker_opts_t;

/* Counters since the worker started. */
typedef struct pgo_worker_stats {
	uint64_t done;	   /* completed and deleted */
	uint64_t failed;   /* failed, scheduled for a retry */
	uint64_t dead;	   /* moved to dead letters */
	uint64_t lost;	   /* finished after the lease was lost: not counted */
	uint64_t reaped;   /* expired leases this worker returned */
	uint64_t timeouts; /* exec handlers killed after timeout_ms */
} pgo_worker_stats_t;

typedef struct pgo_worker pgo_worker_t;

/* Fills opts, of size bytes (sizeof(opts) as the caller compiled it),
 * with the defaults: concurrency 1, batch 100, lease 30 s, timeout 25 s,
 * max_attempts 10, backoff 1 s..5 min, poll 5 s, reap 5 s, stats off; no
 * queue, name or handler.  Returns PGO_ERR_INVALID for a size this
 * library does not know, setting only opts->size, so pgo_worker_new()
 * refuses it with a message. */
PGO_EXPORT int pgo_worker_opts_init(pgo_worker_opts_t *opts, size_t size);

/* A worker connecting with conf's [database] keys (conf is borrowed and
 * must outlive it; opts strings are copied).  NULL when it cannot be made,
 * with *err saying why (err may be NULL): bad options (PGO_ERR_INVALID),
 * out of memory (PGO_ERR_NOMEM), no wake-up pipe (PGO_ERR_IO); *err is
 * cleared on success.  Nothing is connected before pgo_worker_run(). */
PGO_EXPORT pgo_worker_t *pgo_worker_new(const pgo_conf_t *conf,
					const pgo_worker_opts_t *opts,
					pgo_error_t *err);
PGO_EXPORT void pgo_worker_destroy(pgo_worker_t *w);

/* Claims and handles jobs until a stop is requested; then claims no more,
 * lets running jobs finish (up to timeout_ms), records them and returns
 * PGO_OK.  Losing PostgreSQL is not fatal (reconnect with backoff); an
 * error is returned only for what retrying cannot fix: PGO_ERR_INVALID for
 * a queue that is not a work queue, a missing queue or --sql function. */
PGO_EXPORT int pgo_worker_run(pgo_worker_t *w);
/* Async-signal-safe. */
PGO_EXPORT void pgo_worker_request_stop(pgo_worker_t *w);
PGO_EXPORT void pgo_worker_get_stats(const pgo_worker_t *w,
				     pgo_worker_stats_t *out);
PGO_EXPORT const char *pgo_worker_errmsg(const pgo_worker_t *w);

/* --- cron --- */

/* Distributed cron (see docs/cron.md): schedules live in
 * pgoutbox.cron_schedules; any number of scheduler instances may run, and
 * each tick is enqueued exactly once by a compare-and-set on the
 * schedule's last tick in the same transaction as the job. */

/* A schedule to add: size = sizeof(pgo_cron_schedule_t).  For a new
 * schedule the NULL/0 fields take the defaults given; a schedule that
 * replaces one of the same name keeps that one's values instead. */
typedef struct pgo_cron_schedule {
	size_t size;	     /* sizeof(pgo_cron_schedule_t) */
	const char *name;    /* 1-100 of [A-Za-z0-9_.:-] */
	const char *expr;    /* 5 or 6 fields, or @hourly etc. */
	const char *tz;	     /* IANA zone; NULL or "" = UTC */
	const char *queue;   /* a work queue */
	const char *payload; /* JSON of the jobs; NULL = {} */
	const char *overlap; /* "skip" (default): no tick while the previous
			      * job is queued or running; "allow" */
	const char *missed;  /* after downtime: "skip", "run_once"
			      * (default), "catch_up" */
	int catch_up_max;    /* catch_up: run at most this many missed
			      * ticks (0..1000; 0 means 1) */
} pgo_cron_schedule_t;

/* Adds (or replaces) a schedule; its ticks count from now.  A replaced
 * schedule keeps the zone, payload and policies left NULL/0.  The
 * expression, zone, queue and policies are checked first and errors name
 * the bad field ("cron \"61 * * * *\": minute field: ..."). */
PGO_EXPORT int pgo_cron_add(PGconn *conn, const pgo_cron_schedule_t *s,
			    pgo_error_t *err);
/* PGO_ERR_INVALID when no schedule has that name. */
PGO_EXPORT int pgo_cron_remove(PGconn *conn, const char *name,
			       pgo_error_t *err);
PGO_EXPORT int pgo_cron_list(PGconn *conn, FILE *out, pgo_error_t *err);
/* The newest `limit` recorded ticks of a schedule. */
PGO_EXPORT int pgo_cron_history(PGconn *conn, const char *name, int limit,
				FILE *out, pgo_error_t *err);

/* Start from pgo_scheduler_opts_init(&opts, sizeof(opts)). */
typedef struct pgo_scheduler_opts {
	size_t size;		 /* sizeof(pgo_scheduler_opts_t), set by
				  * pgo_scheduler_opts_init() */
	const char *name;	 /* in logs; NULL: "<host>-<pid>" */
	int64_t grace_ms;	 /* a tick later than this is "missed" and
				  * follows the schedule's missed policy */
	int64_t max_sleep_ms;	 /* re-read the schedules at least this often */
	int64_t clock_offset_ms; /* TEST ONLY: wake up this much later
				  * (negative: earlier) than due, as a skewed
				  * local clock would; ticks are still decided
				  * by the database clock */
	int64_t history_keep_ms; /* history older than this is dropped,
				  * whole UTC days at a time (checked
				  * every 10 minutes); <= 0 keeps it all */
} pgo_scheduler_opts_t;

typedef struct pgo_scheduler_stats {
	uint64_t fired;	     /* jobs enqueued */
	uint64_t skipped;    /* ticks recorded as skipped */
	uint64_t lost_races; /* ticks another instance handled first */
} pgo_scheduler_stats_t;

typedef struct pgo_scheduler pgo_scheduler_t;

/* Fills opts, of size bytes (sizeof(opts) as the caller compiled it),
 * with the defaults: grace 10 s, max sleep 1 s, no offset, history kept
 * 7 days.  Returns PGO_ERR_INVALID for a size this library does not know,
 * setting only opts->size, so pgo_scheduler_new() refuses it. */
PGO_EXPORT int pgo_scheduler_opts_init(pgo_scheduler_opts_t *opts, size_t size);
/* A scheduler connecting with conf's [database] keys (conf is borrowed and
 * must outlive it; opts->name is copied).  NULL when it cannot be made,
 * with *err saying why (err may be NULL): bad options (PGO_ERR_INVALID),
 * out of memory (PGO_ERR_NOMEM), no wake-up pipe (PGO_ERR_IO); *err is
 * cleared on success.  Nothing is connected before pgo_scheduler_run(). */
PGO_EXPORT pgo_scheduler_t *pgo_scheduler_new(const pgo_conf_t *conf,
					      const pgo_scheduler_opts_t *opts,
					      pgo_error_t *err);
PGO_EXPORT void pgo_scheduler_destroy(pgo_scheduler_t *s);
/* Fires due ticks until a stop is requested; reconnects when PostgreSQL
 * goes away.  Returns PGO_OK after a stop, PGO_ERR_IO when the event loop
 * itself fails (pgo_scheduler_errmsg() says why). */
PGO_EXPORT int pgo_scheduler_run(pgo_scheduler_t *s);
/* Async-signal-safe. */
PGO_EXPORT void pgo_scheduler_request_stop(pgo_scheduler_t *s);
PGO_EXPORT void pgo_scheduler_get_stats(const pgo_scheduler_t *s,
					pgo_scheduler_stats_t *out);
PGO_EXPORT const char *pgo_scheduler_errmsg(const pgo_scheduler_t *s);

/* --- adopt: an application's own outbox table as a queue --- */

/* The column map of `pgoutbox adopt` (sql/013_adopt.sql): each value a
 * column of the table or an SQL expression over its row; NULL: the
 * default (Debezium's names, every row pending, deleted once sent). */
typedef struct pgo_adopt_map {
	const char *table, *name; /* "schema.table", the queue name */
	const char *id, *topic, *key, *type, *payload, *headers, *created;
	const char *pending; /* predicate of unsent rows */
	const char *done;    /* "delete" or an assignment */
	const char *channel; /* the application's own NOTIFY channel */
	int shards;	     /* 0: concurrent mode only (no shard column) */
} pgo_adopt_map_t;

typedef void (*pgo_adopt_line_fn)(void *ctx, const char *line);

/* Checks the table and the map and adds what the relay needs, in one
 * statement (nothing changes on error); line() gets each object added.
 * PGO_ERR_INVALID (bad name) or PGO_ERR_DB with err saying what is
 * wrong. */
PGO_EXPORT int pgo_adopt(PGconn *conn, const pgo_adopt_map_t *m,
			 pgo_adopt_line_fn line, void *ctx, pgo_error_t *err);
/* pgo_adopt() with how the events are captured: "table" (pgo_adopt(),
 * NULL too) or "wal": the relay streams the table's inserts from the
 * slot pgoutbox_<name> (wal_level = logical; m->pending, m->done and
 * m->channel must be NULL).  Call it outside a transaction that has
 * written (PostgreSQL makes a slot only there). */
PGO_EXPORT int pgo_adopt_capture(PGconn *conn, const pgo_adopt_map_t *m,
				 const char *capture, pgo_adopt_line_fn line,
				 void *ctx, pgo_error_t *err);
/* Removes exactly what adopt added, and the map. */
PGO_EXPORT int pgo_unadopt(PGconn *conn, const char *name,
			   pgo_adopt_line_fn line, void *ctx, pgo_error_t *err);

/* --- status --- */

/* Writes a human-readable report of the queue (NULL = "outbox"):
 * pending events per topic (with the age of the oldest and how many wait
 * for a retry), dead letters, shard leases, the retention mode, health
 * warnings and the relays connected.  PGO_ERR_SCHEMA when the schema does
 * not match this build. */
PGO_EXPORT int pgo_status_print(PGconn *conn, const char *queue, FILE *out,
				pgo_error_t *err);

#ifdef __cplusplus
}
#endif

#endif /* PGOUTBOX_H */
