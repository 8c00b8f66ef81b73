/*
 * test_conf.c — unit tests of the configuration (src/lib/conf/): value
 * parsing per type, the INI file with its line numbers, the environment,
 * the ranking of sources, cross-key rules, reload, `config show` (never a
 * password) and the reference.  Table-driven where the cases are data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/mask.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The sinks of the registry, as relay.sink's messages list them. */
#ifdef PGO_HAVE_REDIS
#define KNOWN_REDIS ", redis, bullmq"
#else
#define KNOWN_REDIS ""
#endif
#ifdef PGO_HAVE_NATS
#define KNOWN_NATS ", nats"
#else
#define KNOWN_NATS ""
#endif
#ifdef PGO_HAVE_RABBITMQ
#define KNOWN_RABBITMQ ", rabbitmq"
#else
#define KNOWN_RABBITMQ ""
#endif
#ifdef PGO_HAVE_KAFKA
#define KNOWN_KAFKA ", kafka"
#else
#define KNOWN_KAFKA ""
#endif
#ifdef PGO_HAVE_CURL
#define KNOWN_CURL ", http"
#else
#define KNOWN_CURL ""
#endif
#define KNOWN_SINKS                                                            \
	"stdout, exec" KNOWN_REDIS KNOWN_NATS KNOWN_RABBITMQ KNOWN_KAFKA       \
		KNOWN_CURL

/* Every key, in the order `config show` lists them, with its default: the
 * [sink] keys are those the sinks declare in their registry rows. */
static const struct {
	const char *key;
	const char *def;
} all_keys[] = {
	{"database.url", ""},
	{"database.url_file", ""},
	{"database.connect_timeout", "10s"},
	{"database.statement_timeout", "30s"},
	{"database.lock_timeout", "5s"},
	{"database.idle_tx_timeout", "1m"},
	{"relay.queue", "outbox"},
	{"relay.name", ""},
	{"relay.sink", "stdout"},
	{"relay.mode", "ordered"},
	{"relay.poison", "dead_letter"},
	{"relay.heartbeat", "500ms"},
	{"relay.lease_timeout", "10s"},
	{"relay.maintain_interval", "1h"},
	{"relay.batch", "500"},
	{"relay.batch_bytes", "16777216"},
	{"relay.in_flight", "2"},
	{"relay.listen", "on"},
	{"relay.wake_linger", "1ms"},
	{"relay.claim_floor", "on"},
	{"relay.synchronous_commit", "off"},
	{"relay.poll_interval", "30s"},
	{"relay.max_attempts", "10"},
	{"relay.retry_base", "1s"},
	{"relay.retry_max", "5m"},
	{"relay.reconnect_max", "10s"},
	{"relay.drain_timeout", "1m"},
	{"relay.stats_interval", "1m"},
	{"sink.exec_command", ""},
	{"sink.exec_timeout", "30s"},
#ifdef PGO_HAVE_REDIS
	{"sink.redis_url", "redis://localhost:6379/0"},
	{"sink.redis_url_file", ""},
	{"sink.redis_stream", "pgoutbox:{topic}"},
	{"sink.redis_maxlen", "0"},
	{"sink.redis_timeout", "5s"},
	{"sink.redis_connect_timeout", "2s"},
	{"sink.redis_wait", "0"},
	{"sink.bullmq_queue", "{topic}"},
	{"sink.bullmq_prefix", "bull"},
	{"sink.bullmq_script", ""},
	{"sink.bullmq_attempts", "1"},
	{"sink.bullmq_remove_on_complete", ""},
#endif
#ifdef PGO_HAVE_NATS
	{"sink.nats_url", "nats://127.0.0.1:4222"},
	{"sink.nats_subject", "{topic}"},
	{"sink.nats_format", "plain"},
	{"sink.nats_creds", ""},
	{"sink.nats_nkey", ""},
	{"sink.nats_tls_ca", ""},
	{"sink.nats_tls_cert", ""},
	{"sink.nats_tls_key", ""},
	{"sink.nats_timeout", "5s"},
	{"sink.nats_connect_timeout", "2s"},
#endif
#ifdef PGO_HAVE_RABBITMQ
	{"sink.amqp_url", "amqp://guest:guest@localhost:5672/%2f"},
	{"sink.amqp_exchange", ""},
	{"sink.amqp_routing_key", "{topic}"},
	{"sink.amqp_format", "plain"},
	{"sink.amqp_timeout", "5s"},
	{"sink.amqp_connect_timeout", "5s"},
	{"sink.amqp_heartbeat", "30s"},
	{"sink.amqp_frame_max", "131072"},
	{"sink.amqp_ca", ""},
	{"sink.amqp_cert", ""},
	{"sink.amqp_key", ""},
	{"sink.amqp_verify", "on"},
#endif
#ifdef PGO_HAVE_KAFKA
	{"sink.kafka_brokers", "localhost:9092"},
	{"sink.kafka_topic", "{topic}"},
	{"sink.kafka_conf", ""},
	{"sink.kafka_format", "plain"},
	{"sink.kafka_ce_source", "/{topic}"},
	{"sink.kafka_timeout", "10s"},
#endif
#ifdef PGO_HAVE_CURL
	{"sink.http_url", ""},
	{"sink.http_body", "event"},
	{"sink.http_batch", "1"},
	{"sink.http_concurrency", "16"},
	{"sink.http_timeout", "10s"},
	{"sink.http_headers", ""},
	{"sink.http_secret", ""},
	{"sink.http_ca_file", ""},
	{"sink.http_cert", ""},
	{"sink.http_key", ""},
#endif
	{"worker.queue", ""},
	{"worker.exec_command", ""},
	{"worker.sql_function", ""},
	{"worker.concurrency", "1"},
	{"worker.batch", "100"},
	{"worker.lease", "30s"},
	{"worker.timeout", "25s"},
	{"worker.max_attempts", "10"},
	{"worker.retry_base", "1s"},
	{"worker.retry_max", "5m"},
	{"worker.poll_interval", "5s"},
	{"cron.enabled", "off"},
	{"cron.grace", "10s"},
	{"cron.history_keep", "168h"},
	{"metrics.listen", ""},
	{"metrics.interval", "5s"},
	{"console.enabled", "off"},
	{"console.listen", "127.0.0.1:9188"},
	{"console.token", ""},
	{"console.token_file", ""},
	{"log.level", "info"},
};

/* --- helpers --- */

/* A scratch directory for INI files, made once for the whole run. */
static char tmpdir[64];

/* Writes text to tmpdir/name; returns the path (static storage). */
static const char *write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* The typed value of a key, read from struct pgo_conf_values. */
static int64_t typed(const pgo_conf_t *conf, const char *key)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);

	if (!strcmp(key, "relay.batch"))
		return v->batch;
	if (!strcmp(key, "relay.in_flight"))
		return v->in_flight;
	if (!strcmp(key, "relay.max_attempts"))
		return v->max_attempts;
	if (!strcmp(key, "relay.poll_interval"))
		return v->poll_interval;
	if (!strcmp(key, "relay.stats_interval"))
		return v->stats_interval;
	if (!strcmp(key, "relay.listen"))
		return v->listen;
	if (!strcmp(key, "relay.wake_linger"))
		return v->wake_linger;
	if (!strcmp(key, "relay.claim_floor"))
		return v->claim_floor;
	if (!strcmp(key, "log.level"))
		return v->log_level;
	if (!strcmp(key, "database.idle_tx_timeout"))
		return v->idle_tx_timeout;
	fail_msg("typed(): no accessor for %s", key);
	return 0;
}

/* Log lines captured from the library, one per line. */
static char logged[4096];

static void capture_log(void *ctx, pgo_log_level_t level, const char *subject,
			const char *msg)
{
	static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
	size_t used = strlen(logged);

	(void)ctx;
	snprintf(logged + used, sizeof(logged) - used, "%s %s: %s\n",
		 names[level], subject, msg);
}

/* `config show` of conf as a string (free it). */
static char *show(const pgo_conf_t *conf)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	pgo_conf_show(conf, f);
	fclose(f);
	return text;
}

/* Asserts that show() has the line "name = value", padded, "; origin". */
static void assert_show_line(const char *text, const char *name_value,
			     const char *origin)
{
	const char *p = text;

	while ((p = strstr(p, name_value))) {
		const char *eol = strchr(p, '\n');
		const char *semi = strstr(p, "; ");

		if ((p == text || p[-1] == '\n') && eol && semi && semi < eol) {
			size_t n = strlen(origin);

			/* Only blanks between the value and the comment. */
			for (const char *q = p + strlen(name_value); q < semi;
			     q++)
				assert_int_equal(*q, ' ');
			assert_int_equal((size_t)(eol - semi - 2), n);
			assert_memory_equal(semi + 2, origin, n);
			return;
		}
		p++;
	}
	fail_msg("no line \"%s ... ; %s\" in:\n%s", name_value, origin, text);
}

/* --- durations --- */

