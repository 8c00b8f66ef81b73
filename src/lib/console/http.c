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
#include <sys/socket.h>

#include <microhttpd.h>

#include "console/console_int.h"
#include "base/error.h"
#include "base/log.h"

#define BODY_MAX   (64 * 1024)
#define PARAMS_MAX 16
#define COOKIE	   "pgo_console"

/* One request: its body (POST), decoded into parameters. */
typedef struct request {
	pgo_buf_t body;
	bool too_big;
	int n;
	char *name[PARAMS_MAX], *value[PARAMS_MAX]; /* into body */
	struct MHD_Connection *conn;
	bool post;
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
	if (cookie)
		MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
	rc = MHD_queue_response(mc, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, unsigned status,
				 pgo_buf_t *b, const char *cookie)
{
	if (b->oom) {
		static const char oom[] = "{\"error\":\"out of memory\"}";

		return send_body(mc, 503, "application/json", oom,
				 sizeof(oom) - 1, NULL);
	}
	return send_body(mc, status, "application/json; charset=utf-8",
			 b->data ? b->data : "", b->len, cookie);
}

static enum MHD_Result send_error(struct MHD_Connection *mc, unsigned status,
				  const char *msg)
{
	pgo_buf_t b;
	enum MHD_Result rc;

	pgo_buf_init(&b);
	json_error(&b, "%s", msg);
	rc = send_json(mc, status, &b, NULL);
	pgo_buf_free(&b);
	return rc;
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
		for (char *s = p; *s; s++)
			if (*s == '+')
				*s = ' ';
		MHD_http_unescape(p);
		q->name[q->n] = p;
		q->value[q->n] = eq ? eq + 1 : p + strlen(p);
		for (char *s = q->value[q->n]; *s; s++)
			if (*s == '+')
				*s = ' ';
		MHD_http_unescape(q->value[q->n]);
		q->n++;
		p = amp ? amp + 1 : NULL;
	}
	return true;
}

static const char *param(void *ctx, const char *name)
{
	request_t *q = ctx;
	const char *v;

	if (q->post) {
		for (int i = 0; i < q->n; i++)
			if (strcmp(q->name[i], name) == 0)
				return q->value[i];
		return "";
	}
	v = MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
	return v ? v : "";
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
	pgo_buf_puts(b, "}");
}

/* /api/login, /api/logout, /api/session: the token and the cookie. */
static enum MHD_Result on_session(pgo_console_t *c, struct MHD_Connection *mc,
				  request_t *q, const char *what, session_t *s,
				  const char *from)
{
	char cookie[128];
	pgo_buf_t b;
	enum MHD_Result rc;
	unsigned status = 200;
	const char *set = NULL;

	pgo_buf_init(&b);
	if (strcmp(what, "session") == 0) {
		session_json(&b, c, s);
	} else if (strcmp(what, "login") == 0) {
		const char *who = param(q, "who");

		if (!*who)
			who = "operator";
		if (!console_token_set(c)) {
			status = 403;
			json_error(&b, "no console.token is configured: this "
				       "console is read-only");
		} else if (!who_ok(who)) {
			status = 400;
			json_error(&b, "name: 1 to 60 printable characters");
		} else if (!console_token_ok(c, param(q, "token"))) {
			status = 403;
			json_error(&b, "wrong token");
			pgo_log(PGO_LOG_WARN, c->subject,
				"login refused from %s: wrong token", from);
		} else if (!(s = console_session_new(c, who, from))) {
			status = 503;
			json_error(&b, "no random bytes for a session");
		} else {
			snprintf(cookie, sizeof(cookie),
				 COOKIE "=%s; Path=/; HttpOnly; "
					"SameSite=Strict",
				 s->id);
			set = cookie;
			session_json(&b, c, s);
			pgo_log(PGO_LOG_INFO, c->subject,
				"%s logged in from %s: actions unlocked", who,
				from);
		}
	} else { /* logout */
		if (s)
			pgo_log(PGO_LOG_INFO, c->subject,
				"%s logged out from %s", s->who, from);
		console_session_end(s);
		set = COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0";
		session_json(&b, c, NULL);
	}
	rc = send_json(mc, status, &b, set);
	pgo_buf_free(&b);
	return rc;
}

