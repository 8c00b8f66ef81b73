/*
 * test_loop.c — the event loop (loop.c): timers in deadline order, fd
 * callbacks, callbacks that delete themselves or another watcher, a timer
 * re-armed in the past, wake-ups, and watchers that change their fd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop/loop.h"
#include "base/time.h"

/* What the callbacks saw, in order. */
static char trace[256];

static void note(const char *what)
{
	strncat(trace, what, sizeof(trace) - strlen(trace) - 1);
}

struct tctx {
	const char *name;
	pgo_loop_timer_t *self;
	pgo_loop_timer_t *victim; /* deleted by this timer's callback */
	int64_t rearm;		  /* re-armed to this (0: not) */
	int fired;
};

static void on_timer(void *arg)
{
	struct tctx *t = arg;

	t->fired++;
	note(t->name);
	if (t->victim)
		pgo_loop_timer_del(t->victim);
	if (t->rearm)
		pgo_loop_timer_set(t->self, t->rearm);
}

static void test_timers_in_order(void **state)
{
	static const struct {
		int64_t offsets[4]; /* ms from now; 0 = disarmed */
		const char *want;
	} cases[] = {
		{{30, 10, 20, 0}, "BCA"},
		{{5, 5, 1, 2}, "CDAB"}, /* ties: the one added first */
		{{0, 0, 0, 0}, ""},
		{{1, -50, 0, 3}, "BAD"}, /* already due runs first */
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		pgo_loop_t *l = pgo_loop_new();
		struct tctx t[4] = {{"A"}, {"B"}, {"C"}, {"D"}};
		int64_t start = pgo_now_ms(), until = start + 200;

		assert_non_null(l);
		trace[0] = '\0';
		for (int i = 0; i < 4; i++) {
			int64_t off = cases[c].offsets[i];

			t[i].self = pgo_loop_timer_add(l, off ? start + off : 0,
						       on_timer, &t[i]);
			assert_non_null(t[i].self);
		}
		/* Run until every armed timer fired (or a deadline). */
		while (pgo_loop_next_timer(l) && pgo_now_ms() < until)
			assert_int_equal(pgo_loop_run_once(l, until), 0);
		if (strcmp(trace, cases[c].want) != 0)
			fail_msg("case %zu: fired \"%s\", want \"%s\"", c,
				 trace, cases[c].want);
		pgo_loop_destroy(l);
	}
}

/* A timer that deletes another due in the same turn: the other never
 * runs.  A timer re-armed in the past runs once a turn, not in a loop. */
static void test_timer_deletes_and_rearms(void **state)
{
	pgo_loop_t *l = pgo_loop_new();
	struct tctx a = {"A"}, b = {"B"}, c = {"C"};
	int64_t now = pgo_now_ms();

	(void)state;
	trace[0] = '\0';
	a.self = pgo_loop_timer_add(l, now - 2, on_timer, &a);
	b.self = pgo_loop_timer_add(l, now - 1, on_timer, &b);
	c.self = pgo_loop_timer_add(l, now - 3, on_timer, &c);
	a.victim = b.self; /* A runs before B and deletes it */
	c.rearm = now - 100;
	c.victim = NULL;
	assert_int_equal(pgo_loop_run_once(l, now + 100), 0);
	assert_string_equal(trace, "CA");
	assert_int_equal(c.fired, 1);
	assert_int_equal(b.fired, 0);
	/* The next turn: C again (re-armed in the past), B never. */
	assert_int_equal(pgo_loop_run_once(l, now + 100), 0);
	assert_string_equal(trace, "CAC");
	c.rearm = 0;
	a.victim = NULL;
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 20), 0);
	assert_string_equal(trace, "CACC");
	assert_int_equal(pgo_loop_next_timer(l), 0);
	pgo_loop_destroy(l);
}

struct ioctx {
	const char *name;
	pgo_loop_io_t *self;
	pgo_loop_io_t *victim; /* deleted by this callback */
	bool del_self;
	int calls;
	short revents;
};

static void on_io(void *arg, int fd, short revents)
{
	struct ioctx *x = arg;
	char buf[16];

	x->calls++;
	x->revents = revents;
	note(x->name);
	if (revents & POLLIN)
		(void)!read(fd, buf, sizeof(buf));
	if (x->victim)
		pgo_loop_io_del(x->victim);
	if (x->del_self)
		pgo_loop_io_del(x->self);
}

