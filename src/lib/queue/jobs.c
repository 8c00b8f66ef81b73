/*
 * jobs.c — the exec handler's jobs: each claimed job runs as `sh -c CMD`
 * on the worker's loop (proc.c: its own process group, the payload on
 * stdin, stderr's tail kept, killed after the timeout), and its end
 * becomes an outcome in the queue of operations (ops.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "queue/worker_int.h"
#include "base/log.h"
#include "base/time.h"
#include "loop/proc.h"
#include "metrics/metrics.h"
#include "pgoutbox.h"

static void job_done(void *arg, const pgo_proc_result_t *res);

/* Starts sh -c CMD for a claimed job: payload on stdin, stderr's tail
 * kept, stdout the worker's, own process group, killed after the
 * timeout.  Returns 0 or an errno value. */
int pgo_jobs_spawn(pgo_worker_t *w, job_run_t *j, const char *payload)
{
	char v_id[48], v_att[48], v_q[96];
	const char *env[] = {v_id, v_att, v_q, NULL};
	pgo_proc_spec_t spec = {
		.command = w->exec_command,
		.env = env,
		.input = payload,
		.input_len = strlen(payload),
		.err_tail = TAIL_MAX,
		.timeout_ms = w->o.timeout_ms,
		.subject = w->subject,
		.done = job_done,
		.arg = j,
	};
	const char *what;

	snprintf(v_id, sizeof(v_id), "PGOUTBOX_JOB_ID=%" PRId64, j->id);
	snprintf(v_att, sizeof(v_att), "PGOUTBOX_JOB_ATTEMPT=%d", j->attempt);
	snprintf(v_q, sizeof(v_q), "PGOUTBOX_QUEUE=%s", w->queue);
	return pgo_proc_start(w->loop, &spec, &j->proc, &what);
}

/* The error text of a failed job: the reason, then the stderr tail. */
static void job_error(const pgo_proc_result_t *res, const char *reason,
		      char *out, size_t size)
{
	size_t len = res->err_len;

	while (len > 0 &&
	       (res->err[len - 1] == '\n' || res->err[len - 1] == ' '))
		len--;
	if (len)
		snprintf(out, size, "%s; stderr: %.*s", reason, (int)len,
			 res->err);
	else
		snprintf(out, size, "%s", reason);
}

/* A one-line copy of text for the log: line breaks become " | ". */
void pgo_jobs_one_line(const char *s, char *out, size_t size)
{
	size_t o = 0;

	for (; s && *s && o + 4 < size; s++) {
		if (*s == '\n') {
			memcpy(out + o, " | ", 3);
			o += 3;
		} else if ((unsigned char)*s < 0x20) {
			out[o++] = ' ';
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
}
/* A job's command ended: its outcome joins the queue of operations. */
static void job_done(void *arg, const pgo_proc_result_t *res)
{
	job_run_t *j = arg;
	pgo_worker_t *w = j->w;
	char reason[128], error[TAIL_MAX + 160];
	bool ok = false;

	switch (res->end) {
	case PGO_PROC_TIMED_OUT:
		w->stats.timeouts++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " timed out after %" PRId64
			" ms: its process group was killed",
			j->id, w->o.timeout_ms);
		snprintf(reason, sizeof(reason),
			 "timed out after %" PRId64
			 " ms (process group killed)",
			 w->o.timeout_ms);
		break;
	case PGO_PROC_EXITED:
		ok = res->status == 0;
		snprintf(reason, sizeof(reason), "exit status %d", res->status);
		break;
	case PGO_PROC_SIGNALED:
		snprintf(reason, sizeof(reason), "killed by signal %d",
			 res->status);
		break;
	case PGO_PROC_LOST:
		snprintf(reason, sizeof(reason),
			 "exit status unknown (child reaped elsewhere)");
		break;
	}
	pgo_series_observe(w->m_duration,
			   (double)(pgo_now_ms() - j->started) / 1000.0);
	if (j->lost) {
		w->stats.lost++;
		pgo_log(PGO_LOG_WARN, w->subject,
			"job %" PRId64 " ended after its lease was lost; not "
			"recorded",
			j->id);
	} else {
		if (!ok)
			job_error(res, reason, error, sizeof(error));
		pgo_ops_push_settle(
			w, j->id, j->epoch, j->attempt,
			pgo_lease_verdict(ok, j->attempt, w->o.max_attempts),
			ok ? NULL : error);
	}
	memset(j, 0, sizeof(*j));
	w->running--;
	w->kick = true;
}
