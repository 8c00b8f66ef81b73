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
 * outage: UNAVAILABLE verdicts for the whole batch (no attempt spent), the
 * host told the endpoint is down, and up again once Retry-After (seconds
 * or an HTTP date) or the sink's own backoff, whichever is longer, has
 * passed; other statuses and timeouts are a failed attempt with the status
 * and the first bytes of the body.  Nothing waits in libcurl's memory: a
 * batch is done only once every request of it was answered or abandoned.
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
#include "sinks/http/webhook.h"

#define SUBJECT	       "sink http"
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 10000
#define BODY_KEEP      200 /* bytes of a response body kept for errors */
#define MAX_EXTRA      32  /* sink.http_headers */

static const char *const url_names[] = {"topic", "type", "key", NULL};

enum req_state {
	REQ_WAITING, /* not sent yet */
	REQ_RUNNING, /* its transfer is in the multi handle */
	REQ_DONE     /* its events have their verdicts */
};

struct hbatch;

/* One HTTP request: the events [first, first + n) of its batch. */
struct hreq {
	struct hbatch *hb;
	size_t first, n;
	enum req_state state;
	pgo_ack_t verdict; /* once DONE */
	CURL *easy;	   /* while RUNNING */
	struct curl_slist *hdrs;
	pgo_buf_t body;
	pgo_buf_t resp; /* the first BODY_KEEP bytes of the response */
	char *url;	/* the expanded sink.http_url */
	char errbuf[CURL_ERROR_SIZE];
};

/* One batch taken by submit(), in batch->sink_state until done or
 * cancelled. */
struct hbatch {
	pgo_batch_t *batch;
	struct hbatch *prev, *next; /* the sink's batches, oldest first */
	struct hreq *reqs;
	size_t nreq;
	size_t *ev_req;	   /* the request of each event */
	ptrdiff_t *before; /* the event each event waits for, or -1 */
	size_t next_wait;  /* requests before this one are not WAITING */
	size_t left;	   /* requests not DONE */
	bool unavailable;  /* an outage: the batch goes back whole */
	int64_t started;
};

/* A socket libcurl asked to watch. */
struct hsock {
	struct hs *s;
	pgo_sink_io_t *io;
	struct hsock *next;
};

struct hs {
	pgo_sink_t *sink;
	/* configuration, copied at configure */
	char *url_tmpl;
	char *queue;
	pgo_http_body_t body;
	int batch;
	int concurrency;
	int64_t timeout_ms;
	int mode; /* pgo_mode_t: what has to wait for what */
	char *ca_file, *cert, *key;
	char *extra[MAX_EXTRA]; /* "Name: value" */
	int nextra;
	pgo_http_secrets_t secrets;
	char where[512]; /* the URL template without its userinfo */

	/* runtime, start to stop */
	CURLM *multi;
	pgo_sink_timer_t *curl_timer; /* libcurl's timeout */
	pgo_sink_timer_t *kick;	      /* a deferred step */
	pgo_sink_timer_t *resume;     /* the end of an outage's wait */
	struct hsock *socks;
	struct hbatch *head, *tail;
	int running; /* requests in flight */
	bool in_step, again;
	bool down;	    /* the host was told the endpoint is down */
	int64_t resume_at;  /* while down: when it is tried again */
	int64_t backoff;    /* the next outage's wait at least */
	char last_err[256]; /* the last outage's reason (logged once) */
	char gone[512];	    /* the last URL logged as gone (410) */
	pgo_buf_t scratch, sig;
	CURL *pool[64]; /* easy handles kept for the next requests */
	int npool;
};

static struct hs *hs_of(pgo_sink_t *sink)
{
	return sink->priv;
}

/* An easy handle: one kept from an earlier request (reset), or new. */
static CURL *easy_get(struct hs *s)
{
	return s->npool > 0 ? s->pool[--s->npool] : curl_easy_init();
}

/* Keeps e for a later request (saves its allocation), or frees it. */
static void easy_put(struct hs *s, CURL *e)
{
	if (s->npool < (int)(sizeof(s->pool) / sizeof(s->pool[0]))) {
		/* Not curl_easy_reset(), 3 % of the relay's instructions
		 * per request at batch 1 (callgrind): req_start() sets every
		 * option a request uses, the same ones each time.  Only the
		 * pointers into the finished request are dropped. */
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, NULL);
		curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
		curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
		s->pool[s->npool++] = e;
	} else {
		curl_easy_cleanup(e);
	}
}

