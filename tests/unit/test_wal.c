/*
 * test_wal.c — the envelope of a WAL queue's logical message
 * (pgo_wal_envelope() in relay/wal_envelope.c), table-driven: the JSON text
 * that wal_envelope() writes (jsonb's output: keys by length, a space after
 * ':' and ',') or send_to() writes (no spaces, no created_at: the commit
 * time stands in) goes in, the event's fields come out; what is not an
 * envelope is refused.  And pgoutput's Relation and Insert messages of an
 * adopted table (relay/wal_adopted.c): a row's columns as JSON, NULLs,
 * escapes, an unchanged marker, columns past the Relation's; every
 * message cut short is refused, not overread (ASan watches).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
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

/* --- pgoutput's Relation and Insert messages --- */

/* A message being built: big-endian integers, strings with their NUL. */
typedef struct msg {
	char b[512];
	size_t n;
} msg_t;

static void put8(msg_t *m, int v)
{
	m->b[m->n++] = (char)v;
}

static void put16(msg_t *m, unsigned v)
{
	put8(m, (int)(v >> 8) & 0xff);
	put8(m, (int)v & 0xff);
}

static void put32(msg_t *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void puts0(msg_t *m, const char *s)
{
	size_t l = strlen(s) + 1;

	memcpy(m->b + m->n, s, l);
	m->n += l;
}

/* 'R' of relation relid with the columns names[0..n). */
static void relation(msg_t *m, uint32_t relid, const char *const *names, int n)
{
	m->n = 0;
	put8(m, 'R');
	put32(m, relid);
	puts0(m, "public");
	puts0(m, "outbox");
	put8(m, 'd');
	put16(m, (unsigned)n);
	for (int i = 0; i < n; i++) {
		put8(m, 1);
		puts0(m, names[i]);
		put32(m, 25);
		put32(m, 0xffffffffu);
	}
}

/* 'I' of relid: each value "n" (NULL), "u" (unchanged) or "t<text>". */
static void insert(msg_t *m, uint32_t relid, const char *const *vals, int n)
{
	m->n = 0;
	put8(m, 'I');
	put32(m, relid);
	put8(m, 'N');
	put16(m, (unsigned)n);
	for (int i = 0; i < n; i++) {
		put8(m, vals[i][0]);
		if (vals[i][0] == 't') {
			size_t l = strlen(vals[i] + 1);

			put32(m, (uint32_t)l);
			memcpy(m->b + m->n, vals[i] + 1, l);
			m->n += l;
		}
	}
}

struct row_case {
	const char *name;
	int nvals;
	const char *vals[5];
	const char *json; /* the row, NULL: refused */
	size_t unchanged; /* the first 'u' column, 3: none */
};

static const char *const cols3[] = {"id", "aggregate\"type", "payload"};

static const struct row_case rows[] = {
	{"text values",
	 3,
	 {"t42", "torder", "t{\"a\": 1}"},
	 "{\"id\":\"42\",\"aggregate\\\"type\":\"order\",\"payload\":"
	 "\"{\\\"a\\\": 1}\"}",
	 3},
	{"NULL and empty",
	 3,
	 {"t1", "n", "t"},
	 "{\"id\":\"1\",\"aggregate\\\"type\":null,\"payload\":\"\"}",
	 3},
	{"control characters",
	 3,
	 {"t1", "ta\nb\tc\\", "t\xc3\xa9"},
	 "{\"id\":\"1\",\"aggregate\\\"type\":\"a\\nb\\tc\\\\\","
	 "\"payload\":\"\xc3\xa9\"}",
	 3},
	{"unchanged marker",
	 3,
	 {"t1", "u", "n"},
	 "{\"id\":\"1\",\"aggregate\\\"type\":null,\"payload\":null}",
	 1},
	{"more columns than the Relation",
	 5,
	 {"t1", "t2", "t3", "t4", "n"},
	 "{\"id\":\"1\",\"aggregate\\\"type\":\"2\",\"payload\":\"3\"}",
	 3},
	{"fewer columns than the Relation", 1, {"t7"}, "{\"id\":\"7\"}", 3},
	{"unknown kind", 2, {"t1", "x"}, NULL, 3},
};

static void test_relation(void **state)
{
	msg_t m;
	uint32_t relid = 0;
	char **cols;
	size_t ncols;

	(void)state;
	relation(&m, 16384, cols3, 3);
	assert_int_equal(pgo_wal_relation(m.b, m.n, &relid, &cols, &ncols), 0);
	assert_int_equal(relid, 16384);
	assert_int_equal(ncols, 3);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(cols[i], cols3[i]);
	pgo_wal_cols_free(cols, ncols);
	/* Cut short anywhere: refused, nothing left allocated. */
	for (size_t len = 0; len < m.n; len++) {
		char *cut = malloc(len ? len : 1);

		memcpy(cut, m.b, len);
		assert_int_equal(
			pgo_wal_relation(cut, len, &relid, &cols, &ncols), -1);
		assert_null(cols);
		free(cut);
	}
}

static void test_insert_rows(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row_case *c = &rows[i];
		msg_t m;
		pgo_buf_t out;
		uint32_t relid = 0;
		size_t unchanged = 0;
		int rc;

		print_message("row: %s\n", c->name);
		insert(&m, 16384, c->vals, c->nvals);
		pgo_buf_init(&out);
		rc = pgo_wal_insert_row(m.b, m.n, (char *const *)cols3, 3,
					&relid, &out, &unchanged);
		if (!c->json) {
			assert_int_equal(rc, -1);
		} else {
			assert_int_equal(rc, 0);
			assert_int_equal(relid, 16384);
			assert_false(out.oom);
			if (strcmp(out.data, c->json) != 0)
				fail_msg("want [%s], got [%s]", c->json,
					 out.data);
			assert_int_equal(unchanged, c->unchanged);
			/* Cut short anywhere: refused, never overread. */
			for (size_t len = 0; len < m.n; len++) {
				char *cut = malloc(len ? len : 1);
				pgo_buf_t part;

				memcpy(cut, m.b, len);
				pgo_buf_init(&part);
				assert_int_equal(
					pgo_wal_insert_row(
						cut, len, (char *const *)cols3,
						3, &relid, &part, &unchanged),
					-1);
				pgo_buf_free(&part);
				free(cut);
			}
		}
		pgo_buf_free(&out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelopes),
		cmocka_unit_test(test_relation),
		cmocka_unit_test(test_insert_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
