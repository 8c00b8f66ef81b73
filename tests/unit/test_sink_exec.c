/*
 * test_sink_exec.c — the exec sink driven the way the relay drives it: a
 * host (pgo_sink_host_t) with an event loop attached to the sink,
 * pgo_sink_submit(), then pgo_loop_run_once() turned until the sink calls
 * done, against real /bin/sh commands.  Also the NDJSON line format and
 * the batch verdict helpers (event.c) the sink relies on.
 *
 * After every run the test checks that no child is left to reap (no
 * zombies) and that the process holds exactly the fds it held before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop/loop.h"
#include "base/arena.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"
#include "sinks/exec/exec.h"

static char tmp_dir[64];

/* --- log capture --- */

static int warnings;
static char last_warning[1024];

static void capture_log(void *ctx, pgo_log_level_t level, const char *subject,
			const char *msg)
{
	(void)ctx;
	if (level == PGO_LOG_WARN) {
		warnings++;
		snprintf(last_warning, sizeof(last_warning), "%s: %s", subject,
			 msg);
	}
}

/* --- helpers --- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Whether this kernel (or valgrind) gives pidfds, which the sink watches
 * for a child's exit instead of polling. */
static bool have_pidfd(void)
{
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
#else
	int fd = -1;
#endif

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static void assert_no_children(void)
{
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *data;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = malloc((size_t)n + 1);
	assert_non_null(data);
	assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
	data[n] = '\0';
	fclose(f);
	return data;
}

/* A batch of n events with ids 1..n.  payload_len 0: small payloads. */
struct tbatch {
	pgo_arena_t *data; /* the events' strings */
	char *big_payload; /* shared by every event when payload_len > 0 */
	pgo_event_t *ev;
	pgo_ack_t *acks;
	const char **errors;
	pgo_batch_t b;
};

static char *arena_printf(pgo_arena_t *a, const char *fmt, size_t v)
{
	char tmp[64];

	snprintf(tmp, sizeof(tmp), fmt, v);
	return pgo_arena_strdup(a, tmp);
}

static void tbatch_init(struct tbatch *t, size_t n, size_t payload_len)
{
	memset(t, 0, sizeof(*t));
	t->data = pgo_arena_new(0);
	t->ev = calloc(n, sizeof(*t->ev));
	t->acks = calloc(n, sizeof(*t->acks));
	t->errors = calloc(n, sizeof(*t->errors));
	assert_non_null(t->data);
	assert_non_null(t->ev);
	assert_non_null(t->acks);
	assert_non_null(t->errors);
	if (payload_len > 0) {
		t->big_payload = malloc(payload_len + 1);
		assert_non_null(t->big_payload);
		memset(t->big_payload, 'x', payload_len);
		memcpy(t->big_payload, "{\"pad\":\"", 8);
		memcpy(t->big_payload + payload_len - 2, "\"}", 2);
		t->big_payload[payload_len] = '\0';
	}
	for (size_t i = 0; i < n; i++) {
		pgo_event_t *e = &t->ev[i];

		e->id = (int64_t)i + 1;
		e->topic = "orders";
		e->key = arena_printf(t->data, "k%zu", i + 1);
		e->type = "order.created";
		e->payload =
			t->big_payload
				? t->big_payload
				: arena_printf(t->data, "{\"n\":%zu}", i + 1);
		e->headers = "{}";
		e->created_at = "2024-01-02T03:04:05Z";
		e->attempts = 0;
	}
	t->b.events = t->ev;
	t->b.n = n;
	t->b.acks = t->acks;
	t->b.errors = t->errors;
	t->b.sink_state = NULL;
	t->b.arena = pgo_arena_new(0);
	assert_non_null(t->b.arena);
}

static void tbatch_free(struct tbatch *t)
{
	pgo_arena_destroy(t->b.arena);
	pgo_arena_destroy(t->data);
	free(t->big_payload);
	free(t->ev);
	free(t->acks);
	free(t->errors);
}

/* --- the host --- */

/* What the relay would be: a loop, and where done() lands. */
static struct {
	pgo_loop_t *loop;
	pgo_sink_host_t host;
	int done;	    /* done() calls */
	pgo_batch_t *last;  /* the batch of the last one */
	int64_t done_at[4]; /* when the first ones came (monotonic ms) */
} th;

static void host_done(void *ctx, pgo_batch_t *batch)
{
	(void)ctx;
	if (th.done < 4)
		th.done_at[th.done] = pgo_now_ms();
	th.done++;
	th.last = batch;
}

static void host_health(void *ctx, int up, const char *reason)
{
	(void)ctx;
	(void)reason;
	fail_msg("the exec sink reported health %d", up);
}

/* A configured exec sink attached to a fresh host. */
static void sink_init(pgo_sink_t *s, const char *command, int64_t timeout_ms)
{
	memset(s, 0, sizeof(*s));
	s->ops = &pgo_sink_exec_ops;
	snprintf(s->name, sizeof(s->name), "exec");
	assert_int_equal(pgo_sink_exec_configure(s, command, timeout_ms),
			 PGO_OK);
	assert_int_equal(s->ops->open(s), PGO_OK);
	memset(&th, 0, sizeof(th));
	th.loop = pgo_loop_new();
	assert_non_null(th.loop);
	th.host.loop = th.loop;
	th.host.done = host_done;
	th.host.health = host_health;
	assert_int_equal(pgo_sink_attach(s, &th.host), PGO_OK);
}

static void sink_fini(pgo_sink_t *s)
{
	pgo_sink_detach(s);
	s->ops->close(s);
	assert_null(s->priv);
	pgo_loop_destroy(th.loop);
	th.loop = NULL;
}

/* Turns the loop until done() came `want` times in all. */
static void turn_until_done(int want, int64_t t0)
{
	while (th.done < want) {
		assert_int_equal(
			pgo_loop_run_once(th.loop, pgo_now_ms() + 10000), 0);
		assert_true(pgo_now_ms() - t0 < 30000);
	}
	assert_int_equal(th.done, want);
}

/* The relay's side: submit, then turn the loop until the sink is done
 * with the batch.  Returns the elapsed ms. */
static int64_t drive(pgo_sink_t *s, pgo_batch_t *b, int *rc_out)
{
	int64_t t0 = pgo_now_ms();
	int before = th.done;
	int rc;

	rc = pgo_sink_submit(s, b);
	if (rc == PGO_OK)
		turn_until_done(before + 1, t0);
	assert_int_equal(th.done, before + (rc == PGO_OK));
	if (rc == PGO_OK)
		assert_ptr_equal(th.last, b);
	assert_null(b->sink_state);
	*rc_out = rc;
	return pgo_now_ms() - t0;
}

/* --- the table --- */

struct exec_case {
	const char *name;
	const char *command;
	int64_t timeout_ms; /* 0: none */
	size_t n;	    /* events, ids 1..n */
	size_t payload_len; /* 0: small payloads */
	pgo_ack_t ack;	    /* verdict of the events not singled out */
	const char *err;    /* and their error (NULL: none) */
	int64_t one_id;	    /* an event with its own verdict, 0: none */
	pgo_ack_t one_ack;
	const char *one_err;
	bool substr;	/* errors match as substrings, not exactly */
	int warnings;	/* WARN lines expected; -1: any */
	int64_t max_ms; /* the whole publish took less; 0: no bound */
};

static const struct exec_case cases[] = {
	{"exit_0_acks_all", "cat >/dev/null; exit 0", 0, 3, 0, PGO_ACK_OK, NULL,
	 0, 0, NULL, false, 0, 0},
	{"exit_3_retries_all", "exit 3", 0, 3, 0, PGO_ACK_RETRY,
	 "exec: exit status 3", 0, 0, NULL, false, 0, 0},
	{"dead_verdict_line",
	 "cat >/dev/null; echo 'dead 2 bad payload'; exit 0", 0, 3, 0,
	 PGO_ACK_OK, NULL, 2, PGO_ACK_DEAD, "bad payload", false, 0, 0},
	{"retry_verdict_and_exit_1", "echo 'retry 1 later'; exit 1", 0, 3, 0,
	 PGO_ACK_RETRY, "exec: exit status 1", 1, PGO_ACK_RETRY, "later", false,
	 0, 0},
	{"ok_verdict_survives_failure", "echo 'ok 3'; exit 4", 0, 3, 0,
	 PGO_ACK_RETRY, "exec: exit status 4", 3, PGO_ACK_OK, NULL, false, 0,
	 0},
	{"verdict_without_reason", "cat >/dev/null; echo 'dead 1'", 0, 2, 0,
	 PGO_ACK_OK, NULL, 1, PGO_ACK_DEAD, "exec: rejected by command", false,
	 0, 0},
	{"verdict_without_newline",
	 "cat >/dev/null; printf 'retry 2 no newline'", 0, 2, 0, PGO_ACK_OK,
	 NULL, 2, PGO_ACK_RETRY, "no newline", false, 0, 0},
	{"verdict_with_crlf",
	 "cat >/dev/null; printf 'dead 1   spaced out \\r\\n'", 0, 2, 0,
	 PGO_ACK_OK, NULL, 1, PGO_ACK_DEAD, "spaced out", false, 0, 0},
	{"stderr_last_line_in_error",
	 "echo first >&2; echo boom >&2; echo >&2; exit 2", 0, 3, 0,
	 PGO_ACK_RETRY, "exec: exit status 2: boom", 0, 0, NULL, false, 0, 0},
	{"stderr_tail_of_a_flood",
	 "i=0; while [ $i -lt 2000 ]; do echo \"noise $i\" >&2; i=$((i+1)); "
	 "done; echo 'the end' >&2; exit 9",
	 0, 2, 0, PGO_ACK_RETRY, "exec: exit status 9: the end", 0, 0, NULL,
	 false, 0, 0},
	{"killed_by_signal", "kill -9 $$", 0, 2, 0, PGO_ACK_RETRY,
	 "exec: killed by signal 9", 0, 0, NULL, false, 0, 0},
	/* 127 and 126 are the sink's outage, not the events' failure. */
	{"command_not_found", "no-such-command-pgoutbox", 0, 2, 0,
	 PGO_ACK_UNAVAILABLE, "exec: exit status 127 (command not found): ", 0,
	 0, NULL, true, 0, 0},
	{"command_not_executable", "/dev/null", 0, 2, 0, PGO_ACK_UNAVAILABLE,
	 "exec: exit status 126 (command not executable): ", 0, 0, NULL, true,
	 0, 0},
	{"malformed_lines_warned_and_ignored",
	 "cat >/dev/null; echo hello; echo 'ok x'; echo 'dead 999 gone'; "
	 "echo 'ok 1 fine'; "
	 "echo; echo 'retry 2x'; exit 0",
	 0, 2, 0, PGO_ACK_OK, NULL, 1, PGO_ACK_OK, NULL, false, 4, 0},
	{"environment",
	 "cat >/dev/null; test \"$PGOUTBOX_BATCH_SIZE\" = 4 && "
	 "test \"$PGOUTBOX_FIRST_ID\" = 1 "
	 "&& test \"$PGOUTBOX_LAST_ID\" = 4",
	 0, 4, 0, PGO_ACK_OK, NULL, 0, 0, NULL, false, 0, 0},
	{"timeout_kills", "sleep 5", 200, 3, 0, PGO_ACK_RETRY,
	 "exec: command timed out after 200 ms", 0, 0, NULL, false, 1, 1000},
	{"timeout_after_partial_verdicts", "echo 'ok 2'; exec sleep 5", 200, 3,
	 0, PGO_ACK_RETRY, "exec: command timed out after 200 ms", 2,
	 PGO_ACK_OK, NULL, false, 1, 1000},
	{"large_batch_read_fully", "wc -c >/dev/null", 10000, 5000, 1024,
	 PGO_ACK_OK, NULL, 0, 0, NULL, false, 0, 0},
	/* Exit 0 acks only what the command read (issue 19, item 5). */
	{"large_batch_not_read_exit_0", "exit 0", 10000, 5000, 1024,
	 PGO_ACK_RETRY, "exec: exit status 0, but the command left ", 0, 0,
	 NULL, true, 0, 0},
	{"large_batch_head_c_10_exit_0", "head -c 10 >/dev/null; exit 0", 10000,
	 5000, 1024, PGO_ACK_RETRY,
	 "exec: exit status 0, but the command left ", 0, 0, NULL, true, 0, 0},
	{"small_batch_not_read_exit_0", "exit 0", 0, 3, 0, PGO_ACK_RETRY,
	 "exec: exit status 0, but the command left 420 of 420 bytes of its "
	 "input unread",
	 0, 0, NULL, false, 0, 0},
	{"small_batch_head_c_10_exit_0", "head -c 10 >/dev/null; exit 0", 0, 3,
	 0, PGO_ACK_RETRY, "exec: exit status 0, but the command left ", 0, 0,
	 NULL, true, 0, 0},
	/* ... unless it gave every event a verdict. */
	{"verdicts_for_all_without_reading",
	 "echo 'ok 1'; echo 'dead 2 no'; echo 'ok 3'", 0, 3, 0, PGO_ACK_OK,
	 NULL, 2, PGO_ACK_DEAD, "no", false, 0, 0},
	{"large_batch_half_read_exit_1", "head -c 100000 >/dev/null; exit 1",
	 10000, 5000, 1024, PGO_ACK_RETRY, "exec: exit status 1", 0, 0, NULL,
	 false, 0, 0},
	{"stdout_capped_at_1_MiB",
	 "cat >/dev/null; head -c 1100000 /dev/zero; echo; "
	 "echo 'dead 1 too late'",
	 0, 2, 0, PGO_ACK_OK, NULL, 0, 0, NULL, false, 1, 0},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static void check_verdict(const struct exec_case *c, size_t i, pgo_ack_t ack,
			  const char *want, const pgo_batch_t *b)
{
	const char *got = b->errors[i];

	if (b->acks[i] != ack)
		fail_msg("%s: event %zu: ack %d, want %d (error: %s)", c->name,
			 i + 1, b->acks[i], ack, got ? got : "(none)");
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	if (c->substr ? !strstr(got, want) : strcmp(got, want) != 0)
		fail_msg("%s: event %zu: error \"%s\", want \"%s\"", c->name,
			 i + 1, got, want);
}

static void run_case(void **state)
{
	const struct exec_case *c = *state;
	int fds = count_fds();
	struct tbatch t;
	pgo_sink_t sink;
	int64_t ms;
	int rc;

	warnings = 0;
	tbatch_init(&t, c->n, c->payload_len);
	sink_init(&sink, c->command, c->timeout_ms);
	ms = drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	for (size_t i = 0; i < c->n; i++) {
		if (c->one_id && t.ev[i].id == c->one_id)
			check_verdict(c, i, c->one_ack, c->one_err, &t.b);
		else
			check_verdict(c, i, c->ack, c->err, &t.b);
	}
	if (c->warnings >= 0 && warnings != c->warnings)
		fail_msg("%s: %d warnings, want %d (last: %s)", c->name,
			 warnings, c->warnings, last_warning);
	if (c->max_ms > 0 && ms >= c->max_ms)
		fail_msg("%s: took %lld ms", c->name, (long long)ms);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
	assert_int_equal(count_fds(), fds);
}

/* --- the NDJSON the command reads --- */

static void test_stdin_is_ndjson(void **state)
{
	char cmd[256], path[128];
	struct tbatch t;
	pgo_sink_t sink;
	char *got, *want;
	int rc;

	(void)state;
	snprintf(path, sizeof(path), "%s/out", tmp_dir);
	snprintf(cmd, sizeof(cmd), "cat > '%s'", path);
	tbatch_init(&t, 3, 0);
	t.ev[1].topic = "a\"b\nc";
	t.ev[1].key = NULL;
	t.ev[1].type = "t2";
	t.ev[1].payload = "{\"x\":[1,2]}";
	t.ev[1].headers = "{\"h\":1}";
	t.ev[1].attempts = 1;
	sink_init(&sink, cmd, 5000);
	drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(t.acks[i], PGO_ACK_OK);
		assert_null(t.errors[i]);
	}
	got = read_file(path);
	want = "{\"id\":1,\"topic\":\"orders\",\"key\":\"k1\","
	       "\"type\":\"order.created\",\"payload\":{\"n\":1},"
	       "\"headers\":{},\"created_at\":\"2024-01-02T03:04:05Z\","
	       "\"attempts\":0}\n"
	       "{\"id\":2,\"topic\":\"a\\\"b\\nc\",\"key\":null,\"type\":"
	       "\"t2\","
	       "\"payload\":{\"x\":[1,2]},\"headers\":{\"h\":1},"
	       "\"created_at\":\"2024-01-02T03:04:05Z\",\"attempts\":1}\n"
	       "{\"id\":3,\"topic\":\"orders\",\"key\":\"k3\","
	       "\"type\":\"order.created\",\"payload\":{\"n\":3},"
	       "\"headers\":{},\"created_at\":\"2024-01-02T03:04:05Z\","
	       "\"attempts\":0}\n";
	assert_string_equal(got, want);
	free(got);
	unlink(path);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
}

/* --- the child sees only its three fds --- */

static void test_no_fds_inherited(void **state)
{
	char cmd[256], path[128];
	struct tbatch t;
	pgo_sink_t sink;
	int leak, rc;
	char *got;

	(void)state;
	/* An fd opened without O_CLOEXEC by "someone else" in the host. */
	leak = dup(STDERR_FILENO);
	assert_true(leak > 2);
	snprintf(path, sizeof(path), "%s/fds", tmp_dir);
	snprintf(cmd, sizeof(cmd),
		 "cat >/dev/null; exec ls /proc/self/fd > '%s'", path);
	tbatch_init(&t, 1, 0);
	sink_init(&sink, cmd, 5000);
	drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	assert_int_equal(t.acks[0], PGO_ACK_OK);
	got = read_file(path);
	/* 0-2 plus the directory ls is reading. */
	assert_string_equal(got, "0\n1\n2\n3\n");
	free(got);
	unlink(path);
	close(leak);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
}

/* --- a timeout kills the whole process group --- */

static bool process_gone(pid_t pid)
{
	char path[64], buf[256];
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* Reparented to an init that does not reap: a zombie is gone too. */
	p = p ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' && p[2] == 'Z';
}

static void test_timeout_kills_group(void **state)
{
	char cmd[256], path[128];
	struct tbatch t;
	pgo_sink_t sink;
	int64_t ms, t0;
	pid_t bg;
	char *got;
	int rc;

	(void)state;
	snprintf(path, sizeof(path), "%s/bg", tmp_dir);
	/* The background sleep holds stdout and stderr open: the exit of the
	 * shell alone does not end the publish. */
	snprintf(cmd, sizeof(cmd), "sleep 30 & echo $! > '%s'; exit 0", path);
	tbatch_init(&t, 2, 0);
	sink_init(&sink, cmd, 300);
	ms = drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	assert_true(ms < 1300);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(t.acks[i], PGO_ACK_RETRY);
		assert_string_equal(t.errors[i],
				    "exec: command timed out after 300 ms");
	}
	got = read_file(path);
	bg = (pid_t)atoi(got);
	free(got);
	assert_true(bg > 0);
	t0 = pgo_now_ms();
	while (!process_gone(bg) && pgo_now_ms() - t0 < 2000)
		usleep(10000);
	assert_true(process_gone(bg));
	unlink(path);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
}