static void test_parse_duration(void **state)
{
	static const struct {
		const char *in;
		int64_t ms;	 /* when why is NULL */
		const char *why; /* expected reason, or NULL for success */
	} cases[] = {
		{"0", 0, NULL},
		{"0ms", 0, NULL},
		{"0s", 0, NULL},
		{"250ms", 250, NULL},
		{"30s", 30000, NULL},
		{"5m", 300000, NULL},
		{"1h", 3600000, NULL},
		{"24h", 86400000, NULL},
		{"  30s\t", 30000, NULL},
		{"30 s", 30000, NULL},
		{"007s", 7000, NULL},
		{"30", 0, "needs a unit (ms, s, m, h)"},
		{" 1 ", 0, "needs a unit (ms, s, m, h)"},
		{"30x", 0, "has an unknown unit (use ms, s, m, h)"},
		{"30S", 0, "has an unknown unit (use ms, s, m, h)"},
		{"30sec", 0, "has an unknown unit (use ms, s, m, h)"},
		{"1.5s", 0, "is not a whole number (write 1500ms, not 1.5s)"},
		{"-5s", 0, "must not be negative"},
		{"", 0, "is not a duration (like 250ms, 30s, 5m, 1h)"},
		{"s", 0, "is not a duration (like 250ms, 30s, 5m, 1h)"},
		{"abc", 0, "is not a duration (like 250ms, 30s, 5m, 1h)"},
		{"1m30s", 0, "has an unknown unit (use ms, s, m, h)"},
		{"5s x", 0, "is not a duration (like 250ms, 30s, 5m, 1h)"},
		{"99999999999999999999s", 0, "is too large"},
		{"9223372036854775s", 9223372036854775000, NULL},
		{"9223372036854776s", 0, "is too large"},
		{"2562047788015216h", 0, "is too large"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		int64_t ms = -1;
		const char *why = NULL;
		int rc = pgo_parse_duration(cases[i].in, &ms, &why);

		if (!cases[i].why) {
			if (rc != PGO_OK || ms != cases[i].ms)
				fail_msg("\"%s\": rc %d ms %lld, want %lld",
					 cases[i].in, rc, (long long)ms,
					 (long long)cases[i].ms);
			continue;
		}
		if (rc != PGO_ERR_INVALID || !why ||
		    strcmp(why, cases[i].why) != 0)
			fail_msg("\"%s\": rc %d why \"%s\", want \"%s\"",
				 cases[i].in, rc, why ? why : "(null)",
				 cases[i].why);
	}
	/* why may be NULL. */
	assert_int_equal(pgo_parse_duration("x", &(int64_t){0}, NULL),
			 PGO_ERR_INVALID);
}

/* --- one value of each type --- */

static void test_values(void **state)
{
	static const struct {
		const char *key;
		pgo_conf_origin_t origin;
		const char *where;
		const char *value;
		const char *text; /* get() after success, or NULL */
		const char *err;  /* exact message, or NULL for success */
	} cases[] = {
		/* int */
		{"relay.batch", PGO_CONF_FLAG, "--batch", "7", "7", NULL},
		{"relay.batch", PGO_CONF_FLAG, "--batch", " 42\t", "42", NULL},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "+9", "9", NULL},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "1", "1", NULL},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "10000", "10000",
		 NULL},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "abc", NULL,
		 "--batch: \"abc\" is not a whole number"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "", NULL,
		 "--batch: \"\" is not a whole number"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "1e3", NULL,
		 "--batch: \"1e3\" is not a whole number"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "12abc", NULL,
		 "--batch: \"12abc\" is not a whole number"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "0", NULL,
		 "--batch: 0 is out of range (1..10000)"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "10001", NULL,
		 "--batch: 10001 is out of range (1..10000)"},
		{"relay.batch", PGO_CONF_FLAG, "--batch", "-3", NULL,
		 "--batch: -3 is out of range (1..10000)"},
		{"relay.batch", PGO_CONF_FLAG, "--batch",
		 "99999999999999999999", NULL,
		 "--batch: 99999999999999999999 is out of range (1..10000)"},
		{"relay.batch", PGO_CONF_FILE, "relay.ini:3", "0", NULL,
		 "relay.ini:3: relay.batch = 0 is out of range (1..10000)"},
		{"relay.batch", PGO_CONF_FILE, "relay.ini:4", "x", NULL,
		 "relay.ini:4: relay.batch = \"x\" is not a whole number"},
		{"relay.batch", PGO_CONF_ENV, "PGOUTBOX_RELAY_BATCH", "x", NULL,
		 "PGOUTBOX_RELAY_BATCH: \"x\" is not a whole number"},
		{"relay.batch", PGO_CONF_FLAG, NULL, "x", NULL,
		 "relay.batch: \"x\" is not a whole number"},
		{"relay.in_flight", PGO_CONF_FLAG, "--in-flight", "17", NULL,
		 "--in-flight: 17 is out of range (1..16)"},
		/* duration */
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval",
		 "250ms", "250ms", NULL},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval", "60m",
		 "1h", NULL},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval",
		 "1000ms", "1s", NULL},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval",
		 " 90s ", "90s", NULL},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval",
		 "10ms", "10ms", NULL},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval", "30",
		 NULL, "--poll-interval: \"30\" needs a unit (ms, s, m, h)"},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval", "5ms",
		 NULL, "--poll-interval: 5ms is out of range (10ms..1h)"},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval", "0",
		 NULL, "--poll-interval: 0 is out of range (10ms..1h)"},
		{"relay.poll_interval", PGO_CONF_FLAG, "--poll-interval", "2h",
		 NULL, "--poll-interval: 2h is out of range (10ms..1h)"},
		{"relay.poll_interval", PGO_CONF_FILE, "r.ini:9", "3x", NULL,
		 "r.ini:9: relay.poll_interval = \"3x\" has an unknown unit "
		 "(use ms, s, m, h)"},
		{"relay.stats_interval", PGO_CONF_ENV,
		 "PGOUTBOX_RELAY_STATS_INTERVAL", "0", "0", NULL},
		{"relay.wake_linger", PGO_CONF_FLAG, "--wake-linger", "0", "0",
		 NULL},
		{"relay.wake_linger", PGO_CONF_ENV,
		 "PGOUTBOX_RELAY_WAKE_LINGER", "5ms", "5ms", NULL},
		{"relay.wake_linger", PGO_CONF_FLAG, "--wake-linger", "1s",
		 NULL, "--wake-linger: 1s is out of range (0..100ms)"},
		{"database.idle_tx_timeout", PGO_CONF_FLAG, "x", "0", "0",
		 NULL},
		/* bool */
		{"relay.listen", PGO_CONF_FLAG, "--listen", "off", "off", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "on", "on", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "FALSE", "off",
		 NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "true", "on", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "no", "off", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "Yes", "on", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "0", "off", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "1", "on", NULL},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "maybe", NULL,
		 "--listen: \"maybe\" is not a boolean (use on/off, "
		 "true/false, yes/no, 1/0)"},
		{"relay.listen", PGO_CONF_FLAG, "--listen", "2", NULL,
		 "--listen: \"2\" is not a boolean (use on/off, true/false, "
		 "yes/no, 1/0)"},
		/* enum */
		{"relay.sink", PGO_CONF_FLAG, "--sink", "exec", "exec", NULL},
		{"relay.sink", PGO_CONF_FLAG, "--sink", "STDOUT", "stdout",
		 NULL},
		{"relay.sink", PGO_CONF_FLAG, "--sink", "pulsar", NULL,
		 "--sink: \"pulsar\" is not one of " KNOWN_SINKS},
		{"relay.sink", PGO_CONF_FLAG, "--sink", "stdot", NULL,
		 "--sink: \"stdot\" is not one of " KNOWN_SINKS
		 " (did you mean \"stdout\"?)"},
		{"relay.sink", PGO_CONF_ENV, "PGOUTBOX_RELAY_SINK", "exek",
		 NULL,
		 "PGOUTBOX_RELAY_SINK: \"exek\" is not one of " KNOWN_SINKS
		 " (did you mean \"exec\"?)"},
		{"log.level", PGO_CONF_FLAG, "--log-level", "debug", "debug",
		 NULL},
		{"log.level", PGO_CONF_FLAG, "--log-level", "error", "error",
		 NULL},
		{"log.level", PGO_CONF_FLAG, "--log-level", "verbose", NULL,
		 "--log-level: \"verbose\" is not one of error, warn, info, "
		 "debug"},
		/* ident */
		{"relay.queue", PGO_CONF_FLAG, "--queue", "emails", "emails",
		 NULL},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "_q1", "_q1", NULL},
		{"relay.queue", PGO_CONF_FLAG, "--queue", " jobs ", "jobs",
		 NULL},
		{"relay.queue", PGO_CONF_FLAG, "--queue",
		 "abcdefghijklmnopqrstuvwxyz_0123456789_abcdefghijk", NULL,
		 "--queue: \"abcdefghijklmnopqrstuvwxyz_0123456789_"
		 "abcdefghijk\" is not a valid name: it is longer than "
		 "48 characters"},
		{"relay.queue", PGO_CONF_FLAG, "--queue",
		 "abcdefghijklmnopqrstuvwxyz_0123456789_abcdefghij",
		 "abcdefghijklmnopqrstuvwxyz_0123456789_abcdefghij", NULL},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "Outbox", NULL,
		 "--queue: \"Outbox\" is not a valid name: it must start with "
		 "a lower-case letter or _"},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "9q", NULL,
		 "--queue: \"9q\" is not a valid name: it must start with a "
		 "lower-case letter or _"},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "a-b", NULL,
		 "--queue: \"a-b\" is not a valid name: it may contain only "
		 "a-z, 0-9 and _"},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "q\xc3\xa9", NULL,
		 "--queue: \"q\xc3\xa9\" is not a valid name: it may contain "
		 "only a-z, 0-9 and _"},
		{"relay.queue", PGO_CONF_FLAG, "--queue", "", NULL,
		 "--queue: \"\" is not a valid name: it is empty"},
		/* string: untouched, blanks included */
		{"database.url", PGO_CONF_FLAG, "--db", " host=x ", " host=x ",
		 NULL},
		{"sink.exec_command", PGO_CONF_FLAG, "--exec", "cat >/dev/null",
		 "cat >/dev/null", NULL},
		/* unknown key */
		{"relay.bach", PGO_CONF_FLAG, "--x", "1", NULL,
		 "--x: unknown key \"relay.bach\" (did you mean "
		 "\"relay.batch\"?)"},
		{"relay.exec_command", PGO_CONF_FILE, "a.ini:2", "1", NULL,
		 "a.ini:2: unknown key \"relay.exec_command\" (did you mean "
		 "\"sink.exec_command\"?)"},
		{"nothing.like.it", PGO_CONF_FLAG, NULL, "1", NULL,
		 "unknown key \"nothing.like.it\""},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		int rc;

		assert_non_null(conf);
		rc = pgo_conf_set(conf, cases[i].key, cases[i].value,
				  cases[i].origin, cases[i].where);
		if (!cases[i].err) {
			const char *got = pgo_conf_get(conf, cases[i].key);

			if (rc != PGO_OK || !got || strcmp(got, cases[i].text))
				fail_msg("%s \"%s\": rc %d (%s) text \"%s\"",
					 cases[i].key, cases[i].value, rc,
					 pgo_conf_errmsg(conf),
					 got ? got : "(null)");
			assert_string_equal(pgo_conf_errmsg(conf), "");
		} else {
			if (rc != PGO_ERR_CONFIG ||
			    strcmp(pgo_conf_errmsg(conf), cases[i].err))
				fail_msg("%s \"%s\": rc %d\n  got  %s\n"
					 "  want %s",
					 cases[i].key, cases[i].value, rc,
					 pgo_conf_errmsg(conf), cases[i].err);
			/* A refused value changes nothing. */
			for (size_t j = 0; j < N(all_keys); j++)
				assert_string_equal(
					pgo_conf_get(conf, all_keys[j].key),
					all_keys[j].def);
		}
		pgo_conf_destroy(conf);
	}
}

/* The typed side of a few values. */
static void test_typed_values(void **state)
{
	static const struct {
		const char *key;
		const char *value;
		int64_t want;
	} cases[] = {
		{"relay.batch", "7", 7},
		{"relay.in_flight", "16", 16},
		{"relay.poll_interval", "250ms", 250},
		{"relay.poll_interval", "5m", 300000},
		{"relay.stats_interval", "0", 0},
		{"relay.listen", "off", 0},
		{"relay.listen", "yes", 1},
		{"log.level", "debug", PGO_LOG_DEBUG},
		{"log.level", "warn", PGO_LOG_WARN},
	};
	pgo_conf_t *conf = pgo_conf_new();

	(void)state;
	assert_non_null(conf);
	for (size_t i = 0; i < N(cases); i++) {
		assert_int_equal(pgo_conf_set(conf, cases[i].key,
					      cases[i].value, PGO_CONF_FLAG,
					      "--t"),
				 PGO_OK);
		assert_int_equal(typed(conf, cases[i].key), cases[i].want);
	}
	assert_int_equal(pgo_conf_set(conf, "relay.queue", "emails",
				      PGO_CONF_FLAG, "--queue"),
			 PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->queue, "emails");
	/* relay.sink: the row of the sink registry. */
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++) {
		assert_int_equal(pgo_conf_set(conf, "relay.sink", d->name,
					      PGO_CONF_FLAG, "--sink"),
				 PGO_OK);
		assert_string_equal(
			pgo_sink_defs[pgo_conf_values(conf)->sink].name,
			d->name);
		assert_int_equal(pgo_conf_get_int(conf, "relay.sink"),
				 pgo_conf_values(conf)->sink);
	}
	pgo_conf_destroy(conf);
}

