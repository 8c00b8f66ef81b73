/*
 * conf.c — the configuration: one declarative table of keys.
 *
 * Every key is one row of a table (pgo_conf_key_t): section, name, type,
 * default, bounds, whether a running relay may take a new value on SIGHUP,
 * the command-line flag and the help text.  conf.c's own keys are in
 * own_keys[] below, each also kept in a field of struct pgo_conf_values;
 * every sink declares its sink.<sink>_* keys in its registry row
 * (sinks/registry.c) and reads them with pgo_conf_get_*(), and relay.sink takes
 * its values and help from the same registry.  Those rows read the INI file
 * (libinih), the PGOUTBOX_* environment and the flags, print `pgoutbox
 * config show` and write the Markdown reference, so the five cannot drift
 * apart.
 *
 * Sources rank defaults < file < environment < flags.  A value from a
 * lower-ranked source is still checked (a typo in the file is reported
 * even when a flag overrides that key) but never replaces a value from a
 * higher-ranked one, so callers may read the sources in any order: the
 * CLI parses its flags before it knows which file to read.
 *
 * Each key keeps its value as canonical text ("30s", "on") next to the
 * typed value, and where that value came from.  Reload builds a fresh
 * configuration from the same sources and compares the texts.
 *
 * Values that may hold a password (database.url, sink.redis_url) are
 * masked whenever this file writes them out: `config show` and the reload
 * log lines; libpq's PQconninfoParse() says what is secret in a database
 * URL.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "pgo_int.h"
#ifdef PGO_HAVE_REDIS
#include "sinks/redis/conn.h"
#endif

/* --- the table --- */

/* Indexed by pgo_conf_type_t, in its order. */
static const char *const type_names[] = {"string", "int",  "duration",
					 "bool",   "enum", "identifier"};

/* Short names of the types (pgo_conf_type_t) for the table below. */
#define T_STRING   PGO_CONF_T_STRING
#define T_INT	   PGO_CONF_T_INT
#define T_DURATION PGO_CONF_T_DURATION
#define T_BOOL	   PGO_CONF_T_BOOL
#define T_ENUM	   PGO_CONF_T_ENUM
#define T_IDENT	   PGO_CONF_T_IDENT

#define KEY PGO_CONF_KEY
#define FIELD(f)                                                               \
	.in_values = true, .offset = offsetof(struct pgo_conf_values, f)
#define SECONDS(n) PGO_SECONDS(n)
#define MINUTES(n) PGO_MINUTES(n)
#define HOURS(n)   PGO_HOURS(n)

/* Most sinks a build may have, and the most keys in all tables. */
#define SINKS_MAX 32
#define KEYS_MAX  256

/* relay.sink: the names of the sink registry (index = row) and a help
 * line made of their summaries, both filled in by keys_init(). */
static const char *sink_choices[SINKS_MAX + 1];
static char sink_help[2048];

/* The names are the enums' values in order: index = enum value. */
static const char *const level_choices[] = {"error", "warn", "info", "debug",
					    NULL};
static const char *const mode_choices[] = {"concurrent", "ordered", "strict",
					   NULL};
static const char *const poison_choices[] = {"dead_letter", "halt", NULL};
_Static_assert(PGO_MODE_CONCURRENT == 0 && PGO_MODE_ORDERED == 1 &&
		       PGO_MODE_STRICT == 2,
	       "mode_choices follows pgo_mode_t");
_Static_assert(PGO_POISON_DEAD_LETTER == 0 && PGO_POISON_HALT == 1,
	       "poison_choices follows pgo_poison_t");
_Static_assert(PGO_LOG_ERROR == 0 && PGO_LOG_WARN == 1 && PGO_LOG_INFO == 2 &&
		       PGO_LOG_DEBUG == 3,
	       "level_choices follows pgo_log_level_t");

