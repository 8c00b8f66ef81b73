/*
 * pgo_int.h — internals shared by the modules of libpgoutbox (like libpq's
 * libpq-int.h).  Nothing here is part of the public API.
 */
#ifndef PGO_INT_H
#define PGO_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "pgoutbox.h"

/* --- log --- */

extern pgo_log_level_t pgo_log_max;

/* Level checked before any formatting happens. */
#define pgo_log(level, subject, ...)                                           \
	do {                                                                   \
		if ((level) <= pgo_log_max)                                    \
			pgo_log_emit((level), (subject), __VA_ARGS__);         \
	} while (0)

void pgo_log_emit(pgo_log_level_t level, const char *subject, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

/* --- errors --- */

/* Fills err (NULL allowed) and returns code, so callers can
 * `return pgo_error_set(err, PGO_ERR_INVALID, 0, "...")`. */
int pgo_error_set(pgo_error_t *err, int code, int retriable, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));
void pgo_error_clear(pgo_error_t *err);
/* The primary message of a failed result or connection, one line. */
const char *pgo_pq_msg(const PGconn *conn, const PGresult *res);
/* Runs one statement with text parameters on a blocking connection (the
 * operator commands); NULL with err filled (what: the step, in the
 * message; retriable by the one rule) on an error. */
PGresult *pgo_pq_run(PGconn *conn, const char *what, const char *sql, int n,
		     const char *const *params, pgo_error_t *err);
/* The one rule for "may trying again succeed?" after PostgreSQL failed,
 * for every module (a pgo_error_t's retriable, whether an outcome is sent
 * again).  Retriable: a lost connection (conn NULL or CONNECTION_BAD, or
 * no result: libpq ran out of memory or lost the server), an error without
 * a SQLSTATE (libpq's own), and the SQLSTATE classes 08 (connection), 40
 * (serialization failure, deadlock), 53 (insufficient resources), 57
 * (operator intervention: shutdown, statement_timeout's 57014), 58
 * (system error) plus 55P03 (lock_not_available: lock_timeout).  Anything
 * else fails the same way again.  res is the failed result (borrowed). */
bool pgo_pq_retriable(const PGconn *conn, const PGresult *res);
/* The same rule on a SQLSTATE alone (NULL or "": none was given). */
bool pgo_sqlstate_retriable(const char *sqlstate);

/* --- time --- */

/* CLOCK_MONOTONIC in milliseconds. */
int64_t pgo_now_ms(void);
/* Monotonic microseconds, for timings. */
int64_t pgo_now_us(void);
/* CLOCK_REALTIME in microseconds since the epoch. */
int64_t pgo_wall_us(void);
/* Reads an event's created_at, "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (UTC, as
 * the relay gives it to sinks), into microseconds since the epoch.
 * Returns 0, or -1 when t does not read so (*us untouched). */
int pgo_parse_rfc3339_us(const char *t, int64_t *us);

/* --- arena: per-batch memory, reset after each cycle --- */

typedef struct pgo_arena pgo_arena_t;
pgo_arena_t *pgo_arena_new(size_t chunk);
void *pgo_arena_alloc(pgo_arena_t *a, size_t n);
char *pgo_arena_strdup(pgo_arena_t *a, const char *s);
/* Frees everything allocated but the first chunk. */
void pgo_arena_reset(pgo_arena_t *a);
void pgo_arena_destroy(pgo_arena_t *a);

/* --- growable text buffer --- */

typedef struct pgo_buf {
	char *data; /* NUL-terminated while len < cap */
	size_t len;
	size_t cap;
	bool oom; /* a failed grow: contents are incomplete */
} pgo_buf_t;

void pgo_buf_init(pgo_buf_t *b);
void pgo_buf_free(pgo_buf_t *b);
void pgo_buf_reset(pgo_buf_t *b);
bool pgo_buf_reserve(pgo_buf_t *b, size_t extra);
void pgo_buf_append(pgo_buf_t *b, const char *s, size_t n);
void pgo_buf_puts(pgo_buf_t *b, const char *s);
void pgo_buf_printf(pgo_buf_t *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes). */
void pgo_buf_json_str(pgo_buf_t *b, const char *s);
/* Appends s as an element of a PostgreSQL array literal ("..." or NULL). */
void pgo_buf_array_elem(pgo_buf_t *b, const char *s);

