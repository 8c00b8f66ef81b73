/*
 * proc.c — child processes on the event loop (see proc.h): posix_spawn of
 * `/bin/sh -c`, its pipes and pidfd as watchers of the caller's loop, the
 * timeout and the exit polling as one timer, the process group killed on
 * a timeout.
 *
 * A run ends when the shell's exit has been seen and, with wait_output,
 * its captured pipes reached EOF; the shell is reaped only then.  Reads
 * are bounded per turn (the loop is level-triggered: what is left is read
 * on the next turn), so a child that floods its output cannot starve the
 * other watchers of the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop/proc.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/time.h"
#include "loop/loop.h"
#include "pgoutbox.h"

extern char **environ;

#define READ_CHUNK     65536 /* bytes read per read() into the stdout buffer */
#define READS_PER_TURN 16    /* then yield to the loop */
#define REAP_TICK_MS   20    /* exit polling when pidfds are missing */

struct pgo_proc {
	pgo_loop_t *loop;
	pgo_proc_done_fn done;
	void *arg;
	char subject[96];
	size_t out_max;	  /* 0: stdout not captured */
	size_t err_tail;  /* 0: stderr not captured */
	bool wait_output; /* the end waits for EOF on the captured pipes */
	int64_t started;  /* monotonic ms */
	int64_t deadline; /* monotonic ms of the kill; 0 = never */

	pid_t pid;	/* the shell and its group; -1 once reaped or lost */
	bool exited;	/* the exit was seen (the shell is not reaped yet) */
	bool lost;	/* reaped behind our back: status unknown */
	bool timed_out; /* the group was killed at the deadline */
	int how;	/* CLD_EXITED, CLD_KILLED or CLD_DUMPED */
	int status;	/* exit status or signal */

	int in_fd;   /* write end of the child's stdin; -1 once done */
	int in_peek; /* our read end of it (spec.count_unread), to count
		      * what the child left unread; -1: none */
	int out_fd;  /* read end of its stdout; -1 at EOF or not captured */
	int err_fd;  /* read end of its stderr; -1 at EOF or not captured */
	int pidfd;   /* readable at the exit; -1 once seen or unsupported */
	pgo_loop_io_t *in_io, *out_io, *err_io, *pid_io;
	pgo_loop_timer_t *timer; /* the deadline, and the exit polling */

	char *input; /* the stdin still to write (our copy) */
	size_t input_len, written;
	pgo_buf_t out;	 /* captured stdout, at most out_max bytes */
	bool out_capped; /* more came than out_max (warned once) */
	char *err;	 /* captured stderr: the last err_tail bytes */
	size_t err_len;
};

/* --- fds --- */

/* Stops watching fd and closes it. */
static void drop(int *fd, pgo_loop_io_t *io)
{
	if (*fd < 0)
		return;
	if (io)
		pgo_loop_io_set(io, -1, 0);
	close(*fd);
	*fd = -1;
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

/* --- the child --- */

/* Records the shell's exit if it happened, without reaping it. */
static void check_exit(pgo_proc_t *p)
{
	siginfo_t si;

	if (p->exited || p->pid < 0)
		return;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno != ECHILD)
			return;
		/* Reaped behind our back (the host ignores SIGCHLD). */
		p->exited = true;
		p->lost = true;
		p->pid = -1;
	} else if (si.si_pid != p->pid) {
		return;
	} else {
		p->exited = true;
		p->how = si.si_code;
		p->status = si.si_status;
	}
	/* A pidfd stays readable after the exit: stop watching it. */
	drop(&p->pidfd, p->pid_io);
}

/* Collects the shell (dead, or just sent SIGKILL: a short wait). */
static void reap(pgo_proc_t *p)
{
	siginfo_t si;

	if (p->pid < 0)
		return;
	while (waitid(P_PID, (id_t)p->pid, &si, WEXITED) < 0 && errno == EINTR)
		;
	p->pid = -1;
}

void pgo_proc_kill(pgo_proc_t *p)
{
	if (p->pid < 0)
		return;
	if (kill(-p->pid, SIGKILL) < 0)
		kill(p->pid, SIGKILL);
}

pid_t pgo_proc_pid(const pgo_proc_t *p)
{
	return p->pid;
}

/* --- I/O --- */

