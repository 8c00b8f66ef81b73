/*
 * worker_cb.c — a test helper for the C callback API of the worker:
 * drains queue argv[1] with a handler that appends "id attempt" to file
 * argv[2] and fails payloads holding "fail" (with a message); SIGTERM
 * stops it; prints the stats as "done failed dead lost".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgoutbox.h"

extern char **environ;
static pgo_worker_t *worker;

static void on_term(int sig)
{
	(void)sig;
	if (worker)
		pgo_worker_request_stop(worker);
}

static int handle(void *ctx, const pgo_job_t *job, char *err, size_t n)
{
	FILE *f = fopen((const char *)ctx, "a");

	if (f) {
		fprintf(f, "%lld %d %s\n", (long long)job->id, job->attempt,
			job->queue);
		fclose(f);
	}
	if (strstr(job->payload, "fail")) {
		snprintf(err, n, "callback refused job %lld",
			 (long long)job->id);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct sigaction sa = {.sa_handler = on_term};
	pgo_conf_t *conf = pgo_conf_new();
	pgo_worker_opts_t o;
	pgo_worker_stats_t st;
	pgo_error_t err;
	int rc;

	if (argc != 3 || !conf || pgo_conf_load_env(conf, environ) != PGO_OK) {
		fprintf(stderr,
			"usage: worker_cb QUEUE FILE (DATABASE_URL set)\n");
		return 2;
	}
	pgo_worker_opts_init(&o, sizeof(o));
	o.queue = argv[1];
	o.handler = handle;
	o.handler_ctx = argv[2];
	o.batch = 10;
	o.max_attempts = 2;
	o.retry_base_ms = 50;
	o.poll_interval_ms = 100;
	worker = pgo_worker_new(conf, &o, &err);
	if (!worker) {
		fprintf(stderr, "worker_cb: %s\n", err.msg);
		pgo_conf_destroy(conf);
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	rc = pgo_worker_run(worker);
	pgo_worker_get_stats(worker, &st);
	printf("%llu %llu %llu %llu\n", (unsigned long long)st.done,
	       (unsigned long long)st.failed, (unsigned long long)st.dead,
	       (unsigned long long)st.lost);
	{
		pgo_worker_t *w = worker;

		worker = NULL;
		pgo_worker_destroy(w);
	}
	pgo_conf_destroy(conf);
	return rc == PGO_OK ? 0 : 1;
}
