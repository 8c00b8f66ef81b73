/*
 * test_conn.c — the one rule for a first connection's failure (conn.c):
 * which of libpq's and the server's complaints no retry fixes, and
 * libpq's own check of the connection settings, without a server.
 * Table-driven.  And the one rule for logging an outage (pgo_outage_t):
 * a storm of failures and reconnections within its first seconds is two
 * lines.  The defaults every session gets (keepalives, timeouts) and
 * that the URL overrides them; the deadline and the stop of a blocking
 * runner's connect, against a socket that accepts and never answers.
 * A fleet's lookup of its host names, for libpq's hostaddr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/time.h"
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

/* What libpq made of the keywords pgo_conn_params_url() built for url:
 * keyword's value in the connection's options ("" when unset). */
static char option_text[64][2][256];
static int options;

static void conn_options(const char *url)
{
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24];
	PGconn *pg;
	PQconninfoOption *opt;

	pgo_conn_params_url(url, 10000, "pgoutbox test", keys, vals, timeout);
	pg = PQconnectStartParams(keys, vals, 1);
	assert_non_null(pg);
	opt = PQconninfo(pg);
	assert_non_null(opt);
	options = 0;
	for (PQconninfoOption *o = opt; o->keyword && options < 64; o++) {
		snprintf(option_text[options][0], 256, "%s", o->keyword);
		snprintf(option_text[options][1], 256, "%s",
			 o->val ? o->val : "");
		options++;
	}
	PQconninfoFree(opt);
	PQfinish(pg);
}

static const char *option(const char *keyword)
{
	for (int i = 0; i < options; i++)
		if (strcmp(option_text[i][0], keyword) == 0)
			return option_text[i][1];
	fail_msg("no option %s", keyword);
	return NULL;
}

static void test_params(void **state)
{
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];
	char timeout[24];
	int dbname = -1, keepalives = -1, app = -1;

	(void)state;
	unsetenv("PGCONNECT_TIMEOUT");
	/* The defaults come before the URL, application_name after. */
	pgo_conn_params_url("dbname=app", 2500, "a", keys, vals, timeout);
	for (int i = 0; keys[i]; i++) {
		if (strcmp(keys[i], "dbname") == 0)
			dbname = i;
		else if (strcmp(keys[i], "keepalives_idle") == 0)
			keepalives = i;
		else if (strcmp(keys[i], "application_name") == 0)
			app = i;
	}
	assert_true(keepalives >= 0 && keepalives < dbname && dbname < app);
	assert_string_equal(timeout, "3"); /* seconds, rounded up */
	/* What libpq makes of them: the defaults... */
	conn_options("host=/nonexistent/pgo port=1 dbname=app");
	assert_string_equal(option("connect_timeout"), "10");
	assert_string_equal(option("keepalives"), "1");
	assert_string_equal(option("keepalives_idle"), "10");
	assert_string_equal(option("keepalives_interval"), "5");
	assert_string_equal(option("keepalives_count"), "3");
	assert_string_equal(option("tcp_user_timeout"), "25000");
	assert_string_equal(option("application_name"), "pgoutbox test");
	/* ...which the URL's own values override, in either form. */
	conn_options("host=/nonexistent/pgo port=1 dbname=app "
		     "connect_timeout=3 keepalives_idle=60 "
		     "tcp_user_timeout=1000");
	assert_string_equal(option("connect_timeout"), "3");
	assert_string_equal(option("keepalives_idle"), "60");
	assert_string_equal(option("tcp_user_timeout"), "1000");
	assert_string_equal(option("keepalives_interval"), "5");
	conn_options("postgresql:///app?host=/nonexistent/pgo&port=1"
		     "&keepalives=0&connect_timeout=7");
	assert_string_equal(option("keepalives"), "0");
	assert_string_equal(option("connect_timeout"), "7");
	assert_string_equal(option("keepalives_count"), "3");
	/* No URL: libpq's environment, with the same defaults. */
	pgo_conn_params_url(NULL, 10000, "a", keys, vals, timeout);
	for (int i = 0; keys[i]; i++)
		assert_string_not_equal(keys[i], "dbname");
	conn_options(NULL);
	assert_string_equal(option("keepalives_idle"), "10");
	assert_string_equal(option("application_name"), "pgoutbox test");
}

/* A listening socket nobody accepts on: the kernel completes the
 * handshake, the startup packet is never answered (a hung server). */
static int mute_server(char port[8])
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	snprintf(port, 8, "%d", ntohs(a.sin_port));
	return fd;
}

