/*
 * fuzz_redis_url.c — the redis:// URL parser, its description for the logs
 * and its mask for `config show` (sinks/redis/conn.c).
 *
 * Input: the URL.  Oracles: a refused URL has a message; a parsed one has
 * a host, a port in 1-65535 and a database >= 0, its description is
 * host:port/db and nothing more, and its mask hides the password behind
 * "***".
 */
#include "fuzz.h"
#include "sinks/redis/conn.h"
#include "base/buf.h"
#include "pgoutbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_fields_t ff;
	pgo_redis_url_t u;
	pgo_error_t err;
	pgo_buf_t b;
	char where[400], want[400];
	bool masked;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	fuzz_fields(&ff, data, size, '\0', 1);
	pgo_buf_init(&b);
	pgo_buf_puts(&b, "");
	masked = pgo_redis_url_mask(ff.f[0], &b);
	FUZZ_CHECK(!b.oom, "out of memory");
	if (pgo_redis_url_parse(ff.f[0], &u, &err) != PGO_OK) {
		FUZZ_CHECK(err.msg[0], "refused without a message");
		goto out;
	}
	FUZZ_CHECK(masked, "\"%s\" parsed but is not masked as a Redis URL",
		   ff.f[0]);
	FUZZ_CHECK(u.host[0] && u.port >= 1 && u.port <= 65535 && u.db >= 0,
		   "\"%s\": host \"%s\" port %d db %d", ff.f[0], u.host, u.port,
		   u.db);
	(void)pgo_redis_url_supported(&u, &err);
	pgo_redis_url_describe(&u, where, sizeof(where));
	if (u.password[0]) {
		FUZZ_CHECK(strstr(b.data, "***"), "mask of \"%s\" is \"%s\"",
			   ff.f[0], b.data);
	}
	/* host:port/db and nothing else: never the user or the password. */
	snprintf(want, sizeof(want), "%s%s%s:%d/%d",
		 strchr(u.host, ':') ? "[" : "", u.host,
		 strchr(u.host, ':') ? "]" : "", u.port, u.db);
	FUZZ_CHECK(strcmp(where, want) == 0, "description of \"%s\" is \"%s\"",
		   ff.f[0], where);
out:
	pgo_buf_free(&b);
	fuzz_fields_free(&ff);
	return 0;
}
