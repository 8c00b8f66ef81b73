/*
 * http.c — the console's HTTP side on libmicrohttpd (a thread of its
 * own: the console is its own process, `pgoutbox console`).
 *
 * Every request passes the same checks before a page's code sees it:
 * GET for pages and reads, POST for actions; a POST whose Origin is not
 * this console is refused; an action needs a session (the token was
 * presented: /api/login) and that session's CSRF token in X-CSRF-Token.
 * Every answer says no-store, nosniff, and a Content-Security-Policy
 * that allows only the console's own files (no inline script, no
 * framing), so that a payload shown in a page can never run.
 */
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "console/console_int.h"
#include "base/error.h"
#include "base/log.h"
#include "base/net.h"
#include "base/buf.h"
#include "console/console.h"
#include "pgoutbox.h"

#define BODY_MAX   (64 * 1024)
#define PARAMS_MAX 16
#define COOKIE	   "pgo_console"
#define LOGINS_MAX 5 /* wrong tokens a minute, then 429 */

/* One request: what the answer needs, copied out of libmicrohttpd while
 * the request is on its thread, so that the answer may be computed on
 * another (the embedded console's worker, see below). */
typedef struct request {
	pgo_buf_t body; /* POST: the form; GET: "name\0value\0..." */
	bool too_big;
	bool post;
	int n;
	char *name[PARAMS_MAX], *value[PARAMS_MAX]; /* into body */
	char path[64];				    /* after "/api/" */
	char cookie[40];			    /* the session cookie, "" */
	char csrf[40];				    /* X-CSRF-Token, "" */
	char from[64];				    /* the client address */
	bool cross_origin; /* an Origin that is not this console */
	/* the answer */
	unsigned status;
	pgo_buf_t out;
	char set_cookie[128]; /* Set-Cookie, "" */
	/* embedded: waiting for the worker, or answered by it */
	struct MHD_Connection *conn;
	struct request *next; /* in the worker's queue */
	bool queued, answered;
} request_t;

static void headers(struct MHD_Response *r, const char *ctype)
{
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(
		r, "Content-Security-Policy",
		"default-src 'none'; script-src 'self'; style-src 'self'; "
		"img-src 'self'; connect-src 'self'; base-uri 'none'; "
		"form-action 'self'; frame-ancestors 'none'");
}

static enum MHD_Result send_body(struct MHD_Connection *mc, unsigned status,
				 const char *ctype, const void *body, size_t n,
				 const char *cookie)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		n, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	headers(r, ctype);
	if (cookie && *cookie)
		MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
	rc = MHD_queue_response(mc, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result send_answer(struct MHD_Connection *mc, request_t *q)
{
	if (q->out.oom) {
		static const char oom[] = "{\"error\":\"out of memory\"}";

		return send_body(mc, 503, "application/json", oom,
				 sizeof(oom) - 1, NULL);
	}
	return send_body(mc, q->status, "application/json; charset=utf-8",
			 q->out.data ? q->out.data : "", q->out.len,
			 q->set_cookie);
}

/* The answer is an error. */
static void fail(request_t *q, unsigned status, const char *msg)
{
	q->status = status;
	json_error(&q->out, "%s", msg);
}

static void unplus(char *s)
{
	for (; *s; s++)
		if (*s == '+')
			*s = ' ';
}

/* "application/x-www-form-urlencoded" into name/value pairs, in place. */
static bool parse_form(request_t *q)
{
	char *p = q->body.data;

	while (p && *p) {
		char *amp = strchr(p, '&'), *eq;

		if (amp)
			*amp = '\0';
		if (q->n == PARAMS_MAX)
			return false;
		eq = strchr(p, '=');
		if (eq)
			*eq = '\0';
		unplus(p);
		MHD_http_unescape(p);
		q->name[q->n] = p;
		q->value[q->n] = eq ? eq + 1 : p + strlen(p);
		unplus(q->value[q->n]);
		MHD_http_unescape(q->value[q->n]);
		q->n++;
		p = amp ? amp + 1 : NULL;
	}
	return true;
}

/* GET arguments, already decoded by libmicrohttpd, into body. */
static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind,
				const char *key, const char *value)
{
	request_t *q = cls;

	(void)kind;
	pgo_buf_append(&q->body, key, strlen(key) + 1);
	pgo_buf_append(&q->body, value ? value : "",
		       (value ? strlen(value) : 0) + 1);
	q->n++;
	return q->n < PARAMS_MAX ? MHD_YES : MHD_NO;
}

