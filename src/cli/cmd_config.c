/*
 * cmd_config.c — `pgoutbox config show | reference | check`.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "conf/conf.h"
#include "db/conn.h"
#include "pgoutbox.h"

static const char *const flags[] = {"--db", "--db-file", "--sink", "--batch",
				    NULL};

/* show, after the configuration was checked: every key, or (changed)
 * those whose value is not the default. */
static int show(const cli_t *cli, bool changed)
{
	if (!changed) {
		pgo_conf_show(cli->conf, stdout);
		return EXIT_OK;
	}
	if (pgo_conf_show_changed(cli->conf, stdout) != PGO_OK) {
		cli_error("config", "out of memory");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cmd_config(int argc, char **argv)
{
	pgo_error_t err;
	bool done, changed = false;
	const cli_opt_t opts[] = {
		{"--changed", NULL,
		 "show: only the settings whose value is not the default", NULL,
		 &changed},
		{NULL, NULL, NULL, NULL, NULL},
	};
	const cli_cmd_t cmd = {
		.name = "config",
		.usage = "usage: pgoutbox config show|check|reference "
			 "[--changed] [--config FILE] [flags]",
		.summary = "show: every setting with its value and where it "
			   "came from (secrets masked);\nwith --changed only "
			   "those whose value is not the default.\ncheck: "
			   "validate the file, environment and flags, and the "
			   "database connection settings as libpq reads them "
			   "(without connecting); exit 2 on an error.\n"
			   "reference: the Markdown table of every setting, "
			   "for the docs.",
		.opts = opts,
		.flags = flags,
		.min_args = 1,
		.max_args = 1,
	};
	cli_t cli;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	if (changed && strcmp(cli.args[0], "show") != 0) {
		cli_error("config", "--changed applies to show only");
		rc = EXIT_USAGE;
	} else if (strcmp(cli.args[0], "reference") == 0) {
		pgo_conf_reference(stdout);
	} else if (strcmp(cli.args[0], "show") == 0 ||
		   strcmp(cli.args[0], "check") == 0) {
		if (pgo_conf_validate(cli.conf) != PGO_OK) {
			cli_error("config", "%s", pgo_conf_errmsg(cli.conf));
			cli_free(&cli);
			return EXIT_USAGE;
		}
		if (cli.args[0][0] == 's') {
			rc = show(&cli, changed);
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