/* url without user:password@, for messages. */
static void url_public(const char *url, char *out, size_t size)
{
	const char *p = strstr(url, "://");
	const char *host = p ? p + 3 : url;
	const char *at = strchr(host, '@');
	const char *slash = strchr(host, '/');

	if (at && (!slash || at < slash))
		snprintf(out, size, "%.*s%s", (int)(host - url), url, at + 1);
	else
		snprintf(out, size, "%s", url);
}

/* --- verdicts and batches --- */

/* Gives the events of r the verdict and marks it DONE. */
static void req_finish(struct hreq *r, pgo_ack_t ack, const char *msg)
{
	pgo_batch_t *b = r->hb->batch;

	for (size_t i = r->first; i < r->first + r->n; i++) {
		if (ack == PGO_ACK_OK)
			b->acks[i] = PGO_ACK_OK;
		else
			pgo_batch_fail(b, i, ack, msg);
	}
	r->verdict = ack;
	r->state = REQ_DONE;
	r->hb->left--;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	pgo_buf_free(&r->body);
	pgo_buf_free(&r->resp);
}

/* Takes r's transfer out of the multi handle. */
static void req_abort(struct hs *s, struct hreq *r)
{
	if (r->state != REQ_RUNNING)
		return;
	curl_multi_remove_handle(s->multi, r->easy);
	easy_put(s, r->easy);
	r->easy = NULL;
	s->running--;
	r->state = REQ_WAITING;
}

static void unlink_batch(struct hs *s, struct hbatch *hb)
{
	if (hb->prev)
		hb->prev->next = hb->next;
	else
		s->head = hb->next;
	if (hb->next)
		hb->next->prev = hb->prev;
	else
		s->tail = hb->prev;
	hb->prev = hb->next = NULL;
	hb->batch->sink_state = NULL;
}

/* Frees hb, whose transfers are out of the multi handle. */
static void batch_free(struct hbatch *hb)
{
	for (size_t r = 0; r < hb->nreq; r++) {
		free(hb->reqs[r].url);
		curl_slist_free_all(hb->reqs[r].hdrs);
		pgo_buf_free(&hb->reqs[r].body);
		pgo_buf_free(&hb->reqs[r].resp);
	}
	free(hb);
}

/* The batch met an outage: its rows go back untouched, so nothing more
 * of it is sent and what is in flight is abandoned (the endpoint may
 * have some of it: the consumer deduplicates by webhook-id). */
static void batch_unavailable(struct hs *s, struct hbatch *hb, const char *msg)
{
	hb->unavailable = true;
	for (size_t r = 0; r < hb->nreq; r++) {
		struct hreq *q = &hb->reqs[r];

		if (q->state == REQ_DONE)
			continue;
		req_abort(s, q);
		req_finish(q, PGO_ACK_UNAVAILABLE, msg);
	}
	pgo_batch_fail_rest(hb->batch, PGO_ACK_UNAVAILABLE, msg);
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
static void finish_done(struct hs *s)
{
	for (;;) {
		struct hbatch *hb = s->head;
		pgo_batch_t *b;

		while (hb && hb->left > 0)
			hb = hb->next;
		if (!hb)
			return;
		b = hb->batch;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"batch of %zu in %zu requests done in %" PRId64 " ms",
			b->n, hb->nreq, pgo_sink_now_ms() - hb->started);
		unlink_batch(s, hb);
		batch_free(hb);
		pgo_sink_done(s->sink, b);
	}
}

/* --- outages --- */

/* The endpoint cannot take anything now: tell the host (claiming pauses)
 * and resume after wait_ms (Retry-After, -1: none) or the backoff,
 * whichever is longer.  The failures of one outage, many requests in
 * flight, count once; a later Retry-After may only extend the wait. */
