/*
 * fuzz_template.c — the name templates of the sinks (sinks/template.c):
 * {topic}, {queue} and {type} in a Redis stream, a BullMQ queue, a NATS
 * subject, a Kafka topic, a routing key; any names, percent-encoded, in
 * sink.http_url.
 *
 * Input: a byte of flags (bits 0-2: the placeholders allowed; bits 3-5:
 * topic, queue, type are NULL; bit 6: percent-encode), then the template,
 * topic, queue and type cut at NUL bytes.  Oracles: both expansions equal
 * a plain reference expansion written here; a template the checks accept
 * has a placeholder at every '{'; the checks refuse with a message naming
 * the key.
 */
#include "fuzz.h"
#include "base/buf.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"

static const char *const fixed[] = {"topic", "queue", "type", NULL};

/* name's index when t starts "{name}" for a name of names, or -1. */
static int ref_match(const char *t, const char *const *names, size_t *len)
{
	if (*t != '{')
		return -1;
	for (int i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncmp(t + 1, names[i], n) == 0 && t[1 + n] == '}') {
			*len = n + 2;
			return i;
		}
	}
	return -1;
}

static void ref_put(pgo_buf_t *b, const char *v, bool escape)
{
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (!escape || (c >= '0' && c <= '9') ||
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    c == '-' || c == '.' || c == '_' || c == '~')
			pgo_buf_append(b, v, 1);
		else
			pgo_buf_printf(b, "%%%02X", c);
	}
}

/* The reference: NULL values stay placeholders (keep_null) or become "". */
static void ref_expand(pgo_buf_t *b, const char *t, const char *const *names,
		       const char *const *values, bool escape, bool keep_null)
{
	pgo_buf_reset(b);
	pgo_buf_puts(b, "");
	while (*t) {
		size_t len = 0;
		int i = ref_match(t, names, &len);

		if (i < 0 || (keep_null && !values[i])) {
			pgo_buf_append(b, t++, 1);
			continue;
		}
		ref_put(b, values[i] ? values[i] : "", escape);
		t += len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	const char *values[3], *got;
	const char *allowed_names[4];
	unsigned allowed;
	pgo_buf_t b, ref;
	pgo_error_t err;
	uint8_t flags;
	bool escape;
	int n = 0;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	if (size < 1)
		return 0;
	flags = data[0];
	allowed = flags & 7;
	escape = flags & 64;
	fuzz_fields(&ff, data + 1, size - 1, '\0', 4);
	for (int i = 0; i < 3; i++)
		values[i] = flags & (8 << i) ? NULL : ff.f[1 + i];
	for (int i = 0; i < 3; i++)
		if (allowed & (1u << i))
			allowed_names[n++] = fixed[i];
	allowed_names[n] = NULL;
	pgo_buf_init(&b);
	pgo_buf_init(&ref);

	if (pgo_template_check("sink.x", ff.f[0], allowed, &err) == PGO_OK) {
		for (const char *t = strchr(ff.f[0], '{'); t;
		     t = strchr(t + 1, '{')) {
			size_t len;

			FUZZ_CHECK(ref_match(t, allowed_names, &len) >= 0,
				   "\"%s\" accepted with a '{' at \"%s\"",
				   ff.f[0], t);
		}
	} else {
		FUZZ_CHECK(strstr(err.msg, "sink.x"), "message \"%s\"",
			   err.msg);
	}
	got = pgo_template_expand(&b, ff.f[0], values[0], values[1], values[2]);
	ref_expand(&ref, ff.f[0], fixed, values, false, true);
	FUZZ_CHECK(got && strcmp(got, ref.data) == 0,
		   "\"%s\" expands to \"%s\", not \"%s\"", ff.f[0],
		   got ? got : "(null)", ref.data);

	if (pgo_template_check_names("sink.y", ff.f[0], allowed_names, &err) ==
	    PGO_OK) {
		FUZZ_CHECK(pgo_template_check("sink.y", ff.f[0], allowed,
					      &err) == PGO_OK,
			   "\"%s\": the two checks disagree", ff.f[0]);
	} else {
		FUZZ_CHECK(strstr(err.msg, "sink.y"), "message \"%s\"",
			   err.msg);
	}
	got = pgo_template_expand_names(&b, ff.f[0], allowed_names, values,
					escape);
	ref_expand(&ref, ff.f[0], allowed_names, values, escape, false);
	FUZZ_CHECK(got && strcmp(got, ref.data) == 0,
		   "\"%s\" expands (names) to \"%s\", not \"%s\"", ff.f[0],
		   got ? got : "(null)", ref.data);

	pgo_buf_free(&b);
	pgo_buf_free(&ref);
	fuzz_fields_free(&ff);
	return 0;
}
