/*
 * consume_read.c — reading the stream in order: the consumer's own
 * pending entries first (after a failure, a reconnect or a crash), then
 * entries of dead consumers taken over (XAUTOCLAIM), then new ones
 * (XREADGROUP BLOCK).  A failed entry stops the read; it is retried with
 * a backoff before the ones after it, and skipped after max_attempts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "inbox/consumer_int.h"
#include "base/log.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "sinks/redis/conn.h"

/* The value of field name in an entry's field array, or dflt. */
static const char *field(const redisReply *fields, const char *name,
			 const char *dflt)
{
	for (size_t i = 0; i + 1 < fields->elements; i += 2) {
		const redisReply *k = fields->element[i];
		const redisReply *v = fields->element[i + 1];

		if (k->type == REDIS_REPLY_STRING &&
		    strcmp(k->str, name) == 0 && v->type == REDIS_REPLY_STRING)
			return v->str;
	}
	return dflt;
}

/* A failure of entry_id: count it; after max_attempts give up on it. */
static void note_failure(pgo_consumer_t *c, const char *entry_id,
			 const char *event_id)
{
	if (strcmp(c->last_failed, entry_id) == 0) {
		c->fail_count++;
	} else {
		snprintf(c->last_failed, sizeof(c->last_failed), "%s",
			 entry_id);
		c->fail_count = 1;
	}
	c->pending_mode = true;
	if (c->fail_count >= c->max_attempts) {
		pgo_log(PGO_LOG_ERROR, c->subject,
			"event %s (entry %s) failed %d times: skipping it; it "
			"stays pending in the group (XPENDING lists it, "
			"XCLAIM retries it)",
			event_id, entry_id, c->fail_count);
		c->stats.skipped++;
		/* Later pending reads start after it. */
		snprintf(c->cursor, sizeof(c->cursor), "%s", entry_id);
		c->last_failed[0] = '\0';
		c->fail_count = 0;
		return;
	}
	pgo_consume_sleep_until(c, pgo_now_ms() +
					   pgo_consume_retry_ms(c->fail_count));
}

#define PGO_SOURCE_MAX 64

/* The "pgoutbox-source" header of a fleet's event (docs/fleet.md), in
 * buf; "" for none (or headers that are not JSON). */
static const char *source_of(const char *headers, char *buf, size_t size)
{
	json_t *h, *v;

	buf[0] = '\0';
	if (!strstr(headers, "pgoutbox-source"))
		return buf; /* the common case spares the parse */
	h = json_loads(headers, 0, NULL);
	v = json_object_get(h, "pgoutbox-source");
	if (json_is_string(v))
		snprintf(buf, size, "%s", json_string_value(v));
	json_decref(h);
	return buf;
}

/* Handles the entries of one read (an array of [id, fields]) in order.
 * Stops at the first failure (the rest stay pending, read again in order)
 * or when a stop is requested.  Returns DRILL to end the run. */
static outcome_t handle_entries(pgo_consumer_t *c, const redisReply *entries)
{
	for (size_t i = 0; entries && i < entries->elements; i++) {
		const redisReply *e = entries->element[i];
		const redisReply *f;
		pgo_inbox_msg_t m;
		char source[PGO_SOURCE_MAX];
		outcome_t o;

		if (c->stop)
			return DONE;
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
		    e->element[0]->type != REDIS_REPLY_STRING)
			continue;
		m.entry_id = e->element[0]->str;
		f = e->element[1];
		if (f->type != REDIS_REPLY_ARRAY) {
			/* Pending, but trimmed from the stream (MAXLEN). */
			pgo_log(PGO_LOG_ERROR, c->subject,
				"entry %s was trimmed from the stream before "
				"it "
				"was processed: acking it, its event is lost "
				"to this consumer",
				m.entry_id);
			c->stats.trimmed++;
			pgo_consume_xack(c, m.entry_id);
			continue;
		}
		m.id = field(f, "id", NULL);
		if (!m.id || !*m.id) {
			if (!c->warned_no_id)
				pgo_log(PGO_LOG_WARN, c->subject,
					"entry %s has no \"id\" field: "
					"deduplicating on entry ids instead",
					m.entry_id);
			c->warned_no_id = true;
			m.id = m.entry_id;
		}
		m.topic = field(f, "topic", "");
		m.key = field(f, "key", "");
		m.type = field(f, "type", "");
		m.payload = field(f, "payload", "null");
		m.headers = field(f, "headers", "{}");
		m.created_at = field(f, "created_at", "");
		m.source = source_of(m.headers, source, sizeof(source));
		o = c->handler || c->exec_command
			    ? pgo_consume_handle_one(c, &m)
			    : pgo_consume_handle_one_sql(c, &m);
		if (o == DRILL)
			return DRILL;
		if (o == DB_LOST) {
			c->pending_mode = true;
			return DONE;
		}
		if (o == FAILED) {
			note_failure(c, m.entry_id, m.id);
			return DONE;
		}
		if (strcmp(c->last_failed, m.entry_id) == 0)
			c->last_failed[0] = '\0';
		pgo_consume_xack(c, m.entry_id);
		if (c->redis.state == PGO_REDIS_DOWN)
			return DONE;
	}
	return DONE;
}

