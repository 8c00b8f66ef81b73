/*
 * sinks/http/request.c — the http sink's requests: the order the events
 * of a batch must keep (which event waits for which), and one request
 * built from its events (body, signature, headers) and handed to libcurl
 * on a pooled easy handle.
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
#include "conf/conf.h"
#include "pgoutbox/sink.h"
#include "sinks/http/webhook.h"

/* An easy handle: one kept from an earlier request (reset), or new. */
static CURL *easy_get(struct hs *s)
{
	return s->npool > 0 ? s->pool[--s->npool] : curl_easy_init();
}

/* Keeps e for a later request (saves its allocation), or frees it. */
void pgo_hs_easy_put(struct hs *s, CURL *e)
{
	if (s->npool < (int)(sizeof(s->pool) / sizeof(s->pool[0]))) {
		/* Not curl_easy_reset(), 3 % of the relay's instructions
		 * per request at batch 1 (callgrind): pgo_hs_req_start() sets
		 * every option a request uses, the same ones each time.  Only
		 * the pointers into the finished request are dropped. */
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
void pgo_hs_url_public(const char *url, char *out, size_t size)
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
bool pgo_hs_req_start(struct hs *s, struct hreq *r, char *why, size_t whylen)
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
		pgo_hs_easy_put(s, e);
		snprintf(why, whylen, "http: curl_multi_add_handle failed");
		return false;
	}
	r->easy = e;
	r->state = REQ_RUNNING;
	s->running++;
	return true;
}

/* A small open-addressing table of keys: for each event, the event
 * before it that it must wait for (-1: none). */
void pgo_hs_order_events(const struct hs *s, const pgo_batch_t *b,
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
