/*
 * sinks/http/webhook.c — the http sink's requests without I/O (see
 * sinks/http/webhook.h): bodies, Standard Webhooks signatures, and the
 * meaning of responses.
 *
 * Standard Webhooks 1.0: the signed content is
 *   <webhook-id> "." <webhook-timestamp> "." <body>
 * and webhook-signature is "v1," + base64(HMAC-SHA256(key, content)), the
 * key being the base64 text after "whsec_" decoded.  Several signatures
 * are separated by spaces; a receiver accepts a request when one of them
 * verifies with its secret, which is how secrets rotate.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sinks/http/webhook.h"
#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* --- secrets and signatures --- */

/* Decodes one whsec_ secret of len bytes at t into k. */
static int secret_decode(const char *t, size_t len, pgo_http_secrets_t *out,
			 int index, pgo_error_t *err)
{
	unsigned char tmp[PGO_HTTP_MAX_KEY * 2];
	size_t b64, pad = 0;
	int n;

	if (len < 7 || strncmp(t, "whsec_", 6) != 0)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.http_secret: secret %d does not "
				     "start with whsec_",
				     index + 1);
	t += 6;
	b64 = len - 6;
	if (b64 % 4 != 0 || b64 / 4 * 3 > sizeof(tmp))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.http_secret: secret %d is not "
				     "padded base64 of at most %d bytes",
				     index + 1, PGO_HTTP_MAX_KEY);
	while (pad < 2 && t[b64 - 1 - pad] == '=')
		pad++;
	n = EVP_DecodeBlock(tmp, (const unsigned char *)t, (int)b64);
	if (n < 0 || (size_t)n - pad == 0 || (size_t)n - pad > PGO_HTTP_MAX_KEY)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.http_secret: secret %d is not "
				     "valid base64 of 1 to %d bytes",
				     index + 1, PGO_HTTP_MAX_KEY);
	out->k[index].len = (size_t)n - pad;
	memcpy(out->k[index].key, tmp, out->k[index].len);
	OPENSSL_cleanse(tmp, sizeof(tmp));
	return PGO_OK;
}

int pgo_http_secrets_parse(const char *text, pgo_http_secrets_t *out,
			   pgo_error_t *err)
{
	const char *t = text;

	memset(out, 0, sizeof(*out));
	for (;;) {
		size_t len;
		int rc;

		t += strspn(t, " \t,");
		if (!*t)
			break;
		len = strcspn(t, " \t,");
		if (out->n == PGO_HTTP_MAX_SECRETS)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "sink.http_secret: more than %d "
					     "secrets",
					     PGO_HTTP_MAX_SECRETS);
		rc = secret_decode(t, len, out, out->n, err);
		if (rc != PGO_OK)
			return rc;
		out->n++;
		t += len;
	}
	pgo_error_clear(err);
	return PGO_OK;
}

bool pgo_http_sign(const pgo_http_secrets_t *s, const char *msg_id,
		   int64_t timestamp, const char *body, size_t len,
		   pgo_buf_t *scratch, pgo_buf_t *out)
{
	pgo_buf_reset(scratch);
	pgo_buf_printf(scratch, "%s.%" PRId64 ".", msg_id, timestamp);
	pgo_buf_append(scratch, body, len);
	pgo_buf_reset(out);
	pgo_buf_puts(out, "");
	if (scratch->oom)
		return false;
	for (int i = 0; i < s->n; i++) {
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;

		if (!HMAC(EVP_sha256(), s->k[i].key, (int)s->k[i].len,
			  (const unsigned char *)scratch->data, scratch->len,
			  mac, &maclen))
			return false;
		if (!pgo_buf_reserve(out, 4 + (maclen + 2) / 3 * 4 + 1))
			return false;
		pgo_buf_puts(out, i ? " v1," : "v1,");
		out->len += (size_t)EVP_EncodeBlock((unsigned char *)out->data +
							    out->len,
						    mac, (int)maclen);
		out->data[out->len] = '\0';
	}
	return !out->oom;
}

/* --- bodies --- */