static void test_defaults(void **state)
{
	pgo_conf_t *conf = pgo_conf_new();
	const struct pgo_conf_values *v;

	(void)state;
	assert_non_null(conf);
	assert_string_equal(pgo_conf_errmsg(conf), "");
	for (size_t i = 0; i < N(all_keys); i++)
		assert_string_equal(pgo_conf_get(conf, all_keys[i].key),
				    all_keys[i].def);
	assert_null(pgo_conf_get(conf, "relay.bach"));
	assert_null(pgo_conf_get(conf, NULL));

	v = pgo_conf_values(conf);
	assert_string_equal(v->db_url, "");
	assert_int_equal(v->connect_timeout, 10000);
	assert_int_equal(v->statement_timeout, 30000);
	assert_int_equal(v->lock_timeout, 5000);
	assert_int_equal(v->idle_tx_timeout, 60000);
	assert_string_equal(v->queue, "outbox");
	assert_string_equal(v->name, "");
	assert_string_equal(pgo_sink_defs[v->sink].name, "stdout");
	assert_int_equal(v->batch, 500);
	assert_int_equal(v->in_flight, 2);
	assert_true(v->listen);
	assert_int_equal(v->poll_interval, 30000);
	assert_int_equal(v->max_attempts, 10);
	assert_int_equal(v->retry_base, 1000);
	assert_int_equal(v->retry_max, 300000);
	assert_int_equal(v->reconnect_max, 10000);
	assert_int_equal(v->stats_interval, 60000);
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"), "");
	assert_int_equal(pgo_conf_get_duration(conf, "sink.exec_timeout"),
			 30000);
	assert_int_equal(v->log_level, PGO_LOG_INFO);
	assert_int_equal(pgo_conf_validate(conf), PGO_OK);
	pgo_conf_destroy(conf);
	pgo_conf_destroy(NULL);
}

static void test_key_for_flag(void **state)
{
	static const struct {
		const char *flag;
		const char *key; /* NULL: no such flag */
	} cases[] = {
		{"--db", "database.url"},
		{"--queue", "relay.queue"},
		{"--name", "relay.name"},
		{"--sink", "relay.sink"},
		{"--batch", "relay.batch"},
		{"--in-flight", "relay.in_flight"},
		{"--listen", "relay.listen"},
		{"--poll-interval", "relay.poll_interval"},
		{"--max-attempts", "relay.max_attempts"},
		{"--exec", "sink.exec_command"},
		{"--exec-timeout", "sink.exec_timeout"},
		{"--log-level", "log.level"},
		{"--metrics-listen", "metrics.listen"},
		{"--retry-base", NULL},
		{"batch", NULL},
		{"--batch=5", NULL},
		{"", NULL},
		{NULL, NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		const char *got = pgo_conf_key_for_flag(cases[i].flag);

		if (cases[i].key)
			assert_string_equal(got, cases[i].key);
		else
			assert_null(got);
	}
}

/* --- the INI file --- */

static void test_file_good(void **state)
{
	static const char ini[] =
		"\xEF\xBB\xBF; pgoutbox relay\n"       /* 1 */
		"[database]\n"			       /* 2 */
		"url = host=db password=a;b\n"	       /* 3 */
		"\n"				       /* 4 */
		"[relay]\n"			       /* 5 */
		"# a comment\n"			       /* 6 */
		"batch = 100   ; inline comment\n"     /* 7 */
		"  in_flight = 4\n"		       /* 8 */
		"\tpoll_interval=250ms\n"	       /* 9 */
		"listen: off\n"			       /* 10 */
		"sink = exec\r\n"		       /* 11 */
		"[sink]\n"			       /* 12 */
		"exec_command = ./publish.sh --fast\n" /* 13 */
		"[log]\n"			       /* 14 */
		"level = debug\n"		       /* 15 */
		"[relay]\n"			       /* 16 */
		"batch = 200\n";		       /* 17 */
	const char *path = write_file("good.ini", ini);
	pgo_conf_t *conf = pgo_conf_new();
	const struct pgo_conf_values *v;
	char origin[300];
	char *text;

	(void)state;
	assert_non_null(conf);
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_string_equal(pgo_conf_errmsg(conf), "");
	v = pgo_conf_values(conf);
	assert_string_equal(v->db_url, "host=db password=a;b");
	assert_int_equal(v->batch, 200); /* the later line wins */
	assert_int_equal(v->in_flight, 4);
	assert_int_equal(v->poll_interval, 250);
	assert_false(v->listen);
	assert_string_equal(pgo_sink_defs[v->sink].name, "exec");
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"),
			    "./publish.sh --fast");
	assert_int_equal(v->log_level, PGO_LOG_DEBUG);
	assert_string_equal(v->queue, "outbox");
	assert_int_equal(pgo_conf_validate(conf), PGO_OK);

	text = show(conf);
	snprintf(origin, sizeof(origin), "file %s:17", path);
	assert_show_line(text, "batch = 200", origin);
	snprintf(origin, sizeof(origin), "file %s:8", path);
	assert_show_line(text, "in_flight = 4", origin);
	snprintf(origin, sizeof(origin), "file %s:11", path);
	assert_show_line(text, "sink = exec", origin);
	assert_show_line(text, "queue = outbox", "default");
	free(text);
	pgo_conf_destroy(conf);
}

static void test_file_errors(void **state)
{
	static const struct {
		const char *text;
		int line;	  /* expected line in the message */
		const char *what; /* message after "path:line: " */
	} cases[] = {
		{"[relay]\nbatch = 5\n\n; c\n\n\n\n\n\n\n\n"
		 "bach = 7\nin_flight = 3\n",
		 12,
		 "unknown key \"relay.bach\" (did you mean "
		 "\"relay.batch\"?)"},
		{"[relay]\nqueue = q\nbatch = 0\n", 3,
		 "relay.batch = 0 is out of range (1..10000)"},
		{"[relay]\n\npoll_interval = 30\n", 3,
		 "relay.poll_interval = \"30\" needs a unit (ms, s, m, h)"},
		{"[relay]\nbatch = 5\n[relya]\nbatch = 6\n", 3,
		 "unknown section [relya] (did you mean [relay]?)"},
		{"[pulsar]\n", 1, "unknown section [pulsar]"},
		{"[relay]\nexec_command = x\n", 2,
		 "unknown key \"relay.exec_command\" (did you mean "
		 "\"sink.exec_command\"?)"},
		{"[relay]\nsink = pulsar\n", 2,
		 "relay.sink = \"pulsar\" is not one of " KNOWN_SINKS},
		{"batch = 5\n[relay]\n", 1,
		 "\"batch\" comes before any [section]"},
		{"[relay]\nbatch = 5\njust words\nbatch = 6\n", 3,
		 "expected \"name = value\" or \"[section]\""},
		{"[relay\nbatch = 5\n", 1, "\"[\" without \"]\""},
		{"[relay]\n= 5\n", 2, "no name before \"=\""},
		/* The ';' after a blank starts a comment: no '=' is left. */
		{"[relay]\nbatch ;= 5\n", 2, "syntax error"},
		{"[database s1]\nurl = x\nbatch = 5\n", 3,
		 "[database s1] has no key \"batch\" (a database of a fleet "
		 "takes only url; the other keys are the whole fleet's, in "
		 "[database] and [relay])"},
		{"[database b@d]\nurl = x\n", 1,
		 "database name \"b@d\": use 1 to 48 letters, digits, '_' or "
		 "'-'"},
		{"[relay]\nqueue = Bad\n", 2,
		 "relay.queue = \"Bad\" is not a valid name: it must start "
		 "with a lower-case letter or _"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		const char *path = write_file("bad.ini", cases[i].text);
		pgo_conf_t *conf = pgo_conf_new();
		char want[512];
		int rc;

		assert_non_null(conf);
		snprintf(want, sizeof(want), "%s:%d: %s", path, cases[i].line,
			 cases[i].what);
		rc = pgo_conf_load_file(conf, path);
		if (rc != PGO_ERR_CONFIG || strcmp(pgo_conf_errmsg(conf), want))
			fail_msg("case %zu: rc %d\n  got  %s\n  want %s", i, rc,
				 pgo_conf_errmsg(conf), want);
		pgo_conf_destroy(conf);
	}
}

/* A fleet's databases: [database NAME] sections, each database's own
 * configuration (its url as a flag, the file's other keys), a name
 * given twice. */
static void test_fleet_databases(void **state)
{
	const char *path = write_file("fleet.ini", "[relay]\nbatch = 7\n"
						   "[database eu]\n"
						   "url = dbname=a\n"
						   "[database   us-2 ]\n"
						   "url = dbname=b\n");
	pgo_conf_t *conf = pgo_conf_new(), *one;
	const char *name, *url;
	bool from_file;
	pgo_error_t err;

	(void)state;
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(pgo_conf_database_count(conf), 2);
	assert_true(pgo_conf_database(conf, 1, &name, &url, &from_file));
	assert_string_equal(name, "us-2");
	assert_string_equal(url, "dbname=b");
	assert_true(from_file);
	assert_false(pgo_conf_database(conf, 2, &name, &url, NULL));
	one = pgo_conf_for_database(conf, "dbname=b", "[database us-2]", NULL,
				    &err);
	assert_non_null(one);
	assert_string_equal(pgo_conf_get(one, "database.url"), "dbname=b");
	assert_string_equal(pgo_conf_get(one, "relay.batch"), "7");
	assert_int_equal(pgo_conf_database_count(one), 0);
	pgo_conf_destroy(one);
	/* --db flags: no names; the same name twice is refused. */
	assert_int_equal(pgo_conf_add_database(conf, NULL, "dbname=c", "--db"),
			 PGO_OK);
	assert_true(pgo_conf_database(conf, 2, &name, &url, &from_file));
	assert_null(name);
	assert_false(from_file);
	assert_int_equal(pgo_conf_add_database(conf, "eu", "x", "here"),
			 PGO_ERR_CONFIG);
	assert_non_null(strstr(pgo_conf_errmsg(conf), "is given twice"));
	pgo_conf_destroy(conf);
}

/* How a fleet's databases are named (pgo_conf_databases_named, as the
 * relay and `status` name them): --db flags by their dbnames when those
 * are usable and different, else db1, db2, ...; sections by NAME;
 * sections and flags not both; a section without url refused. */
static void test_fleet_names(void **state)
{
	static const struct {
		const char *file;    /* [database NAME] sections, or NULL */
		const char *urls[4]; /* --db flags, NULL-ended */
		const char *names;   /* "a b c", or NULL for an error */
		const char *error;   /* a part of the error */
	} cases[] = {
		{NULL, {"dbname=a", "postgres://h/b", NULL}, "a b", NULL},
		{NULL,
		 {"dbname=a host=x", "dbname=a host=y", NULL},
		 "db1 db2",
		 NULL},
		{NULL, {"host=x", "dbname=b", NULL}, "db1 db2", NULL},
		{NULL, {"dbname=a.b", "dbname=c", NULL}, "db1 db2", NULL},
		{NULL,
		 {"dbname=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "dbname=c", NULL},
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa c",
		 NULL},
		{"[database eu]\nurl = dbname=x\n[database us]\nurl = "
		 "dbname=x\n",
		 {NULL},
		 "eu us",
		 NULL},
		{"[database eu]\nurl = dbname=x\n",
		 {"dbname=y", NULL},
		 NULL,
		 "not both"},
		{"[database eu]\n", {NULL}, NULL, "[database eu] has no url"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		pgo_conf_db_t named[4];
		pgo_error_t err;
		char got[256] = "";
		int rc;

		if (cases[i].file)
			assert_int_equal(
				pgo_conf_load_file(
					conf,
					write_file("names.ini", cases[i].file)),
				PGO_OK);
		for (int u = 0; cases[i].urls[u]; u++)
			assert_int_equal(pgo_conf_add_database(conf, NULL,
							       cases[i].urls[u],
							       "--db"),
					 PGO_OK);
		rc = pgo_conf_databases_named(conf, named, &err);
		if (!cases[i].names) {
			if (rc != PGO_ERR_CONFIG ||
			    !strstr(err.msg, cases[i].error))
				fail_msg("case %zu: rc %d, %s", i, rc,
					 rc ? err.msg : "");
			pgo_conf_destroy(conf);
			continue;
		}
		assert_int_equal(rc, PGO_OK);
		for (size_t d = 0; d < pgo_conf_database_count(conf); d++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got),
				 "%s%s", d ? " " : "", named[d].name);
		if (strcmp(got, cases[i].names) != 0)
			fail_msg("case %zu: names \"%s\", want \"%s\"", i, got,
				 cases[i].names);
		pgo_conf_destroy(conf);
	}
}

/* Reading stops at the first error: keys before it stay set, keys after
 * it are not read. */
static void test_file_stops_at_error(void **state)
{
	const char *path = write_file("stop.ini", "[relay]\n"
						  "batch = 5\n"
						  "bach = 7\n"
						  "in_flight = 3\n");
	pgo_conf_t *conf = pgo_conf_new();

	(void)state;
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_ERR_CONFIG);
	assert_int_equal(pgo_conf_values(conf)->batch, 5);
	assert_int_equal(pgo_conf_values(conf)->in_flight, 2);
	pgo_conf_destroy(conf);
}

static void test_file_unreadable(void **state)
{
	char missing[128], want[1024], line[300];
	pgo_conf_t *conf = pgo_conf_new();
	const char *path;

	(void)state;
	snprintf(missing, sizeof(missing), "%s/missing.ini", tmpdir);
	snprintf(want, sizeof(want),
		 "%s: cannot open: No such file or directory", missing);
	assert_int_equal(pgo_conf_load_file(conf, missing), PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf), want);
	assert_int_equal(pgo_conf_load_file(conf, NULL), PGO_ERR_INVALID);

	/* A line longer than libinih's 197 characters (which this reader
	 * replaced, issue 44 item 15) is read whole, not split or refused. */
	memset(line, 'x', sizeof(line));
	memcpy(line, "name = ", 7);
	line[250] = '\n';
	line[251] = '\0';
	path = write_file("long.ini", "[relay]\n");
	{
		FILE *f = fopen(path, "a");

		assert_non_null(f);
		fputs(line, f);
		fclose(f);
	}
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(strlen(pgo_conf_values(conf)->name), 250 - 7);
	assert_int_equal(strspn(pgo_conf_values(conf)->name, "x"), 250 - 7);
	pgo_conf_destroy(conf);
}