static enum MHD_Result on_api(pgo_console_t *c, struct MHD_Connection *mc,
			      request_t *q, const char *path)
{
	const char *cookie =
		MHD_lookup_connection_value(mc, MHD_COOKIE_KIND, COOKIE);
	const char *csrf;
	console_api_fn fn;
	console_req_t r = {.get = param, .ctx = q};
	char from[64];
	bool action = false, session_route;
	session_t *s;
	pgo_buf_t b;
	unsigned status;
	enum MHD_Result rc;

	client_of(mc, from, sizeof(from));
	session_route = strcmp(path, "session") == 0 ||
			strcmp(path, "login") == 0 ||
			strcmp(path, "logout") == 0;
	fn = session_route ? NULL : console_api_find(path, &action);
	if (!session_route && !fn)
		return send_error(mc, 404, "no such API");
	if (q->post && q->too_big)
		return send_error(mc, 413, "request body over 64 kB");
	if (q->post && !parse_form(q))
		return send_error(mc, 400, "too many parameters");
	/* Reads are GET; actions, login and logout POST. */
	if ((action || (session_route && strcmp(path, "session") != 0)) !=
	    q->post)
		return send_error(mc, 405,
				  q->post ? "this is read with GET"
					  : "actions need POST");
	if (q->post && !same_origin(mc))
		return send_error(mc, 403, "cross-origin request refused");
	pthread_mutex_lock(&c->lock);
	s = console_session_find(c, cookie);
	if (session_route && strcmp(path, "logout") != 0) {
		rc = on_session(c, mc, q, path, s, from);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	if (q->post) {
		csrf = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						   "X-CSRF-Token");
		if (!s) {
			pthread_mutex_unlock(&c->lock);
			return send_error(
				mc, 403,
				console_token_set(c)
					? "read-only: unlock the console with "
					  "its token to act"
					: "read-only: no console.token is "
					  "configured");
		}
		if (!csrf || strcmp(csrf, s->csrf) != 0) {
			pthread_mutex_unlock(&c->lock);
			return send_error(mc, 403,
					  "CSRF check failed: reload the page");
		}
		if (session_route) { /* logout */
			rc = on_session(c, mc, q, path, s, from);
			pthread_mutex_unlock(&c->lock);
			return rc;
		}
	}
	r.session = s;
	r.from = from;
	pgo_buf_init(&b);
	status = fn(c, &r, &b);
	pthread_mutex_unlock(&c->lock);
	rc = send_json(mc, status, &b, NULL);
	pgo_buf_free(&b);
	return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	pgo_console_t *c = cls;
	request_t *q = *req_cls;

	(void)version;
	if (!q) { /* the headers: the body, if any, comes next */
		if (!(q = calloc(1, sizeof(*q))))
			return MHD_NO;
		pgo_buf_init(&q->body);
		q->conn = mc;
		q->post = strcmp(method, "POST") == 0;
		*req_cls = q;
		return MHD_YES;
	}
	if (*upload_size) {
		if (q->body.len + *upload_size > BODY_MAX)
			q->too_big = true;
		else
			pgo_buf_append(&q->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (q->body.oom)
		return send_error(mc, 503, "out of memory");
	if (!q->post && strcmp(method, "GET") != 0 &&
	    strcmp(method, "HEAD") != 0)
		return send_error(mc, 405, "only GET, HEAD and POST");
	if (strncmp(url, "/api/", 5) == 0)
		return on_api(c, mc, q, url + 5);
	if (q->post)
		return send_error(mc, 405, "pages are read with GET");
	if (strcmp(url, "/") == 0)
		url = "/index.html";
	for (const pgo_console_asset_t *a = pgo_console_assets; a->path; a++)
		if (strcmp(a->path, url) == 0)
			return send_body(mc, 200, a->ctype, a->data, a->len,
					 NULL);
	return send_error(mc, 404, "no such page");
}

static void on_done(void *cls, struct MHD_Connection *mc, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	request_t *q = *req_cls;

	(void)cls;
	(void)mc;
	(void)toe;
	if (q) {
		pgo_buf_free(&q->body);
		free(q);
		*req_cls = NULL;
	}
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