void pgo_http_body_event(pgo_buf_t *b, pgo_http_body_t fmt,
			 const pgo_event_t *ev, const char *queue)
{
	char tp[128], ts[512];

	switch (fmt) {
	case PGO_HTTP_BODY_EVENT: {
		size_t need = pgo_event_ndjson(ev, NULL, 0);

		if (!pgo_buf_reserve(b, need + 1))
			return;
		/* Without the line's '\n'. */
		b->len += pgo_event_ndjson(ev, b->data + b->len, need + 1) - 1;
		b->data[b->len] = '\0';
		return;
	}
	case PGO_HTTP_BODY_PAYLOAD: pgo_buf_puts(b, ev->payload); return;
	case PGO_HTTP_BODY_CLOUDEVENTS:
		pgo_buf_printf(b,
			       "{\"specversion\":\"1.0\",\"id\":\"%" PRId64
			       "\",\"source\":",
			       ev->id);
		{
			char src[128];

			snprintf(src, sizeof(src), "/pgoutbox/%s", queue);
			pgo_buf_json_str(b, src);
		}
		pgo_buf_puts(b, ",\"type\":");
		pgo_buf_json_str(b, ev->type);
		if (ev->key) {
			pgo_buf_puts(b, ",\"subject\":");
			pgo_buf_json_str(b, ev->key);
		}
		pgo_buf_puts(b, ",\"time\":");
		pgo_buf_json_str(b, ev->created_at);
		pgo_buf_puts(b, ",\"topic\":");
		pgo_buf_json_str(b, ev->topic);
		if (pgo_http_json_header(ev->headers, "traceparent", tp,
					 sizeof(tp))) {
			pgo_buf_puts(b, ",\"traceparent\":");
			pgo_buf_json_str(b, tp);
			if (pgo_http_json_header(ev->headers, "tracestate", ts,
						 sizeof(ts))) {
				pgo_buf_puts(b, ",\"tracestate\":");
				pgo_buf_json_str(b, ts);
			}
		}
		pgo_buf_puts(b, ",\"datacontenttype\":\"application/json\","
				"\"data\":");
		pgo_buf_puts(b, ev->payload);
		pgo_buf_puts(b, "}");
		return;
	}
}

const char *pgo_http_content_type(pgo_http_body_t fmt, bool array)
{
	if (fmt == PGO_HTTP_BODY_CLOUDEVENTS)
		return array ? "application/cloudevents-batch+json"
			     : "application/cloudevents+json";
	return "application/json";
}

/* --- the event's headers --- */

/* Skips JSON whitespace. */
static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Skips one JSON string at p ('"'); NULL when malformed. */
static const char *skip_str(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && !*++p)
			return NULL;
	return *p ? p + 1 : NULL;
}

/* Skips one JSON value at p; NULL when malformed. */
static const char *skip_value(const char *p)
{
	int depth = 0;

	p = ws(p);
	if (*p == '"')
		return skip_str(p);
	if (*p != '{' && *p != '[') {
		while (*p && !strchr(",}] \t\r\n", *p))
			p++;
		return p;
	}
	while (*p) {
		if (*p == '"') {
			p = skip_str(p);
			if (!p)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

bool pgo_http_json_header(const char *json, const char *name, char *out,
			  size_t size)
{
	size_t nlen = strlen(name);
	const char *p;

	if (!json)
		return false;
	p = ws(json);
	if (*p++ != '{')
		return false;
	for (;;) {
		const char *k, *v, *e;
		bool match;

		p = ws(p);
		if (*p != '"')
			return false;
		k = p + 1;
		e = skip_str(p);
		if (!e)
			return false;
		match = (size_t)(e - 1 - k) == nlen &&
			strncmp(k, name, nlen) == 0;
		p = ws(e);
		if (*p++ != ':')
			return false;
		p = ws(p);
		v = p;
		p = skip_value(p);
		if (!p)
			return false;
		if (match) {
			size_t len;

			if (*v != '"')
				return false;
			len = (size_t)(p - v) - 2;
			if (len + 1 > size)
				return false;
			for (size_t i = 0; i < len; i++)
				if (v[1 + i] < 0x20 || v[1 + i] > 0x7e ||
				    v[1 + i] == '\\')
					return false;
			memcpy(out, v + 1, len);
			out[len] = '\0';
			return true;
		}
		p = ws(p);
		if (*p++ != ',')
			return false;
	}
}

/* --- responses --- */

pgo_ack_t pgo_http_status_verdict(long status)
{
	if (status >= 200 && status < 300)
		return PGO_ACK_OK;
	if (status == 410)
		return PGO_ACK_DEAD;
	if (status == 429 || status == 502 || status == 503 || status == 504)
		return PGO_ACK_UNAVAILABLE;
	return PGO_ACK_RETRY;
}

int64_t pgo_http_retry_after_ms(const char *value, time_t now)
{
	const char *p = value;
	time_t t;

	if (!value)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p >= '0' && *p <= '9') {
		char *end;
		unsigned long long secs = strtoull(p, &end, 10);

		while (*end == ' ' || *end == '\t' || *end == '\r' ||
		       *end == '\n')
			end++;
		if (*end)
			return -1;
		if (secs > 86400ULL * 365)
			secs = 86400ULL * 365;
		return (int64_t)secs * 1000;
	}
	t = curl_getdate(p, NULL);
	if (t == (time_t)-1)
		return -1;
	return t > now ? (int64_t)(t - now) * 1000 : 0;
}
