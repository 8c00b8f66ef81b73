/*
 * test_cycle.c — a relay slot's state machine (cycle.c), table-driven:
 * every event in every state, the paths of a cycle (rows published,
 * an empty claim, a sink down, a failed settle, a lost connection and
 * the claim after it), what a claim's answer decides, the backoff of an
 * unavailable sink, and what round 2 sends for the sink's verdicts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "relay/relay_int.h"
#include "base/arena.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* States as letters: I idle, R rebalancing, C claiming, P publishing,
 * S settling, H chore. */
static const char letters[] = "IRCPSH";

static slot_state_t state_of(char c)
{
	const char *p = strchr(letters, c);

	assert_non_null(p);
	return (slot_state_t)(p - letters);
}

/* Each event: the state it leads to from I, R, C, P, S and H. */
static const struct {
	const char *name;
	slot_event_t ev;
	const char *to;
} transitions[] = {
	{"claim sent", SLOT_EV_CLAIM_SENT, "CRCPSH"},
	{"lease round sent", SLOT_EV_LEASE_SENT, "RRCPSH"},
	{"chore sent", SLOT_EV_CHORE_SENT, "HRCPSH"},
	{"claim returned rows", SLOT_EV_ROWS, "IRPPSH"},
	{"claim empty, failed or no memory", SLOT_EV_END_TX, "IRSSSH"},
	{"the sink's verdicts", SLOT_EV_VERDICTS, "IRCSSH"},
	{"round 2 failed: rollback", SLOT_EV_SETTLE_FAILED, "IRCPSH"},
	{"settled", SLOT_EV_SETTLED, "IRCPIH"},
	{"lease round or chore back", SLOT_EV_ROUND_DONE, "IICPSI"},
	{"send failed", SLOT_EV_SEND_FAILED, "IIIIII"},
	{"connection lost", SLOT_EV_LOST, "IIIIII"},
	{"abandoned at stop", SLOT_EV_ABANDONED, "IIIIII"},
};

static void test_cycle_transitions(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(transitions) / sizeof(transitions[0]);
	     t++)
		for (int from = 0; from < 6; from++) {
			slot_state_t to = pgo_slot_next((slot_state_t)from,
							transitions[t].ev);

			if (to != state_of(transitions[t].to[from]))
				fail_msg("%s in %c: %c, want %c",
					 transitions[t].name, letters[from],
					 letters[to], transitions[t].to[from]);
		}
}

/* Whole cycles: the states a slot goes through, from idle. */
static const struct {
	const char *name;
	slot_event_t evs[6];
	int n;
	const char *states; /* after each event */
} paths[] = {
	{"rows published, settled",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_ROWS, SLOT_EV_VERDICTS, SLOT_EV_SETTLED},
	 4,
	 "CPSI"},
	{"empty claim: COMMIT, idle",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_END_TX, SLOT_EV_SETTLED},
	 3,
	 "CSI"},
	{"sink unavailable: ROLLBACK through settling",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_ROWS, SLOT_EV_VERDICTS, SLOT_EV_SETTLED},
	 4,
	 "CPSI"},
	{"no memory for the plan: ROLLBACK",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_ROWS, SLOT_EV_END_TX, SLOT_EV_SETTLED},
	 4,
	 "CPSI"},
	{"round 2 failed: its ROLLBACK, then idle",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_ROWS, SLOT_EV_VERDICTS,
	  SLOT_EV_SETTLE_FAILED, SLOT_EV_SETTLED},
	 5,
	 "CPSSI"},
	{"lost while publishing, then reconnected: claims again",
	 {SLOT_EV_CLAIM_SENT, SLOT_EV_ROWS, SLOT_EV_LOST, SLOT_EV_CLAIM_SENT},
	 4,
	 "CPIC"},
	{"claim not sent (connection down): idle, claims later",
	 {SLOT_EV_SEND_FAILED, SLOT_EV_CLAIM_SENT},
	 2,
	 "IC"},
	{"lease round, then a claim",
	 {SLOT_EV_LEASE_SENT, SLOT_EV_ROUND_DONE, SLOT_EV_CLAIM_SENT},
	 3,
	 "RIC"},
	{"a claim waits for the chore",
	 {SLOT_EV_CHORE_SENT, SLOT_EV_CLAIM_SENT, SLOT_EV_ROUND_DONE,
	  SLOT_EV_CLAIM_SENT},
	 4,
	 "HHIC"},
};

static void test_cycle_paths(void **state)
{
	(void)state;
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
		slot_state_t s = SLOT_IDLE;

		for (int i = 0; i < paths[p].n; i++) {
			s = pgo_slot_next(s, paths[p].evs[i]);
			if (s != state_of(paths[p].states[i]))
				fail_msg("%s: step %d: %c, want %c",
					 paths[p].name, i, letters[s],
					 paths[p].states[i]);
		}
	}
}

