/*
 * cli.c — option parsing, logging and connecting for the subcommands.
 *
 * Flags come from two places: the subcommand's own options and the flags of
 * the configuration table (pgo_conf_key_for_flag).  Both accept
 * "--name value" and "--name=value".  Configuration sources are applied in
 * override order whatever the order on the command line: defaults, the
 * --config file, the PGOUTBOX_* environment, then flags.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "db/conn.h"
#include "pgo_int.h"

extern char **environ;

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pgoutbox %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void print_help(const cli_cmd_t *cmd)
{
	pgo_conf_t *defaults = pgo_conf_new();

	printf("%s\n\n%s\n", cmd->usage, cmd->summary);
	if (cmd->more_help) {
		printf("\n");
		cmd->more_help(stdout);
	}
	if (cmd->details)
		printf("\n%s\n", cmd->details);
	printf("\nOptions:\n");
	for (const cli_opt_t *o = cmd->opts; o && o->name; o++) {
		char left[64];

		snprintf(left, sizeof(left), "%s%s%s", o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
		printf("  %-24s %s\n", left, o->help);
	}
	/* Configuration flags: the key they set and its default. */
	for (const char *const *f = cmd->flags; f && *f; f++) {
		const char *key = pgo_conf_key_for_flag(*f);
		const char *def = defaults ? pgo_conf_get(defaults, key) : NULL;
		char left[64];

		snprintf(left, sizeof(left), "%s VALUE", *f);
		printf("  %-24s %s (default: %s)\n", left, key,
		       def && *def ? def : "none");
	}
	printf("  %-24s %s\n", "--config FILE",
	       "read settings from an INI file");
	printf("  %-24s %s\n", "-h, --help", "show this help");
	printf("\nEvery setting can also come from the INI file or a "
	       "PGOUTBOX_<SECTION>_<KEY>\nvariable; `pgoutbox config show` "
	       "lists them all with their help.\nThe database comes from "
	       "--db, PGOUTBOX_DATABASE_URL or DATABASE_URL\n(a libpq "
	       "conninfo string or a postgres:// URL).\n");
	pgo_conf_destroy(defaults);
}

int cli_parse(cli_t *cli, const cli_cmd_t *cmd, int argc, char **argv,
	      bool *exit_now)
{
	const char *config = NULL;
	struct {
		char *flag;
		const char *value;
	} flags[32];
	int nflags = 0;

	*exit_now = false;
	memset(cli, 0, sizeof(*cli));
	for (int i = 1; i < argc; i++) {
		char name[64];
		const char *arg = argv[i], *value = NULL, *eq;
		const cli_opt_t *opt = NULL;
		const char *key;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			print_help(cmd);
			*exit_now = true;
			for (int k = 0; k < nflags; k++)
				free(flags[k].flag);
			return EXIT_OK;
		}
		if (strncmp(arg, "--", 2) != 0 || strcmp(arg, "-") == 0) {
			if (cli->nargs >= cmd->max_args) {
				cli_error(cmd->name,
					  "unexpected argument "
					  "\"%s\" (see --help)",
					  arg);
				goto usage;
			}
			cli->args[cli->nargs++] = arg;
			continue;
		}
		eq = strchr(arg, '=');
		snprintf(name, sizeof(name), "%.*s",
			 (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
		if (eq)
			value = eq + 1;
		for (const cli_opt_t *o = cmd->opts; o && o->name; o++)
			if (strcmp(o->name, name) == 0)
				opt = o;
		key = opt ? NULL : pgo_conf_key_for_flag(name);
		if (!opt && !key && strcmp(name, "--config") != 0) {
			const char *extra[48] = {"--config", "--help"};
			const char *guess;
			int ne = 2;

			for (const cli_opt_t *o = cmd->opts;
			     o && o->name && ne < 47; o++)
				extra[ne++] = o->name;
			guess = pgo_conf_suggest_flag(name, extra);
			cli_error(cmd->name,
				  "unknown option %s%s%s%s (see "
				  "`pgoutbox %s --help`)",
				  name, guess ? " (did you mean " : "",
				  guess ? guess : "", guess ? "?)" : "",
				  cmd->name);
			goto usage;
		}
		if (opt && !opt->arg) {
			if (value) {
				cli_error(cmd->name, "%s takes no value", name);
				goto usage;
			}
			*opt->set = true;
			continue;
		}
		if (!value) {
			if (i + 1 >= argc) {
				cli_error(cmd->name, "%s needs a value", name);
				goto usage;
			}
			value = argv[++i];
		}
		if (opt) {
			*opt->value = value;
			if (opt->set)
				*opt->set = true;
		} else if (!key) {
			config = value;
		} else if (nflags < 32) {
			flags[nflags].flag = strdup(name);
			flags[nflags++].value = value;
		} else {
			cli_error(cmd->name, "too many options");
			goto usage;
		}
	}
	if (cli->nargs < cmd->min_args) {
		cli_error(cmd->name, "missing argument (see --help)");
		goto usage;
	}
	cli->conf = pgo_conf_new();
	if (!cli->conf) {
		cli_error(cmd->name, "out of memory");
		goto usage;
	}
	if (config && pgo_conf_load_file(cli->conf, config) != PGO_OK) {
		cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
		goto usage;
	}
	if (pgo_conf_load_env(cli->conf, environ) != PGO_OK) {
		cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
		goto usage;
	}
	for (int i = 0; i < nflags; i++) {
		if (!flags[i].flag ||
		    pgo_conf_set(cli->conf,
				 pgo_conf_key_for_flag(flags[i].flag),
				 flags[i].value, PGO_CONF_FLAG,
				 flags[i].flag) != PGO_OK) {
			cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
			goto usage;
		}
	}
	for (int i = 0; i < nflags; i++)
		free(flags[i].flag);
	return EXIT_OK;
usage:
	for (int i = 0; i < nflags; i++)
		free(flags[i].flag);
	pgo_conf_destroy(cli->conf);
	cli->conf = NULL;
	return EXIT_USAGE;
}

void cli_free(cli_t *cli)
{
	pgo_conf_destroy(cli->conf);
	cli->conf = NULL;
}

void cli_log(void *ctx, pgo_log_level_t level, const char *subject,
	     const char *msg)
{
	static const char *names[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};
	struct timeval tv;
	struct tm tm;
	char when[32];

	(void)ctx;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03dZ %s %s: %s\n", when, (int)(tv.tv_usec / 1000),
		names[level], subject, msg);
}

