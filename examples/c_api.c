/*
 * c_api.c — the C API end to end, as a service would use it:
 *
 *   c_api produce N [QUEUE]
 *                      writes an order row and its event in one transaction
 *                      (pgo_send), then N events with one COPY
 *                      (pgo_send_bulk), then one event in a transaction that
 *                      rolls back, into QUEUE (an outbox queue; default the
 *                      outbox); prints what it committed
 *   c_api relay        relays the outbox into a C callback sink until
 *                      SIGTERM, printing "id key" per event on stdout
 *
 * The database comes from DATABASE_URL.  Built by meson as examples/c_api;
 * tests/integration/t_c_api.sh runs it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pgoutbox.h>

static int exec_ok(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(conn));
	PQclear(res);
	return ok;
}

static int produce(PGconn *conn, int n, const char *queue)
{
	pgo_error_t err;
	pgo_producer_t *p = pgo_producer_new(conn, queue, &err);
	pgo_msg_t *bulk;
	char(*keys)[32];
	int64_t id = 0;

	if (!p) {
		fprintf(stderr, "producer: %s\n", err.msg);
		return 1;
	}
	/* The business row and its event commit together. */
	if (!exec_ok(conn, "BEGIN") ||
	    !exec_ok(conn, "CREATE TABLE IF NOT EXISTS c_orders (id int)") ||
	    !exec_ok(conn, "INSERT INTO c_orders VALUES (1)"))
		return 1;
	if (pgo_send(p,
		     &(pgo_msg_t){.size = sizeof(pgo_msg_t),
				  .topic = "orders",
				  .key = "order-1",
				  .type = "order.created",
				  .payload = "{\"id\": 1}",
				  .headers = "{\"traceparent\": \"00-ab-01\"}"},
		     &id) != PGO_OK) {
		fprintf(stderr, "pgo_send: %s\n", pgo_producer_errmsg(p));
		return 1;
	}
	if (!exec_ok(conn, "COMMIT"))
		return 1;
	printf("sent %lld\n", (long long)id);

	/* Many at once: one COPY, all or nothing. */
	bulk = calloc((size_t)n, sizeof(*bulk));
	keys = calloc((size_t)n, sizeof(*keys));
	for (int i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "bulk-%d", i);
		bulk[i] = (pgo_msg_t){
			.size = sizeof(pgo_msg_t),
			.topic = "bulk",
			.key = keys[i],
			.type = "bulk.item",
			.payload = "{\"tab\": \"a\\tb\", \"nl\": \"x\\ny\"}"};
	}
	if (!exec_ok(conn, "BEGIN") ||
	    pgo_send_bulk(p, bulk, (size_t)n) != PGO_OK ||
	    !exec_ok(conn, "COMMIT")) {
		fprintf(stderr, "pgo_send_bulk: %s\n", pgo_producer_errmsg(p));
		return 1;
	}
	printf("bulk %d\n", n);

	/* A rolled-back event never exists. */
	if (!exec_ok(conn, "BEGIN") ||
	    pgo_send(p,
		     &(pgo_msg_t){.size = sizeof(pgo_msg_t),
				  .topic = "orders",
				  .key = "ghost",
				  .type = "x",
				  .payload = "{}"},
		     NULL) != PGO_OK ||
	    !exec_ok(conn, "ROLLBACK"))
		return 1;

	/* Bad input: a clear error, nothing written. */
	if (pgo_send(p,
		     &(pgo_msg_t){.size = sizeof(pgo_msg_t),
				  .topic = "",
				  .type = "x",
				  .payload = "{}"},
		     NULL) != PGO_ERR_INVALID)
		return 1;
	printf("empty topic: %s\n", pgo_producer_errmsg(p));
	free(bulk);
	free(keys);
	pgo_producer_destroy(p);
	return 0;
}

/* A C callback sink: prints each event, acks it, and says the batch is
 * done before submit returns (a sink that waits for a downstream calls
 * pgo_sink_done() later, from a watcher: see examples/linger_sink.c). */
static int print_submit(pgo_sink_t *sink, pgo_batch_t *b)
{
	for (size_t i = 0; i < b->n; i++) {
		printf("%lld %s %s\n", (long long)b->events[i].id,
		       b->events[i].key ? b->events[i].key : "-",
		       b->events[i].payload);
		b->acks[i] = PGO_ACK_OK;
	}
	fflush(stdout);
	pgo_sink_done(sink, b);
	return PGO_OK;
}

static const pgo_sink_ops_t print_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "print",
	.submit = print_submit,
};

static pgo_relay_t *running;

static void on_term(int sig)
{
	(void)sig;
	pgo_relay_request_stop(running);
}

static int relay(void)
{
	pgo_conf_t *conf = pgo_conf_new();
	pgo_error_t err;
	pgo_sink_t *sink = pgo_sink_new_custom(&print_ops, NULL, &err);
	extern char **environ;
	int rc;

	if (!conf || !sink || pgo_conf_load_env(conf, environ) != PGO_OK ||
	    pgo_conf_set(conf, "relay.stats_interval", "0", PGO_CONF_FLAG,
			 "example") != PGO_OK)
		return 1;
	running = pgo_relay_new(conf, sink, &err);
	if (!running) {
		fprintf(stderr, "c_api: %s\n", err.msg);
		return 1;
	}
	signal(SIGTERM, on_term);
	rc = pgo_relay_run(running);
	pgo_relay_destroy(running);
	pgo_sink_destroy(sink);
	pgo_conf_destroy(conf);
	return rc == PGO_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	PGconn *conn;
	int rc;

	if (argc >= 2 && strcmp(argv[1], "relay") == 0)
		return relay();
	if (argc < 3 || strcmp(argv[1], "produce") != 0) {
		fprintf(stderr,
			"usage: c_api produce N [QUEUE] | c_api relay\n");
		return 2;
	}
	conn = PQconnectdb(getenv("DATABASE_URL") ? getenv("DATABASE_URL")
						  : "");
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "%s", PQerrorMessage(conn));
		return 1;
	}
	rc = produce(conn, atoi(argv[2]), argc >= 4 ? argv[3] : NULL);
	PQfinish(conn);
	return rc;
}
