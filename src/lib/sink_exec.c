/*
 * sink_exec.c — the exec sink: runs `/bin/sh -c COMMAND` once per batch,
 * writes the batch to its stdin as NDJSON and reads per-event verdicts
 * from its stdout.
 *
 * Protocol seen by the command:
 *  - stdin: one pgo_event_ndjson() line per event, then EOF;
 *  - environment: PGOUTBOX_BATCH_SIZE, PGOUTBOX_FIRST_ID, PGOUTBOX_LAST_ID;
 *  - stdout: optional verdict lines `ok ID`, `retry ID reason...`,
 *    `dead ID reason...` (other lines are logged and ignored);
 *  - exit status 0 acks every event without a verdict line; anything else
 *    (or a signal) makes them retriable, with the last line of stderr as
 *    the reason;
 *  - after exec_timeout the whole process group is killed with SIGKILL and
 *    the batch is retried.
 *
 * Nothing here blocks the relay's loop.  A publish needs four fds at once
 * (stdin, stdout, stderr and a pidfd for the exit), while the sink API
 * hands the loop a single fd, so each publish owns an epoll instance that
 * watches the four; the loop polls the epoll fd and resume() does whatever
 * non-blocking work became possible.  The child runs in its own process
 * group so that a timeout also kills whatever it started.  The child is
 * observed with WNOWAIT and reaped only at the end, so its pid, and with
 * it the process group id we signal, cannot be recycled meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pgo_int.h"

#define SUBJECT "sink exec"

#define STDOUT_MAX	 (1024 * 1024) /* verdict text kept; the rest is drained */
#define STDERR_TAIL	 4096	       /* stderr kept: the last bytes only */
#define ERRLINE_MAX	 200	       /* stderr line quoted in an error */
#define REASON_MAX	 1000	       /* reason of a verdict line */
#define WARN_LINES_MAX	 5     /* malformed stdout lines logged per batch */
#define READ_CHUNK	 65536 /* bytes read per read() */
#define READS_PER_RESUME 16    /* then yield to the loop (level-triggered) */
#define REAP_TICK_MS	 20    /* exit polling when pidfds are missing */

/* What each fd registered in the epoll instance is. */
enum exec_tag { TAG_STDIN = 0, TAG_STDOUT = 1, TAG_STDERR = 2, TAG_PIDFD = 3 };

/* Per-publish state, kept in batch->sink_state. */
struct exec_run {
	pid_t pid;  /* the shell, also its process group id; -1 once reaped */
	int pidfd;  /* readable when the shell exits; -1 if unsupported or
		     * once the exit was seen */
	int epfd;   /* the one fd the relay waits on */
	int in_fd;  /* write end of the child's stdin; -1 once done */
	int out_fd; /* read end of the child's stdout; -1 at EOF */
	int err_fd; /* read end of the child's stderr; -1 at EOF */
	int64_t timeout_ms; /* as configured when the publish started */
	int64_t deadline;   /* CLOCK_MONOTONIC ms when the command is killed;
			     * 0 = never */

	pgo_buf_t input; /* the batch as NDJSON */
	size_t written;	 /* bytes of input the child has taken */

	pgo_buf_t out;	 /* stdout, at most STDOUT_MAX bytes */
	bool out_capped; /* stdout went beyond STDOUT_MAX (warned once) */

	char err_tail[STDERR_TAIL]; /* the last bytes of stderr */
	size_t err_len;

	bool exited; /* the shell's exit was seen (not yet reaped) */
	bool lost;   /* the shell was reaped by someone else (SIGCHLD
		      * ignored): its status is unknown */
	int how;     /* CLD_EXITED, CLD_KILLED or CLD_DUMPED */
	int status;  /* exit status or signal number */
	bool killed; /* timed out: SIGKILL sent, waiting to reap */
};

