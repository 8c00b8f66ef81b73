/*
 * test_claim.c — the claim SQL builder (claim.c), table-driven: for each
 * mode and option the statements' key properties (SKIP LOCKED only in
 * concurrent mode, the lease filter of the ordered modes, where the
 * floor, the batch limit and the byte cap go, the queue's name quoted
 * everywhere it appears) and the parameters of a claim round (their
 * number and order match the statement's, the sweep's pages).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "relay/relay_int.h"
#include "base/buf.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "queue/queue.h"

static pgo_conf_t *conf_with(const char *queue, const char *sync_commit,
			     const char *claim_floor)
{
	pgo_conf_t *conf = pgo_conf_new();

	assert_non_null(conf);
	assert_int_equal(pgo_conf_set(conf, "relay.queue", queue, PGO_CONF_FLAG,
				      "--queue"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.synchronous_commit",
				      sync_commit, PGO_CONF_FLAG, "test"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.claim_floor", claim_floor,
				      PGO_CONF_FLAG, "test"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.batch", "250", PGO_CONF_FLAG,
				      "--batch"),
			 PGO_OK);
	assert_int_equal(pgo_conf_set(conf, "relay.batch_bytes", "65536",
				      PGO_CONF_FLAG, "test"),
			 PGO_OK);
	return conf;
}

/* How often needle occurs in hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The highest $N of a statement: its number of parameters. */
static int max_param(const char *sql)
{
	int max = 0;

	for (const char *p = sql; (p = strchr(p, '$')); p++) {
		int n = atoi(p + 1);

		if (n > max)
			max = n;
	}
	return max;
}

/* Each case: what the claim statement of a mode must and must not say.
 * The texts are the properties that carry the mode's guarantees. */
struct sql_case {
	const char *name;
	int mode;
	const char *queue;
	int nparams;	       /* the claim's parameters */
	const char *must[8];   /* substrings of the claim, NULL-ended */
	const char *mustnt[4]; /* not in it */
	const char *returning; /* the shard column of RETURNING */
	bool fair;	       /* set_queue(fair => true) */
};

#define LONGEST "a_queue_named_with_the_longest_name_of_48_chars0"