/* --- config: the key tables and the typed view the modules read --- */

/* How a key's text is read, and what its typed value is. */
typedef enum pgo_conf_type {
	PGO_CONF_T_STRING,   /* any text, kept as given (pgo_conf_get_str) */
	PGO_CONF_T_INT,	     /* whole number within [min, max] (_get_int) */
	PGO_CONF_T_DURATION, /* "250ms", "30s", "5m", "1h" or "0" (ms) */
	PGO_CONF_T_BOOL,     /* on/off, true/false, yes/no, 1/0 */
	PGO_CONF_T_ENUM,     /* one of choices[]: its index (_get_int) */
	PGO_CONF_T_IDENT     /* SQL identifier [a-z_][a-z0-9_]{0,47} */
} pgo_conf_type_t;

/*
 * One configuration key, a row of a declarative table: conf.c's own
 * table, or the keys a sink declares in its registry row (sinks/registry.c).
 * The same rows read the INI file, the PGOUTBOX_<SECTION>_<NAME> variables and
 * the flags, and print `config show`, `--help` and the reference.
 */
typedef struct pgo_conf_key {
	const char *key;       /* "section.name", as messages spell it */
	const char *section;   /* INI section; part of the variable name */
	const char *name;      /* name within the section */
	pgo_conf_type_t type;  /* how the text is read and stored */
	const char *def;       /* default, as text read like any other */
	int64_t min;	       /* lowest value: int as is, duration in ms */
	int64_t max;	       /* highest value, same units */
	bool reloadable;       /* a running relay takes a new value (SIGHUP) */
	bool secret;	       /* may hold a password: masked when written */
	const char *flag;      /* command-line flag ("--batch") or NULL */
	const char *env_alias; /* conventional variable also read, or NULL */
	const char *const *choices; /* enum: the names, index = value */
	const char *help; /* one line for `config show` and the docs */
	/* The key names a file whose contents are the value of key
	 * file_for (a password kept out of argv and the environment):
	 * setting it reads the file and sets file_for from the same
	 * source, ranked as that source is.  NULL: a plain key. */
	const char *file_for;
	/* conf.c's own keys only: the value is also kept in this field of
	 * struct pgo_conf_values.  Other keys are read with pgo_conf_get_*. */
	bool in_values;
	size_t offset;
} pgo_conf_key_t;

/* The name fields of a key row: PGO_CONF_KEY("sink", "redis_maxlen"). */
#define PGO_CONF_KEY(sec, nm) .key = sec "." nm, .section = sec, .name = nm
#define PGO_SECONDS(n)	      (1000 * (int64_t)(n))
#define PGO_MINUTES(n)	      (PGO_SECONDS(n) * 60)
#define PGO_HOURS(n)	      (PGO_MINUTES(n) * 60)

/* The typed value of any key, those the sinks declare included: the
 * number (int, enum index), the duration in ms, the boolean, the text
 * (string, identifier; valid until the key is set again or reloaded).
 * Asking for a key that does not exist, or with the wrong type, is a bug:
 * it is logged as an error and 0, false or "" is returned. */
int pgo_conf_get_int(const pgo_conf_t *conf, const char *key);
int64_t pgo_conf_get_duration(const pgo_conf_t *conf, const char *key);
bool pgo_conf_get_bool(const pgo_conf_t *conf, const char *key);
const char *pgo_conf_get_str(const pgo_conf_t *conf, const char *key);

/* How a relay claims (relay.mode). */
typedef enum pgo_mode {
	PGO_MODE_CONCURRENT = 0, /* SKIP LOCKED batches, no order */
	PGO_MODE_ORDERED = 1,	 /* per-key order through shard leases */
	PGO_MODE_STRICT = 2	 /* one global order, one leader */
} pgo_mode_t;

/* What an ordered relay does with an event out of attempts. */
typedef enum pgo_poison {
	PGO_POISON_DEAD_LETTER = 0, /* dead-letter it, the key moves on */
	PGO_POISON_HALT = 1	    /* keep it; its shard stops */
} pgo_poison_t;

