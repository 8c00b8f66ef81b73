/*
 * test_settle.c — the settle rules (settle.c), table-driven: a batch of
 * events with keys, attempts and the sink's verdicts goes in; the final
 * verdict, attempts and delay of each event and the counts come out, in
 * each mode and poison policy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "relay/relay_int.h"
#include "base/arena.h"
#include "conf/conf.h"
#include "pgoutbox/sink.h"

#define MAXN 6

/* Verdicts as letters: o = OK, r = RETRY, d = DEAD, u = UNAVAILABLE,
 * - = none.  Halted events come out as h (RETRY with delay -1), held back
 * ones as b (RETRY, attempts unchanged, delay 0). */
struct settle_case {
	const char *name;
	int mode, poison, max_attempts;
	const char *keys;     /* a letter per event; '.' = no key */
	const char *attempts; /* a digit per event: attempts before */
	const char *in;	      /* the sink's verdicts */
	const char *want;     /* the outcomes */
	const char *want_attempts;
	bool unavailable;
	int ok, retry, dead, halted;
	int first_failed; /* -1: none */
};

static const struct settle_case cases[] = {
	{"all ok", PGO_MODE_CONCURRENT, PGO_POISON_DEAD_LETTER, 3, "abc", "000",
	 "ooo", "ooo", "000", false, 3, 0, 0, 0, -1},
	{"no verdict is a retry", PGO_MODE_CONCURRENT, PGO_POISON_DEAD_LETTER,
	 3, "ab", "00", "o-", "or", "01", false, 1, 1, 0, 0, 1},
	{"unavailable anywhere: all back, nothing spent", PGO_MODE_ORDERED,
	 PGO_POISON_DEAD_LETTER, 3, "abc", "000", "oru", "oru", "000", true, 0,
	 0, 0, 0, 2},
	{"out of attempts: dead", PGO_MODE_CONCURRENT, PGO_POISON_DEAD_LETTER,
	 3, "ab", "21", "rr", "dr", "32", false, 0, 1, 1, 0, 0},
	{"sink says dead", PGO_MODE_CONCURRENT, PGO_POISON_DEAD_LETTER, 10, "a",
	 "0", "d", "d", "1", false, 0, 0, 1, 0, 0},
	{"concurrent: no holding back", PGO_MODE_CONCURRENT,
	 PGO_POISON_DEAD_LETTER, 5, "aab", "000", "roo", "roo", "100", false, 2,
	 1, 0, 0, 0},
	{"ordered: same key held back, others go", PGO_MODE_ORDERED,
	 PGO_POISON_DEAD_LETTER, 5, "aaba", "0000", "rooo", "rbob", "1000",
	 false, 1, 3, 0, 0, 0},
	{"ordered: null keys never held", PGO_MODE_ORDERED,
	 PGO_POISON_DEAD_LETTER, 5, "..", "00", "ro", "ro", "10", false, 1, 1,
	 0, 0, 0},
	{"ordered: dead does not hold its key", PGO_MODE_ORDERED,
	 PGO_POISON_DEAD_LETTER, 5, "aa", "00", "do", "do", "10", false, 1, 0,
	 1, 0, 0},
	{"ordered: dead-lettered poison lets the key move on", PGO_MODE_ORDERED,
	 PGO_POISON_DEAD_LETTER, 3, "aa", "20", "ro", "do", "30", false, 1, 0,
	 1, 0, 0},
	{"ordered halt: the poison stays, its key waits", PGO_MODE_ORDERED,
	 PGO_POISON_HALT, 3, "aab", "200", "roo", "hbo", "300", false, 1, 2, 0,
	 1, 0},
	{"strict: everything after a failure waits", PGO_MODE_STRICT,
	 PGO_POISON_DEAD_LETTER, 5, "abc", "000", "oro", "orb", "010", false, 1,
	 2, 0, 0, 1},
	{"strict: a sink-dead event is not held", PGO_MODE_STRICT,
	 PGO_POISON_DEAD_LETTER, 5, "abc", "000", "rdo", "rdb", "110", false, 0,
	 2, 1, 0, 0},
};

static double fixed_jitter(void *ctx)
{
	(void)ctx;
	return 0.5;
}

static pgo_ack_t ack_of(char c)
{
	switch (c) {
	case 'o': return PGO_ACK_OK;
	case 'r': return PGO_ACK_RETRY;
	case 'd': return PGO_ACK_DEAD;
	case 'u': return PGO_ACK_UNAVAILABLE;
	default: return PGO_ACK_NONE;
	}
}

