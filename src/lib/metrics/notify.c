/*
 * notify.c — systemd's notify protocol through libsystemd's sd_notify():
 * READY=1 once the runner is connected, STOPPING=1 when it begins to
 * stop, and WATCHDOG=1 from a timer of the runner's loop, so the watchdog
 * is fed only while the loop turns (a loop stuck in a callback starves it
 * and systemd restarts the service).
 *
 * Every call is a no-op when $NOTIFY_SOCKET is unset (sd_notify's own
 * rule) and in a build without libsystemd (-Dsystemd=disabled).
 */
#include <stdio.h>
#include <stdlib.h>

#include "metrics/metrics.h"
#include "base/log.h"
#include "pgoutbox.h"

#ifdef PGO_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void send_state(const char *state)
{
	/* unset_environment 0: the children (exec handlers) see the socket
	 * too, but only this process's pid may notify (NotifyAccess=main). */
	int rc = sd_notify(0, state);

	if (rc < 0)
		pgo_log(PGO_LOG_WARN, "systemd", "sd_notify(%s): error %d",
			state, rc);
}

static int64_t watchdog_ms(void)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	return (int64_t)(usec / 1000);
}
#else
static void send_state(const char *state)
{
	(void)state;
}

static int64_t watchdog_ms(void)
{
	return 0;
}
#endif

void pgo_notify_ready(const char *status)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "READY=1\nSTATUS=%s", status ? status : "");
	send_state(buf);
}

void pgo_notify_stopping(void)
{
	send_state("STOPPING=1");
}

void pgo_notify_status(const char *status)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "STATUS=%s", status ? status : "");
	send_state(buf);
}

void pgo_notify_watchdog(void)
{
	send_state("WATCHDOG=1");
}

int64_t pgo_notify_watchdog_ms(void)
{
	return watchdog_ms();
}