struct pgo_conf_values {
	/* [database] */
	char *db_url;		   /* libpq conninfo or URL, passed through */
	int64_t connect_timeout;   /* ms */
	int64_t statement_timeout; /* ms */
	int64_t lock_timeout;	   /* ms */
	int64_t idle_tx_timeout;   /* ms: idle_in_transaction_session_timeout */
	/* [relay] */
	char *queue;		   /* queue table in schema pgoutbox */
	char *name;		   /* relay name in application_name and logs */
	int sink;		   /* index of the sink in pgo_sink_defs[] */
	int mode;		   /* pgo_mode_t */
	int poison;		   /* pgo_poison_t */
	int64_t heartbeat;	   /* ms: membership heartbeat and rebalance */
	int64_t lease_timeout;	   /* ms: a silent member is fenced */
	int64_t maintain_interval; /* ms: pgoutbox.maintain(); 0 = never */
	int batch;		   /* events claimed per transaction */
	int batch_bytes;	   /* a claim takes no event past these bytes */
	int in_flight;		   /* connections claiming at once */
	bool listen;		   /* LISTEN for wake-ups (else poll only) */
	int64_t wake_linger;	   /* ms awake after a dry claim (wake.c) */
	bool claim_floor;	   /* claims start at the claim floor */
	bool sync_commit;	   /* the relay's commits wait for the flush */
	int64_t poll_interval;	   /* ms: fallback poll */
	int max_attempts;	   /* then dead letters */
	int64_t retry_base;	   /* ms: first backoff */
	int64_t retry_max;	   /* ms: backoff ceiling */
	int64_t reconnect_max;	   /* ms: reconnect backoff ceiling */
	int64_t drain_timeout;	   /* ms: SIGTERM waits this long for sinks */
	int64_t stats_interval;	   /* ms: periodic stats line; 0 = off */
	/* [sink]: each sink declares its keys (pgo_sink_def_t.keys) and
	 * reads them with pgo_conf_get_*(); none are fields here. */
	/* [worker] (pgoutbox run, pgoutbox worker defaults) */
	char *worker_queue;	      /* work queue; empty = no worker in run */
	char *worker_exec;	      /* exec handler: sh -c command */
	char *worker_sql;	      /* sql handler: function(payload jsonb) */
	int worker_concurrency;	      /* jobs (exec) or connections (sql) */
	int worker_batch;	      /* sql: jobs per transaction */
	int64_t worker_lease;	      /* ms: lease; heartbeat every third */
	int64_t worker_timeout;	      /* ms: exec job killed after this */
	int worker_max_attempts;      /* then dead letters */
	int64_t worker_retry_base;    /* ms: first backoff */
	int64_t worker_retry_max;     /* ms: backoff ceiling */
	int64_t worker_poll_interval; /* ms: fallback poll */
	/* [cron] */
	bool cron_enabled;	   /* pgoutbox run starts a scheduler */
	int64_t cron_grace;	   /* ms: later ticks count as missed */
	int64_t cron_history_keep; /* ms: history kept this long */
	/* [metrics] */
	char *metrics_listen;	  /* host:port of /metrics; empty = off */
	int64_t metrics_interval; /* ms: the relay's database gauges */
	/* [log] */
	int log_level; /* pgo_log_level_t */
};

/* Read-only view of the typed values (valid until the next set/reload). */
const struct pgo_conf_values *pgo_conf_values(const pgo_conf_t *conf);

/* The flag the user probably meant by an unknown one: the nearest
 * spelling among every key's flag and extra (NULL-ended, may be NULL), or
 * NULL when none is close. */
const char *pgo_conf_suggest_flag(const char *flag, const char *const *extra);

/* Parses a duration ("250ms", "30s", "5m", "1h", "0") into ms. */
int pgo_parse_duration(const char *s, int64_t *ms, const char **why);
/* Appends a libpq conninfo string or postgres:// URL to b as it may be
 * shown (`config show`, logs): rebuilt from what PQconninfoParse() reads,
 * in the same form, every secret option (dispchar "*": password,
 * sslpassword) as "***".  Text libpq cannot parse appends "***" alone and
 * returns false. */
bool pgo_conninfo_mask(const char *conninfo, pgo_buf_t *b);

/* Formats ms in the largest unit that divides it: "0", "250ms", "5m". */
void pgo_format_duration(int64_t ms, char *buf, size_t size);

