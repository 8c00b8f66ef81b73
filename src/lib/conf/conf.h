/*
 * conf/conf.h — the configuration as the other modules see it: the key
 * row every table is made of (conf/keys.c's own, and each sink's), the
 * typed values, and the readers and writers of durations.  The life cycle
 * (pgo_conf_new, _load_file, _set, _reload, _show) is the API's, in
 * pgoutbox.h.
 */
#ifndef PGO_CONF_CONF_H
#define PGO_CONF_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/mask.h"
#include "pgoutbox.h"

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
 * One configuration key, a row of a declarative table: conf/keys.c's own
 * table, or the keys a sink declares in its registry row (sinks/registry.c).
 * The same rows read the INI file, the PGOUTBOX_<SECTION>_<NAME> variables and
 * the flags, and print `config show`, `--help` and the reference.
 */
typedef struct pgo_conf_key {
	const char *key;      /* "section.name", as messages spell it */
	const char *section;  /* INI section; part of the variable name */
	const char *name;     /* name within the section */
	pgo_conf_type_t type; /* how the text is read and stored */
	const char *def;      /* default, as text read like any other */
	int64_t min;	      /* lowest value: int as is, duration in ms */
	int64_t max;	      /* highest value, same units */
	bool reloadable;      /* a running relay takes a new value (SIGHUP) */
	bool secret;	      /* may hold a password: masked when written */
	/* A secret's masker (its URL's kind: pgo_redis_url_mask); NULL:
	 * pgo_conninfo_mask(), which hides whole what libpq cannot read. */
	pgo_mask_fn mask;
	const char *flag;      /* command-line flag ("--batch") or NULL */
	const char *env_alias; /* conventional variable also read, or NULL */
	const char *const *choices; /* enum: the names, index = value */
	const char *help; /* one line for `config show` and the docs */
	/* The key names a file whose contents are the value of key
	 * file_for (a password kept out of argv and the environment):
	 * setting it reads the file and sets file_for from the same
	 * source, ranked as that source is.  NULL: a plain key. */
	const char *file_for;
	/* conf's own keys only: the value is also kept in this field of
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

/* --- a fleet's databases (databases.c) --- */

/* The longest name of a fleet's database. */
#define PGO_DB_NAME_MAX 48

/* Database i of the fleet: *name (NULL for a --db flag: the fleet names
 * it), *url, and whether it is a [database NAME] section of the file
 * (from_file may be NULL).  false past the last. */
bool pgo_conf_database(const pgo_conf_t *conf, size_t i, const char **name,
		       const char **url, bool *from_file);
/* A database of the fleet as its relay, its log lines, metric labels,
 * events' source header and `status` name it. */
typedef struct pgo_conf_db {
	char name[PGO_DB_NAME_MAX + 1]; /* a section's, or a --db's own */
	const char *url;		/* conf's: valid until it reloads */
	bool from_file;			/* a [database NAME] section */
} pgo_conf_db_t;

/* The fleet's databases, named, into dbs[pgo_conf_database_count()]: a
 * section by its NAME; --db flags by their URLs' dbnames when each has
 * a usable one of its own, else db1, db2, ... in the order given.
 * PGO_OK, or PGO_ERR_CONFIG (err says it) for a section without url or
 * sections and --db flags both. */
int pgo_conf_databases_named(const pgo_conf_t *conf, pgo_conf_db_t *dbs,
			     pgo_error_t *err);
/* The configuration database url's relay runs with: base's sources read
 * again (file, envp, flags) with database.url = url as a flag (where
 * names it), validated; no fleet databases.  NULL with err filled. */
pgo_conf_t *pgo_conf_for_database(const pgo_conf_t *base, const char *url,
				  const char *where, char *const *envp,
				  pgo_error_t *err);

/* Read-only view of the typed values (valid until the next set/reload). */
const struct pgo_conf_values *pgo_conf_values(const pgo_conf_t *conf);

/* pgo_conf_show() of the keys whose value differs from their default
 * (`config show --changed`): nothing when none does.  PGO_OK, or
 * PGO_ERR_NOMEM (nothing written) when the defaults cannot be made. */
int pgo_conf_show_changed(const pgo_conf_t *conf, FILE *out);

/* The flag the user probably meant by an unknown one: the nearest
 * spelling among every key's flag and extra (NULL-ended, may be NULL), or
 * NULL when none is close. */
const char *pgo_conf_suggest_flag(const char *flag, const char *const *extra);

/* Parses a duration ("250ms", "30s", "5m", "1h", "0") into ms. */
int pgo_parse_duration(const char *s, int64_t *ms, const char **why);
/* Formats ms in the largest unit that divides it: "0", "250ms", "5m". */
void pgo_format_duration(int64_t ms, char *buf, size_t size);

#endif
