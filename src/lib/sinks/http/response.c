/*
 * sinks/http/response.c — what a finished transfer means for its events
 * (webhook.c reads the status; connection failures and 429/5xx are an
 * outage of the endpoint), the outage's wait and the host told, and the
 * batches handed back once every request of them is answered.
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
#include "base/log.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/http/webhook.h"

/* --- verdicts and batches --- */

/* Gives the events of r the verdict and marks it DONE. */
void pgo_hs_req_finish(struct hreq *r, pgo_ack_t ack, const char *msg)
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
void pgo_hs_req_abort(struct hs *s, struct hreq *r)
{
	if (r->state != REQ_RUNNING)
		return;
	curl_multi_remove_handle(s->multi, r->easy);
	pgo_hs_easy_put(s, r->easy);
	r->easy = NULL;
	s->running--;
	r->state = REQ_WAITING;
}

void pgo_hs_unlink_batch(struct hs *s, struct hbatch *hb)
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
void pgo_hs_batch_free(struct hbatch *hb)
{
	for (size_t r = 0; r < hb->nreq; r++) {
		free(hb->reqs[r].url);
		curl_slist_free_all(hb->reqs[r].hdrs);
		pgo_buf_free(&hb->reqs[r].body);
		pgo_buf_free(&hb->reqs[r].resp);
	}
	free(hb);
}

/* The batch met an pgo_hs_outage: its rows go back untouched, so nothing more
 * of it is sent and what is in flight is abandoned (the endpoint may
 * have some of it: the consumer deduplicates by webhook-id). */
void pgo_hs_batch_unavailable(struct hs *s, struct hbatch *hb, const char *msg)
{
	hb->unavailable = true;
	for (size_t r = 0; r < hb->nreq; r++) {
		struct hreq *q = &hb->reqs[r];

		if (q->state == REQ_DONE)
			continue;
		pgo_hs_req_abort(s, q);
		pgo_hs_req_finish(q, PGO_ACK_UNAVAILABLE, msg);
	}
	pgo_batch_fail_rest(hb->batch, PGO_ACK_UNAVAILABLE, msg);
}

/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
void pgo_hs_finish_done(struct hs *s)
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
		pgo_hs_unlink_batch(s, hb);
		pgo_hs_batch_free(hb);
		pgo_sink_done(s->sink, b);
	}
}

/* --- outages --- */

/* The endpoint cannot take anything now: tell the host (claiming pauses)
 * and resume after wait_ms (Retry-After, -1: none) or the backoff,
 * whichever is longer.  The failures of one pgo_hs_outage, many requests in
 * flight, count once; a later Retry-After may only extend the wait. */
void pgo_hs_outage(struct hs *s, pgo_log_level_t level, const char *msg,
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

void pgo_hs_on_resume(void *arg)
{
	struct hs *s = arg;

	if (!s->down)
		return;
	s->down = false;
	pgo_log(PGO_LOG_INFO, SUBJECT, "trying %s again", s->where);
	pgo_sink_health(s->sink, 1, NULL);
	pgo_sink_timer_set(s->kick, pgo_sink_now_ms());
}

/* Is a curl error an pgo_hs_outage of the endpoint rather than the request's
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
void pgo_hs_req_answered(struct hs *s, struct hreq *r, CURLcode rc)
{
	CURL *e = r->easy;
	char pub[512], msg[900], excerpt[BODY_KEEP + 1];
	long status = 0;

	pgo_hs_url_public(r->url, pub, sizeof(pub));
	curl_multi_remove_handle(s->multi, e);
	r->easy = NULL;
	s->running--;
	r->state = REQ_WAITING; /* until pgo_hs_req_finish() */
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
			pgo_hs_easy_put(s, e);
			pgo_hs_outage(
				s, curl_tls(rc) ? PGO_LOG_ERROR : PGO_LOG_WARN,
				msg, -1);
			pgo_hs_batch_unavailable(s, r->hb, msg);
			return;
		}
		if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(msg, sizeof(msg),
				 "http %s: no response within %" PRId64 " ms",
				 pub, s->timeout_ms);
		else
			snprintf(msg, sizeof(msg), "http %s: %s", pub, err);
		pgo_hs_easy_put(s, e);
		pgo_hs_req_finish(r, PGO_ACK_RETRY, msg);
		return;
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	body_excerpt(r, excerpt, sizeof(excerpt));
	switch (pgo_http_status_verdict(status)) {
	case PGO_ACK_OK:
		s->backoff = BACKOFF_MIN_MS;
		pgo_hs_req_finish(r, PGO_ACK_OK, NULL);
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
		pgo_hs_req_finish(r, PGO_ACK_DEAD, msg);
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
		pgo_hs_outage(s, PGO_LOG_WARN, msg, wait);
		pgo_hs_batch_unavailable(s, r->hb, msg);
		break;
	}
	default:
		snprintf(msg, sizeof(msg), "http %s: %ld%s%s", pub, status,
			 excerpt[0] ? ": " : "", excerpt);
		pgo_hs_req_finish(r, PGO_ACK_RETRY, msg);
		break;
	}
	pgo_hs_easy_put(s, e);
}