/* --- an error line is cut at 200 bytes, never inside a character --- */

static void test_stderr_line_cut(void **state)
{
	static const char prefix[] = "exec: exit status 1: ";
	struct tbatch t;
	pgo_sink_t sink;
	const char *e;
	int rc;

	(void)state;
	/* 199 'a' then 'é' (2 bytes): 201 bytes, cut before the 'é'. */
	tbatch_init(&t, 1, 0);
	sink_init(&sink,
		  "printf '%0199d\\303\\251tail\\n' 0 | tr 0 a >&2; exit 1", 0);
	drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	e = t.errors[0];
	assert_non_null(e);
	assert_int_equal(strncmp(e, prefix, strlen(prefix)), 0);
	assert_int_equal(strlen(e), strlen(prefix) + 199);
	assert_int_equal(strspn(e + strlen(prefix), "a"), 199);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
}

/* --- cancel at shutdown --- */

static void test_cancel(void **state)
{
	int fds = count_fds();
	int64_t t0;
	struct tbatch t;
	pgo_sink_t sink;
	int rc;

	(void)state;
	tbatch_init(&t, 2, 0);
	sink_init(&sink, "sleep 30", 60000);
	t0 = pgo_now_ms();
	rc = pgo_sink_submit(&sink, &t.b);
	assert_int_equal(rc, PGO_OK);
	assert_true(pgo_now_ms() - t0 < 1000); /* submit never waits */
	assert_int_equal(th.done, 0);
	assert_non_null(t.b.sink_state);
	/* The sink armed its timeout on the host's loop; without pidfds
	 * (valgrind 3.19 has no pidfd_open) the exit-polling tick comes
	 * first. */
	if (have_pidfd())
		assert_true(pgo_loop_next_timer(th.loop) >= t0 + 60000);
	else
		assert_true(pgo_loop_next_timer(th.loop) > t0);
	/* One round: the input gets written. */
	assert_int_equal(pgo_loop_run_once(th.loop, pgo_now_ms() + 1000), 0);
	assert_int_equal(th.done, 0);
	t0 = pgo_now_ms();
	pgo_sink_cancel(&sink, &t.b);
	assert_true(pgo_now_ms() - t0 < 1000);
	assert_null(t.b.sink_state);
	pgo_sink_cancel(&sink, &t.b); /* nothing in flight: a no-op */
	/* The loop has nothing of the batch left: no done, ever. */
	assert_int_equal(pgo_loop_next_timer(th.loop), 0);
	assert_int_equal(pgo_loop_run_once(th.loop, pgo_now_ms() + 50), 0);
	assert_int_equal(th.done, 0);
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
	assert_int_equal(count_fds(), fds);
}