static void test_fd_callbacks(void **state)
{
	pgo_loop_t *l = pgo_loop_new();
	int p1[2], p2[2], p3[2];
	struct ioctx a = {"a"}, b = {"b"}, c = {"c"};

	(void)state;
	assert_int_equal(pipe(p1), 0);
	assert_int_equal(pipe(p2), 0);
	assert_int_equal(pipe(p3), 0);
	trace[0] = '\0';
	a.self = pgo_loop_io_add(l, p1[0], POLLIN, on_io, &a);
	b.self = pgo_loop_io_add(l, p2[0], POLLIN, on_io, &b);
	c.self = pgo_loop_io_add(l, p3[0], POLLIN, on_io, &c);
	/* Nothing readable: the turn ends at its deadline, no callback. */
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 10), 0);
	assert_string_equal(trace, "");
	/* All three readable; a deletes b (not yet run this turn) and c
	 * deletes itself: b never runs, c runs once. */
	a.victim = b.self;
	c.del_self = true;
	assert_int_equal(write(p1[1], "x", 1), 1);
	assert_int_equal(write(p2[1], "x", 1), 1);
	assert_int_equal(write(p3[1], "x", 1), 1);
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 1000), 0);
	assert_string_equal(trace, "ac");
	assert_true(a.revents & POLLIN);
	/* Later turns: b and c are gone even with data waiting. */
	a.victim = NULL;
	assert_int_equal(write(p2[1], "x", 1), 1);
	assert_int_equal(write(p3[1], "x", 1), 1);
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 10), 0);
	assert_string_equal(trace, "ac");
	/* Events 0 waits for nothing; a new fd is watched at once. */
	pgo_loop_io_set(a.self, p1[0], 0);
	assert_int_equal(write(p1[1], "x", 1), 1);
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 10), 0);
	assert_string_equal(trace, "ac");
	pgo_loop_io_set(a.self, p1[1], POLLOUT);
	assert_int_equal(pgo_loop_run_once(l, pgo_now_ms() + 1000), 0);
	assert_string_equal(trace, "aca");
	assert_true(a.revents & POLLOUT);
	pgo_loop_destroy(l);
	for (int i = 0; i < 2; i++) {
		close(p1[i]);
		close(p2[i]);
		close(p3[i]);
	}
}

/* A wake-up ends a turn with no deadline at once. */
static void test_wake(void **state)
{
	pgo_loop_t *l = pgo_loop_new();
	int64_t t0;

	(void)state;
	pgo_loop_wake(l);
	t0 = pgo_now_ms();
	assert_int_equal(pgo_loop_run_once(l, 0), 0);
	assert_true(pgo_now_ms() - t0 < 1000);
	/* Drained: the next turn waits for its deadline. */
	t0 = pgo_now_ms();
	assert_int_equal(pgo_loop_run_once(l, t0 + 50), 0);
	assert_true(pgo_now_ms() - t0 >= 45);
	pgo_loop_destroy(l);
}

/* Deleting outside a turn, and many watchers (the arrays grow). */
static void test_many_watchers(void **state)
{
	pgo_loop_t *l = pgo_loop_new();
	pgo_loop_timer_t *t[100];
	struct tctx x = {"."};
	int64_t now = pgo_now_ms();

	(void)state;
	trace[0] = '\0';
	for (int i = 0; i < 100; i++)
		t[i] = pgo_loop_timer_add(l, now - 1, on_timer, &x);
	for (int i = 0; i < 100; i += 2)
		pgo_loop_timer_del(t[i]);
	assert_int_equal(pgo_loop_run_once(l, now + 100), 0);
	assert_int_equal(x.fired, 50);
	pgo_loop_timer_del(NULL);
	pgo_loop_io_del(NULL);
	pgo_loop_destroy(l);
	pgo_loop_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timers_in_order),
		cmocka_unit_test(test_timer_deletes_and_rearms),
		cmocka_unit_test(test_fd_callbacks),
		cmocka_unit_test(test_wake),
		cmocka_unit_test(test_many_watchers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