/* A database URL of any length fits on its line (issue 44 item 15:
 * libinih held 197 characters), inline comment and blanks dropped as on
 * a short line, and is shown masked. */
static void test_file_long_url(void **state)
{
	char url[1200], text[1400], origin[300];
	pgo_conf_t *conf = pgo_conf_new();
	const char *path;
	size_t n;
	char *shown;

	(void)state;
	n = (size_t)snprintf(url, sizeof(url),
			     "postgresql://app:s3cret@db.example:5432/app?"
			     "application_name=");
	memset(url + n, 'a', 1000);
	url[n + 1000] = '\0';
	snprintf(text, sizeof(text),
		 "[database]\n  url =  %s   ; the primary\n[relay]\n"
		 "batch = 7\n",
		 url);
	path = write_file("longurl.ini", text);
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->db_url, url);
	assert_int_equal(pgo_conf_values(conf)->batch, 7);
	shown = show(conf);
	snprintf(origin, sizeof(origin), "file %s:2", path);
	memcpy(url + 17, "***", 3);
	memmove(url + 20, url + 23, strlen(url + 23) + 1);
	snprintf(text, sizeof(text), "url = %s", url);
	assert_show_line(shown, text, origin);
	assert_null(strstr(shown, "s3cret"));
	free(shown);
	pgo_conf_destroy(conf);
}

/* A carriage return inside a line (issue 19, item 12: the line below made
 * the reader copy 310 bytes into libinih's 200-byte stack buffer) is
 * refused with its line number; so is one at the end of a long line. */
static void test_file_carriage_return(void **state)
{
	char text[512], want[1024];
	const char *path;
	pgo_conf_t *conf;
	size_t n;

	(void)state;
	/* 5b72656c61795d0a6e616d65203d20780d + 300 x 41 + 0a */
	n = (size_t)snprintf(text, sizeof(text), "[relay]\nname = x\r");
	memset(text + n, 'A', 300);
	memcpy(text + n + 300, "\n", 2);
	path = write_file("cr.ini", text);
	conf = pgo_conf_new();
	assert_non_null(conf);
	snprintf(want, sizeof(want),
		 "%s:2: carriage return inside the line (lines end with "
		 "\"\\n\" or \"\\r\\n\")",
		 path);
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf), want);
	assert_string_equal(pgo_conf_values(conf)->name, "");
	pgo_conf_destroy(conf);

	/* "\r\n" still ends a line, also a long one. */
	path = write_file("crlf.ini", "[relay]\r\nname = x\r\n");
	conf = pgo_conf_new();
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->name, "x");
	pgo_conf_destroy(conf);
	n = (size_t)snprintf(text, sizeof(text), "[relay]\r\nname = ");
	memset(text + n, 'y', 191);
	memcpy(text + n + 191, "\r\n", 3);
	path = write_file("crlf.ini", text);
	conf = pgo_conf_new();
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(strlen(pgo_conf_values(conf)->name), 191);
	assert_int_equal(strspn(pgo_conf_values(conf)->name, "y"), 191);
	pgo_conf_destroy(conf);
}

/* --- the environment and the ranking of sources --- */

static void test_env(void **state)
{
	const char *path = write_file("env.ini", "[relay]\nbatch = 100\n"
						 "in_flight = 3\n");
	char *envp[] = {
		"PATH=/usr/bin",
		"pgoutbox_relay_batch=1", /* not ours: names are upper case */
		"PGOUTBOX_RELAY_BATCH=7",
		"DATABASE_URL=postgres://from-database-url/db",
		NULL,
	};
	pgo_conf_t *conf = pgo_conf_new();
	char *text;

	(void)state;
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(pgo_conf_load_env(conf, envp), PGO_OK);
	assert_int_equal(pgo_conf_values(conf)->batch, 7);
	assert_int_equal(pgo_conf_values(conf)->in_flight, 3);
	assert_string_equal(pgo_conf_values(conf)->db_url,
			    "postgres://from-database-url/db");
	text = show(conf);
	assert_show_line(text, "batch = 7", "env PGOUTBOX_RELAY_BATCH");
	assert_show_line(text, "url = postgres://from-database-url/db",
			 "env DATABASE_URL");
	free(text);
	assert_int_equal(pgo_conf_load_env(conf, NULL), PGO_OK);
	pgo_conf_destroy(conf);
}

static void test_env_database_url(void **state)
{
	/* PGOUTBOX_DATABASE_URL wins whatever the order in envp. */
	char *before[] = {"PGOUTBOX_DATABASE_URL=host=mine",
			  "DATABASE_URL=host=generic", NULL};
	char *after[] = {"DATABASE_URL=host=generic",
			 "PGOUTBOX_DATABASE_URL=host=mine", NULL};
	char *const *orders[] = {before, after};

	(void)state;
	for (size_t i = 0; i < N(orders); i++) {
		pgo_conf_t *conf = pgo_conf_new();

		assert_int_equal(pgo_conf_load_env(conf, orders[i]), PGO_OK);
		assert_string_equal(pgo_conf_values(conf)->db_url, "host=mine");
		pgo_conf_destroy(conf);
	}
}

static void test_env_errors(void **state)
{
	static const struct {
		const char *var;
		const char *err;
	} cases[] = {
		{"PGOUTBOX_FOO=1", "unknown environment variable PGOUTBOX_FOO"},
		{"PGOUTBOX_RELAY_BACH=1",
		 "unknown environment variable PGOUTBOX_RELAY_BACH (did you "
		 "mean PGOUTBOX_RELAY_BATCH?)"},
		{"PGOUTBOX_relay_batch=1",
		 "unknown environment variable PGOUTBOX_relay_batch"},
		{"PGOUTBOX_RELAY_BATCH=x",
		 "PGOUTBOX_RELAY_BATCH: \"x\" is not a whole number"},
		{"PGOUTBOX_RELAY_BATCH=",
		 "PGOUTBOX_RELAY_BATCH: \"\" is not a whole number"},
		{"PGOUTBOX_SINK_EXEC_TIMEOUT=5",
		 "PGOUTBOX_SINK_EXEC_TIMEOUT: \"5\" needs a unit "
		 "(ms, s, m, h)"},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		char *envp[] = {"HOME=/root", (char *)cases[i].var, NULL};
		pgo_conf_t *conf = pgo_conf_new();

		assert_int_equal(pgo_conf_load_env(conf, envp), PGO_ERR_CONFIG);
		assert_string_equal(pgo_conf_errmsg(conf), cases[i].err);
		pgo_conf_destroy(conf);
	}
}

