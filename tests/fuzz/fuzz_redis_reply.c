/*
 * fuzz_redis_reply.c — what a Redis server sends back, read by the Redis
 * connection of both Redis sinks and `pgoutbox consume`
 * (sinks/redis/conn.c: the handshake's AUTH and SELECT replies, then the
 * replies to the commands, through hiredis' reader).
 *
 * The harness is the server: it listens on 127.0.0.1, the connection
 * connects to it for real (a non-blocking connect, the handshake queued,
 * a command held behind it), and the server sends the input and closes.
 * Input: one byte choosing the handshake (bit 0: AUTH, bit 1: SELECT),
 * then the server's bytes.  Oracles: every reply is a reply object of a
 * known type, no reply comes before the handshake's replies were taken,
 * and the connection ends DOWN with a reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "sinks/redis/conn.h"
#include "pgoutbox.h"

static int listener = -1;
static int port;

static void listen_once(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);

	if (listener >= 0)
		return;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(listener, 4) ||
	    getsockname(listener, (struct sockaddr *)&a, &len))
		abort();
	port = ntohs(a.sin_port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pgo_redis_url_t url = {.host = "127.0.0.1"};
	const char *argv[2] = {"PING", "x"};
	size_t lens[2] = {4, 1}, sent = 0;
	pgo_redis_t r;
	int server = -1, replies = 0, rounds = 0;
	bool handshake;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	listen_once();
	url.port = port;
	if (size > 0) {
		if (data[0] & 1)
			snprintf(url.password, sizeof(url.password), "pw");
		if (data[0] & 2)
			url.db = 3;
		data++;
		size--;
	}
	handshake = url.password[0] || url.db;
	pgo_redis_init(&r, &url);
	if (pgo_redis_connect(&r, 10000) != PGO_OK)
		abort();
	if (pgo_redis_append(&r, 2, argv, lens) != PGO_OK)
		abort();
	server = accept(listener, NULL, NULL);
	if (server < 0 || fcntl(server, F_SETFL, O_NONBLOCK) < 0)
		abort();
	while (r.state != PGO_REDIS_DOWN) {
		redisReply *reply;
		char sink[4096];

		FUZZ_CHECK(++rounds < 100000, "no end after %d rounds", rounds);
		if (server >= 0 && sent < size) {
			ssize_t n = send(server, data + sent, size - sent,
					 MSG_NOSIGNAL);

			if (n > 0)
				sent += (size_t)n;
		}
		if (server >= 0 && sent == size) {
			/* Let the client's commands arrive, then hang up. */
			while (recv(server, sink, sizeof(sink), 0) > 0)
				;
			close(server);
			server = -1;
		}
		if (pgo_redis_io(&r) != PGO_OK)
			break;
		while (pgo_redis_next_reply(&r, &reply) == PGO_OK && reply) {
			FUZZ_CHECK(reply->type >= REDIS_REPLY_STRING &&
					   reply->type <= 14,
				   "reply of type %d", reply->type);
			FUZZ_CHECK(!handshake || r.state == PGO_REDIS_UP,
				   "a reply before the handshake ended");
			(void)pgo_redis_reply_unavailable(reply);
			freeReplyObject(reply);
			replies++;
		}
		if (r.state != PGO_REDIS_DOWN && server < 0) {
			struct pollfd p = {.fd = r.fd,
					   .events = pgo_redis_events(&r)};

			(void)poll(&p, 1, 10);
		}
	}
	FUZZ_CHECK(r.state == PGO_REDIS_DOWN && r.err[0],
		   "ended in state %d without a reason", r.state);
	(void)replies;
	if (server >= 0)
		close(server);
	pgo_redis_close(&r);
	return 0;
}
