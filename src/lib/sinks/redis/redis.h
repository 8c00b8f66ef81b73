/*
 * sinks/redis/redis.h — the two sinks of this folder, redis (streams) and
 * bullmq, as the registry knows them: their ops, keys, configure steps
 * and rows.  Both sit on the same connection (conn.c) and pipeline
 * (pipeline.c), which is why they share a folder.
 */
#ifndef PGO_SINK_REDIS_H
#define PGO_SINK_REDIS_H

#include "sinks/sink_int.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* --- redis sink (streams.c, streams_conf.c) --- */

extern const pgo_sink_ops_t pgo_sink_redis_ops;
/* sinks/redis/streams_conf.c: the sink.redis_* keys, read by the bullmq sink
 * and by consume too. */
extern const pgo_conf_key_t pgo_sink_redis_keys[];
/* Reads the sink.redis_* keys (and relay.queue) into the sink; checks the
 * URL and the stream template. */
int pgo_sink_redis_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* --- bullmq sink (bullmq.c, bullmq_conf.c) --- */

extern const pgo_sink_ops_t pgo_sink_bullmq_ops;
/* sinks/redis/bullmq_conf.c: the sink.bullmq_* keys. */
extern const pgo_conf_key_t pgo_sink_bullmq_keys[];
/* Reads the sink.bullmq_* keys (and the sink.redis_* connection keys) and
 * loads the exported add script; refuses untested bullmq majors. */
int pgo_sink_bullmq_configure(pgo_sink_t *sink, const pgo_conf_t *conf);
/* Writes the 40 lower-case hex digits of SHA-1(data) and a NUL into hex
 * (the name EVALSHA gives a script), computed by libcrypto.  Returns PGO_OK,
 * or PGO_ERR_NOMEM with hex "" when libcrypto fails (out of memory, or no
 * provider offers SHA-1). */
int pgo_sha1_hex(const char *data, size_t len, char hex[41]);

/* The rows of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_redis                                                     \
	{.name = "redis",                                                      \
	 .ops = &pgo_sink_redis_ops,                                           \
	 .configure = pgo_sink_redis_configure,                                \
	 .summary = "XADD per event to a Redis stream",                        \
	 .details = "an event is acked when Redis returns its entry id.",      \
	 .keys = pgo_sink_redis_keys}
#define PGO_SINK_ROW_bullmq                                                    \
	{.name = "bullmq",                                                     \
	 .ops = &pgo_sink_bullmq_ops,                                          \
	 .configure = pgo_sink_bullmq_configure,                               \
	 .summary = "a BullMQ job per event, jobId ob-ID (the event id)",      \
	 .details = "connects with the sink.redis_* keys and adds jobs with "  \
		    "your bullmq\npackage's own script "                       \
		    "(tools/bullmq-export.js, docs/bullmq.md).",               \
	 .keys = pgo_sink_bullmq_keys}
/* clang-format on */

#endif /* PGO_SINK_REDIS_H */
