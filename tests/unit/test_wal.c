/*
 * test_wal.c — the envelope of a WAL queue's logical message
 * (pgo_wal_envelope() in relay/wal_envelope.c), table-driven: the JSON text
 * that wal_envelope() writes (jsonb's output: keys by length, a space after
 * ':' and ',') or send_to() writes (no spaces, no created_at: the commit
 * time stands in) goes in, the event's fields come out; what is not an
 * envelope is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "relay/wal.h"
#include "pgoutbox/sink.h"

struct env_case {
	const char *name;
	const char *json;
	bool ok;
	long long id;
	const char *topic, *key, *type, *payload, *headers, *created_at;
};

/* The commit time every case's transaction has: 2026-12-04T19:05:01.25Z. */
#define COMMIT_US 1796411101250000LL
#define COMMIT_AT "2026-12-04T19:05:01.250000Z"

static const struct env_case cases[] = {
	{"as send_to() writes it",
	 "{\"id\":12,\"topic\":\"orders\",\"key\":null,\"type\":\"\","
	 "\"payload\":{\"a\": 1},\"headers\":{}}",
	 true, 12, "orders", NULL, "", "{\"a\": 1}", "{}", COMMIT_AT},
	{"as jsonb writes it",
	 "{\"id\": 7, \"key\": \"k1\", \"type\": \"ty\", \"topic\": \"t\", "
	 "\"headers\": {\"h\": 1}, \"payload\": {\"a\": [1, \"}\"]}, "
	 "\"created_at\": \"2026-12-04T14:15:32.658483Z\"}",
	 true, 7, "t", "k1", "ty", "{\"a\": [1, \"}\"]}", "{\"h\": 1}",
	 "2026-12-04T14:15:32.658483Z"},
	{"null key, scalar payload",
	 "{\"id\": 9, \"key\": null, \"type\": \"\", \"topic\": \"t\", "
	 "\"headers\": {}, \"payload\": 12.5, \"created_at\": \"x\"}",
	 true, 9, "t", NULL, "", "12.5", "{}", "x"},
	{"escapes in strings",
	 "{\"id\":1,\"key\":\"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\",\"topic\":"
	 "\"t\\n\",\"payload\":\"s\\\"\"}",
	 true, 1, "t\n", "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80", "", "\"s\\\"\"", "",
	 COMMIT_AT},
	{"numbers as jsonb wrote them",
	 "{\"id\": 3, \"topic\": \"t\", \"payload\": {\"b\": "
	 "123456789012345678901234567890, \"n\": 1.10, \"e\": 1e400}}",
	 true, 3, "t", NULL, "",
	 "{\"b\": 123456789012345678901234567890, \"n\": 1.10, \"e\": 1e400}",
	 "", COMMIT_AT},
	{"no payload", "{\"id\": 1, \"topic\": \"t\"}", false},
	{"no id", "{\"topic\": \"t\", \"payload\": 1}", false},
	{"not an object", "[1, 2]", false},
	{"cut short", "{\"id\": 1, \"topic\": \"t\", \"payload\": {\"a\"",
	 false},
	{"empty", "", false},
};

static void check_str(const char *want, const char *got, const char *what)
{
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	if (strcmp(want, got) != 0)
		fail_msg("%s: want [%s], got [%s]", what, want, got);
}

static void test_envelopes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct env_case *c = &cases[i];
		pgo_event_t ev;
		char *mem = NULL;
		bool ok = pgo_wal_envelope(c->json, strlen(c->json), COMMIT_US,
					   &ev, &mem);

		print_message("case: %s\n", c->name);
		assert_int_equal(ok, c->ok);
		if (ok) {
			assert_int_equal(ev.id, c->id);
			check_str(c->topic, ev.topic, "topic");
			check_str(c->key, ev.key, "key");
			check_str(c->type, ev.type, "type");
			check_str(c->payload, ev.payload, "payload");
			check_str(c->headers, ev.headers, "headers");
			check_str(c->created_at, ev.created_at, "created_at");
			assert_int_equal(ev.attempts, 0);
		}
		free(mem);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelopes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
