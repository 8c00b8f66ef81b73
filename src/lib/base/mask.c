/*
 * base/mask.c — connection strings as they may be shown: `config show`,
 * the reload log lines, any log line naming a connection.
 *
 * libpq decides what a connection string holds: PQconninfoParse() reads a
 * conninfo string or a postgres:// URL exactly as a connection would and
 * marks the secret options (password, sslpassword, and whatever a later
 * libpq adds) with dispchar "*".  The text shown is rebuilt from those
 * options, in libpq's order of options and in the form it was written in
 * (a URL stays a URL), each secret as "***".  Text libpq cannot parse is
 * hidden whole.  Other kinds of URL are not libpq's: their maskers sit
 * next to their parsers (sinks/redis/conn.c, sinks/nats/message.c) and
 * their keys name them (pgo_conf_key_t.mask).
 */
#include <stdbool.h>
#include <string.h>

#include <libpq-fe.h>

#include "base/mask.h"
#include "base/buf.h"

#define MASK	       PGO_MASK
#define MASK_DEPTH_MAX 2 /* a dbname holding a connection string, nested */

static bool mask_into(pgo_buf_t *b, const char *conninfo, int depth);

static bool is_secret(const PQconninfoOption *o)
{
	return o->dispchar && o->dispchar[0] == '*';
}

/* Length of the URL scheme libpq recognises at the start of s, or 0. */
static size_t url_scheme(const char *s)
{
	static const char *const schemes[] = {"postgresql://", "postgres://"};

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(s, schemes[i], strlen(schemes[i])) == 0)
			return strlen(schemes[i]);
	return 0;
}

/* What libpq would take for a connection string in a dbname. */
static bool holds_conninfo(const char *s)
{
	return url_scheme(s) > 0 || strchr(s, '=') != NULL;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* Appends s percent-encoded: libpq decodes every part of a URL. */
static void put_pct(pgo_buf_t *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

		if (unreserved(c))
			pgo_buf_append(b, s, 1);
		else
			pgo_buf_append(b, esc, 3);
	}
}

/* Appends s as a conninfo value, quoted when it must be. */
static void put_quoted(pgo_buf_t *b, const char *s)
{
	if (*s && !strpbrk(s, " \t\n\r\f\v'\\")) {
		pgo_buf_puts(b, s);
		return;
	}
	pgo_buf_puts(b, "'");
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			pgo_buf_puts(b, "\\");
		pgo_buf_append(b, s, 1);
	}
	pgo_buf_puts(b, "'");
}

/* Appends the value of o as it may be shown, percent-encoded for a URL or
 * quoted for conninfo.  A dbname holding a connection string of its own
 * (which libpq expands) is masked too.  False when it must be hidden. */
static bool put_value(pgo_buf_t *b, const PQconninfoOption *o, bool url,
		      int depth)
{
	pgo_buf_t inner;
	bool ok;

	if (is_secret(o)) {
		pgo_buf_puts(b, MASK);
		return true;
	}
	if (strcmp(o->keyword, "dbname") != 0 || !holds_conninfo(o->val)) {
		(url ? put_pct : put_quoted)(b, o->val);
		return true;
	}
	pgo_buf_init(&inner);
	pgo_buf_puts(&inner, "");
	ok = mask_into(&inner, o->val, depth + 1) && !inner.oom;
	if (ok)
		(url ? put_pct : put_quoted)(b, inner.data);
	pgo_buf_free(&inner);
	return ok;
}

static const PQconninfoOption *option(const PQconninfoOption *opts,
				      const char *keyword)
{
	for (; opts->keyword; opts++)
		if (strcmp(opts->keyword, keyword) == 0)
			return opts;
	return NULL;
}

/* Whether host (and port) lists can be written as host[:port],... in the
 * URL's authority: plain names and IPv6 addresses, a port for each host or
 * none.  Anything else goes into the query (?host=...&port=...). */
static bool authority_fits(const char *host, const char *port)
{
	size_t hosts = 1, ports = 1;

	for (const char *h = host; *h; h++)
		hosts += *h == ',';
	for (const char *p = port ? port : ""; *p; p++) {
		if (*p != ',' && (*p < '0' || *p > '9'))
			return false;
		ports += *p == ',';
	}
	if (port && ports != hosts)
		return false;
	/* "h" reads as no port at all, not an empty one. */
	if (port && !*port)
		return false;
	for (const char *h = host; *h; h++)
		if (!unreserved((unsigned char)*h) && *h != ',' && *h != ':')
			return false;
	/* Without a port for each, a list of hosts goes into the query:
	 * libpq reads "[a,::1]" or "[a,b]" as one host with no port, and
	 * "a,[::1]" or "a,b" as two with an empty port each, so the
	 * authority cannot say which it read (tests/fuzz/fuzz_mask found
	 * them); nor can it hold an empty host (",a", "a,,b", "a,"). */
	if (hosts > 1 && !port)
		return false;
	return *host && *host != ',' && !strstr(host, ",,") &&
	       host[strlen(host) - 1] != ',';
}