/* conf.c's own keys; keys_init() adds the sinks' keys, in [sink]. */
static const pgo_conf_key_t own_keys[] = {
	/* [database] */
	{KEY("database", "url"), FIELD(db_url), .type = T_STRING, .def = "",
	 .secret = true, .flag = "--db", .env_alias = "DATABASE_URL",
	 .help = "libpq conninfo or postgres:// URL, passed through "
		 "untouched"},
	{KEY("database", "url_file"), .type = T_STRING, .def = "",
	 .flag = "--db-file", .file_for = "database.url",
	 .help = "File holding database.url (its first line), so that a "
		 "password shows in neither ps nor the environment"},
	{KEY("database", "connect_timeout"), FIELD(connect_timeout),
	 .type = T_DURATION, .def = "10s", .min = SECONDS(1),
	 .max = MINUTES(10),
	 .help = "Give up a connection attempt after this long"},
	{KEY("database", "statement_timeout"), FIELD(statement_timeout),
	 .type = T_DURATION, .def = "30s", .min = 0, .max = HOURS(1),
	 .help = "statement_timeout of the relay's sessions (0 = none)"},
	{KEY("database", "lock_timeout"), FIELD(lock_timeout),
	 .type = T_DURATION, .def = "5s", .min = 0, .max = HOURS(1),
	 .help = "lock_timeout of the relay's sessions (0 = none)"},
	{KEY("database", "idle_tx_timeout"), FIELD(idle_tx_timeout),
	 .type = T_DURATION, .def = "1m", .min = 0, .max = HOURS(1),
	 .help = "idle_in_transaction_session_timeout of the relay's "
		 "sessions (0 = none)"},

	/* [relay] */
	{KEY("relay", "queue"), FIELD(queue), .type = T_IDENT, .def = "outbox",
	 .flag = "--queue",
	 .help = "Queue to relay: a table in schema pgoutbox"},
	{KEY("relay", "name"), FIELD(name), .type = T_STRING, .def = "",
	 .flag = "--name",
	 .help = "Relay name in application_name and logs; "
		 "empty: host-pid"},
	{KEY("relay", "sink"), FIELD(sink), .type = T_ENUM, .def = "stdout",
	 .choices = sink_choices, .flag = "--sink", .help = sink_help},
	{KEY("relay", "mode"), FIELD(mode), .type = T_ENUM, .def = "ordered",
	 .choices = mode_choices, .flag = "--mode",
	 .help = "ordered: per-key order through shard leases; concurrent: "
		 "SKIP LOCKED, no order, fastest; strict: one global order, "
		 "one active relay"},
	{KEY("relay", "poison"), FIELD(poison), .type = T_ENUM,
	 .def = "dead_letter", .choices = poison_choices, .reloadable = true,
	 .flag = "--poison",
	 .help = "Ordered modes, an event out of attempts: dead_letter it "
		 "and move on, or halt its shard until an operator acts"},
	{KEY("relay", "heartbeat"), FIELD(heartbeat), .type = T_DURATION,
	 .def = "500ms", .min = 50, .max = MINUTES(1), .reloadable = true,
	 .flag = "--heartbeat",
	 .help = "How often a relay announces itself in pgoutbox.relays "
		 "(with its mode, so that relays of another mode on the "
		 "queue are seen) and, in the ordered modes, rebalances "
		 "shard leases"},
	{KEY("relay", "lease_timeout"), FIELD(lease_timeout),
	 .type = T_DURATION, .def = "10s", .min = SECONDS(1),
	 .max = MINUTES(10), .flag = "--lease-timeout",
	 .help = "Ordered modes: a relay connection silent this long (no "
		 "heartbeat: stopped, hung, or stuck in one batch) is fenced "
		 "(its session terminated) and its shards taken over; a "
		 "round trip to PostgreSQL gets statement_timeout plus this "
		 "long before the relay drops the connection; in every mode, "
		 "a relay silent this long no longer counts as a relay of "
		 "its mode"},
	{KEY("relay", "maintain_interval"), FIELD(maintain_interval),
	 .type = T_DURATION, .def = "1h", .min = 0, .max = HOURS(24),
	 .reloadable = true,
	 .help = "Run pgoutbox.maintain() (archive and inbox partitions) "
		 "this often, one instance at a time (0 = never)"},
	{KEY("relay", "batch"), FIELD(batch), .type = T_INT, .def = "500",
	 .min = 1, .max = 10000, .reloadable = true, .flag = "--batch",
	 .help = "Events claimed per transaction"},
	{KEY("relay", "batch_bytes"), FIELD(batch_bytes), .type = T_INT,
	 .def = "16777216", .min = 1024, .max = 1073741824, .reloadable = true,
	 .flag = "--batch-bytes",
	 .help = "Bytes claimed per transaction: a claim adds no event "
		 "once its events (topic, key, type, payload, headers as "
		 "stored) reach this; one event is always taken"},
	{KEY("relay", "in_flight"), FIELD(in_flight), .type = T_INT, .def = "2",
	 .min = 1, .max = 16, .flag = "--in-flight",
	 .help = "Connections claiming batches at once"},
	{KEY("relay", "listen"), FIELD(listen), .type = T_BOOL, .def = "on",
	 .flag = "--listen",
	 .help = "LISTEN for producers' wake-ups; off: poll only"},
	{KEY("relay", "wake_linger"), FIELD(wake_linger), .type = T_DURATION,
	 .def = "1ms", .min = 0, .max = 100, .flag = "--wake-linger",
	 .help = "While producers commit side by side, claim again this "
		 "long after a claim finds nothing before asking them to "
		 "notify (NOTIFY serializes their commits); 0: ask at once"},
	{KEY("relay", "claim_floor"), FIELD(claim_floor), .type = T_BOOL,
	 .def = "on", .flag = "--claim-floor",
	 .help = "Start claims past the events already sent "
		 "(docs/retention.md); off: from the lowest id"},
	{KEY("relay", "synchronous_commit"), FIELD(sync_commit), .type = T_BOOL,
	 .def = "off", .flag = "--synchronous-commit",
	 .help = "The relay's own commits (claims, acks, retries) wait for "
		 "the WAL flush; off: a server crash can undo the last acks "
		 "and send those events again, never lose one "
		 "(docs/retention.md)"},
	{KEY("relay", "poll_interval"), FIELD(poll_interval),
	 .type = T_DURATION, .def = "30s", .min = 10, .max = HOURS(1),
	 .reloadable = true, .flag = "--poll-interval",
	 .help = "Poll this often when no wake-up arrives"},
	{KEY("relay", "max_attempts"), FIELD(max_attempts), .type = T_INT,
	 .def = "10", .min = 1, .max = 1000, .reloadable = true,
	 .flag = "--max-attempts",
	 .help = "Deliveries tried before an event goes to dead letters"},
	{KEY("relay", "retry_base"), FIELD(retry_base), .type = T_DURATION,
	 .def = "1s", .min = 1, .max = HOURS(1), .reloadable = true,
	 .help = "Backoff before the first retry; doubles each attempt"},
	{KEY("relay", "retry_max"), FIELD(retry_max), .type = T_DURATION,
	 .def = "5m", .min = 1, .max = HOURS(24), .reloadable = true,
	 .help = "Ceiling of the retry backoff"},
	{KEY("relay", "reconnect_max"), FIELD(reconnect_max),
	 .type = T_DURATION, .def = "10s", .min = 100, .max = MINUTES(10),
	 .reloadable = true,
	 .help = "Ceiling of the reconnect backoff after losing PostgreSQL"},
	{KEY("relay", "drain_timeout"), FIELD(drain_timeout),
	 .type = T_DURATION, .def = "1m", .min = 0, .max = HOURS(1),
	 .reloadable = true,
	 .help = "On SIGTERM, wait this long for the sink to finish the "
		 "batches in flight; the rest is rolled back and sent again"},
	{KEY("relay", "stats_interval"), FIELD(stats_interval),
	 .type = T_DURATION, .def = "1m", .min = 0, .max = HOURS(24),
	 .reloadable = true, .help = "Log a stats line this often (0 = off)"},

	/* [worker] */
	{KEY("worker", "queue"), FIELD(worker_queue), .type = T_STRING,
	 .def = "",
	 .help = "Work queue drained by pgoutbox run's worker (empty: no "
		 "worker)"},
	{KEY("worker", "exec_command"), FIELD(worker_exec), .type = T_STRING,
	 .def = "",
	 .help = "Worker handler: sh -c command per job, payload on stdin, "
		 "exit 0 = done"},
	{KEY("worker", "sql_function"), FIELD(worker_sql), .type = T_STRING,
	 .def = "",
	 .help = "Worker handler: [schema.]function(payload jsonb) called in "
		 "the claim transaction"},
	{KEY("worker", "concurrency"), FIELD(worker_concurrency), .type = T_INT,
	 .def = "1", .min = 1, .max = 256,
	 .help = "Jobs run at once (exec) or connections (sql)"},
	{KEY("worker", "batch"), FIELD(worker_batch), .type = T_INT,
	 .def = "100", .min = 1, .max = 10000,
	 .help = "Jobs per transaction of the sql handler"},
	{KEY("worker", "lease"), FIELD(worker_lease), .type = T_DURATION,
	 .def = "30s", .min = SECONDS(1), .max = HOURS(24),
	 .help = "Lease of a running job; heartbeats extend it every third"},
	{KEY("worker", "timeout"), FIELD(worker_timeout), .type = T_DURATION,
	 .def = "25s", .min = 10, .max = HOURS(24),
	 .help = "An exec job's process group is killed after this long"},
	{KEY("worker", "max_attempts"), FIELD(worker_max_attempts),
	 .type = T_INT, .def = "10", .min = 1, .max = 1000,
	 .help = "Runs tried before a job goes to dead letters"},
	{KEY("worker", "retry_base"), FIELD(worker_retry_base),
	 .type = T_DURATION, .def = "1s", .min = 1, .max = HOURS(1),
	 .help = "Backoff before a job's first retry; doubles each attempt"},
	{KEY("worker", "retry_max"), FIELD(worker_retry_max),
	 .type = T_DURATION, .def = "5m", .min = 1, .max = HOURS(24),
	 .help = "Ceiling of a job's retry backoff"},
	{KEY("worker", "poll_interval"), FIELD(worker_poll_interval),
	 .type = T_DURATION, .def = "5s", .min = 10, .max = HOURS(1),
	 .help = "Worker polls this often when no wake-up arrives"},

	/* [cron] */
	{KEY("cron", "enabled"), FIELD(cron_enabled), .type = T_BOOL,
	 .def = "off", .help = "pgoutbox run starts a cron scheduler"},
	{KEY("cron", "grace"), FIELD(cron_grace), .type = T_DURATION,
	 .def = "10s", .min = 0, .max = HOURS(24),
	 .help = "A tick later than this counts as missed and follows its "
		 "schedule's missed policy"},
	{KEY("cron", "history_keep"), FIELD(cron_history_keep),
	 .type = T_DURATION, .def = "168h", .min = 0, .max = HOURS(24 * 3650),
	 .help = "Cron history older than this is deleted (0 = kept)"},

	/* [metrics] */
	{KEY("metrics", "listen"), FIELD(metrics_listen), .type = T_STRING,
	 .def = "", .flag = "--metrics-listen",
	 .help = "Serve /metrics, /healthz and /readyz over HTTP on this "
		 "host:port (e.g. 127.0.0.1:9187); empty: off"},
	{KEY("metrics", "interval"), FIELD(metrics_interval),
	 .type = T_DURATION, .def = "5s", .min = 100, .max = HOURS(1),
	 .reloadable = true,
	 .help = "How often the relay refreshes the gauges it reads from the "
		 "database (pending, oldest due, dead letters, xmin age)"},

	/* [log] */
	{KEY("log", "level"), FIELD(log_level), .type = T_ENUM, .def = "info",
	 .choices = level_choices, .reloadable = true, .flag = "--log-level",
	 .help = "Most verbose level logged"},
};

#define NOWN (sizeof(own_keys) / sizeof(own_keys[0]))

/* The order of the sections in `config show` and the reference. */
static const char *const section_order[] = {
	"database", "relay", "sink", "worker", "cron", "metrics", "log"};

/* Every key, conf.c's and the sinks', by section in section_order: a
 * section's own keys first, then each sink's in registry order.  Built
 * once by keys_init(); an index into keys[] names a key everywhere else. */
static const pgo_conf_key_t *keys[KEYS_MAX];
static size_t nkeys;
static char keys_problem[160]; /* why the tables do not fit; "" = they do */
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static int find_key(const char *key);

static void keys_broken(const char *what, const char *name)
{
	if (!keys_problem[0])
		snprintf(keys_problem, sizeof(keys_problem), "%s: %s", what,
			 name);
}

static void add_key(const pgo_conf_key_t *k)
{
	for (size_t i = 0; i < nkeys; i++) {
		if (strcmp(keys[i]->key, k->key) == 0) {
			keys_broken("key declared twice", k->key);
			return;
		}
	}
	if (nkeys == KEYS_MAX)
		keys_broken("more keys than KEYS_MAX", k->key);
	else
		keys[nkeys++] = k;
}

/* A sink's keys are in [sink], named after it (sink.redis_url for the
 * redis sink, or after its key_prefix: sink.amqp_url for rabbitmq), and
 * live in no field of struct pgo_conf_values. */
static bool sink_key_ok(const pgo_sink_def_t *d, const pgo_conf_key_t *k)
{
	const char *prefix = d->key_prefix ? d->key_prefix : d->name;
	size_t n = strlen(prefix);

	return strcmp(k->section, "sink") == 0 &&
	       strncmp(k->name, prefix, n) == 0 && k->name[n] == '_' &&
	       !k->in_values;
}

