/*
 * fuzz_mask.c — pgo_conninfo_mask() (base/mask.c), what `config show` and
 * the logs print of database.url, compared with libpq's own reading of
 * the text, PQconninfoParse().
 *
 * Input: the connection string or URL.  Oracles: when the mask succeeds,
 * libpq reads the masked text as the same options, except that each
 * secret option (dispchar "*": password, sslpassword) set in the input
 * reads "***" (and no other); a dbname holding a connection string of its
 * own is compared the same way, one level down.  When it fails, it
 * appended "***" alone.  The redis:// and nats:// masks of the same text
 * must not crash either.
 */
#include <libpq-fe.h>

#include "fuzz.h"
#ifdef PGO_HAVE_REDIS
#include "sinks/redis/conn.h"
#include "base/buf.h"
#include "base/mask.h"
#include "pgoutbox.h"
#include "sinks/sink_int.h"
#endif

#define MASK "***"

static const PQconninfoOption *find(const PQconninfoOption *o,
				    const char *keyword)
{
	for (; o->keyword; o++)
		if (strcmp(o->keyword, keyword) == 0)
			return o;
	return NULL;
}

static bool holds_conninfo(const char *s)
{
	return strncmp(s, "postgresql://", 13) == 0 ||
	       strncmp(s, "postgres://", 11) == 0 || strchr(s, '=') != NULL;
}

static void compare(const char *in_text, const char *out_text, int depth)
{
	PQconninfoOption *in, *out;
	char *err = NULL;

	in = PQconninfoParse(in_text, &err);
	PQfreemem(err);
	err = NULL;
	out = PQconninfoParse(out_text, &err);
	FUZZ_CHECK(out,
		   "libpq cannot read the masked text \"%s\" of \"%s\": %s",
		   out_text, in_text, err ? err : "?");
	PQfreemem(err);
	FUZZ_CHECK(in, "masked \"%s\", which libpq cannot read", in_text);
	for (const PQconninfoOption *i = in; i->keyword; i++) {
		const PQconninfoOption *o = find(out, i->keyword);

		FUZZ_CHECK(o, "option %s lost", i->keyword);
		if (i->dispchar && strchr(i->dispchar, '*')) {
			FUZZ_CHECK(
				(i->val == NULL) == (o->val == NULL) &&
					(!o->val || strcmp(o->val, MASK) == 0),
				"secret %s of \"%s\" shown as \"%s\"",
				i->keyword, in_text,
				o->val ? o->val : "(unset)");
			continue;
		}
		FUZZ_CHECK((i->val == NULL) == (o->val == NULL),
			   "option %s of \"%s\": set in one of \"%s\" only",
			   i->keyword, in_text, out_text);
		if (!i->val)
			continue;
		if (strcmp(i->keyword, "dbname") == 0 &&
		    holds_conninfo(i->val) && depth < 4) {
			compare(i->val, o->val, depth + 1);
			continue;
		}
		FUZZ_CHECK(strcmp(i->val, o->val) == 0,
			   "option %s of \"%s\" is \"%s\", masked \"%s\" (%s)",
			   i->keyword, in_text, i->val, o->val, out_text);
	}
	PQconninfoFree(in);
	PQconninfoFree(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	pgo_buf_t b;
	bool ok;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	fuzz_fields(&ff, data, size, '\0', 1);
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	ok = pgo_conninfo_mask(ff.f[0], &b);
	FUZZ_CHECK(!b.oom, "out of memory");
	if (ok)
		compare(ff.f[0], b.data, 0);
	else
		FUZZ_CHECK(strcmp(b.data, MASK) == 0,
			   "failed mask of \"%s\" appended \"%s\"", ff.f[0],
			   b.data);

	pgo_buf_reset(&b);
	pgo_buf_puts(&b, "");
#ifdef PGO_HAVE_REDIS
	(void)pgo_redis_url_mask(ff.f[0], &b);
	pgo_buf_reset(&b);
#endif
#ifdef PGO_HAVE_NATS
	(void)pgo_nats_url_mask(ff.f[0], &b);
#endif
	pgo_buf_free(&b);
	fuzz_fields_free(&ff);
	return 0;
}