/* defaults < file < env < flags, whatever order the sources are read in. */
static void test_ranking(void **state)
{
	const char *path = write_file("rank.ini", "[relay]\nbatch = 100\n"
						  "max_attempts = 3\n"
						  "in_flight = 5\n");
	char *envp[] = {"PGOUTBOX_RELAY_BATCH=7",
			"PGOUTBOX_RELAY_MAX_ATTEMPTS=4", NULL};
	pgo_conf_t *a = pgo_conf_new(), *b = pgo_conf_new();

	(void)state;
	/* Natural order. */
	assert_int_equal(pgo_conf_load_file(a, path), PGO_OK);
	assert_int_equal(pgo_conf_load_env(a, envp), PGO_OK);
	assert_int_equal(
		pgo_conf_set(a, "relay.batch", "9", PGO_CONF_FLAG, "--batch"),
		PGO_OK);
	/* Reverse order: flags first, as a CLI parses them. */
	assert_int_equal(
		pgo_conf_set(b, "relay.batch", "9", PGO_CONF_FLAG, "--batch"),
		PGO_OK);
	assert_int_equal(pgo_conf_load_env(b, envp), PGO_OK);
	assert_int_equal(pgo_conf_load_file(b, path), PGO_OK);

	for (int i = 0; i < 2; i++) {
		pgo_conf_t *c = i ? b : a;

		assert_int_equal(pgo_conf_values(c)->batch, 9);
		assert_int_equal(pgo_conf_values(c)->max_attempts, 4);
		assert_int_equal(pgo_conf_values(c)->in_flight, 5);
		assert_int_equal(pgo_conf_values(c)->retry_base, 1000);
	}
	/* An outranked value is still checked. */
	assert_int_equal(
		pgo_conf_set(a, "relay.batch", "0", PGO_CONF_FILE, "x.ini:1"),
		PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(a),
			    "x.ini:1: relay.batch = 0 is out of range "
			    "(1..10000)");
	/* A later flag replaces an earlier one. */
	assert_int_equal(
		pgo_conf_set(a, "relay.batch", "11", PGO_CONF_FLAG, "--batch"),
		PGO_OK);
	assert_int_equal(pgo_conf_values(a)->batch, 11);
	assert_int_equal(pgo_conf_set(a, "relay.batch", "1", 7, "?"),
			 PGO_ERR_INVALID);
	assert_int_equal(
		pgo_conf_set(a, "relay.batch", NULL, PGO_CONF_FLAG, "?"),
		PGO_ERR_INVALID);
	pgo_conf_destroy(a);
	pgo_conf_destroy(b);
}

/* --- cross-key rules --- */

static void test_validate(void **state)
{
	static const struct {
		const char *settings[4][2]; /* key, value; NULL-ended */
		const char *err;	    /* exact, or NULL for success */
	} cases[] = {
		{{{NULL}}, NULL},
		{{{"relay.sink", "exec"}, {NULL}},
		 "relay.sink = exec needs sink.exec_command (--exec)"},
		{{{"relay.sink", "exec"}, {"sink.exec_command", "cat"}, {NULL}},
		 NULL},
		{{{"sink.exec_command", "cat"}, {NULL}}, NULL},
		{{{"relay.retry_base", "10m"},
		  {"relay.retry_max", "5m"},
		  {NULL}},
		 "relay.retry_base (10m) must not exceed relay.retry_max (5m)"},
		{{{"relay.retry_base", "5m"},
		  {"relay.retry_max", "5m"},
		  {NULL}},
		 NULL},
		{{{"relay.heartbeat", "6s"}, {NULL}},
		 "relay.lease_timeout (10s) must be at least twice "
		 "relay.heartbeat (6s): a live relay would be fenced between "
		 "two heartbeats"},
		{{{"relay.heartbeat", "1s"},
		  {"relay.lease_timeout", "2s"},
		  {NULL}},
		 NULL},
		{{{"relay.sink", "exec"},
		  {"sink.exec_command", "cat"},
		  {"sink.exec_timeout", "60s"}},
		 "sink.exec_timeout (1m) must be less than "
		 "database.idle_tx_timeout (1m), or PostgreSQL ends the "
		 "session while a batch is publishing"},
		{{{"relay.sink", "exec"},
		  {"sink.exec_command", "cat"},
		  {"sink.exec_timeout", "59s"}},
		 NULL},
		{{{"relay.sink", "exec"},
		  {"sink.exec_command", "cat"},
		  {"database.idle_tx_timeout", "0"}},
		 NULL},
		/* The stdout sink never runs a command. */
		{{{"sink.exec_timeout", "2m"}, {NULL}}, NULL},
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		int rc;

		for (size_t j = 0; j < 4 && cases[i].settings[j][0]; j++)
			assert_int_equal(pgo_conf_set(conf,
						      cases[i].settings[j][0],
						      cases[i].settings[j][1],
						      PGO_CONF_FLAG, "--t"),
					 PGO_OK);
		rc = pgo_conf_validate(conf);
		if (!cases[i].err) {
			if (rc != PGO_OK)
				fail_msg("case %zu: %s", i,
					 pgo_conf_errmsg(conf));
		} else {
			assert_int_equal(rc, PGO_ERR_CONFIG);
			assert_string_equal(pgo_conf_errmsg(conf),
					    cases[i].err);
		}
		pgo_conf_destroy(conf);
	}
}

/* database.url_file and sink.redis_url_file: the secret comes from a
 * file, ranked as the source that named the file (issue 19, item 9). */
static void test_secret_files(void **state)
{
	char *envp[] = {NULL, NULL};
	char env_var[1200], want[1024];
	const char *path;
	char *text;
	pgo_conf_t *conf;

	(void)state;
	path = write_file("db.secret", "postgres://app:s3cret@db/app\njunk\n");
	conf = pgo_conf_new();
	assert_int_equal(pgo_conf_set(conf, "database.url_file", path,
				      PGO_CONF_FLAG, "--db-file"),
			 PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->db_url,
			    "postgres://app:s3cret@db/app");
	text = show(conf);
	snprintf(want, sizeof(want), "flag --db-file %s", path);
	assert_show_line(text, "url = postgres://app:***@db/app", want);
	if (strstr(text, "s3"))
		fail_msg("password shown:\n%s", text);
	free(text);
	/* A variable ranks below the flag that named the file. */
	envp[0] = "DATABASE_URL=postgres://other@db/app";
	assert_int_equal(pgo_conf_load_env(conf, envp), PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->db_url,
			    "postgres://app:s3cret@db/app");
	pgo_conf_destroy(conf);

	/* A flag ranks above a file named in the environment. */
	conf = pgo_conf_new();
	snprintf(env_var, sizeof(env_var), "PGOUTBOX_DATABASE_URL_FILE=%s",
		 path);
	envp[0] = env_var;
	assert_int_equal(pgo_conf_set(conf, "database.url", "dbname=x",
				      PGO_CONF_FLAG, "--db"),
			 PGO_OK);
	assert_int_equal(pgo_conf_load_env(conf, envp), PGO_OK);
	assert_string_equal(pgo_conf_values(conf)->db_url, "dbname=x");
	pgo_conf_destroy(conf);

	/* The Redis URL the same way. */
	path = write_file("redis.secret", "redis://:s3cret@cache:6380/2\r\n");
	conf = pgo_conf_new();
	assert_int_equal(pgo_conf_set(conf, "sink.redis_url_file", path,
				      PGO_CONF_FLAG, "--redis-file"),
			 PGO_OK);
	assert_string_equal(pgo_conf_get_str(conf, "sink.redis_url"),
			    "redis://:s3cret@cache:6380/2");
	text = show(conf);
	if (strstr(text, "s3"))
		fail_msg("password shown:\n%s", text);
	free(text);
	pgo_conf_destroy(conf);

	/* A missing or empty file is a configuration error. */
	conf = pgo_conf_new();
	snprintf(want, sizeof(want), "%s/none", tmpdir);
	assert_int_equal(pgo_conf_set(conf, "database.url_file", want,
				      PGO_CONF_FLAG, "--db-file"),
			 PGO_ERR_CONFIG);
	snprintf(env_var, sizeof(env_var),
		 "database.url_file: cannot open %s: No such file or "
		 "directory",
		 want);
	assert_string_equal(pgo_conf_errmsg(conf), env_var);
	path = write_file("empty.secret", "\n");
	assert_int_equal(pgo_conf_set(conf, "database.url_file", path,
				      PGO_CONF_FLAG, "--db-file"),
			 PGO_ERR_CONFIG);
	snprintf(want, sizeof(want),
		 "database.url_file: %s has an empty first line (it must "
		 "hold database.url)",
		 path);
	assert_string_equal(pgo_conf_errmsg(conf), want);
	pgo_conf_destroy(conf);
}

/* --- reload --- */