static void outage(struct hs *s, pgo_log_level_t level, const char *msg,
		   int64_t wait_ms)
{
	int64_t now = pgo_sink_now_ms();

	if (strcmp(s->last_err, msg) != 0)
		pgo_log(level, SUBJECT, "%s", msg);
	else
		pgo_log(PGO_LOG_DEBUG, SUBJECT, "still: %s", msg);
	snprintf(s->last_err, sizeof(s->last_err), "%s", msg);
	if (!s->down) {
		if (wait_ms < s->backoff)
			wait_ms = s->backoff;
		s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : s->backoff * 2;
		s->down = true;
		s->resume_at = now + wait_ms;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"trying again in %" PRId64 " ms", wait_ms);
		pgo_sink_health(s->sink, 0, msg);
		pgo_sink_timer_set(s->resume, s->resume_at);
	} else if (wait_ms > 0 && now + wait_ms > s->resume_at) {
		s->resume_at = now + wait_ms;
		pgo_sink_timer_set(s->resume, s->resume_at);
	}
}

static void on_resume(void *arg)
{
	struct hs *s = arg;

	if (!s->down)
		return;
	s->down = false;
	pgo_log(PGO_LOG_INFO, SUBJECT, "trying %s again", s->where);
	pgo_sink_health(s->sink, 1, NULL);
	pgo_sink_timer_set(s->kick, pgo_sink_now_ms());
}

/* --- requests --- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct hreq *r = arg;
	size_t n = size * nmemb;

	if (r->resp.len < BODY_KEEP)
		pgo_buf_append(&r->resp, data,
			       n < BODY_KEEP - r->resp.len
				       ? n
				       : BODY_KEEP - r->resp.len);
	return n;
}

/* Appends one header line to r's list; false on OOM. */
static bool add_header(struct hreq *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool add_header(struct hreq *r, const char *fmt, ...)
{
	struct curl_slist *l;
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	l = curl_slist_append(r->hdrs, line);
	if (!l)
		return false;
	r->hdrs = l;
	return true;
}

/* Builds r's body and headers and hands its transfer to libcurl.  A
 * message in why (and false) when it cannot. */
static bool req_start(struct hs *s, struct hreq *r, char *why, size_t whylen)
{
	pgo_batch_t *b = r->hb->batch;
	const pgo_event_t *ev = &b->events[r->first];
	const pgo_event_t *last = &b->events[r->first + r->n - 1];
	bool array = s->batch > 1;
	char id[48], tp[128], ts[512];
	int64_t now = (int64_t)time(NULL);
	bool ok = true;
	CURL *e;

	if (!r->url) {
		snprintf(why, whylen, "http: out of memory");
		return false;
	}
	pgo_buf_reset(&r->body);
	pgo_buf_puts(&r->body, array ? "[" : "");
	for (size_t i = r->first; i < r->first + r->n; i++) {
		if (i > r->first)
			pgo_buf_puts(&r->body, ",");
		pgo_http_body_event(&r->body, s->body, &b->events[i], s->queue);
	}
	if (array)
		pgo_buf_puts(&r->body, "]");
	if (r->n == 1)
		snprintf(id, sizeof(id), "%" PRId64, ev->id);
	else
		snprintf(id, sizeof(id), "%" PRId64 "-%" PRId64, ev->id,
			 last->id);
	ok = !r->body.oom;
	ok = ok && add_header(r, "Content-Type: %s",
			      pgo_http_content_type(s->body, array));
	ok = ok && add_header(r, "webhook-id: %s", id);
	ok = ok && add_header(r, "webhook-timestamp: %" PRId64, now);
	if (ok && s->secrets.n > 0) {
		ok = pgo_http_sign(&s->secrets, id, now, r->body.data,
				   r->body.len, &s->scratch, &s->sig) &&
		     add_header(r, "webhook-signature: %s", s->sig.data);
		/* The signed content holds the body, not the secret. */
	}
	ok = ok && add_header(r, "Idempotency-Key: %s", id);
	if (ok &&
	    pgo_http_json_header(ev->headers, "traceparent", tp, sizeof(tp))) {
		ok = add_header(r, "traceparent: %s", tp);
		if (ok && pgo_http_json_header(ev->headers, "tracestate", ts,
					       sizeof(ts)))
			ok = add_header(r, "tracestate: %s", ts);
	}
	ok = ok && add_header(r, "User-Agent: pgoutbox/%s", PGO_VERSION);
	/* No "Expect: 100-continue" round trip for large bodies. */
	ok = ok && add_header(r, "Expect:");
	for (int i = 0; ok && i < s->nextra; i++)
		ok = add_header(r, "%s", s->extra[i]);
	if (!ok) {
		snprintf(why, whylen, "http: out of memory");
		return false;
	}
	e = easy_get(s);
	if (!e) {
		snprintf(why, whylen, "http: curl_easy_init failed");
		return false;
	}
	r->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body.data);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)r->body.len);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (s->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_file);
	if (s->cert) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, s->cert);
		curl_easy_setopt(e, CURLOPT_SSLKEY, s->key);
	}
	if (curl_multi_add_handle(s->multi, e) != CURLM_OK) {
		easy_put(s, e);
		snprintf(why, whylen, "http: curl_multi_add_handle failed");
		return false;
	}
	r->easy = e;
	r->state = REQ_RUNNING;
	s->running++;
	return true;
}

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
				batch_unavailable(s, hb, msg);
				break;
			}
			bl = req_blocked(hb, r, &blocker);
			if (bl == 1)
				continue;
			if (bl == 2) {
				snprintf(msg, sizeof(msg),
					 "held back behind event %" PRId64,
					 blocker);
				req_finish(r, PGO_ACK_RETRY, msg);
				continue;
			}
			if (s->running >= s->concurrency)
				return;
			if (!req_start(s, r, msg, sizeof(msg)))
				req_finish(r, PGO_ACK_RETRY, msg);
		}
		while (hb->next_wait < hb->nreq &&
		       hb->reqs[hb->next_wait].state != REQ_WAITING)
			hb->next_wait++;
	}
}

