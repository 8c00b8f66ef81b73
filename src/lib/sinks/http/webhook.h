/*
 * sinks/http/webhook.h — what the http sink sends, without any I/O: the
 * request bodies (event, payload, CloudEvents), the Standard Webhooks 1.0
 * signature over them, and what a response means (a verdict, Retry-After).
 * Pure functions, unit-tested in tests/unit/test_sink_http.c.
 */
#ifndef PGO_HTTP_WEBHOOK_H
#define PGO_HTTP_WEBHOOK_H

#include <time.h>

#include "sinks/http/http.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* sink.http_body: what a request carries (enum index of the key). */
typedef enum pgo_http_body {
	PGO_HTTP_BODY_EVENT = 0,      /* the stdout sink's NDJSON object */
	PGO_HTTP_BODY_PAYLOAD = 1,    /* the event's payload as it is */
	PGO_HTTP_BODY_CLOUDEVENTS = 2 /* a CloudEvents 1.0 structured event */
} pgo_http_body_t;

#define PGO_HTTP_MAX_SECRETS 8
#define PGO_HTTP_MAX_KEY     128

/* The signing keys of sink.http_secret, decoded: every request is signed
 * with each of them (rotation: receivers with the old or the new one
 * verify). */
typedef struct pgo_http_secrets {
	int n;
	struct {
		unsigned char key[PGO_HTTP_MAX_KEY];
		size_t len;
	} k[PGO_HTTP_MAX_SECRETS];
} pgo_http_secrets_t;

/* Parses sink.http_secret: whsec_<base64> secrets separated by spaces or
 * commas ("" = none: requests are not signed).  PGO_OK, or
 * PGO_ERR_CONFIG with err's message (never the secret itself). */
int pgo_http_secrets_parse(const char *text, pgo_http_secrets_t *out,
			   pgo_error_t *err);

/* The webhook-signature header's value for msg_id, timestamp and body:
 * "v1,<base64 HMAC-SHA256>" per secret, separated by spaces, in out
 * (reset first).  scratch holds the signed content.  false on OOM. */
bool pgo_http_sign(const pgo_http_secrets_t *s, const char *msg_id,
		   int64_t timestamp, const char *body, size_t len,
		   pgo_buf_t *scratch, pgo_buf_t *out);

/* Appends the body of one event in format fmt (queue: CloudEvents'
 * source). */
void pgo_http_body_event(pgo_buf_t *b, pgo_http_body_t fmt,
			 const pgo_event_t *ev, const char *queue);
/* The content-type of a request of n events (n > 1: a JSON array). */
const char *pgo_http_content_type(pgo_http_body_t fmt, bool array);

/* The string value of the top-level key name of a JSON object (the
 * event's headers) in out, if it is a string of visible ASCII that fits
 * (a header value must not smuggle a line break).  false otherwise. */
bool pgo_http_json_header(const char *json, const char *name, char *out,
			  size_t size);

/* What an HTTP status means for the events of its request:
 * 2xx OK; 410 DEAD (the endpoint is gone); 429, 502, 503, 504
 * UNAVAILABLE (no attempt spent); anything else RETRY. */
pgo_ack_t pgo_http_status_verdict(long status);

/* A Retry-After value (delay-seconds or an HTTP date) as a delay in ms
 * from now; -1 when it is neither. */
int64_t pgo_http_retry_after_ms(const char *value, time_t now);

#endif /* PGO_HTTP_WEBHOOK_H */