static void test_reload(void **state)
{
	const char *path = write_file("reload.ini", "[relay]\n"
						    "batch = 100\n"
						    "in_flight = 3\n"
						    "max_attempts = 3\n");
	char *envp[] = {"HOME=/", NULL};
	char want[2048];
	pgo_conf_t *conf = pgo_conf_new();
	int changed = -1;

	(void)state;
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(pgo_conf_load_env(conf, envp), PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.max_attempts", "5",
				      PGO_CONF_FLAG, "--max-attempts"),
			 PGO_OK);
	/* A default computed by the caller, as the CLI does for the name. */
	assert_int_equal(pgo_conf_set(conf, "relay.name", "host-42",
				      PGO_CONF_DEFAULT, NULL),
			 PGO_OK);

	/* Nothing changed: nothing logged. */
	logged[0] = '\0';
	assert_int_equal(pgo_conf_reload(conf, envp, &changed), PGO_OK);
	assert_int_equal(changed, 0);
	assert_string_equal(logged, "");

	write_file("reload.ini", "[relay]\n"
				 "batch = 200\n"
				 "in_flight = 4\n"
				 "max_attempts = 7\n"
				 "poll_interval = 1s\n");
	assert_int_equal(pgo_conf_reload(conf, envp, &changed), PGO_OK);
	assert_int_equal(changed, 2);
	assert_int_equal(pgo_conf_values(conf)->batch, 200);
	assert_int_equal(pgo_conf_values(conf)->poll_interval, 1000);
	assert_int_equal(pgo_conf_values(conf)->in_flight, 3);
	assert_int_equal(pgo_conf_values(conf)->max_attempts, 5);
	assert_string_equal(pgo_conf_values(conf)->name, "host-42");
	snprintf(want, sizeof(want),
		 "INFO config: relay.batch changed from 100 to 200 "
		 "(file %s:2)\n"
		 "WARN config: relay.in_flight changed to 4 (file %s:3) but "
		 "needs a restart; keeping 3\n"
		 "INFO config: relay.poll_interval changed from 30s to 1s "
		 "(file %s:5)\n",
		 path, path, path);
	assert_string_equal(logged, want);

	/* A bad file changes nothing and says where it is wrong. */
	write_file("reload.ini", "[relay]\nbatch = 300\nbatch = 0\n");
	logged[0] = '\0';
	changed = -1;
	assert_int_equal(pgo_conf_reload(conf, envp, &changed), PGO_ERR_CONFIG);
	assert_int_equal(changed, 0);
	snprintf(want, sizeof(want),
		 "%s:3: relay.batch = 0 is out of range (1..10000)", path);
	assert_string_equal(pgo_conf_errmsg(conf), want);
	assert_int_equal(pgo_conf_values(conf)->batch, 200);
	assert_string_equal(logged, "");

	/* So does a file that breaks a cross-key rule. */
	write_file("reload.ini", "[relay]\nretry_base = 1h\n");
	assert_int_equal(pgo_conf_reload(conf, envp, NULL), PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf),
			    "relay.retry_base (1h) must not exceed "
			    "relay.retry_max (5m)");
	assert_int_equal(pgo_conf_values(conf)->retry_base, 1000);

	/* The environment is read again; a key dropped from the file goes
	 * back to its default; the flag keeps winning. */
	write_file("reload.ini", "[relay]\nmax_attempts = 8\n");
	{
		char *env2[] = {"PGOUTBOX_LOG_LEVEL=debug", NULL};

		assert_int_equal(pgo_conf_reload(conf, env2, &changed), PGO_OK);
	}
	assert_int_equal(changed, 3);
	assert_int_equal(pgo_conf_values(conf)->batch, 500);
	assert_int_equal(pgo_conf_values(conf)->poll_interval, 30000);
	assert_int_equal(pgo_conf_values(conf)->log_level, PGO_LOG_DEBUG);
	assert_int_equal(pgo_conf_values(conf)->max_attempts, 5);
	assert_string_equal(pgo_conf_get(conf, "relay.max_attempts"), "5");
	{
		char *text = show(conf);

		assert_show_line(text, "max_attempts = 5",
				 "flag --max-attempts");
		assert_show_line(text, "batch = 500", "default");
		assert_show_line(text, "level = debug",
				 "env PGOUTBOX_LOG_LEVEL");
		free(text);
	}

	/* A vanished file is an error too. */
	unlink(path);
	assert_int_equal(pgo_conf_reload(conf, envp, &changed), PGO_ERR_CONFIG);
	assert_int_equal(pgo_conf_values(conf)->log_level, PGO_LOG_DEBUG);
	pgo_conf_destroy(conf);
}

/* A configuration that never read a file reloads from env and flags. */
static void test_reload_without_file(void **state)
{
	char *env1[] = {"PGOUTBOX_RELAY_BATCH=7", NULL};
	char *env2[] = {"PGOUTBOX_RELAY_BATCH=8", "PGOUTBOX_RELAY_QUEUE=jobs",
			NULL};
	pgo_conf_t *conf = pgo_conf_new();
	int changed = -1;

	(void)state;
	assert_int_equal(pgo_conf_load_env(conf, env1), PGO_OK);
	logged[0] = '\0';
	assert_int_equal(pgo_conf_reload(conf, env2, &changed), PGO_OK);
	assert_int_equal(changed, 1);
	assert_int_equal(pgo_conf_values(conf)->batch, 8);
	assert_string_equal(pgo_conf_values(conf)->queue, "outbox");
	/* One line per key, in the order of the table. */
	assert_string_equal(logged,
			    "WARN config: relay.queue changed to jobs (env "
			    "PGOUTBOX_RELAY_QUEUE) but needs a restart; "
			    "keeping outbox\n"
			    "INFO config: relay.batch changed from 7 to 8 "
			    "(env PGOUTBOX_RELAY_BATCH)\n");
	pgo_conf_destroy(conf);
}

/* The reload log never shows a password either. */
static void test_reload_masks(void **state)
{
	char *env1[] = {"DATABASE_URL=postgres://u:old-secret@h/db", NULL};
	char *env2[] = {"DATABASE_URL=postgres://u:new-secret@h/db", NULL};
	pgo_conf_t *conf = pgo_conf_new();

	(void)state;
	assert_int_equal(pgo_conf_load_env(conf, env1), PGO_OK);
	logged[0] = '\0';
	assert_int_equal(pgo_conf_reload(conf, env2, NULL), PGO_OK);
	assert_string_equal(logged,
			    "WARN config: database.url changed to "
			    "postgres://u:***@h/db (env DATABASE_URL) but "
			    "needs a restart; keeping postgres://u:***@h/db\n");
	assert_string_equal(pgo_conf_values(conf)->db_url,
			    "postgres://u:old-secret@h/db");
	pgo_conf_destroy(conf);
}

/* --- show and reference --- */

/* How a database URL or conninfo string is shown: rebuilt from what
 * PQconninfoParse() reads, in the form written, secrets as ***.  Every
 * secret holds "s3", which must never appear. */
static const struct {
	const char *url;
	const char *shown;
} masked[] = {
	/* URLs */
	{"postgres://app:s3cret@db.example:5432/app",
	 "postgres://app:***@db.example:5432/app"},
	{"postgresql://app:s3cret@db/app?sslmode=require",
	 "postgresql://app:***@db/app?sslmode=require"},
	{"postgres://app:s3%40c%2Fr%3Fet@db/app", "postgres://app:***@db/app"},
	{"postgres://a%20b:s3%25@h1:5432,h2:5433/"
	 "my%20db?application_name=x%20y",
	 "postgres://a%20b:***@h1:5432,h2:5433/my%20db?application_name=x%20y"},
	{"postgres://:s3cret@db", "postgres://:***@db"},
	/* libpq decodes the keyword: pass%77ord is password (issue 19). */
	{"postgres://u:s3x@h/db?pass%77ord=s3", "postgres://u:***@h/db"},
	{"postgres://db:5432/app?application_name=a@b&password=s3",
	 "postgres://:***@db:5432/app?application_name=a%40b"},
	{"postgres://db/app?user=a&password=s3cret&sslmode=verify-full",
	 "postgres://a:***@db/app?sslmode=verify-full"},
	{"postgres://u:s3cret@db/app?sslpassword=s3cret",
	 "postgres://u:***@db/app?sslpassword=***"},
	{"postgres://app@db/app", "postgres://app@db/app"},
	{"postgres://db:5432/app", "postgres://db:5432/app"},
	{"postgres://[::1]:5433/app", "postgres://[::1]:5433/app"},
	{"postgres://%2Ftmp/app", "postgres:///app?host=%2Ftmp"},
	{"postgres://h/app?ssl=true", "postgres://h/app?sslmode=require"},
	{"postgresql://", "postgresql://"},
	/* Empty values: libpq reads "//@h" as no user, "/" as no database
	 * and "h" as no port, so they stay in the query (fuzz_mask). */
	{"postgresql:///b?user=", "postgresql:///b?user="},
	{"postgresql://h/b?port=", "postgresql:///b?host=h&port="},
	{"postgresql://h?dbname=", "postgresql://h?dbname="},
	{"postgresql://:s3@h?user=", "postgresql://:***@h?user="},
	/* An unescaped '@', '/' or '?' in a password: libpq reads the rest
	 * as a host, port or path, or refuses the URL; hidden whole. */
	{"postgres://app:s3c@ret@db/app", "***"},
	{"postgres://app:s3/c?r@db/app", "***"},
	{"postgres://app:s3/cr@db/app", "***"},
	{"postgres://app:123/s3@db/app", "***"},
	{"postgres://u:s3@h?no_such_option=1", "***"},
	/* conninfo, in libpq's order of options */
	{"host=db password=s3cret user=app", "user=app password=*** host=db"},
	{"host=db password = 's3 cr\\'et' dbname=app",
	 "password=*** dbname=app host=db"},
	{"password='s3 x y'", "password=***"},
	{"host=db sslpassword=s3cret", "host=db sslpassword=***"},
	{"host=db user=app", "user=app host=db"},
	{"host=/tmp dbname='my db' options='-c a=\\\\b'",
	 "dbname='my db' host=/tmp options='-c a=\\\\b'"},
	{"password=s3 dbname=app", "password=*** dbname=app"},
	/* a connection string inside dbname, which libpq expands */
	{"dbname='postgres://u:s3cret@h/db' application_name=x",
	 "dbname=postgres://u:***@h/db application_name=x"},
	{"dbname='host=h password=s3'", "dbname='password=*** host=h'"},
	/* what libpq cannot parse */
	{"host=db password='s3cret", "***"},
	{"host=db s3cret", "***"},
	{"host=db passwd=s3cret", "***"},
	{"", ""},
};

static void test_show_masks_passwords(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(masked); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		char line[256];
		char *text;

		assert_int_equal(pgo_conf_set(conf, "database.url",
					      masked[i].url, PGO_CONF_FLAG,
					      "--db"),
				 PGO_OK);
		/* get() and the typed value keep the real text. */
		assert_string_equal(pgo_conf_get(conf, "database.url"),
				    masked[i].url);
		text = show(conf);
		snprintf(line, sizeof(line), "url = %s", masked[i].shown);
		assert_show_line(text, line, "flag --db");
		if (strstr(text, "s3"))
			fail_msg("password shown:\n%s", text);
		free(text);
		pgo_conf_destroy(conf);
	}
}

/* What is shown reads, to libpq, as the original with every secret
 * "***": nothing else lost or changed. */
static void test_mask_as_libpq_reads_it(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(masked); i++) {
		PQconninfoOption *orig = PQconninfoParse(masked[i].url, NULL);
		PQconninfoOption *shown;
		pgo_buf_t b;
		bool ok;

		pgo_buf_init(&b);
		pgo_buf_puts(&b, "");
		ok = pgo_conninfo_mask(masked[i].url, &b);
		assert_string_equal(b.data, masked[i].shown);
		if (!ok) {
			assert_string_equal(b.data, "***");
			PQconninfoFree(orig);
			pgo_buf_free(&b);
			continue;
		}
		assert_non_null(orig);
		shown = PQconninfoParse(b.data, NULL);
		if (!shown)
			fail_msg("libpq cannot read %s", b.data);
		for (size_t k = 0; orig[k].keyword; k++) {
			const char *want = orig[k].val;

			assert_string_equal(orig[k].keyword, shown[k].keyword);
			if (want && orig[k].dispchar[0] == '*')
				want = "***";
			else if (want &&
				 strcmp(orig[k].keyword, "dbname") == 0 &&
				 strstr(want, "s3"))
				want = NULL; /* nested: masked, checked above */
			if (!want)
				continue;
			if (!shown[k].val || strcmp(shown[k].val, want) != 0)
				fail_msg("%s: %s is \"%s\", shown as \"%s\"",
					 masked[i].url, orig[k].keyword,
					 orig[k].val,
					 shown[k].val ? shown[k].val
						      : "(none)");
		}
		for (size_t k = 0; orig[k].keyword; k++)
			if (!orig[k].val && shown[k].val)
				fail_msg("%s: %s appeared", masked[i].url,
					 orig[k].keyword);
		PQconninfoFree(shown);
		PQconninfoFree(orig);
		pgo_buf_free(&b);
	}
}

