/*
 * sinks/stdout/stdout.h — the stdout sink's place in the registry: its ops
 * (sinks/stdout/stdout.c) and its row.
 */
#ifndef PGO_SINK_STDOUT_H
#define PGO_SINK_STDOUT_H

#include "sinks/sink_int.h"
#include "pgoutbox/sink.h"

extern const pgo_sink_ops_t pgo_sink_stdout_ops;

/* The stdout row of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_stdout                                                    \
	{.name = "stdout",                                                     \
	 .ops = &pgo_sink_stdout_ops,                                          \
	 .summary = "one NDJSON line per event on standard output",            \
	 .details = "(logs go to stderr)"}
/* clang-format on */

#endif /* PGO_SINK_STDOUT_H */
