/*
 * sinks/http/http.c — the http sink: webhooks to an HTTP endpoint, signed
 * per Standard Webhooks 1.0, with libcurl's multi interface driven by the
 * host's event loop.
 *
 * libcurl tells the sink which sockets to watch (CURLMOPT_SOCKETFUNCTION:
 * a pgo_sink_io_t per socket) and when to call it back without I/O
 * (CURLMOPT_TIMERFUNCTION: one pgo_sink_timer_t); both call
 * curl_multi_socket_action(), and the transfers that finished are read
 * with curl_multi_info_read().  Nothing blocks and no thread is started.
 *
 * A batch becomes requests: runs of consecutive events, at most
 * sink.http_batch each and all for the same URL (sink.http_url is a
 * template).  At most sink.http_concurrency requests are in flight over
 * all batches.  In the ordered modes a request waits until the requests
 * with earlier events of its keys (strict: any earlier event) are
 * answered, and is not sent when one of them failed: the relay holds it
 * back without spending an attempt (relay/settle.c).
 *
 * What a response means (webhook.c): 2xx delivered; 410 dead letter, the
 * endpoint is disabled; 429, 502, 503, 504 and connection failures are an
 * pgo_hs_outage: UNAVAILABLE verdicts for the whole batch (no attempt spent),
 * the host told the endpoint is down, and up again once Retry-After (seconds or
 * an HTTP date) or the sink's own backoff, whichever is longer, has passed;
 * other statuses and timeouts are a failed attempt with the status and the
 * first bytes of the body.  Nothing waits in libcurl's memory: a batch is done
 * only once every request of it was answered or abandoned. * This file: the
 * sink's ops and configuration; multi.c: libcurl on the loop; request.c: the
 * requests; response.c: their answers as verdicts.
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
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/http/http.h"
#include "sinks/http/webhook.h"
#include "sinks/sink_int.h"

static const char *const url_names[] = {"topic", "type", "key", NULL};

static struct hs *hs_of(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- ops --- */

static int http_start(pgo_sink_t *sink)
{
	struct hs *s = hs_of(sink);

	s->curl_timer = pgo_sink_timer_add(sink, 0, pgo_hs_on_curl_timer, s);
	s->kick = pgo_sink_timer_add(sink, 0, pgo_hs_on_kick, s);
	s->resume = pgo_sink_timer_add(sink, 0, pgo_hs_on_resume, s);
	s->multi = curl_multi_init();
	if (!s->curl_timer || !s->kick || !s->resume || !s->multi) {
		pgo_sink_set_error(sink, "http: out of memory");
		return PGO_ERR_NOMEM;
	}
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, pgo_hs_on_socket);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION,
			  pgo_hs_on_curl_timeout);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)s->concurrency);
	return PGO_OK;
}

static void http_stop(pgo_sink_t *sink)
{
	struct hs *s = hs_of(sink);

	/* Batches still held are forgotten, never done (the host is going
	 * away); their transfers end here. */
	for (struct hbatch *hb = s->head; hb; hb = hb->next)
		for (size_t r = 0; r < hb->nreq; r++)
			if (s->multi)
				pgo_hs_req_abort(s, &hb->reqs[r]);
	if (s->multi)
		curl_multi_cleanup(s->multi);
	s->multi = NULL;
	while (s->npool > 0)
		curl_easy_cleanup(s->pool[--s->npool]);
	while (s->socks) {
		struct hsock *w = s->socks;

		s->socks = w->next;
		pgo_sink_io_del(w->io);
		free(w);
	}
	pgo_sink_timer_del(s->curl_timer);
	pgo_sink_timer_del(s->kick);
	pgo_sink_timer_del(s->resume);
	s->curl_timer = s->kick = s->resume = NULL;
	s->running = 0;
	s->down = false;
}

