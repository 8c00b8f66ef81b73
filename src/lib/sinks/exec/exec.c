/*
 * sinks/exec/exec.c — the exec sink: runs `/bin/sh -c COMMAND` once per batch,
 * writes the batch to its stdin as NDJSON and reads per-event verdicts
 * from its stdout.
 *
 * Protocol seen by the command:
 *  - stdin: one pgo_event_ndjson() line per event, then EOF;
 *  - environment: PGOUTBOX_BATCH_SIZE, PGOUTBOX_FIRST_ID, PGOUTBOX_LAST_ID;
 *  - stdout: optional verdict lines `ok ID`, `retry ID reason...`,
 *    `dead ID reason...` (other lines are logged and ignored);
 *  - exit status 0 acks every event without a verdict line, provided the
 *    command read all of stdin (to EOF): one that left any of it unread
 *    (`head -c 10`, or never reading) acks only what its verdict lines
 *    say and the rest is retried; 126 and 127
 *    (the shell could not find or run the command) are an outage of the
 *    sink: the batch is UNAVAILABLE, spends no attempt and is claimed
 *    again once the relay's backoff ends, so fixing the command delivers
 *    everything; anything else (or a signal) makes the events without a
 *    verdict retriable, with the last line of stderr as the reason;
 *  - after exec_timeout the whole process group is killed with SIGKILL and
 *    the batch is retried.
 *
 * The child is a run of proc.c on the host's loop (sink interface version
 * 2): submit() starts it and returns at once, the run's pipes and pidfd
 * are watchers of the host's loop, and the run's end (the shell exited,
 * its stdout and stderr at EOF, or the timeout) sets the verdicts and
 * calls pgo_sink_done().  Several batches may be in flight, each with its
 * own child.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/exec/exec.h"
#include "loop/proc.h"
#include "base/buf.h"
#include "base/log.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

#define SUBJECT "sink exec"

#define STDOUT_MAX     (1024 * 1024) /* verdict text kept; the rest is drained */
#define STDERR_TAIL    4096	     /* stderr kept: the last bytes only */
#define ERRLINE_MAX    200	     /* stderr line quoted in an error */
#define REASON_MAX     1000	     /* reason of a verdict line */
#define WARN_LINES_MAX 5 /* malformed stdout lines logged per batch */

/* One batch in flight, kept in batch->sink_state. */
struct exec_run {
	struct exec_run *next; /* the sink's runs */
	pgo_sink_t *sink;
	pgo_batch_t *batch;
	pgo_proc_t *proc;
	int64_t timeout_ms; /* as configured when the batch started */
	size_t input_len;   /* bytes of NDJSON on its stdin */
};

/* The sink's state.  The configuration comes first: pgo_sink_priv() is a
 * struct pgo_exec_conf for pgo_sink_exec_configure()'s callers. */
struct exec_sink {
	struct pgo_exec_conf conf;
	struct exec_run *runs; /* the batches in flight */
	bool draining;	       /* the host stops: take nothing new */
};

static struct exec_sink *exec_state(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- text --- */

/* The length of the valid UTF-8 character of 2 to 4 bytes at p[0..n), or
 * 0: a lead byte that is not one, a sequence cut short, a byte that is not
 * a continuation, an overlong, surrogate or > U+10FFFF form. */
static size_t utf8_char_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len = 0;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	if (!len || len > n)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return len;
}

