/*
 * cli.h — what the subcommands of the pgoutbox binary share: option
 * parsing over the configuration table, the stderr logger, connecting.
 * Each subcommand parses its flags and calls the library; nothing more.
 */
#ifndef PGO_CLI_H
#define PGO_CLI_H

#include <signal.h>
#include <stdbool.h>

#include "pgoutbox.h"

/* Exit codes: the table `pgoutbox --help` prints (main.c).  consume's
 * fault drill exits 3 (cmd_consume.c). */
#define EXIT_OK	  0
#define EXIT_FAIL 1 /* the operation failed; retrying later may work */
#define EXIT_USAGE                                                             \
	2 /* bad flags, config, input or schema: retrying                      \
	   * the same cannot work */

/* An option of one subcommand (besides the configuration flags). */
typedef struct cli_opt {
	const char *name; /* "--topic" */
	const char *arg;  /* argument name for help ("TEXT"), NULL: boolean */
	const char *help;
	const char **value; /* where a string argument goes */
	bool *set;	    /* set to true when given */
	bool hidden;	    /* for tests only: accepted, not in --help */
} cli_opt_t;

typedef struct cli {
	pgo_conf_t *conf;
	const char *args[8]; /* positional arguments */
	int nargs;
} cli_t;

/* One action of a command that has several ("queue create"): a row of
 * that command's table, which cli_run_sub() dispatches on and --help
 * prints the usage lines of. */
typedef struct cli_sub {
	const char *name; /* "create" */
	const char
		*usage; /* after "pgoutbox CMD ": "create NAME [--shards N]" */
	int nargs;	/* positional arguments after the action's name */
	/* Checks its flags, connects, calls the library; an exit code.
	 * cli->args[0] is the action, its arguments follow. */
	int (*run)(cli_t *cli);
} cli_sub_t;

/* A subcommand's description for parsing and --help. */
typedef struct cli_cmd {
	const char *name;    /* "relay" */
	const char *usage;   /* "pgoutbox relay [options]"; NULL with subs */
	const char *summary; /* one line */
	const char *details; /* paragraphs after the usage, or NULL */
	/* Writes a generated paragraph before details (the sink list of
	 * `relay --help`), or NULL. */
	void (*more_help)(FILE *out);
	const cli_opt_t *opts; /* NULL-terminated by name */
	const char *const
		*flags;		/* configuration flags that apply, NULL-ended */
	int min_args, max_args; /* positional arguments */
	/* What the positional arguments are, for the error when they are
	 * missing ("PAYLOAD: ..."), or NULL. */
	const char *args_help;
	const cli_sub_t *subs; /* the actions, NULL-ended by name, or NULL */
} cli_cmd_t;

/* Parses argv (argv[0] is the subcommand) into cli: defaults, then the
 * --config file, then PGOUTBOX_* environment, then flags.  Prints help and
 * returns 0 with *exit_now set for --help; prints errors and returns
 * EXIT_USAGE on bad input; returns 0 otherwise. */
int cli_parse(cli_t *cli, const cli_cmd_t *cmd, int argc, char **argv,
	      bool *exit_now);
void cli_free(cli_t *cli);

/* Runs the action cli->args[0] of cmd->subs; an unknown action or a wrong
 * number of arguments is an error naming the usage (EXIT_USAGE). */
int cli_run_sub(cli_t *cli, const cli_cmd_t *cmd);

/* The exit code for a library result: EXIT_OK for PGO_OK, EXIT_USAGE for
 * what retrying cannot fix (PGO_ERR_INVALID, PGO_ERR_CONFIG, and
 * PGO_ERR_SCHEMA: a schema missing or not this build's), EXIT_FAIL for
 * the rest. */
int cli_exit_code(int rc);

/* The stderr logger: "2026-11-30T16:53:33.123Z INFO  subject: msg". */
void cli_log(void *ctx, pgo_log_level_t level, const char *subject,
	     const char *msg);
void cli_log_setup(const pgo_conf_t *conf);

/* A long-running command's SIGTERM and SIGINT (and SIGHUP when it
 * reloads on it) from its first instruction: until the command has its
 * handlers (once its relay, worker, ... exists), a stop request is kept
 * in cli_stop_early and a SIGHUP ignored (the configuration is being
 * read anyway), so that a stop during the start still ends in exit 0,
 * not death by the signal. */
extern volatile sig_atomic_t cli_stop_early;
void cli_catch_signals_early(bool hup);

/* Connects (blocking) to database.url; prints the error and returns NULL
 * when that fails. */
PGconn *cli_connect(const pgo_conf_t *conf, const char *app_name);

/* cli_connect(), then pgo_schema_check(): NULL when either fails, with
 * the error printed and *rc the exit code (EXIT_FAIL without a
 * connection, EXIT_USAGE for a schema missing or not this build's). */
PGconn *cli_connect_schema(const pgo_conf_t *conf, const char *app_name,
			   int *rc);

/* Prints "pgoutbox CMD: message" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Reads s, what the user gave for `what` ("--limit", "ID"), as a whole
 * number from lo to hi into *out: 0, or EXIT_USAGE with "pgoutbox CMD:
 * WHAT must be a whole number from LO to HI, not "S"" printed. */
int cli_parse_int(const char *cmd, const char *what, const char *s,
		  long long lo, long long hi, long long *out);

int cmd_migrate(int argc, char **argv);
int cmd_send(int argc, char **argv);
int cmd_relay(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_maintain(int argc, char **argv);
int cmd_consume(int argc, char **argv);
int cmd_inbox(int argc, char **argv);
int cmd_queue(int argc, char **argv);
int cmd_dead(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_cron(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_adopt(int argc, char **argv);
int cmd_unadopt(int argc, char **argv);
int cmd_console(int argc, char **argv);

/* Worker options from the [worker] keys of conf (strings borrowed). */
void cli_worker_opts(const pgo_conf_t *conf, pgo_worker_opts_t *o);

#endif
