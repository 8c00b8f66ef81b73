/*
 * main.c — the pgoutbox binary: dispatches to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pgoutbox.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"migrate", cmd_migrate, "create or upgrade the pgoutbox schema"},
	{"send", cmd_send, "write one event into the outbox"},
	{"relay", cmd_relay, "relay committed events to a sink"},
	{"status", cmd_status, "show pending events, dead letters, relays"},
	{"config", cmd_config, "show the configuration or its reference"},
#ifdef PGO_HAVE_REDIS
	{"consume", cmd_consume, "apply a Redis stream exactly once (inbox)"},
#endif
	{"inbox", cmd_inbox, "maintain the inbox's partitions"},
	{"queue", cmd_queue, "create, inspect and purge work queues"},
	{"dead", cmd_dead, "list, show, retry and discard dead letters"},
	{"worker", cmd_worker, "run the jobs of a work queue"},
	{"cron", cmd_cron, "distributed cron: schedules and the scheduler"},
	{"run", cmd_run, "relay, worker and cron scheduler from one config"},
	{"adopt", cmd_adopt, "relay an outbox table the application has"},
	{"unadopt", cmd_unadopt, "undo adopt: remove what it added"},
#ifdef PGO_HAVE_MICROHTTPD
	{"console", cmd_console, "the web console: queues, dead letters, cron"},
#endif
	{"maintain", cmd_maintain,
	 "retention (archive partitions), inbox partitions, health"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: pgoutbox COMMAND [options]\n\n"
		     "A transactional outbox and relay on PostgreSQL.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "\n`pgoutbox COMMAND --help` describes a command.\n"
		     "  --version  print the version and schema version\n");
	fprintf(out,
		"\nExit status:\n"
		"  0  done; a long-running command stopped by SIGTERM or "
		"SIGINT\n"
		"  1  the operation failed: PostgreSQL or a broker "
		"unreachable or failing, or the\n"
		"     database refused it (a queue that exists already, no "
		"such schedule, ...);\n"
		"     a running process whose database was migrated to a "
		"version that breaks it\n"
		"  2  it cannot work until something is fixed: bad flags, "
		"input or configuration;\n"
		"     the schema missing or of another version (`pgoutbox "
		"migrate`, or upgrade\n"
		"     pgoutbox); a relay, worker or run started on a database "
		"or queue that\n"
		"     does not exist or is of the wrong kind, or next to "
		"relays of another mode\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		/* The library's own version (pgo_version()), not the
		 * header's: the same here, the CLI links it statically. */
		printf("pgoutbox %s (version number %d, schema version %d, "
		       "libpq %d)\n",
		       pgo_version_str(), pgo_version(), pgo_schema_version(),
		       PQlibVersion());
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "pgoutbox: unknown command \"%s\"\n\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
