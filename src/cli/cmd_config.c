/*
 * cmd_config.c — `pgoutbox config show | reference | check`.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "db/conn.h"

static const char *const flags[] = {"--db", "--db-file", "--sink", "--batch",
				    NULL};

static const cli_cmd_t cmd = {
	.name = "config",
	.usage = "usage: pgoutbox config show|check|reference [--config FILE] "
		 "[flags]",
	.summary = "show: every setting with its value and where it came "
		   "from (secrets masked).\ncheck: validate the file, "
		   "environment and flags, and the database connection "
		   "settings as libpq reads them (without connecting); exit "
		   "2 on an error.\nreference: "
		   "the Markdown table of every setting, for the docs.",
	.flags = flags,
	.min_args = 1,
	.max_args = 1,
};

int cmd_config(int argc, char **argv)
{
	pgo_error_t err;
	bool done;
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (strcmp(cli.args[0], "reference") == 0) {
		pgo_conf_reference(stdout);
	} else if (strcmp(cli.args[0], "show") == 0 ||
		   strcmp(cli.args[0], "check") == 0) {
		if (pgo_conf_validate(cli.conf) != PGO_OK) {
			cli_error("config", "%s", pgo_conf_errmsg(cli.conf));
			cli_free(&cli);
			return EXIT_USAGE;
		}
		if (cli.args[0][0] == 's') {
			pgo_conf_show(cli.conf, stdout);
		} else if (pgo_conn_check_settings(cli.conf, &err) != PGO_OK) {
			cli_error("config", "invalid connection settings: %s",
				  err.msg);
			rc = EXIT_USAGE;
		} else {
			printf("configuration is valid\n");
		}
	} else {
		cli_error("config",
			  "unknown action \"%s\" (show, check, "
			  "reference)",
			  cli.args[0]);
		rc = EXIT_USAGE;
	}
	cli_free(&cli);
	return rc;
}