static void keys_init(void)
{
	size_t nsinks = 0, used = 0, declared = NOWN;

	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++) {
		if (nsinks == SINKS_MAX) {
			keys_broken("more sinks than SINKS_MAX", d->name);
			break;
		}
		sink_choices[nsinks++] = d->name;
		if (used < sizeof(sink_help))
			used += (size_t)snprintf(
				sink_help + used, sizeof(sink_help) - used,
				"%s%s: %s",
				nsinks > 1 ? "; " : "Where events go. ",
				d->name, d->summary);
		for (const pgo_conf_key_t *k = d->keys; k && k->key; k++) {
			if (!sink_key_ok(d, k))
				keys_broken("a sink key not named "
					    "sink.<sink>_*",
					    k->key);
			declared++;
		}
	}
	if (used >= sizeof(sink_help))
		keys_broken("the sink summaries overflow", "relay.sink");
	for (size_t s = 0; s < sizeof(section_order) / sizeof(*section_order);
	     s++) {
		for (size_t i = 0; i < NOWN; i++)
			if (strcmp(own_keys[i].section, section_order[s]) == 0)
				add_key(&own_keys[i]);
		for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
			for (const pgo_conf_key_t *k = d->keys; k && k->key;
			     k++)
				if (strcmp(k->section, section_order[s]) == 0)
					add_key(k);
	}
	if (nkeys != declared)
		keys_broken("a key outside the sections of section_order",
			    "conf.c");
	for (size_t i = 0; i < nkeys; i++)
		if (keys[i]->file_for && (find_key(keys[i]->file_for) < 0 ||
					  keys[i]->type != T_STRING))
			keys_broken("file_for names no key", keys[i]->key);
}

/* Builds keys[] on first use; false (and logged) when the tables do not
 * fit together, a bug that the unit tests catch. */
static bool keys_ready(void)
{
	pthread_once(&keys_once, keys_init);
	if (keys_problem[0])
		pgo_log(PGO_LOG_ERROR, "config", "key tables: %s",
			keys_problem);
	return !keys_problem[0];
}

/* Prefix of every variable that names a key. */
#define ENV_PREFIX "PGOUTBOX_"
/* Longest identifier T_IDENT accepts (that of a queue table). */
#define IDENT_MAX 48
/* Suggestions are offered within this many edits. */
#define SUGGEST_MAX_EDITS 2

/* --- the configuration --- */

/* What one key holds besides its typed value. */
struct key_state {
	pgo_conf_origin_t origin; /* source of the current value */
	int64_t num; /* typed value: int, enum index, ms, bool (0/1) */
	char *text;  /* canonical text of the value; never NULL after _new */
	char *where; /* the source ("relay.ini:3", "--batch"); NULL: none */
};

/* A value the caller set through pgo_conf_set() that no source re-reads
 * (a flag, or a default computed at run time), replayed on reload. */
struct setting {
	size_t key;		  /* index into keys[] */
	pgo_conf_origin_t origin; /* PGO_CONF_FLAG or PGO_CONF_DEFAULT */
	char *value;		  /* text as the caller gave it */
	char *where;		  /* as the caller named it, or NULL */
};

struct pgo_conf {
	struct pgo_conf_values vals; /* typed values the modules read */
	struct key_state *state;     /* per key, in keys[] order */
	char *path;		     /* file read last, re-read on reload */
	struct setting *settings;    /* replayed on reload, in set order */
	size_t nsettings;	     /* used entries of settings */
	size_t settings_cap;	     /* allocated entries of settings */
	char errmsg[512];	     /* last error; "" when none yet */
};

/* --- small helpers --- */

static int fail(pgo_conf_t *conf, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Records the error text and returns code. */
static int fail(pgo_conf_t *conf, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(conf->errmsg, sizeof(conf->errmsg), fmt, ap);
	va_end(ap);
	return code;
}

static int nomem(pgo_conf_t *conf)
{
	return fail(conf, PGO_ERR_NOMEM, "out of memory");
}

/* The address of key k's value inside vals. */
static void *field_of(struct pgo_conf_values *vals, const pgo_conf_key_t *k)
{
	return (char *)vals + k->offset;
}

static bool holds_string(const pgo_conf_key_t *k)
{
	return k->type == T_STRING || k->type == T_IDENT;
}

/* Size of the C object a key's value is stored in. */
static size_t field_size(const pgo_conf_key_t *k)
{
	switch (k->type) {
	case T_STRING:
	case T_IDENT: return sizeof(char *);
	case T_INT:
	case T_ENUM: return sizeof(int);
	case T_DURATION: return sizeof(int64_t);
	case T_BOOL: return sizeof(bool);
	}
	return 0;
}

static int find_key(const char *key)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strcmp(keys[i]->key, key) == 0)
			return (int)i;
	return -1;
}

static bool section_known(const char *name, size_t len)
{
	for (size_t i = 0; i < nkeys; i++)
		if (strlen(keys[i]->section) == len &&
		    memcmp(keys[i]->section, name, len) == 0)
			return true;
	return false;
}

/* The variable naming key k: PGOUTBOX_<SECTION>_<NAME> in upper case. */
static void env_name(const pgo_conf_key_t *k, char *buf, size_t size)
{
	snprintf(buf, size, ENV_PREFIX "%s_%s", k->section, k->name);
	for (char *p = buf; *p; p++)
		*p = (char)toupper((unsigned char)*p);
}

/* Levenshtein distance, or SUGGEST_MAX_EDITS + 1 for long strings. */
static int edit_distance(const char *a, const char *b)
{
	enum { LONGEST = 64 };
	size_t la = strlen(a), lb = strlen(b);
	int row[LONGEST + 1];

	if (la > LONGEST || lb > LONGEST)
		return SUGGEST_MAX_EDITS + 1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];

		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The closest of n candidates within SUGGEST_MAX_EDITS of s, or NULL. */
static const char *closest(const char *s, const char *const *cand, size_t n)
{
	const char *best = NULL;
	int best_d = SUGGEST_MAX_EDITS + 1;

	for (size_t i = 0; i < n; i++) {
		int d = edit_distance(s, cand[i]);

		if (d < best_d) {
			best = cand[i];
			best_d = d;
		}
	}
	return best;
}

/* The key the user probably meant by an unknown "section.name": the same
 * name in another section, else the nearest spelling. */
static const char *suggest_key(const char *key)
{
	const char *dot = strchr(key, '.');
	const char *all[KEYS_MAX];

	for (size_t i = 0; i < nkeys; i++) {
		if (dot && strcmp(keys[i]->name, dot + 1) == 0)
			return keys[i]->key;
		all[i] = keys[i]->key;
	}
	return closest(key, all, nkeys);
}

static const char *suggest_section(const char *name)
{
	const char *all[KEYS_MAX];

	for (size_t i = 0; i < nkeys; i++)
		all[i] = keys[i]->section;
	return closest(name, all, nkeys);
}

void pgo_format_duration(int64_t ms, char *buf, size_t size)
{
	static const struct {
		int64_t ms;
		const char *unit;
	} units[] = {{HOURS(1), "h"}, {MINUTES(1), "m"}, {SECONDS(1), "s"}};

	if (ms == 0) {
		snprintf(buf, size, "0");
		return;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].ms == 0) {
			snprintf(buf, size, "%lld%s",
				 (long long)(ms / units[i].ms), units[i].unit);
			return;
		}
	}
	snprintf(buf, size, "%lldms", (long long)ms);
}

/* The accepted values of key k, for messages and the reference. */
static void format_range(const pgo_conf_key_t *k, char *buf, size_t size)
{
	char lo[32], hi[32];
	size_t used = 0;

	buf[0] = '\0';
	switch (k->type) {
	case T_INT:
		snprintf(buf, size, "%lld..%lld", (long long)k->min,
			 (long long)k->max);
		break;
	case T_DURATION:
		pgo_format_duration(k->min, lo, sizeof(lo));
		pgo_format_duration(k->max, hi, sizeof(hi));
		snprintf(buf, size, "%s..%s", lo, hi);
		break;
	case T_ENUM:
		for (size_t i = 0; k->choices[i] && used < size; i++)
			used += (size_t)snprintf(buf + used, size - used,
						 "%s%s", i ? ", " : "",
						 k->choices[i]);
		break;
	case T_BOOL: snprintf(buf, size, "on, off"); break;
	case T_IDENT:
		snprintf(buf, size, "[a-z_][a-z0-9_]*, at most %d characters",
			 IDENT_MAX);
		break;
	case T_STRING: break;
	}
}

/* --- masking secrets --- */

/* libpq decides what a connection string holds: PQconninfoParse() reads a
 * conninfo string or a postgres:// URL exactly as a connection would and
 * marks the secret options (password, sslpassword, and whatever a later
 * libpq adds) with dispchar "*".  The text shown is rebuilt from those
 * options, in libpq's order of options and in the form it was written in
 * (a URL stays a URL), each secret as "***".  Text libpq cannot parse is
 * hidden whole.  Redis URLs are not libpq's: their masker sits next to
 * their parser (sinks/redis/conn.c). */

#define MASK	       "***"
#define MASK_DEPTH_MAX 2 /* a dbname holding a connection string, nested */

static bool mask_into(pgo_buf_t *b, const char *conninfo, int depth);

static bool is_secret(const PQconninfoOption *o)
{
	return o->dispchar && o->dispchar[0] == '*';
}

