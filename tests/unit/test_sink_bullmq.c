/*
 * test_sink_bullmq.c — what the bullmq sink checks before it ever talks to
 * Redis: the SHA-1 that names its script for EVALSHA (FIPS 180-1 vectors,
 * around the padding boundaries), and the export file and keys it refuses
 * at start (untested bullmq majors, foreign files, bad options).  Then
 * the sink hosted on a loop against the fake Redis of fake_redis.h:
 * SCRIPT LOAD before the jobs, NOSCRIPT, a SCRIPT LOAD answered with
 * another SHA-1.  Jobs against real BullMQ Workers:
 * tests/integration/t_bullmq.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_redis.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/redis/redis.h"

static void test_sha1(void **state)
{
	static const struct {
		char ch;  /* the byte repeated */
		size_t n; /* this many times */
		const char *hex;
	} cases[] = {
		{'a', 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{'a', 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},
		{'b', 56, "049adea016c8a8e3b7a9054aeeaa8643453bebd9"},
		{'c', 64, "b29fcb5f41614b4ec81c87e4614ffe8b9ace1d4e"},
		{'d', 119, "ef2ca368c4c8da566b6f4e68ca0bd92533e67e8e"},
	};
	char buf[128], hex[41];

	(void)state;
	pgo_sha1_hex("abc", 3, hex);
	assert_string_equal(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(buf, cases[i].ch, cases[i].n);
		pgo_sha1_hex(buf, cases[i].n, hex);
		assert_string_equal(hex, cases[i].hex);
	}
}

#define V6                                                                     \
	"--! pgoutbox-bullmq-export bullmq=6.7.0 script=addStandardJob "       \
	"keys=9\n"

static void test_refusals(void **state)
{
	static const struct {
		const char *file; /* contents of the script file; NULL: none */
		const char *key;  /* another key to set, or NULL */
		const char *value;
		const char *error; /* substring of the error; NULL: accepted */
	} cases[] = {
		{V6 "return 1\n", NULL, NULL, NULL},
		{"--! pgoutbox-bullmq-export bullmq=5.81.5 "
		 "script=addStandardJob "
		 "keys=9\nreturn 1\n",
		 NULL, NULL, NULL},
		{"--! pgoutbox-bullmq-export bullmq=7.0.0 "
		 "script=addStandardJob "
		 "keys=9\nreturn 1\n",
		 NULL, NULL, "bullmq 7.0.0 is an untested major version"},
		{"--! pgoutbox-bullmq-export bullmq=4.17.0 "
		 "script=addStandardJob "
		 "keys=9\nreturn 1\n",
		 NULL, NULL, "bullmq 4.17.0 is an untested major version"},
		{"--! pgoutbox-bullmq-export script=addStandardJob keys=9\nx\n",
		 NULL, NULL, "no bullmq version"},
		{"--! pgoutbox-bullmq-export bullmq=6.7.0 script=addJob "
		 "keys=6\n"
		 "x\n",
		 NULL, NULL,
		 "script addJob with 6 keys; expected addStandardJob"},
		{"--! pgoutbox-bullmq-export bullmq=6.7.0 "
		 "script=addStandardJob keys=09\nx\n",
		 NULL, NULL, "keys= is not a count"},
		{"return 1\n", NULL, NULL,
		 "not written by tools/bullmq-export.js"},
		{V6, NULL, NULL, "the script is empty"},
		{NULL, NULL, NULL, "No such file"},
		{V6 "return 1\n", "sink.bullmq_remove_on_complete", "true",
		 NULL},
		{V6 "return 1\n", "sink.bullmq_remove_on_complete", "100",
		 NULL},
		{V6 "return 1\n", "sink.bullmq_remove_on_complete", "maybe",
		 "use true, false or a count"},
		{V6 "return 1\n", "sink.bullmq_queue", "jobs:{topic}",
		 "contains ':'"},
		{V6 "return 1\n", "sink.bullmq_queue", "{topik}",
		 "unknown placeholder"},
		{V6 "return 1\n", "sink.bullmq_prefix", "",
		 "bullmq_prefix is empty"},
	};
	char path[] = "/tmp/test_sink_bullmq.XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_conf_t *conf = pgo_conf_new();
		pgo_error_t err;
		pgo_sink_t *sink;
		char missing[80];

		assert_non_null(conf);
		if (cases[i].file) {
			FILE *f = fopen(path, "w");

			assert_non_null(f);
			fputs(cases[i].file, f);
			fclose(f);
			assert_int_equal(pgo_conf_set(conf,
						      "sink.bullmq_script",
						      path, PGO_CONF_FLAG, "t"),
					 PGO_OK);
		} else {
			snprintf(missing, sizeof(missing), "%s.missing", path);
			assert_int_equal(
				pgo_conf_set(conf, "sink.bullmq_script",
					     missing, PGO_CONF_FLAG, "t"),
				PGO_OK);
		}
		if (cases[i].key)
			assert_int_equal(pgo_conf_set(conf, cases[i].key,
						      cases[i].value,
						      PGO_CONF_FLAG, "t"),
					 PGO_OK);
		sink = pgo_sink_new("bullmq", conf, &err);
		if (!cases[i].error) {
			if (!sink)
				fail_msg("case %zu: %s", i, err.msg);
			assert_string_equal(pgo_sink_name(sink), "bullmq");
		} else {
			assert_null(sink);
			if (!strstr(err.msg, cases[i].error))
				fail_msg("case %zu: \"%s\" lacks \"%s\"", i,
					 err.msg, cases[i].error);
		}
		pgo_sink_destroy(sink);
		pgo_conf_destroy(conf);
	}
	unlink(path);
}

