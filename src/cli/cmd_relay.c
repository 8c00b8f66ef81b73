/*
 * cmd_relay.c — `pgoutbox relay`: run the relay until SIGTERM.
 *
 * SIGTERM and SIGINT finish the batches in flight and exit 0; SIGHUP
 * reloads the configuration file (reloadable keys only).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

static pgo_relay_t *running;
static pgo_fleet_t *running_fleet;

static void on_stop(int sig)
{
	(void)sig;
	if (running)
		pgo_relay_request_stop(running);
	if (running_fleet)
		pgo_fleet_request_stop(running_fleet);
}

static void on_hup(int sig)
{
	(void)sig;
	if (running)
		pgo_relay_request_reload(running);
	if (running_fleet)
		pgo_fleet_request_reload(running_fleet);
}

static const char *const flags[] = {"--db",
				    "--db-file",
				    "--queue",
				    "--name",
				    "--mode",
				    "--poison",
				    "--heartbeat",
				    "--lease-timeout",
				    "--sink",
				    "--batch",
				    "--in-flight",
				    "--listen",
				    "--claim-floor",
				    "--poll-interval",
				    "--max-attempts",
				    "--log-level",
				    "--metrics-listen",
				    "--wake-linger",
				    NULL};

/* The sinks of this build and their flags, from the sink registry. */
static void sinks_help(FILE *out)
{
	fprintf(out, "Sinks (--sink SINK):\n");
	pgo_sink_list(out);
}

static const cli_cmd_t cmd = {
	.name = "relay",
	.usage = "usage: pgoutbox relay [--sink SINK] [sink flags] "
		 "[--batch N] [options]",
	.summary = "Relays committed events of a queue to a sink, at least "
		   "once, deleting each\nevent only after the sink "
		   "acknowledged it.",
	.more_help = sinks_help,
	.details =
		"Modes (--mode):\n"
		"  ordered     (default) per-key order: keys hash to the "
		"queue's shards and\n"
		"              each relay connection leases a fair share of "
		"them; relays\n"
		"              rebalance as they come and go, and take over a "
		"dead one's\n"
		"              shards within a heartbeat or two.\n"
		"  concurrent  FOR UPDATE SKIP LOCKED batches: fastest, no "
		"order.\n"
		"  strict      one global order: one relay leads, the others "
		"stand by.\n\n"
		"Several relays may run at once on one queue, all in the same "
		"mode: a relay\nrefuses to start (exit 2) next to live relays "
		"of the queue in another mode,\nand logs an ERROR if one "
		"appears later.\n"
		"SIGTERM finishes the batch in flight and exits 0; SIGHUP "
		"reloads --config.\n\n"
		"Many databases (shards) in one process: give --db more than "
		"once, or\n[database NAME] sections (each with a url) in "
		"--config.  Each database\ngets its own connections, leases "
		"and claim floor; all share one loop and\none sink; log lines "
		"and metrics name the database, and every event gets\na "
		"\"pgoutbox-source\" header naming it (docs/fleet.md).  A "
		"queue captured\nthrough the WAL streams each database's slot, "
		"in that database's commit\norder.",
	.flags = flags,
};

/* Many databases: a fleet (docs/fleet.md).  An exit code. */
static int run_fleet(cli_t *cli, pgo_sink_t *sink)
{
	const struct sigaction stop = {.sa_handler = on_stop};
	const struct sigaction hup = {.sa_handler = on_hup};
	pgo_error_t err;
	pgo_fleet_t *fleet;
	int rc;

	fleet = pgo_fleet_new(cli->conf, sink, &err);
	if (!fleet) {
		cli_error("relay", "%s", err.msg);
		return err.code == PGO_ERR_NOMEM ? EXIT_FAIL : EXIT_USAGE;
	}
	running_fleet = fleet;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGHUP, &hup, NULL);
	if (cli_stop_early)
		pgo_fleet_request_stop(fleet);
	rc = pgo_fleet_run(fleet);
	running_fleet = NULL;
	if (rc != PGO_OK)
		cli_error("relay", "%s", pgo_fleet_errmsg(fleet));
	pgo_fleet_destroy(fleet);
	return cli_exit_code(rc);
}

int cmd_relay(int argc, char **argv)
{
	const struct sigaction stop = {.sa_handler = on_stop};
	const struct sigaction hup = {.sa_handler = on_hup};
	pgo_error_t err;
	pgo_sink_t *sink = NULL;
	pgo_relay_t *relay = NULL;
	char name[96], host[64];
	bool done;
	cli_t cli;
	int rc;

	cli_catch_signals_early(true);
	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (!*pgo_conf_get(cli.conf, "relay.name")) {
		if (gethostname(host, sizeof(host)) != 0)
			strcpy(host, "relay");
		host[sizeof(host) - 1] = '\0';
		snprintf(name, sizeof(name), "%s-%d", host, (int)getpid());
		/* As a flag, so that a reload keeps it. */
		pgo_conf_set(cli.conf, "relay.name", name, PGO_CONF_FLAG,
			     "--name");
	}
	if (pgo_conf_validate(cli.conf) != PGO_OK) {
		cli_error("relay", "%s", pgo_conf_errmsg(cli.conf));
		cli_free(&cli);
		return EXIT_USAGE;
	}
	cli_log_setup(cli.conf);
	signal(SIGPIPE, SIG_IGN);
	sink = pgo_sink_new(pgo_conf_get(cli.conf, "relay.sink"), cli.conf,
			    &err);
	if (!sink) {
		cli_error("relay", "%s", err.msg);
		cli_free(&cli);
		return EXIT_USAGE;
	}
	if (pgo_conf_database_count(cli.conf) > 0) {
		rc = run_fleet(&cli, sink);
		pgo_sink_destroy(sink);
		cli_free(&cli);
		return rc;
	}
	relay = pgo_relay_new(cli.conf, sink, &err);
	if (!relay) {
		cli_error("relay", "%s", err.msg);
		pgo_sink_destroy(sink);
		cli_free(&cli);
		return err.code == PGO_ERR_NOMEM ? EXIT_FAIL : EXIT_USAGE;
	}
	running = relay;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGHUP, &hup, NULL);
	if (cli_stop_early)
		pgo_relay_request_stop(relay);
	rc = pgo_relay_run(relay);
	running = NULL;
	if (rc != PGO_OK)
		cli_error("relay", "%s", pgo_relay_errmsg(relay));
	pgo_relay_destroy(relay);
	pgo_sink_destroy(sink);
	cli_free(&cli);
	/* A refusal at start (a queue of the wrong kind, the ordered modes
	 * through a transaction pooler, no such database or queue, never
	 * migrated, a newer schema) is configuration. */
	return cli_exit_code(rc);
}
