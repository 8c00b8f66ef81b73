/*
 * test_conn.c — the one rule for a first connection's failure (conn.c):
 * which of libpq's and the server's complaints no retry fixes, and
 * libpq's own check of the connection settings, without a server.
 * Table-driven.  And the one rule for logging an outage (pgo_outage_t):
 * a storm of failures and reconnections within its first seconds is two
 * lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/conn.h"
#include "pgoutbox.h"

/* A refusal's libpq message, and what the rule says of it. */
struct refusal_case {
	const char *url; /* database.url */
	const char *why; /* libpq's message */
	bool refused;
	const char *says; /* in the refusal's text (refused only) */
};

#define SOCK "connection to server on socket \"/run/pg/.s.PGSQL.5432\" failed: "

static const struct refusal_case refusal_cases[] = {
	{"dbname=app", SOCK "FATAL:  database \"app\" does not exist", true,
	 "or create it"},
	{"dbname=app", SOCK "FATAL:  role \"bob\" does not exist", true,
	 "or create it"},
	{"dbname=app",
	 "connection to server at \"db\" (10.0.0.1), port 5432 failed: "
	 "FATAL:  password authentication failed for user \"app\"",
	 true, "the user or password"},
	{"dbname=app",
	 SOCK "FATAL:  no pg_hba.conf entry for host \"[local]\", user "
	      "\"app\", database \"app\", no encryption",
	 true, "pg_hba.conf"},
	{"dbname=app", SOCK "FATAL:  role \"app\" is not permitted to log in",
	 true, "LOGIN"},
	{"dbname=app", SOCK "fe_sendauth: no password supplied", true,
	 "PGPASSWORD"},
	{"dbname=app sslmode=bogus", "invalid sslmode value: \"bogus\"", true,
	 "invalid connection settings: invalid sslmode value"},
	{"dbname=app bogus=1", "invalid connection option \"bogus\"", true,
	 "invalid connection settings"},
	/* Outages: waiting helps. */
	{"host=db dbname=app",
	 "connection to server at \"db\" (10.0.0.1), port 5432 failed: "
	 "Connection refused",
	 false, NULL},
	{"dbname=app", SOCK "FATAL:  the database system is starting up", false,
	 NULL},
	{"dbname=app", SOCK "FATAL:  sorry, too many clients already", false,
	 NULL},
	{"postgresql://u@db:5432/app?sslmode=require",
	 "could not translate host name \"db\" to address", false, NULL},
};

static void test_refusals(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(refusal_cases) / sizeof(refusal_cases[0]);
	     i++) {
		const struct refusal_case *c = &refusal_cases[i];
		pgo_error_t err;
		int rc = pgo_conn_url_refusal(c->url, c->why, true, &err);

		if (rc != (c->refused ? PGO_ERR_CONFIG : PGO_OK))
			fail_msg("case %zu (%s): rc %d", i, c->why, rc);
		if (c->refused && !strstr(err.msg, c->says))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg,
				 c->says);
		/* One line, so that it can lead a refused start. */
		if (c->refused && strchr(err.msg, '\n'))
			fail_msg("case %zu: two lines: %s", i, err.msg);
	}
}