static struct pgo_exec_conf *exec_conf(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- fds --- */

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Drops an fd from the epoll set, then closes it. */
static void drop_fd(struct exec_run *r, int *fd)
{
	if (*fd < 0)
		return;
	if (r->epfd >= 0)
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close_fd(fd);
}

static int watch_fd(struct exec_run *r, int fd, uint32_t events,
		    enum exec_tag tag)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.u32 = tag;
	return epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Moves an fd the child will dup2() onto 0, 1 or 2 out of that range, so
 * that one dup2 cannot clobber the source of the next (possible when the
 * host process runs with a standard stream closed). */
static int lift_above_stdio(int *fd)
{
	int nfd;

	if (*fd > 2)
		return 0;
	nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		return -1;
	close(*fd);
	*fd = nfd;
	return 0;
}

/* --- SIGPIPE ---
 * A write to a pipe whose reader left raises SIGPIPE, which would kill a
 * host that kept the default disposition.  As libpq does for its sockets
 * on platforms without MSG_NOSIGNAL: block SIGPIPE around the writes, and
 * swallow the one our EPIPE queued unless one was already pending. */

struct sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
	sigset_t pipe_set, pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
	g->was_pending = false;
	if (sigismember(&g->old, SIGPIPE) && sigpending(&pending) == 0)
		g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_restore(struct sigpipe_guard *g, bool got_epipe)
{
	if (got_epipe && !g->was_pending) {
		sigset_t pipe_set;
		struct timespec zero = {0, 0};

		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* --- text --- */

/* Copies at most max bytes of s[0..n) into dst (size > max) as one line of
 * valid UTF-8 that PostgreSQL accepts in a text column: control bytes
 * become spaces, bytes that are not UTF-8 become '?', and a multi-byte
 * character is never cut.  Leading and trailing blanks are trimmed. */
static void sanitize_line(char *dst, size_t max, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0;

	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' ||
			 p[n - 1] == '\r' || p[n - 1] == '\n'))
		n--;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	while (i < n && o < max) {
		unsigned char c = p[i];
		size_t len = 0;

		if (c < 0x80) {
			dst[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4;
		if (len && i + len <= n) {
			size_t k;

			for (k = 1; k < len; k++)
				if ((p[i + k] & 0xc0) != 0x80)
					break;
			/* Overlong, surrogate and > U+10FFFF forms. */
			if (k == len && !(c == 0xe0 && p[i + 1] < 0xa0) &&
			    !(c == 0xed && p[i + 1] > 0x9f) &&
			    !(c == 0xf0 && p[i + 1] < 0x90) &&
			    !(c == 0xf4 && p[i + 1] > 0x8f)) {
				if (o + len > max)
					break;
				memcpy(dst + o, p + i, len);
				o += len;
				i += len;
				continue;
			}
		}
		dst[o++] = '?';
		i++;
	}
	dst[o] = '\0';
}

/* The last non-empty line of the stderr tail, sanitized. */
static void stderr_last_line(const struct exec_run *r, char *dst, size_t max)
{
	const char *s = r->err_tail;
	size_t end = r->err_len, start;

	while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r' ||
			   s[end - 1] == ' ' || s[end - 1] == '\t'))
		end--;
	start = end;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	sanitize_line(dst, max, s + start, end - start);
}

/* --- per-publish state --- */

static void run_free(struct exec_run *r)
{
	if (!r)
		return;
	drop_fd(r, &r->in_fd);
	drop_fd(r, &r->out_fd);
	drop_fd(r, &r->err_fd);
	drop_fd(r, &r->pidfd);
	close_fd(&r->epfd);
	pgo_buf_free(&r->input);
	pgo_buf_free(&r->out);
	free(r);
}

static void finish(pgo_batch_t *batch, struct exec_run *r)
{
	run_free(r);
	batch->sink_state = NULL;
}

/* Records the shell's exit if it happened, without reaping it. */
static void check_exit(struct exec_run *r)
{
	siginfo_t si;

	if (r->exited || r->pid < 0)
		return;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno != ECHILD)
			return;
		/* Reaped behind our back (the host ignores SIGCHLD). */
		r->exited = true;
		r->lost = true;
		r->pid = -1;
	} else if (si.si_pid != r->pid) {
		return;
	} else {
		r->exited = true;
		r->how = si.si_code;
		r->status = si.si_status;
	}
	/* A pidfd stays readable after the exit: stop watching it. */
	drop_fd(r, &r->pidfd);
}

