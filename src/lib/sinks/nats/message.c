/*
 * sinks/nats/message.c — an event as a NATS message (subject, headers,
 * data), what a publish's outcome means as a verdict, the URL as log lines
 * and `config show` may print it, and the public key of an NKey seed.
 * Nothing here talks to a server (test_sink_nats covers it all).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "sinks/nats/nats.h"
#include "base/buf.h"
#include "base/error.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

/* --- the message --- */

void pgo_nats_msg_id(int64_t id, char *buf, size_t size)
{
	snprintf(buf, size, "%" PRId64, id);
}

/* A subject one can publish to: tokens separated by '.', none empty,
 * no whitespace or control characters (the protocol line would break) and
 * no wildcard token ('*', '>').  NULL, or what is wrong. */
static const char *subject_problem(const char *subj)
{
	const char *tok = subj;

	if (!*subj)
		return "empty";
	for (const unsigned char *c = (const unsigned char *)subj;; c++) {
		if (*c == '.' || !*c) {
			size_t n = (size_t)((const char *)c - tok);

			if (n == 0)
				return "an empty token";
			if (n == 1 && (*tok == '*' || *tok == '>'))
				return "a wildcard";
			if (!*c)
				return NULL;
			tok = (const char *)c + 1;
		} else if (*c <= ' ' || *c == 127) {
			return "whitespace or a control character";
		}
	}
}

/* A NATS header name: printable ASCII without ':' or spaces. */
static bool header_name_ok(const char *k)
{
	if (!*k)
		return false;
	for (const unsigned char *c = (const unsigned char *)k; *c; c++)
		if (*c <= ' ' || *c >= 127 || *c == ':')
			return false;
	return strncasecmp(k, "Nats-", 5) != 0;
}

/* A header value on one line: CR and LF become spaces. */
static char *one_line(const char *v)
{
	char *s = strdup(v);

	for (char *c = s; c && *c; c++)
		if (*c == '\r' || *c == '\n')
			*c = ' ';
	return s;
}

static int set_header(natsMsg *m, const char *k, const char *v, char *why,
		      size_t whylen)
{
	char *line = one_line(v);
	natsStatus s;

	if (!line) {
		snprintf(why, whylen, "nats: out of memory");
		return PGO_ERR_NOMEM;
	}
	s = natsMsgHeader_Set(m, k, line);
	free(line);
	if (s != NATS_OK) {
		snprintf(why, whylen, "nats: header %s: %s", k,
			 natsStatus_GetText(s));
		return s == NATS_NO_MEMORY ? PGO_ERR_NOMEM : PGO_ERR_INVALID;
	}
	return PGO_OK;
}

/* The members of the event's headers object, passed through. */
static int event_headers(natsMsg *m, const char *headers, char *why,
			 size_t whylen)
{
	json_error_t jerr;
	json_t *obj, *v;
	const char *k;
	int rc = PGO_OK;

	if (!headers || !*headers || strcmp(headers, "{}") == 0)
		return PGO_OK; /* the common case, without a parse */
	obj = json_loads(headers, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj || !json_is_object(obj)) {
		snprintf(why, whylen, "nats: headers are not a JSON object: %s",
			 obj ? "another JSON value" : jerr.text);
		json_decref(obj);
		return PGO_ERR_INVALID;
	}
	json_object_foreach(obj, k, v)
	{
		char *text = NULL;

		if (!header_name_ok(k))
			continue;
		if (!json_is_string(v))
			text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		rc = set_header(m, k, text ? text : json_string_value(v), why,
				whylen);
		free(text);
		if (rc != PGO_OK)
			break;
	}
	json_decref(obj);
	return rc;
}