static void feed_stdin(pgo_proc_t *p)
{
	struct sigpipe_guard g;
	bool epipe = false, give_up = false;

	sigpipe_block(&g);
	while (p->written < p->input_len) {
		ssize_t n = write(p->in_fd, p->input + p->written,
				  p->input_len - p->written);

		if (n > 0) {
			p->written += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* EPIPE: the command exited or closed stdin without reading
		 * everything.  Not an error by itself: its exit status says
		 * whether the work was done. */
		if (n < 0 && errno == EPIPE) {
			epipe = true;
			pgo_log(PGO_LOG_DEBUG, p->subject,
				"command closed stdin after %zu of %zu bytes",
				p->written, p->input_len);
		} else {
			pgo_log(PGO_LOG_WARN, p->subject, "write to stdin: %s",
				n < 0 ? strerror(errno) : "no progress");
		}
		give_up = true;
		break;
	}
	sigpipe_restore(&g, epipe);
	if (give_up || p->written >= p->input_len) {
		/* All written (or abandoned): the child sees EOF. */
		drop(&p->in_fd, p->in_io);
		free(p->input);
		p->input = NULL;
	}
}

/* One read() from a captured pipe: the bytes read, or 0 when there is
 * nothing more for now (EAGAIN) or ever (EOF or an error, logged: the fd
 * is dropped). */
static size_t read_pipe(pgo_proc_t *p, int *fd, pgo_loop_io_t *io,
			const char *what, char *dst, size_t want)
{
	ssize_t n;

	do
		n = read(*fd, dst, want);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return (size_t)n;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n < 0)
		pgo_log(PGO_LOG_WARN, p->subject, "read from %s: %s", what,
			strerror(errno));
	drop(fd, io);
	return 0;
}

static void drain_out(pgo_proc_t *p)
{
	char scratch[4096];

	for (int i = 0; i < READS_PER_TURN && p->out_fd >= 0; i++) {
		size_t room = p->out_max - p->out.len;
		char *dst = scratch;
		size_t want = sizeof(scratch), n;

		if (room > 0 && !p->out.oom) {
			want = room < READ_CHUNK ? room : READ_CHUNK;
			if (pgo_buf_reserve(&p->out, want))
				dst = p->out.data + p->out.len;
			else
				want = sizeof(scratch);
		}
		n = read_pipe(p, &p->out_fd, p->out_io, "stdout", dst, want);
		if (n == 0)
			return;
		if (dst != scratch) {
			p->out.len += n;
			p->out.data[p->out.len] = '\0';
		} else if (!p->out_capped) {
			/* Over the cap, or the buffer could not grow: the
			 * rest is read and dropped so the child never blocks
			 * on a full pipe. */
			p->out_capped = true;
			if (p->out.oom)
				pgo_log(PGO_LOG_WARN, p->subject,
					"out of memory reading stdout; the "
					"rest is ignored");
			else
				pgo_log(PGO_LOG_WARN, p->subject,
					"command wrote more than %zu KiB on "
					"stdout; the rest is ignored",
					p->out_max / 1024);
		}
	}
}

static void drain_err(pgo_proc_t *p)
{
	char chunk[16384];

	for (int i = 0; i < READS_PER_TURN && p->err_fd >= 0; i++) {
		size_t max = p->err_tail,
		       k = read_pipe(p, &p->err_fd, p->err_io, "stderr", chunk,
				     sizeof(chunk));

		if (k == 0)
			return;
		/* Keep the last err_tail bytes. */
		if (k >= max) {
			memcpy(p->err, chunk + k - max, max);
			p->err_len = max;
			continue;
		}
		if (p->err_len + k > max) {
			size_t cut = p->err_len + k - max;

			memmove(p->err, p->err + cut, p->err_len - cut);
			p->err_len -= cut;
		}
		memcpy(p->err + p->err_len, chunk, k);
		p->err_len += k;
	}
}

/* --- the end --- */

static void proc_free(pgo_proc_t *p)
{
	drop(&p->in_fd, NULL);
	drop(&p->in_peek, NULL);
	drop(&p->out_fd, NULL);
	drop(&p->err_fd, NULL);
	drop(&p->pidfd, NULL);
	pgo_loop_io_del(p->in_io);
	pgo_loop_io_del(p->out_io);
	pgo_loop_io_del(p->err_io);
	pgo_loop_io_del(p->pid_io);
	pgo_loop_timer_del(p->timer);
	free(p->input);
	pgo_buf_free(&p->out);
	free(p->err);
	free(p);
}

/* The run is over: reap, report, free. */
static void finish(pgo_proc_t *p)
{
	pgo_proc_result_t res;

	/* Ending at the exit: what the output pipes hold is still read. */
	if (!p->timed_out) {
		drain_out(p);
		drain_err(p);
	}
	memset(&res, 0, sizeof(res));
	res.pid = p->pid;
	reap(p);
	res.status = p->status;
	if (p->timed_out)
		res.end = PGO_PROC_TIMED_OUT;
	else if (p->lost)
		res.end = PGO_PROC_LOST;
	else if (p->how == CLD_EXITED)
		res.end = PGO_PROC_EXITED;
	else
		res.end = PGO_PROC_SIGNALED;
	res.ms = pgo_now_ms() - p->started;
	res.out = p->out.data ? p->out.data : "";
	res.out_len = p->out.len;
	res.out_capped = p->out_capped;
	res.err = p->err ? p->err : "";
	res.err_len = p->err_len;
	res.in_written = p->written;
	res.in_unread = p->input_len - p->written;
	if (p->in_peek >= 0) {
		int left = 0;

		/* The shell and all it started that held stdin are gone or
		 * done with it: what the pipe still holds was never read. */
		if (ioctl(p->in_peek, FIONREAD, &left) == 0 && left > 0)
			res.in_unread += (size_t)left;
	}
	p->done(p->arg, &res);
	proc_free(p);
}