/* Length of the URL scheme libpq recognises at the start of s, or 0. */
static size_t url_scheme(const char *s)
{
	static const char *const schemes[] = {"postgresql://", "postgres://"};

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(s, schemes[i], strlen(schemes[i])) == 0)
			return strlen(schemes[i]);
	return 0;
}

/* What libpq would take for a connection string in a dbname. */
static bool holds_conninfo(const char *s)
{
	return url_scheme(s) > 0 || strchr(s, '=') != NULL;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* Appends s percent-encoded: libpq decodes every part of a URL. */
static void put_pct(pgo_buf_t *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

		if (unreserved(c))
			pgo_buf_append(b, s, 1);
		else
			pgo_buf_append(b, esc, 3);
	}
}

/* Appends s as a conninfo value, quoted when it must be. */
static void put_quoted(pgo_buf_t *b, const char *s)
{
	if (*s && !strpbrk(s, " \t\n\r\f\v'\\")) {
		pgo_buf_puts(b, s);
		return;
	}
	pgo_buf_puts(b, "'");
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			pgo_buf_puts(b, "\\");
		pgo_buf_append(b, s, 1);
	}
	pgo_buf_puts(b, "'");
}

/* Appends the value of o as it may be shown, percent-encoded for a URL or
 * quoted for conninfo.  A dbname holding a connection string of its own
 * (which libpq expands) is masked too.  False when it must be hidden. */
static bool put_value(pgo_buf_t *b, const PQconninfoOption *o, bool url,
		      int depth)
{
	pgo_buf_t inner;
	bool ok;

	if (is_secret(o)) {
		pgo_buf_puts(b, MASK);
		return true;
	}
	if (strcmp(o->keyword, "dbname") != 0 || !holds_conninfo(o->val)) {
		(url ? put_pct : put_quoted)(b, o->val);
		return true;
	}
	pgo_buf_init(&inner);
	pgo_buf_puts(&inner, "");
	ok = mask_into(&inner, o->val, depth + 1) && !inner.oom;
	if (ok)
		(url ? put_pct : put_quoted)(b, inner.data);
	pgo_buf_free(&inner);
	return ok;
}

static const PQconninfoOption *option(const PQconninfoOption *opts,
				      const char *keyword)
{
	for (; opts->keyword; opts++)
		if (strcmp(opts->keyword, keyword) == 0)
			return opts;
	return NULL;
}

/* Whether host (and port) lists can be written as host[:port],... in the
 * URL's authority: plain names and IPv6 addresses, a port for each host or
 * none.  Anything else goes into the query (?host=...&port=...). */
static bool authority_fits(const char *host, const char *port)
{
	size_t hosts = 1, ports = 1;

	for (const char *h = host; *h; h++)
		hosts += *h == ',';
	for (const char *p = port ? port : ""; *p; p++) {
		if (*p != ',' && (*p < '0' || *p > '9'))
			return false;
		ports += *p == ',';
	}
	if (port && ports != hosts)
		return false;
	/* "h" reads as no port at all, not an empty one. */
	if (port && !*port)
		return false;
	for (const char *h = host; *h; h++)
		if (!unreserved((unsigned char)*h) && *h != ',' && *h != ':')
			return false;
	/* Without a port for each, a list of hosts goes into the query:
	 * libpq reads "[a,::1]" or "[a,b]" as one host with no port, and
	 * "a,[::1]" or "a,b" as two with an empty port each, so the
	 * authority cannot say which it read (tests/fuzz/fuzz_mask found
	 * them); nor can it hold an empty host (",a", "a,,b", "a,"). */
	if (hosts > 1 && !port)
		return false;
	return *host && *host != ',' && !strstr(host, ",,") &&
	       host[strlen(host) - 1] != ',';
}

/* host "a,b" + port "1,2" -> "a:1,b:2"; IPv6 addresses in brackets. */
static void put_authority(pgo_buf_t *b, const char *host, const char *port)
{
	while (*host) {
		size_t hn = strcspn(host, ","),
		       pn = port ? strcspn(port, ",") : 0;
		bool v6 = memchr(host, ':', hn) != NULL;

		pgo_buf_puts(b, v6 ? "[" : "");
		pgo_buf_append(b, host, hn);
		pgo_buf_puts(b, v6 ? "]" : "");
		if (pn) {
			pgo_buf_puts(b, ":");
			pgo_buf_append(b, port, pn);
		}
		host += hn;
		if (port)
			port += pn + (port[pn] == ',');
		if (*host == ',')
			pgo_buf_append(b, host++, 1);
	}
}

/* A URL that libpq read as something its writer cannot have meant: an '@'
 * in a host or the database name, or a port that is not a number, come
 * from a password holding an unescaped '@', '/' or '?'.  libpq will not
 * connect with it either; shown, it would show (part of) that password. */
static bool url_misread(const PQconninfoOption *opts)
{
	const PQconninfoOption *host = option(opts, "host"),
			       *port = option(opts, "port"),
			       *db = option(opts, "dbname");

	if ((host && host->val && strchr(host->val, '@')) ||
	    (db && db->val && strchr(db->val, '@')))
		return true;
	for (const char *p = port && port->val ? port->val : ""; *p; p++)
		if (*p != ',' && (*p < '0' || *p > '9'))
			return true;
	return false;
}

/* postgresql://[user[:***]@][host[:port],...][/dbname][?keyword=value&...]
 */
static bool put_url(pgo_buf_t *b, const char *scheme, size_t scheme_len,
		    const PQconninfoOption *opts, int depth)
{
	const PQconninfoOption *user = option(opts, "user"),
			       *password = option(opts, "password"),
			       *host = option(opts, "host"),
			       *port = option(opts, "port"),
			       *db = option(opts, "dbname");
	bool in_authority, user_in_authority, db_in_path, ok = true;
	char sep = '?';

	if (!user || !password || !host || !port || !db || url_misread(opts))
		return false;
	in_authority = host->val && authority_fits(host->val, port->val);
	/* libpq reads "//@h" as no user and "/" as no database, not empty
	 * ones (tests/fuzz/fuzz_mask found "?user="): those go into the
	 * query. */
	user_in_authority = user->val && *user->val;
	db_in_path = db->val && *db->val;
	pgo_buf_append(b, scheme, scheme_len);
	if (user_in_authority || password->val) {
		if (user_in_authority)
			put_pct(b, user->val);
		if (password->val) {
			pgo_buf_puts(b, ":");
			ok = put_value(b, password, true, depth);
		}
		pgo_buf_puts(b, "@");
	}
	if (in_authority)
		put_authority(b, host->val, port->val);
	if (db_in_path) {
		pgo_buf_puts(b, "/");
		ok = ok && put_value(b, db, true, depth);
	}
	for (const PQconninfoOption *o = opts; ok && o->keyword; o++) {
		if (!o->val || o == password ||
		    (o == user && user_in_authority) ||
		    (o == db && db_in_path) ||
		    (in_authority && (o == host || o == port)))
			continue;
		pgo_buf_append(b, &sep, 1);
		sep = '&';
		pgo_buf_puts(b, o->keyword);
		pgo_buf_puts(b, "=");
		ok = put_value(b, o, true, depth);
	}
	return ok;
}

/* keyword=value keyword='a value' ... */
static bool put_conninfo(pgo_buf_t *b, const PQconninfoOption *opts, int depth)
{
	bool first = true, ok = true;

	for (const PQconninfoOption *o = opts; ok && o->keyword; o++) {
		if (!o->val)
			continue;
		pgo_buf_puts(b, first ? "" : " ");
		first = false;
		pgo_buf_puts(b, o->keyword);
		pgo_buf_puts(b, "=");
		ok = put_value(b, o, false, depth);
	}
	return ok;
}

static bool mask_into(pgo_buf_t *b, const char *conninfo, int depth)
{
	char *errmsg = NULL;
	PQconninfoOption *opts;
	size_t scheme = url_scheme(conninfo);
	bool ok;

	if (depth > MASK_DEPTH_MAX)
		return false;
	opts = PQconninfoParse(conninfo, &errmsg);
	PQfreemem(errmsg);
	if (!opts) /* unparseable, or out of memory */
		return false;
	ok = scheme ? put_url(b, conninfo, scheme, opts, depth)
		    : put_conninfo(b, opts, depth);
	PQconninfoFree(opts);
	return ok;
}

bool pgo_conninfo_mask(const char *conninfo, pgo_buf_t *b)
{
	size_t len = b->len;

	if (mask_into(b, conninfo, 0) && !b->oom)
		return true;
	b->len = len; /* hide all rather than risk a leak */
	if (b->data)
		b->data[len] = '\0';
	pgo_buf_puts(b, MASK);
	return false;
}

/* The value of key k as it may be shown: a password never appears.  The
 * result lives in b (or is a constant). */
