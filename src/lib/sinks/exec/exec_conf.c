/*
 * sinks/exec/exec_conf.c — the exec sink's configuration: its keys
 * (sink.exec_*), the rules pgo_conf_validate() checks when relay.sink is
 * exec, and the step that hands the keys to the sink (sinks/exec/exec.c).
 * Registered through the exec row of the sink registry (sinks/registry.c).
 */
#include "sinks/exec/exec.h"
#include "base/error.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

const pgo_conf_key_t pgo_sink_exec_keys[] = {
	{PGO_CONF_KEY("sink", "exec_command"), .type = PGO_CONF_T_STRING,
	 .def = "", .flag = "--exec",
	 .help = "Command the exec sink runs with sh -c for each batch"},
	{PGO_CONF_KEY("sink", "exec_timeout"), .type = PGO_CONF_T_DURATION,
	 .def = "30s", .min = 10, .max = PGO_HOURS(1), .flag = "--exec-timeout",
	 .help = "Kill the exec sink's command after this long"},
	{.key = NULL},
};

int pgo_sink_exec_validate(const pgo_conf_t *conf, pgo_error_t *err)
{
	int64_t timeout = pgo_conf_get_duration(conf, "sink.exec_timeout");
	int64_t idle = pgo_conf_values(conf)->idle_tx_timeout;
	char a[32], b[32];

	if (!*pgo_conf_get_str(conf, "sink.exec_command"))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "relay.sink = exec needs "
				     "sink.exec_command (--exec)");
	/* The exec sink publishes inside the claim transaction, idle as far
	 * as PostgreSQL can tell; the command must time out first. */
	if (idle > 0 && timeout >= idle) {
		pgo_format_duration(timeout, a, sizeof(a));
		pgo_format_duration(idle, b, sizeof(b));
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.exec_timeout (%s) must be less "
				     "than database.idle_tx_timeout (%s), or "
				     "PostgreSQL ends the session while a "
				     "batch is publishing",
				     a, b);
	}
	return PGO_OK;
}

int pgo_sink_exec_conf_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	return pgo_sink_exec_configure(
		sink, pgo_conf_get_str(conf, "sink.exec_command"),
		pgo_conf_get_duration(conf, "sink.exec_timeout"));
}