/* The timer's next date: the deadline, and without a pidfd the next
 * look at the exit. */
static void arm(pgo_proc_t *p)
{
	int64_t at = p->timed_out ? 0 : p->deadline;

	if (!p->exited && p->pidfd < 0)
		at = pgo_deadline_min(at, pgo_now_ms() + REAP_TICK_MS);
	pgo_loop_timer_set(p->timer, at);
}

/* Ends the run if nothing is left to wait for. */
static void maybe_finish(pgo_proc_t *p)
{
	if (!p->exited)
		return;
	if (p->wait_output && !p->timed_out &&
	    (p->out_fd >= 0 || p->err_fd >= 0))
		return;
	finish(p);
}

static void on_stdin(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents;
	feed_stdin(arg);
}

static void on_stdout(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents;
	drain_out(arg);
	maybe_finish(arg);
}

static void on_stderr(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents;
	drain_err(arg);
	maybe_finish(arg);
}

static void on_pidfd(void *arg, int fd, short revents)
{
	pgo_proc_t *p = arg;

	(void)fd;
	(void)revents;
	check_exit(p);
	arm(p);
	maybe_finish(p);
}

static void on_timer(void *arg)
{
	pgo_proc_t *p = arg;

	if (!p->timed_out && p->deadline && pgo_now_ms() >= p->deadline) {
		p->timed_out = true;
		pgo_proc_kill(p);
		/* Output no longer matters (and a grandchild in another
		 * group could hold the pipes open forever). */
		drop(&p->in_fd, p->in_io);
		drop(&p->out_fd, p->out_io);
		drop(&p->err_fd, p->err_io);
	}
	check_exit(p);
	arm(p);
	maybe_finish(p);
}

void pgo_proc_cancel(pgo_proc_t *p)
{
	if (!p)
		return;
	pgo_proc_kill(p);
	reap(p);
	proc_free(p);
}

/* --- spawning --- */

/* The host's secrets that a command never gets: how pgoutbox reaches
 * its database.  A command that needs a database is given its own
 * connection string by whoever deploys it. */
static const char *const withheld[] = {
	"DATABASE_URL=", "PGOUTBOX_DATABASE_URL=",
	"PGOUTBOX_DATABASE_URL_FILE=", "PGPASSWORD=", NULL};

static bool is_withheld(const char *var)
{
	for (const char *const *w = withheld; *w; w++)
		if (strncmp(var, *w, strlen(*w)) == 0)
			return true;
	return false;
}

/* environ without the host's secrets and the names of vars, then vars;
 * NULL on OOM. */
static char **child_env(const char *const *vars)
{
	size_t n = 0, m = 0, o = 0;
	char **env;

	while (environ && environ[n])
		n++;
	while (vars && vars[m])
		m++;
	env = malloc((n + m + 1) * sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool ours = is_withheld(environ[i]);

		for (size_t k = 0; k < m && !ours; k++) {
			const char *eq = strchr(vars[k], '=');
			size_t len = eq ? (size_t)(eq - vars[k]) + 1 : 0;

			ours = len && strncmp(environ[i], vars[k], len) == 0;
		}
		if (!ours)
			env[o++] = environ[i];
	}
	for (size_t k = 0; k < m; k++)
		env[o++] = (char *)vars[k];
	env[o] = NULL;
	return env;
}

/* Starts the shell with in_r as its stdin and out_w, err_w (-1: the
 * host's) as its stdout and stderr.  Returns 0 or an errno value. */
static int spawn_shell(const char *command, char **env, int in_r, int out_w,
		       int err_w, pid_t *pid)
{
	static const int reset[] = {SIGPIPE, SIGTERM, SIGHUP,  SIGINT, SIGQUIT,
				    SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};
	char *argv[] = {"sh", "-c", (char *)command, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl, none;
	int rc;

	sigemptyset(&none);
	sigemptyset(&dfl);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		sigaddset(&dfl, reset[i]);
	rc = posix_spawnattr_init(&attr);
	if (rc != 0)
		return rc;
	rc = posix_spawn_file_actions_init(&fa);
	if (rc != 0) {
		posix_spawnattr_destroy(&attr);
		return rc;
	}
	/* Own process group (a timeout kills all of it), default signal
	 * dispositions, nothing blocked: whatever the host process set up. */
	rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
						     POSIX_SPAWN_SETSIGDEF |
						     POSIX_SPAWN_SETSIGMASK);
	if (!rc)
		rc = posix_spawnattr_setpgroup(&attr, 0);
	if (!rc)
		rc = posix_spawnattr_setsigdefault(&attr, &dfl);
	if (!rc)
		rc = posix_spawnattr_setsigmask(&attr, &none);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, in_r, STDIN_FILENO);
	if (!rc && out_w >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, out_w,
						      STDOUT_FILENO);
	if (!rc && err_w >= 0)
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
	return rc;
}