/* Collects the exited shell. */
static void reap(struct exec_run *r)
{
	siginfo_t si;

	if (r->pid < 0)
		return;
	while (waitid(P_PID, (id_t)r->pid, &si, WEXITED) < 0 && errno == EINTR)
		;
	r->pid = -1;
}

/* SIGKILL to the whole process group (the shell leads it). */
static void kill_group(struct exec_run *r)
{
	if (r->pid < 0)
		return;
	if (kill(-r->pid, SIGKILL) < 0)
		kill(r->pid, SIGKILL);
}

/* --- I/O --- */

static void feed_stdin(struct exec_run *r)
{
	struct sigpipe_guard g;
	bool epipe = false;

	sigpipe_block(&g);
	while (r->written < r->input.len) {
		ssize_t n = write(r->in_fd, r->input.data + r->written,
				  r->input.len - r->written);

		if (n > 0) {
			r->written += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* EPIPE: the command exited or closed stdin without reading
		 * everything.  Not an error by itself: its exit status says
		 * whether the batch went through. */
		if (n < 0 && errno == EPIPE) {
			epipe = true;
			pgo_log(PGO_LOG_DEBUG, SUBJECT,
				"command closed stdin after %zu of %zu bytes",
				r->written, r->input.len);
		} else {
			pgo_log(PGO_LOG_WARN, SUBJECT, "write to stdin: %s",
				n < 0 ? strerror(errno) : "no progress");
		}
		r->written = r->input.len; /* give up on the rest */
		break;
	}
	sigpipe_restore(&g, epipe);
	if (r->written >= r->input.len) {
		/* All written (or abandoned): the child sees EOF.  The input
		 * is not needed any more. */
		drop_fd(r, &r->in_fd);
		pgo_buf_free(&r->input);
		r->written = 0;
	}
}

static void drain_stdout(struct exec_run *r)
{
	char scratch[4096];

	for (int i = 0; i < READS_PER_RESUME; i++) {
		size_t room = STDOUT_MAX - r->out.len;
		char *dst = scratch;
		size_t want = sizeof(scratch);
		ssize_t n;

		if (room > 0 && !r->out.oom) {
			want = room < READ_CHUNK ? room : READ_CHUNK;
			if (pgo_buf_reserve(&r->out, want))
				dst = r->out.data + r->out.len;
			else
				want = sizeof(scratch);
		}
		n = read(r->out_fd, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			if (n < 0)
				pgo_log(PGO_LOG_WARN, SUBJECT,
					"read from stdout: %s",
					strerror(errno));
			drop_fd(r, &r->out_fd);
			return;
		}
		if (dst != scratch) {
			r->out.len += (size_t)n;
			r->out.data[r->out.len] = '\0';
		} else if (!r->out_capped) {
			/* Over the cap, or the buffer could not grow: the
			 * rest is drained so the command does not block. */
			r->out_capped = true;
			pgo_log(PGO_LOG_WARN, SUBJECT, "%s",
				r->out.oom ? "out of memory reading stdout; "
					     "the rest is ignored"
					   : "command wrote more than 1 MiB "
					     "on stdout; the rest is ignored");
		}
	}
}

static void tail_append(struct exec_run *r, const char *p, size_t n)
{
	if (n >= STDERR_TAIL) {
		memcpy(r->err_tail, p + n - STDERR_TAIL, STDERR_TAIL);
		r->err_len = STDERR_TAIL;
		return;
	}
	if (r->err_len + n > STDERR_TAIL) {
		size_t drop = r->err_len + n - STDERR_TAIL;

		memmove(r->err_tail, r->err_tail + drop, r->err_len - drop);
		r->err_len -= drop;
	}
	memcpy(r->err_tail + r->err_len, p, n);
	r->err_len += n;
}

static void drain_stderr(struct exec_run *r)
{
	char chunk[2 * STDERR_TAIL];

	for (int i = 0; i < READS_PER_RESUME; i++) {
		ssize_t n = read(r->err_fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			if (n < 0)
				pgo_log(PGO_LOG_WARN, SUBJECT,
					"read from stderr: %s",
					strerror(errno));
			drop_fd(r, &r->err_fd);
			return;
		}
		tail_append(r, chunk, (size_t)n);
	}
}

/* Does the work the ready fds allow.  Returns -1 (errno set) if epoll
 * itself failed. */
static int pump(struct exec_run *r)
{
	struct epoll_event evs[4];
	int n;

	do
		n = epoll_wait(r->epfd, evs, 4, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		switch (evs[i].data.u32) {
		case TAG_STDIN:
			if (r->in_fd >= 0)
				feed_stdin(r);
			break;
		case TAG_STDOUT:
			if (r->out_fd >= 0)
				drain_stdout(r);
			break;
		case TAG_STDERR:
			if (r->err_fd >= 0)
				drain_stderr(r);
			break;
		case TAG_PIDFD: break; /* check_exit() follows */
		}
	}
	return 0;
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
static void apply_stdout(pgo_batch_t *b, struct exec_run *r)
{
	struct id_slot *index = NULL;
	const char *p = r->out.data, *end = p + r->out.len;
	size_t line_no = 0, ignored = 0;
	char text[REASON_MAX + 1];

	if (r->out.len == 0)
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
		if (!nl && (r->out_capped || r->killed))
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

/* The command is gone and its output read: every event gets a verdict. */
static void decide(pgo_batch_t *b, struct exec_run *r)
{
	char line[ERRLINE_MAX + 1];
	char msg[320];

	apply_stdout(b, r);
	if (!r->lost && r->how == CLD_EXITED && r->status == 0) {
		for (size_t i = 0; i < b->n; i++)
			if (b->acks[i] == PGO_ACK_NONE)
				b->acks[i] = PGO_ACK_OK;
		return;
	}
	stderr_last_line(r, line, ERRLINE_MAX);
	if (r->lost)
		snprintf(msg, sizeof(msg),
			 "exec: exit status unknown (child reaped elsewhere)");
	else if (r->how == CLD_EXITED)
		snprintf(msg, sizeof(msg), "exec: exit status %d", r->status);
	else
		snprintf(msg, sizeof(msg), "exec: killed by signal %d",
			 r->status);
	if (line[0]) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", line);
	}
	pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
}

/* The verdict lines printed before the timeout stand (fewer duplicates);
 * the rest of the batch is retried. */
static void fail_timeout(pgo_batch_t *b, struct exec_run *r)
{
	char msg[96];

	apply_stdout(b, r);
	snprintf(msg, sizeof(msg),
		 "exec: command timed out after %" PRId64 " ms", r->timeout_ms);
	pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
}

/* Gives up on a running command after a system error: kill, reap (SIGKILL
 * cannot be caught, so the wait is short), fail what is left. */
static int abandon(pgo_batch_t *b, struct exec_run *r, const char *what,
		   int err)
{
	char msg[256];

	kill_group(r);
	if (!r->exited)
		check_exit(r);
	reap(r);
	snprintf(msg, sizeof(msg), "exec: %s: %s", what, strerror(err));
	pgo_log(PGO_LOG_WARN, SUBJECT, "%s", msg + 6);
	pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
	finish(b, r);
	return PGO_OK;
}

/* What the relay waits on next. */
static void wait_on(struct exec_run *r, int *fd, short *events,
		    int64_t *deadline_ms)
{
	int64_t d = r->killed ? 0 : r->deadline;

	/* Without a pidfd the exit is only noticed by polling. */
	if (!r->exited && r->pidfd < 0) {
		int64_t tick = pgo_now_ms() + REAP_TICK_MS;

		if (d == 0 || tick < d)
			d = tick;
	}
	*fd = r->epfd;
	*events = POLLIN;
	*deadline_ms = d;
}

/* --- spawning --- */

/* environ without our variables, plus them; NULL on OOM. */
static char **child_env(char *const *vars)
{
	static const char *const names[] = {
		"PGOUTBOX_BATCH_SIZE=", "PGOUTBOX_FIRST_ID=",
		"PGOUTBOX_LAST_ID="};
	size_t n = 0, o = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = malloc((n + 4) * sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool ours = false;

		for (size_t k = 0; k < 3; k++)
			if (strncmp(environ[i], names[k], strlen(names[k])) ==
			    0)
				ours = true;
		if (!ours)
			env[o++] = environ[i];
	}
	for (size_t k = 0; k < 3; k++)
		env[o++] = vars[k];
	env[o] = NULL;
	return env;
}

/* Starts the shell with the pipe ends given as its 0, 1, 2.  Returns 0 or
 * an errno value. */
static int spawn_shell(const char *command, const pgo_batch_t *b, int in_r,
		       int out_w, int err_w, pid_t *pid)
{
	static const int reset[] = {SIGPIPE, SIGTERM, SIGHUP,  SIGINT, SIGQUIT,
				    SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};
	char size_var[48], first_var[48], last_var[48];
	char *vars[3] = {size_var, first_var, last_var};
	char *argv[] = {"sh", "-c", (char *)command, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl, none;
	char **env;
	int rc;

	snprintf(size_var, sizeof(size_var), "PGOUTBOX_BATCH_SIZE=%zu", b->n);
	snprintf(first_var, sizeof(first_var), "PGOUTBOX_FIRST_ID=%" PRId64,
		 b->events[0].id);
	snprintf(last_var, sizeof(last_var), "PGOUTBOX_LAST_ID=%" PRId64,
		 b->events[b->n - 1].id);
	env = child_env(vars);
	if (!env)
		return ENOMEM;

	sigemptyset(&none);
	sigemptyset(&dfl);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		sigaddset(&dfl, reset[i]);

	rc = posix_spawnattr_init(&attr);
	if (rc != 0) {
		free(env);
		return rc;
	}
	rc = posix_spawn_file_actions_init(&fa);
	if (rc != 0) {
		posix_spawnattr_destroy(&attr);
		free(env);
		return rc;
	}
	/* Own process group (the timeout kills all of it), default signal
	 * dispositions, nothing blocked: whatever the host process set up. */
	if (!rc)
		rc = posix_spawnattr_setflags(
			&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
				       POSIX_SPAWN_SETSIGMASK);
	if (!rc)
		rc = posix_spawnattr_setpgroup(&attr, 0);
	if (!rc)
		rc = posix_spawnattr_setsigdefault(&attr, &dfl);
	if (!rc)
		rc = posix_spawnattr_setsigmask(&attr, &none);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, in_r, STDIN_FILENO);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, out_w,
						      STDOUT_FILENO);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, err_w,
						      STDERR_FILENO);
#if defined(__GLIBC__) &&                                                      \
	(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	/* Our fds are all O_CLOEXEC; this also covers fds that other code
	 * in the host process opened without it. */
	if (!rc)
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
	if (!rc)
		rc = posix_spawn(pid, "/bin/sh", &fa, &attr, argv, env);

	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(env);
	return rc;
}

/* Fails the batch for a command that could not be started.  The batch
 * has its verdicts, so this is PGO_OK for the relay. */
static int fail_start(pgo_batch_t *b, struct exec_run *r, const char *what,
		      int err)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "exec: %s: %s", what, strerror(err));
	pgo_log(PGO_LOG_WARN, SUBJECT, "%s", msg + 6);
	pgo_batch_fail_rest(b, PGO_ACK_RETRY, msg);
	finish(b, r);
	return PGO_OK;
}

