/*
 * endpoint.c — the HTTP endpoint of a long-running process: /metrics,
 * /healthz and /readyz, served by libmicrohttpd on the process's own loop.
 *
 * libmicrohttpd runs in its external mode with epoll: it starts no thread
 * and hands out one epoll descriptor that becomes readable whenever any
 * of its sockets (the listening one, every connection) has something to
 * do, and a timeout for idle connections.  The descriptor is an fd
 * watcher of the loop and the timeout a timer; both call MHD_run(), which
 * never blocks.  A scrape is thus one callback of the loop: it reads the
 * runner's counters without locks and takes microseconds, between the
 * claim rounds of the slots (which wait on their own sockets meanwhile).
 *
 * The listening socket is made here (getaddrinfo, bind, listen) so that a
 * wrong or taken address is reported at start with its reason.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "metrics/metrics.h"
#include "console/console.h"
#include "base/error.h"
#include "base/log.h"
#include "base/net.h"
#include "base/time.h"
#include "base/buf.h"
#include "loop/loop.h"
#include "pgoutbox.h"

struct pgo_endpoint {
	struct MHD_Daemon *mhd;
	int listen_fd;	       /* ours until MHD took it */
	int port;	       /* bound port */
	pgo_loop_io_t *io;     /* MHD's epoll fd */
	pgo_loop_timer_t *tmo; /* MHD's next connection timeout */
	pgo_metrics_t *metrics;
	pgo_endpoint_probe_t probe;
	char subject[96];
	char unhealthy[160]; /* /healthz: "" = healthy, else why not */
	pgo_buf_t body;	     /* the last /metrics text, reused */
	/* The last /metrics response, shared by the scrapes of the next
	 * CACHE_MS (libmicrohttpd counts its users): a flood of scrapes
	 * costs the relay one formatting per CACHE_MS, not one each. */
	struct MHD_Response *cached;
	int64_t cached_at; /* monotonic ms */
	bool loopback; /* listens on a loopback address: a loopback Host only */
	pgo_console_t *console;	   /* [console] enabled: its pages here too */
	pgo_loop_io_t *console_io; /* its answers are ready */
};

#define CACHE_MS 100

/* Queues a text response; MHD copies the body. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
			       const char *ctype, const char *body, size_t n)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		n, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result respond_line(struct MHD_Connection *c, unsigned status,
				    const char *line)
{
	char buf[320];
	int n = snprintf(buf, sizeof(buf), "%s\n", line);

	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1;
	return respond(c, status, "text/plain; charset=utf-8", buf, (size_t)n);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	pgo_endpoint_t *e = cls;
	char why[256];

	(void)version;
	/* DNS rebinding (base/net.h): on a loopback address, a Host of
	 * another name is a web page's, resolved to this machine. */
	if (e->loopback && !*req_cls) {
		const char *host =
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");

		if (host && !pgo_host_is_loopback(host))
			return respond_line(c, MHD_HTTP_FORBIDDEN,
					    PGO_HOST_REFUSED);
	}
	if (e->console && pgo_console_path(url)) /* never waits */
		return (enum MHD_Result)pgo_console_mhd(e->console, c, url,
							method, upload,
							upload_size, req_cls);
	if (*upload_size) { /* a body we do not read */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return respond_line(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				    "only GET and HEAD");
	if (strcmp(url, "/metrics") == 0) {
		int64_t now = pgo_now_ms();

		if (!e->cached || now - e->cached_at >= CACHE_MS) {
			struct MHD_Response *r;

			if (e->probe.collect)
				e->probe.collect(e->probe.arg);
			pgo_buf_reset(&e->body);
			pgo_metrics_format(e->metrics, &e->body);
			if (e->body.oom)
				return respond_line(
					c, MHD_HTTP_SERVICE_UNAVAILABLE,
					"out of memory");
			r = MHD_create_response_from_buffer(
				e->body.len, e->body.data ? e->body.data : "",
				MHD_RESPMEM_MUST_COPY);
			if (!r)
				return MHD_NO;
			MHD_add_response_header(
				r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
			MHD_add_response_header(
				r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
			if (e->cached)
				MHD_destroy_response(e->cached);
			e->cached = r;
			e->cached_at = now;
		}
		return MHD_queue_response(c, MHD_HTTP_OK, e->cached);
	}
	if (strcmp(url, "/healthz") == 0) {
		/* Answered from the loop: it is turning. */
		if (e->unhealthy[0])
			return respond_line(c, MHD_HTTP_SERVICE_UNAVAILABLE,
					    e->unhealthy);
		return respond_line(c, MHD_HTTP_OK, "ok: the loop is turning");
	}
	if (strcmp(url, "/readyz") == 0) {
		why[0] = '\0';
		if (e->probe.ready &&
		    !e->probe.ready(e->probe.arg, why, sizeof(why)))
			return respond_line(c, MHD_HTTP_SERVICE_UNAVAILABLE,
					    why[0] ? why : "not ready");
		return respond_line(c, MHD_HTTP_OK, why[0] ? why : "ready");
	}
	return respond_line(c, MHD_HTTP_NOT_FOUND,
			    "not found: /metrics, /healthz, /readyz");
}

/* Lets MHD work, then arms the timer for its next timeout. */
static void drive(pgo_endpoint_t *e)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(e->mhd);
	if (MHD_get_timeout(e->mhd, &ms) == MHD_YES)
		pgo_loop_timer_set(e->tmo, pgo_now_ms() + (int64_t)ms + 1);
	else
		pgo_loop_timer_set(e->tmo, 0);
}

static void on_io(void *arg, int fd, short revents)
{
	(void)fd;
	(void)revents;
	drive(arg);
}

static void on_timer(void *arg)
{
	drive(arg);
}

/* A request ends: the console's frees what it kept. */
static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	pgo_console_mhd_done(req_cls);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	pgo_endpoint_t *e = cls;
	char line[256];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	pgo_log(PGO_LOG_DEBUG, e->subject, "metrics endpoint: %s", line);
}