/* Makes a pipe whose child end (index child) sits above stdio and whose
 * own end is non-blocking.  Returns 0 or -1 (errno set, nothing open). */
static int make_pipe(int fds[2], int child)
{
	int e;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	if (set_nonblock(fds[1 - child]) == 0 &&
	    lift_above_stdio(&fds[child]) == 0)
		return 0;
	e = errno;
	close(fds[0]);
	close(fds[1]);
	fds[0] = fds[1] = -1;
	errno = e;
	return -1;
}

int pgo_proc_start(pgo_loop_t *loop, const pgo_proc_spec_t *spec,
		   pgo_proc_t **proc, const char **what)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	pgo_proc_t *p = calloc(1, sizeof(*p));
	char **env = NULL;
	int rc = ENOMEM;

	*proc = NULL;
	*what = "out of memory";
	if (!p)
		return ENOMEM;
	p->loop = loop;
	p->done = spec->done;
	p->arg = spec->arg;
	snprintf(p->subject, sizeof(p->subject), "%s",
		 spec->subject ? spec->subject : "exec");
	p->out_max = spec->out_max;
	p->err_tail = spec->err_tail;
	p->wait_output = spec->wait_output;
	p->pid = -1;
	p->in_fd = p->in_peek = p->out_fd = p->err_fd = p->pidfd = -1;
	pgo_buf_init(&p->out);
	p->input_len = spec->input ? spec->input_len : 0;
	if ((p->input_len && !(p->input = malloc(p->input_len))) ||
	    (p->err_tail && !(p->err = malloc(p->err_tail))) ||
	    !(p->in_io = pgo_loop_io_add(loop, -1, 0, on_stdin, p)) ||
	    !(p->out_io = pgo_loop_io_add(loop, -1, 0, on_stdout, p)) ||
	    !(p->err_io = pgo_loop_io_add(loop, -1, 0, on_stderr, p)) ||
	    !(p->pid_io = pgo_loop_io_add(loop, -1, 0, on_pidfd, p)) ||
	    !(p->timer = pgo_loop_timer_add(loop, 0, on_timer, p)) ||
	    !(env = child_env(spec->env)))
		goto fail;
	if (p->input_len)
		memcpy(p->input, spec->input, p->input_len);

	*what = "pipe";
	if (make_pipe(in, 0) < 0 || (p->out_max && make_pipe(out, 1) < 0) ||
	    (p->err_tail && make_pipe(err, 1) < 0)) {
		rc = errno;
		goto fail;
	}
	p->started = pgo_now_ms();
	rc = spawn_shell(spec->command, env, in[0], out[1], err[1], &p->pid);
	/* The child holds its ends now; ours must go or EOF never comes
	 * (a read end may stay: EOF is about writers). */
	if (rc == 0 && spec->count_unread) {
		p->in_peek = in[0];
		in[0] = -1;
	}
	drop(&in[0], NULL);
	drop(&out[1], NULL);
	drop(&err[1], NULL);
	if (rc != 0) {
		*what = "cannot start /bin/sh";
		p->pid = -1;
		goto fail;
	}
	free(env);
	p->in_fd = in[1];
	p->out_fd = out[0];
	p->err_fd = err[0];
	pgo_loop_io_set(p->in_io, p->in_fd, POLLOUT);
	pgo_loop_io_set(p->out_io, p->out_fd, POLLIN);
	pgo_loop_io_set(p->err_io, p->err_fd, POLLIN);
	if (!p->input_len)
		drop(&p->in_fd, p->in_io); /* EOF at once */
#ifdef SYS_pidfd_open
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
#endif
	/* Without pidfds (kernel < 5.3, some sandboxes) the exit is polled. */
	pgo_loop_io_set(p->pid_io, p->pidfd, POLLIN);
	if (spec->timeout_ms > 0)
		p->deadline = p->started + spec->timeout_ms;
	arm(p);
	*proc = p;
	return 0;

fail:
	drop(&in[0], NULL);
	drop(&in[1], NULL);
	drop(&out[0], NULL);
	drop(&out[1], NULL);
	drop(&err[0], NULL);
	drop(&err[1], NULL);
	free(env);
	proc_free(p);
	return rc;
}