static const char *display(const pgo_conf_key_t *k, const char *text,
			   pgo_buf_t *b)
{
	if (!k->secret)
		return text;
	pgo_buf_reset(b);
	pgo_buf_puts(b, "");
#ifdef PGO_HAVE_NATS
	if (pgo_nats_url_mask(text, b))
		return b->oom ? MASK : b->data;
#endif
#ifdef PGO_HAVE_REDIS
	if (pgo_redis_url_mask(text, b))
		return b->oom ? MASK : b->data;
#endif
	(void)pgo_conninfo_mask(text, b);
	/* Out of memory: hide all rather than risk a leak. */
	return b->oom ? MASK : b->data;
}

/* --- reading values --- */

int pgo_parse_duration(const char *s, int64_t *ms, const char **why)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {{"ms", 1},
		     {"s", SECONDS(1)},
		     {"m", MINUTES(1)},
		     {"h", HOURS(1)}};
	const char *dummy;
	int64_t n = 0;
	size_t ulen;

	if (!why)
		why = &dummy;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '-') {
		*why = "must not be negative";
		return PGO_ERR_INVALID;
	}
	if (!isdigit((unsigned char)*s)) {
		*why = "is not a duration (like 250ms, 30s, 5m, 1h)";
		return PGO_ERR_INVALID;
	}
	for (; isdigit((unsigned char)*s); s++) {
		if (n > (INT64_MAX - 9) / 10) {
			*why = "is too large";
			return PGO_ERR_INVALID;
		}
		n = n * 10 + (*s - '0');
	}
	if (*s == '.' || *s == ',') {
		*why = "is not a whole number (write 1500ms, not 1.5s)";
		return PGO_ERR_INVALID;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	ulen = strcspn(s, " \t\r\n\v\f");
	for (const char *t = s + ulen; *t; t++) {
		if (!isspace((unsigned char)*t)) {
			*why = "is not a duration (like 250ms, 30s, 5m, 1h)";
			return PGO_ERR_INVALID;
		}
	}
	if (ulen == 0) {
		if (n != 0) {
			*why = "needs a unit (ms, s, m, h)";
			return PGO_ERR_INVALID;
		}
		*ms = 0;
		return PGO_OK;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strlen(units[i].unit) != ulen ||
		    memcmp(s, units[i].unit, ulen) != 0)
			continue;
		if (n > INT64_MAX / units[i].ms) {
			*why = "is too large";
			return PGO_ERR_INVALID;
		}
		*ms = n * units[i].ms;
		return PGO_OK;
	}
	*why = "has an unknown unit (use ms, s, m, h)";
	return PGO_ERR_INVALID;
}

/* Why name is not an identifier T_IDENT accepts, or NULL when it is.
 * Plain ASCII ranges: the locale must not widen what SQL accepts. */
