/*
 * proc.h — child processes on the event loop: the one place that runs
 * `/bin/sh -c COMMAND` for the exec sink, the worker's exec handler and
 * `pgoutbox consume --exec`.
 *
 * A run is a shell in a process group of its own (a timeout or a kill
 * reaches whatever it started), with default signal dispositions and an
 * empty signal mask whatever the host set up, only fds 0-2 open, and the
 * host's environment (without DATABASE_URL, PGOUTBOX_DATABASE_URL and
 * PGPASSWORD: the command does not get pgoutbox's database credentials)
 * plus the caller's variables.  Its stdin is fed from
 * a buffer through a non-blocking pipe (a reader that leaves early costs
 * an EPIPE, never a SIGPIPE in the host); its stdout is the host's or
 * captured (up to a cap, the rest read and dropped so the child never
 * blocks); its stderr is the host's or captured as a tail (the last
 * bytes).  The exit is seen through a pidfd (polled every 20 ms where
 * pidfds are missing) and observed with WNOWAIT, the child being reaped
 * only when the run ends, so the process group id signalled on a timeout
 * cannot be recycled meanwhile.
 *
 * Everything is driven by a pgo_loop_t: the pipes and the pidfd are
 * watchers, the timeout and the exit polling a timer; nothing blocks
 * except the reaping of a child already dead (or just sent SIGKILL).  When
 * the run ends, done() is called once, from inside the loop's turn, with
 * the outcome and the output; the run is freed when done() returns.
 */
#ifndef PGO_PROC_H
#define PGO_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop/loop.h"

typedef struct pgo_proc pgo_proc_t;

/* How a run ended.  Values are never renumbered. */
typedef enum pgo_proc_end {
	PGO_PROC_EXITED = 0,	/* status is the exit status */
	PGO_PROC_SIGNALED = 1,	/* status is the signal that killed it */
	PGO_PROC_TIMED_OUT = 2, /* the timeout killed its group (SIGKILL) */
	PGO_PROC_LOST = 3	/* reaped by someone else (the host ignores
				 * SIGCHLD): the status is unknown */
} pgo_proc_end_t;

/* What done() receives; the texts are valid during the call only. */
typedef struct pgo_proc_result {
	pgo_proc_end_t end;
	int status;	   /* see pgo_proc_end_t */
	pid_t pid;	   /* the shell, also its process group id */
	int64_t ms;	   /* from start to end */
	const char *out;   /* captured stdout, NUL-terminated ("" if none) */
	size_t out_len;	   /* at most spec.out_max */
	bool out_capped;   /* stdout was longer than kept (or memory ran
			    * out): the rest was dropped */
	const char *err;   /* captured stderr: its last bytes */
	size_t err_len;	   /* at most spec.err_tail */
	size_t in_written; /* bytes of stdin written into its pipe */
	size_t in_unread;  /* bytes of stdin the child never read: not
			    * written, plus (with spec.count_unread) those
			    * left in the pipe when it exited */
} pgo_proc_result_t;

typedef void (*pgo_proc_done_fn)(void *arg, const pgo_proc_result_t *res);

/* What to run and how.  Everything is copied by pgo_proc_start(). */
typedef struct pgo_proc_spec {
	const char *command;	/* run as `/bin/sh -c command` */
	const char *const *env; /* NAME=VALUE set in the child (a host
				 * variable of the same name is dropped);
				 * NULL-terminated, or NULL */
	const char *input;	/* stdin (then EOF); NULL: empty */
	size_t input_len;	/* bytes of input */
	size_t out_max;		/* stdout: 0 = the host's, else captured
				 * and kept up to this many bytes */
	size_t err_tail;	/* stderr: 0 = the host's, else captured
				 * and its last err_tail bytes kept */
	int64_t timeout_ms;	/* kill the group after this; 0 = never */
	bool wait_output;	/* end only once the captured pipes reach
				 * EOF too (what a background child holds
				 * open then waits for the timeout); false:
				 * end at the shell's exit with the output
				 * readable by then */
	bool count_unread;	/* keep a read end of the stdin pipe, so
				 * that in_unread also counts what the
				 * child left in the pipe (a reader that
				 * leaves early then costs no EPIPE: the
				 * rest of the input waits for the exit) */
	const char *subject;	/* log prefix of the run's warnings */
	pgo_proc_done_fn done;	/* called once when the run ends */
	void *arg;		/* passed to done */
} pgo_proc_spec_t;

/* Starts a run watched by loop.  Returns 0 with *proc set, or an errno
 * value with *what naming the step that failed ("pipe", "fcntl",
 * "cannot start /bin/sh", ...): nothing is left running then and done()
 * is never called. */
int pgo_proc_start(pgo_loop_t *loop, const pgo_proc_spec_t *spec,
		   pgo_proc_t **proc, const char **what);

/* The shell's pid (its process group id). */
pid_t pgo_proc_pid(const pgo_proc_t *proc);

/* Sends SIGKILL to the run's process group; the run still ends through
 * done() (with PGO_PROC_SIGNALED), once the shell's exit is seen. */
void pgo_proc_kill(pgo_proc_t *proc);

/* Abandons a run: SIGKILL to its group, reaps the shell, closes
 * everything; done() is not called.  NULL is a no-op.  Not from inside
 * the run's own done(). */
void pgo_proc_cancel(pgo_proc_t *proc);

#endif /* PGO_PROC_H */
