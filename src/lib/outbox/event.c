/*
 * event.c — what every sink shares about events and batches: the NDJSON
 * line of one event (the wire format of the stdout and exec sinks) and the
 * helpers a sink uses to record verdicts in a batch.
 *
 * pgo_event_ndjson() writes into a caller-supplied buffer with snprintf's
 * contract so that a sink can lay a whole batch out in one growing buffer
 * without an intermediate allocation per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pgoutbox.h"
#include "base/arena.h"
#include "base/buf.h"
#include "pgoutbox/sink.h"

/* --- NDJSON --- */

/* A bounded writer: `len` counts every byte the line needs, while only the
 * bytes that fit in size - 1 are stored (the last byte is kept for NUL). */
struct line_writer {
	char *buf;
	size_t size;
	size_t len;
};

static void put_bytes(struct line_writer *w, const char *s, size_t n)
{
	if (w->size > 0 && w->len < w->size - 1) {
		size_t room = w->size - 1 - w->len;

		memcpy(w->buf + w->len, s, n < room ? n : room);
	}
	w->len += n;
}

static void put_str(struct line_writer *w, const char *s)
{
	put_bytes(w, s, strlen(s));
}

/* A JSON string literal, escaped exactly like pgo_buf_json_str(); NULL is
 * written as null. */
static void put_json_str(struct line_writer *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	if (!s) {
		put_bytes(w, "null", 4);
		return;
	}
	put_bytes(w, "\"", 1);
	while (*p) {
		const unsigned char *run = p;
		char esc[6];

		/* Copy the longest stretch that needs no escaping at once. */
		while (*p >= 0x20 && *p != '"' && *p != '\\')
			p++;
		if (p > run)
			put_bytes(w, (const char *)run, (size_t)(p - run));
		if (!*p)
			break;
		esc[0] = '\\';
		switch (*p) {
		case '"':
			esc[1] = '"';
			put_bytes(w, esc, 2);
			break;
		case '\\':
			esc[1] = '\\';
			put_bytes(w, esc, 2);
			break;
		case '\n':
			esc[1] = 'n';
			put_bytes(w, esc, 2);
			break;
		case '\r':
			esc[1] = 'r';
			put_bytes(w, esc, 2);
			break;
		case '\t':
			esc[1] = 't';
			put_bytes(w, esc, 2);
			break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			put_bytes(w, esc, 6);
		}
		p++;
	}
	put_bytes(w, "\"", 1);
}

/* JSON text copied as is (it is valid JSON already), or `dflt` for NULL.
 * A raw CR or LF in valid JSON can only be whitespace between tokens
 * (inside strings they must be escaped), so it becomes a space: one event
 * stays one line even for pretty-printed json columns. */
static void put_json_raw(struct line_writer *w, const char *s, const char *dflt)
{
	if (!s || !*s) {
		put_str(w, dflt);
		return;
	}
	while (*s) {
		size_t n = strcspn(s, "\r\n");

		put_bytes(w, s, n);
		s += n;
		if (*s) {
			put_bytes(w, " ", 1);
			s++;
		}
	}
}

size_t pgo_event_ndjson(const pgo_event_t *ev, char *buf, size_t size)
{
	struct line_writer w = {buf, size, 0};
	char num[32];

	snprintf(num, sizeof(num), "%" PRId64, ev->id);
	put_str(&w, "{\"id\":");
	put_str(&w, num);
	put_str(&w, ",\"topic\":");
	put_json_str(&w, ev->topic);
	put_str(&w, ",\"key\":");
	put_json_str(&w, ev->key);
	put_str(&w, ",\"type\":");
	put_json_str(&w, ev->type);
	put_str(&w, ",\"payload\":");
	put_json_raw(&w, ev->payload, "null");
	put_str(&w, ",\"headers\":");
	put_json_raw(&w, ev->headers, "{}");
	put_str(&w, ",\"created_at\":");
	put_json_str(&w, ev->created_at);
	snprintf(num, sizeof(num), "%d", ev->attempts);
	put_str(&w, ",\"attempts\":");
	put_str(&w, num);
	put_str(&w, "}\n");

	if (size > 0)
		buf[w.len < size ? w.len : size - 1] = '\0';
	return w.len;
}

/* --- batch verdicts --- */

void pgo_batch_fail(pgo_batch_t *b, size_t i, pgo_ack_t verdict,
		    const char *msg)
{
	static const char oom[] = "out of memory";
	char *copy = NULL;

	if (!b || i >= b->n)
		return;
	b->acks[i] = verdict;
	if (!b->errors)
		return;
	if (!msg) {
		b->errors[i] = NULL;
		return;
	}
	if (b->arena)
		copy = pgo_arena_strdup(b->arena, msg);
	b->errors[i] = copy ? copy : oom;
}

int pgo_batch_set(pgo_batch_t *b, size_t i, pgo_ack_t verdict, const char *msg)
{
	if (!b || i >= b->n || b->acks[i] != PGO_ACK_NONE)
		return 0;
	if (verdict == PGO_ACK_OK)
		b->acks[i] = PGO_ACK_OK;
	else
		pgo_batch_fail(b, i, verdict, msg);
	return 1;
}

void pgo_batch_fail_rest(pgo_batch_t *b, pgo_ack_t verdict, const char *msg)
{
	const char *copy = NULL;
	bool copied = false;

	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		/* One copy of the message in the arena serves the whole batch.
		 */
		if (!copied) {
			pgo_batch_fail(b, i, verdict, msg);
			copy = b->errors ? b->errors[i] : NULL;
			copied = true;
			continue;
		}
		b->acks[i] = verdict;
		if (b->errors)
			b->errors[i] = copy;
	}
}