/* The entries of our stream in an XREADGROUP reply, or NULL. */
static const redisReply *read_entries(const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		return NULL;
	r = r->element[0];
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[1]->type != REDIS_REPLY_ARRAY)
		return NULL;
	return r->element[1];
}

/* XAUTOCLAIM: takes over entries idle longer than claim_idle. */
static outcome_t autoclaim(pgo_consumer_t *c)
{
	char idle[24], count[16];
	const char *argv[] = {"XAUTOCLAIM", c->stream,	     c->group, c->name,
			      idle,	    c->claim_cursor, "COUNT",  count};
	redisReply *r;
	outcome_t o = DONE;

	snprintf(idle, sizeof(idle), "%" PRId64, c->claim_idle_ms);
	snprintf(count, sizeof(count), "%d", c->count);
	if (!c->claim_cursor[0])
		snprintf(c->claim_cursor, sizeof(c->claim_cursor), "0-0");
	r = pgo_consume_call(c, 0, 8, argv);
	if (!r)
		return DONE;
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING) {
		snprintf(c->claim_cursor, sizeof(c->claim_cursor), "%s",
			 r->element[0]->str);
		if (r->element[1]->type == REDIS_REPLY_ARRAY &&
		    r->element[1]->elements > 0) {
			pgo_log(PGO_LOG_INFO, c->subject,
				"took over %zu entries idle for more than "
				"%" PRId64 " ms",
				r->element[1]->elements, c->claim_idle_ms);
			o = handle_entries(c, r->element[1]);
		}
	} else if (r->type == REDIS_REPLY_ERROR) {
		pgo_log(PGO_LOG_WARN, c->subject, "XAUTOCLAIM: %s", r->str);
	}
	/* A full scan done: wait before the next one. */
	if (strcmp(c->claim_cursor, "0-0") == 0)
		c->next_autoclaim =
			pgo_now_ms() + (c->claim_idle_ms / 2 > 500
						? c->claim_idle_ms / 2
						: 500);
	freeReplyObject(r);
	return o;
}

/* One read (pending, autoclaim or new) and its entries. */
outcome_t pgo_consume_read_once(pgo_consumer_t *c)
{
	char count[16], block[24];
	const char *argv[12] = {"XREADGROUP", "GROUP", c->group,
				c->name,      "COUNT", count};
	const redisReply *entries;
	redisReply *r;
	outcome_t o;
	int argc = 6;

	snprintf(count, sizeof(count), "%d", c->count);
	if (!c->pending_mode && pgo_now_ms() >= c->next_autoclaim) {
		o = autoclaim(c);
		if (o != DONE || c->pending_mode || c->stop ||
		    c->redis.state == PGO_REDIS_DOWN)
			return o;
	}
	if (!c->pending_mode) {
		snprintf(block, sizeof(block), "%" PRId64, c->block_ms);
		argv[argc++] = "BLOCK";
		argv[argc++] = block;
	}
	argv[argc++] = "STREAMS";
	argv[argc++] = c->stream;
	argv[argc++] = c->pending_mode ? c->cursor : ">";
	r = pgo_consume_call(c, c->pending_mode ? 0 : c->block_ms, argc, argv);
	if (!r)
		return DONE;
	if (r->type == REDIS_REPLY_ERROR) {
		pgo_log(PGO_LOG_WARN, c->subject, "XREADGROUP: %s", r->str);
		/* NOGROUP: the stream or group was deleted; recreate it. */
		c->group_ready = strncmp(r->str, "NOGROUP", 7) != 0;
		freeReplyObject(r);
		pgo_consume_sleep_until(c, pgo_now_ms() + BACKOFF_MIN_MS);
		return DONE;
	}
	entries = read_entries(r);
	if (c->pending_mode && (!entries || entries->elements == 0))
		c->pending_mode = false; /* caught up: new entries next */
	o = handle_entries(c, entries);
	freeReplyObject(r);
	return o;
}