int pgo_nats_message(const pgo_nats_format_t *f, const pgo_event_t *ev,
		     pgo_buf_t *subj, natsMsg **out, char *why, size_t whylen)
{
	const char *subject =
		pgo_sink_template_expand(subj, f->subject, ev->topic, f->queue);
	size_t len = strlen(ev->payload);
	natsMsg *m = NULL;
	natsStatus s;
	char id[24];
	int rc = PGO_OK;

	*out = NULL;
	if (!subject) {
		snprintf(why, whylen, "nats: out of memory");
		return PGO_ERR_NOMEM;
	}
	if (subject_problem(subject)) {
		snprintf(why, whylen,
			 "nats: \"%.200s\" (topic \"%.100s\") is no subject "
			 "to publish to: %s",
			 subject, ev->topic, subject_problem(subject));
		return PGO_ERR_INVALID;
	}
	if (len > INT32_MAX) {
		snprintf(why, whylen, "nats: payload too large");
		return PGO_ERR_INVALID;
	}
	s = natsMsg_Create(&m, subject, NULL, ev->payload, (int)len);
	if (s != NATS_OK) {
		snprintf(why, whylen, "nats: subject \"%s\": %s", subject,
			 natsStatus_GetText(s));
		return s == NATS_NO_MEMORY ? PGO_ERR_NOMEM : PGO_ERR_INVALID;
	}
	pgo_nats_msg_id(ev->id, id, sizeof(id));
	/* The event's own headers first: ours win a clash. */
	rc = event_headers(m, ev->headers, why, whylen);
	if (rc == PGO_OK)
		rc = set_header(m, "Pgoutbox-Type", ev->type, why, whylen);
	if (rc == PGO_OK && ev->key)
		rc = set_header(m, "Pgoutbox-Key", ev->key, why, whylen);
	if (rc == PGO_OK)
		rc = set_header(m, "Pgoutbox-Created-At", ev->created_at, why,
				whylen);
	if (rc == PGO_OK && f->cloudevents) {
		char source[512];

		snprintf(source, sizeof(source), "/%s", ev->topic);
		rc = set_header(m, "ce-specversion", "1.0", why, whylen);
		if (rc == PGO_OK)
			rc = set_header(m, "ce-id", id, why, whylen);
		if (rc == PGO_OK)
			rc = set_header(m, "ce-source", source, why, whylen);
		if (rc == PGO_OK)
			rc = set_header(m, "ce-type", ev->type, why, whylen);
		if (rc == PGO_OK && ev->key)
			rc = set_header(m, "ce-subject", ev->key, why, whylen);
		if (rc == PGO_OK)
			rc = set_header(m, "ce-time", ev->created_at, why,
					whylen);
		if (rc == PGO_OK)
			rc = set_header(m, "content-type", "application/json",
					why, whylen);
	}
	if (rc != PGO_OK) {
		natsMsg_Destroy(m);
		return rc;
	}
	*out = m;
	return PGO_OK;
}

/* --- verdicts --- */

bool pgo_nats_status_unavailable(natsStatus s)
{
	switch (s) {
	case NATS_CONNECTION_CLOSED:
	case NATS_CONNECTION_DISCONNECTED:
	case NATS_NOT_YET_CONNECTED:
	case NATS_INSUFFICIENT_BUFFER:
	case NATS_IO_ERROR:
	case NATS_STALE_CONNECTION:
	case NATS_CONNECTION_AUTH_FAILED:
	case NATS_SECURE_CONNECTION_REQUIRED:
	case NATS_NO_SERVER:
	case NATS_TIMEOUT:
	case NATS_DRAINING:
	case NATS_SSL_ERROR: return true;
	default: return false;
	}
}

/* The stream's error codes (jsErrCode) the verdicts tell apart. */
#define JS_MSG_TOO_LARGE 10054 /* JSStreamMessageExceedsMaximumErr */

pgo_ack_t pgo_nats_verdict(natsStatus s, int err_code, const char *text,
			   const char *subject, char *msg, size_t msglen)
{
	const char *t = text && *text ? text : natsStatus_GetText(s);

	if (s == NATS_OK) {
		if (msglen)
			msg[0] = '\0';
		return PGO_ACK_OK;
	}
	if (s == NATS_NO_RESPONDERS) {
		snprintf(msg, msglen,
			 "nats: no JetStream stream is bound to subject "
			 "\"%s\" (no responders): add one that captures it",
			 subject);
		return PGO_ACK_RETRY;
	}
	if (s == NATS_TIMEOUT) {
		snprintf(msg, msglen,
			 "nats: no PubAck in time for subject \"%s\"", subject);
		return PGO_ACK_UNAVAILABLE;
	}
	if (pgo_nats_status_unavailable(s)) {
		snprintf(msg, msglen, "nats: cannot publish to \"%s\" now: %s",
			 subject, t);
		return PGO_ACK_UNAVAILABLE;
	}
	if (s == NATS_ERR && err_code > 0) {
		snprintf(msg, msglen,
			 "nats: the stream refused subject \"%s\": %s "
			 "(err_code %d)",
			 subject, t, err_code);
		return err_code == JS_MSG_TOO_LARGE ? PGO_ACK_DEAD
						    : PGO_ACK_RETRY;
	}
	snprintf(msg, msglen, "nats: publish to \"%s\": %s", subject, t);
	switch (s) {
	case NATS_MAX_PAYLOAD:
	case NATS_INVALID_SUBJECT:
	case NATS_INVALID_ARG: return PGO_ACK_DEAD;
	default: return PGO_ACK_RETRY;
	}
}

/* --- URLs --- */

