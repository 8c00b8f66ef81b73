/*
 * metrics.h — what a long-running process tells its operator: a registry
 * of counters, gauges and histograms in the Prometheus text format, the
 * HTTP endpoint that serves them with /healthz and /readyz from the
 * process's own event loop, and systemd's notify protocol.
 *
 *   registry.c  families and series, the text format (no I/O)
 *   endpoint.c  libmicrohttpd in external mode on the loop: /metrics,
 *               /healthz, /readyz
 *   notify.c    sd_notify: READY=1, STOPPING=1, WATCHDOG=1 from a loop
 *               timer
 *   monitor.c   the three together, as every runner uses them
 *
 * Everything runs on the loop's thread: a scrape is a callback of the
 * loop like a socket of the sink, so it reads the runner's state without
 * locks and never waits for a claim (nor a claim for it).
 */
#ifndef PGO_METRICS_H
#define PGO_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "loop/loop.h"
#include "pgoutbox.h"

/* --- the registry --- */

typedef enum pgo_metric_type {
	PGO_METRIC_COUNTER = 0,
	PGO_METRIC_GAUGE = 1,
	PGO_METRIC_HISTOGRAM = 2
} pgo_metric_type_t;

typedef struct pgo_metrics pgo_metrics_t;
typedef struct pgo_metric pgo_metric_t; /* a family: name, help, type */
typedef struct pgo_series pgo_series_t; /* one set of label values */

/* Bucket bounds (seconds) for durations from a millisecond to a minute. */
extern const double pgo_metrics_seconds_buckets[];
extern const int pgo_metrics_seconds_nbuckets;

pgo_metrics_t *pgo_metrics_new(void);
/* Frees the registry, its families and series (NULL is a no-op). */
void pgo_metrics_destroy(pgo_metrics_t *m);

/* Adds a family, listed in the order added.  name and help are kept as
 * given (string literals); bounds (histograms only, ascending, without
 * +Inf) too.  A family of that name already there is returned (NULL when
 * its type differs).  NULL without memory; every call below accepts
 * NULL. */
pgo_metric_t *pgo_metrics_family(pgo_metrics_t *m, pgo_metric_type_t type,
				 const char *name, const char *help,
				 const double *bounds, int nbounds);
/* The series with these labels (`queue="outbox",sink="redis"`, "" for
 * none; build them with pgo_metrics_labels()), made on first use.  NULL
 * without memory. */
pgo_series_t *pgo_metric_series(pgo_metric_t *f, const char *labels);
/* Removes every series of the family (gauges read from a query: queues
 * that are gone drop out). */
void pgo_metric_clear(pgo_metric_t *f);
/* Removes the series whose labels start with prefix (a fleet's database:
 * `database="shard1",`): those of one relay of a shared registry. */
void pgo_metric_clear_prefix(pgo_metric_t *f, const char *prefix);
/* The same in every family of the registry (a fleet's database gone). */
void pgo_metrics_clear_prefix(pgo_metrics_t *m, const char *prefix);

/* Counters only go up; gauges are set; histograms observe. */
void pgo_series_add(pgo_series_t *s, double v);
void pgo_series_set(pgo_series_t *s, double v);
void pgo_series_observe(pgo_series_t *s, double v);
double pgo_series_value(const pgo_series_t *s);

/* Writes `k1="v1",k2="v2"` into buf (values escaped as the format says);
 * the arguments are pairs ended by NULL.  Returns buf (truncated to size
 * when too long). */
char *pgo_metrics_labels(char *buf, size_t size, ...) __attribute__((sentinel));

/* Appends the whole registry in the Prometheus text format 0.0.4. */
void pgo_metrics_format(const pgo_metrics_t *m, pgo_buf_t *out);

/* --- the endpoint --- */

typedef struct pgo_endpoint pgo_endpoint_t;

/* What the endpoint asks its owner: refresh the gauges kept in memory
 * before a scrape; whether the process is ready (false: why, one line). */
typedef struct pgo_endpoint_probe {
	void (*collect)(void *arg);
	bool (*ready)(void *arg, char *why, size_t size);
	void *arg;
} pgo_endpoint_probe_t;

/* Listens on `listen` ("host:port", "[v6]:port" or ":port" for every
 * address) and serves on the loop.  NULL with err filled when the address
 * is wrong or taken (PGO_ERR_INVALID) or without memory. */
pgo_endpoint_t *pgo_endpoint_new(pgo_loop_t *loop, const char *listen,
				 pgo_metrics_t *m,
				 const pgo_endpoint_probe_t *probe,
				 const char *subject, pgo_error_t *err);
/* Replaces what the endpoint asks its owner. */
void pgo_endpoint_set_probe(pgo_endpoint_t *e, const pgo_endpoint_probe_t *p);
/* Serves the web console's pages too ([console] enabled,
 * docs/console.md), answered by a thread of the console's own. */
int pgo_endpoint_console(pgo_endpoint_t *e, pgo_loop_t *loop,
			 const pgo_conf_t *conf, pgo_error_t *err);
/* Its console's databases from conf from now on (SIGHUP; errors
 * logged, the old ones kept).  No-op without a console. */
void pgo_endpoint_console_reload(pgo_endpoint_t *e, const pgo_conf_t *conf);
/* The port it listens on (useful with port 0). */
int pgo_endpoint_port(const pgo_endpoint_t *e);
/* Answers /healthz with 503 and the reason from now on (stopping). */
void pgo_endpoint_unhealthy(pgo_endpoint_t *e, const char *why);
/* Closes the socket and every connection (NULL is a no-op). */
void pgo_endpoint_destroy(pgo_endpoint_t *e);

/* --- systemd notify --- */

/* Each sends one state to $NOTIFY_SOCKET when it is set (a no-op
 * otherwise, and in a build without libsystemd). */
void pgo_notify_ready(const char *status);
void pgo_notify_stopping(void);
void pgo_notify_status(const char *status);
/* WATCHDOG=1; the monitor sends it from a loop timer, so that it goes
 * out only while the loop turns. */
void pgo_notify_watchdog(void);
/* The watchdog period systemd asked for ($WATCHDOG_USEC for this pid), in
 * ms; 0: none. */
int64_t pgo_notify_watchdog_ms(void);

/* --- the monitor: what every runner keeps --- */

typedef struct pgo_monitor pgo_monitor_t;

/* The registry, and the endpoint when metrics.listen is set.  NULL with
 * err filled when the endpoint cannot listen (PGO_ERR_INVALID: refuse to
 * start) or without memory. */
pgo_monitor_t *pgo_monitor_new(pgo_loop_t *loop, const pgo_conf_t *conf,
			       const char *subject, pgo_error_t *err);
void pgo_monitor_destroy(pgo_monitor_t *mon);
pgo_metrics_t *pgo_monitor_metrics(pgo_monitor_t *mon);
/* Sets what the endpoint asks (call before the loop turns). */
void pgo_monitor_probe(pgo_monitor_t *mon, const pgo_endpoint_probe_t *p);
/* The endpoint's console follows conf's databases (a fleet's SIGHUP). */
void pgo_monitor_console_reload(pgo_monitor_t *mon, const pgo_conf_t *conf);
/* The endpoint's port (0: no endpoint). */
int pgo_monitor_port(const pgo_monitor_t *mon);
/* The runner is connected and working: READY=1 (once), and the
 * watchdog's timer starts.  Safe to call on every turn. */
void pgo_monitor_ready(pgo_monitor_t *mon);
/* The runner is stopping: STOPPING=1 and /healthz says so. */
void pgo_monitor_stopping(pgo_monitor_t *mon);

#endif /* PGO_METRICS_H */