/* --- batches in flight together, drain, stop --- */

static void test_batches_in_parallel(void **state)
{
	int fds = count_fds();
	struct tbatch t1, t2;
	pgo_sink_t sink;
	int64_t t0;

	(void)state;
	tbatch_init(&t1, 2, 0);
	tbatch_init(&t2, 3, 0);
	sink_init(&sink,
		  "cat >/dev/null; sleep 0.3; echo \"dead $PGOUTBOX_LAST_ID "
		  "late\"",
		  5000);
	t0 = pgo_now_ms();
	assert_int_equal(pgo_sink_submit(&sink, &t1.b), PGO_OK);
	assert_int_equal(pgo_sink_submit(&sink, &t2.b), PGO_OK);
	assert_true(pgo_now_ms() - t0 < 200); /* neither submit waited */
	turn_until_done(2, t0);
	/* Both commands ran at once: 0.3 s each, not 0.6 s in a row. */
	assert_true(th.done_at[1] - t0 < 550);
	assert_null(t1.b.sink_state);
	assert_null(t2.b.sink_state);
	assert_int_equal(t1.acks[0], PGO_ACK_OK);
	assert_int_equal(t1.acks[1], PGO_ACK_DEAD);
	assert_string_equal(t1.errors[1], "late");
	assert_int_equal(t2.acks[1], PGO_ACK_OK);
	assert_int_equal(t2.acks[2], PGO_ACK_DEAD);

	/* A batch still running when the host detaches is killed. */
	assert_int_equal(pgo_sink_submit(&sink, &t1.b), PGO_OK);
	assert_non_null(t1.b.sink_state);
	t0 = pgo_now_ms();
	pgo_sink_detach(&sink);
	assert_true(pgo_now_ms() - t0 < 1000);
	assert_null(t1.b.sink_state);
	assert_no_children();
	assert_int_equal(th.done, 2);

	/* Draining: nothing new is taken. */
	assert_int_equal(pgo_sink_attach(&sink, &th.host), PGO_OK);
	pgo_sink_drain(&sink, pgo_now_ms() + 1000);
	assert_int_not_equal(pgo_sink_submit(&sink, &t2.b), PGO_OK);
	assert_non_null(strstr(pgo_sink_errmsg(&sink), "stopping"));
	assert_null(t2.b.sink_state);
	assert_int_equal(th.done, 2);
	sink_fini(&sink);
	tbatch_free(&t1);
	tbatch_free(&t2);
	assert_no_children();
	assert_int_equal(count_fds(), fds);
}

