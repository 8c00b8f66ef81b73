/*
 * loop.h — the one event loop of libpgoutbox: file descriptors with
 * callbacks, one-shot timers, and a self-pipe that signal handlers write.
 *
 * Every runner (relay, worker, consumer, cron scheduler) owns one loop and
 * every sink registers its descriptors and deadlines with it through the
 * sink host (pgoutbox/sink.h), so one poll() in one thread waits for all
 * of them, as DESIGN.md's process shape asks.  A runner turns the loop
 * itself: it does its own scheduling (claims, lease rounds), then calls
 * pgo_loop_run_once() with the time it may wait at most.
 *
 * Callbacks run only inside pgo_loop_run_once(), on the loop's thread.  A
 * callback may add or delete any watcher, itself included: a deleted
 * watcher is never called again, even later in the same turn; its memory
 * is freed when the turn ends.  Client libraries that run threads of their
 * own (librdkafka, cnats) signal an eventfd or pipe that is watched here;
 * their work is then done in the fd's callback, on the loop thread.
 */
#ifndef PGO_LOOP_H
#define PGO_LOOP_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pgo_loop pgo_loop_t;
typedef struct pgo_loop_io pgo_loop_io_t;
typedef struct pgo_loop_timer pgo_loop_timer_t;

/* fd became ready: revents as poll() reports them (POLLIN, POLLOUT,
 * POLLERR, POLLHUP). */
typedef void (*pgo_loop_io_fn)(void *arg, int fd, short revents);
/* A timer came due (it is disarmed, not deleted: re-arm or delete it). */
typedef void (*pgo_loop_timer_fn)(void *arg);

/* A loop with its self-pipe.  NULL on OOM or when no pipe can be made. */
pgo_loop_t *pgo_loop_new(void);
/* Frees the loop and every watcher still registered. */
void pgo_loop_destroy(pgo_loop_t *loop);

/* Watches fd for events (POLLIN | POLLOUT); events 0 or fd -1 registers a
 * watcher that waits for nothing yet.  NULL on OOM. */
pgo_loop_io_t *pgo_loop_io_add(pgo_loop_t *loop, int fd, short events,
			       pgo_loop_io_fn fn, void *arg);
/* Changes what the watcher waits for (a new fd after a reconnect, other
 * events; fd -1 or events 0: nothing). */
void pgo_loop_io_set(pgo_loop_io_t *io, int fd, short events);
/* Removes the watcher (NULL is a no-op).  Safe inside any callback. */
void pgo_loop_io_del(pgo_loop_io_t *io);
/* A watcher callback for owners that step their connection after the
 * turn: ORs what the loop saw into the short that arg points to. */
void pgo_loop_io_note(void *arg, int fd, short revents);

/* A one-shot timer firing at `at` (CLOCK_MONOTONIC ms, pgo_now_ms());
 * at 0 makes it disarmed.  NULL on OOM. */
pgo_loop_timer_t *pgo_loop_timer_add(pgo_loop_t *loop, int64_t at,
				     pgo_loop_timer_fn fn, void *arg);
/* Re-arms (at > 0) or disarms (at 0) the timer. */
void pgo_loop_timer_set(pgo_loop_timer_t *t, int64_t at);
/* When the timer fires next (0: disarmed). */
int64_t pgo_loop_timer_at(const pgo_loop_timer_t *t);
/* Removes the timer (NULL is a no-op).  Safe inside any callback. */
void pgo_loop_timer_del(pgo_loop_timer_t *t);

/* Waits at most until `deadline` (CLOCK_MONOTONIC ms; 0: no limit but the
 * timers) for a watched fd, a timer or a wake-up, then runs the callbacks:
 * due timers first, earliest first, then ready fds in the order they were
 * added.  Returns 0, or a negative errno when poll() itself failed. */
int pgo_loop_run_once(pgo_loop_t *loop, int64_t deadline);

/* Async-signal-safe: makes the current or next pgo_loop_run_once() return
 * at once.  Signal handlers set their flag, then call this. */
void pgo_loop_wake(pgo_loop_t *loop);

/* The earliest armed timer (0: none). */
int64_t pgo_loop_next_timer(const pgo_loop_t *loop);

/* The smaller of two deadlines where 0 means "none". */
static inline int64_t pgo_deadline_min(int64_t a, int64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

#endif /* PGO_LOOP_H */