/* host "a,b" + port "1,2" -> "a:1,b:2"; IPv6 addresses in brackets. */
static void put_authority(pgo_buf_t *b, const char *host, const char *port)
{
	while (*host) {
		size_t hn = strcspn(host, ","),
		       pn = port ? strcspn(port, ",") : 0;
		bool v6 = memchr(host, ':', hn) != NULL;

		pgo_buf_puts(b, v6 ? "[" : "");
		pgo_buf_append(b, host, hn);
		pgo_buf_puts(b, v6 ? "]" : "");
		if (pn) {
			pgo_buf_puts(b, ":");
			pgo_buf_append(b, port, pn);
		}
		host += hn;
		if (port)
			port += pn + (port[pn] == ',');
		if (*host == ',')
			pgo_buf_append(b, host++, 1);
	}
}

/* A URL that libpq read as something its writer cannot have meant: an '@'
 * in a host or the database name, or a port that is not a number, come
 * from a password holding an unescaped '@', '/' or '?'.  libpq will not
 * connect with it either; shown, it would show (part of) that password. */
static bool url_misread(const PQconninfoOption *opts)
{
	const PQconninfoOption *host = option(opts, "host"),
			       *port = option(opts, "port"),
			       *db = option(opts, "dbname");

	if ((host && host->val && strchr(host->val, '@')) ||
	    (db && db->val && strchr(db->val, '@')))
		return true;
	for (const char *p = port && port->val ? port->val : ""; *p; p++)
		if (*p != ',' && (*p < '0' || *p > '9'))
			return true;
	return false;
}

/* postgresql://[user[:***]@][host[:port],...][/dbname][?keyword=value&...]
 */
static bool put_url(pgo_buf_t *b, const char *scheme, size_t scheme_len,
		    const PQconninfoOption *opts, int depth)
{
	const PQconninfoOption *user = option(opts, "user"),
			       *password = option(opts, "password"),
			       *host = option(opts, "host"),
			       *port = option(opts, "port"),
			       *db = option(opts, "dbname");
	bool in_authority, user_in_authority, db_in_path, ok = true;
	char sep = '?';

	if (!user || !password || !host || !port || !db || url_misread(opts))
		return false;
	in_authority = host->val && authority_fits(host->val, port->val);
	/* libpq reads "//@h" as no user and "/" as no database, not empty
	 * ones (tests/fuzz/fuzz_mask found "?user="): those go into the
	 * query. */
	user_in_authority = user->val && *user->val;
	db_in_path = db->val && *db->val;
	pgo_buf_append(b, scheme, scheme_len);
	if (user_in_authority || password->val) {
		if (user_in_authority)
			put_pct(b, user->val);
		if (password->val) {
			pgo_buf_puts(b, ":");
			ok = put_value(b, password, true, depth);
		}
		pgo_buf_puts(b, "@");
	}
	if (in_authority)
		put_authority(b, host->val, port->val);
	if (db_in_path) {
		pgo_buf_puts(b, "/");
		ok = ok && put_value(b, db, true, depth);
	}
	for (const PQconninfoOption *o = opts; ok && o->keyword; o++) {
		if (!o->val || o == password ||
		    (o == user && user_in_authority) ||
		    (o == db && db_in_path) ||
		    (in_authority && (o == host || o == port)))
			continue;
		pgo_buf_append(b, &sep, 1);
		sep = '&';
		pgo_buf_puts(b, o->keyword);
		pgo_buf_puts(b, "=");
		ok = put_value(b, o, true, depth);
	}
	return ok;
}

/* keyword=value keyword='a value' ... */
static bool put_conninfo(pgo_buf_t *b, const PQconninfoOption *opts, int depth)
{
	bool first = true, ok = true;

	for (const PQconninfoOption *o = opts; ok && o->keyword; o++) {
		if (!o->val)
			continue;
		pgo_buf_puts(b, first ? "" : " ");
		first = false;
		pgo_buf_puts(b, o->keyword);
		pgo_buf_puts(b, "=");
		ok = put_value(b, o, false, depth);
	}
	return ok;
}

static bool mask_into(pgo_buf_t *b, const char *conninfo, int depth)
{
	char *errmsg = NULL;
	PQconninfoOption *opts;
	size_t scheme = url_scheme(conninfo);
	bool ok;

	if (depth > MASK_DEPTH_MAX)
		return false;
	opts = PQconninfoParse(conninfo, &errmsg);
	PQfreemem(errmsg);
	if (!opts) /* unparseable, or out of memory */
		return false;
	ok = scheme ? put_url(b, conninfo, scheme, opts, depth)
		    : put_conninfo(b, opts, depth);
	PQconninfoFree(opts);
	return ok;
}

bool pgo_conninfo_mask(const char *conninfo, pgo_buf_t *b)
{
	size_t len = b->len;

	if (mask_into(b, conninfo, 0) && !b->oom)
		return true;
	b->len = len; /* hide all rather than risk a leak */
	if (b->data)
		b->data[len] = '\0';
	pgo_buf_puts(b, MASK);
	return false;
}

const char *pgo_mask_secret(const char *value, pgo_mask_fn mask, pgo_buf_t *b)
{
	pgo_buf_reset(b);
	pgo_buf_puts(b, "");
	if (!mask || !mask(value, b))
		(void)pgo_conninfo_mask(value, b);
	/* Out of memory: hide all rather than risk a leak. */
	return b->oom ? MASK : b->data;
}