/* What a claim's answer decides. */
static const struct {
	const char *name;
	int mode;
	wake_state_t wake;
	int n;
	bool full, wake_claim;
	int dry_wakes;
	/* out */
	bool more;
	int relay_more, dry_after;
	bool cold;
} outcomes[] = {
	{"concurrent, full: again, on every slot", PGO_MODE_CONCURRENT,
	 WAKE_ASLEEP, 100, true, false, 0, true, 1, 0, false},
	{"concurrent, asleep, not full: done", PGO_MODE_CONCURRENT, WAKE_ASLEEP,
	 5, false, false, 0, false, 0, 0, false},
	{"concurrent, awake, any rows: again", PGO_MODE_CONCURRENT, WAKE_AWAKE,
	 5, false, false, 0, true, 1, 0, false},
	{"concurrent, awake, empty: done", PGO_MODE_CONCURRENT, WAKE_AWAKE, 0,
	 false, false, 0, false, 0, 0, false},
	{"ordered, full, asleep: this slot only", PGO_MODE_ORDERED, WAKE_ASLEEP,
	 100, true, false, 0, true, 0, 0, false},
	{"ordered, releasing, rows: every slot", PGO_MODE_ORDERED,
	 WAKE_RELEASING, 3, false, false, 0, true, 1, 0, false},
	{"ordered, awake, empty: every slot done", PGO_MODE_ORDERED, WAKE_AWAKE,
	 0, false, false, 0, false, 0, 0, false},
	{"ordered, listen off: relay's more untouched", PGO_MODE_ORDERED,
	 WAKE_OFF, 3, true, false, 0, true, -1, 0, false},
	{"strict, asking, rows: not on all", PGO_MODE_STRICT, WAKE_ASKING, 3,
	 false, false, 0, false, 0, 0, false},
	{"woken by producers, dry: one more dry", PGO_MODE_ORDERED, WAKE_ASLEEP,
	 0, false, true, 3, false, 0, 4, false},
	{"the COLD_AFTER-th dry wake: cold", PGO_MODE_ORDERED, WAKE_ASLEEP, 0,
	 false, true, COLD_AFTER - 1, false, 0, COLD_AFTER, true},
	{"colder still: no new cold", PGO_MODE_ORDERED, WAKE_ASLEEP, 0, false,
	 true, COLD_AFTER, false, 0, COLD_AFTER + 1, false},
	{"dry but not a producers' wake: count kept", PGO_MODE_ORDERED,
	 WAKE_ASLEEP, 0, false, false, 5, false, 0, 5, false},
	{"rows: warm again", PGO_MODE_ORDERED, WAKE_ASLEEP, 1, false, true,
	 COLD_AFTER + 3, false, 0, 0, false},
};

static void test_cycle_claim_outcome(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(outcomes) / sizeof(outcomes[0]); c++) {
		pgo_claim_outcome_t o;

		pgo_cycle_claim_outcome(outcomes[c].mode, outcomes[c].wake,
					outcomes[c].n, outcomes[c].full,
					outcomes[c].wake_claim,
					outcomes[c].dry_wakes, &o);
		if (o.more != outcomes[c].more ||
		    o.relay_more != outcomes[c].relay_more ||
		    o.dry_wakes != outcomes[c].dry_after ||
		    o.went_cold != outcomes[c].cold)
			fail_msg("%s: more %d relay_more %d dry %d cold %d",
				 outcomes[c].name, o.more, o.relay_more,
				 o.dry_wakes, o.went_cold);
	}
}

/* The pause after the sink said unavailable: 100 ms, doubling, capped. */
static void test_cycle_backoff(void **state)
{
	static const struct {
		int64_t max;
		int64_t want[6];
	} cases[] = {
		{1000, {100, 200, 400, 800, 1000, 1000}},
		{30000, {100, 200, 400, 800, 1600, 3200}},
		{50, {50, 50, 50, 50, 50, 50}},
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int64_t b = 0;

		for (int i = 0; i < 6; i++) {
			b = pgo_cycle_backoff(b, cases[c].max);
			if (b != cases[c].want[i])
				fail_msg("max %lld step %d: %lld, want %lld",
					 (long long)cases[c].max, i,
					 (long long)b,
					 (long long)cases[c].want[i]);
		}
	}
}

static double no_jitter(void *ctx)
{
	(void)ctx;
	return 0.0;
}

/* From the sink's verdicts to round 2, through the settle rules: what is
 * sent after a publish that went well, failed or found the sink down. */