/* --- ops --- */

static int exec_open(pgo_sink_t *sink)
{
	struct pgo_exec_conf *c = exec_conf(sink);

	if (!c || !c->command || !c->command[0]) {
		snprintf(
			sink->errmsg, sizeof(sink->errmsg),
			"exec sink: no command configured (sink.exec_command)");
		return PGO_ERR_CONFIG;
	}
	return PGO_OK;
}

static int exec_publish(pgo_sink_t *sink, pgo_batch_t *batch, int *fd,
			short *events, int64_t *deadline_ms)
{
	struct pgo_exec_conf *c = exec_conf(sink);
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	struct exec_run *r;
	int64_t start = pgo_now_ms();
	int rc;

	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (!c || !c->command) {
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: no command configured");
		return PGO_ERR_CONFIG;
	}
	if (batch->n == 0)
		return PGO_OK;

	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: out of memory");
		return PGO_ERR_NOMEM;
	}
	r->pid = -1;
	r->pidfd = r->epfd = r->in_fd = r->out_fd = r->err_fd = -1;
	pgo_buf_init(&r->input);
	pgo_buf_init(&r->out);
	batch->sink_state = r;

	/* The batch as NDJSON, each line written straight into the buffer;
	 * a line that did not fit is written again after growing it. */
	for (size_t i = 0; i < batch->n; i++) {
		size_t room, need;

		if (!pgo_buf_reserve(&r->input, 512))
			break;
		room = r->input.cap - r->input.len;
		need = pgo_event_ndjson(&batch->events[i],
					r->input.data + r->input.len, room);
		if (need >= room) {
			if (!pgo_buf_reserve(&r->input, need))
				break;
			pgo_event_ndjson(&batch->events[i],
					 r->input.data + r->input.len,
					 r->input.cap - r->input.len);
		}
		r->input.len += need;
	}
	if (r->input.oom) {
		finish(batch, r);
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: out of memory building the batch input");
		return PGO_ERR_NOMEM;
	}

	if (pipe2(in, O_CLOEXEC) < 0)
		return fail_start(batch, r, "pipe", errno);
	r->in_fd = in[1];
	if (pipe2(out, O_CLOEXEC) < 0) {
		rc = errno;
		close(in[0]);
		return fail_start(batch, r, "pipe", rc);
	}
	r->out_fd = out[0];
	if (pipe2(err, O_CLOEXEC) < 0) {
		rc = errno;
		close(in[0]);
		close(out[1]);
		return fail_start(batch, r, "pipe", rc);
	}
	r->err_fd = err[0];
	if (set_nonblock(r->in_fd) < 0 || set_nonblock(r->out_fd) < 0 ||
	    set_nonblock(r->err_fd) < 0 || lift_above_stdio(&in[0]) < 0 ||
	    lift_above_stdio(&out[1]) < 0 || lift_above_stdio(&err[1]) < 0) {
		rc = errno;
		close(in[0]);
		close(out[1]);
		close(err[1]);
		return fail_start(batch, r, "fcntl", rc);
	}

	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0 || watch_fd(r, r->in_fd, EPOLLOUT, TAG_STDIN) < 0 ||
	    watch_fd(r, r->out_fd, EPOLLIN, TAG_STDOUT) < 0 ||
	    watch_fd(r, r->err_fd, EPOLLIN, TAG_STDERR) < 0) {
		rc = errno;
		close(in[0]);
		close(out[1]);
		close(err[1]);
		return fail_start(batch, r, "epoll", rc);
	}

	rc = spawn_shell(c->command, batch, in[0], out[1], err[1], &r->pid);
	/* The child holds its ends now; ours must go or EOF never comes. */
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (rc != 0) {
		r->pid = -1;
		return fail_start(batch, r, "cannot start /bin/sh", rc);
	}

	r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	if (r->pidfd >= 0 && watch_fd(r, r->pidfd, EPOLLIN, TAG_PIDFD) < 0)
		close_fd(&r->pidfd);
	/* Without pidfds (kernel < 5.3, some sandboxes) the exit is polled. */

	pgo_log(PGO_LOG_DEBUG, SUBJECT,
		"started pid %d for %zu events (%zu bytes)", (int)r->pid,
		batch->n, r->input.len);
	r->timeout_ms = c->timeout_ms;
	r->deadline = c->timeout_ms > 0 ? start + c->timeout_ms : 0;
	wait_on(r, fd, events, deadline_ms);
	return PGO_ERR_AGAIN;
}

