/*
 * linger_sink.c — a custom sink written against the sink interface v2
 * (pgoutbox/sink.h), run by tests/integration/t_custom_sink.sh.
 *
 * It shows the two host services a real broker client needs:
 *  - a timer: batches are not written at once but collected for
 *    LINGER_MS, like librdkafka's linger.ms, then written together;
 *  - an fd watcher: the NDJSON lines go to standard output, made
 *    non-blocking, so a slow reader fills the pipe and the sink waits for
 *    POLLOUT in the relay's loop instead of blocking it.
 * A batch is acked (and pgo_sink_done() called) only once all of its bytes
 * were written.  drain() flushes at once; cancel() drops a batch that was
 * not written yet (a batch partly written is finished: its rows are
 * rolled back by the relay and sent again, so a reader sees them twice,
 * never a torn line).
 *
 *   DATABASE_URL=... linger_sink      relay the outbox to stdout
 * On stop it prints on stderr how often it flushed on the timer and how
 * often it waited for the pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pgoutbox.h"

#define LINGER_MS   20
#define MAX_PENDING 64

struct linger {
	pgo_sink_t *sink;
	pgo_sink_io_t *out;	 /* stdout, watched for POLLOUT when full */
	pgo_sink_timer_t *timer; /* the linger deadline */
	pgo_batch_t *pending[MAX_PENDING]; /* submitted, not written yet */
	int npending;
	char *buf; /* the lines of pending[0 .. nwriting) */
	size_t len, off;
	int nwriting; /* batches in buf */
	long flushes, waits;
};

static void flush(struct linger *l);

/* The buffer went out: those batches are acked and done. */
static void written(struct linger *l)
{
	pgo_batch_t *done[MAX_PENDING];
	int n = l->nwriting;

	memcpy(done, l->pending, (size_t)n * sizeof(done[0]));
	memmove(l->pending, l->pending + n,
		(size_t)(l->npending - n) * sizeof(l->pending[0]));
	l->npending -= n;
	l->nwriting = 0;
	l->len = l->off = 0;
	pgo_sink_io_set(l->out, STDOUT_FILENO, 0);
	/* Batches submitted while writing linger in their turn. */
	if (l->npending)
		pgo_sink_timer_set(l->timer, pgo_sink_now_ms() + LINGER_MS);
	/* done() last: the relay may submit again from inside it.  A NULL
	 * entry was cancelled while its bytes went out. */
	for (int i = 0; i < n; i++) {
		if (!done[i])
			continue;
		for (size_t k = 0; k < done[i]->n; k++)
			if (done[i]->acks[k] == PGO_ACK_NONE)
				done[i]->acks[k] = PGO_ACK_OK;
		pgo_sink_done(l->sink, done[i]);
	}
}

