/*
 * monitor.c — what every long-running runner (relay, worker, consumer,
 * cron scheduler) keeps for its operator: the metrics registry, the HTTP
 * endpoint when metrics.listen is set, and systemd's notify protocol
 * (READY=1 once, STOPPING=1, the watchdog fed by a loop timer).
 */
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "loop/loop.h"
#include "pgoutbox.h"

#ifndef PGO_HAVE_MICROHTTPD
/* A build without libmicrohttpd (-Dmicrohttpd=disabled) has no endpoint:
 * metrics.listen is refused at start. */
pgo_endpoint_t *pgo_endpoint_new(pgo_loop_t *loop, const char *listen,
				 pgo_metrics_t *m,
				 const pgo_endpoint_probe_t *probe,
				 const char *subject, pgo_error_t *err)
{
	(void)loop;
	(void)m;
	(void)probe;
	(void)subject;
	pgo_error_set(err, PGO_ERR_INVALID, 0,
		      "metrics.listen \"%s\": this build has no metrics "
		      "endpoint (built with -Dmicrohttpd=disabled); leave "
		      "metrics.listen empty",
		      listen);
	return NULL;
}

void pgo_endpoint_set_probe(pgo_endpoint_t *e, const pgo_endpoint_probe_t *p)
{
	(void)e;
	(void)p;
}

int pgo_endpoint_port(const pgo_endpoint_t *e)
{
	(void)e;
	return 0;
}

void pgo_endpoint_unhealthy(pgo_endpoint_t *e, const char *why)
{
	(void)e;
	(void)why;
}

void pgo_endpoint_destroy(pgo_endpoint_t *e)
{
	(void)e;
}
#endif

struct pgo_monitor {
	pgo_loop_t *loop;
	pgo_metrics_t *metrics;
	pgo_endpoint_t *endpoint; /* NULL: metrics.listen is empty */
	pgo_loop_timer_t *watchdog;
	int64_t watchdog_every; /* ms: half of systemd's WatchdogSec */
	bool ready_sent;
	bool stopping_sent;
	char subject[96];
};

pgo_monitor_t *pgo_monitor_new(pgo_loop_t *loop, const pgo_conf_t *conf,
			       const char *subject, pgo_error_t *err)
{
	pgo_monitor_t *mon = calloc(1, sizeof(*mon));
	const char *listen = pgo_conf_get_str(conf, "metrics.listen");

	if (!mon || !(mon->metrics = pgo_metrics_new())) {
		free(mon);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for the metrics");
		return NULL;
	}
	mon->loop = loop;
	snprintf(mon->subject, sizeof(mon->subject), "%s", subject);
	if (listen && *listen) {
		mon->endpoint = pgo_endpoint_new(loop, listen, mon->metrics,
						 NULL, subject, err);
		if (!mon->endpoint) {
			pgo_monitor_destroy(mon);
			return NULL;
		}
#ifdef PGO_HAVE_MICROHTTPD
		if (pgo_conf_get_bool(conf, "console.enabled") &&
		    pgo_endpoint_console(mon->endpoint, loop, conf, err) !=
			    PGO_OK) {
			pgo_monitor_destroy(mon);
			return NULL;
		}
#endif
	} else if (pgo_conf_get_bool(conf, "console.enabled")) {
		pgo_log(PGO_LOG_WARN, subject,
			"console.enabled: no metrics.listen to serve it on");
	}
	return mon;
}

void pgo_monitor_destroy(pgo_monitor_t *mon)
{
	if (!mon)
		return;
	pgo_endpoint_destroy(mon->endpoint);
	pgo_loop_timer_del(mon->watchdog);
	pgo_metrics_destroy(mon->metrics);
	free(mon);
}

pgo_metrics_t *pgo_monitor_metrics(pgo_monitor_t *mon)
{
	return mon ? mon->metrics : NULL;
}

void pgo_monitor_probe(pgo_monitor_t *mon, const pgo_endpoint_probe_t *p)
{
	if (mon && mon->endpoint)
		pgo_endpoint_set_probe(mon->endpoint, p);
}

void pgo_monitor_console_reload(pgo_monitor_t *mon, const pgo_conf_t *conf)
{
#ifdef PGO_HAVE_MICROHTTPD
	if (mon && mon->endpoint)
		pgo_endpoint_console_reload(mon->endpoint, conf);
#else
	(void)mon;
	(void)conf;
#endif
}

int pgo_monitor_port(const pgo_monitor_t *mon)
{
	return mon ? pgo_endpoint_port(mon->endpoint) : 0;
}

static void feed_watchdog(void *arg)
{
	pgo_monitor_t *mon = arg;

	pgo_notify_watchdog();
	pgo_loop_timer_set(mon->watchdog, pgo_now_ms() + mon->watchdog_every);
}

void pgo_monitor_ready(pgo_monitor_t *mon)
{
	int64_t ms;

	if (!mon || mon->ready_sent || mon->stopping_sent)
		return;
	mon->ready_sent = true;
	pgo_notify_ready(mon->subject);
	ms = pgo_notify_watchdog_ms();
	if (ms > 0) {
		mon->watchdog_every = ms / 2 > 0 ? ms / 2 : 1;
		mon->watchdog = pgo_loop_timer_add(mon->loop, pgo_now_ms(),
						   feed_watchdog, mon);
		pgo_log(PGO_LOG_INFO, mon->subject,
			"systemd watchdog: fed every %lld ms from the loop",
			(long long)mon->watchdog_every);
	}
}

void pgo_monitor_stopping(pgo_monitor_t *mon)
{
	if (!mon || mon->stopping_sent)
		return;
	mon->stopping_sent = true;
	pgo_notify_stopping();
	pgo_endpoint_unhealthy(mon->endpoint, "stopping");
}