static char outcome(const pgo_batch_t *b, const settle_row_t *f, size_t i,
		    const pgo_event_t *in)
{
	switch (b->acks[i]) {
	case PGO_ACK_OK: return 'o';
	case PGO_ACK_DEAD: return 'd';
	case PGO_ACK_UNAVAILABLE: return 'u';
	case PGO_ACK_RETRY:
		if (f[i].delay_ms == -1)
			return 'h';
		if (f[i].attempts == in[i].attempts && f[i].delay_ms == 0)
			return 'b';
		return 'r';
	default: return '?';
	}
}

static void test_settle_rules(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct settle_case *k = &cases[c];
		size_t n = strlen(k->in);
		pgo_event_t ev[MAXN];
		pgo_ack_t acks[MAXN];
		const char *errors[MAXN];
		settle_row_t fix[MAXN];
		size_t failed[MAXN];
		char keys[MAXN][2], got[MAXN + 1], got_att[MAXN + 1];
		pgo_arena_t *arena = pgo_arena_new(4096);
		pgo_batch_t b = {ev, n, acks, errors, NULL, arena};
		pgo_settle_rules_t rules = {k->mode, k->poison, k->max_attempts,
					    1000, 60000};
		pgo_settle_plan_t plan;

		memset(ev, 0, sizeof(ev));
		for (size_t i = 0; i < n; i++) {
			keys[i][0] = k->keys[i];
			keys[i][1] = '\0';
			ev[i].id = (int64_t)(100 + i);
			ev[i].key = k->keys[i] == '.' ? NULL : keys[i];
			ev[i].attempts = k->attempts[i] - '0';
			acks[i] = ack_of(k->in[i]);
			errors[i] = NULL;
		}
		pgo_settle_plan(&rules, &b, fix, failed, fixed_jitter, NULL,
				&plan);
		if (plan.unavailable != k->unavailable)
			fail_msg("%s: unavailable %d", k->name,
				 plan.unavailable);
		if (plan.first_failed !=
		    (k->first_failed < 0 ? n : (size_t)k->first_failed))
			fail_msg("%s: first failed %zu", k->name,
				 plan.first_failed);
		if (!k->unavailable) {
			for (size_t i = 0; i < n; i++) {
				got[i] = outcome(&b, fix, i, ev);
				got_att[i] = (char)('0' + fix[i].attempts);
				/* A failure the rules made says why. */
				if ((k->in[i] == '-' || got[i] == 'b') &&
				    !errors[i])
					fail_msg("%s: event %zu has no error",
						 k->name, i);
				/* Backoff 1 s doubling, half jitter at 0.5:
				 * 750 ms for attempt 1. */
				if (got[i] == 'r' && fix[i].attempts == 1 &&
				    fix[i].delay_ms != 750)
					fail_msg("%s: delay %lld", k->name,
						 (long long)fix[i].delay_ms);
			}
			got[n] = got_att[n] = '\0';
			if (strcmp(got, k->want) != 0)
				fail_msg("%s: outcomes %s, want %s", k->name,
					 got, k->want);
			if (strcmp(got_att, k->want_attempts) != 0)
				fail_msg("%s: attempts %s, want %s", k->name,
					 got_att, k->want_attempts);
			if (plan.n_ok != k->ok || plan.n_retry != k->retry ||
			    plan.n_dead != k->dead ||
			    plan.n_halted != k->halted)
				fail_msg("%s: counts ok %d retry %d dead %d "
					 "halted %d",
					 k->name, plan.n_ok, plan.n_retry,
					 plan.n_dead, plan.n_halted);
		}
		pgo_arena_destroy(arena);
	}
}

/* The held-back message names the event it waits for. */
static void test_held_back_message(void **state)
{
	pgo_event_t ev[2] = {{.id = 7, .key = "k"}, {.id = 8, .key = "k"}};
	pgo_ack_t acks[2] = {PGO_ACK_RETRY, PGO_ACK_OK};
	const char *errors[2] = {"boom", NULL};
	pgo_arena_t *arena = pgo_arena_new(4096);
	pgo_batch_t b = {ev, 2, acks, errors, NULL, arena};
	pgo_settle_rules_t rules = {PGO_MODE_ORDERED, PGO_POISON_DEAD_LETTER, 5,
				    1000, 60000};
	settle_row_t fix[2];
	size_t failed[2];
	pgo_settle_plan_t plan;

	(void)state;
	pgo_settle_plan(&rules, &b, fix, failed, fixed_jitter, NULL, &plan);
	assert_string_equal(errors[0], "boom");
	assert_string_equal(errors[1], "held back behind event 7");
	/* The sink took event 8 after 7 failed: counted, for the log. */
	assert_int_equal(plan.n_overtaken, 1);
	assert_int_equal(plan.first_overtaken, 1);
	assert_int_equal(plan.overtaken_behind, 0);
	pgo_arena_destroy(arena);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settle_rules),
		cmocka_unit_test(test_held_back_message),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
