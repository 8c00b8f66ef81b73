/*
 * sinks/http/http_int.h — what the files of the http sink share: its
 * state (the sink, its batches and their requests, the sockets libcurl
 * watches) and the steps one file calls in another.  Loop thread only.
 */
#ifndef PGO_SINK_HTTP_INT_H
#define PGO_SINK_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sinks/http/webhook.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

#define SUBJECT	       "sink http"
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 10000
#define BODY_KEEP      200 /* bytes of a response body kept for errors */
#define MAX_EXTRA      32  /* sink.http_headers */

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

/* --- request.c: requests built from events --- */

/* Keeps e for a later request (saves its allocation), or frees it. */
void pgo_hs_easy_put(struct hs *s, CURL *e);
/* url without user:password@, for messages. */
void pgo_hs_url_public(const char *url, char *out, size_t size);
/* Builds r's body and headers and hands its transfer to libcurl.  A
 * message in why (and false) when it cannot. */
bool pgo_hs_req_start(struct hs *s, struct hreq *r, char *why, size_t whylen);
/* A small open-addressing table of keys: for each event, the event
 * before it that it must wait for (-1: none). */
void pgo_hs_order_events(const struct hs *s, const pgo_batch_t *b,
			 ptrdiff_t *before, size_t *slots, size_t nslots);

/* --- response.c: answers as verdicts, outages, batches done --- */

/* Gives the events of r the verdict and marks it DONE. */
void pgo_hs_req_finish(struct hreq *r, pgo_ack_t ack, const char *msg);
/* Takes r's transfer out of the multi handle. */
void pgo_hs_req_abort(struct hs *s, struct hreq *r);
/* Takes hb out of the sink's list and its batch's sink_state. */
void pgo_hs_unlink_batch(struct hs *s, struct hbatch *hb);
/* Frees hb, whose transfers are out of the multi handle. */
void pgo_hs_batch_free(struct hbatch *hb);
/* The batch met an outage: its rows go back untouched, so nothing more
 * of it is sent and what is in flight is abandoned (the endpoint may
 * have some of it: the consumer deduplicates by webhook-id). */
void pgo_hs_batch_unavailable(struct hs *s, struct hbatch *hb, const char *msg);
/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
void pgo_hs_finish_done(struct hs *s);
/* The endpoint cannot take anything now: tell the host (claiming pauses)
 * and resume after wait_ms (Retry-After, -1: none) or the backoff,
 * whichever is longer.  The failures of one outage, many requests in
 * flight, count once; a later Retry-After may only extend the wait. */
void pgo_hs_outage(struct hs *s, pgo_log_level_t level, const char *msg,
		   int64_t wait_ms);
/* The resume timer: the outage's wait is over, the host is told. */
void pgo_hs_on_resume(void *arg);
/* The transfer of r ended with rc: its verdict. */
void pgo_hs_req_answered(struct hs *s, struct hreq *r, CURLcode rc);

/* --- multi.c: libcurl's multi handle on the host's loop --- */

/* Everything the sink can do now: the answers that came, what may be
 * sent, the batches that are done.  done() may submit or cancel inside:
 * that asks for another round instead of nesting. */
void pgo_hs_step(struct hs *s);
/* The timer libcurl asked for (CURLMOPT_TIMERFUNCTION). */
void pgo_hs_on_curl_timer(void *arg);
/* A deferred step(). */
void pgo_hs_on_kick(void *arg);
/* CURLMOPT_SOCKETFUNCTION: watches, changes or drops a socket. */
int pgo_hs_on_socket(CURL *e, curl_socket_t fd, int what, void *userp,
		     void *socketp);
/* CURLMOPT_TIMERFUNCTION: sets the timer libcurl asks for. */
int pgo_hs_on_curl_timeout(CURLM *m, long timeout_ms, void *userp);

#endif /* PGO_SINK_HTTP_INT_H */