static const char *ident_problem(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return "is empty";
	if (len > IDENT_MAX)
		return "is longer than 48 characters";
	if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
		return "must start with a lower-case letter or _";
	for (const char *p = name + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return "may contain only a-z, 0-9 and _";
	return NULL;
}

static int parse_bool(const char *s)
{
	static const char *const yes[] = {"on", "true", "yes", "1"};
	static const char *const no[] = {"off", "false", "no", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return 1;
		if (strcasecmp(s, no[i]) == 0)
			return 0;
	}
	return -1;
}

/*
 * Reads value as key k.  On success *num holds the number (int, ms, bool,
 * enum index) and *text the canonical text (malloc'd).  Messages start
 * with where; subject is "relay.batch = " when where does not already name
 * the key (a file line) and "" when it does (a flag, a variable).
 */
static int parse_value(pgo_conf_t *conf, const pgo_conf_key_t *k,
		       const char *value, const char *where,
		       const char *subject, int64_t *num, char **text)
{
	char range[128], canon[32];
	const char *why = NULL;
	const char *start = value;
	size_t len = strlen(value);
	long long n;
	char *t, *end;
	int rc = PGO_ERR_CONFIG, b;

	*text = NULL;
	if (k->type == T_STRING) {
		/* Passed through untouched: conninfo, commands. */
		*text = strdup(value);
		return *text ? PGO_OK : nomem(conf);
	}
	while (isspace((unsigned char)*start)) {
		start++;
		len--;
	}
	while (len > 0 && isspace((unsigned char)start[len - 1]))
		len--;
	t = strndup(start, len);
	if (!t)
		return nomem(conf);
	format_range(k, range, sizeof(range));

	switch (k->type) {
	case T_INT:
		errno = 0;
		n = strtoll(t, &end, 10);
		if (!*t || *end ||
		    !(isdigit((unsigned char)*t) || *t == '-' || *t == '+')) {
			fail(conf, rc, "%s: %s\"%s\" is not a whole number",
			     where, subject, t);
			break;
		}
		if (errno == ERANGE || n < k->min || n > k->max) {
			fail(conf, rc, "%s: %s%s is out of range (%s)", where,
			     subject, t, range);
			break;
		}
		*num = n;
		snprintf(canon, sizeof(canon), "%lld", n);
		rc = PGO_OK;
		break;
	case T_DURATION:
		if (pgo_parse_duration(t, num, &why) != PGO_OK) {
			fail(conf, rc, "%s: %s\"%s\" %s", where, subject, t,
			     why);
			break;
		}
		if (*num < k->min || *num > k->max) {
			fail(conf, rc, "%s: %s%s is out of range (%s)", where,
			     subject, t, range);
			break;
		}
		pgo_format_duration(*num, canon, sizeof(canon));
		rc = PGO_OK;
		break;
	case T_BOOL:
		b = parse_bool(t);
		if (b < 0) {
			fail(conf, rc,
			     "%s: %s\"%s\" is not a boolean (use on/off, "
			     "true/false, yes/no, 1/0)",
			     where, subject, t);
			break;
		}
		*num = b;
		snprintf(canon, sizeof(canon), "%s", b ? "on" : "off");
		rc = PGO_OK;
		break;
	case T_ENUM:
		for (size_t i = 0; k->choices[i]; i++) {
			if (strcasecmp(t, k->choices[i]) == 0) {
				*num = (int64_t)i;
				snprintf(canon, sizeof(canon), "%s",
					 k->choices[i]);
				rc = PGO_OK;
				break;
			}
		}
		if (rc != PGO_OK) {
			size_t nc = 0;
			const char *guess;

			while (k->choices[nc])
				nc++;
			guess = closest(t, k->choices, nc);
			fail(conf, rc, "%s: %s\"%s\" is not one of %s%s%s%s",
			     where, subject, t, range,
			     guess ? " (did you mean \"" : "",
			     guess ? guess : "", guess ? "\"?)" : "");
		}
		break;
	case T_IDENT:
		why = ident_problem(t);
		if (why) {
			fail(conf, rc,
			     "%s: %s\"%s\" is not a valid name: it %s", where,
			     subject, t, why);
			break;
		}
		*text = t; /* already canonical */
		return PGO_OK;
	case T_STRING: break;
	}
	free(t);
	if (rc != PGO_OK)
		return rc;
	*text = strdup(canon);
	return *text ? PGO_OK : nomem(conf);
}

/* Moves an already parsed value into vals (a key of conf.c's own, with a
 * field there), freeing a replaced string. */
static void store_value(pgo_conf_t *conf, const pgo_conf_key_t *k, int64_t num,
			char *str)
{
	void *field = field_of(&conf->vals, k);

	switch (k->type) {
	case T_STRING:
	case T_IDENT:
		free(*(char **)field);
		*(char **)field = str;
		break;
	case T_INT:
	case T_ENUM: *(int *)field = (int)num; break;
	case T_DURATION: *(int64_t *)field = num; break;
	case T_BOOL: *(bool *)field = num != 0; break;
	}
}

static int set_key(pgo_conf_t *conf, size_t i, const char *value,
		   pgo_conf_origin_t origin, const char *where);

#define SECRET_FILE_MAX 65536 /* a connection string, not a document */

/* Key k (file_for) was set to path: sets the key it names to the file's
 * first line, from the same source (file: a higher-ranked source of that
 * key still wins, as for any value). */
static int set_from_file(pgo_conf_t *conf, const pgo_conf_key_t *k,
			 const char *path, pgo_conf_origin_t origin,
			 const char *path_where)
{
	char where[600];
	pgo_buf_t b;
	FILE *f;
	size_t n;
	int rc, e;

	f = fopen(path, "r");
	if (!f)
		return fail(conf, PGO_ERR_CONFIG, "%s: cannot open %s: %s",
			    k->key, path, strerror(errno));
	pgo_buf_init(&b);
	if (!pgo_buf_reserve(&b, SECRET_FILE_MAX + 1)) {
		fclose(f);
		return nomem(conf);
	}
	n = fread(b.data, 1, SECRET_FILE_MAX + 1, f);
	e = ferror(f) ? errno : 0;
	fclose(f);
	if (e) {
		pgo_buf_free(&b);
		return fail(conf, PGO_ERR_CONFIG, "%s: cannot read %s: %s",
			    k->key, path, strerror(e));
	}
	b.data[n < SECRET_FILE_MAX ? n : SECRET_FILE_MAX] = '\0';
	b.data[strcspn(b.data, "\r\n")] = '\0';
	if (n > SECRET_FILE_MAX || !b.data[0]) {
		pgo_buf_free(&b);
		return fail(conf, PGO_ERR_CONFIG, "%s: %s %s (it must hold %s)",
			    k->key, path,
			    n > SECRET_FILE_MAX ? "is longer than 64 KiB"
						: "has an empty first line",
			    k->file_for);
	}
	snprintf(where, sizeof(where), "%s %s",
		 path_where ? path_where : k->key, path);
	rc = set_key(conf, (size_t)find_key(k->file_for), b.data, origin,
		     where);
	/* The secret is wiped from our copy, not only freed. */
	memset(b.data, 0, b.cap);
	pgo_buf_free(&b);
	return rc;
}

/* Sets keys[i] from one source.  where (may be NULL) names the source in
 * messages and in `config show`. */
static int set_key(pgo_conf_t *conf, size_t i, const char *value,
		   pgo_conf_origin_t origin, const char *where)
{
	const pgo_conf_key_t *k = keys[i];
	struct key_state *st = &conf->state[i];
	char subject[80] = "";
	char *text, *str = NULL, *where_copy = NULL;
	int64_t num = 0;
	int rc;

	/* A flag or a variable names the key itself; a file line does not. */
	if (where && (origin == PGO_CONF_FILE || origin == PGO_CONF_DEFAULT))
		snprintf(subject, sizeof(subject), "%s = ", k->key);
	rc = parse_value(conf, k, value, where ? where : k->key, subject, &num,
			 &text);
	if (rc != PGO_OK)
		return rc;
	if (st->text && origin < st->origin) {
		/* Checked, but a higher-ranked source keeps the key. */
		free(text);
		return PGO_OK;
	}
	if (where && !(where_copy = strdup(where)))
		goto oom;
	if (k->in_values && holds_string(k) && !(str = strdup(text)))
		goto oom;
	if (k->in_values)
		store_value(conf, k, num, str);
	st->num = num;
	free(st->text);
	free(st->where);
	st->text = text;
	st->where = where_copy;
	st->origin = origin;
	if (k->file_for && *text)
		return set_from_file(conf, k, text, origin, where);
	return PGO_OK;
oom:
	free(text);
	free(where_copy);
	return nomem(conf);
}

/* The registry row whose pass-through INI section is name ([kafka]), or
 * NULL. */
static const pgo_sink_def_t *passthrough_def(const char *name, size_t len)
{
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
		if (d->ini_section && strlen(d->ini_section) == len &&
		    memcmp(d->ini_section, name, len) == 0)
			return d;
	return NULL;
}

/* "name = value" in a pass-through section: a "name=value" line appended
 * to the sink's key (d->ini_key) as this file has set it so far. */
static int set_passthrough(pgo_conf_t *conf, const pgo_sink_def_t *d,
			   const char *name, const char *value,
			   const char *where)
{
	int i = find_key(d->ini_key);
	pgo_buf_t b;
	int rc;

	if (i < 0)
		return fail(conf, PGO_ERR_CONFIG, "%s: [%s] has no key %s",
			    where, d->ini_section, d->ini_key);
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	if (conf->state[i].origin == PGO_CONF_FILE && *conf->state[i].text)
		pgo_buf_printf(&b, "%s\n", conf->state[i].text);
	pgo_buf_printf(&b, "%s=%s", name, value);
	rc = b.oom ? nomem(conf)
		   : set_key(conf, (size_t)i, b.data, PGO_CONF_FILE, where);
	pgo_buf_free(&b);
	return rc;
}

/* Sets a key given by name; an unknown one is an error with a guess. */
static int set_by_name(pgo_conf_t *conf, const char *key, const char *value,
		       pgo_conf_origin_t origin, const char *where)
{
	int i = find_key(key);
	const char *guess;

	if (i >= 0)
		return set_key(conf, (size_t)i, value, origin, where);
	guess = suggest_key(key);
	return fail(conf, PGO_ERR_CONFIG, "%s%sunknown key \"%s\"%s%s%s",
		    where ? where : "", where ? ": " : "", key,
		    guess ? " (did you mean \"" : "", guess ? guess : "",
		    guess ? "\"?)" : "");
}

/* --- life cycle --- */

pgo_conf_t *pgo_conf_new(void)
{
	pgo_conf_t *conf;

	if (!keys_ready())
		return NULL;
	conf = calloc(1, sizeof(*conf));
	if (!conf)
		return NULL;
	conf->state = calloc(nkeys, sizeof(*conf->state));
	if (!conf->state) {
		free(conf);
		return NULL;
	}
	for (size_t i = 0; i < nkeys; i++) {
		if (set_key(conf, i, keys[i]->def, PGO_CONF_DEFAULT, NULL)) {
			pgo_conf_destroy(conf);
			return NULL;
		}
	}
	conf->errmsg[0] = '\0';
	return conf;
}

void pgo_conf_destroy(pgo_conf_t *conf)
{
	if (!conf)
		return;
	for (size_t i = 0; i < nkeys; i++) {
		if (keys[i]->in_values && holds_string(keys[i]))
			free(*(char **)field_of(&conf->vals, keys[i]));
		free(conf->state[i].text);
		free(conf->state[i].where);
	}
	for (size_t i = 0; i < conf->nsettings; i++) {
		free(conf->settings[i].value);
		free(conf->settings[i].where);
	}
	free(conf->settings);
	free(conf->state);
	free(conf->path);
	free(conf);
}

const struct pgo_conf_values *pgo_conf_values(const pgo_conf_t *conf)
{
	return &conf->vals;
}

const char *pgo_conf_errmsg(const pgo_conf_t *conf)
{
	return conf ? conf->errmsg : "";
}

/* --- the INI file --- */

/* One pass of libinih over a file.  libinih calls the handler without a
 * line number (the distribution builds it without INI_HANDLER_LINENO), so
 * the pass hands it the lines itself and counts them.  Handing lines over
 * also lets the pass stop at the first error, check section names (an
 * empty unknown section never reaches the handler) and drop leading
 * blanks, which would otherwise make an indented "key = value" a
 * continuation of the line before. */
struct ini_pass {
	pgo_conf_t *conf;
	FILE *fp;
	const char *path; /* as the caller named it, for messages */
	int lineno;	  /* number of the line handed over last */
	int err;	  /* first error, PGO_OK while none: ends the pass */
	int err_line;	  /* line of that error */
	char *line;	  /* getline() buffer */
	size_t cap;	  /* its size */
	pgo_buf_t where;  /* "path:line" of the value being set */
};

static int pass_fail(struct ini_pass *p, int code)
{
	p->err = code;
	p->err_line = p->lineno;
	return code;
}

/* Checks what libinih would take for a section header or a value line. */
static int check_line(struct ini_pass *p, const char *s)
{
	const char *end, *guess;
	char name[64];

	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
						 "%s:%d: \"[\" without \"]\"",
						 p->path, p->lineno));
		if (section_known(s + 1, (size_t)(end - s - 1)) ||
		    passthrough_def(s + 1, (size_t)(end - s - 1)))
			return PGO_OK;
		snprintf(name, sizeof(name), "%.*s", (int)(end - s - 1), s + 1);
		guess = suggest_section(name);
		return pass_fail(p,
				 fail(p->conf, PGO_ERR_CONFIG,
				      "%s:%d: unknown section [%s]%s%s%s",
				      p->path, p->lineno, name,
				      guess ? " (did you mean [" : "",
				      guess ? guess : "", guess ? "]?)" : ""));
	}
	if (!*s || strchr(";#\r\n", *s) || strpbrk(s, "=:"))
		return PGO_OK;
	return pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				 "%s:%d: expected \"name = value\" or "
				 "\"[section]\"",
				 p->path, p->lineno));
}

/* libinih's fgets-like reader. */
static char *ini_read_line(char *str, int num, void *stream)
{
	struct ini_pass *p = stream;
	size_t len, content;
	ssize_t got;
	char *s;

	if (p->err != PGO_OK)
		return NULL; /* stop at the first error */
	if ((got = getline(&p->line, &p->cap, p->fp)) < 0)
		return NULL;
	p->lineno++;
	if (memchr(p->line, '\0', (size_t)got)) {
		/* Text after it would be dropped unseen ("5\0junk" read as
		 * 5). */
		pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				  "%s:%d: the line holds a NUL byte", p->path,
				  p->lineno));
		return NULL;
	}
	s = p->line;
	if (p->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3; /* UTF-8 byte order mark */
	while (*s != '\n' && isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	content = len;
	if (content && s[content - 1] == '\n')
		content--;
	if (content && s[content - 1] == '\r')
		content--;
	/* A CR before the end would hide the rest of the line from the length
	 * check below (and pass a CR into a value). */
	if (memchr(s, '\r', content)) {
		pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				  "%s:%d: carriage return inside the line "
				  "(lines end with \"\\n\" or \"\\r\\n\")",
				  p->path, p->lineno));
		return NULL;
	}
	/* libinih's line buffer must hold the line, "\r\n" and the NUL. */
	if (content + 3 > (size_t)num) {
		pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				  "%s:%d: line is longer than %d characters",
				  p->path, p->lineno, num - 3));
		return NULL;
	}
	if (check_line(p, s) != PGO_OK)
		return NULL;
	memcpy(str, s, len + 1);
	return str;
}