static bool is_blank(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* Copies at most max bytes of s[0..n) into dst (size > max) as one line of
 * valid UTF-8 that PostgreSQL accepts in a text column: control bytes
 * become spaces, bytes that are not UTF-8 become '?', and a multi-byte
 * character is never cut.  Leading and trailing blanks are trimmed. */
static void sanitize_line(char *dst, size_t max, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0;

	while (n > 0 &&
	       (is_blank(p[n - 1]) || p[n - 1] == '\r' || p[n - 1] == '\n'))
		n--;
	while (i < n && is_blank(p[i]))
		i++;
	while (i < n && o < max) {
		unsigned char c = p[i];
		size_t len;

		if (c < 0x80) {
			dst[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
			i++;
			continue;
		}
		len = utf8_char_len(p + i, n - i);
		if (len) {
			if (o + len > max)
				break;
			memcpy(dst + o, p + i, len);
			o += len;
			i += len;
			continue;
		}
		dst[o++] = '?';
		i++;
	}
	dst[o] = '\0';
}

/* The last non-empty line of the stderr tail, sanitized. */
static void stderr_last_line(const pgo_proc_result_t *res, char *dst,
			     size_t max)
{
	const char *s = res->err;
	size_t end = res->err_len, start;

	while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r' ||
			   s[end - 1] == ' ' || s[end - 1] == '\t'))
		end--;
	start = end;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	sanitize_line(dst, max, s + start, end - start);
}

/* --- verdicts --- */

struct id_slot {
	int64_t id;
	size_t index;
};

static int id_slot_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct id_slot *)a)->id;
	int64_t y = ((const struct id_slot *)b)->id;

	return (x > y) - (x < y);
}

/* The index of event `id` in the batch, or -1. */
static ssize_t find_event(const pgo_batch_t *b, const struct id_slot *index,
			  int64_t id)
{
	if (index) {
		struct id_slot key = {id, 0};
		const struct id_slot *hit =
			bsearch(&key, index, b->n, sizeof(*index), id_slot_cmp);

		return hit ? (ssize_t)hit->index : -1;
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->events[i].id == id)
			return (ssize_t)i;
	return -1;
}

/* Parses "VERB ID[ REASON]".  Returns the verdict (PGO_ACK_NONE for a
 * malformed line) and fills *id and the reason's span. */
static pgo_ack_t parse_verdict(const char *s, size_t n, int64_t *id,
			       const char **reason, size_t *reason_len)
{
	static const struct {
		const char *verb;
		pgo_ack_t ack;
	} verbs[] = {
		{"ok", PGO_ACK_OK},
		{"retry", PGO_ACK_RETRY},
		{"dead", PGO_ACK_DEAD},
	};
	pgo_ack_t ack = PGO_ACK_NONE;
	size_t i = 0, w;
	int64_t v = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	for (w = 0; w < sizeof(verbs) / sizeof(verbs[0]); w++) {
		size_t len = strlen(verbs[w].verb);

		if (n - i > len && memcmp(s + i, verbs[w].verb, len) == 0 &&
		    (s[i + len] == ' ' || s[i + len] == '\t')) {
			ack = verbs[w].ack;
			i += len;
			break;
		}
	}
	if (ack == PGO_ACK_NONE)
		return PGO_ACK_NONE;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == n || s[i] < '0' || s[i] > '9')
		return PGO_ACK_NONE;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (INT64_MAX - (s[i] - '0')) / 10)
			return PGO_ACK_NONE;
		v = v * 10 + (s[i] - '0');
	}
	if (i < n && s[i] != ' ' && s[i] != '\t')
		return PGO_ACK_NONE;
	*id = v;
	*reason = s + i;
	*reason_len = n - i;
	return ack;
}