static void index_args(request_t *q)
{
	char *p = q->body.data;
	int n = q->n;

	q->n = 0;
	for (int i = 0; p && i < n && !q->body.oom; i++) {
		q->name[i] = p;
		p += strlen(p) + 1;
		q->value[i] = p;
		p += strlen(p) + 1;
		q->n++;
	}
}

static const char *param(void *ctx, const char *name)
{
	request_t *q = ctx;

	for (int i = 0; i < q->n; i++)
		if (strcmp(q->name[i], name) == 0)
			return q->value[i];
	return "";
}

static void client_of(struct MHD_Connection *mc, char *out, size_t size)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	snprintf(out, size, "?");
	if (ci && ci->client_addr)
		getnameinfo(ci->client_addr,
			    ci->client_addr->sa_family == AF_INET6
				    ? sizeof(struct sockaddr_in6)
				    : sizeof(struct sockaddr_in),
			    out, (socklen_t)size, NULL, 0, NI_NUMERICHOST);
}

/* A POST from another site (its Origin is not this console) is refused:
 * with SameSite=Strict cookies and the CSRF token, a third guard. */
static bool same_origin(struct MHD_Connection *mc)
{
	const char *origin =
		MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
	const char *host =
		MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Host");

	if (!origin)
		return true; /* not a browser's cross-site request */
	return host && strncmp(origin, "http://", 7) == 0 &&
	       strcmp(origin + 7, host) == 0;
}

/* On a loopback address, every request (pages and API) must name a
 * loopback Host (base/net.h: DNS rebinding); a request without one is no
 * browser's and is answered. */
static bool host_ok(struct MHD_Connection *mc)
{
	const char *host =
		MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Host");

	return !host || pgo_host_is_loopback(host);
}

/* Copies what the answer needs out of the connection; false (and the
 * answer set) when the request is wrong already. */
static bool take_request(struct MHD_Connection *mc, request_t *q,
			 const char *path)
{
	const char *v;

	snprintf(q->path, sizeof(q->path), "%s", path);
	v = MHD_lookup_connection_value(mc, MHD_COOKIE_KIND, COOKIE);
	snprintf(q->cookie, sizeof(q->cookie), "%s", v ? v : "");
	v = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "X-CSRF-Token");
	snprintf(q->csrf, sizeof(q->csrf), "%s", v ? v : "");
	client_of(mc, q->from, sizeof(q->from));
	q->cross_origin = q->post && !same_origin(mc);
	if (q->too_big) {
		fail(q, 413, "request body over 64 kB");
		return false;
	}
	if (q->post ? !parse_form(q)
		    : (MHD_get_connection_values(mc, MHD_GET_ARGUMENT_KIND,
						 copy_arg, q),
		       index_args(q), q->n >= PARAMS_MAX)) {
		fail(q, 400, "too many parameters");
		return false;
	}
	return true;
}

