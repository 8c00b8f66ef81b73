/*
 * consume.h — what the library's other parts (and the CLI) see of
 * `pgoutbox consume` beyond the public API (consumer.c and its files).
 */
#ifndef PGO_CONSUME_H
#define PGO_CONSUME_H

#include "pgoutbox.h"

/* --- consume --- */

struct pgo_consumer;
/* Gives `pgoutbox consume` its metrics and, with metrics.listen, the
 * endpoint (src/lib/metrics); PGO_ERR_INVALID when it cannot listen. */
int pgo_consumer_monitor(struct pgo_consumer *c, const pgo_conf_t *conf,
			 pgo_error_t *err);

#endif /* PGO_CONSUME_H */
