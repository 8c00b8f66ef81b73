/*
 * sinks/redis/streams_conf.c — the redis sink's keys (sink.redis_*), registered
 * through the redis row of the sink registry (sinks/registry.c).  The bullmq
 * sink connects with the same keys, and `pgoutbox consume` reads sink.redis_url
 * and the timeouts too.
 */
#include "sinks/redis/redis.h"
#include "sinks/redis/conn.h"
#include "conf/conf.h"

const pgo_conf_key_t pgo_sink_redis_keys[] = {
	{PGO_CONF_KEY("sink", "redis_url"), .type = PGO_CONF_T_STRING,
	 .def = "redis://localhost:6379/0", .secret = true,
	 .mask = pgo_redis_url_mask, .flag = "--redis",
	 .help = "Redis of the redis sink and of consume: "
		 "redis://[user:password@]host[:port][/db]"},
	{PGO_CONF_KEY("sink", "redis_url_file"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--redis-file", .file_for = "sink.redis_url",
	 .help = "File holding sink.redis_url (its first line), so that a "
		 "password shows in neither ps nor the environment"},
	{PGO_CONF_KEY("sink", "redis_stream"), .type = PGO_CONF_T_STRING,
	 .def = "pgoutbox:{topic}", .flag = "--redis-stream",
	 .help = "Stream an event is added to; {topic} and {queue} are "
		 "replaced"},
	{PGO_CONF_KEY("sink", "redis_maxlen"), .type = PGO_CONF_T_INT,
	 .def = "0", .min = 0, .max = 1000000000, .flag = "--redis-maxlen",
	 .help = "XADD MAXLEN ~ N: trims old entries, read or not (0 = "
		 "never trim)"},
	{PGO_CONF_KEY("sink", "redis_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "5s", .min = 10, .max = PGO_MINUTES(10),
	 .flag = "--redis-timeout",
	 .help = "A batch's XADD replies must arrive within this, or the "
		 "connection is dropped"},
	{PGO_CONF_KEY("sink", "redis_connect_timeout"),
	 .type = PGO_CONF_T_DURATION, .def = "2s", .min = 10,
	 .max = PGO_MINUTES(1),
	 .help = "Give up connecting to Redis (TCP, AUTH, SELECT) after "
		 "this long"},
	{PGO_CONF_KEY("sink", "redis_wait"), .type = PGO_CONF_T_DURATION,
	 .def = "0", .min = 0, .max = PGO_MINUTES(10), .flag = "--redis-wait",
	 .help = "How long a batch waits for an unreachable Redis before it "
		 "fails (0 = fail at once)"},
	{.key = NULL},
};