static const struct sql_case sql_cases[] = {
	{"concurrent: skip locked, floor $2, byte cap $3, sweep $4 $5",
	 PGO_MODE_CONCURRENT,
	 "orders",
	 5,
	 {"FOR UPDATE SKIP LOCKED",
	  "WHERE id >= $2 AND run_at <= ", "ORDER BY id LIMIT $1",
	  "WHERE w.before < $3"
	  " AND NOT EXISTS (SELECT FROM pgoutbox.queue_controls p WHERE "
	  "p.queue = 'orders' AND p.paused))",
	  "ctid >= $4::tid AND ctid < $5::tid", "id < $2",
	  "DELETE FROM pgoutbox.\"orders\" WHERE id = ANY(", NULL},
	 {"shard_leases", "shard_of(", "RECURSIVE", NULL},
	 "attempts, NULL::integer, "},
	{"ordered: the leases' epochs by shard in $2, floor $3, cap $4",
	 PGO_MODE_ORDERED,
	 "orders",
	 6,
	 {"l.queue = 'orders' AND l.epoch = ($2::bigint[])[l.shard + 1]",
	  "c.id >= $3 AND ", "c.id < $3 AND ", "LIMIT $1",
	  "WHERE w.before < $4"
	  " AND NOT EXISTS (SELECT FROM pgoutbox.queue_controls p WHERE "
	  "p.queue = 'orders' AND p.paused))",
	  "c.ctid >= $5::tid AND c.ctid < $6::tid",
	  "b.key = c.key AND b.id < c.id", NULL},
	 {"SKIP LOCKED", "l.shard = -1", NULL},
	 "attempts, pgoutbox.shard_of(key, id, "
	 "greatest(cardinality($2::bigint[]), 1)), "},
	{"strict: the leader's epoch in $2, any retry holds all back",
	 PGO_MODE_STRICT,
	 "orders",
	 6,
	 {"l.queue = 'orders' AND l.shard = -1 AND l.epoch = $2::bigint",
	  "c.id >= $3 AND ", "LIMIT $1",
	  "WHERE w.before < $4"
	  " AND NOT EXISTS (SELECT FROM pgoutbox.queue_controls p WHERE "
	  "p.queue = 'orders' AND p.paused))",
	  "c.ctid >= $5::tid AND c.ctid < $6::tid",
	  "b.attempts > 0 AND b.id < c.id AND", NULL},
	 {"SKIP LOCKED", "shard_of(", "b.key = c.key", NULL},
	 "attempts, NULL::integer, "},
	/* A fair queue: keys round-robin from a skip scan of q_fair, each
	 * key's share its oldest rows, the oldest rows one more group; the
	 * batch in turn order, cut at the room and the byte cap. */
	{"concurrent, fair: keys round-robin, same parameters",
	 PGO_MODE_CONCURRENT,
	 "orders",
	 5,
	 {"WITH RECURSIVE k AS (",
	  "WHERE x.key > k.key AND x.id >= $2 ORDER BY x.key LIMIT 1",
	  "(c.key, c.id) >= (k.key, $2) AND c.key <= k.key",
	  "row_number() OVER (PARTITION BY f.key ORDER BY f.id) AS turn",
	  "sum(u.sz) OVER (ORDER BY u.turn, u.id)",
	  "WHERE w.before < $3"
	  " AND NOT EXISTS (SELECT FROM pgoutbox.queue_controls p WHERE "
	  "p.queue = 'orders' AND p.paused))",
	  NULL},
	 {"shard_leases", "shard_of(", NULL},
	 "attempts, NULL::integer, ",
	 true},
	{"concurrent, fair, longest name",
	 PGO_MODE_CONCURRENT,
	 LONGEST,
	 5,
	 {"pgoutbox.\"" LONGEST "\"", "p.queue = '" LONGEST "' AND p.paused)",
	  NULL},
	 {"pgoutbox." LONGEST, NULL},
	 "NULL::integer",
	 true},
	/* The longest name relay.queue takes (48): every statement still
	 * fits its buffer, whole. */
	{"concurrent, longest name: quoted, not cut",
	 PGO_MODE_CONCURRENT,
	 LONGEST,
	 5,
	 {"pgoutbox.\"" LONGEST "\"", "p.queue = '" LONGEST "' AND p.paused)",
	  NULL},
	 {"pgoutbox." LONGEST, NULL},
	 "NULL::integer"},
	{"ordered, longest name: the lease filter names it",
	 PGO_MODE_ORDERED,
	 LONGEST,
	 6,
	 {"l.queue = '" LONGEST "'", "FROM pgoutbox.\"" LONGEST "\" h",
	  "p.queue = '" LONGEST "' AND p.paused)", NULL},
	 {"pgoutbox." LONGEST, NULL},
	 "shard_of(key, id, "},
	{"strict, longest name",
	 PGO_MODE_STRICT,
	 LONGEST,
	 6,
	 {"l.queue = '" LONGEST "' AND l.shard = -1",
	  "p.queue = '" LONGEST "' AND p.paused)", NULL},
	 {"pgoutbox." LONGEST, NULL},
	 "attempts, NULL::integer, "},
};

static void test_claim_sql(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(sql_cases) / sizeof(sql_cases[0]); c++) {
		const struct sql_case *k = &sql_cases[c];
		pgo_conf_t *conf = conf_with(k->queue, "off", "on");
		pgo_relay_sql_t *sql = calloc(1, sizeof(*sql));
		char quoted[96];

		assert_non_null(sql);
		pgo_claim_sql_build(sql, k->mode, k->fair,
				    pgo_conf_values(conf));
		for (int i = 0; k->must[i]; i++)
			if (!strstr(sql->claim, k->must[i]))
				fail_msg("%s: no \"%s\" in %s", k->name,
					 k->must[i], sql->claim);
		for (int i = 0; k->mustnt[i]; i++)
			if (strstr(sql->claim, k->mustnt[i]))
				fail_msg("%s: \"%s\" in %s", k->name,
					 k->mustnt[i], sql->claim);
		if (!strstr(sql->claim, k->returning))
			fail_msg("%s: RETURNING without \"%s\": %s", k->name,
				 k->returning, sql->claim);
		if (max_param(sql->claim) != k->nparams)
			fail_msg("%s: %d parameters, want %d", k->name,
				 max_param(sql->claim), k->nparams);
		/* Every table the statements name is the queue, quoted. */
		snprintf(quoted, sizeof(quoted), "pgoutbox.\"%s\"", k->queue);
		if (count(sql->claim, "pgoutbox.\"") !=
			    count(sql->claim, quoted) ||
		    count(sql->claim, quoted) < 3)
			fail_msg("%s: a table other than %s: %s", k->name,
				 quoted, sql->claim);
		if (!strstr(sql->retry, quoted) ||
		    count(sql->retry, "pgoutbox.\"") != 1)
			fail_msg("%s: retry: %s", k->name, sql->retry);
		snprintf(quoted, sizeof(quoted), "SELECT id, '%s', topic",
			 k->queue);
		if (!strstr(sql->dead, quoted) ||
		    !strstr(sql->dead, "ON CONFLICT (queue, id)"))
			fail_msg("%s: dead: %s", k->name, sql->dead);
		snprintf(quoted, sizeof(quoted), "LISTEN \"%s%s\"",
			 PGO_CHANNEL_PREFIX, k->queue);
		assert_string_equal(sql->listen, quoted);
		assert_string_equal(sql->done, "");
		free(sql);
		pgo_conf_destroy(conf);
	}
}