static int http_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct hs *s = hs_of(sink);
	struct hbatch *hb;
	size_t nslots = 16, *slots;
	pgo_buf_t url;

	if (!s->multi) {
		pgo_sink_set_error(sink, "http: not started (no host loop)");
		return PGO_ERR_INVALID;
	}
	if (b->n == 0) {
		pgo_sink_done(sink, b);
		return PGO_OK;
	}
	while (nslots < b->n * 2)
		nslots *= 2;
	hb = calloc(1,
		    sizeof(*hb) + b->n * (sizeof(struct hreq) + sizeof(size_t) +
					  sizeof(ptrdiff_t)));
	slots = calloc(nslots, sizeof(*slots));
	if (!hb || !slots) {
		free(hb);
		free(slots);
		pgo_sink_set_error(sink, "http: out of memory");
		return PGO_ERR_NOMEM;
	}
	hb->reqs = (struct hreq *)(hb + 1);
	hb->ev_req = (size_t *)(hb->reqs + b->n);
	hb->before = (ptrdiff_t *)(hb->ev_req + b->n);
	hb->batch = b;
	hb->started = pgo_sink_now_ms();
	pgo_hs_order_events(s, b, hb->before, slots, nslots);
	free(slots);

	/* Runs of consecutive events for the same URL, s->batch at most. */
	pgo_buf_init(&url);
	for (size_t i = 0; i < b->n; i++) {
		const pgo_event_t *ev = &b->events[i];
		const char *values[] = {ev->topic, ev->type, ev->key};
		const char *u = pgo_template_expand_names(
			&url, s->url_tmpl, url_names, values, true);
		struct hreq *r = hb->nreq ? &hb->reqs[hb->nreq - 1] : NULL;

		if (!u)
			u = "";
		if (!r || r->n >= (size_t)s->batch ||
		    strcmp(r->url ? r->url : "", u) != 0) {
			r = &hb->reqs[hb->nreq++];
			r->hb = hb;
			r->first = i;
			r->url = strdup(u);
			pgo_buf_init(&r->body);
			pgo_buf_init(&r->resp);
		}
		r->n++;
		hb->ev_req[i] = hb->nreq - 1;
	}
	pgo_buf_free(&url);
	hb->left = hb->nreq;
	hb->prev = s->tail;
	if (s->tail)
		s->tail->next = hb;
	else
		s->head = hb;
	s->tail = hb;
	b->sink_state = hb;
	pgo_hs_step(s);
	return PGO_OK;
}

static void http_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct hs *s = hs_of(sink);
	struct hbatch *hb = b->sink_state;

	if (!hb)
		return;
	for (size_t r = 0; r < hb->nreq; r++)
		pgo_hs_req_abort(s, &hb->reqs[r]);
	pgo_hs_unlink_batch(s, hb);
	pgo_hs_batch_free(hb);
	/* Requests of other batches may go now: on the loop's next turn,
	 * not inside the host's call. */
	if (s->kick)
		pgo_sink_timer_set(s->kick, pgo_sink_now_ms());
}

static void http_close(pgo_sink_t *sink)
{
	struct hs *s = hs_of(sink);

	if (!s)
		return;
	while (s->head) {
		struct hbatch *hb = s->head;

		pgo_hs_unlink_batch(s, hb);
		pgo_hs_batch_free(hb);
	}
	free(s->url_tmpl);
	free(s->queue);
	free(s->ca_file);
	free(s->cert);
	free(s->key);
	for (int i = 0; i < s->nextra; i++)
		free(s->extra[i]);
	OPENSSL_cleanse(&s->secrets, sizeof(s->secrets));
	pgo_buf_free(&s->scratch);
	pgo_buf_free(&s->sig);
	free(s);
	sink->priv = NULL;
}

/* Splits sink.http_headers ("Name: value" lines, or " | " between them)
 * into s->extra. */
