/*
 * fuzz_wal_envelope.c — a WAL queue's logical message into an event
 * (pgo_wal_envelope() in relay/wal_envelope.c), a scanner of its own
 * over text that any role may write (pg_logical_emit_message() is
 * PUBLIC).
 *
 * Input: the message's content, as is.  Oracles: the sanitizers (the
 * event's strings live in one block sized from the input); an envelope
 * taken has a topic, a payload, headers, a type and a created_at (the
 * commit time when the message has none); and when jansson reads the
 * input as an object whose topic is a string, the event's topic is that
 * string.
 */
#include <jansson.h>

#include "fuzz.h"
#include "pgoutbox/sink.h"
#include "relay/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pgo_event_t ev;
	char *mem = NULL;
	bool ok = pgo_wal_envelope((const char *)data, size, 1796411101250000LL,
				   &ev, &mem);

	if (ok) {
		json_t *j = json_loadb((const char *)data, size, 0, NULL);
		json_t *t = json_object_get(j, "topic");

		FUZZ_CHECK(ev.topic && ev.payload && ev.headers && ev.type &&
				   ev.created_at,
			   "an envelope taken without its fields");
		FUZZ_CHECK(strlen(ev.created_at) > 0, "an empty created_at");
		if (json_is_string(t) &&
		    strlen(json_string_value(t)) == json_string_length(t) &&
		    json_object_size(j) > 0) {
			/* Duplicate keys: jansson keeps the last, the scanner
			 * too. */
			FUZZ_CHECK(strcmp(ev.topic, json_string_value(t)) == 0,
				   "topic [%s], jansson read [%s]", ev.topic,
				   json_string_value(t));
		}
		json_decref(j);
	}
	free(mem);
	return 0;
}
