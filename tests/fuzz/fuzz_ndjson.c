/*
 * fuzz_ndjson.c — the NDJSON line of an event (outbox/event.c), what the
 * stdout and exec sinks write, and pgo_buf_json_str() (base/buf.c), the
 * same escaping into a buffer.
 *
 * Input: a byte saying which of topic, key and type are NULL (bits 0-2),
 * then topic, key, type, payload, headers and created_at cut at NUL
 * bytes.  A payload or headers text that is not JSON is replaced by "{}"
 * (the relay reads them from jsonb columns).  Oracles: the line is one
 * line ending in "\n"; with valid UTF-8 strings it is a JSON object whose
 * members read back as the event's values; the length returned is the
 * same with any buffer size and a short buffer holds its prefix;
 * pgo_buf_json_str() escapes as the line does.
 */
#include <jansson.h>

#include "fuzz.h"
#include "base/buf.h"
#include "pgoutbox/sink.h"

static const char *json_or(const char *s)
{
	json_error_t e;
	json_t *j;

	if (!*s)
		return NULL;
	j = json_loads(s, JSON_DECODE_ANY, &e);
	if (!j)
		return "{}";
	json_decref(j);
	return s;
}

static bool utf8(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;

	json_decref(j);
	return !s || j;
}

static void same_str(json_t *obj, const char *name, const char *want)
{
	json_t *v = json_object_get(obj, name);

	FUZZ_CHECK(v, "no member %s", name);
	if (!want) {
		FUZZ_CHECK(json_is_null(v), "%s is not null", name);
		return;
	}
	FUZZ_CHECK(json_is_string(v) && strcmp(json_string_value(v), want) == 0,
		   "%s reads back as \"%s\", not \"%s\"", name,
		   json_is_string(v) ? json_string_value(v) : "?", want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	pgo_event_t ev = {.id = 42, .attempts = 3};
	uint8_t nulls;
	size_t len, len2;
	char *line, small[17];
	pgo_buf_t b;
	json_error_t je;
	json_t *obj;

	if (size < 1)
		return 0;
	nulls = data[0];
	fuzz_fields(&ff, data + 1, size - 1, '\0', 6);
	ev.topic = nulls & 1 ? NULL : ff.f[0];
	ev.key = nulls & 2 ? NULL : ff.f[1];
	ev.type = nulls & 4 ? NULL : ff.f[2];
	ev.payload = json_or(ff.f[3]);
	ev.headers = json_or(ff.f[4]);
	ev.created_at = ff.f[5];
	ev.id = (int64_t)size * (nulls & 8 ? -1 : 1);

	len = pgo_event_ndjson(&ev, NULL, 0);
	line = malloc(len + 1);
	if (!line)
		abort();
	len2 = pgo_event_ndjson(&ev, line, len + 1);
	FUZZ_CHECK(len == len2 && strlen(line) == len, "length %zu, %zu, %zu",
		   len, len2, strlen(line));
	FUZZ_CHECK(len > 0 && line[len - 1] == '\n' &&
			   strcspn(line, "\r\n") == len - 1,
		   "not one line: %s", line);
	FUZZ_CHECK(pgo_event_ndjson(&ev, small, sizeof(small)) == len &&
			   strncmp(small, line, sizeof(small) - 1) == 0 &&
			   strlen(small) == (len < 16 ? len : 16),
		   "short buffer holds \"%s\"", small);

	if (utf8(ev.topic) && utf8(ev.key) && utf8(ev.type) &&
	    utf8(ev.created_at)) {
		obj = json_loads(line, 0, &je);
		FUZZ_CHECK(json_is_object(obj), "not JSON (%s): %s", je.text,
			   line);
		same_str(obj, "topic", ev.topic);
		same_str(obj, "key", ev.key);
		same_str(obj, "type", ev.type);
		same_str(obj, "created_at", ev.created_at);
		FUZZ_CHECK(json_integer_value(json_object_get(obj, "id")) ==
				   ev.id,
			   "id");
		json_decref(obj);
	}

	/* The same escaping into a buffer: the line's "topic" member. */
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	if (ev.topic) {
		pgo_buf_json_str(&b, ev.topic);
		FUZZ_CHECK(!b.oom, "out of memory");
		char *at = strstr(line, ",\"topic\":") + 9;

		FUZZ_CHECK(strncmp(at, b.data, b.len) == 0 && at[b.len] == ',',
			   "pgo_buf_json_str gives %s", b.data);
	}
	pgo_buf_free(&b);
	free(line);
	fuzz_fields_free(&ff);
	return 0;
}
