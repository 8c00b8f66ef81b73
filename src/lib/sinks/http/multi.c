/*
 * sinks/http/multi.c — libcurl's multi interface on the host's loop: the
 * sockets and the timer libcurl asks for, the step that reads finished
 * transfers and sends what may be sent (the ordered modes' waits).
 */
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "pgoutbox/version.h"
#include "sinks/http/http_int.h"
#include "pgoutbox/sink.h"

/* May r be sent?  0: yes; 1: not yet (an earlier event of its key is
 * in flight); 2: never (one failed: *blocker is that event). */
static int req_blocked(const struct hbatch *hb, const struct hreq *r,
		       int64_t *blocker)
{
	for (size_t i = r->first; i < r->first + r->n; i++) {
		ptrdiff_t j = hb->before[i];
		const struct hreq *q;

		if (j < 0)
			continue;
		q = &hb->reqs[hb->ev_req[j]];
		if (q == r)
			continue;
		if (q->state != REQ_DONE)
			return 1;
		if (q->verdict != PGO_ACK_OK && q->verdict != PGO_ACK_DEAD) {
			*blocker = hb->batch->events[j].id;
			return 2;
		}
	}
	return 0;
}

/* Sends what may be sent, oldest batch first, up to the concurrency. */
static void schedule(struct hs *s)
{
	char msg[600];

	for (struct hbatch *hb = s->head; hb; hb = hb->next) {
		for (size_t k = hb->next_wait; k < hb->nreq; k++) {
			struct hreq *r = &hb->reqs[k];
			int64_t blocker = 0;
			int bl;

			if (r->state != REQ_WAITING)
				continue;
			if (s->down) {
				snprintf(msg, sizeof(msg), "%s", s->last_err);
				pgo_hs_batch_unavailable(s, hb, msg);
				break;
			}
			bl = req_blocked(hb, r, &blocker);
			if (bl == 1)
				continue;
			if (bl == 2) {
				snprintf(msg, sizeof(msg),
					 "held back behind event %" PRId64,
					 blocker);
				pgo_hs_req_finish(r, PGO_ACK_RETRY, msg);
				continue;
			}
			if (s->running >= s->concurrency)
				return;
			if (!pgo_hs_req_start(s, r, msg, sizeof(msg)))
				pgo_hs_req_finish(r, PGO_ACK_RETRY, msg);
		}
		while (hb->next_wait < hb->nreq &&
		       hb->reqs[hb->next_wait].state != REQ_WAITING)
			hb->next_wait++;
	}
}

/* Everything the sink can do now: the answers that came, what may be
 * sent, the batches that are done.  done() may submit or cancel inside:
 * that asks for another round instead of nesting. */
void pgo_hs_step(struct hs *s)
{
	if (s->in_step) {
		s->again = true;
		return;
	}
	s->in_step = true;
	do {
		CURLMsg *m;
		int left;

		s->again = false;
		while (s->multi &&
		       (m = curl_multi_info_read(s->multi, &left))) {
			char *priv = NULL;
			struct hreq *r;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  &priv);
			r = (void *)priv;
			if (r && r->state == REQ_RUNNING)
				pgo_hs_req_answered(s, r, m->data.result);
		}
		schedule(s);
		pgo_hs_finish_done(s);
	} while (s->again);
	s->in_step = false;
}

/* --- libcurl on the loop --- */

static void on_io(void *arg, int fd, short revents)
{
	struct hsock *w = arg;
	struct hs *s = w->s;
	int mask = 0, still;

	if (revents & POLLIN)
		mask |= CURL_CSELECT_IN;
	if (revents & POLLOUT)
		mask |= CURL_CSELECT_OUT;
	if (revents & (POLLERR | POLLHUP | POLLNVAL))
		mask |= CURL_CSELECT_ERR;
	curl_multi_socket_action(s->multi, fd, mask, &still);
	pgo_hs_step(s);
}

void pgo_hs_on_curl_timer(void *arg)
{
	struct hs *s = arg;
	int still;

	curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &still);
	pgo_hs_step(s);
}

void pgo_hs_on_kick(void *arg)
{
	pgo_hs_step(arg);
}

int pgo_hs_on_socket(CURL *e, curl_socket_t fd, int what, void *userp,
		     void *socketp)
{
	struct hs *s = userp;
	struct hsock *w = socketp;
	short events = 0;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (w) {
			struct hsock **pp = &s->socks;

			while (*pp && *pp != w)
				pp = &(*pp)->next;
			if (*pp)
				*pp = w->next;
			pgo_sink_io_del(w->io);
			free(w);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		events |= POLLIN;
	if (what & CURL_POLL_OUT)
		events |= POLLOUT;
	if (w) {
		pgo_sink_io_set(w->io, fd, events);
		return 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	w->s = s;
	w->io = pgo_sink_io_add(s->sink, fd, events, on_io, w);
	if (!w->io) {
		free(w);
		return -1;
	}
	w->next = s->socks;
	s->socks = w;
	curl_multi_assign(s->multi, fd, w);
	return 0;
}

int pgo_hs_on_curl_timeout(CURLM *m, long timeout_ms, void *userp)
{
	struct hs *s = userp;

	(void)m;
	pgo_sink_timer_set(s->curl_timer,
			   timeout_ms < 0 ? 0 : pgo_sink_now_ms() + timeout_ms);
	return 0;
}