/* fair changes the concurrent claim only: the ordered and strict ones
 * serialise per key (or queue) already, and come out the same. */
static void test_claim_fair_modes(void **state)
{
	static const int modes[] = {PGO_MODE_ORDERED, PGO_MODE_STRICT};

	(void)state;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		pgo_conf_t *conf = conf_with("orders", "off", "on");
		pgo_relay_sql_t *a = calloc(1, sizeof(*a));
		pgo_relay_sql_t *b = calloc(1, sizeof(*b));

		assert_non_null(a);
		assert_non_null(b);
		pgo_claim_sql_build(a, modes[m], false, pgo_conf_values(conf));
		pgo_claim_sql_build(b, modes[m], true, pgo_conf_values(conf));
		assert_string_equal(a->claim, b->claim);
		free(a);
		free(b);
		pgo_conf_destroy(conf);
	}
}

/* The session settings: for the session (false) or the transaction
 * (true, pooled), synchronous_commit as configured. */
static void test_claim_settings(void **state)
{
	static const struct {
		const char *sync;
		const char *want;
	} cases[] = {
		{"off", "set_config('synchronous_commit', 'off', %s)"},
		{"on", "set_config('synchronous_commit', 'on', %s)"},
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		pgo_conf_t *conf = conf_with("outbox", cases[c].sync, "on");
		pgo_relay_sql_t *sql = calloc(1, sizeof(*sql));
		char want[128];

		assert_non_null(sql);
		pgo_claim_sql_build(sql, PGO_MODE_ORDERED, false,
				    pgo_conf_values(conf));
		snprintf(want, sizeof(want), cases[c].want, "false");
		if (!strstr(sql->session, want))
			fail_msg("session: no %s in %s", want, sql->session);
		snprintf(want, sizeof(want), cases[c].want, "true");
		if (!strstr(sql->local, want))
			fail_msg("local: no %s in %s", want, sql->local);
		if (count(sql->session, ", true)") ||
		    count(sql->local, ", false)"))
			fail_msg("session and local settings mixed up");
		if (!strstr(sql->session, "'enable_seqscan', 'off'") ||
		    !strstr(sql->session, "'jit', 'off'") ||
		    !strstr(sql->session, "'force_generic_plan'"))
			fail_msg("the plan settings are gone: %s",
				 sql->session);
		free(sql);
		pgo_conf_destroy(conf);
	}
}

/* A claim round's parameters, by mode: the limit first, then the lease
 * (ordered: the epoch map, strict: the leader's epoch), the floor, the
 * byte cap, the sweep's pages. */
struct prep_case {
	const char *name;
	int mode;
	const char *claim_floor;
	int64_t floor;
	int nparams;
	int floor_at, bytes_at, lo_at; /* indexes in params (-1: none) */
	const char *lease;	       /* params[1] in the ordered modes */
};

static const struct prep_case prep_cases[] = {
	{"concurrent", PGO_MODE_CONCURRENT, "on", 1234, 5, 1, 2, 3, NULL},
	{"ordered", PGO_MODE_ORDERED, "on", 1234, 6, 2, 3, 4, "{NULL,7}"},
	{"strict", PGO_MODE_STRICT, "on", 1234, 6, 2, 3, 4, "9"},
	{"floor off: 0", PGO_MODE_CONCURRENT, "off", 0, 5, 1, 2, 3, NULL},
};

