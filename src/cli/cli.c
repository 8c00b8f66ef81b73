/*
 * cli.c — option parsing, logging and connecting for the subcommands.
 *
 * Flags come from two places: the subcommand's own options and the flags of
 * the configuration table (pgo_conf_key_for_flag).  Both accept
 * "--name value" and "--name=value".  Configuration sources are applied in
 * override order whatever the order on the command line: defaults, the
 * --config file, the PGOUTBOX_* environment, then flags.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "db/conn.h"
#include "base/error.h"
#include "base/log.h"
#include "conf/conf.h"
#include "pgoutbox.h"

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

int cli_parse_int(const char *cmd, const char *what, const char *s,
		  long long lo, long long hi, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		cli_error(cmd,
			  "%s must be a whole number from %lld to %lld, not "
			  "\"%s\"",
			  what, lo, hi, s);
		return EXIT_USAGE;
	}
	return 0;
}

/* The usage lines: the command's own, or one per action of its table. */
static void print_usage(const cli_cmd_t *cmd)
{
	if (!cmd->subs) {
		printf("%s\n", cmd->usage);
		return;
	}
	for (const cli_sub_t *s = cmd->subs; s->name; s++)
		printf("%s pgoutbox %s %s\n",
		       s == cmd->subs ? "usage:" : "      ", cmd->name,
		       s->usage);
}