/* --- a host that ignores SIGCHLD loses the exit status --- */

static void test_sigchld_ignored(void **state)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	struct tbatch t;
	pgo_sink_t sink;
	int rc;

	(void)state;
	sigemptyset(&ign.sa_mask);
	assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
	tbatch_init(&t, 2, 0);
	sink_init(&sink, "exit 0", 5000);
	drive(&sink, &t.b, &rc);
	assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
	assert_int_equal(rc, PGO_OK);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(t.acks[i], PGO_ACK_RETRY);
		assert_non_null(strstr(t.errors[i], "exit status unknown"));
	}
	sink_fini(&sink);
	tbatch_free(&t);
	assert_no_children();
}

/* --- the child's signals are reset, whatever the host set up --- */

static void test_signals_reset(void **state)
{
	static const int sigs[] = {SIGTERM, SIGPIPE, SIGHUP, SIGINT};
	struct sigaction ign = {.sa_handler = SIG_IGN}, old[4];
	sigset_t block, old_mask;

	(void)state;
	sigemptyset(&ign.sa_mask);
	sigemptyset(&block);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(sigaction(sigs[i], &ign, &old[i]), 0);
		if (sigs[i] != SIGPIPE)
			sigaddset(&block, sigs[i]);
	}
	assert_int_equal(sigprocmask(SIG_BLOCK, &block, &old_mask), 0);
	for (size_t i = 0; i < 4; i++) {
		char cmd[64], want[64];
		struct tbatch t;
		pgo_sink_t sink;
		int rc;

		snprintf(cmd, sizeof(cmd), "kill -%d $$; exit 0", sigs[i]);
		snprintf(want, sizeof(want), "exec: killed by signal %d",
			 sigs[i]);
		tbatch_init(&t, 1, 0);
		sink_init(&sink, cmd, 5000);
		drive(&sink, &t.b, &rc);
		assert_int_equal(rc, PGO_OK);
		assert_int_equal(t.acks[0], PGO_ACK_RETRY);
		assert_string_equal(t.errors[0], want);
		sink_fini(&sink);
		tbatch_free(&t);
	}
	assert_int_equal(sigprocmask(SIG_SETMASK, &old_mask, NULL), 0);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(sigaction(sigs[i], &old[i], NULL), 0);
	assert_no_children();
}