/* A masker of "x://" values only, for test_mask_secret. */
static bool mask_x(const char *value, pgo_buf_t *b)
{
	if (strncmp(value, "x://", 4) != 0)
		return false;
	pgo_buf_puts(b, "x://***");
	return true;
}

/* pgo_mask_secret() (base/mask.c): the key's masker when it takes the
 * value, else libpq's reading, which hides whole what it cannot parse;
 * what b held before is gone. */
static void test_mask_secret(void **state)
{
	static const struct {
		const char *value;
		pgo_mask_fn mask;
		const char *shown;
	} cases[] = {
		{"x://u:s3@h", mask_x, "x://***"},
		{"host=h password=s3", mask_x, "password=*** host=h"},
		{"x://u:s3@h", NULL, "***"},
		{"postgres://u:s3@h/d", NULL, "postgres://u:***@h/d"},
		{"whsec_s3", NULL, "***"},
		{"", NULL, ""},
	};
	pgo_buf_t b;

	(void)state;
	pgo_buf_init(&b);
	for (size_t i = 0; i < N(cases); i++) {
		pgo_buf_puts(&b, "left over s3");
		assert_string_equal(
			pgo_mask_secret(cases[i].value, cases[i].mask, &b),
			cases[i].shown);
	}
	pgo_buf_free(&b);
}

/* Redis URLs are not libpq's: their own masker (sinks/redis/conn.c),
 * which the sink.redis_url row names (pgo_conf_key_t.mask). */
static void test_show_masks_redis(void **state)
{
	static const struct {
		const char *url;
		const char *shown;
	} cases[] = {
		{"redis://:s3cret@cache:6380/2", "redis://:***@cache:6380/2"},
		{"redis://app:s3cret@cache", "redis://app:***@cache"},
		{"rediss://app:s3%2Fc@cache/1", "rediss://app:***@cache/1"},
		{"redis://app:s3/c@ret@cache", "redis://app:***@cache"},
		{"redis://s3cret@cache", "redis://***@cache"},
		{"redis://cache:6379/0", "redis://cache:6379/0"},
		/* Schemes are case-insensitive; a '=' is no conninfo. */
		{"REDIS://:s3cret@h:6379/0", "REDIS://:***@h:6379/0"},
		{"Rediss://u:s3=x@h/0", "Rediss://u:***@h/0"},
		{"cache:6379", "***"}, /* not a URL: hidden whole */
	};

	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		char line[256];
		char *text;

		assert_int_equal(pgo_conf_set(conf, "sink.redis_url",
					      cases[i].url, PGO_CONF_FLAG,
					      "--redis"),
				 PGO_OK);
		text = show(conf);
		snprintf(line, sizeof(line), "redis_url = %s", cases[i].shown);
		assert_show_line(text, line, "flag --redis");
		if (strstr(text, "s3"))
			fail_msg("password shown:\n%s", text);
		free(text);
		pgo_conf_destroy(conf);
	}
}

static void test_show_layout(void **state)
{
	pgo_conf_t *conf = pgo_conf_new();
	char *text;

	(void)state;
	assert_int_equal(pgo_conf_set(conf, "relay.batch", "7", PGO_CONF_FLAG,
				      "--batch"),
			 PGO_OK);
	text = show(conf);
	/* Sections in table order, each key after its help line. */
	assert_non_null(strstr(text, "[database]\n"
				     "; libpq conninfo or postgres:// URL"));
	assert_non_null(strstr(text, "\n\n[relay]\n"));
	assert_non_null(strstr(text, "\n\n[sink]\n"));
	assert_non_null(strstr(text, "\n\n[log]\n"));
	assert_true(strstr(text, "[database]") < strstr(text, "[relay]"));
	assert_true(strstr(text, "[relay]") < strstr(text, "[sink]"));
	assert_true(strstr(text, "[sink]") < strstr(text, "[log]"));
	assert_non_null(strstr(text, "; Events claimed per transaction\n"
				     "batch = 7 "));
	assert_show_line(text, "batch = 7", "flag --batch");
	assert_show_line(text, "in_flight = 2", "default");
	assert_show_line(text, "listen = on", "default");
	assert_show_line(text, "retry_max = 5m", "default");
	assert_show_line(text, "url =", "default");
	for (size_t i = 0; i < N(all_keys); i++) {
		char line[128];

		snprintf(line, sizeof(line),
			 "\n%s = ", strchr(all_keys[i].key, '.') + 1);
		if (!strstr(text, line))
			fail_msg("show lacks %s", all_keys[i].key);
	}
	free(text);
	pgo_conf_destroy(conf);
}

/* `config show --changed`: only the keys whose value is not the default,
 * each under its section, laid out as show does; a key set to its default
 * value is left out, and a fresh configuration shows nothing. */
static void test_show_changed(void **state)
{
	const char *path = write_file("changed.ini", "[relay]\n"
						     "batch = 500\n"
						     "mode = strict\n"
						     "[log]\n"
						     "level = debug\n");
	pgo_conf_t *conf = pgo_conf_new();
	char *text = NULL, where[300];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	assert_int_equal(pgo_conf_show_changed(conf, f), PGO_OK);
	fflush(f);
	assert_string_equal(text, "");

	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "database.url",
				      "postgres://u:s3cret@h/db", PGO_CONF_FLAG,
				      "--db"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.in_flight", "2",
				      PGO_CONF_FLAG, "--in-flight"),
			 PGO_OK);
	assert_int_equal(pgo_conf_show_changed(conf, f), PGO_OK);
	fclose(f);
	assert_true(strncmp(text, "[database]\n; libpq conninfo", 27) == 0);
	assert_show_line(text, "url = postgres://u:***@h/db", "flag --db");
	snprintf(where, sizeof(where), "file %s:3", path);
	assert_show_line(text, "mode = strict", where);
	snprintf(where, sizeof(where), "file %s:5", path);
	assert_show_line(text, "level = debug", where);
	assert_non_null(strstr(text, "\n\n[relay]\n; "));
	assert_non_null(strstr(text, "\n\n[log]\n; "));
	/* Set, but to the default: not shown; nor are untouched sections. */
	assert_null(strstr(text, "batch ="));
	assert_null(strstr(text, "in_flight ="));
	assert_null(strstr(text, "[sink]"));
	assert_null(strstr(text, "[worker]"));
	assert_null(strstr(text, "s3cret"));
	len = 0;
	for (const char *p = text; (p = strstr(p, " = ")); p++)
		len++;
	assert_int_equal(len, 3);
	free(text);
	pgo_conf_destroy(conf);
}

static void test_reference(void **state)
{
	static const char *const rows[] = {
		"| `relay.batch` | int | `500` | 1..10000 | yes | `--batch` | "
		"`PGOUTBOX_RELAY_BATCH` | Events claimed per transaction |\n",
		"| `database.url` | string | (empty) |  | no | `--db` | "
		"`PGOUTBOX_DATABASE_URL`, `DATABASE_URL` | libpq conninfo or "
		"postgres:// URL, passed through untouched |\n",
		"| `relay.stats_interval` | duration | `1m` | 0..24h | yes | "
		" | `PGOUTBOX_RELAY_STATS_INTERVAL` | ",
		"| `relay.sink` | enum | `stdout` | stdout, exec",
		"| `relay.retry_base` | duration | `1s` | 1ms..1h | yes |  | "
		"`PGOUTBOX_RELAY_RETRY_BASE` | ",
		"| `database.statement_timeout` | duration | `30s` | 0..1h | "
		"no |  | `PGOUTBOX_DATABASE_STATEMENT_TIMEOUT` | ",
		"| `relay.listen` | bool | `on` | on, off | no | `--listen` | ",
		"| `relay.queue` | identifier | `outbox` | [a-z_][a-z0-9_]*, "
		"at most 48 characters | no | `--queue` | ",
	};
	static const char header[] =
		"| Key | Type | Default | Range | Reloadable | Flag | "
		"Environment | Description |\n"
		"|---|---|---|---|---|---|---|---|\n";
	char *text = NULL;
	size_t len = 0, lines = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	pgo_conf_reference(f);
	fclose(f);
	assert_true(strncmp(text, header, strlen(header)) == 0);
	for (size_t i = 0; i < N(all_keys); i++) {
		char cell[80];

		snprintf(cell, sizeof(cell), "| `%s` |", all_keys[i].key);
		if (!strstr(text, cell))
			fail_msg("reference lacks %s", all_keys[i].key);
	}
	for (size_t i = 0; i < N(rows); i++)
		if (!strstr(text, rows[i]))
			fail_msg("reference lacks row\n%s\nin\n%s", rows[i],
				 text);
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, N(all_keys) + 2);
	free(text);
}

/* --- keys the sinks declare --- */

/* A key a sink declares in its registry row is read like any other: from
 * the file, the environment and its flag, ranked, shown, reloaded, and
 * read back through the pgo_conf_get_*() accessors. */
static void test_sink_keys(void **state)
{
	const char *path = write_file("sink.ini", "[sink]\n"
						  "exec_timeout = 20s\n"
						  "exec_command = ./a.sh\n"
						  "redis_maxlen = 100\n");
	char *envp[] = {"PGOUTBOX_SINK_EXEC_COMMAND=cat", NULL};
	pgo_conf_t *conf = pgo_conf_new();
	char want[600];
	char *text;

	(void)state;
	assert_non_null(conf);
#ifndef PGO_HAVE_REDIS
	path = write_file("sink.ini", "[sink]\n"
				      "exec_timeout = 20s\n"
				      "exec_command = ./a.sh\n");
#endif
	assert_string_equal(pgo_conf_key_for_flag("--exec-timeout"),
			    "sink.exec_timeout");
	/* The file, then the environment over it, then a flag over both. */
	assert_int_equal(pgo_conf_load_file(conf, path), PGO_OK);
	assert_int_equal(pgo_conf_get_duration(conf, "sink.exec_timeout"),
			 20000);
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"),
			    "./a.sh");
	assert_int_equal(pgo_conf_load_env(conf, envp), PGO_OK);
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"), "cat");
	assert_int_equal(pgo_conf_set(conf, "sink.exec_timeout", "15s",
				      PGO_CONF_FLAG, "--exec-timeout"),
			 PGO_OK);
	assert_int_equal(pgo_conf_get_duration(conf, "sink.exec_timeout"),
			 15000);
	assert_string_equal(pgo_conf_get(conf, "sink.exec_timeout"), "15s");
	/* Bounds and messages come from the sink's row. */
	assert_int_equal(pgo_conf_set(conf, "sink.exec_timeout", "2h",
				      PGO_CONF_FLAG, "--exec-timeout"),
			 PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf),
			    "--exec-timeout: 2h is out of range (10ms..1h)");
	/* An outranked value is still checked. */
	assert_int_equal(pgo_conf_set(conf, "sink.exec_timeout", "x",
				      PGO_CONF_FILE, "x.ini:1"),
			 PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf),
			    "x.ini:1: sink.exec_timeout = \"x\" is not a "
			    "duration (like 250ms, 30s, 5m, 1h)");
	assert_int_equal(pgo_conf_get_duration(conf, "sink.exec_timeout"),
			 15000);
