/*
 * cmd_send.c — `pgoutbox send`: write one event into the outbox (or, with
 * --queue, into an outbox queue of its own).
 *
 * The payload and headers are checked as JSON here first, so a typo gets a
 * message with the line and column and nothing reaches the database.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "pgoutbox.h"

/* Reads all of stdin, at most PGO_MAX_PAYLOAD + 1 bytes. */
static char *read_stdin(void)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);

	while (buf) {
		size_t n = fread(buf + len, 1, cap - len - 1, stdin);

		len += n;
		if (n == 0 || len > PGO_MAX_PAYLOAD)
			break;
		if (cap - len - 1 == 0) {
			char *p = realloc(buf, cap * 2);

			if (!p) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap *= 2;
		}
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

/* Checks text as JSON; object_only for headers.  0 or EXIT_USAGE. */
static int check_json(const char *what, const char *text, bool object_only)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (!j) {
		cli_error("send",
			  "%s is not valid JSON: line %d, column %d: %s", what,
			  jerr.line, jerr.column, jerr.text);
		return EXIT_USAGE;
	}
	if (object_only && !json_is_object(j)) {
		cli_error("send", "%s must be a JSON object", what);
		json_decref(j);
		return EXIT_USAGE;
	}
	json_decref(j);
	return 0;
}

/* The producer's message without its "event 0: ": the index names the
 * event of a batch; a single send has one. */
static const char *one_event(const char *msg)
{
	return strncmp(msg, "event 0: ", 9) == 0 ? msg + 9 : msg;
}

/* The event's fields as given; the payload is the argument. */
static struct {
	const char *topic, *key, *type, *headers;
} ev = {.type = ""};

static const char *const flags[] = {"--db", "--db-file", "--queue", NULL};

static const cli_opt_t opts[] = {
	{"--topic", "TOPIC", "routing topic (required)", &ev.topic, NULL},
	{"--key", "KEY", "aggregate id: events of one key keep order", &ev.key,
	 NULL},
	{"--type", "TYPE", "event type, e.g. order.created", &ev.type, NULL},
	{"--headers", "JSON", "headers object (trace context, ...)",
	 &ev.headers, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static const cli_cmd_t cmd = {
	.name = "send",
	.usage = "usage: pgoutbox send --topic TOPIC [--key KEY] "
		 "[--type TYPE] [--headers JSON] PAYLOAD|-",
	.summary = "Writes one event into the outbox in its own "
		   "transaction and prints its id.\nPAYLOAD is JSON; "
		   "- reads it from standard input.  Applications "
		   "send in\ntheir own transaction with SELECT "
		   "pgoutbox.send(topic, key, type, payload, "
		   "headers).\n--queue NAME writes an outbox of its "
		   "own (`pgoutbox queue create --kind outbox\nNAME`), "
		   "as SELECT pgoutbox.send_to('NAME', topic, key, "
		   "type, payload, headers)\ndoes.",
	.opts = opts,
	.flags = flags,
	.min_args = 1,
	.max_args = 1,
	.args_help = "PAYLOAD: the event as JSON, or - to read it from "
		     "standard input",
};

int cmd_send(int argc, char **argv)
{
	pgo_error_t err;
	pgo_producer_t *p = NULL;
	char *input = NULL;
	const char *payload;
	bool done;
	cli_t cli;
	PGconn *conn = NULL;
	int64_t id = 0;
	int rc;

	rc = cli_parse(&cli, &cmd, argc, argv, &done);
	if (rc != EXIT_OK || done)
		return rc;
	rc = EXIT_USAGE;
	if (!ev.topic || !*ev.topic) {
		cli_error("send", "--topic is required");
		goto out;
	}
	payload = cli.args[0];
	if (strcmp(payload, "-") == 0) {
		payload = input = read_stdin();
		if (!input) {
			cli_error("send", "reading stdin: %s", strerror(errno));
			goto out;
		}
	}
	if (strlen(payload) > PGO_MAX_PAYLOAD) {
		cli_error("send", "payload is over %d bytes", PGO_MAX_PAYLOAD);
		goto out;
	}
	if (check_json("payload", payload, false) ||
	    (ev.headers && check_json("--headers", ev.headers, true)))
		goto out;
	rc = EXIT_FAIL;
	conn = cli_connect(cli.conf, "pgoutbox send");
	if (!conn)
		goto out;
	p = pgo_producer_new(conn, pgo_conf_get(cli.conf, "relay.queue"), &err);
	if (!p) {
		cli_error("send", "%s", err.msg);
		rc = EXIT_USAGE;
		goto out;
	}
	rc = pgo_send(p,
		      &(pgo_msg_t){.size = sizeof(pgo_msg_t),
				   .topic = ev.topic,
				   .key = ev.key,
				   .type = ev.type,
				   .payload = payload,
				   .headers = ev.headers},
		      &id);
	if (rc != PGO_OK) {
		/* A queue that is no outbox, a field over its cap: the
		 * command line is wrong, not the database. */
		rc = rc == PGO_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
		/* "relation pgoutbox.outbox does not exist": most likely
		 * never migrated, which the schema check says with what to
		 * do (it runs only now, on the failure path). */
		if (strstr(pgo_producer_errmsg(p), "does not exist") &&
		    pgo_schema_check(conn, &err) != PGO_OK) {
			cli_error("send", "%s", err.msg);
			rc = cli_exit_code(err.code); /* as relay exits */
		} else
			cli_error("send", "%s",
				  one_event(pgo_producer_errmsg(p)));
		goto out;
	}
	printf("%lld\n", (long long)id);
	rc = EXIT_OK;
out:
	pgo_producer_destroy(p);
	if (conn)
		PQfinish(conn);
	free(input);
	cli_free(&cli);
	return rc;
}
