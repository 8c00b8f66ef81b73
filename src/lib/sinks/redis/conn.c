/*
 * sinks/redis/conn.c — one Redis connection driven by an event loop (see
 * sinks/redis/conn.h).
 *
 * States: DOWN -> CONNECTING (non-blocking TCP connect, trying each
 * address of the host in turn) -> HANDSHAKE (AUTH and SELECT written,
 * their replies awaited) -> UP.  Any failure closes the socket and goes
 * back to DOWN; reconnecting and its backoff are the owner's business.
 * Commands queued before UP stay in the output buffer behind AUTH/SELECT
 * and are written only once both succeeded.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sinks/redis/conn.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/time.h"
#include "pgoutbox.h"

#define DEFAULT_PORT   6379
#define READ_CHUNK     16384
#define READS_PER_CALL 64 /* then yield: at most 1 MiB per pgo_redis_io() */
/* The most elements an array reply may announce.  hiredis 0.14 allocates
 * the element pointers as soon as it reads the header, so a server (or a
 * man in the middle) sending "*1111111111" would make it ask for 8 GB.
 * The largest reply asked for is `consume --count` entries (at most
 * 100,000: inbox/consumer.c), each an array of two. */
#define MAX_ELEMENTS (1 << 20)

/* --- URL --- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decodes s[0..n) into dst (size bytes); false when it does not
 * fit or holds a bad escape. */
static bool pct_decode(char *dst, size_t size, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return false;
			hi = hexval((unsigned char)s[i + 1]);
			lo = hexval((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0)
				return false;
			c = hi * 16 + lo;
			i += 2;
		}
		if (o + 1 >= size)
			return false;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return true;
}

/* The scheme: *rest is what follows it. */
static int url_scheme(const char *url, pgo_redis_url_t *u, const char **rest,
		      pgo_error_t *err)
{
	if (!url || !*url)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL is empty");
	if (strncasecmp(url, "redis://", 8) == 0) {
		*rest = url + 8;
	} else if (strncasecmp(url, "rediss://", 9) == 0) {
		*rest = url + 9;
		u->tls = true;
	} else {
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL must start with redis:// "
				     "or rediss://");
	}
	return PGO_OK;
}

/* The user information of the authority p..auth_end, if any: *host is
 * where the host starts. */
static int url_userinfo(const char *p, const char *auth_end, pgo_redis_url_t *u,
			const char **host, pgo_error_t *err)
{
	const char *at = NULL, *c;

	for (const char *q = p; q < auth_end; q++)
		if (*q == '@')
			at = q;
	if (!at) {
		*host = p;
		return PGO_OK;
	}
	c = memchr(p, ':', (size_t)(at - p));
	if (!c)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL has a user but no "
				     "password (write "
				     "redis://user:password@host or "
				     "redis://:password@host)");
	if (!pct_decode(u->user, sizeof(u->user), p, (size_t)(c - p)) ||
	    !pct_decode(u->password, sizeof(u->password), c + 1,
			(size_t)(at - c - 1)))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL's user or password "
				     "is too long or badly "
				     "percent-encoded");
	*host = at + 1;
	return PGO_OK;
}

/* The port after colon, up to auth_end. */
static int url_port(const char *colon, const char *auth_end, pgo_redis_url_t *u,
		    pgo_error_t *err)
{
	char *end;
	long port = strtol(colon + 1, &end, 10);

	if (end != auth_end || end == colon + 1 || port < 1 || port > 65535)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL's port must be a "
				     "number from 1 to 65535");
	u->port = (int)port;
	return PGO_OK;
}

/* The host (a name, an address or [an IPv6 address]) and the port of
 * host..auth_end. */
