/*
 * sinks/redis/bullmq_conf.c — the bullmq sink's keys (sink.bullmq_*),
 * registered through the bullmq row of the sink registry (sinks/registry.c).
 * The sink connects with the redis sink's sink.redis_* keys
 * (sinks/redis/streams_conf.c).
 */
#include "sinks/redis/redis.h"
#include "conf/conf.h"

const pgo_conf_key_t pgo_sink_bullmq_keys[] = {
	{PGO_CONF_KEY("sink", "bullmq_queue"), .type = PGO_CONF_T_STRING,
	 .def = "{topic}", .flag = "--bullmq-queue",
	 .help = "BullMQ queue a job is added to; {topic} and {queue} are "
		 "replaced"},
	{PGO_CONF_KEY("sink", "bullmq_prefix"), .type = PGO_CONF_T_STRING,
	 .def = "bull", .flag = "--bullmq-prefix",
	 .help = "Key prefix of the BullMQ queues (BullMQ's prefix option)"},
	{PGO_CONF_KEY("sink", "bullmq_script"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--bullmq-script",
	 .help = "File with the add script of your bullmq package, written "
		 "by tools/bullmq-export.js"},
	{PGO_CONF_KEY("sink", "bullmq_attempts"), .type = PGO_CONF_T_INT,
	 .def = "1", .min = 1, .max = 1000000, .flag = "--bullmq-attempts",
	 .help = "BullMQ attempts option of the jobs: tries before a job "
		 "fails for good"},
	{PGO_CONF_KEY("sink", "bullmq_remove_on_complete"),
	 .type = PGO_CONF_T_STRING, .def = "",
	 .flag = "--bullmq-remove-on-complete",
	 .help = "BullMQ removeOnComplete option: true, false or a count "
		 "to keep (empty: not sent); jobId dedup ends with the job"},
	{.key = NULL},
};