/* --- configuration --- */

static void test_configure(void **state)
{
	pgo_sink_t sink;
	struct tbatch t;
	int rc;

	(void)state;
	memset(&sink, 0, sizeof(sink));
	sink.ops = &pgo_sink_exec_ops;
	assert_string_equal(pgo_sink_exec_ops.name, "exec");
	assert_int_not_equal(sink.ops->open(&sink), PGO_OK);
	assert_non_null(strstr(sink.errmsg, "command"));
	assert_int_equal(pgo_sink_exec_configure(&sink, "", 1000),
			 PGO_ERR_INVALID);
	assert_int_equal(pgo_sink_exec_configure(&sink, NULL, 1000),
			 PGO_ERR_INVALID);
	assert_null(sink.priv);
	assert_int_equal(pgo_sink_exec_configure(&sink, "exit 1", 1000),
			 PGO_OK);
	/* A reconfigure replaces the settings (valgrind: without a leak). */
	assert_int_equal(pgo_sink_exec_configure(&sink, "exit 0", 2000),
			 PGO_OK);
	assert_string_equal(((struct pgo_exec_conf *)sink.priv)->command,
			    "exit 0");
	assert_int_equal(((struct pgo_exec_conf *)sink.priv)->timeout_ms, 2000);
	assert_int_equal(sink.ops->open(&sink), PGO_OK);
	assert_int_equal(pgo_sink_exec_ops.version, PGO_SINK_API_VERSION);
	/* Not attached to a host: nothing can run. */
	tbatch_init(&t, 1, 0);
	assert_int_not_equal(pgo_sink_submit(&sink, &t.b), PGO_OK);
	assert_null(t.b.sink_state);
	tbatch_free(&t);
	sink.ops->close(&sink);
	/* An empty batch needs no command at all: done inside submit. */
	sink_init(&sink, "exit 0", 2000);
	tbatch_init(&t, 0, 0);
	assert_int_equal(pgo_sink_submit(&sink, &t.b), PGO_OK);
	assert_int_equal(th.done, 1);
	assert_null(t.b.sink_state);
	drive(&sink, &t.b, &rc);
	assert_int_equal(rc, PGO_OK);
	tbatch_free(&t);
	sink_fini(&sink);
	sink.ops->close(&sink); /* twice: harmless */
	assert_no_children();
}