static int exec_resume(pgo_sink_t *sink, pgo_batch_t *batch, short revents,
		       int *fd, short *events, int64_t *deadline_ms)
{
	struct exec_run *r = batch->sink_state;

	(void)revents; /* the epoll instance knows better which fd fired */
	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (!r) {
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: resume without a publish in progress");
		return PGO_ERR_INVALID;
	}

	if (r->killed) {
		/* Timed out: only the reaping is left. */
		check_exit(r);
		if (r->exited) {
			reap(r);
			fail_timeout(batch, r);
			finish(batch, r);
			return PGO_OK;
		}
		wait_on(r, fd, events, deadline_ms);
		return PGO_ERR_AGAIN;
	}

	if (pump(r) < 0)
		return abandon(batch, r, "epoll_wait", errno);
	check_exit(r);
	if (r->exited && r->out_fd < 0 && r->err_fd < 0) {
		reap(r);
		decide(batch, r);
		finish(batch, r);
		return PGO_OK;
	}

	if (r->deadline && pgo_now_ms() >= r->deadline) {
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"command timed out after %" PRId64
			" ms; killing process group %d",
			r->timeout_ms, (int)r->pid);
		kill_group(r);
		r->killed = true;
		/* Output no longer matters (and a grandchild in another
		 * group could hold the pipes open forever). */
		drop_fd(r, &r->in_fd);
		drop_fd(r, &r->out_fd);
		drop_fd(r, &r->err_fd);
		check_exit(r);
		if (r->exited) {
			reap(r);
			fail_timeout(batch, r);
			finish(batch, r);
			return PGO_OK;
		}
	}
	wait_on(r, fd, events, deadline_ms);
	return PGO_ERR_AGAIN;
}