/* --- the sink on a fake Redis --- */

static char script_path[] = "/tmp/test_sink_bullmq.XXXXXX";

static int setup(void **state)
{
	int fd = mkstemp(script_path);
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	f = fopen(script_path, "w");
	assert_non_null(f);
	fputs(V6 "return 1\n", f);
	fclose(f);
	fake_start();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fake_stop();
	unlink(script_path);
	strcpy(script_path, "/tmp/test_sink_bullmq.XXXXXX");
	return 0;
}

/* A bullmq sink on the fake, attached to a loop. */
static pgo_sink_t *hosted(void)
{
	const char *kv[] = {"sink.bullmq_script", script_path, NULL};

	return drv_sink("bullmq", kv);
}

/* SCRIPT LOAD goes first on the connection, then one EVALSHA per event
 * with BullMQ's keys; the job ids acknowledge the events. */
static void test_jobs_after_script_load(void **state)
{
	pgo_sink_t *s = hosted();
	job_t a, b, *jobs[] = {&a, &b};
	char sha[41], want[128];

	(void)state;
	pgo_sha1_hex("return 1\n", 9, sha);
	job_init(&a, 1, 3, "orders");
	job_init(&b, 4, 2, "users");
	job_submit(s, &a);
	job_submit(s, &b);
	drive(jobs, 2, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 3);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 2);
	assert_int_equal(F.connections, 1);
	assert_int_equal(F.ncmds, 6);
	assert_string_equal(F.cmds[0], "SCRIPT LOAD return 1\n");
	snprintf(want, sizeof(want),
		 "EVALSHA %s 9 bull:orders:wait bull:orders:paused ", sha);
	assert_memory_equal(F.cmds[1], want, strlen(want));
	assert_non_null(strstr(F.cmds[1], "ob-1"));
	assert_non_null(strstr(F.cmds[5], "bull:users:marker"));
	assert_non_null(strstr(F.cmds[5], "ob-5"));
	drv_destroy(s);
}

/* NOSCRIPT (SCRIPT FLUSH meanwhile): that event goes back untouched
 * (unavailable), the others stand, and the next batch loads the script
 * again on the same connection. */
static void test_noscript_loads_again(void **state)
{
	pgo_sink_t *s = hosted();
	job_t a, b, *ja[] = {&a}, *jb[] = {&b};

	(void)state;
	F.noscript = 1;
	job_init(&a, 1, 3, "t");
	job_submit(s, &a);
	drive(ja, 1, 3000);
	assert_int_equal(a.acks[0], PGO_ACK_UNAVAILABLE);
	assert_non_null(strstr(a.errors[0], "NOSCRIPT"));
	assert_int_equal(count_acks(&a, PGO_ACK_OK), 2);
	job_init(&b, 1, 1, "t");
	job_submit(s, &b);
	drive(jb, 1, 3000);
	assert_int_equal(count_acks(&b, PGO_ACK_OK), 1);
	assert_int_equal(fake_count("SCRIPT LOAD"), 2);
	assert_int_equal(F.connections, 1);
	assert_int_equal(H.downs, 0);
	drv_destroy(s);
}

/* A SCRIPT LOAD answered with another SHA-1: that connection is of no
 * use; the batch goes back untouched and Redis counts as down. */
static void test_wrong_sha_drops_the_connection(void **state)
{
	pgo_sink_t *s = hosted();
	job_t a, *jobs[] = {&a};

	(void)state;
	F.bad_sha = true;
	job_init(&a, 1, 2, "t");
	job_submit(s, &a);
	drive(jobs, 1, 3000);
	assert_int_equal(count_acks(&a, PGO_ACK_UNAVAILABLE), 2);
	assert_non_null(strstr(a.errors[0], "SCRIPT LOAD: unexpected reply"));
	assert_int_equal(H.downs, 1);
	drv_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha1),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test_setup_teardown(test_jobs_after_script_load,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_noscript_loads_again,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_wrong_sha_drops_the_connection, setup, teardown),
	};

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