/* libinih's handler: one "name = value" of the line just read. */
static int ini_on_value(void *user, const char *section, const char *name,
			const char *value)
{
	struct ini_pass *p = user;
	const pgo_sink_def_t *d;
	char key[128];
	int rc;

	if (p->err != PGO_OK)
		return 1;
	pgo_buf_reset(&p->where);
	pgo_buf_printf(&p->where, "%s:%d", p->path, p->lineno);
	if (p->where.oom) {
		pass_fail(p, nomem(p->conf));
		return 0;
	}
	if (!*section) {
		pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				  "%s: \"%s\" comes before any [section]",
				  p->where.data, name));
		return 0;
	}
	if (!*name) {
		pass_fail(p, fail(p->conf, PGO_ERR_CONFIG,
				  "%s: no name before \"=\"", p->where.data));
		return 0;
	}
	if ((d = passthrough_def(section, strlen(section))))
		rc = set_passthrough(p->conf, d, name, value, p->where.data);
	else {
		snprintf(key, sizeof(key), "%s.%s", section, name);
		rc = set_by_name(p->conf, key, value, PGO_CONF_FILE,
				 p->where.data);
	}
	if (rc != PGO_OK) {
		pass_fail(p, rc);
		return 0;
	}
	return 1;
}

int pgo_conf_load_file(pgo_conf_t *conf, const char *path)
{
	struct ini_pass p = {.conf = conf, .path = path};
	char *copy;
	int rc;

	if (!path)
		return fail(conf, PGO_ERR_INVALID,
			    "no configuration file given");
	copy = strdup(path);
	if (!copy)
		return nomem(conf);
	p.fp = fopen(path, "r");
	if (!p.fp) {
		free(copy);
		return fail(conf, PGO_ERR_CONFIG, "%s: cannot open: %s", path,
			    strerror(errno));
	}
	free(conf->path);
	conf->path = copy;
	pgo_buf_init(&p.where);

	rc = ini_parse_stream(ini_read_line, &p, ini_on_value, &p);
	if (rc > 0 && (p.err == PGO_OK || rc < p.err_line)) {
		/* A line libinih refused that check_line() let through. */
		p.err = fail(conf, PGO_ERR_CONFIG, "%s:%d: syntax error", path,
			     rc);
	} else if (rc == -2 && p.err == PGO_OK) {
		p.err = nomem(conf);
	} else if (p.err == PGO_OK && ferror(p.fp)) {
		p.err = fail(conf, PGO_ERR_CONFIG, "%s: cannot read: %s", path,
			     strerror(errno));
	}
	fclose(p.fp);
	free(p.line);
	pgo_buf_free(&p.where);
	return p.err;
}

/* --- the environment --- */

/* The value of variable name in envp, or NULL. */
static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static int unknown_env(pgo_conf_t *conf, const char *name, size_t len)
{
	char names[KEYS_MAX][64], given[64];
	const char *all[KEYS_MAX], *guess = NULL;

	for (size_t i = 0; i < nkeys; i++) {
		env_name(keys[i], names[i], sizeof(names[i]));
		all[i] = names[i];
	}
	if (len < sizeof(given)) {
		snprintf(given, sizeof(given), "%.*s", (int)len, name);
		guess = closest(given, all, nkeys);
	}
	return fail(conf, PGO_ERR_CONFIG,
		    "unknown environment variable %.*s%s%s%s",
		    (int)(len < 100 ? len : 100), name,
		    guess ? " (did you mean " : "", guess ? guess : "",
		    guess ? "?)" : "");
}

/* Variables pgoutbox itself sets for the commands it runs (the exec sink),
 * so that such a command may run pgoutbox in turn. */
static bool env_exported(const char *name, size_t len)
{
	static const char *const exported[] = {"PGOUTBOX_BATCH_SIZE",
					       "PGOUTBOX_FIRST_ID",
					       "PGOUTBOX_LAST_ID", NULL};

	for (int i = 0; exported[i]; i++)
		if (strlen(exported[i]) == len &&
		    memcmp(exported[i], name, len) == 0)
			return true;
	return false;
}

int pgo_conf_load_env(pgo_conf_t *conf, char *const *envp)
{
	char name[64];
	int rc;

	if (!envp)
		return PGO_OK;
	/* Aliases first, so that PGOUTBOX_* set together with one wins. */
	for (size_t i = 0; i < nkeys; i++) {
		const char *v;

		if (!keys[i]->env_alias)
			continue;
		v = env_get(envp, keys[i]->env_alias);
		if (v && (rc = set_key(conf, i, v, PGO_CONF_ENV,
				       keys[i]->env_alias)))
			return rc;
	}
	for (char *const *e = envp; *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len, i;

		if (strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) != 0 || !eq)
			continue;
		len = (size_t)(eq - *e);
		if (env_exported(*e, len))
			continue;
		for (i = 0; i < nkeys; i++) {
			env_name(keys[i], name, sizeof(name));
			if (strlen(name) == len && memcmp(name, *e, len) == 0)
				break;
		}
		if (i == nkeys)
			return unknown_env(conf, *e, len);
		rc = set_key(conf, i, eq + 1, PGO_CONF_ENV, name);
		if (rc)
			return rc;
	}
	return PGO_OK;
}

/* --- setting and getting keys --- */

/* Sets keys[i] and remembers the setting so reload can replay it. */
static int set_remembered(pgo_conf_t *conf, size_t i, const char *value,
			  pgo_conf_origin_t origin, const char *where)
{
	struct setting *s = NULL;
	char *value_copy, *where_copy = NULL;
	int rc;

	/* Allocate first: once set, the key must not lose its record. */
	if (conf->nsettings == conf->settings_cap) {
		size_t cap = conf->settings_cap ? conf->settings_cap * 2 : 8;
		struct setting *grown =
			realloc(conf->settings, cap * sizeof(*grown));

		if (!grown)
			return nomem(conf);
		conf->settings = grown;
		conf->settings_cap = cap;
	}
	value_copy = strdup(value);
	if (!value_copy || (where && !(where_copy = strdup(where)))) {
		free(value_copy);
		return nomem(conf);
	}
	rc = set_key(conf, i, value, origin, where);
	if (rc != PGO_OK) {
		free(value_copy);
		free(where_copy);
		return rc;
	}
	for (size_t j = 0; j < conf->nsettings && !s; j++)
		if (conf->settings[j].key == i &&
		    conf->settings[j].origin == origin)
			s = &conf->settings[j];
	if (s) {
		free(s->value);
		free(s->where);
	} else {
		s = &conf->settings[conf->nsettings++];
		s->key = i;
		s->origin = origin;
	}
	s->value = value_copy;
	s->where = where_copy;
	return PGO_OK;
}

/*
 * Besides what the header says: a value from a lower-ranked origin than
 * the key's current one is checked but not applied.  Flags and defaults
 * set here (e.g. a relay.name computed at start-up) are remembered and
 * replayed by pgo_conf_reload(), since no file or variable holds them.
 */
int pgo_conf_set(pgo_conf_t *conf, const char *key, const char *value,
		 pgo_conf_origin_t origin, const char *where_)
{
	int i;

	if (!key || !value)
		return fail(conf, PGO_ERR_INVALID, "pgo_conf_set: no %s",
			    key ? "value" : "key");
	if (origin < PGO_CONF_DEFAULT || origin > PGO_CONF_FLAG)
		return fail(conf, PGO_ERR_INVALID,
			    "pgo_conf_set: bad origin %d", (int)origin);
	i = find_key(key);
	if (i < 0 || origin == PGO_CONF_FILE || origin == PGO_CONF_ENV)
		return set_by_name(conf, key, value, origin, where_);
	return set_remembered(conf, (size_t)i, value, origin, where_);
}

const char *pgo_conf_get(const pgo_conf_t *conf, const char *key)
{
	int i = key ? find_key(key) : -1;

	return i < 0 ? NULL : conf->state[i].text;
}

/* The state of key when it exists and has type a or b; else NULL, and the
 * caller's bug is logged. */
static const struct key_state *typed_state(const pgo_conf_t *conf,
					   const char *key, pgo_conf_type_t a,
					   pgo_conf_type_t b, const char *fn)
{
	int i = key ? find_key(key) : -1;

	if (i >= 0 && (keys[i]->type == a || keys[i]->type == b))
		return &conf->state[i];
	pgo_log(PGO_LOG_ERROR, "config", "pgo_conf_get_%s(\"%s\"): %s", fn,
		key ? key : "(null)",
		i < 0 ? "no such key" : "the key is of another type");
	return NULL;
}

int pgo_conf_get_int(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_INT, T_ENUM, "int");

	return st ? (int)st->num : 0;
}

int64_t pgo_conf_get_duration(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_DURATION, T_DURATION, "duration");

	return st ? st->num : 0;
}