static void test_connect_deadline(void **state)
{
	const char *keys[] = {"host",	 "port",       "dbname",
			      "sslmode", "gssencmode", NULL};
	const char *vals[] = {"127.0.0.1", NULL,      "x",
			      "disable",   "disable", NULL};
	volatile sig_atomic_t stop = 0;
	char port[8];
	int fd = mute_server(port);
	int64_t t0;
	pgo_pq_wait_t how;
	PGconn *pg;

	(void)state;
	vals[1] = port;
	/* The deadline ends the wait, not TCP's timeouts. */
	t0 = pgo_now_ms();
	pg = pgo_pq_connect(keys, vals, 300, &stop, &how);
	assert_int_equal(how, PGO_PQ_TIMEOUT);
	assert_in_range(pgo_now_ms() - t0, 300, 1500);
	PQfinish(pg);
	/* A stop request ends it within its half-second grace. */
	stop = 1;
	t0 = pgo_now_ms();
	pg = pgo_pq_connect(keys, vals, 0, &stop, &how);
	assert_int_equal(how, PGO_PQ_STOPPED);
	assert_in_range(pgo_now_ms() - t0, 400, 1500);
	PQfinish(pg);
	/* A list: the mute host is given up after its 300 ms and the next
	 * one tried (refused here, at once), as libpq's connect_timeout. */
	{
		char url[200], closed[8];
		int fd2 = mute_server(closed);
		const char *k2[] = {"dbname", NULL};
		const char *v2[] = {url, NULL};

		close(fd2); /* nobody listens there now */
		snprintf(url, sizeof(url),
			 "host=127.0.0.1,127.0.0.1 port=%s,%s dbname=x "
			 "sslmode=disable gssencmode=disable",
			 port, closed);
		stop = 0;
		t0 = pgo_now_ms();
		pg = pgo_pq_connect(k2, v2, 300, &stop, &how);
		assert_int_equal(how, PGO_PQ_LOST);
		assert_string_equal(PQport(pg), closed);
		assert_in_range(pgo_now_ms() - t0, 300, 1500);
		PQfinish(pg);
	}
	/* Refused outright: lost, at once. */
	close(fd);
	t0 = pgo_now_ms();
	pg = pgo_pq_connect(keys, vals, 5000, NULL, &how);
	assert_int_equal(how, PGO_PQ_LOST);
	assert_true(pgo_now_ms() - t0 < 1000);
	PQfinish(pg);
}

/* A fleet's lookup of its host names (pgo_conn_resolve()): what needs
 * none, and the lists libpq is given for what does. */
struct resolve_case {
	const char *url;
	int rc;
	const char *host, *hostaddr, *port; /* NULL: no lists at all */
};

static int items(const char *list)
{
	int n = 1;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

static void check_lists(const struct resolve_case *c, pgo_resolved_t *r)
{
	char host[256], addr[256], want[256];
	char *hs, *as, *ws, *h, *a, *w;

	snprintf(host, sizeof(host), "%s", r->host);
	snprintf(addr, sizeof(addr), "%s,", r->hostaddr);
	snprintf(want, sizeof(want), "%s", c->host);
	assert_int_equal(items(r->host), items(r->hostaddr));
	if (c->port)
		assert_int_equal(items(r->port), items(r->host));
	else
		assert_null(r->port);
	hs = host;
	as = addr;
	for (h = strsep(&hs, ","); h; h = strsep(&hs, ",")) {
		a = strsep(&as, ",");
		assert_non_null(a);
		if (strcmp(h, "localhost") == 0) {
			if (strcmp(a, "127.0.0.1") != 0 &&
			    strcmp(a, "::1") != 0)
				fail_msg("%s: localhost at %s", c->url, a);
		} else if (*a) {
			fail_msg("%s: %s at %s", c->url, h, a);
		}
	}
	/* Every host of the URL is there, in its order. */
	ws = want;
	hs = r->host;
	for (w = strsep(&ws, ","); w; w = strsep(&ws, ",")) {
		hs = strstr(hs, w);
		if (!hs)
			fail_msg("%s: %s missing from %s", c->url, w, r->host);
	}
}

static void test_resolve(void **state)
{
	static const struct resolve_case cases[] = {
		{"host=/tmp dbname=x", PGO_OK, NULL, NULL, NULL},
		{"host=127.0.0.1 dbname=x", PGO_OK, NULL, NULL, NULL},
		{"host=::1 dbname=x", PGO_OK, NULL, NULL, NULL},
		{"host=localhost hostaddr=10.0.0.1", PGO_OK, NULL, NULL, NULL},
		{"postgres://localhost:5433/x", PGO_OK, "localhost",
		 "127.0.0.1", NULL},
		{"host=localhost,/tmp port=5433,5434", PGO_OK, "localhost,/tmp",
		 "127.0.0.1,", "5433,5434"},
		{"host=nothing.invalid,localhost", PGO_OK,
		 "nothing.invalid,localhost", ",127.0.0.1", NULL},
		{"host=nothing.invalid", PGO_ERR_CONNECT, NULL, NULL, NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct resolve_case *c = &cases[i];
		pgo_resolved_t *r = NULL;
		char why[256] = "";
		int rc = pgo_conn_resolve(c->url, &r, why, sizeof(why));

		if (rc != c->rc)
			fail_msg("%s: rc %d, not %d (%s)", c->url, rc, c->rc,
				 why);
		if (!c->host) {
			if (r)
				fail_msg("%s: looked up %s", c->url,
					 r->hostaddr);
			if (rc == PGO_ERR_CONNECT)
				assert_non_null(strstr(why, "nothing.invalid"));
			continue;
		}
		assert_non_null(r);
		/* localhost may have ::1 too (then an item more for it): the
		 * lists match item for item, and each name's items are its
		 * addresses; a socket's or a failed name's is empty. */
		check_lists(c, r);
		/* The lists exactly, where localhost is 127.0.0.1 alone. */
		if (items(r->host) == items(c->host) &&
		    !strstr(r->hostaddr, "::1"))
			assert_string_equal(r->hostaddr, c->hostaddr);
		pgo_resolved_free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_nothing_configured),
		cmocka_unit_test(test_settings),
		cmocka_unit_test(test_outage_storm),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_connect_deadline),
		cmocka_unit_test(test_resolve),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