/* A name to log actions with: printable, 1 to 60 characters. */
static bool who_ok(const char *who)
{
	size_t n = strlen(who);

	if (n < 1 || n > 60)
		return false;
	for (const unsigned char *p = (const unsigned char *)who; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static void session_json(pgo_buf_t *b, const pgo_console_t *c,
			 const session_t *s)
{
	pgo_buf_printf(b, "{\"token_configured\":%s,\"writable\":%s",
		       console_token_set(c) ? "true" : "false",
		       s ? "true" : "false");
	if (s) {
		pgo_buf_puts(b, ",\"who\":");
		pgo_buf_json_str(b, s->who);
		pgo_buf_puts(b, ",\"csrf\":");
		pgo_buf_json_str(b, s->csrf);
	}
	if (c->fleet) { /* the pages name the database they read */
		pgo_buf_puts(b, ",\"databases\":[");
		for (int i = 0; i < c->ndb; i++) {
			pgo_buf_puts(b, i ? "," : "");
			pgo_buf_json_str(b, c->dbs[i].name);
		}
		pgo_buf_puts(b, "]");
	}
	pgo_buf_puts(b, "}");
}

/* /api/login, /api/logout, /api/session: the token and the cookie. */
static void on_session(pgo_console_t *c, request_t *q, session_t *s)
{
	q->status = 200;
	if (strcmp(q->path, "session") == 0) {
		session_json(&q->out, c, s);
	} else if (strcmp(q->path, "login") == 0) {
		const char *who = param(q, "who");

		if (!*who)
			who = "operator";
		if (!console_token_set(c)) {
			fail(q, 403,
			     "no console.token is configured: this "
			     "console is read-only");
		} else if (!who_ok(who)) {
			fail(q, 400, "name: 1 to 60 printable characters");
		} else if (c->bad_logins >= LOGINS_MAX &&
			   time(NULL) - c->bad_since < 60) {
			fail(q, 429, "too many wrong tokens: wait a minute");
		} else if (!console_token_ok(c, param(q, "token"))) {
			if (time(NULL) - c->bad_since >= 60) {
				c->bad_since = time(NULL);
				c->bad_logins = 0;
			}
			c->bad_logins++;
			fail(q, 403, "wrong token");
			pgo_log(PGO_LOG_WARN, c->subject,
				"login refused from %s: wrong token", q->from);
		} else if (!(s = console_session_new(c, who, q->from))) {
			fail(q, 503, "no random bytes for a session");
		} else {
			snprintf(q->set_cookie, sizeof(q->set_cookie),
				 COOKIE "=%s; Path=/; HttpOnly; "
					"SameSite=Strict",
				 s->id);
			session_json(&q->out, c, s);
			pgo_log(PGO_LOG_INFO, c->subject,
				"%s logged in from %s: actions unlocked", who,
				q->from);
		}
	} else { /* logout */
		if (s)
			pgo_log(PGO_LOG_INFO, c->subject,
				"%s logged out from %s", s->who, q->from);
		console_session_end(s);
		snprintf(q->set_cookie, sizeof(q->set_cookie),
			 COOKIE "=; Path=/; HttpOnly; SameSite=Strict; "
				"Max-Age=0");
		session_json(&q->out, c, NULL);
	}
}

/* The answer of an /api/ request, from the request alone: it may run on
 * any thread.  Takes the console's lock. */
static void answer(pgo_console_t *c, request_t *q)
{
	const char *path = q->path;
	console_api_fn fn;
	console_req_t r = {.get = param, .ctx = q, .from = q->from};
	bool action = false, session_route;
	session_t *s;

	session_route = strcmp(path, "session") == 0 ||
			strcmp(path, "login") == 0 ||
			strcmp(path, "logout") == 0;
	fn = session_route ? NULL : console_api_find(path, &action);
	if (!session_route && !fn) {
		fail(q, 404, "no such API");
		return;
	}
	/* Reads are GET; actions, login and logout POST. */
	if ((action || (session_route && strcmp(path, "session") != 0)) !=
	    q->post) {
		fail(q, 405,
		     q->post ? "this is read with GET" : "actions need POST");
		return;
	}
	if (q->cross_origin) {
		fail(q, 403, "cross-origin request refused");
		return;
	}
	pthread_mutex_lock(&c->lock);
	console_reload_apply(c);
	s = console_session_find(c, q->cookie);
	if (q->post && strcmp(path, "login") != 0) {
		if (!s)
			fail(q, 403,
			     console_token_set(c)
				     ? "read-only: unlock the console with its "
				       "token to act"
				     : "read-only: no console.token is "
				       "configured");
		else if (strcmp(q->csrf, s->csrf) != 0)
			fail(q, 403, "CSRF check failed: reload the page");
		if (!s || strcmp(q->csrf, s->csrf) != 0) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	}
	if (session_route) {
		on_session(c, q, s);
	} else {
		r.session = s;
		/* All but the overview read one database: a fleet's by the
		 * db parameter. */
		if (strcmp(path, "overview") == 0 ||
		    !(q->status = console_db_pick(c, param(q, "db"), &q->out)))
			q->status = fn(c, &r, &q->out);
	}
	pthread_mutex_unlock(&c->lock);
}

/* --- the embedded console's worker --- */

/* On a relay's metrics address the loop must never wait for PostgreSQL:
 * an /api/ request is suspended (MHD_suspend_connection) and queued for
 * the console's worker thread, which answers it on the console's own
 * connection and resumes it; libmicrohttpd's wake-up descriptor is in the
 * loop's epoll set, so the loop sends the answer on its next turn.  The
 * worker also takes the throughput samples.  At most QUEUE_MAX requests
 * wait; more are answered 503 at once. */
#define QUEUE_MAX 16

/* Tells the endpoint's loop that a resumed request has its answer:
 * libmicrohttpd's own wake-up does not reach a loop that polls its epoll
 * descriptor from outside. */
static void wake(pgo_console_t *c)
{
	uint64_t one = 1;

	if (write(c->wake_fd, &one, sizeof(one)) < 0) {
		/* full (the loop is behind): it wakes anyway */
	}
}

int pgo_console_wake_fd(const pgo_console_t *c)
{
	return c ? c->wake_fd : -1;
}

void pgo_console_woken(pgo_console_t *c)
{
	uint64_t n;

	if (c && read(c->wake_fd, &n, sizeof(n)) < 0) {
		/* nothing to read: a spurious wake-up */
	}
}

static void *worker_main(void *arg)
{
	pgo_console_t *c = arg;
	int64_t next_sample = 0;

	pthread_mutex_lock(&c->qlock);
	while (!c->quit) {
		request_t *q = c->queue;
		struct timespec ts;

		if (q) {
			c->queue = q->next;
			c->queued--;
			pthread_mutex_unlock(&c->qlock);
			answer(c, q);
			pthread_mutex_lock(&c->qlock);
			q->answered = true;
			MHD_resume_connection(q->conn);
			wake(c);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		if ((int64_t)ts.tv_sec >= next_sample) {
			pthread_mutex_unlock(&c->qlock);
			pgo_console_sample(c);
			pthread_mutex_lock(&c->qlock);
			next_sample = (int64_t)ts.tv_sec + SAMPLE_EVERY_S;
			continue;
		}
		ts.tv_sec = (time_t)next_sample;
		ts.tv_nsec = 0;
		pthread_cond_timedwait(&c->qcond, &c->qlock, &ts);
	}
	/* Stopping: whatever still waits is answered 503. */
	while (c->queue) {
		request_t *q = c->queue;

		c->queue = q->next;
		fail(q, 503, "the console is stopping");
		q->answered = true;
		MHD_resume_connection(q->conn);
		wake(c);
	}
	pthread_mutex_unlock(&c->qlock);
	return NULL;
}

/* Queues q for the worker; false when too many wait. */
static bool enqueue(pgo_console_t *c, request_t *q)
{
	request_t **tail;

	pthread_mutex_lock(&c->qlock);
	if (c->queued >= QUEUE_MAX || c->quit) {
		pthread_mutex_unlock(&c->qlock);
		return false;
	}
	for (tail = &c->queue; *tail; tail = &(*tail)->next)
		;
	q->next = NULL;
	q->queued = true;
	*tail = q;
	c->queued++;
	MHD_suspend_connection(q->conn);
	pthread_cond_signal(&c->qcond);
	pthread_mutex_unlock(&c->qlock);
	return true;
}

/* --- the request handler, shared by both modes --- */

static enum MHD_Result serve(pgo_console_t *c, struct MHD_Connection *mc,
			     const char *url, const char *method,
			     const char *upload, size_t *upload_size,
			     void **req_cls)
{
	request_t *q = *req_cls;

	if (!q && c->loopback && !host_ok(mc)) {
		static const char refused[] =
			"{\"error\":\"" PGO_HOST_REFUSED "\"}";

		return send_body(mc, 403, "application/json; charset=utf-8",
				 refused, sizeof(refused) - 1, NULL);
	}
	if (!q) { /* the headers: the body, if any, comes next */
		if (!(q = calloc(1, sizeof(*q))))
			return MHD_NO;
		pgo_buf_init(&q->body);
		pgo_buf_init(&q->out);
		q->conn = mc;
		q->post = strcmp(method, "POST") == 0;
		*req_cls = q;
		return MHD_YES;
	}
	if (q->answered) /* resumed: the worker answered */
		return send_answer(mc, q);
	if (q->queued)
		return MHD_YES;
	if (*upload_size) {
		if (q->body.len + *upload_size > BODY_MAX)
			q->too_big = true;
		else
			pgo_buf_append(&q->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (q->body.oom) {
		fail(q, 503, "out of memory");
		return send_answer(mc, q);
	}
	if (!q->post && strcmp(method, "GET") != 0 &&
	    strcmp(method, "HEAD") != 0) {
		fail(q, 405, "only GET, HEAD and POST");
		return send_answer(mc, q);
	}
	if (strncmp(url, "/api/", 5) == 0) {
		pgo_buf_append(&q->body, "", 1); /* a form ends */
		q->body.len--;
		if (!take_request(mc, q, url + 5))
			return send_answer(mc, q);
		if (!c->embedded) {
			answer(c, q);
			return send_answer(mc, q);
		}
		if (enqueue(c, q))
			return MHD_YES;
		fail(q, 503, "the console is busy: try again");
		return send_answer(mc, q);
	}
	if (q->post) {
		fail(q, 405, "pages are read with GET");
		return send_answer(mc, q);
	}
	if (strcmp(url, "/") == 0)
		url = "/index.html";
	for (const pgo_console_asset_t *a = pgo_console_assets; a->path; a++)
		if (strcmp(a->path, url) == 0)
			return send_body(mc, 200, a->ctype, a->data, a->len,
					 NULL);
	fail(q, 404, "no such page");
	return send_answer(mc, q);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	(void)version;
	return serve(cls, mc, url, method, upload, upload_size, req_cls);
}

static void request_free(void **req_cls)
{
	request_t *q = *req_cls;

	if (q) {
		pgo_buf_free(&q->body);
		pgo_buf_free(&q->out);
		free(q);
		*req_cls = NULL;
	}
}

static void on_done(void *cls, struct MHD_Connection *mc, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)mc;
	(void)toe;
	request_free(req_cls);
}

bool pgo_console_path(const char *url)
{
	if (strncmp(url, "/api/", 5) == 0 || strcmp(url, "/") == 0)
		return true;
	for (const pgo_console_asset_t *a = pgo_console_assets; a->path; a++)
		if (strcmp(a->path, url) == 0)
			return true;
	return false;
}

int pgo_console_mhd(pgo_console_t *c, struct MHD_Connection *mc,
		    const char *url, const char *method, const char *upload,
		    size_t *upload_size, void **req_cls)
{
	return serve(c, mc, url, method, upload, upload_size, req_cls);
}

void pgo_console_mhd_done(void **req_cls)
{
	request_free(req_cls);
}

int console_worker_start(pgo_console_t *c, pgo_error_t *err)
{
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wake_fd < 0)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "console: no eventfd for its thread");
	if (pthread_create(&c->worker, NULL, worker_main, c) != 0)
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "console: cannot start its thread");
	c->worker_started = true;
	return PGO_OK;
}

void console_worker_stop(pgo_console_t *c)
{
	if (!c->worker_started)
		return;
	pthread_mutex_lock(&c->qlock);
	c->quit = true;
	pthread_cond_signal(&c->qcond);
	pthread_mutex_unlock(&c->qlock);
	pthread_join(c->worker, NULL);
	c->worker_started = false;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	pgo_console_t *c = cls;
	char line[256];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	pgo_log(PGO_LOG_DEBUG, c->subject, "http: %s", line);
}

/* "host:port" or "[v6]:port" into its parts; false when malformed. */
static bool split_listen(const char *listen, char *host, size_t hsize,
			 char *port, size_t psize)
{
	const char *colon = strrchr(listen, ':');
	size_t hn;

	if (!colon || !colon[1] || strlen(colon + 1) >= psize)
		return false;
	hn = (size_t)(colon - listen);
	if (listen[0] == '[') {
		if (hn < 2 || listen[hn - 1] != ']')
			return false;
		listen++;
		hn -= 2;
	}
	if (hn == 0 || hn >= hsize)
		return false;
	memcpy(host, listen, hn);
	host[hn] = '\0';
	strcpy(port, colon + 1);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return atoi(port) <= 65535;
}

int console_http_start(pgo_console_t *c, const char *listen, pgo_error_t *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*ai = NULL;
	char host[256], port[8];
	const union MHD_DaemonInfo *info;
	int rc;

	if (!split_listen(listen, host, sizeof(host), port, sizeof(port)))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "console listen \"%s\": expected "
				     "host:port or [v6]:port (e.g. "
				     "127.0.0.1:9188)",
				     listen);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "console listen \"%s\": %s", listen,
				     gai_strerror(rc));
	c->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
			(ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, on_request, c, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_NOTIFY_COMPLETED, on_done, c,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, c, MHD_OPTION_END);
	c->loopback = pgo_addr_is_loopback(ai->ai_addr);
	freeaddrinfo(ai);
	if (!c->mhd)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "console listen \"%s\": cannot listen "
				     "(address taken or not this host's?)",
				     listen);
	info = MHD_get_daemon_info(c->mhd, MHD_DAEMON_INFO_BIND_PORT);
	c->port = info ? info->port : 0;
	return PGO_OK;
}

void console_http_stop(pgo_console_t *c)
{
	if (c->mhd)
		MHD_stop_daemon(c->mhd);
	c->mhd = NULL;
}