volatile sig_atomic_t cli_stop_early;

static void on_early(int sig)
{
	if (sig != SIGHUP)
		cli_stop_early = 1;
}

void cli_catch_signals_early(bool hup)
{
	const struct sigaction early = {.sa_handler = on_early};

	sigaction(SIGTERM, &early, NULL);
	sigaction(SIGINT, &early, NULL);
	if (hup)
		sigaction(SIGHUP, &early, NULL);
}

void cli_log_setup(const pgo_conf_t *conf)
{
	const char *lvl = pgo_conf_get(conf, "log.level");
	int level = lvl ? pgo_log_level_parse(lvl) : PGO_LOG_INFO;

	pgo_log_set(cli_log, NULL,
		    level < 0 ? PGO_LOG_INFO : (pgo_log_level_t)level);
}

/* The server's notices (maintain()'s "partition ... created", say) as log
 * lines of the command, not libpq's raw "NOTICE:  ..." on stderr. */
static void cli_notice(void *arg, const PGresult *res)
{
	const char *sev =
		PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	pgo_log_level_t level =
		!sev			      ? PGO_LOG_INFO
		: strcmp(sev, "WARNING") == 0 ? PGO_LOG_WARN
		: strncmp(sev, "DEBUG", 5) == 0 || strcmp(sev, "LOG") == 0
			? PGO_LOG_DEBUG
			: PGO_LOG_INFO;

	pgo_log(level, (const char *)arg, "%s", msg ? msg : "?");
}

PGconn *cli_connect(const pgo_conf_t *conf, const char *app_name)
{
	const char *url = pgo_conf_get(conf, "database.url");
	const char *keys[] = {"connect_timeout", "dbname", "application_name",
			      NULL};
	const char *vals[] = {"10", url && *url ? url : NULL, app_name, NULL};
	PGconn *conn;

	if (!vals[1]) {
		keys[1] = "application_name";
		vals[1] = app_name;
		keys[2] = NULL;
	}
	conn = PQconnectdbParams(keys, vals, 1);
	if (!conn) {
		fprintf(stderr, "pgoutbox: out of memory\n");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		const char *m = PQerrorMessage(conn);
		pgo_error_t err;

		/* What no retry fixes says what to do, on one line. */
		if (pgo_conn_start_refusal(conf, pgo_pq_msg(conn, NULL), true,
					   &err) != PGO_OK)
			fprintf(stderr, "pgoutbox: %s\n", err.msg);
		else
			fprintf(stderr,
				"pgoutbox: cannot connect to PostgreSQL: %s%s",
				m,
				m[0] && m[strlen(m) - 1] == '\n' ? "" : "\n");
		PQfinish(conn);
		return NULL;
	}
	/* "pgoutbox maintain" -> subject "maintain" */
	PQsetNoticeReceiver(conn, cli_notice,
			    (void *)(strncmp(app_name, "pgoutbox ", 9) == 0
					     ? app_name + 9
					     : app_name));
	return conn;
}