/* Appends one server URL of a list with its user information masked. */
static void mask_one(pgo_buf_t *b, const char *u, size_t n)
{
	const char *scheme = memmem(u, n, "://", 3);
	const char *host = scheme ? scheme + 3 : u;
	const char *at = NULL, *colon;

	for (const char *c = host; c < u + n; c++)
		if (*c == '@')
			at = c;
	if (!at) {
		pgo_buf_append(b, u, n);
		return;
	}
	colon = memchr(host, ':', (size_t)(at - host));
	/* user:password@ keeps the user; token@ is all secret. */
	pgo_buf_append(b, u, (size_t)((colon ? colon + 1 : host) - u));
	pgo_buf_puts(b, "***");
	pgo_buf_append(b, at, n - (size_t)(at - u));
}

static bool is_nats_url(const char *url)
{
	return strncasecmp(url, "nats://", 7) == 0 ||
	       strncasecmp(url, "tls://", 6) == 0;
}

bool pgo_nats_url_mask(const char *url, pgo_buf_t *b)
{
	const char *u = url;

	if (!is_nats_url(url))
		return false;
	for (;;) {
		size_t n = strcspn(u, ",");

		mask_one(b, u, n);
		if (!u[n])
			break;
		pgo_buf_puts(b, ",");
		u += n + 1;
	}
	return true;
}

void pgo_nats_url_describe(const char *url, char *buf, size_t size)
{
	pgo_buf_t b;
	size_t len = 0;

	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	for (const char *u = url;;) {
		size_t n = strcspn(u, ",");
		const char *s = memmem(u, n, "://", 3);
		const char *host = s ? s + 3 : u;

		for (const char *c = host; c < u + n; c++)
			if (*c == '@')
				host = c + 1;
		if (len++)
			pgo_buf_puts(&b, ",");
		pgo_buf_append(&b, host, n - (size_t)(host - u));
		if (!u[n])
			break;
		u += n + 1;
	}
	snprintf(buf, size, "%s", b.oom ? "nats" : b.data);
	pgo_buf_free(&b);
}

/* --- NKeys --- */

static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/* CRC-16/XMODEM, the checksum of NKeys. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int k = 0; k < 8; k++)
			crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021
						      : crc << 1);
	}
	return crc;
}

int pgo_nats_nkey_public(const char *seed, char *pub, size_t size,
			 pgo_error_t *err)
{
	unsigned char raw[64], key[35], pk[32];
	size_t n = 0, rawlen = 0, pklen = sizeof(pk);
	unsigned int acc = 0;
	int bits = 0;
	EVP_PKEY *pkey;
	uint16_t crc;

	/* base32 without padding */
	for (const char *c = seed; *c && !isspace((unsigned char)*c); c++) {
		const char *d = strchr(b32, *c);

		if (!d || !*c || rawlen >= sizeof(raw))
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "not an NKey seed");
		acc = (acc << 5) | (unsigned int)(d - b32);
		bits += 5;
		if (bits >= 8) {
			bits -= 8;
			raw[rawlen++] = (unsigned char)(acc >> bits);
		}
		acc &= (1u << bits) - 1;
	}
	/* seed prefix (S) and user prefix (U), 32 bytes, CRC little-endian */
	if (rawlen != 36 || (raw[0] & 0xf8) != 18 << 3 ||
	    (((raw[0] & 7) << 5) | ((raw[1] & 0xf8) >> 3)) != 20 << 3)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "not a user NKey seed (SU...)");
	crc = crc16(raw, 34);
	if (raw[34] != (crc & 0xff) || raw[35] != crc >> 8)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "NKey seed: bad checksum");
	pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw + 2,
					    32);
	if (!pkey || EVP_PKEY_get_raw_public_key(pkey, pk, &pklen) != 1 ||
	    pklen != 32) {
		EVP_PKEY_free(pkey);
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "NKey seed: no Ed25519 key");
	}
	EVP_PKEY_free(pkey);
	key[0] = 20 << 3;
	memcpy(key + 1, pk, 32);
	crc = crc16(key, 33);
	key[33] = (unsigned char)(crc & 0xff);
	key[34] = (unsigned char)(crc >> 8);
	if (size < 57)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0, "buffer");
	acc = 0;
	bits = 0;
	for (size_t i = 0; i < sizeof(key); i++) {
		acc = (acc << 8) | key[i];
		bits += 8;
		while (bits >= 5) {
			bits -= 5;
			pub[n++] = b32[(acc >> bits) & 31];
		}
		acc &= (1u << bits) - 1;
	}
	if (bits > 0)
		pub[n++] = b32[(acc << (5 - bits)) & 31];
	pub[n] = '\0';
	return PGO_OK;
}
