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

/* The consumer's PostgreSQL timeouts (pgoutbox.h's options hold none, so
 * that its layout stays 0.2.0's): a connection attempt gives up after
 * connect_ms (default PGO_CONSUME_CONNECT_TIMEOUT_MS; database.url's
 * connect_timeout is libpq's per host), a request without its reply after
 * request_ms (0: never; -1, the default: the statement timeout plus
 * PGO_CONSUME_REQUEST_MARGIN_MS, or never without a statement timeout);
 * then the connection is dropped and the message comes again. */
#define PGO_CONSUME_CONNECT_TIMEOUT_MS 10000
#define PGO_CONSUME_REQUEST_MARGIN_MS  10000
void pgo_consumer_set_pg_timeouts(struct pgo_consumer *c, int64_t connect_ms,
				  int64_t request_ms);

#endif /* PGO_CONSUME_H */
