/*
 * test_metrics.c — table-driven tests of the metrics registry and its
 * Prometheus text format (src/lib/metrics/registry.c), the label escaper,
 * histogram buckets at and between their bounds, and the created_at
 * reader the commit-to-ack histogram relies on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/metrics.h"
#include "base/buf.h"
#include "base/time.h"

static void test_labels(void **state)
{
	static const struct {
		const char *k1, *v1, *k2, *v2;
		const char *want;
	} cases[] = {
		{"queue", "outbox", NULL, NULL, "queue=\"outbox\""},
		{"queue", "outbox", "sink", "redis",
		 "queue=\"outbox\",sink=\"redis\""},
		{"relay", "a\"b", NULL, NULL, "relay=\"a\\\"b\""},
		{"relay", "a\\b", NULL, NULL, "relay=\"a\\\\b\""},
		{"relay", "line\nbreak", NULL, NULL, "relay=\"line\\nbreak\""},
		{"relay", "", NULL, NULL, "relay=\"\""},
	};
	char buf[128];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_metrics_labels(buf, sizeof(buf), cases[i].k1, cases[i].v1,
				   cases[i].k2, cases[i].v2, NULL);
		assert_string_equal(buf, cases[i].want);
	}
	/* Too long: cut, still NUL-terminated, never overrun. */
	pgo_metrics_labels(buf, 12, "queue", "a_very_long_queue_name", NULL);
	assert_true(strlen(buf) < 12);
}

static void test_format(void **state)
{
	pgo_metrics_t *m = pgo_metrics_new();
	pgo_metric_t *c =
		pgo_metrics_family(m, PGO_METRIC_COUNTER, "x_events_total",
				   "Events\nseen", NULL, 0);
	pgo_metric_t *g = pgo_metrics_family(m, PGO_METRIC_GAUGE, "x_pending",
					     "Pending", NULL, 0);
	pgo_series_t *a = pgo_metric_series(c, "queue=\"a\"");
	pgo_buf_t out;

	(void)state;
	pgo_series_add(a, 3);
	pgo_series_add(pgo_metric_series(c, "queue=\"a\""), 2); /* same */
	pgo_series_add(pgo_metric_series(c, "queue=\"b\""), 1);
	pgo_series_set(pgo_metric_series(g, ""), 0.25);
	assert_true(pgo_series_value(a) == 5);
	pgo_buf_init(&out);
	pgo_metrics_format(m, &out);
	assert_false(out.oom);
	assert_string_equal(out.data, "# HELP x_events_total Events\\nseen\n"
				      "# TYPE x_events_total counter\n"
				      "x_events_total{queue=\"a\"} 5\n"
				      "x_events_total{queue=\"b\"} 1\n"
				      "# HELP x_pending Pending\n"
				      "# TYPE x_pending gauge\n"
				      "x_pending 0.25\n");
	/* clear: the series are gone, the family stays. */
	pgo_metric_clear(c);
	pgo_buf_reset(&out);
	pgo_metrics_format(m, &out);
	assert_null(strstr(out.data, "x_events_total{"));
	assert_non_null(strstr(out.data, "# TYPE x_events_total counter"));
	pgo_buf_free(&out);
	pgo_metrics_destroy(m);
	/* NULL everywhere is a no-op. */
	pgo_series_add(NULL, 1);
	pgo_series_observe(NULL, 1);
	assert_null(pgo_metric_series(NULL, ""));
	pgo_metrics_destroy(NULL);
}

static void test_histogram(void **state)
{
	static const double bounds[] = {0.1, 1, 10};
	static const struct {
		double v;
		int bucket; /* index of the first bound >= v; 3: only +Inf */
	} cases[] = {
		{0, 0},	   {0.1, 0}, {0.10001, 1}, {1, 1},
		{9.99, 2}, {10, 2},  {11, 3},	   {1e9, 3},
	};
	pgo_metrics_t *m = pgo_metrics_new();
	pgo_metric_t *h = pgo_metrics_family(
		m, PGO_METRIC_HISTOGRAM, "x_seconds", "Durations", bounds, 3);
	pgo_buf_t out;
	char want[64];
	int cum[4] = {0};
	double sum = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pgo_series_observe(pgo_metric_series(h, "q=\"a\""), cases[i].v);
		sum += cases[i].v;
		for (int b = cases[i].bucket; b < 4; b++)
			cum[b]++;
	}
	pgo_buf_init(&out);
	pgo_metrics_format(m, &out);
	snprintf(want, sizeof(want),
		 "x_seconds_bucket{q=\"a\",le=\"0.1\"} %d\n", cum[0]);
	assert_non_null(strstr(out.data, want));
	snprintf(want, sizeof(want), "x_seconds_bucket{q=\"a\",le=\"1\"} %d\n",
		 cum[1]);
	assert_non_null(strstr(out.data, want));
	snprintf(want, sizeof(want), "x_seconds_bucket{q=\"a\",le=\"10\"} %d\n",
		 cum[2]);
	assert_non_null(strstr(out.data, want));
	snprintf(want, sizeof(want),
		 "x_seconds_bucket{q=\"a\",le=\"+Inf\"} %d\n", cum[3]);
	assert_non_null(strstr(out.data, want));
	assert_non_null(strstr(out.data, "x_seconds_count{q=\"a\"} 8\n"));
	assert_non_null(strstr(out.data, "# TYPE x_seconds histogram\n"));
	{
		const char *p = strstr(out.data, "x_seconds_sum{q=\"a\"} ");

		assert_non_null(p);
		assert_true(strtod(p + strlen("x_seconds_sum{q=\"a\"} "),
				   NULL) == sum);
	}
	pgo_buf_free(&out);
	pgo_metrics_destroy(m);
}

static void test_rfc3339(void **state)
{
	static const struct {
		const char *t;
		int rc;
		int64_t us;
	} cases[] = {
		{"1970-01-01T00:00:00Z", 0, 0},
		{"1970-01-01T00:00:01.5Z", 0, 1500000},
		{"2026-12-01T13:34:22.123456Z", 0, 1796132062123456},
		{"2026-12-01 13:34:22.123456+00", 0, 1796132062123456},
		{"2024-02-29T23:59:59Z", 0, 1709251199000000},
		{"2026-12-01T13:34:22.1234567Z", 0, 1796132062123456},
		{"2026-12-01T13:34:22+02", -1, 0},
		{"2026-13-01T00:00:00Z", -1, 0},
		{"not a time", -1, 0},
		{"", -1, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t us = -7;
		int rc = pgo_parse_rfc3339_us(cases[i].t, &us);

		assert_int_equal(rc, cases[i].rc);
		if (rc == 0)
			assert_int_equal(us, cases[i].us);
		else
			assert_int_equal(us, -7);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_rfc3339),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