/* Splits "host:port", "[v6]:port" or ":port" (host NULL: every address). */
static bool split_listen(const char *listen, char *host, size_t hsize,
			 char *port, size_t psize)
{
	const char *colon;
	size_t hn;

	if (listen[0] == '[') {
		const char *end = strchr(listen, ']');

		if (!end || end[1] != ':')
			return false;
		hn = (size_t)(end - listen - 1);
		colon = end + 1;
		listen++;
	} else {
		colon = strrchr(listen, ':');
		if (!colon)
			return false;
		hn = (size_t)(colon - listen);
	}
	if (hn >= hsize || strlen(colon + 1) >= psize || !colon[1])
		return false;
	memcpy(host, listen, hn);
	host[hn] = '\0';
	strcpy(port, colon + 1);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return atoi(port) <= 65535;
}

/* A listening, non-blocking socket; -1 with err filled. *loopback: it
 * listens on a loopback address only. */
static int listen_on(const char *addr, int *port, bool *loopback,
		     pgo_error_t *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*ai = NULL, *a;
	char host[256], service[8], why[160] = "no address";
	int fd = -1, rc, one = 1;

	if (!split_listen(addr, host, sizeof(host), service, sizeof(service))) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "metrics.listen \"%s\": expected host:port, "
			      "[v6]:port or :port (e.g. 127.0.0.1:9187)",
			      addr);
		return -1;
	}
	rc = getaddrinfo(host[0] ? host : NULL, service, &hints, &ai);
	if (rc != 0) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "metrics.listen \"%s\": %s", addr,
			      gai_strerror(rc));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family,
			    a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0) {
			snprintf(why, sizeof(why), "%s", strerror(errno));
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
		    listen(fd, 64) == 0)
			break;
		snprintf(why, sizeof(why), "%s", strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "metrics.listen \"%s\": cannot listen: %s; "
			      "choose a free address or leave it empty",
			      addr, why);
		return -1;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		*port = 0;
		*loopback = false;
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			*port = ss.ss_family == AF_INET6
					? ntohs(((struct sockaddr_in6 *)&ss)
							->sin6_port)
					: ntohs(((struct sockaddr_in *)&ss)
							->sin_port);
			*loopback =
				pgo_addr_is_loopback((struct sockaddr *)&ss);
		}
	}
	return fd;
}

