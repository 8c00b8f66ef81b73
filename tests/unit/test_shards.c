/*
 * test_shards.c — the relay's side of shard leases (shards.c),
 * table-driven: what a lease round changed for a slot when a relay
 * joins or leaves (shards gained and released, whether it claims at once
 * and whether its sibling slots take freed shards at once), which
 * leases count as taken over from another relay, the epoch
 * map the ordered claim reads, and when a slot's lease round is due.
 * The fair share itself is decided by pgoutbox.rebalance() in SQL; here
 * are the cases its answers bring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "relay/relay_int.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"

static const struct {
	const char *name;
	const char *old_shards, *old_epochs, *shards, *epochs;
	bool changed;
	int gained, released;
	bool kick, others_now;
} changes[] = {
	{"alone: the first round takes every shard", "{}", "{}",
	 "{0,1,2,3,4,5,6,7}", "{1,1,1,1,1,1,1,1}", true, 8, 0, true, false},
	{"a relay joins: half goes", "{0,1,2,3,4,5,6,7}", "{1,1,1,1,1,1,1,1}",
	 "{0,1,2,3}", "{1,1,1,1}", true, 0, 4, true, true},
	{"a relay leaves: its share is taken", "{0,1,2,3}", "{1,1,1,1}",
	 "{0,1,2,3,4,5,6,7}", "{1,1,1,1,2,2,2,2}", true, 4, 0, true, false},
	{"more relays than shards: this one holds none", "{3}", "{4}", "{}",
	 "{}", true, 0, 1, false, true},
	{"more relays than shards, still none: nothing", "{}", "{}", "{}", "{}",
	 false, 0, 0, false, false},
	{"the same leases: nothing", "{4,5}", "{2,2}", "{4,5}", "{2,2}", false,
	 0, 0, false, false},
	{"the same shards, new epochs: new map, no gain", "{4,5}", "{2,2}",
	 "{4,5}", "{3,3}", true, 0, 0, true, false},
	{"one for another: a gain and a release", "{0,1}", "{1,1}", "{1,2}",
	 "{1,5}", true, 1, 1, true, false},
	{"12 is not 1 or 2", "{1,12}", "{1,1}", "{12,2}", "{1,1}", true, 1, 1,
	 true, false},
	{"strict: the leader lease", "{}", "{}", "{-1}", "{9}", true, 1, 0,
	 true, false},
	{"strict: standby", "{-1}", "{9}", "{}", "{}", true, 0, 1, false, true},
};

static void test_shards_change(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(changes) / sizeof(changes[0]); c++) {
		pgo_lease_change_t o;

		pgo_shards_change(changes[c].old_shards, changes[c].old_epochs,
				  changes[c].shards, changes[c].epochs, &o);
		if (o.changed != changes[c].changed ||
		    o.gained != changes[c].gained ||
		    o.released != changes[c].released ||
		    o.kick != changes[c].kick ||
		    o.others_now != changes[c].others_now)
			fail_msg("%s: changed %d gained %d released %d kick "
				 "%d others_now %d",
				 changes[c].name, o.changed, o.gained,
				 o.released, o.kick, o.others_now);
	}
}

/* Whether a lease is taken over from another relay, by its owner
 * before the round. */
static const struct {
	const char *name;
	const char *owner, *member;
	bool want;
} foreigns[] = {
	{"never held: a first grant", NULL, "a/0", false},
	{"never held (empty)", "", "a/0", false},
	{"from a sibling connection", "a/3", "a/0", false},
	{"from itself", "a/0", "a/0", false},
	{"from another relay", "b/1", "a/0", true},
	{"a name that starts like ours", "ab/1", "a/0", true},
	{"ours is a prefix of theirs", "a/0x/1", "a/0", true},
	{"names with a slash", "eu/a/2", "eu/a/0", false},
	{"names with a slash, another relay", "eu/b/2", "eu/a/0", true},
	{"the default name", "relay/1", "relay/0", false},
};

static void test_shards_foreign(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(foreigns) / sizeof(foreigns[0]); c++)
		if (pgo_shards_foreign(foreigns[c].owner, foreigns[c].member) !=
		    foreigns[c].want)
			fail_msg("%s: %s held by %s", foreigns[c].name,
				 foreigns[c].member,
				 foreigns[c].owner ? foreigns[c].owner
						   : "(null)");
}

