/*
 * conf/keys.c — the table of keys: every key is one row (pgo_conf_key_t):
 * section, name, type, default, bounds, whether a running relay may take a
 * new value on SIGHUP, the command-line flag and the help text.
 *
 * conf's own keys are in own_keys[] below, each also kept in a field of
 * struct pgo_conf_values; every sink declares its sink.<sink>_* keys in its
 * registry row (sinks/registry.c) and reads them with pgo_conf_get_*(), and
 * relay.sink takes its values and help from the same registry.  Those rows
 * read the INI file, the PGOUTBOX_* environment and the flags, print
 * `pgoutbox config show` and write the Markdown reference, so the five
 * cannot drift apart.  keys_init() puts them all in one list,
 * pgo_conf_keys[], by section.
 */
#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf_int.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

#define KEY PGO_CONF_KEY
#define FIELD(f)                                                               \
	.in_values = true, .offset = offsetof(struct pgo_conf_values, f)
#define SECONDS(n) PGO_SECONDS(n)
#define MINUTES(n) PGO_MINUTES(n)
#define HOURS(n)   PGO_HOURS(n)

/* Most sinks a build may have. */
#define SINKS_MAX 32

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

/* conf's own keys; keys_init() adds the sinks' keys, in [sink]. */
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

	/* [console] (docs/console.md) */
	{KEY("console", "enabled"), .type = T_BOOL, .def = "off",
	 .help = "Serve the web console on metrics.listen too (the pages of "
		 "`pgoutbox console`)"},
	{KEY("console", "listen"), .type = T_STRING, .def = "127.0.0.1:9188",
	 .help = "Where `pgoutbox console` listens (host:port; its --listen "
		 "overrides)"},
	{KEY("console", "token"), .type = T_STRING, .def = "", .secret = true,
	 .help = "Token that unlocks the console's actions (retry, discard, "
		 "pause); empty: read-only.  Set it through "
		 "PGOUTBOX_CONSOLE_TOKEN or console.token_file"},
	{KEY("console", "token_file"), .type = T_STRING, .def = "",
	 .file_for = "console.token",
	 .help = "File holding console.token (its first line)"},

	/* [log] */
	{KEY("log", "level"), FIELD(log_level), .type = T_ENUM, .def = "info",
	 .choices = level_choices, .reloadable = true, .flag = "--log-level",
	 .help = "Most verbose level logged"},
};

#define NOWN (sizeof(own_keys) / sizeof(own_keys[0]))

/* The order of the sections in `config show` and the reference. */
static const char *const section_order[] = {"database", "relay", "sink",
					    "worker",	"cron",	 "metrics",
					    "console",	"log"};

/* Every key, conf's and the sinks', by section in section_order: a
 * section's own keys first, then each sink's in registry order.  Built
 * once by keys_init(); an index into pgo_conf_keys[] names a key everywhere
 * else. */
const pgo_conf_key_t *pgo_conf_keys[KEYS_MAX];
size_t pgo_conf_nkeys;
static char keys_problem[160]; /* why the tables do not fit; "" = they do */
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static void keys_broken(const char *what, const char *name)
{
	if (!keys_problem[0])
		snprintf(keys_problem, sizeof(keys_problem), "%s: %s", what,
			 name);
}

static void add_key(const pgo_conf_key_t *k)
{
	for (size_t i = 0; i < pgo_conf_nkeys; i++) {
		if (strcmp(pgo_conf_keys[i]->key, k->key) == 0) {
			keys_broken("key declared twice", k->key);
			return;
		}
	}
	if (pgo_conf_nkeys == KEYS_MAX)
		keys_broken("more keys than KEYS_MAX", k->key);
	else
		pgo_conf_keys[pgo_conf_nkeys++] = k;
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
	if (pgo_conf_nkeys != declared)
		keys_broken("a key outside the sections of section_order",
			    "conf/keys.c");
	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		if (pgo_conf_keys[i]->file_for &&
		    (pgo_conf_find_key(pgo_conf_keys[i]->file_for) < 0 ||
		     pgo_conf_keys[i]->type != T_STRING))
			keys_broken("file_for names no key",
				    pgo_conf_keys[i]->key);
}

bool pgo_conf_keys_ready(void)
{
	pthread_once(&keys_once, keys_init);
	if (keys_problem[0])
		pgo_log(PGO_LOG_ERROR, "config", "key tables: %s",
			keys_problem);
	return !keys_problem[0];
}

int pgo_conf_find_key(const char *key)
{
	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		if (strcmp(pgo_conf_keys[i]->key, key) == 0)
			return (int)i;
	return -1;
}

bool pgo_conf_section_known(const char *name, size_t len)
{
	for (size_t i = 0; i < pgo_conf_nkeys; i++)
		if (strlen(pgo_conf_keys[i]->section) == len &&
		    memcmp(pgo_conf_keys[i]->section, name, len) == 0)
			return true;
	return false;
}

void pgo_conf_env_name(const pgo_conf_key_t *k, char *buf, size_t size)
{
	snprintf(buf, size, ENV_PREFIX "%s_%s", k->section, k->name);
	for (char *p = buf; *p; p++)
		*p = (char)toupper((unsigned char)*p);
}

const char *pgo_conf_key_for_flag(const char *flag)
{
	if (!pgo_conf_keys_ready())
		return NULL;
	for (size_t i = 0; flag && i < pgo_conf_nkeys; i++)
		if (pgo_conf_keys[i]->flag &&
		    strcmp(pgo_conf_keys[i]->flag, flag) == 0)
			return pgo_conf_keys[i]->key;
	return NULL;
}
