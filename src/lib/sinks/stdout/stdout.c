/*
 * sinks/stdout/stdout.c — the stdout sink: one NDJSON line per event on
 * standard output.  An event is acknowledged once its line was written to the
 * file descriptor.  A write error (the reader left: EPIPE; a full disk) is an
 * outage of the sink, not the events' fault: the rest of the batch is
 * UNAVAILABLE, so nothing is deleted that was not written, no attempt is
 * spent and nothing is dead-lettered while stdout cannot take it.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/stdout/stdout.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* Writes all of buf, waiting when the descriptor is non-blocking. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			(void)poll(&p, 1, 1000);
		} else if (n < 0 && errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Writes the batch at once (a terminal or a pipe's reader keeps up, and a
 * full pipe waits at most a second per try) and says it is done. */
static int stdout_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	pgo_buf_t *out = sink->priv;
	size_t start = 0;
	int e;

	pgo_buf_reset(out);
	for (size_t i = 0; i < b->n; i++) {
		size_t need = pgo_event_ndjson(&b->events[i], NULL, 0);

		if (!pgo_buf_reserve(out, need))
			break;
		out->len += pgo_event_ndjson(&b->events[i],
					     out->data + out->len, need + 1);
	}
	if (out->oom) {
		pgo_batch_fail_rest(b, PGO_ACK_RETRY, "stdout: out of memory");
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	e = write_all(STDOUT_FILENO, out->data + start, out->len - start);
	if (e < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "stdout: write: %s", strerror(-e));
		pgo_batch_fail_rest(b, PGO_ACK_UNAVAILABLE, msg);
	} else {
		for (size_t i = 0; i < b->n; i++)
			b->acks[i] = PGO_ACK_OK;
	}
	/* Do not keep a huge buffer after an unusually large batch. */
	if (out->cap > 4 * 1024 * 1024)
		pgo_buf_free(out);
	pgo_sink_done(sink, b);
	return PGO_OK;
}

static int stdout_open(pgo_sink_t *sink)
{
	pgo_buf_t *out = malloc(sizeof(*out));

	if (!out) {
		pgo_sink_set_error(sink, "out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_buf_init(out);
	sink->priv = out;
	return PGO_OK;
}

static void stdout_close(pgo_sink_t *sink)
{
	pgo_buf_t *out = sink->priv;

	if (out) {
		pgo_buf_free(out);
		free(out);
		sink->priv = NULL;
	}
}

const pgo_sink_ops_t pgo_sink_stdout_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "stdout",
	.open = stdout_open,
	.submit = stdout_submit,
	.close = stdout_close,
};
