/*
 * kafka_mock.c — a Kafka cluster for the tests: librdkafka's own mock
 * cluster (rdkafka_mock.h), three brokers by default, which real clients
 * (the relay, kcat, kafkajs) reach over TCP on 127.0.0.1.
 *
 *   kafka_mock [BROKERS]
 *
 * Prints the bootstrap servers on the first line of stdout, then reads
 * commands on stdin, one a line, and answers each with "ok" or "error
 * ..." on stdout:
 *
 *   down ID | up ID                  a broker stops / starts answering
 *   errors API ERR [ERR...]          the next requests of API (produce,
 *                                    metadata or a number) fail with these
 *                                    errors, by name or number
 *   topic NAME PARTITIONS [RF]       creates a topic
 *   topic_error NAME ERR             metadata of NAME says ERR
 *   quit                             (or end of input) stops
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_ERRS 64

/*
 * The mock brokers' connections, as a Kafka broker's: with TCP_NODELAY
 * (Kafka's acceptor sets it on every connection).  librdkafka's mock
 * leaves Nagle on, so of two responses written back to back the second
 * waits for the client's delayed ACK, about 40 ms: a producer with more
 * than one request in flight to a broker saw round trips of 40-50 ms
 * where the broker took under 1 ms.  This accept() takes the place of
 * libc's for librdkafka's mock threads (the executable's symbol comes
 * first).
 */
int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int c = accept4(fd, addr, len, 0), on = 1;

	if (c >= 0)
		(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	return c;
}

/* Kafka API keys (rdkafka_protocol.h is not installed). */
#define API_PRODUCE	     0
#define API_METADATA	     3
#define API_INIT_PRODUCER_ID 22

/* An error by its name (NOT_LEADER_FOR_PARTITION) or number. */
static int err_of(const char *word, rd_kafka_resp_err_t *out)
{
	const struct rd_kafka_err_desc *descs;
	size_t n;
	char *end;
	long v = strtol(word, &end, 10);

	if (*word && !*end) {
		*out = (rd_kafka_resp_err_t)v;
		return 0;
	}
	rd_kafka_get_err_descs(&descs, &n);
	for (size_t i = 0; i < n; i++)
		if (descs[i].name && strcmp(descs[i].name, word) == 0) {
			*out = descs[i].code;
			return 0;
		}
	return -1;
}

static int api_of(const char *word)
{
	if (strcmp(word, "produce") == 0)
		return API_PRODUCE;
	if (strcmp(word, "metadata") == 0)
		return API_METADATA;
	if (strcmp(word, "init_producer_id") == 0)
		return API_INIT_PRODUCER_ID;
	return atoi(word);
}

static const char *run(rd_kafka_mock_cluster_t *mc, char *line)
{
	char *argv[MAX_ERRS + 3];
	int argc = 0;
	rd_kafka_resp_err_t errs[MAX_ERRS], e;

	for (char *t = strtok(line, " \t\r\n"); t && argc < MAX_ERRS + 3;
	     t = strtok(NULL, " \t\r\n"))
		argv[argc++] = t;
	if (argc == 0)
		return "error empty command";
	if ((strcmp(argv[0], "down") == 0 || strcmp(argv[0], "up") == 0) &&
	    argc == 2) {
		e = argv[0][0] == 'd'
			    ? rd_kafka_mock_broker_set_down(mc, atoi(argv[1]))
			    : rd_kafka_mock_broker_set_up(mc, atoi(argv[1]));
		return e ? rd_kafka_err2str(e) : "ok";
	}
	if (strcmp(argv[0], "errors") == 0 && argc >= 3) {
		for (int i = 2; i < argc; i++)
			if (err_of(argv[i], &errs[i - 2]) != 0)
				return "error unknown error name";
		rd_kafka_mock_push_request_errors_array(
			mc, (int16_t)api_of(argv[1]), (size_t)(argc - 2), errs);
		return "ok";
	}
	if (strcmp(argv[0], "topic") == 0 && argc >= 3) {
		e = rd_kafka_mock_topic_create(mc, argv[1], atoi(argv[2]),
					       argc > 3 ? atoi(argv[3]) : 3);
		return e ? rd_kafka_err2str(e) : "ok";
	}
	if (strcmp(argv[0], "topic_error") == 0 && argc == 3) {
		if (err_of(argv[2], &e) != 0)
			return "error unknown error name";
		rd_kafka_mock_topic_set_error(mc, argv[1], e);
		return "ok";
	}
	return "error unknown command";
}

int main(int argc, char **argv)
{
	int brokers = argc > 1 ? atoi(argv[1]) : 3;
	char errstr[512], line[4096];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mc;

	rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		fprintf(stderr, "kafka_mock: %s\n", errstr);
		return 1;
	}
	mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "kafka_mock: cannot create the cluster\n");
		return 1;
	}
	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "quit", 4) == 0)
			break;
		printf("%s\n", run(mc, line));
		fflush(stdout);
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