pgo_endpoint_t *pgo_endpoint_new(pgo_loop_t *loop, const char *listen,
				 pgo_metrics_t *m,
				 const pgo_endpoint_probe_t *probe,
				 const char *subject, pgo_error_t *err)
{
	pgo_endpoint_t *e = calloc(1, sizeof(*e));
	const union MHD_DaemonInfo *info;

	if (!e) {
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for the metrics endpoint");
		return NULL;
	}
	pgo_buf_init(&e->body);
	e->metrics = m;
	if (probe)
		e->probe = *probe;
	snprintf(e->subject, sizeof(e->subject), "%s", subject);
	e->listen_fd = listen_on(listen, &e->port, &e->loopback, err);
	if (e->listen_fd < 0) {
		free(e);
		return NULL;
	}
	e->mhd = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME, 0,
		NULL, NULL, on_request, e, MHD_OPTION_NOTIFY_COMPLETED, on_done,
		e, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)e->listen_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, e, MHD_OPTION_END);
	if (!e->mhd) {
		close(e->listen_fd);
		free(e);
		pgo_error_set(err, PGO_ERR_INVALID, 0,
			      "metrics.listen \"%s\": libmicrohttpd would not "
			      "start",
			      listen);
		return NULL;
	}
	e->listen_fd = -1; /* MHD closes it */
	info = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	e->io = pgo_loop_io_add(loop, info ? info->epoll_fd : -1, POLLIN, on_io,
				e);
	e->tmo = pgo_loop_timer_add(loop, 0, on_timer, e);
	if (!info || !e->io || !e->tmo) {
		pgo_endpoint_destroy(e);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for the metrics endpoint");
		return NULL;
	}
	pgo_log(PGO_LOG_INFO, e->subject,
		"metrics on http://%s/metrics (port %d), /healthz, /readyz",
		listen, e->port);
	return e;
}

void pgo_endpoint_set_probe(pgo_endpoint_t *e, const pgo_endpoint_probe_t *p)
{
	if (!e)
		return;
	memset(&e->probe, 0, sizeof(e->probe));
	if (p)
		e->probe = *p;
}

static void on_console(void *arg, int fd, short revents)
{
	pgo_endpoint_t *e = arg;

	(void)fd;
	(void)revents;
	pgo_console_woken(e->console);
	drive(e);
}

void pgo_endpoint_console_reload(pgo_endpoint_t *e, const pgo_conf_t *conf)
{
	pgo_error_t err;

	if (e && e->console && pgo_console_reload(e->console, conf, &err) != PGO_OK)
		pgo_log(PGO_LOG_ERROR, "console",
			"reload failed, keeping its databases: %s", err.msg);
}

int pgo_endpoint_console(pgo_endpoint_t *e, pgo_loop_t *loop,
			 const pgo_conf_t *conf, pgo_error_t *err)
{
	e->console = pgo_console_new(conf, NULL, err);
	if (!e->console)
		return err->code;
	e->console_io = pgo_loop_io_add(loop, pgo_console_wake_fd(e->console),
					POLLIN, on_console, e);
	if (!e->console_io)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for the console");
	return PGO_OK;
}

int pgo_endpoint_port(const pgo_endpoint_t *e)
{
	return e ? e->port : 0;
}

void pgo_endpoint_unhealthy(pgo_endpoint_t *e, const char *why)
{
	if (e)
		snprintf(e->unhealthy, sizeof(e->unhealthy), "%s",
			 why ? why : "");
}

void pgo_endpoint_destroy(pgo_endpoint_t *e)
{
	if (!e)
		return;
	pgo_loop_io_del(e->io);
	pgo_loop_timer_del(e->tmo);
	pgo_loop_io_del(e->console_io);
	pgo_console_destroy(e->console); /* resumes what it suspended */
	e->console = NULL;
	if (e->mhd)
		MHD_stop_daemon(e->mhd);
	if (e->cached)
		MHD_destroy_response(e->cached);
	pgo_buf_free(&e->body);
	free(e);
}