static void test_shards_missing(void **state)
{
	(void)state;
	assert_int_equal(pgo_shards_missing("{}", "{}"), 0);
	assert_int_equal(pgo_shards_missing("{}", "{0,1,2}"), 3);
	assert_int_equal(pgo_shards_missing("{0,1,2}", "{}"), 0);
	assert_int_equal(pgo_shards_missing("{10,11}", "{1,10,110}"), 2);
	assert_int_equal(pgo_shards_missing("{-1}", "{-1}"), 0);
}

static const struct {
	const char *name;
	const char *shards, *epochs;
	int all;
	const char *want;
} maps[] = {
	{"shards 1 and 2 of 4", "{1,2}", "{7,7}", 4, "{NULL,7,7,NULL}"},
	{"none held: every shard NULL", "{}", "{}", 3, "{NULL,NULL,NULL}"},
	{"before the first round: empty", "{}", "{}", 0, "{}"},
	{"all of them", "{0,1}", "{12,345}", 2, "{12,345}"},
	{"the count too low: up to the highest", "{5}", "{2}", 3,
	 "{NULL,NULL,NULL,NULL,NULL,2}"},
	{"strict's leader lease has no element", "{-1}", "{9}", 0, "{}"},
};

static void test_shards_epoch_map(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(maps) / sizeof(maps[0]); c++) {
		char *m = pgo_shards_epoch_map(maps[c].shards, maps[c].epochs,
					       maps[c].all);

		assert_non_null(m);
		if (strcmp(m, maps[c].want) != 0)
			fail_msg("%s: %s, want %s", maps[c].name, m,
				 maps[c].want);
		free(m);
	}
}

/* When a slot runs its membership round (0: none now). */
static const struct {
	const char *name;
	int mode, idx;
	bool checked, beat_off, ready;
	slot_state_t state;
	int64_t next_rebalance;
	int64_t want;
} dues[] = {
	{"ordered slot 0 at start: at once", PGO_MODE_ORDERED, 0, false, false,
	 true, SLOT_IDLE, 0, 1},
	{"ordered slot 1 waits for slot 0's first beat", PGO_MODE_ORDERED, 1,
	 false, false, true, SLOT_IDLE, 0, 0},
	{"ordered slot 1 after it", PGO_MODE_ORDERED, 1, true, false, true,
	 SLOT_IDLE, 500, 500},
	{"not while claiming", PGO_MODE_ORDERED, 0, true, false, true,
	 SLOT_CLAIMING, 500, 0},
	{"not while the connection is down", PGO_MODE_STRICT, 0, true, false,
	 false, SLOT_IDLE, 500, 0},
	{"concurrent slot 0 beats", PGO_MODE_CONCURRENT, 0, true, false, true,
	 SLOT_IDLE, 700, 700},
	{"concurrent slot 1 holds no lease", PGO_MODE_CONCURRENT, 1, true,
	 false, true, SLOT_IDLE, 700, 0},
	{"concurrent, beat refused: none", PGO_MODE_CONCURRENT, 0, true, true,
	 true, SLOT_IDLE, 700, 0},
};

static void test_shards_next(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(dues) / sizeof(dues[0]); c++) {
		pgo_relay_t *r = calloc(1, sizeof(*r));
		slot_t *s;
		int64_t got;

		assert_non_null(r);
		r->mode = dues[c].mode;
		r->members.checked = dues[c].checked;
		r->members.beat_off = dues[c].beat_off;
		s = &r->slots[dues[c].idx];
		s->idx = dues[c].idx;
		s->state = dues[c].state;
		s->conn.state = dues[c].ready ? PGO_CONN_READY : PGO_CONN_DOWN;
		s->leases.next_round = dues[c].next_rebalance;
		got = pgo_shards_next(r, s);
		if (got != dues[c].want)
			fail_msg("%s: %lld, want %lld", dues[c].name,
				 (long long)got, (long long)dues[c].want);
		assert_int_equal(pgo_shards_due(r, s, 600), got && 600 >= got);
		free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shards_change),
		cmocka_unit_test(test_shards_missing),
		cmocka_unit_test(test_shards_foreign),
		cmocka_unit_test(test_shards_epoch_map),
		cmocka_unit_test(test_shards_next),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