static const struct {
	const char *name;
	const char *verdicts; /* o ok, r retry, d dead, u unavailable */
	bool adopted;
	unsigned want;
} round2s[] = {
	{"publish ok", "ooo", false, PGO_ROUND2_COMMIT},
	{"publish ok, adopted: done", "oo", true,
	 PGO_ROUND2_DONE | PGO_ROUND2_COMMIT},
	{"sink unavailable: rollback only", "oou", false, PGO_ROUND2_ROLLBACK},
	{"sink unavailable, adopted: rollback only", "u", true,
	 PGO_ROUND2_ROLLBACK},
	{"publish failed: retry", "or", false,
	 PGO_ROUND2_UNARCHIVE | PGO_ROUND2_RETRY | PGO_ROUND2_COMMIT},
	{"no verdict: retry", "o-", false,
	 PGO_ROUND2_UNARCHIVE | PGO_ROUND2_RETRY | PGO_ROUND2_COMMIT},
	{"sink says dead", "d", false,
	 PGO_ROUND2_UNARCHIVE | PGO_ROUND2_DEAD | PGO_ROUND2_COMMIT},
	{"failed, adopted: no archive", "ord", true,
	 PGO_ROUND2_DONE | PGO_ROUND2_RETRY | PGO_ROUND2_DEAD |
		 PGO_ROUND2_COMMIT},
};

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

static void test_cycle_round2(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(round2s) / sizeof(round2s[0]); c++) {
		pgo_event_t ev[4];
		pgo_ack_t acks[4];
		const char *errors[4];
		settle_row_t fix[4];
		size_t failed[4], n = strlen(round2s[c].verdicts);
		pgo_batch_t b = {0};
		pgo_settle_rules_t rules = {PGO_MODE_ORDERED,
					    PGO_POISON_DEAD_LETTER, 5, 1000,
					    60000};
		pgo_settle_plan_t plan;
		unsigned got;

		memset(ev, 0, sizeof(ev));
		for (size_t i = 0; i < n; i++) {
			ev[i].id = (int64_t)(10 + i);
			acks[i] = ack_of(round2s[c].verdicts[i]);
			errors[i] = NULL;
		}
		b.events = ev;
		b.acks = acks;
		b.errors = errors;
		b.n = n;
		pgo_settle_plan(&rules, &b, fix, failed, no_jitter, NULL,
				&plan);
		got = pgo_cycle_round2(&plan, round2s[c].adopted);
		if (got != round2s[c].want)
			fail_msg("%s: 0x%x, want 0x%x", round2s[c].name, got,
				 round2s[c].want);
	}
}

/* A lost connection in any state: the slot is idle with no batch, its
 * leases gone, the floor back to 0, the loss counted; the next claim
 * can go out once the connection is back. */
static void test_cycle_lost(void **state)
{
	static const slot_state_t from[] = {SLOT_IDLE, SLOT_REBALANCING,
					    SLOT_CLAIMING, SLOT_SETTLING,
					    SLOT_CHORE};

	(void)state;
	for (size_t c = 0; c < sizeof(from) / sizeof(from[0]); c++) {
		pgo_relay_t *r = calloc(1, sizeof(*r));
		slot_t *s;
		unsigned gen;

		assert_non_null(r);
		s = &r->slots[0];
		r->nslots = 1;
		s->arena = pgo_arena_new(4096);
		s->leases.shards = strdup("{0,1}");
		s->leases.epochs = strdup("{3,3}");
		s->leases.map = strdup("{3,3}");
		s->leases.n = 2;
		s->leases.next_round = 12345;
		s->state = from[c];
		s->batch.n = 7;
		r->floor.id = 5000;
		r->floor.writers = strdup("{}");
		gen = r->floor.gen;
		pgo_cycle_lost(r, s);
		assert_int_equal(s->state, SLOT_IDLE);
		assert_int_equal(s->batch.n, 0);
		assert_null(s->claimed);
		assert_int_equal(s->leases.n, 0);
		assert_string_equal(s->leases.map, "{}");
		assert_string_equal(s->leases.shards, "{}");
		assert_int_equal(s->leases.next_round, 0); /* a round at once */
		assert_int_equal(r->floor.id, 0);
		assert_int_equal(r->floor.gen, gen + 1);
		assert_int_equal(r->stats.total.reconnects, 1);
		assert_int_equal(pgo_slot_next(s->state, SLOT_EV_CLAIM_SENT),
				 SLOT_CLAIMING);
		pgo_shards_free(s);
		pgo_floor_free(r);
		pgo_arena_destroy(s->arena);
		free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cycle_transitions),
		cmocka_unit_test(test_cycle_paths),
		cmocka_unit_test(test_cycle_claim_outcome),
		cmocka_unit_test(test_cycle_backoff),
		cmocka_unit_test(test_cycle_round2),
		cmocka_unit_test(test_cycle_lost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