#ifdef PGO_HAVE_REDIS
	{
		char *env2[] = {"PGOUTBOX_SINK_REDIS_MAXLEN=200", NULL};

		assert_int_equal(pgo_conf_get_int(conf, "sink.redis_maxlen"),
				 100);
		assert_int_equal(pgo_conf_load_env(conf, env2), PGO_OK);
		assert_int_equal(pgo_conf_get_int(conf, "sink.redis_maxlen"),
				 200);
		assert_string_equal(pgo_conf_key_for_flag("--redis-maxlen"),
				    "sink.redis_maxlen");
		assert_int_equal(pgo_conf_set(conf, "sink.redis_maxlen", "300",
					      PGO_CONF_FLAG, "--redis-maxlen"),
				 PGO_OK);
		assert_int_equal(pgo_conf_get_int(conf, "sink.redis_maxlen"),
				 300);
		assert_int_equal(pgo_conf_set(conf, "sink.redis_maxlen", "-1",
					      PGO_CONF_FLAG, "--redis-maxlen"),
				 PGO_ERR_CONFIG);
		assert_string_equal(pgo_conf_errmsg(conf),
				    "--redis-maxlen: -1 is out of range "
				    "(0..1000000000)");
		assert_int_equal(pgo_conf_get_int(conf, "sink.redis_maxlen"),
				 300);
	}
#endif
	text = show(conf);
	assert_show_line(text, "exec_timeout = 15s", "flag --exec-timeout");
	assert_show_line(text, "exec_command = cat",
			 "env PGOUTBOX_SINK_EXEC_COMMAND");
#ifdef PGO_HAVE_REDIS
	assert_show_line(text, "redis_maxlen = 300", "flag --redis-maxlen");
	assert_show_line(text, "redis_wait = 0", "default");
#endif
	free(text);

	/* Reload: the file is read again; the flag keeps winning, and a
	 * sink key that is not reloadable keeps its value. */
	write_file("sink.ini", "[sink]\nexec_command = ./b.sh\n");
	logged[0] = '\0';
	assert_int_equal(pgo_conf_reload(conf, envp, NULL), PGO_OK);
	assert_int_equal(pgo_conf_get_duration(conf, "sink.exec_timeout"),
			 15000);
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"), "cat");
#ifdef PGO_HAVE_REDIS
	assert_int_equal(pgo_conf_get_int(conf, "sink.redis_maxlen"), 300);
#endif
	assert_string_equal(logged, "");
	{
		char *env3[] = {"PGOUTBOX_SINK_EXEC_COMMAND=tee", NULL};

		assert_int_equal(pgo_conf_reload(conf, env3, NULL), PGO_OK);
	}
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_command"), "cat");
	assert_string_equal(logged,
			    "WARN config: sink.exec_command changed to tee "
			    "(env PGOUTBOX_SINK_EXEC_COMMAND) but needs a "
			    "restart; keeping cat\n");

	/* Typos in a sink's keys get a guess like any other. */
	assert_int_equal(pgo_conf_set(conf, "sink.exec_comand", "x",
				      PGO_CONF_FILE, "s.ini:3"),
			 PGO_ERR_CONFIG);
	assert_string_equal(pgo_conf_errmsg(conf),
			    "s.ini:3: unknown key \"sink.exec_comand\" (did "
			    "you mean \"sink.exec_command\"?)");
	{
		char *env4[] = {"PGOUTBOX_SINK_EXEC_TIMOUT=1s", NULL};

		assert_int_equal(pgo_conf_load_env(conf, env4), PGO_ERR_CONFIG);
		assert_string_equal(pgo_conf_errmsg(conf),
				    "unknown environment variable "
				    "PGOUTBOX_SINK_EXEC_TIMOUT (did you mean "
				    "PGOUTBOX_SINK_EXEC_TIMEOUT?)");
	}

	/* Asking for a key that is not there, or as another type, is a bug:
	 * logged, and a zero value. */
	logged[0] = '\0';
	assert_int_equal(pgo_conf_get_int(conf, "sink.exec_command"), 0);
	assert_string_equal(pgo_conf_get_str(conf, "sink.exec_timeout"), "");
	assert_int_equal(pgo_conf_get_duration(conf, "sink.nope"), 0);
	assert_false(pgo_conf_get_bool(conf, NULL));
	snprintf(want, sizeof(want),
		 "ERROR config: pgo_conf_get_int(\"sink.exec_command\"): the "
		 "key is of another type\n"
		 "ERROR config: pgo_conf_get_str(\"sink.exec_timeout\"): the "
		 "key is of another type\n"
		 "ERROR config: pgo_conf_get_duration(\"sink.nope\"): no such "
		 "key\n"
		 "ERROR config: pgo_conf_get_bool(\"(null)\"): no such key\n");
	assert_string_equal(logged, want);
	/* The accessors read conf.c's own keys too. */
	assert_int_equal(pgo_conf_get_int(conf, "relay.batch"), 500);
	assert_true(pgo_conf_get_bool(conf, "relay.listen"));
	assert_string_equal(pgo_conf_get_str(conf, "relay.queue"), "outbox");
	assert_int_equal(pgo_conf_get_int(conf, "log.level"), PGO_LOG_INFO);
	pgo_conf_destroy(conf);
}

/* The registry drives relay.sink: its values, its help (names and
 * summaries), the key list, the "unknown sink" error and `relay --help`. */
static void test_sink_registry(void **state)
{
	char *ref = NULL, *list = NULL, want[4096];
	size_t len = 0, used = 0, nsinks = 0;
	int width = 0;
	FILE *f = open_memstream(&ref, &len);
	pgo_conf_t *conf = pgo_conf_new();
	pgo_error_t err;

	(void)state;
	assert_non_null(f);
	pgo_conf_reference(f);
	fclose(f);
	/* relay.sink's row, range and help from the registry. */
	used = (size_t)snprintf(want, sizeof(want),
				"| `relay.sink` | enum | `stdout` | %s | no | "
				"`--sink` | `PGOUTBOX_RELAY_SINK` | Where "
				"events go.",
				KNOWN_SINKS);
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
		used += (size_t)snprintf(want + used, sizeof(want) - used,
					 "%s %s: %s", nsinks++ ? ";" : "",
					 d->name, d->summary);
	snprintf(want + used, sizeof(want) - used, " |\n");
	if (!strstr(ref, want))
		fail_msg("reference lacks\n%s", want);
	assert_non_null(strstr(ref,
			       "Where events go. stdout: one NDJSON line per "
			       "event on standard output; exec: runs "
			       "sink.exec_command once per batch, NDJSON on "
			       "its stdin"));
	assert_string_equal(pgo_sink_known(), KNOWN_SINKS);

	/* Every key of every row: named sink.<sink>_*, at its default, in
	 * the reference once, with a help line. */
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++) {
		for (const pgo_conf_key_t *k = d->keys; k && k->key; k++) {
			char cell[96];
			const char *at;

			snprintf(cell, sizeof(cell), "| `sink.%s_",
				 d->key_prefix ? d->key_prefix : d->name);
			assert_memory_equal(k->key, cell + 3, strlen(cell + 3));
			assert_string_equal(pgo_conf_get(conf, k->key), k->def);
			assert_non_null(k->help);
			snprintf(cell, sizeof(cell), "| `%s` |", k->key);
			at = strstr(ref, cell);
			assert_non_null(at);
			assert_null(strstr(at + 1, cell));
		}
	}

	/* The error of an unknown name lists the registry. */
	assert_null(pgo_sink_new("stdot", conf, &err));
	assert_string_equal(err.msg,
			    "unknown sink \"stdot\" (known: " KNOWN_SINKS ")");

	/* `relay --help`: a line per sink, its details, its flags. */
	f = open_memstream(&list, &len);
	assert_non_null(f);
	pgo_sink_list(f);
	fclose(f);
	/* Names are padded to the longest one. */
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++)
		if ((int)strlen(d->name) > width)
			width = (int)strlen(d->name);
	snprintf(want, sizeof(want),
		 "  %-*s  one NDJSON line per event on standard output\n",
		 width, "stdout");
	assert_non_null(strstr(list, want));
	snprintf(want, sizeof(want),
		 "\n  %-*s  runs sink.exec_command once per batch, NDJSON on "
		 "its stdin\n",
		 width, "exec");
	assert_non_null(strstr(list, want));
	snprintf(want, sizeof(want),
		 "\n%*s--exec-timeout VALUE   sink.exec_timeout (default: "
		 "30s)\n",
		 width + 4, "");
	assert_non_null(strstr(list, want));
	for (const pgo_sink_def_t *d = pgo_sink_defs; d->name; d++) {
		snprintf(want, sizeof(want), "  %-*s  %s\n", width, d->name,
			 d->summary);
		if (!strstr(list, want))
			fail_msg("sink list lacks \"%s\" in\n%s", want, list);
	}
	free(list);
	free(ref);
	pgo_conf_destroy(conf);
}

static int make_tmpdir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_conf.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	pgo_log_set(capture_log, NULL, PGO_LOG_DEBUG);
	return 0;
}

static int remove_tmpdir(void **state)
{
	static const char *const files[] = {
		"good.ini", "bad.ini",	   "stop.ini",	   "long.ini",
		"env.ini",  "rank.ini",	   "reload.ini",   "sink.ini",
		"cr.ini",   "db.secret",   "redis.secret", "empty.secret",
		"crlf.ini", "changed.ini", "longurl.ini"};
	char path[256];

	(void)state;
	for (size_t i = 0; i < N(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
		unlink(path);
	}
	return rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_typed_values),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_key_for_flag),
		cmocka_unit_test(test_file_good),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_fleet_databases),
		cmocka_unit_test(test_fleet_names),
		cmocka_unit_test(test_file_stops_at_error),
		cmocka_unit_test(test_file_unreadable),
		cmocka_unit_test(test_file_carriage_return),
		cmocka_unit_test(test_file_long_url),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_env_database_url),
		cmocka_unit_test(test_env_errors),
		cmocka_unit_test(test_ranking),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_reload),
		cmocka_unit_test(test_reload_without_file),
		cmocka_unit_test(test_reload_masks),
		cmocka_unit_test(test_show_masks_passwords),
		cmocka_unit_test(test_mask_as_libpq_reads_it),
		cmocka_unit_test(test_mask_secret),
		cmocka_unit_test(test_show_masks_redis),
		cmocka_unit_test(test_secret_files),
		cmocka_unit_test(test_show_layout),
		cmocka_unit_test(test_show_changed),
		cmocka_unit_test(test_reference),
		cmocka_unit_test(test_sink_keys),
		cmocka_unit_test(test_sink_registry),
	};

	return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