bool pgo_conf_get_bool(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_BOOL, T_BOOL, "bool");

	return st ? st->num != 0 : false;
}

const char *pgo_conf_get_str(const pgo_conf_t *conf, const char *key)
{
	const struct key_state *st =
		typed_state(conf, key, T_STRING, T_IDENT, "str");

	return st ? st->text : "";
}

const char *pgo_conf_key_for_flag(const char *flag)
{
	if (!keys_ready())
		return NULL;
	for (size_t i = 0; flag && i < nkeys; i++)
		if (keys[i]->flag && strcmp(keys[i]->flag, flag) == 0)
			return keys[i]->key;
	return NULL;
}

const char *pgo_conf_suggest_flag(const char *flag, const char *const *extra)
{
	const char *all[KEYS_MAX + 64];
	size_t n = 0;

	if (!keys_ready() || !flag)
		return NULL;
	for (size_t i = 0; i < nkeys; i++)
		if (keys[i]->flag)
			all[n++] = keys[i]->flag;
	for (; extra && *extra && n < sizeof(all) / sizeof(all[0]); extra++)
		all[n++] = *extra;
	return closest(flag, all, n);
}

int pgo_conf_validate(pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = &conf->vals;
	const pgo_sink_def_t *sink = &pgo_sink_defs[v->sink];
	pgo_error_t err;
	char a[32], b[32];

	/* The chosen sink's own rules (the exec sink needs a command). */
	if (sink->validate && sink->validate(conf, &err) != PGO_OK)
		return fail(conf, PGO_ERR_CONFIG, "%s", err.msg);
	if (v->retry_base > v->retry_max) {
		pgo_format_duration(v->retry_base, a, sizeof(a));
		pgo_format_duration(v->retry_max, b, sizeof(b));
		return fail(conf, PGO_ERR_CONFIG,
			    "relay.retry_base (%s) must not exceed "
			    "relay.retry_max (%s)",
			    a, b);
	}
	if (v->lease_timeout < 2 * v->heartbeat) {
		pgo_format_duration(v->lease_timeout, a, sizeof(a));
		pgo_format_duration(v->heartbeat, b, sizeof(b));
		return fail(conf, PGO_ERR_CONFIG,
			    "relay.lease_timeout (%s) must be at least twice "
			    "relay.heartbeat (%s): a live relay would be "
			    "fenced between two heartbeats",
			    a, b);
	}
	return PGO_OK;
}

/* --- reload --- */

/* Where a value came from, as `config show` and the log say it. */
static void describe_origin(const struct key_state *st, char *buf, size_t size)
{
	static const char *const names[] = {"default", "file", "env", "flag"};

	if (st->where && st->origin != PGO_CONF_DEFAULT)
		snprintf(buf, size, "%s %s", names[st->origin], st->where);
	else
		snprintf(buf, size, "%s", names[st->origin]);
}

static void swap_ptr(char **a, char **b)
{
	char *t = *a;

	*a = *b;
	*b = t;
}

/* Exchanges keys[i]'s value, text and origin between two configurations;
 * nothing is allocated, so a reload cannot fail half-way. */
static void swap_key(pgo_conf_t *x, pgo_conf_t *y, size_t i)
{
	union {
		char *s;
		int64_t ms;
		int n;
		bool b;
	} tmp;
	pgo_conf_origin_t o = x->state[i].origin;
	int64_t num = x->state[i].num;

	if (keys[i]->in_values) {
		void *fx = field_of(&x->vals, keys[i]);
		void *fy = field_of(&y->vals, keys[i]);
		size_t n = field_size(keys[i]);

		memcpy(&tmp, fx, n);
		memcpy(fx, fy, n);
		memcpy(fy, &tmp, n);
	}
	x->state[i].num = y->state[i].num;
	y->state[i].num = num;
	swap_ptr(&x->state[i].text, &y->state[i].text);
	swap_ptr(&x->state[i].where, &y->state[i].where);
	x->state[i].origin = y->state[i].origin;
	y->state[i].origin = o;
}

/* Reads every source again into fresh, as conf was built. */
static int reread(const pgo_conf_t *conf, pgo_conf_t *fresh, char *const *envp)
{
	int rc;

	if (conf->path && (rc = pgo_conf_load_file(fresh, conf->path)))
		return rc;
	if ((rc = pgo_conf_load_env(fresh, envp)))
		return rc;
	for (size_t i = 0; i < conf->nsettings; i++) {
		const struct setting *s = &conf->settings[i];

		rc = set_key(fresh, s->key, s->value, s->origin, s->where);
		if (rc)
			return rc;
	}
	/* Checked as a whole, as the next start would check it.  Each rule
	 * ties keys that are all reloadable or all not, so what is applied
	 * below stays valid too. */
	return pgo_conf_validate(fresh);
}

/* Takes keys[i] from fresh when it differs and may change; returns 1 when
 * it did. */
static int take_key(pgo_conf_t *conf, pgo_conf_t *fresh, size_t i)
{
	const pgo_conf_key_t *k = keys[i];
	struct key_state *old = &conf->state[i], *new = &fresh->state[i];
	pgo_buf_t b1, b2;
	char from[600];

	if (strcmp(old->text, new->text) == 0) {
		/* Same value, perhaps from another line: keep show exact. */
		swap_ptr(&old->where, &new->where);
		old->origin = new->origin;
		return 0;
	}
	pgo_buf_init(&b1);
	pgo_buf_init(&b2);
	describe_origin(new, from, sizeof(from));
	if (k->reloadable) {
		pgo_log(PGO_LOG_INFO, "config", "%s changed from %s to %s (%s)",
			k->key, display(k, old->text, &b1),
			display(k, new->text, &b2), from);
		swap_key(conf, fresh, i);
	} else {
		pgo_log(PGO_LOG_WARN, "config",
			"%s changed to %s (%s) but needs a restart; "
			"keeping %s",
			k->key, display(k, new->text, &b2), from,
			display(k, old->text, &b1));
	}
	pgo_buf_free(&b1);
	pgo_buf_free(&b2);
	return k->reloadable;
}

int pgo_conf_reload(pgo_conf_t *conf, char *const *envp, int *changed)
{
	pgo_conf_t *fresh;
	int rc, n = 0;

	if (changed)
		*changed = 0;
	fresh = pgo_conf_new();
	if (!fresh)
		return nomem(conf);
	rc = reread(conf, fresh, envp);
	if (rc != PGO_OK) {
		memcpy(conf->errmsg, fresh->errmsg, sizeof(conf->errmsg));
		pgo_conf_destroy(fresh);
		return rc;
	}
	for (size_t i = 0; i < nkeys; i++)
		n += take_key(conf, fresh, i);
	pgo_conf_destroy(fresh);
	if (changed)
		*changed = n;
	return PGO_OK;
}

/* --- show and reference --- */

void pgo_conf_show(const pgo_conf_t *conf, FILE *out)
{
	enum { ORIGIN_COLUMN = 36 };
	const char *section = NULL;
	char origin[600];
	pgo_buf_t b;

	pgo_buf_init(&b);
	for (size_t i = 0; i < nkeys; i++) {
		const pgo_conf_key_t *k = keys[i];
		const struct key_state *st = &conf->state[i];
		int len;

		if (!section || strcmp(section, k->section) != 0) {
			fprintf(out, "%s[%s]\n", section ? "\n" : "",
				k->section);
			section = k->section;
		}
		describe_origin(st, origin, sizeof(origin));
		fprintf(out, "; %s\n", k->help);
		len = fprintf(out, "%s = %s", k->name,
			      display(k, st->text, &b));
		if (len < 0)
			len = 0;
		fprintf(out, "%*s; %s\n",
			len < ORIGIN_COLUMN - 3 ? ORIGIN_COLUMN - len : 3, "",
			origin);
	}
	pgo_buf_free(&b);
}

/* Writes s for a Markdown table cell: '|' would end the cell. */
static void md_cell(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', out);
		fputc(*s, out);
	}
}

void pgo_conf_reference(FILE *out)
{
	char env[64], range[128];

	keys_ready();
	fprintf(out, "| Key | Type | Default | Range | Reloadable | Flag | "
		     "Environment | Description |\n");
	fprintf(out, "|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < nkeys; i++) {
		const pgo_conf_key_t *k = keys[i];

		env_name(k, env, sizeof(env));
		format_range(k, range, sizeof(range));
		fprintf(out, "| `%s` | %s | %s%s%s | ", k->key,
			type_names[k->type], k->def[0] ? "`" : "",
			k->def[0] ? k->def : "(empty)", k->def[0] ? "`" : "");
		md_cell(out, range);
		fprintf(out, " | %s | %s%s%s | `%s`%s%s%s | ",
			k->reloadable ? "yes" : "no", k->flag ? "`" : "",
			k->flag ? k->flag : "", k->flag ? "`" : "", env,
			k->env_alias ? ", `" : "",
			k->env_alias ? k->env_alias : "",
			k->env_alias ? "`" : "");
		md_cell(out, k->help);
		fprintf(out, " |\n");
	}
}