/* Applies the verdict lines the command printed on stdout. */
static void apply_stdout(pgo_batch_t *b, const pgo_proc_result_t *res)
{
	struct id_slot *index = NULL;
	const char *p = res->out, *end = p + res->out_len;
	size_t line_no = 0, ignored = 0;
	char text[REASON_MAX + 1];

	if (res->out_len == 0)
		return;
	/* Ids are looked up in a sorted copy; without memory, linearly. */
	index = malloc(b->n * sizeof(*index));
	if (index) {
		for (size_t i = 0; i < b->n; i++) {
			index[i].id = b->events[i].id;
			index[i].index = i;
		}
		qsort(index, b->n, sizeof(*index), id_slot_cmp);
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len;
		const char *reason;
		size_t reason_len;
		int64_t id;
		pgo_ack_t ack;
		ssize_t ev;

		/* A cut-off last line is not a verdict: after the cap, or
		 * when the command was killed mid-write ("ok 1" of "ok 12"). */
		if (!nl && (res->out_capped || res->end == PGO_PROC_TIMED_OUT))
			break;
		len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		line_no++;
		if (len > 0 && p[len - 1] == '\r')
			len--;
		if (len == 0 || strspn(p, " \t") >= len) {
			p = nl ? nl + 1 : end;
			continue;
		}
		ack = parse_verdict(p, len, &id, &reason, &reason_len);
		ev = ack == PGO_ACK_NONE ? -1 : find_event(b, index, id);
		if (ev < 0) {
			if (ignored++ < WARN_LINES_MAX) {
				sanitize_line(text, 80, p, len);
				if (ack == PGO_ACK_NONE)
					pgo_log(PGO_LOG_WARN, SUBJECT,
						"ignoring stdout line %zu, not "
						"a verdict: %s",
						line_no, text);
				else
					pgo_log(PGO_LOG_WARN, SUBJECT,
						"ignoring verdict for id "
						"%" PRId64
						", not in this batch",
						id);
			}
		} else if (ack == PGO_ACK_OK) {
			b->acks[ev] = PGO_ACK_OK;
			if (b->errors)
				b->errors[ev] = NULL;
		} else {
			sanitize_line(text, REASON_MAX, reason, reason_len);
			if (!text[0])
				snprintf(text, sizeof(text), "%s",
					 ack == PGO_ACK_DEAD
						 ? "exec: rejected by command"
						 : "exec: retry requested by "
						   "command");
			pgo_batch_fail(b, (size_t)ev, ack, text);
		}
		p = nl ? nl + 1 : end;
	}
	if (ignored > WARN_LINES_MAX)
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"%zu more stdout lines ignored in this batch",
			ignored - WARN_LINES_MAX);
	free(index);
}

/* The shell's "command not found" (127) or "cannot execute" (126): the
 * sink is misconfigured or its program is being replaced, which is no
 * event's fault.  The whole batch goes back untouched (a batch with an
 * UNAVAILABLE verdict is not settled), whatever the command printed. */
static bool command_missing(const pgo_proc_result_t *res)
{
	return res->end == PGO_PROC_EXITED &&
	       (res->status == 126 || res->status == 127);
}

/* The command is gone and its output read: every event gets a verdict. */
void pgo_sink_exec_decide(pgo_batch_t *b, const pgo_proc_result_t *res,
			  size_t input_len)
{
	char line[ERRLINE_MAX + 1];
	char msg[320];

	apply_stdout(b, res);
	if (res->end == PGO_PROC_EXITED && res->status == 0 &&
	    res->in_unread > 0) {
		/* Exit 0 is no ack for events the command never read: only
		 * its verdict lines stand. */
		snprintf(msg, sizeof(msg),
			 "exec: exit status 0, but the command left %zu of "
			 "%zu bytes of its input unread",
			 res->in_unread, input_len);
		pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
		return;
	}
	if (res->end == PGO_PROC_EXITED && res->status == 0) {
		for (size_t i = 0; i < b->n; i++)
			if (b->acks[i] == PGO_ACK_NONE)
				b->acks[i] = PGO_ACK_OK;
		return;
	}
	stderr_last_line(res, line, ERRLINE_MAX);
	if (res->end == PGO_PROC_LOST)
		snprintf(msg, sizeof(msg),
			 "exec: exit status unknown (child reaped elsewhere)");
	else if (command_missing(res))
		snprintf(msg, sizeof(msg), "exec: exit status %d (%s)",
			 res->status,
			 res->status == 127 ? "command not found"
					    : "command not executable");
	else if (res->end == PGO_PROC_EXITED)
		snprintf(msg, sizeof(msg), "exec: exit status %d", res->status);
	else
		snprintf(msg, sizeof(msg), "exec: killed by signal %d",
			 res->status);
	if (line[0]) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", line);
	}
	pgo_batch_fail_rest(
		b, command_missing(res) ? PGO_ACK_UNAVAILABLE : PGO_ACK_RETRY,
		msg);
}

