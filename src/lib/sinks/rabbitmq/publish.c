/*
 * sinks/rabbitmq/publish.c — an event as an AMQP message and its publish:
 * the properties (message_id = the event id, type, timestamp,
 * content_type, delivery_mode 2, app_id), the headers table (the event's
 * headers object, then ours or the CloudEvents AMQP binding's), and the
 * basic.publish (mandatory) whose delivery tag joins the ring of awaited
 * confirms (rabbitmq.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sinks/rabbitmq/rabbitmq_int.h"
#include "base/arena.h"
#include "base/time.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

/* created_at (RFC 3339, UTC) in seconds since the epoch; 0 if unreadable. */
static uint64_t epoch_of(const char *rfc3339)
{
	int64_t us;

	if (pgo_parse_rfc3339_us(rfc3339, &us) != 0 || us < 0)
		return 0;
	return (uint64_t)(us / 1000000);
}

static amqp_bytes_t bytes_of(const char *str)
{
	return amqp_cstring_bytes((char *)str);
}

/* Appends a string header (the caller sized the table). */
static void put_hdr(amqp_table_t *t, const char *key, const char *value)
{
	amqp_table_entry_t *e = &t->entries[t->num_entries++];

	e->key = bytes_of(key);
	e->value.kind = AMQP_FIELD_KIND_UTF8;
	e->value.value.bytes = bytes_of(value);
}

static bool has_hdr(const amqp_table_t *t, const char *key)
{
	size_t n = strlen(key);

	for (int k = 0; k < t->num_entries; k++)
		if (t->entries[k].key.len == n &&
		    memcmp(t->entries[k].key.bytes, key, n) == 0)
			return true;
	return false;
}

/*
 * The AMQP headers table of an event, in the batch's arena: the event's
 * headers object (strings as strings, numbers, booleans and null as
 * themselves, objects and arrays as their JSON text), then ours.  *root
 * holds the parsed headers until the publish is done.  NULL on OOM, or
 * with *bad saying why for headers AMQP cannot carry (a name longer than
 * 255 bytes, a table larger than a frame): checked here, because
 * rabbitmq-c finds out only after the publish's first frame went out.
 */
static amqp_table_entry_t *headers_of(struct am_sink *s, pgo_batch_t *b,
				      const pgo_event_t *ev, const char *id,
				      const char *source, json_t **root,
				      amqp_table_t *t, const char **bad)
{
	json_t *h = json_loads(ev->headers ? ev->headers : "{}", 0, NULL);
	size_t n = (h && json_is_object(h) ? json_object_size(h) : 0) + 10;
	size_t size = 0;
	const char *k;
	json_t *v;

	*bad = NULL;

	*root = h;
	t->num_entries = 0;
	t->entries = pgo_arena_alloc(b->arena, n * sizeof(*t->entries));
	if (!t->entries)
		return NULL;
	if (h && json_is_object(h)) {
		json_object_foreach(h, k, v)
		{
			amqp_table_entry_t *e = &t->entries[t->num_entries];

			if (strlen(k) > 255) {
				*bad = "rabbitmq: a header name is longer than "
				       "AMQP's 255 bytes";
				return NULL;
			}
			e->key = bytes_of(k);
			switch (json_typeof(v)) {
			case JSON_STRING:
				e->value.kind = AMQP_FIELD_KIND_UTF8;
				e->value.value.bytes.bytes =
					(void *)json_string_value(v);
				e->value.value.bytes.len =
					json_string_length(v);
				break;
			case JSON_INTEGER:
				e->value.kind = AMQP_FIELD_KIND_I64;
				e->value.value.i64 = json_integer_value(v);
				break;
			case JSON_REAL:
				e->value.kind = AMQP_FIELD_KIND_F64;
				e->value.value.f64 = json_real_value(v);
				break;
			case JSON_TRUE:
			case JSON_FALSE:
				e->value.kind = AMQP_FIELD_KIND_BOOLEAN;
				e->value.value.boolean = json_is_true(v);
				break;
			case JSON_NULL:
				e->value.kind = AMQP_FIELD_KIND_VOID;
				break;
			default: {
				char *text = json_dumps(v, JSON_COMPACT);
				char *copy =
					text ? pgo_arena_strdup(b->arena, text)
					     : NULL;

				free(text);
				if (!copy)
					return NULL;
				e->value.kind = AMQP_FIELD_KIND_UTF8;
				e->value.value.bytes = bytes_of(copy);
			}
			}
			size += 2 + e->key.len + 8 +
				(e->value.kind == AMQP_FIELD_KIND_UTF8
					 ? e->value.value.bytes.len
					 : 0);
			t->num_entries++;
		}
	}
	size += strlen(ev->topic) + strlen(ev->created_at) + 3 * strlen(id) +
		(ev->key ? 2 * strlen(ev->key) : 0) + strlen(ev->type) + 600;
	if (size > (size_t)s->frame_max) {
		*bad = "rabbitmq: the headers do not fit in one AMQP frame "
		       "(sink.amqp_frame_max)";
		return NULL;
	}
	if (!has_hdr(t, "topic"))
		put_hdr(t, "topic", ev->topic);
	if (ev->key && !has_hdr(t, "key"))
		put_hdr(t, "key", ev->key);
	if (!has_hdr(t, "created_at"))
		put_hdr(t, "created_at", ev->created_at);
	if (s->cloudevents) {
		put_hdr(t, "cloudEvents_specversion", "1.0");
		put_hdr(t, "cloudEvents_id", id);
		put_hdr(t, "cloudEvents_source", source);
		put_hdr(t, "cloudEvents_type", ev->type);
		put_hdr(t, "cloudEvents_time", ev->created_at);
		if (ev->key)
			put_hdr(t, "cloudEvents_subject", ev->key);
	}
	return t->entries;
}