static int url_host(const char *host, const char *auth_end, pgo_redis_url_t *u,
		    pgo_error_t *err)
{
	const char *host_end, *colon;
	size_t host_len;

	if (*host == '[') {
		host_end = memchr(host, ']', (size_t)(auth_end - host));
		if (!host_end)
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "the Redis URL has \"[\" without "
					     "\"]\" in its host");
		colon = host_end + 1 < auth_end ? host_end + 1 : NULL;
		if (colon && *colon != ':')
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "the Redis URL has text after "
					     "its IPv6 address");
		host++;
		host_len = (size_t)(host_end - host);
	} else {
		colon = memchr(host, ':', (size_t)(auth_end - host));
		host_len = (size_t)((colon ? colon : auth_end) - host);
	}
	if (host_len >= sizeof(u->host))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL's host name is too long");
	memcpy(u->host, host, host_len);
	u->host[host_len] = '\0';
	if (!u->host[0])
		snprintf(u->host, sizeof(u->host), "localhost");
	return colon ? url_port(colon, auth_end, u, err) : PGO_OK;
}

/* What follows the authority: an optional /db, and neither a query nor a
 * fragment. */
static int url_path(const char *p, pgo_redis_url_t *u, pgo_error_t *err)
{
	if (*p == '/') {
		p++;
		if (*p && *p != '?' && *p != '#') {
			char *end;
			long db;

			errno = 0;
			db = strtol(p, &end, 10);
			if (!isdigit((unsigned char)*p) || errno ||
			    (*end && *end != '?' && *end != '#') || db < 0 ||
			    db > 1000000)
				return pgo_error_set(
					err, PGO_ERR_CONFIG, 0,
					"the Redis URL's path must "
					"be a database number "
					"(/0, /1, ...)");
			u->db = (int)db;
			p = end;
		}
	}
	if (*p == '?')
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL's query parameters are not "
				     "supported (timeouts are the "
				     "sink.redis_* settings)");
	if (*p == '#')
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "the Redis URL must not have a fragment");
	return PGO_OK;
}

int pgo_redis_url_parse(const char *url, pgo_redis_url_t *u, pgo_error_t *err)
{
	const char *p = NULL, *auth_end, *host = NULL;
	int rc;

	memset(u, 0, sizeof(*u));
	u->port = DEFAULT_PORT;
	rc = url_scheme(url, u, &p, err);
	if (rc != PGO_OK)
		return rc;
	auth_end = p + strcspn(p, "/?#");
	rc = url_userinfo(p, auth_end, u, &host, err);
	if (rc == PGO_OK)
		rc = url_host(host, auth_end, u, err);
	if (rc == PGO_OK)
		rc = url_path(auth_end, u, err);
	if (rc != PGO_OK)
		return rc;
	pgo_error_clear(err);
	return PGO_OK;
}

int pgo_redis_url_supported(const pgo_redis_url_t *u, pgo_error_t *err)
{
	if (u->tls)
		return pgo_error_set(
			err, PGO_ERR_CONFIG, 0,
			"rediss:// (TLS) needs hiredis 1.0 or newer with "
			"hiredis_ssl; this pgoutbox is built with hiredis "
			"%d.%d, which has no TLS: use redis:// over a trusted "
			"network or a TLS tunnel (stunnel, spiped)",
			HIREDIS_MAJOR, HIREDIS_MINOR);
	pgo_error_clear(err);
	return PGO_OK;
}

void pgo_redis_url_describe(const pgo_redis_url_t *u, char *buf, size_t size)
{
	bool v6 = strchr(u->host, ':') != NULL;

	snprintf(buf, size, "%s%s%s:%d/%d", v6 ? "[" : "", u->host,
		 v6 ? "]" : "", u->port, u->db);
}

bool pgo_redis_url_mask(const char *url, pgo_buf_t *b)
{
	size_t scheme = strncasecmp(url, "redis://", 8) == 0	? 8
			: strncasecmp(url, "rediss://", 9) == 0 ? 9
								: 0;
	const char *at, *colon;

	if (!scheme)
		return false;
	/* The last '@' anywhere: more than the parser's user info when the
	 * URL is broken, never less (a query or fragment is refused). */
	at = strrchr(url + scheme, '@');
	if (!at) {
		pgo_buf_puts(b, url);
		return true;
	}
	colon = memchr(url + scheme, ':', (size_t)(at - url - scheme));
	/* redis://user:secret@ keeps the user; redis://secret@ (refused by
	 * the parser) may be a password written without its colon. */
	pgo_buf_append(b, url, colon ? (size_t)(colon + 1 - url) : scheme);
	pgo_buf_puts(b, "***");
	pgo_buf_puts(b, at);
	return true;
}