/* The verdict lines printed before the timeout stand (fewer duplicates);
 * the rest of the batch is retried. */
static void fail_timeout(pgo_batch_t *b, const pgo_proc_result_t *res,
			 int64_t timeout_ms)
{
	char msg[96];

	apply_stdout(b, res);
	snprintf(msg, sizeof(msg),
		 "exec: command timed out after %" PRId64 " ms", timeout_ms);
	pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
}

/* --- runs --- */

static void run_unlink(struct exec_sink *x, struct exec_run *run)
{
	for (struct exec_run **pp = &x->runs; *pp; pp = &(*pp)->next)
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	run->batch->sink_state = NULL;
	free(run);
}

/* The run ended: every event gets its verdict, the host its batch. */
static void run_done(void *arg, const pgo_proc_result_t *res)
{
	struct exec_run *run = arg;
	pgo_sink_t *sink = run->sink;
	pgo_batch_t *b = run->batch;

	if (res->end == PGO_PROC_TIMED_OUT) {
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"command timed out after %" PRId64
			" ms; process group %d killed",
			run->timeout_ms, (int)res->pid);
		fail_timeout(b, res, run->timeout_ms);
	} else {
		pgo_sink_exec_decide(b, res, run->input_len);
	}
	run_unlink(exec_state(sink), run);
	pgo_sink_done(sink, b);
}

/* The batch as NDJSON, each line written straight into the buffer; a line
 * that did not fit is written again after growing it.  False on OOM. */
static bool batch_ndjson(const pgo_batch_t *b, pgo_buf_t *in)
{
	for (size_t i = 0; i < b->n; i++) {
		size_t room, need;

		if (!pgo_buf_reserve(in, 512))
			return false;
		room = in->cap - in->len;
		need = pgo_event_ndjson(&b->events[i], in->data + in->len,
					room);
		if (need >= room) {
			if (!pgo_buf_reserve(in, need))
				return false;
			pgo_event_ndjson(&b->events[i], in->data + in->len,
					 in->cap - in->len);
		}
		in->len += need;
	}
	return !in->oom;
}

/* --- ops --- */

