/*
 * test_abi.c — the library's version agrees with its headers and with
 * meson.build (PGO_PROJECT_VERSION comes from project(version : ...)).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pgo_int.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