/* Is a curl error an outage of the endpoint rather than the request's
 * fault? */
static bool curl_outage(CURLcode rc, CURL *e)
{
	curl_off_t connected = 0;

	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH: return true;
	case CURLE_OPERATION_TIMEDOUT:
		/* Never connected: the endpoint is unreachable.  Connected
		 * but no answer in time: a failed attempt. */
		curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connected);
		return connected == 0;
	default: return false;
	}
}

static bool curl_tls(CURLcode rc)
{
	return rc == CURLE_SSL_CONNECT_ERROR ||
	       rc == CURLE_PEER_FAILED_VERIFICATION ||
	       rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM ||
	       rc == CURLE_SSL_ISSUER_ERROR;
}

/* Appends the kept response body to msg as one line. */
static void body_excerpt(const struct hreq *r, char *out, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < r->resp.len && n + 1 < size; i++) {
		char c = r->resp.data[i];

		out[n++] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
	}
	out[n] = '\0';
}

/* The transfer of r ended with rc: its verdict. */
static void req_answered(struct hs *s, struct hreq *r, CURLcode rc)
{
	CURL *e = r->easy;
	char pub[512], msg[900], excerpt[BODY_KEEP + 1];
	long status = 0;

	url_public(r->url, pub, sizeof(pub));
	curl_multi_remove_handle(s->multi, e);
	r->easy = NULL;
	s->running--;
	r->state = REQ_WAITING; /* until req_finish() */
	if (rc != CURLE_OK) {
		const char *err =
			r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc);

		if (curl_outage(rc, e)) {
			if (curl_tls(rc))
				snprintf(msg, sizeof(msg),
					 "http %s: TLS failed: %s (check "
					 "sink.http_ca_file, sink.http_cert)",
					 pub, err);
			else
				snprintf(msg, sizeof(msg), "http %s: %s", pub,
					 err);
			easy_put(s, e);
			outage(s, curl_tls(rc) ? PGO_LOG_ERROR : PGO_LOG_WARN,
			       msg, -1);
			batch_unavailable(s, r->hb, msg);
			return;
		}
		if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(msg, sizeof(msg),
				 "http %s: no response within %" PRId64 " ms",
				 pub, s->timeout_ms);
		else
			snprintf(msg, sizeof(msg), "http %s: %s", pub, err);
		easy_put(s, e);
		req_finish(r, PGO_ACK_RETRY, msg);
		return;
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	body_excerpt(r, excerpt, sizeof(excerpt));
	switch (pgo_http_status_verdict(status)) {
	case PGO_ACK_OK:
		s->backoff = BACKOFF_MIN_MS;
		req_finish(r, PGO_ACK_OK, NULL);
		break;
	case PGO_ACK_DEAD:
		snprintf(msg, sizeof(msg),
			 "http %s: 410 Gone: the endpoint is disabled%s%s", pub,
			 excerpt[0] ? ": " : "", excerpt);
		if (strcmp(s->gone, pub) != 0) {
			pgo_log(PGO_LOG_WARN, SUBJECT,
				"%s; its events go to dead letters", msg);
			snprintf(s->gone, sizeof(s->gone), "%s", pub);
		}
		req_finish(r, PGO_ACK_DEAD, msg);
		break;
	case PGO_ACK_UNAVAILABLE: {
		struct curl_header *h = NULL;
		int64_t wait = -1;

		if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1,
				     &h) == CURLHE_OK &&
		    h)
			wait = pgo_http_retry_after_ms(h->value, time(NULL));
		if (wait >= 0)
			snprintf(msg, sizeof(msg),
				 "http %s: %ld (Retry-After %" PRId64 " s)%s%s",
				 pub, status, wait / 1000,
				 excerpt[0] ? ": " : "", excerpt);
		else
			snprintf(msg, sizeof(msg), "http %s: %ld%s%s", pub,
				 status, excerpt[0] ? ": " : "", excerpt);
		outage(s, PGO_LOG_WARN, msg, wait);
		batch_unavailable(s, r->hb, msg);
		break;
	}
	default:
		snprintf(msg, sizeof(msg), "http %s: %ld%s%s", pub, status,
			 excerpt[0] ? ": " : "", excerpt);
		req_finish(r, PGO_ACK_RETRY, msg);
		break;
	}
	easy_put(s, e);
}