static int parse_headers(struct hs *s, const char *text, pgo_error_t *err)
{
	const char *t = text;

	while (*t) {
		const char *end = t;
		size_t len;

		while (*end && *end != '\n' && strncmp(end, " | ", 3) != 0)
			end++;
		len = (size_t)(end - t);
		while (len && (*t == ' ' || *t == '\t')) {
			t++;
			len--;
		}
		while (len && (t[len - 1] == ' ' || t[len - 1] == '\r'))
			len--;
		if (len) {
			const char *colon = memchr(t, ':', len);

			if (!colon || colon == t || memchr(t, '\r', len))
				return pgo_error_set(
					err, PGO_ERR_CONFIG, 0,
					"sink.http_headers: \"%.*s\" is not "
					"\"Name: value\"",
					(int)(len < 40 ? len : 40), t);
			if (s->nextra == MAX_EXTRA)
				return pgo_error_set(
					err, PGO_ERR_CONFIG, 0,
					"sink.http_headers: more than %d "
					"headers",
					MAX_EXTRA);
			s->extra[s->nextra] = strndup(t, len);
			if (!s->extra[s->nextra])
				return pgo_error_set(err, PGO_ERR_NOMEM, 1,
						     "out of memory");
			s->nextra++;
		}
		t = *end == '\n' ? end + 1 : *end ? end + 3 : end;
	}
	return PGO_OK;
}

static char *dup_or_null(const char *v)
{
	return *v ? strdup(v) : NULL;
}

int pgo_sink_http_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *url = pgo_conf_get_str(conf, "sink.http_url");
	struct hs *s;
	pgo_error_t err;
	static bool curl_ready;

	if (pgo_sink_http_validate(conf, &err) != PGO_OK ||
	    pgo_template_check_names("sink.http_url", url, url_names, &err) !=
		    PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return PGO_ERR_CONFIG;
	}
	if (strncmp(url, "http://", 7) != 0 &&
	    strncmp(url, "https://", 8) != 0) {
		pgo_sink_set_error(sink, "sink.http_url must start with "
					 "http:// or https://");
		return PGO_ERR_CONFIG;
	}
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			pgo_sink_set_error(sink, "http: curl_global_init "
						 "failed");
			return PGO_ERR_SINK;
		}
		curl_ready = true;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "http: out of memory");
		return PGO_ERR_NOMEM;
	}
	http_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	s->sink = sink;
	pgo_buf_init(&s->scratch);
	pgo_buf_init(&s->sig);
	s->body = (pgo_http_body_t)pgo_conf_get_int(conf, "sink.http_body");
	s->batch = pgo_conf_get_int(conf, "sink.http_batch");
	s->concurrency = pgo_conf_get_int(conf, "sink.http_concurrency");
	s->timeout_ms = pgo_conf_get_duration(conf, "sink.http_timeout");
	s->mode = v->mode;
	s->backoff = BACKOFF_MIN_MS;
	pgo_hs_url_public(url, s->where, sizeof(s->where));
	if (pgo_http_secrets_parse(pgo_conf_get_str(conf, "sink.http_secret"),
				   &s->secrets, &err) != PGO_OK ||
	    parse_headers(s, pgo_conf_get_str(conf, "sink.http_headers"),
			  &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code;
	}
	s->url_tmpl = strdup(url);
	s->queue = strdup(v->queue);
	s->ca_file = dup_or_null(pgo_conf_get_str(conf, "sink.http_ca_file"));
	s->cert = dup_or_null(pgo_conf_get_str(conf, "sink.http_cert"));
	s->key = dup_or_null(pgo_conf_get_str(conf, "sink.http_key"));
	if (!s->url_tmpl || !s->queue) {
		pgo_sink_set_error(sink, "http: out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int http_open(pgo_sink_t *sink)
{
	struct hs *s = hs_of(sink);
	static const char *const bodies[] = {"event", "payload", "cloudevents"};

	if (!s) {
		pgo_sink_set_error(sink, "http sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT,
		"posting to %s: body %s, %d event%s a request, %d in flight, "
		"%d signing secret%s",
		s->where, bodies[s->body], s->batch, s->batch == 1 ? "" : "s",
		s->concurrency, s->secrets.n, s->secrets.n == 1 ? "" : "s");
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_http_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "http",
	.open = http_open,
	.start = http_start,
	.submit = http_submit,
	.cancel = http_cancel,
	.stop = http_stop,
	.close = http_close,
};