/* Publishes event i of ab.  false: the connection broke (pgo_am_lost() ran). */
static bool publish_one(struct am_sink *s, struct am_batch *ab, size_t i)
{
	pgo_batch_t *b = ab->batch;
	const pgo_event_t *ev = &b->events[i];
	amqp_basic_properties_t p;
	char id[24], msg[400];
	const char *rkey;
	char *source;
	const char *bad = NULL;
	json_t *root = NULL;
	int st;

	snprintf(id, sizeof(id), "%" PRId64, ev->id);
	rkey = pgo_sink_template_expand(&s->rkey, s->rkey_tmpl, ev->topic,
					s->queue);
	if (!rkey) {
		pgo_am_verdict(ab, i, PGO_ACK_RETRY, "rabbitmq: out of memory");
		return true;
	}
	if (strlen(rkey) > 255 || strlen(ev->type) > 255) {
		snprintf(msg, sizeof(msg),
			 "rabbitmq: %s longer than AMQP's 255 bytes: "
			 "\"%.60s...\"",
			 strlen(rkey) > 255 ? "routing key" : "type",
			 strlen(rkey) > 255 ? rkey : ev->type);
		pgo_am_verdict(ab, i, PGO_ACK_DEAD, msg);
		return true;
	}
	source = pgo_arena_alloc(b->arena, strlen(ev->topic) + 2);
	if (source)
		sprintf(source, "/%s", ev->topic);
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
		   AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
		   AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
		   AMQP_BASIC_APP_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
	p.content_type = bytes_of("application/json");
	p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
	p.message_id = bytes_of(id);
	p.type = bytes_of(ev->type);
	p.timestamp = epoch_of(ev->created_at);
	p.app_id = bytes_of("pgoutbox");
	if (!source ||
	    !headers_of(s, b, ev, id, source, &root, &p.headers, &bad)) {
		json_decref(root);
		if (bad)
			pgo_am_verdict(ab, i, PGO_ACK_DEAD, bad);
		else
			pgo_am_verdict(ab, i, PGO_ACK_RETRY,
				       "rabbitmq: out of memory");
		return true;
	}
	st = amqp_basic_publish(s->conn, CHANNEL, bytes_of(s->exchange),
				bytes_of(rkey), 1, 0, &p,
				bytes_of(ev->payload));
	json_decref(root);
	/* Frames may be on the wire even when it failed: the connection's
	 * state is unknown, so it goes. */
	if (st != AMQP_STATUS_OK) {
		snprintf(msg, sizeof(msg), "publish: %s",
			 amqp_error_string2(st));
		pgo_am_lost(s, msg, true);
		return false;
	}
	/* Its delivery tag is the next one: the ring must hold it. */
	if (!pgo_am_pend_push(s, ab, i, ev->id)) {
		pgo_am_lost(s, "out of memory", true);
		return false;
	}
	return true;
}

/* Publishes every batch not on the wire yet. */
void pgo_am_publish_waiting(struct am_sink *s)
{
	int64_t now = pgo_now_ms();

	for (struct am_batch *ab = s->head; ab; ab = ab->next) {
		if (ab->deadline || ab->left == 0)
			continue;
		if (s->state != AM_UP)
			return;
		ab->deadline = now + s->timeout_ms;
		if (s->drain_until && ab->deadline > s->drain_until)
			ab->deadline = s->drain_until;
		for (size_t i = 0; i < ab->batch->n; i++) {
			if (ab->batch->acks[i] != PGO_ACK_NONE)
				continue;
			if (!publish_one(s, ab, i))
				return; /* pgo_am_lost(): every batch has
					   verdicts */
		}
	}
}