/* --- status --- */

/* pgo_status_print()'s report, as text or (json) as one JSON object with
 * the same facts and a newline. */
int pgo_status_write(PGconn *conn, const char *queue, bool json, FILE *out,
		     pgo_error_t *err);

/* --- consume --- */
#include "inbox/consume.h"

/* --- retry --- */
#include "queue/queue.h"

/* --- sinks --- */

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
 * about a sink that is not its code is here, so that adding one is its files,
 * this row and a build option (docs/architecture.md, "Adding a sink").
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

extern const pgo_sink_ops_t pgo_sink_stdout_ops;

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

/* --- exec sink --- */

extern const pgo_sink_ops_t pgo_sink_exec_ops;
/* sinks/exec_conf.c: the sink.exec_* keys, the rules validate checks,
 * and the configure step that reads them. */
extern const pgo_conf_key_t pgo_sink_exec_keys[];
int pgo_sink_exec_validate(const pgo_conf_t *conf, pgo_error_t *err);
int pgo_sink_exec_conf_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The exec sink's configuration, copied at open. */
struct pgo_exec_conf {
	char *command;
	int64_t timeout_ms;
};
int pgo_sink_exec_configure(pgo_sink_t *sink, const char *command,
			    int64_t timeout_ms);
struct pgo_proc_result;
/* Gives every event of b its verdict once the command's run res ended
 * (not by the timeout): its stdout's verdict lines, then its exit status
 * for the rest (input_len: the bytes it was given, for the message when
 * it left some unread).  The sink's own step, open to tests/fuzz. */
void pgo_sink_exec_decide(pgo_batch_t *b, const struct pgo_proc_result *res,
			  size_t input_len);

/* --- schema --- */

/* Reads the applied schema version (0 if none) on an idle connection. */
int pgo_schema_read_version(PGconn *conn, int *version, pgo_error_t *err);
/* The message for a version mismatch, or NULL when version matches. */
int pgo_schema_verdict(int db_version, pgo_error_t *err);

/* --- queue --- */
#include "queue/queue.h"

/* --- redis sink --- */

extern const pgo_sink_ops_t pgo_sink_redis_ops;
/* sinks/redis/streams_conf.c: the sink.redis_* keys, read by the bullmq sink
 * and by consume too. */
extern const pgo_conf_key_t pgo_sink_redis_keys[];
/* Reads the sink.redis_* keys (and relay.queue) into the sink; checks the
 * URL and the stream template. */
int pgo_sink_redis_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* --- bullmq sink --- */

extern const pgo_sink_ops_t pgo_sink_bullmq_ops;
/* sinks/redis/bullmq_conf.c: the sink.bullmq_* keys. */
extern const pgo_conf_key_t pgo_sink_bullmq_keys[];
/* Reads the sink.bullmq_* keys (and the sink.redis_* connection keys) and
 * loads the exported add script; refuses untested bullmq majors. */
int pgo_sink_bullmq_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* --- nats sink (sinks/nats/) --- */

extern const pgo_sink_ops_t pgo_sink_nats_ops;
/* sinks/nats/nats_conf.c: the sink.nats_* keys. */
extern const pgo_conf_key_t pgo_sink_nats_keys[];
/* Reads the sink.nats_* keys (and relay.queue) into the sink; checks the
 * subject template, the URL and the files named. */
int pgo_sink_nats_configure(pgo_sink_t *sink, const pgo_conf_t *conf);
/* Appends a nats:// or tls:// URL (or a comma-separated list of them) to
 * b with every password or token as "***"; false (nothing appended) when
 * url is not one. */
bool pgo_nats_url_mask(const char *url, pgo_buf_t *b);

/* --- http sink --- */

extern const pgo_sink_ops_t pgo_sink_http_ops;
/* sinks/http/http_conf.c: the sink.http_* keys and the rules between
 * them. */
extern const pgo_conf_key_t pgo_sink_http_keys[];
int pgo_sink_http_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.http_* keys (and relay.queue, relay.mode) into the
 * sink; checks the URL template, the secrets and the headers. */
