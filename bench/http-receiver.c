/*
 * http-receiver.c PORT_FILE — the webhook endpoint of bench/http.sh: an
 * HTTP/1.1 server (libmicrohttpd, one epoll thread) on a free port of
 * 127.0.0.1, written to PORT_FILE, answering 204 to every request once
 * its body is read, and printing one line {"id":N, per event as it
 * arrives (the webhook-id header for a request of one event, each
 * element's "id" for a JSON array), the start of the stdout sink's lines,
 * which pgoutbox-bench's latency workload reads.  Every accepted
 * connection gets TCP_NODELAY.  No signature check: this measures the
 * relay, not the receiver.
 *
 * It takes the place of a node receiver that used more CPU per request
 * than the relay itself (about 50 us against 37 us with a batch of 1 on
 * the 2-core host), so that on a shared machine the drain measured the
 * receiver as much as the relay.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

/* One request's body as it is read. */
struct body {
	char *data;
	size_t len, cap;
};

static struct MHD_Response *no_content;

static bool body_add(struct body *b, const char *data, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p)
			return false;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return true;
}

/* The ids of a JSON array of events: the "id" that opens each element
 * (the relay writes it first).  A scan, not a parse, that steps over
 * strings and nested values, so that an "id" inside a payload is not
 * taken; jansson took 1 ms for a request of 100 events. */
static void print_array_ids(const char *p, const char *end)
{
	int depth = 0;
	bool in_str = false;

	for (; p < end; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		switch (*p) {
		case '"': in_str = true; break;
		case '[': depth++; break;
		case ']': depth--; break;
		case '}': depth--; break;
		case '{':
			if (++depth == 2 && end - p > 6 &&
			    memcmp(p + 1, "\"id\":", 5) == 0) {
				char *num_end;
				long long id = strtoll(p + 6, &num_end, 10);

				if (num_end > p + 6)
					printf("{\"id\":%lld,\n", id);
			}
			break;
		default: break;
		}
	}
}

/* The ids a request carried, one line each, written at once. */
static void print_ids(struct MHD_Connection *c, const struct body *b)
{
	const char *id =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "webhook-id");

	if (b->len && b->data[0] == '[')
		print_array_ids(b->data, b->data + b->len);
	else if (id)
		printf("{\"id\":%s,\n", id);
	fflush(stdout);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	struct body *b = *state;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return MHD_NO;
		*state = b;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!body_add(b, upload, *upload_size))
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	print_ids(c, b);
	return MHD_queue_response(c, MHD_HTTP_NO_CONTENT, no_content);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode why)
{
	struct body *b = *state;

	(void)cls;
	(void)c;
	(void)why;
	if (b) {
		free(b->data);
		free(b);
		*state = NULL;
	}
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket,
			  enum MHD_ConnectionNotificationCode what)
{
	const union MHD_ConnectionInfo *info;
	int one = 1;

	(void)cls;
	(void)socket;
	if (what != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (info)
		(void)setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY,
				 &one, sizeof(one));
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = {.sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	sigset_t set;
	FILE *f;
	int sig;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PORT_FILE\n", argv[0]);
		return 2;
	}
	/* SIGTERM and SIGINT end it from main(); the daemon's thread gets
	 * none. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	no_content = MHD_create_response_from_buffer(0, (void *)"",
						     MHD_RESPMEM_PERSISTENT);
	d = MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
		NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &addr,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
	info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
	if (!no_content || !info) {
		fprintf(stderr, "%s: libmicrohttpd would not start\n", argv[0]);
		return 1;
	}
	f = fopen(argv[1], "w");
	if (!f || fprintf(f, "%u\n", (unsigned)info->port) < 0 || fclose(f)) {
		fprintf(stderr, "%s: %s: %s\n", argv[0], argv[1],
			strerror(errno));
		return 1;
	}
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	MHD_destroy_response(no_content);
	return 0;
}