static int exec_open(pgo_sink_t *sink)
{
	struct exec_sink *x = exec_state(sink);

	if (!x || !x->conf.command || !x->conf.command[0]) {
		pgo_sink_set_error(
			sink,
			"exec sink: no command configured (sink.exec_command)");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}

static int exec_start(pgo_sink_t *sink)
{
	if (!sink->host || !sink->host->loop) {
		pgo_sink_set_error(sink, "exec sink: the host has no loop");
		return PGO_ERR_INVALID;
	}
	exec_state(sink)->draining = false;
	return PGO_OK;
}

static int exec_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct exec_sink *x = exec_state(sink);
	char size_var[48], first_var[48], last_var[48];
	const char *env[] = {size_var, first_var, last_var, NULL};
	pgo_proc_spec_t spec;
	struct exec_run *run;
	const char *what;
	pgo_buf_t in;
	int rc;

	if (!x || !x->conf.command) {
		pgo_sink_set_error(sink, "exec sink: no command configured");
		return PGO_ERR_CONFIG;
	}
	if (!sink->host || !sink->host->loop) {
		pgo_sink_set_error(sink, "exec sink: not attached to a host");
		return PGO_ERR_INVALID;
	}
	if (x->draining) {
		pgo_sink_set_error(sink, "exec sink: stopping");
		return PGO_ERR_SINK;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	run = calloc(1, sizeof(*run));
	pgo_buf_init(&in);
	if (!run || !batch_ndjson(b, &in)) {
		free(run);
		pgo_buf_free(&in);
		pgo_sink_set_error(
			sink,
			"exec sink: out of memory building the batch input");
		return PGO_ERR_NOMEM;
	}
	snprintf(size_var, sizeof(size_var), "PGOUTBOX_BATCH_SIZE=%zu", b->n);
	snprintf(first_var, sizeof(first_var), "PGOUTBOX_FIRST_ID=%" PRId64,
		 b->events[0].id);
	snprintf(last_var, sizeof(last_var), "PGOUTBOX_LAST_ID=%" PRId64,
		 b->events[b->n - 1].id);
	run->sink = sink;
	run->batch = b;
	run->timeout_ms = x->conf.timeout_ms;
	run->input_len = in.len;
	spec = (pgo_proc_spec_t){
		.command = x->conf.command,
		.env = env,
		.input = in.data,
		.input_len = in.len,
		.out_max = STDOUT_MAX,
		.err_tail = STDERR_TAIL,
		.timeout_ms = x->conf.timeout_ms,
		.wait_output = true,
		.count_unread = true,
		.subject = SUBJECT,
		.done = run_done,
		.arg = run,
	};
	rc = pgo_proc_start(sink->host->loop, &spec, &run->proc, &what);
	if (rc != 0) {
		/* The batch has its verdicts: taken, and done at once. */
		char msg[256];

		snprintf(msg, sizeof(msg), "exec: %s: %s", what, strerror(rc));
		pgo_log(PGO_LOG_WARN, SUBJECT, "%s", msg + 6);
		/* No pipe or no fork (out of fds or processes): the host
		 * is short of resources, not the events at fault. */
		pgo_batch_fail_rest(b, PGO_ACK_UNAVAILABLE, msg);
		pgo_buf_free(&in);
		free(run);
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	pgo_log(PGO_LOG_DEBUG, SUBJECT,
		"started pid %d for %zu events (%zu bytes)",
		(int)pgo_proc_pid(run->proc), b->n, in.len);
	pgo_buf_free(&in);
	run->next = x->runs;
	x->runs = run;
	b->sink_state = run;
	return PGO_OK;
}

/* Kills the batch's command (its whole group) and forgets the batch. */
static void exec_cancel(pgo_sink_t *sink, pgo_batch_t *batch)
{
	struct exec_run *run = batch->sink_state;

	if (!run)
		return;
	pgo_proc_cancel(run->proc);
	run_unlink(exec_state(sink), run);
}

/* Nothing to hurry: each command has its timeout, and the host cancels
 * what is left at the deadline. */
static void exec_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	(void)deadline_ms;
	exec_state(sink)->draining = true;
}

/* Detached: the commands still running lose their host. */
static void exec_stop(pgo_sink_t *sink)
{
	struct exec_sink *x = exec_state(sink);

	while (x && x->runs)
		exec_cancel(sink, x->runs->batch);
}

static void exec_close(pgo_sink_t *sink)
{
	struct exec_sink *x = exec_state(sink);

	if (!x)
		return;
	exec_stop(sink);
	free(x->conf.command);
	free(x);
	sink->priv = NULL;
}

int pgo_sink_exec_configure(pgo_sink_t *sink, const char *command,
			    int64_t timeout_ms)
{
	struct exec_sink *x;

	if (!command || !*command) {
		pgo_sink_set_error(
			sink,
			"exec sink: the command is empty (sink.exec_command)");
		return PGO_ERR_INVALID;
	}
	x = calloc(1, sizeof(*x));
	if (x)
		x->conf.command = strdup(command);
	if (!x || !x->conf.command) {
		free(x);
		pgo_sink_set_error(sink, "exec sink: out of memory");
		return PGO_ERR_NOMEM;
	}
	x->conf.timeout_ms = timeout_ms;
	exec_close(sink); /* a reconfigure replaces the old settings */
	sink->priv = x;
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_exec_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "exec",
	.open = exec_open,
	.start = exec_start,
	.submit = exec_submit,
	.cancel = exec_cancel,
	.drain = exec_drain,
	.stop = exec_stop,
	.close = exec_close,
};