int pgo_sink_http_configure(pgo_sink_t *sink, const pgo_conf_t *conf);
/* Writes the 40 lower-case hex digits of SHA-1(data) and a NUL into hex
 * (the name EVALSHA gives a script), computed by libcrypto.  Returns PGO_OK,
 * or PGO_ERR_NOMEM with hex "" when libcrypto fails (out of memory, or no
 * provider offers SHA-1). */
int pgo_sha1_hex(const char *data, size_t len, char hex[41]);

/* --- rabbitmq sink (sinks/amqp.c, sinks/amqp_conf.c) --- */

extern const pgo_sink_ops_t pgo_sink_amqp_ops;
/* The sink.amqp_* keys, and the rules between them (cert and key; the
 * confirm timeout within database.idle_tx_timeout). */
extern const pgo_conf_key_t pgo_sink_amqp_keys[];
int pgo_sink_amqp_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.amqp_* keys (and relay.queue) into the sink; checks the
 * URL and the routing key template. */
int pgo_sink_amqp_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* --- kafka sink --- */

extern const pgo_sink_ops_t pgo_sink_kafka_ops;
/* sinks/kafka_conf.c: the sink.kafka_* keys and the rules validate checks
 * (templates, the timeout against database.idle_tx_timeout, librdkafka's
 * own verdict on every property). */
extern const pgo_conf_key_t pgo_sink_kafka_keys[];
int pgo_sink_kafka_validate(const pgo_conf_t *conf, pgo_error_t *err);
/* Reads the sink.kafka_* keys (and relay.queue) into the sink and builds
 * the producer's configuration (sinks/kafka.c). */
int pgo_sink_kafka_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* --- ABI: the structs callers fill carry their size (abi.c) --- */

typedef enum pgo_abi_struct {
	PGO_ABI_MSG = 0,
	PGO_ABI_JOB_OPTS = 1,
	PGO_ABI_CRON_SCHEDULE = 2,
	PGO_ABI_CONSUMER_OPTS = 3,
	PGO_ABI_WORKER_OPTS = 4,
	PGO_ABI_SCHEDULER_OPTS = 5
} pgo_abi_struct_t;

/* sizeof the struct in this build. */
size_t pgo_abi_size(pgo_abi_struct_t s);
/* PGO_OK when size is a size some release gave the struct; otherwise
 * PGO_ERR_INVALID with a message naming the struct and the fix. */
int pgo_abi_check(pgo_abi_struct_t s, size_t size, pgo_error_t *err);
/* Copies the caller's struct src (its size field checked) over dst, a
 * full struct already holding the defaults: the fields an older, smaller
 * struct lacks keep them.  dst's size field becomes this build's. */
int pgo_abi_copy(pgo_abi_struct_t s, void *dst, const void *src,
		 pgo_error_t *err);
/* What the *_opts_init() functions do: copies the first size bytes of a
 * full struct of defaults into dst and sets its size field, or, for a
 * size no release had, writes only the size field (when it fits) and
 * returns PGO_ERR_INVALID. */
int pgo_abi_init(pgo_abi_struct_t s, void *dst, size_t size,
		 const void *defaults);

/* --- exports of the relay section of pgoutbox.h --- */

/* The library is built with -fvisibility=hidden and pgoutbox.h marks its
 * functions PGO_EXPORT (pgoutbox/sink.h too), except in the relay section,
 * which is being rewritten.  Until those declarations carry PGO_EXPORT
 * themselves, these redeclarations export the functions (a later
 * declaration may add the visibility).  Delete each one as its
 * declaration in pgoutbox.h gains PGO_EXPORT; t_exports.sh fails when a
 * declared function is not exported. */
PGO_EXPORT pgo_relay_t *pgo_relay_new(pgo_conf_t *conf, pgo_sink_t *sink,
				      pgo_error_t *err);
PGO_EXPORT void pgo_relay_destroy(pgo_relay_t *relay);
PGO_EXPORT int pgo_relay_run(pgo_relay_t *relay);
PGO_EXPORT void pgo_relay_request_stop(pgo_relay_t *relay);
PGO_EXPORT void pgo_relay_request_reload(pgo_relay_t *relay);
PGO_EXPORT void pgo_relay_get_stats(const pgo_relay_t *relay,
				    pgo_relay_stats_t *out);
PGO_EXPORT const char *pgo_relay_errmsg(const pgo_relay_t *relay);

#endif /* PGO_INT_H */