static void exec_cancel(pgo_sink_t *sink, pgo_batch_t *batch)
{
	struct exec_run *r = batch->sink_state;

	(void)sink;
	if (!r)
		return;
	kill_group(r);
	reap(r);
	finish(batch, r);
}

static void exec_close(pgo_sink_t *sink)
{
	struct pgo_exec_conf *c = exec_conf(sink);

	if (!c)
		return;
	free(c->command);
	free(c);
	sink->priv = NULL;
}

int pgo_sink_exec_configure(pgo_sink_t *sink, const char *command,
			    int64_t timeout_ms)
{
	struct pgo_exec_conf *c;

	if (!command || !*command) {
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: the command is empty (sink.exec_command)");
		return PGO_ERR_INVALID;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->command = strdup(command);
	if (!c || !c->command) {
		free(c);
		snprintf(sink->errmsg, sizeof(sink->errmsg),
			 "exec sink: out of memory");
		return PGO_ERR_NOMEM;
	}
	c->timeout_ms = timeout_ms;
	exec_close(sink); /* a reconfigure replaces the old settings */
	sink->priv = c;
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_exec_ops = {
	.name = "exec",
	.open = exec_open,
	.publish = exec_publish,
	.resume = exec_resume,
	.cancel = exec_cancel,
	.close = exec_close,
};