static void test_claim_prepare(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(prep_cases) / sizeof(prep_cases[0]);
	     c++) {
		const struct prep_case *k = &prep_cases[c];
		pgo_conf_t *conf = conf_with("outbox", "off", k->claim_floor);
		pgo_relay_t *r = calloc(1, sizeof(*r));
		pgo_claim_req_t q;
		slot_t *s;
		char want[32];

		assert_non_null(r);
		r->conf = conf;
		r->mode = k->mode;
		r->floor.id = k->floor;
		s = &r->slots[0];
		s->leases.map = "{NULL,7}";
		snprintf(s->leases.leader_epoch, sizeof(s->leases.leader_epoch),
			 "9");
		pgo_claim_prepare(r, s, 1000, &q);
		if (q.nparams != k->nparams)
			fail_msg("%s: %d parameters", k->name, q.nparams);
		assert_string_equal(q.params[0], "250");
		snprintf(want, sizeof(want), "%lld", (long long)k->floor);
		assert_string_equal(q.params[k->floor_at], want);
		assert_string_equal(q.params[k->bytes_at], "65536");
		assert_string_equal(q.params[k->lo_at], "(0,0)");
		assert_string_equal(q.params[k->lo_at + 1], "(0,0)");
		if (k->lease)
			assert_string_equal(q.params[1], k->lease);
		assert_int_equal(s->batch_limit, 250);
		assert_int_equal(s->batch_bytes, 65536);
		/* No sweep on the first claim: none before the table's
		 * rows put below the floor by hand can exist. */
		assert_null(q.pages[0]);
		assert_int_equal(pgo_claim_index(s), 1);
		assert_int_equal(pgo_claim_pages_index(s), -1);
		free(r);
		pgo_conf_destroy(conf);
	}
}

/* The sweep: none while the floor is 0; with a floor, the first one a
 * poll period after the first claim, reading SWEEP_PAGES_START pages
 * from page 0, its table-size statement first in the round. */
static void test_claim_sweep(void **state)
{
	pgo_conf_t *conf = conf_with("outbox", "off", "on");
	pgo_relay_t *r = calloc(1, sizeof(*r));
	int64_t period;
	pgo_claim_req_t q;
	slot_t *s = &r->slots[0];

	(void)state;
	assert_non_null(r);
	r->conf = conf;
	r->mode = PGO_MODE_CONCURRENT;
	period = pgo_claim_poll_ms(r);
	assert_true(period > 0);
	pgo_claim_prepare(r, s, 1000, &q);
	assert_null(q.pages[0]); /* floor 0: nothing below it */
	r->floor.id = 5000;
	pgo_claim_prepare(r, s, 1000, &q);
	assert_null(q.pages[0]); /* the first sweep waits a period */
	assert_int_equal(s->sweep.at, 1000 + period);
	pgo_claim_prepare(r, s, 1000 + period - 1, &q);
	assert_null(q.pages[0]);
	pgo_claim_prepare(r, s, 1000 + period, &q);
	assert_non_null(q.pages[0]);
	assert_string_equal(q.pages[0], "outbox");
	assert_string_equal(q.params[3], "(0,0)");
	assert_string_equal(q.params[4], "(32,0)");
	assert_string_equal(q.params[1], "5000");
	assert_int_equal(pgo_claim_pages_index(s), 0);
	assert_int_equal(pgo_claim_index(s), 2);
	free(r);
	pgo_conf_destroy(conf);
}

/* The ids of a batch as a bigint[] literal: published or not. */
static void test_claim_ids(void **state)
{
	pgo_event_t ev[4] = {{.id = 7}, {.id = 8}, {.id = 10}, {.id = 12}};
	pgo_ack_t acks[4] = {PGO_ACK_OK, PGO_ACK_RETRY, PGO_ACK_OK,
			     PGO_ACK_DEAD};
	pgo_batch_t b = {0};
	pgo_buf_t ids;

	(void)state;
	b.events = ev;
	b.acks = acks;
	b.n = 4;
	assert_true(pgo_claim_ids(&b, true, &ids));
	assert_string_equal(ids.data, "{7,10}");
	pgo_buf_free(&ids);
	assert_true(pgo_claim_ids(&b, false, &ids));
	assert_string_equal(ids.data, "{8,12}");
	pgo_buf_free(&ids);
	b.n = 0;
	assert_true(pgo_claim_ids(&b, true, &ids));
	assert_string_equal(ids.data, "{}");
	pgo_buf_free(&ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_sql),
		cmocka_unit_test(test_claim_fair_modes),
		cmocka_unit_test(test_claim_settings),
		cmocka_unit_test(test_claim_prepare),
		cmocka_unit_test(test_claim_sweep),
		cmocka_unit_test(test_claim_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
