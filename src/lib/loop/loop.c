/*
 * loop.c — the event loop: poll() over the watched descriptors and the
 * self-pipe, with the nearest timer as the timeout (see loop.h).
 *
 * Watchers are few (a connection per slot, a socket or two per sink), so
 * they live in plain arrays and the nearest timer is found by a scan.
 * Deleting only marks a watcher dead; the arrays are compacted when a turn
 * ends, so callbacks may delete anything without invalidating the turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop/loop.h"
#include "base/time.h"

struct pgo_loop_io {
	pgo_loop_t *loop;
	int fd;	      /* -1: nothing to watch */
	short events; /* POLLIN | POLLOUT */
	bool dead;    /* deleted: freed when the turn ends */
	pgo_loop_io_fn fn;
	void *arg;
};

struct pgo_loop_timer {
	pgo_loop_t *loop;
	int64_t at;	/* monotonic ms; 0 = disarmed */
	uint64_t fired; /* the turn it last fired in */
	bool dead;	/* deleted: freed when the turn ends */
	pgo_loop_timer_fn fn;
	void *arg;
};

struct pgo_loop {
	pgo_loop_io_t **ios;
	int nios, capios;
	pgo_loop_timer_t **timers;
	int ntimers, captimers;
	bool dirty;	     /* something was deleted: compact */
	int depth;	     /* > 0 inside pgo_loop_run_once() */
	uint64_t turn;	     /* turns run, for one firing per turn */
	int wake_pipe[2];    /* written by pgo_loop_wake() */
	struct pollfd *pfd;  /* the turn's poll set */
	pgo_loop_io_t **own; /* the watcher of each pfd entry */
	int cappfd;
};

pgo_loop_t *pgo_loop_new(void)
{
	pgo_loop_t *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (pipe2(l->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(l);
		return NULL;
	}
	return l;
}

void pgo_loop_destroy(pgo_loop_t *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->nios; i++)
		free(l->ios[i]);
	for (int i = 0; i < l->ntimers; i++)
		free(l->timers[i]);
	free(l->ios);
	free(l->timers);
	free(l->pfd);
	free(l->own);
	close(l->wake_pipe[0]);
	close(l->wake_pipe[1]);
	free(l);
}

/* Appends p to a growable array of pointers. */
static bool push(void ***arr, int *n, int *cap, void *p)
{
	if (*n == *cap) {
		int ncap = *cap ? *cap * 2 : 16;
		void **na = realloc(*arr, (size_t)ncap * sizeof(*na));

		if (!na)
			return false;
		*arr = na;
		*cap = ncap;
	}
	(*arr)[(*n)++] = p;
	return true;
}

pgo_loop_io_t *pgo_loop_io_add(pgo_loop_t *l, int fd, short events,
			       pgo_loop_io_fn fn, void *arg)
{
	pgo_loop_io_t *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
	io->loop = l;
	io->fd = fd;
	io->events = events;
	io->fn = fn;
	io->arg = arg;
	if (!push((void ***)&l->ios, &l->nios, &l->capios, io)) {
		free(io);
		return NULL;
	}
	return io;
}

void pgo_loop_io_note(void *arg, int fd, short revents)
{
	(void)fd;
	*(short *)arg |= revents;
}

void pgo_loop_io_set(pgo_loop_io_t *io, int fd, short events)
{
	io->fd = fd;
	io->events = events;
}

void pgo_loop_io_del(pgo_loop_io_t *io)
{
	if (!io)
		return;
	io->dead = true;
	io->loop->dirty = true;
}

pgo_loop_timer_t *pgo_loop_timer_add(pgo_loop_t *l, int64_t at,
				     pgo_loop_timer_fn fn, void *arg)
{
	pgo_loop_timer_t *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->loop = l;
	t->at = at;
	t->fn = fn;
	t->arg = arg;
	if (!push((void ***)&l->timers, &l->ntimers, &l->captimers, t)) {
		free(t);
		return NULL;
	}
	return t;
}

void pgo_loop_timer_set(pgo_loop_timer_t *t, int64_t at)
{
	t->at = at;
}

int64_t pgo_loop_timer_at(const pgo_loop_timer_t *t)
{
	return t->at;
}

