/*
 * test_abi.c — the library's version agrees with its headers and with
 * meson.build (PGO_PROJECT_VERSION comes from project(version : ...)),
 * and the structs callers fill are refused, with a message naming them,
 * when their size field is one no release had.  Nothing here reaches a
 * database: each size is checked before anything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pgoutbox.h"

static void test_version(void **state)
{
	int major = -1, minor = -1, patch = -1;

	(void)state;
	assert_string_equal(PGO_VERSION, PGO_PROJECT_VERSION);
	assert_string_equal(pgo_version_str(), PGO_VERSION);
	assert_int_equal(pgo_version(), PGO_VERSION_NUM);
	assert_int_equal(
		sscanf(PGO_VERSION, "%d.%d.%d", &major, &minor, &patch), 3);
	assert_int_equal(major, PGO_VERSION_MAJOR);
	assert_int_equal(minor, PGO_VERSION_MINOR);
	assert_int_equal(patch, PGO_VERSION_PATCH);
	assert_int_equal(PGO_VERSION_NUM, major * 10000 + minor * 100 + patch);
}

#define SIZE_ZERO ((size_t)-1)

/* Sizes no release of these structs had, with what the message says. */
static const struct {
	size_t delta; /* added to sizeof; SIZE_ZERO: size 0 */
	const char *msg;
} bad_sizes[] = {
	{SIZE_ZERO, "size is 0: "},
	{8, "built against a newer pgoutbox.h"},
	{(size_t)-2, "not the size of any release"},
};

static size_t bad_size(size_t good, size_t i)
{
	return bad_sizes[i].delta == SIZE_ZERO ? 0 : good + bad_sizes[i].delta;
}

static void want_msg(const char *got, const char *type, size_t i)
{
	if (!strstr(got, type) || !strstr(got, bad_sizes[i].msg))
		fail_msg("case %zu: \"%s\" does not name %s and say \"%s\"", i,
			 got, type, bad_sizes[i].msg);
}

static void test_opts_sizes(void **state)
{
	pgo_conf_t *conf = pgo_conf_new();
	pgo_consumer_opts_t co;
	pgo_worker_opts_t wo;
	pgo_scheduler_opts_t so;
	pgo_error_t err;

	(void)state;
	assert_non_null(conf);
	assert_int_equal(pgo_consumer_opts_init(&co, sizeof(co)), PGO_OK);
	assert_int_equal(co.size, sizeof(co));
	assert_int_equal(co.count, 100);
	assert_int_equal(pgo_worker_opts_init(&wo, sizeof(wo)), PGO_OK);
	assert_int_equal(wo.size, sizeof(wo));
	assert_int_equal(wo.batch, 100);
	assert_int_equal(pgo_scheduler_opts_init(&so, sizeof(so)), PGO_OK);
	assert_int_equal(so.size, sizeof(so));
	assert_int_equal(so.max_sleep_ms, 1000);
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		pgo_consumer_opts_t c2;
		pgo_worker_opts_t w2;
		pgo_scheduler_opts_t s2;

		/* init refuses it and leaves the size for _new to refuse */
		if (bad_size(sizeof(c2), i) != 0) {
			assert_int_equal(pgo_consumer_opts_init(
						 &c2, bad_size(sizeof(c2), i)),
					 PGO_ERR_INVALID);
			assert_int_equal(c2.size, bad_size(sizeof(c2), i));
		}
		co.size = bad_size(sizeof(co), i);
		assert_null(pgo_consumer_new(&co, &err));
		assert_int_equal(err.code, PGO_ERR_INVALID);
		want_msg(err.msg, "pgo_consumer_opts_t", i);

		if (bad_size(sizeof(w2), i) != 0)
			assert_int_equal(pgo_worker_opts_init(
						 &w2, bad_size(sizeof(w2), i)),
					 PGO_ERR_INVALID);
		wo.size = bad_size(sizeof(wo), i);
		wo.queue = "jobs";
		wo.exec_command = "true";
		assert_null(pgo_worker_new(conf, &wo, &err));
		assert_int_equal(err.code, PGO_ERR_INVALID);
		want_msg(err.msg, "pgo_worker_opts_t", i);

		if (bad_size(sizeof(s2), i) != 0)
			assert_int_equal(pgo_scheduler_opts_init(
						 &s2, bad_size(sizeof(s2), i)),
					 PGO_ERR_INVALID);
		so.size = bad_size(sizeof(so), i);
		assert_null(pgo_scheduler_new(conf, &so, &err));
		assert_int_equal(err.code, PGO_ERR_INVALID);
		want_msg(err.msg, "pgo_scheduler_opts_t", i);
	}
	pgo_conf_destroy(conf);
}

static void test_caller_struct_sizes(void **state)
{
	/* A connection that failed at once: never used, sizes come first. */
	PGconn *conn = PQconnectStart("host=/nonexistent-pgoutbox-test");
	pgo_producer_t *p;
	pgo_enqueuer_t *q;
	pgo_error_t err;

	(void)state;
	assert_non_null(conn);
	p = pgo_producer_new(conn, NULL, &err);
	q = pgo_enqueuer_new(conn, "jobs", &err);
	assert_non_null(p);
	assert_non_null(q);
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		pgo_msg_t m = {.size = bad_size(sizeof(pgo_msg_t), i),
			       .topic = "t",
			       .type = "x",
			       .payload = "{}"};
		pgo_msg_t two[2] = {
			{.size = sizeof(pgo_msg_t),
			 .topic = "t",
			 .type = "x",
			 .payload = "{}"},
			m,
		};
		pgo_job_opts_t jo = {.size = bad_size(sizeof(jo), i)};
		pgo_cron_schedule_t cs = {.size = bad_size(sizeof(cs), i),
					  .name = "n",
					  .expr = "* * * * *",
					  .queue = "jobs"};

		assert_int_equal(pgo_send(p, &m, NULL), PGO_ERR_INVALID);
		want_msg(pgo_producer_errmsg(p), "pgo_msg_t", i);
		assert_int_equal(pgo_send_bulk(p, &m, 1), PGO_ERR_INVALID);
		want_msg(pgo_producer_errmsg(p), "pgo_msg_t", i);
		/* every element carries the array's size */
		assert_int_equal(pgo_send_bulk(p, two, 2), PGO_ERR_INVALID);
		if (!strstr(pgo_producer_errmsg(p), "event 1: pgo_msg_t.size"))
			fail_msg("bulk: %s", pgo_producer_errmsg(p));
		assert_int_equal(pgo_enqueue(q, "{}", &jo, NULL),
				 PGO_ERR_INVALID);
		want_msg(pgo_enqueuer_errmsg(q), "pgo_job_opts_t", i);
		assert_int_equal(pgo_cron_add(conn, &cs, &err),
				 PGO_ERR_INVALID);
		want_msg(err.msg, "pgo_cron_schedule_t", i);
	}
	/* pgo_job_opts_t before group_key (0.1.0, 0.2.0) is a size the
	 * library takes: past the check, the dead connection fails it. */
	{
		pgo_job_opts_t jo = {
			.size = offsetof(pgo_job_opts_t, group_key)};

		assert_int_equal(pgo_enqueue(q, "{}", &jo, NULL), PGO_ERR_DB);
		if (strstr(pgo_enqueuer_errmsg(q), "pgo_job_opts_t"))
			fail_msg("old size refused: %s",
				 pgo_enqueuer_errmsg(q));
	}
	pgo_enqueuer_destroy(q);
	pgo_producer_destroy(p);
	PQfinish(conn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_opts_sizes),
		cmocka_unit_test(test_caller_struct_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