/* No URL and no PG* variable: nothing is configured. */
static void test_nothing_configured(void **state)
{
	static const char *const vars[] = {"PGHOST",	 "PGHOSTADDR", "PGPORT",
					   "PGDATABASE", "PGSERVICE",  NULL};
	pgo_error_t err;

	(void)state;
	for (int i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	assert_int_equal(
		pgo_conn_url_refusal("", SOCK "No such file", true, &err),
		PGO_ERR_CONFIG);
	assert_non_null(strstr(err.msg, "no database is configured: set "
					"database.url"));
	assert_int_equal(strstr(err.msg, "no database") - err.msg, 0);
	setenv("PGHOST", "/run/pg", 1);
	assert_int_equal(
		pgo_conn_url_refusal("", SOCK "No such file", true, &err),
		PGO_OK);
	unsetenv("PGHOST");
}

/* libpq's checks of the settings alone, with no server anywhere. */
struct settings_case {
	const char *url;
	bool valid;
	const char *says; /* in the complaint */
};

static const struct settings_case settings_cases[] = {
	{"", true, NULL},
	{"app", true, NULL}, /* a database name, as expand_dbname reads it */
	{"host=/run/pg port=5433 dbname=app sslmode=verify-full", true, NULL},
	{"postgresql://u:p@db.example:6432/app?sslmode=require", true, NULL},
	{"host=a,b port=1,2 dbname=app", true, NULL},
	{"hostaddr=10.255.255.1 dbname=app", true, NULL},
	{"dbname=app sslmode=bogus", false, "invalid sslmode value: \"bogus\""},
	{"dbname=app gssencmode=nope", false, "gssencmode"},
	{"dbname=app target_session_attrs=x", false, "target_session_attrs"},
	{"dbname=app bogus=1", false, "invalid connection option \"bogus\""},
	{"dbname='app", false, "unterminated quoted string"},
	{"postgresql://db/app?nosuch=1", false, "nosuch"},
	{"port=abc", false, "invalid integer value \"abc\""},
	{"service=pgoutbox_test_nosuch", false, "pgoutbox_test_nosuch"},
};

static void test_settings(void **state)
{
	(void)state;
	unsetenv("PGSSLMODE");
	unsetenv("PGSERVICEFILE");
	for (size_t i = 0;
	     i < sizeof(settings_cases) / sizeof(settings_cases[0]); i++) {
		const struct settings_case *c = &settings_cases[i];
		pgo_error_t err;
		int rc = pgo_conn_check_url(c->url, &err);

		if (rc != (c->valid ? PGO_OK : PGO_ERR_CONFIG))
			fail_msg("case %zu (%s): rc %d: %s", i, c->url, rc,
				 rc ? err.msg : "");
		if (!c->valid && !strstr(err.msg, c->says))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg,
				 c->says);
	}
	/* A PG* variable libpq refuses counts too. */
	setenv("PGSSLMODE", "bogus", 1);
	assert_int_equal(pgo_conn_check_url("dbname=app", NULL),
			 PGO_ERR_CONFIG);
	unsetenv("PGSSLMODE");
	assert_int_equal(pgo_conn_check_url(NULL, NULL), PGO_OK);
}

/* The lines logged at info and above, and the last of them. */
static int logged;
static char last_line[512];

static void count_line(void *ctx, pgo_log_level_t level, const char *subject,
		       const char *msg)
{
	(void)ctx;
	(void)subject;
	if (level > PGO_LOG_INFO)
		return;
	logged++;
	snprintf(last_line, sizeof(last_line), "%s", msg);
}

static void test_outage_storm(void **state)
{
	pgo_outage_t o = {0}, o2 = {0};

	(void)state;
	pgo_log_set(count_line, NULL, PGO_LOG_DEBUG);
	logged = 0;
	assert_false(pgo_outage_on(&o));
	/* A first session: nothing to say. */
	pgo_outage_up(&o, "t", NULL);
	assert_int_equal(logged, 0);
	/* 500 sessions terminated and reconnected at once: the first loss
	 * and the first reconnection are said, the rest is for the summary
	 * a few seconds later. */
	for (int i = 0; i < 500; i++) {
		pgo_outage_failed(&o, "t", true, "terminating connection");
		if (i == 0) {
			assert_int_equal(logged, 1);
			assert_non_null(strstr(last_line, "connection lost: "
							  "terminating"));
		}
		pgo_outage_up(&o, "t", "connected to db");
	}
	assert_int_equal(logged, 2);
	assert_string_equal(last_line, "connected to db");
	assert_true(pgo_outage_on(&o));
	assert_int_equal(o.fails, 499);
	assert_int_equal(o.ups, 500);
	/* A session that never came up "cannot connect". */
	pgo_outage_failed(&o2, "t", false, "refused");
	assert_int_equal(logged, 3);
	assert_non_null(strstr(last_line, "cannot connect: refused"));
	/* The outages of conn.c, one per subject. */
	assert_ptr_equal(pgo_outage_of("relay a"), pgo_outage_of("relay a"));
	assert_ptr_not_equal(pgo_outage_of("relay a"),
			     pgo_outage_of("relay b"));
	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_nothing_configured),
		cmocka_unit_test(test_settings),
		cmocka_unit_test(test_outage_storm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