void pgo_loop_timer_del(pgo_loop_timer_t *t)
{
	if (!t)
		return;
	t->dead = true;
	t->at = 0;
	t->loop->dirty = true;
}

void pgo_loop_wake(pgo_loop_t *l)
{
	int saved = errno;

	if (write(l->wake_pipe[1], "w", 1) < 0) {
		/* a full pipe wakes the loop anyway */
	}
	errno = saved;
}

int64_t pgo_loop_next_timer(const pgo_loop_t *l)
{
	int64_t next = 0;

	for (int i = 0; i < l->ntimers; i++)
		if (!l->timers[i]->dead)
			next = pgo_deadline_min(next, l->timers[i]->at);
	return next;
}

/* Frees the deleted watchers (outside any callback). */
static void compact(pgo_loop_t *l)
{
	int n = 0;

	for (int i = 0; i < l->nios; i++) {
		if (l->ios[i]->dead)
			free(l->ios[i]);
		else
			l->ios[n++] = l->ios[i];
	}
	l->nios = n;
	n = 0;
	for (int i = 0; i < l->ntimers; i++) {
		if (l->timers[i]->dead)
			free(l->timers[i]);
		else
			l->timers[n++] = l->timers[i];
	}
	l->ntimers = n;
	l->dirty = false;
}

/* Runs the timers due at `now`, earliest first, each at most once a turn
 * (a timer re-armed in the past waits for the next turn). */
static void run_timers(pgo_loop_t *l, int64_t now)
{
	for (;;) {
		pgo_loop_timer_t *due = NULL;

		for (int i = 0; i < l->ntimers; i++) {
			pgo_loop_timer_t *t = l->timers[i];

			if (t->dead || !t->at || t->at > now ||
			    t->fired == l->turn)
				continue;
			if (!due || t->at < due->at)
				due = t;
		}
		if (!due)
			return;
		due->at = 0;
		due->fired = l->turn;
		due->fn(due->arg);
	}
}

int pgo_loop_run_once(pgo_loop_t *l, int64_t deadline)
{
	int nfds = 0, timeout = -1, rc;
	int64_t now;

	if (l->dirty && !l->depth)
		compact(l);
	if (l->cappfd < l->nios + 1) {
		int cap = l->nios + 16;
		struct pollfd *p = realloc(l->pfd, (size_t)cap * sizeof(*p));
		pgo_loop_io_t **o;

		if (!p)
			return -ENOMEM;
		l->pfd = p;
		o = realloc(l->own, (size_t)cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		l->own = o;
		l->cappfd = cap;
	}
	l->pfd[nfds].fd = l->wake_pipe[0];
	l->pfd[nfds].events = POLLIN;
	l->pfd[nfds].revents = 0;
	l->own[nfds++] = NULL;
	for (int i = 0; i < l->nios; i++) {
		pgo_loop_io_t *io = l->ios[i];

		if (io->dead || io->fd < 0 || !io->events)
			continue;
		l->pfd[nfds].fd = io->fd;
		l->pfd[nfds].events = io->events;
		l->pfd[nfds].revents = 0;
		l->own[nfds++] = io;
	}
	deadline = pgo_deadline_min(deadline, pgo_loop_next_timer(l));
	if (deadline) {
		int64_t t = deadline - pgo_now_ms();

		timeout = t < 0 ? 0 : t > 60000 ? 60000 : (int)t;
	}
	rc = poll(l->pfd, (nfds_t)nfds, timeout);
	if (rc < 0 && errno != EINTR)
		return -errno;
	l->depth++;
	l->turn++;
	if (l->pfd[0].revents & POLLIN) {
		char drain[64];

		while (read(l->wake_pipe[0], drain, sizeof(drain)) > 0) {
		}
	}
	now = pgo_now_ms();
	run_timers(l, now);
	for (int k = 1; rc > 0 && k < nfds; k++) {
		pgo_loop_io_t *io = l->own[k];

		/* A callback of this turn may have deleted the watcher or
		 * pointed it at another fd: what poll() saw is stale. */
		if (!l->pfd[k].revents || io->dead || io->fd != l->pfd[k].fd)
			continue;
		io->fn(io->arg, io->fd, l->pfd[k].revents);
	}
	l->depth--;
	if (l->dirty && !l->depth)
		compact(l);
	return 0;
}