/* Writes what the pipe takes; waits for POLLOUT for the rest. */
static void push_out(struct linger *l)
{
	while (l->off < l->len) {
		ssize_t w =
			write(STDOUT_FILENO, l->buf + l->off, l->len - l->off);

		if (w > 0) {
			l->off += (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			l->waits++;
			pgo_sink_io_set(l->out, STDOUT_FILENO, POLLOUT);
			return;
		} else if (w < 0 && errno != EINTR) {
			/* The reader is gone: fail what is not written. */
			for (int i = 0; i < l->nwriting; i++)
				if (l->pending[i])
					pgo_batch_fail_rest(l->pending[i],
							    PGO_ACK_RETRY,
							    strerror(errno));
			l->off = l->len;
		}
	}
	written(l);
}

static void on_writable(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents;
	push_out(arg);
}

/* The linger time is over: write every pending batch in one go. */
static void flush(struct linger *l)
{
	size_t cap = 0;

	if (l->nwriting || !l->npending)
		return;
	for (int i = 0; i < l->npending; i++)
		for (size_t k = 0; k < l->pending[i]->n; k++)
			cap += pgo_event_ndjson(&l->pending[i]->events[k], NULL,
						0);
	free(l->buf);
	l->buf = malloc(cap + 1);
	l->len = l->off = 0;
	if (!l->buf) {
		for (int i = 0; i < l->npending; i++)
			pgo_batch_fail_rest(l->pending[i], PGO_ACK_RETRY,
					    "out of memory");
		l->nwriting = l->npending;
		written(l);
		return;
	}
	for (int i = 0; i < l->npending; i++)
		for (size_t k = 0; k < l->pending[i]->n; k++)
			l->len += pgo_event_ndjson(&l->pending[i]->events[k],
						   l->buf + l->len,
						   cap + 1 - l->len);
	l->nwriting = l->npending;
	push_out(l);
}

static void on_linger(void *arg)
{
	struct linger *l = arg;

	l->flushes++;
	flush(l);
}

static int linger_start(pgo_sink_t *sink)
{
	struct linger *l = pgo_sink_priv(sink);
	int fl = fcntl(STDOUT_FILENO, F_GETFL);

	l->sink = sink;
	if (fl < 0 || fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK) < 0) {
		pgo_sink_set_error(sink, "stdout: %s", strerror(errno));
		return PGO_ERR_IO;
	}
	l->out = pgo_sink_io_add(sink, STDOUT_FILENO, 0, on_writable, l);
	l->timer = pgo_sink_timer_add(sink, 0, on_linger, l);
	if (!l->out || !l->timer) {
		pgo_sink_set_error(sink, "out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int linger_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct linger *l = pgo_sink_priv(sink);

	if (l->npending == MAX_PENDING) {
		pgo_sink_set_error(sink, "too many batches in flight");
		return PGO_ERR_AGAIN;
	}
	l->pending[l->npending++] = b;
	if (!l->nwriting && l->npending == 1)
		pgo_sink_timer_set(l->timer, pgo_sink_now_ms() + LINGER_MS);
	return PGO_OK;
}

static void linger_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct linger *l = pgo_sink_priv(sink);

	/* A batch being written is finished (no torn lines) but never
	 * touched again; one still lingering is forgotten. */
	for (int i = 0; i < l->nwriting; i++)
		if (l->pending[i] == b)
			l->pending[i] = NULL;
	for (int i = l->nwriting; i < l->npending; i++)
		if (l->pending[i] == b) {
			memmove(l->pending + i, l->pending + i + 1,
				(size_t)(l->npending - i - 1) *
					sizeof(l->pending[0]));
			l->npending--;
			return;
		}
}

static void linger_drain(pgo_sink_t *sink, int64_t deadline_ms)
{
	(void)deadline_ms;
	flush(pgo_sink_priv(sink));
}

static void linger_stop(pgo_sink_t *sink)
{
	struct linger *l = pgo_sink_priv(sink);

	pgo_sink_io_del(l->out);
	pgo_sink_timer_del(l->timer);
	l->out = NULL;
	l->timer = NULL;
	fprintf(stderr,
		"linger_sink: %ld timer flushes, %ld waits for POLLOUT\n",
		l->flushes, l->waits);
}

static const pgo_sink_ops_t linger_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "linger",
	.start = linger_start,
	.submit = linger_submit,
	.cancel = linger_cancel,
	.drain = linger_drain,
	.stop = linger_stop,
};

static pgo_relay_t *running;

static void on_term(int sig)
{
	(void)sig;
	pgo_relay_request_stop(running);
}

int main(void)
{
	static struct linger state;
	extern char **environ;
	pgo_conf_t *conf = pgo_conf_new();
	pgo_error_t err;
	pgo_sink_t *sink;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	if (!conf || pgo_conf_load_env(conf, environ) != PGO_OK) {
		fprintf(stderr, "linger_sink: %s\n",
			conf ? pgo_conf_errmsg(conf) : "out of memory");
		return 2;
	}
	sink = pgo_sink_new_custom(&linger_ops, &state, &err);
	if (!sink) {
		fprintf(stderr, "linger_sink: %s\n", err.msg);
		return 1;
	}
	running = pgo_relay_new(conf, sink, &err);
	if (!running) {
		fprintf(stderr, "linger_sink: %s\n", err.msg);
		return 1;
	}
	signal(SIGTERM, on_term);
	rc = pgo_relay_run(running);
	pgo_relay_destroy(running);
	pgo_sink_destroy(sink);
	pgo_conf_destroy(conf);
	free(state.buf);
	return rc == PGO_OK ? 0 : 1;
}