/* --- connection --- */

static void set_err(pgo_redis_t *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_err(pgo_redis_t *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
}

void pgo_redis_init(pgo_redis_t *r, const pgo_redis_url_t *url)
{
	memset(r, 0, sizeof(*r));
	r->url = *url;
	r->fd = -1;
	pgo_buf_init(&r->out);
}

void pgo_redis_close(pgo_redis_t *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	if (r->addrs)
		freeaddrinfo(r->addrs);
	r->addrs = r->trying = NULL;
	if (r->reader)
		redisReaderFree(r->reader);
	r->reader = NULL;
	pgo_buf_free(&r->out);
	r->out_off = 0;
	r->hs_end = 0;
	r->hs_replies = 0;
	r->state = PGO_REDIS_DOWN;
}

/* Closes with a reason; returns PGO_ERR_IO for the caller to pass on. */
static int fail_io(pgo_redis_t *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail_io(pgo_redis_t *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	pgo_redis_close(r);
	return PGO_ERR_IO;
}

/* Starts a connect to r->trying or the addresses after it.  Returns 0, or
 * the errno of the last address that failed at once. */
static int start_next_address(pgo_redis_t *r)
{
	int last = ECONNREFUSED;

	for (; r->trying; r->trying = r->trying->ai_next) {
		struct addrinfo *ai = r->trying;
		int fd = socket(ai->ai_family,
				ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		int one = 1;

		if (fd < 0) {
			last = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
		    errno == EINPROGRESS) {
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
					 sizeof(one));
			(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one,
					 sizeof(one));
			r->fd = fd;
			return 0;
		}
		last = errno;
		close(fd);
	}
	return last;
}

int pgo_redis_append(pgo_redis_t *r, int argc, const char **argv,
		     const size_t *lens)
{
	char *cmd = NULL;
	int n;

	if (r->state == PGO_REDIS_DOWN) {
		set_err(r, "not connected");
		return PGO_ERR_INVALID;
	}
	n = redisFormatCommandArgv(&cmd, argc, argv, lens);
	if (n < 0 || !cmd) {
		set_err(r, "out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_buf_append(&r->out, cmd, (size_t)n);
	redisFreeCommand(cmd);
	if (r->out.oom) {
		set_err(r, "out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

/* hiredis' createArray, refusing a header over MAX_ELEMENTS (NULL makes
 * the reader fail; pgo_redis_next_reply says why). */
static void *bounded_array(const redisReadTask *task, int elements)
{
	pgo_redis_t *r = task->privdata;

	if (elements < 0 || elements > MAX_ELEMENTS) {
		r->refused_elements = elements;
		return NULL;
	}
	return r->make_array(task, elements);
}

/* Gives the new reader r's copy of its builders, createArray bounded. */
static void bound_arrays(pgo_redis_t *r)
{
	r->fn = *r->reader->fn;
	r->make_array = r->fn.createArray;
	r->fn.createArray = bounded_array;
	r->reader->fn = &r->fn;
	r->reader->privdata = r;
	r->refused_elements = 0;
}

int pgo_redis_connect(pgo_redis_t *r, int64_t timeout_ms)
{
	struct addrinfo hints;
	char port[16], where[300];
	int rc;

	pgo_redis_close(r);
	pgo_redis_url_describe(&r->url, where, sizeof(where));
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", r->url.port);
	rc = getaddrinfo(r->url.host, port, &hints, &r->addrs);
	if (rc != 0) {
		r->addrs = NULL;
		return fail_io(r, "cannot resolve %s: %s", r->url.host,
			       gai_strerror(rc));
	}
	r->trying = r->addrs;
	rc = start_next_address(r);
	if (rc != 0)
		return fail_io(r, "connect to %s: %s", where, strerror(rc));
	r->reader = redisReaderCreate();
	if (!r->reader)
		return fail_io(r, "out of memory");
	bound_arrays(r);
	r->state = PGO_REDIS_CONNECTING;
	r->connect_deadline = pgo_now_ms() + timeout_ms;
	/* The handshake goes first; later commands wait behind hs_end. */
	if (r->url.password[0]) {
		/* AUTH [user] password: the ACL form only with a user. */
		const char *argv[3] = {"AUTH"};
		size_t lens[3] = {4};
		int argc = 1;

		if (r->url.user[0]) {
			argv[argc] = r->url.user;
			lens[argc++] = strlen(r->url.user);
		}
		argv[argc] = r->url.password;
		lens[argc++] = strlen(r->url.password);
		if (pgo_redis_append(r, argc, argv, lens) != PGO_OK)
			return fail_io(r, "out of memory");
		r->hs_replies++;
	}
	if (r->url.db != 0) {
		char db[16];
		const char *argv[2] = {"SELECT", db};
		size_t lens[2];

		snprintf(db, sizeof(db), "%d", r->url.db);
		lens[0] = 6;
		lens[1] = strlen(db);
		if (pgo_redis_append(r, 2, argv, lens) != PGO_OK)
			return fail_io(r, "out of memory");
		r->hs_replies++;
	}
	r->hs_end = r->out.len;
	return PGO_OK;
}

/* CONNECTING: has the socket connected?  Moves on to the next address
 * when this one failed. */
static int check_connected(pgo_redis_t *r)
{
	struct pollfd p = {.fd = r->fd, .events = POLLOUT};
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	char where[300];

	if (poll(&p, 1, 0) <= 0)
		return PGO_OK; /* not yet */
	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (soerr == 0) {
		r->state = r->hs_replies ? PGO_REDIS_HANDSHAKE : PGO_REDIS_UP;
		freeaddrinfo(r->addrs);
		r->addrs = r->trying = NULL;
		return PGO_OK;
	}
	close(r->fd);
	r->fd = -1;
	r->trying = r->trying->ai_next;
	if (r->trying && start_next_address(r) == 0)
		return PGO_OK;
	pgo_redis_url_describe(&r->url, where, sizeof(where));
	return fail_io(r, "connect to %s: %s", where, strerror(soerr));
}

/* Writes what may be written: during the handshake only AUTH/SELECT. */
static int flush_out(pgo_redis_t *r)
{
	size_t limit = r->state == PGO_REDIS_UP ? r->out.len : r->hs_end;

	while (r->out_off < limit) {
		ssize_t n = send(r->fd, r->out.data + r->out_off,
				 limit - r->out_off, MSG_NOSIGNAL);

		if (n > 0) {
			r->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return PGO_OK;
		return fail_io(r, "write: %s",
			       n < 0 ? strerror(errno) : "no progress");
	}
	if (r->out_off == r->out.len) {
		/* All written: reuse the buffer from its start. */
		r->out.len = 0;
		r->out_off = 0;
		r->hs_end = 0;
		if (r->out.data)
			r->out.data[0] = '\0';
		if (r->out.cap > 1024 * 1024)
			pgo_buf_free(&r->out);
	}
	return PGO_OK;
}

static int read_in(pgo_redis_t *r)
{
	char buf[READ_CHUNK];

	for (int i = 0; i < READS_PER_CALL; i++) {
		ssize_t n = recv(r->fd, buf, sizeof(buf), 0);

		if (n > 0) {
			if (redisReaderFeed(r->reader, buf, (size_t)n) !=
			    REDIS_OK)
				return fail_io(r, "out of memory");
			if ((size_t)n < sizeof(buf))
				return PGO_OK;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return PGO_OK;
		return fail_io(r, "%s",
			       n == 0 ? "Redis closed the connection"
				      : strerror(errno));
	}
	return PGO_OK;
}

int pgo_redis_io(pgo_redis_t *r)
{
	int rc;

	if (r->state == PGO_REDIS_DOWN) {
		if (!r->err[0])
			set_err(r, "not connected");
		return PGO_ERR_IO;
	}
	if (r->state == PGO_REDIS_CONNECTING) {
		if ((rc = check_connected(r)) != PGO_OK)
			return rc;
		if (r->state == PGO_REDIS_CONNECTING) {
			if (pgo_now_ms() >= r->connect_deadline)
				return fail_io(r, "connect timed out");
			return PGO_OK;
		}
	}
	if (r->state == PGO_REDIS_HANDSHAKE &&
	    pgo_now_ms() >= r->connect_deadline)
		return fail_io(r, "no reply to AUTH/SELECT in time");
	if ((rc = flush_out(r)) != PGO_OK)
		return rc;
	return read_in(r);
}

/* Checks one reply to AUTH or SELECT (and frees it). */
static int handshake_reply(pgo_redis_t *r, redisReply *hs)
{
	int total = (r->url.password[0] ? 1 : 0) + (r->url.db ? 1 : 0);
	bool auth = r->url.password[0] && r->hs_replies == total;
	char msg[200];

	if (hs->type != REDIS_REPLY_ERROR) {
		freeReplyObject(hs);
		if (--r->hs_replies > 0)
			return PGO_OK;
		/* Done: the commands held behind the handshake may go. */
		r->state = PGO_REDIS_UP;
		return flush_out(r);
	}
	snprintf(msg, sizeof(msg), "%.*s", (int)(hs->len < 190 ? hs->len : 190),
		 hs->str);
	freeReplyObject(hs);
	return fail_io(r, "%s refused: %s", auth ? "AUTH" : "SELECT", msg);
}

int pgo_redis_next_reply(pgo_redis_t *r, redisReply **reply)
{
	void *obj = NULL;

	*reply = NULL;
	while (r->state == PGO_REDIS_HANDSHAKE || r->state == PGO_REDIS_UP) {
		if (redisReaderGetReply(r->reader, &obj) != REDIS_OK) {
			if (r->refused_elements)
				return fail_io(r,
					       "protocol error: an array of "
					       "%d elements (at most %d)",
					       r->refused_elements,
					       MAX_ELEMENTS);
			return fail_io(r, "protocol error: %s",
				       r->reader->errstr);
		}
		if (!obj)
			return PGO_OK;
		if (r->state == PGO_REDIS_UP) {
			*reply = obj;
			return PGO_OK;
		}
		if (handshake_reply(r, obj) != PGO_OK)
			return PGO_ERR_IO;
		obj = NULL;
	}
	return PGO_OK;
}

short pgo_redis_events(const pgo_redis_t *r)
{
	switch (r->state) {
	case PGO_REDIS_DOWN: return 0;
	case PGO_REDIS_CONNECTING: return POLLOUT;
	case PGO_REDIS_HANDSHAKE:
		return (short)(POLLIN | (r->out_off < r->hs_end ? POLLOUT : 0));
	case PGO_REDIS_UP:
		return (short)(POLLIN |
			       (r->out_off < r->out.len ? POLLOUT : 0));
	}
	return 0;
}

bool pgo_redis_pending_output(const pgo_redis_t *r)
{
	return r->state != PGO_REDIS_DOWN && r->out_off < r->out.len;
}

bool pgo_redis_reply_unavailable(const redisReply *reply)
{
	static const char *const codes[] = {"LOADING ",	    "BUSY ",
					    "MASTERDOWN ",  "TRYAGAIN ",
					    "CLUSTERDOWN ", "READONLY "};

	if (!reply || reply->type != REDIS_REPLY_ERROR || !reply->str)
		return false;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strncmp(reply->str, codes[i], strlen(codes[i])) == 0)
			return true;
	return false;
}

bool pgo_redis_reply_oom(const redisReply *reply)
{
	return reply && reply->type == REDIS_REPLY_ERROR && reply->str &&
	       strncmp(reply->str, "OOM ", 4) == 0;
}