static void print_help(const cli_cmd_t *cmd)
{
	pgo_conf_t *defaults = pgo_conf_new();

	print_usage(cmd);
	printf("\n%s\n", cmd->summary);
	if (cmd->more_help) {
		printf("\n");
		cmd->more_help(stdout);
	}
	if (cmd->details)
		printf("\n%s\n", cmd->details);
	printf("\nOptions:\n");
	for (const cli_opt_t *o = cmd->opts; o && o->name; o++) {
		char left[64];

		if (o->hidden)
			continue;
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

/* What the command line said besides options and arguments: --config and
 * the configuration flags, applied after the file and the environment
 * whatever their order on the line. */
#define GIVEN_MAX 128

typedef struct given {
	const char *config; /* --config FILE, or NULL */
	struct {
		char *flag; /* "--batch" (owned) */
		const char *value;
	} flags[GIVEN_MAX]; /* --db may come once per database of a fleet */
	int nflags;
} given_t;

static void given_free(given_t *g)
{
	for (int i = 0; i < g->nflags; i++)
		free(g->flags[i].flag);
	g->nflags = 0;
}

static const cli_opt_t *find_opt(const cli_cmd_t *cmd, const char *name)
{
	for (const cli_opt_t *o = cmd->opts; o && o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/* "unknown option --bach (did you mean --batch?)": the guess among the
 * configuration flags and the command's options a user may see. */
static void unknown_option(const cli_cmd_t *cmd, const char *name)
{
	const char *extra[48] = {"--config", "--help"};
	const char *guess;
	int ne = 2;

	for (const cli_opt_t *o = cmd->opts; o && o->name && ne < 47; o++)
		if (!o->hidden)
			extra[ne++] = o->name;
	guess = pgo_conf_suggest_flag(name, extra);
	cli_error(cmd->name,
		  "unknown option %s%s%s%s (see "
		  "`pgoutbox %s --help`)",
		  name, guess ? " (did you mean " : "", guess ? guess : "",
		  guess ? "?)" : "", cmd->name);
}

/* Takes the option argv[*i] ("--name", "--name=value" or "--name value",
 * moving *i past the value); 0 or EXIT_USAGE with the error printed. */
static int take_option(const cli_cmd_t *cmd, given_t *g, int argc, char **argv,
		       int *i)
{
	const char *arg = argv[*i], *eq = strchr(arg, '=');
	const char *value = eq ? eq + 1 : NULL;
	const cli_opt_t *opt;
	const char *key;
	char name[64];

	snprintf(name, sizeof(name), "%.*s",
		 (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
	opt = find_opt(cmd, name);
	key = opt ? NULL : pgo_conf_key_for_flag(name);
	if (!opt && !key && strcmp(name, "--config") != 0) {
		unknown_option(cmd, name);
		return EXIT_USAGE;
	}
	if (opt && !opt->arg) {
		if (value) {
			cli_error(cmd->name, "%s takes no value", name);
			return EXIT_USAGE;
		}
		*opt->set = true;
		return 0;
	}
	if (!value) {
		if (*i + 1 >= argc) {
			cli_error(cmd->name, "%s needs a value", name);
			return EXIT_USAGE;
		}
		value = argv[++*i];
	}
	if (opt) {
		*opt->value = value;
		if (opt->set)
			*opt->set = true;
	} else if (!key) {
		g->config = value;
	} else if (g->nflags < GIVEN_MAX) {
		g->flags[g->nflags].flag = strdup(name);
		g->flags[g->nflags++].value = value;
	} else {
		cli_error(cmd->name, "too many options");
		return EXIT_USAGE;
	}
	return 0;
}

/* "create, list, stats": the names of the command's actions. */
static const char *sub_names(const cli_cmd_t *cmd, char *buf, size_t size)
{
	buf[0] = '\0';
	for (const cli_sub_t *s = cmd->subs; s->name; s++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s",
			 s == cmd->subs ? "" : ", ", s->name);
	return buf;
}

/* The positional arguments are fewer than the command needs: say which. */
static void missing_args(const cli_cmd_t *cmd)
{
	char names[256];

	if (cmd->subs) {
		cli_error(cmd->name, "missing the action: %s (see --help)",
			  sub_names(cmd, names, sizeof(names)));
	} else if (cmd->args_help) {
		cli_error(cmd->name, "missing argument %s", cmd->args_help);
	} else {
		cli_error(cmd->name, "missing argument (see --help)");
	}
}

/* --db given more than once: a fleet of those databases (docs/fleet.md).
 * 0 or EXIT_USAGE. */
static int add_fleet(cli_t *cli, const cli_cmd_t *cmd, const given_t *g)
{
	int n = 0;

	for (int i = 0; i < g->nflags; i++)
		if (g->flags[i].flag && strcmp(g->flags[i].flag, "--db") == 0)
			n++;
	for (int i = 0; i < g->nflags && n > 1; i++) {
		if (!g->flags[i].flag || strcmp(g->flags[i].flag, "--db") != 0)
			continue;
		if (pgo_conf_add_database(cli->conf, NULL, g->flags[i].value,
					  "--db") != PGO_OK) {
			cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* Configuration in override order: defaults, the --config file, the
 * PGOUTBOX_* environment, the flags.  0 or EXIT_USAGE. */
static int load_conf(cli_t *cli, const cli_cmd_t *cmd, const given_t *g)
{
	cli->conf = pgo_conf_new();
	if (!cli->conf) {
		cli_error(cmd->name, "out of memory");
		return EXIT_USAGE;
	}
	if (g->config && pgo_conf_load_file(cli->conf, g->config) != PGO_OK) {
		cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
		return EXIT_USAGE;
	}
	if (pgo_conf_load_env(cli->conf, environ) != PGO_OK) {
		cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
		return EXIT_USAGE;
	}
	if (add_fleet(cli, cmd, g) != 0)
		return EXIT_USAGE;
	for (int i = 0; i < g->nflags; i++) {
		if (!g->flags[i].flag ||
		    pgo_conf_set(cli->conf,
				 pgo_conf_key_for_flag(g->flags[i].flag),
				 g->flags[i].value, PGO_CONF_FLAG,
				 g->flags[i].flag) != PGO_OK) {
			cli_error(cmd->name, "%s", pgo_conf_errmsg(cli->conf));
			return EXIT_USAGE;
		}
	}
	return 0;
}

int cli_parse(cli_t *cli, const cli_cmd_t *cmd, int argc, char **argv,
	      bool *exit_now)
{
	given_t g = {0};
	int rc = 0;

	*exit_now = false;
	memset(cli, 0, sizeof(*cli));
	for (int i = 1; i < argc && rc == 0; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			print_help(cmd);
			*exit_now = true;
			given_free(&g);
			return EXIT_OK;
		}
		if (strncmp(arg, "--", 2) == 0 && strcmp(arg, "-") != 0) {
			rc = take_option(cmd, &g, argc, argv, &i);
		} else if (cli->nargs >= cmd->max_args) {
			cli_error(cmd->name,
				  "unexpected argument \"%s\" (see --help)",
				  arg);
			rc = EXIT_USAGE;
		} else {
			cli->args[cli->nargs++] = arg;
		}
	}
	if (rc == 0 && cli->nargs < cmd->min_args) {
		missing_args(cmd);
		rc = EXIT_USAGE;
	}
	if (rc == 0)
		rc = load_conf(cli, cmd, &g);
	given_free(&g);
	if (rc != 0) {
		pgo_conf_destroy(cli->conf);
		cli->conf = NULL;
	}
	return rc;
}

int cli_run_sub(cli_t *cli, const cli_cmd_t *cmd)
{
	const char *action = cli->args[0];
	char names[256];

	for (const cli_sub_t *s = cmd->subs; s->name; s++) {
		if (strcmp(s->name, action) != 0)
			continue;
		if (cli->nargs - 1 != s->nargs) {
			cli_error(cmd->name,
				  "wrong arguments for \"%s\": usage: "
				  "pgoutbox %s %s",
				  action, cmd->name, s->usage);
			return EXIT_USAGE;
		}
		return s->run(cli);
	}
	cli_error(cmd->name, "unknown subcommand \"%s\" (%s)", action,
		  sub_names(cmd, names, sizeof(names)));
	return EXIT_USAGE;
}

int cli_exit_code(int rc)
{
	switch (rc) {
	case PGO_OK: return EXIT_OK;
	case PGO_ERR_INVALID:
	case PGO_ERR_CONFIG:
	case PGO_ERR_SCHEMA: return EXIT_USAGE;
	default: return EXIT_FAIL;
	}
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

PGconn *cli_connect_schema(const pgo_conf_t *conf, const char *app_name,
			   int *rc)
{
	PGconn *conn = cli_connect(conf, app_name);
	pgo_error_t err;

	*rc = EXIT_FAIL;
	if (!conn)
		return NULL;
	if (pgo_schema_check(conn, &err) != PGO_OK) {
		/* "pgoutbox queue" -> "pgoutbox queue: ..." */
		fprintf(stderr, "%s: %s\n", app_name, err.msg);
		*rc = cli_exit_code(err.code);
		PQfinish(conn);
		return NULL;
	}
	*rc = EXIT_OK;
	return conn;
}