/* --- pgo_event_ndjson --- */

struct ndjson_case {
	const char *name;
	pgo_event_t ev;
	const char *want;
};

static const struct ndjson_case ndjson_cases[] = {
	{"plain",
	 {7, "t", "k", "ty", "{\"a\":1}", "{}", "2024-01-01T00:00:00Z", 2},
	 "{\"id\":7,\"topic\":\"t\",\"key\":\"k\",\"type\":\"ty\","
	 "\"payload\":{\"a\":1},\"headers\":{},"
	 "\"created_at\":\"2024-01-01T00:00:00Z\",\"attempts\":2}\n"},
	{"escapes_and_null_key",
	 {9223372036854775807LL, "q\"b\\s\n\r\t\x01", NULL,
	  "\x7f"
	  "é",
	  "[1]", "{\"h\":\"v\"}", "c", 0},
	 "{\"id\":9223372036854775807,\"topic\":"
	 "\"q\\\"b\\\\s\\n\\r\\t\\u0001\","
	 "\"key\":null,\"type\":\"\x7f"
	 "é\",\"payload\":[1],"
	 "\"headers\":{\"h\":\"v\"},\"created_at\":\"c\",\"attempts\":0}\n"},
	{"pretty_json_stays_one_line",
	 {1, "t", "", "ty", "{\n  \"a\": 1\r\n}", NULL, "c", 0},
	 "{\"id\":1,\"topic\":\"t\",\"key\":\"\",\"type\":\"ty\","
	 "\"payload\":{   \"a\": 1  },\"headers\":{},\"created_at\":\"c\","
	 "\"attempts\":0}\n"},
};