/* Everything the sink can do now: the answers that came, what may be
 * sent, the batches that are done.  done() may submit or cancel inside:
 * that asks for another round instead of nesting. */
static void step(struct hs *s)
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
				req_answered(s, r, m->data.result);
		}
		schedule(s);
		finish_done(s);
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
	step(s);
}

static void on_curl_timer(void *arg)
{
	struct hs *s = arg;
	int still;

	curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &still);
	step(s);
}

static void on_kick(void *arg)
{
	step(arg);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp,
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

static int on_curl_timeout(CURLM *m, long timeout_ms, void *userp)
{
	struct hs *s = userp;

	(void)m;
	pgo_sink_timer_set(s->curl_timer,
			   timeout_ms < 0 ? 0 : pgo_sink_now_ms() + timeout_ms);
	return 0;
}

/* --- ops --- */

static int http_start(pgo_sink_t *sink)
{
	struct hs *s = hs_of(sink);

	s->curl_timer = pgo_sink_timer_add(sink, 0, on_curl_timer, s);
	s->kick = pgo_sink_timer_add(sink, 0, on_kick, s);
	s->resume = pgo_sink_timer_add(sink, 0, on_resume, s);
	s->multi = curl_multi_init();
	if (!s->curl_timer || !s->kick || !s->resume || !s->multi) {
		pgo_sink_set_error(sink, "http: out of memory");
		return PGO_ERR_NOMEM;
	}
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_curl_timeout);
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
				req_abort(s, &hb->reqs[r]);
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

/* A small open-addressing table of keys: for each event, the event
 * before it that it must wait for (-1: none). */
static void order_events(const struct hs *s, const pgo_batch_t *b,
			 ptrdiff_t *before, size_t *slots, size_t nslots)
{
	for (size_t i = 0; i < b->n; i++) {
		const char *key = b->events[i].key;
		uint64_t h = 1469598103934665603ULL;
		size_t k;

		before[i] = -1;
		if (s->mode == PGO_MODE_STRICT) {
			before[i] = (ptrdiff_t)i - 1;
			continue;
		}
		if (s->mode != PGO_MODE_ORDERED || !key)
			continue;
		for (const char *p = key; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ULL;
		for (k = h & (nslots - 1); slots[k];
		     k = (k + 1) & (nslots - 1)) {
			if (strcmp(b->events[slots[k] - 1].key, key) == 0) {
				before[i] = (ptrdiff_t)(slots[k] - 1);
				break;
			}
		}
		slots[k] = i + 1;
	}
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
	order_events(s, b, hb->before, slots, nslots);
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
	step(s);
	return PGO_OK;
}

static void http_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct hs *s = hs_of(sink);
	struct hbatch *hb = b->sink_state;

	if (!hb)
		return;
	for (size_t r = 0; r < hb->nreq; r++)
		req_abort(s, &hb->reqs[r]);
	unlink_batch(s, hb);
	batch_free(hb);
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

		unlink_batch(s, hb);
		batch_free(hb);
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
	url_public(url, s->where, sizeof(s->where));
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
