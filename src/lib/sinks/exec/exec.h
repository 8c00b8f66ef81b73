/*
 * sinks/exec/exec.h — the exec sink (sinks/exec/exec.c) and its keys
 * (sinks/exec/exec_conf.c): its registry row, and its verdict step, open
 * to tests/unit/test_sink_exec.c and tests/fuzz/fuzz_exec_verdict.c.
 */
#ifndef PGO_SINK_EXEC_H
#define PGO_SINK_EXEC_H

#include "sinks/sink_int.h"
#include "conf/conf.h"
#include "loop/proc.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

extern const pgo_sink_ops_t pgo_sink_exec_ops;
/* sinks/exec/exec_conf.c: the sink.exec_* keys, the rules validate checks,
 * and the configure step that reads them. */
extern const pgo_conf_key_t pgo_sink_exec_keys[];
int pgo_sink_exec_validate(const pgo_conf_t *conf, pgo_error_t *err);
int pgo_sink_exec_conf_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The exec sink's configuration, copied at open. */
struct pgo_exec_conf {
	char *command;
	int64_t timeout_ms;
};
int pgo_sink_exec_configure(pgo_sink_t *sink, const char *command,
			    int64_t timeout_ms);
struct pgo_proc_result;
/* Gives every event of b its verdict once the command's run res ended
 * (not by the timeout): its stdout's verdict lines, then its exit status
 * for the rest (input_len: the bytes it was given, for the message when
 * it left some unread).  The sink's own step, open to tests/fuzz. */
void pgo_sink_exec_decide(pgo_batch_t *b, const struct pgo_proc_result *res,
			  size_t input_len);

/* The exec row of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_exec                                                      \
	{.name = "exec",                                                       \
	 .ops = &pgo_sink_exec_ops,                                            \
	 .configure = pgo_sink_exec_conf_configure,                            \
	 .summary = "runs sink.exec_command once per batch, NDJSON on its "    \
		    "stdin",                                                   \
	 .details = "exit 0 acks the batch, other exits retry it; lines on "   \
		    "its stdout\n\"retry ID reason\" or \"dead ID reason\" "   \
		    "fail single events.",                                     \
	 .keys = pgo_sink_exec_keys,                                           \
	 .validate = pgo_sink_exec_validate}
/* clang-format on */

#endif /* PGO_SINK_EXEC_H */