static void test_event_ndjson(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof(ndjson_cases) / sizeof(ndjson_cases[0]);
	     c++) {
		const struct ndjson_case *k = &ndjson_cases[c];
		size_t len = strlen(k->want);
		char buf[512];

		/* Size query, then every buffer size around the exact fit:
		 * the return value never changes and the text is always
		 * NUL-terminated. */
		assert_int_equal(pgo_event_ndjson(&k->ev, NULL, 0), len);
		for (size_t size = 1; size <= len + 2; size++) {
			memset(buf, '#', sizeof(buf));
			assert_int_equal(pgo_event_ndjson(&k->ev, buf, size),
					 len);
			if (size > len) {
				if (strcmp(buf, k->want) != 0)
					fail_msg("%s: got %s", k->name, buf);
			} else {
				assert_int_equal(strlen(buf), size - 1);
				assert_memory_equal(buf, k->want, size - 1);
			}
			assert_int_equal(buf[size], '#');
		}
	}
}

/* --- pgo_batch_fail, pgo_batch_fail_rest --- */

static void test_batch_fail(void **state)
{
	struct tbatch t;
	char msg[32];

	(void)state;
	tbatch_init(&t, 4, 0);
	t.acks[0] = PGO_ACK_OK;
	snprintf(msg, sizeof(msg), "first");
	pgo_batch_fail(&t.b, 1, PGO_ACK_DEAD, msg);
	msg[0] = 'X'; /* the batch holds its own copy */
	assert_int_equal(t.acks[1], PGO_ACK_DEAD);
	assert_string_equal(t.errors[1], "first");
	pgo_batch_fail(&t.b, 99, PGO_ACK_DEAD, "out of range: ignored");
	pgo_batch_fail_rest(&t.b, PGO_ACK_RETRY, "rest");
	assert_int_equal(t.acks[0], PGO_ACK_OK);
	assert_null(t.errors[0]);
	assert_int_equal(t.acks[1], PGO_ACK_DEAD);
	assert_string_equal(t.errors[1], "first");
	for (size_t i = 2; i < 4; i++) {
		assert_int_equal(t.acks[i], PGO_ACK_RETRY);
		assert_string_equal(t.errors[i], "rest");
	}
	tbatch_free(&t);
}

/* --- main --- */

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/test_sink_exec.XXXXXX");
	if (!mkdtemp(tmp_dir))
		return -1;
	pgo_log_set(capture_log, NULL, PGO_LOG_WARN);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	return rmdir(tmp_dir);
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_event_ndjson),
		cmocka_unit_test(test_batch_fail),
		cmocka_unit_test(test_configure),
		cmocka_unit_test(test_stdin_is_ndjson),
		cmocka_unit_test(test_no_fds_inherited),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_stderr_line_cut),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_batches_in_parallel),
		cmocka_unit_test(test_sigchld_ignored),
		cmocka_unit_test(test_signals_reset),
	};
	struct CMUnitTest tests[sizeof(fixed) / sizeof(fixed[0]) + N_CASES];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		tests[n++] = fixed[i];
	for (size_t i = 0; i < N_CASES; i++) {
		struct CMUnitTest u = {
			.name = cases[i].name,
			.test_func = run_case,
			.initial_state = (void *)&cases[i],
		};

		tests[n++] = u;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
