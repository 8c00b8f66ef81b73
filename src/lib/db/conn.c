/*
 * conn.c — one non-blocking PostgreSQL connection as an explicit state
 * machine: connect with PQconnectStartParams/PQconnectPoll, run a setup
 * round (session timeouts, LISTEN, prepared statements, schema check, the
 * owner's refusal) in pipeline mode, then carry the owner's rounds.
 * Through a transaction pooler a session is not ours: the setup keeps
 * only its checks, statements go unnamed and each round carries the
 * settings for its own transaction.  Nothing here blocks; a lost
 * server sends the connection to DOWN with an exponential backoff.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include "db/conn.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "db/schema.h"
#include "pgoutbox.h"

#define BACKOFF_MIN_MS 100

void pgo_conn_init(pgo_conn_t *c, const pgo_conf_t *conf,
		   const pgo_conn_setup_t *setup)
{
	memset(c, 0, sizeof(*c));
	c->conf = conf;
	c->setup = setup;
	c->state = PGO_CONN_DOWN;
	c->backoff = BACKOFF_MIN_MS;
}

void pgo_conn_round_clear(pgo_conn_t *c)
{
	for (int i = 0; i < PGO_ROUND_MAX; i++) {
		PQclear(c->round.res[i]);
		c->round.res[i] = NULL;
	}
	c->round.nq = 0;
	c->round.hidden = 0;
	c->round.got = 0;
	c->round.failed = false;
	c->round.sqlstate[0] = '\0';
	c->round.err[0] = '\0';
}

void pgo_conn_close(pgo_conn_t *c)
{
	pgo_conn_round_clear(c);
	if (c->pg)
		PQfinish(c->pg);
	c->pg = NULL;
	c->state = PGO_CONN_DOWN;
	c->need_flush = false;
}

/* Whether some PG* variable may name the server libpq connects to when
 * database.url is empty. */
static bool pg_env_set(void)
{
	static const char *const vars[] = {"PGHOST",	 "PGHOSTADDR", "PGPORT",
					   "PGDATABASE", "PGSERVICE",  NULL};

	for (int i = 0; vars[i]; i++)
		if (getenv(vars[i]) && *getenv(vars[i]))
			return true;
	return false;
}

/* Where the dry run of libpq's checks connects to: a socket directory
 * that does not exist, so that no packet leaves. */
#define DRY_HOST "/nonexistent/pgoutbox-settings-check"

/* Whether the dry run dry ended on something else than the missing
 * socket that settings libpq accepts end on (err set then). */
static int dry_refused(PGconn *dry, const char *port, pgo_error_t *err)
{
	const char *const keys[] = {"host", "port", NULL};
	const char *const vals[] = {DRY_HOST, port, NULL};
	PGconn *base;
	int rc = PGO_OK;

	if (!dry || PQstatus(dry) != CONNECTION_BAD)
		return PGO_OK; /* out of memory, or connecting after all */
	/* The same socket with nothing else set fails the same way, word
	 * for word, at the socket (unless a PG* variable is wrong). */
	base = PQconnectStartParams(keys, vals, 0);
	if (base && (strcmp(PQerrorMessage(base), PQerrorMessage(dry)) != 0 ||
		     !strstr(PQerrorMessage(base), DRY_HOST)))
		rc = pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s",
				   pgo_pq_msg(dry, NULL));
	PQfinish(base);
	return rc;
}

int pgo_conn_check_url(const char *url, pgo_error_t *err)
{
	const char *keys[48], *vals[48];
	char *errmsg = NULL;
	PQconninfoOption *opts;
	PGconn *dry;
	int n = 0, rc;
	bool conninfo;

	if (!url)
		url = "";
	/* As libpq's expand_dbname: a URL or key=value pairs, else the name
	 * of a database. */
	conninfo = strncmp(url, "postgresql://", 13) == 0 ||
		   strncmp(url, "postgres://", 11) == 0 || strchr(url, '=');

	/* Syntax and keywords: libpq's parser. */
	opts = PQconninfoParse(conninfo ? url : "", &errmsg);
	if (!opts) {
		rc = PGO_OK;
		/* No message: out of memory, not known to be wrong. */
		if (errmsg) {
			errmsg[strcspn(errmsg, "\n")] = '\0';
			rc = pgo_error_set(err, PGO_ERR_CONFIG, 0, "%s",
					   errmsg);
		}
		PQfreemem(errmsg);
		return rc;
	}
	/* The values (sslmode, integers, services...): libpq checks them
	 * when a connection starts, before the network.  Start one with the
	 * same settings towards a socket that does not exist: libpq got as
	 * far as that socket, or names what it refuses. */
	if (!conninfo && *url) {
		keys[n] = "dbname";
		vals[n++] = url;
	}
	for (PQconninfoOption *o = opts; o->keyword && n < 44; o++) {
		if (!o->val || strcmp(o->keyword, "host") == 0 ||
		    strcmp(o->keyword, "hostaddr") == 0 ||
		    strcmp(o->keyword, "port") == 0)
			continue;
		keys[n] = o->keyword;
		vals[n++] = o->val;
	}
	keys[n] = "host";
	vals[n++] = DRY_HOST;
	/* One host, so one port (a list of them is checked with the hosts,
	 * at the real connection). */
	keys[n] = "port";
	vals[n++] = "5432";
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "port") == 0 && o->val && *o->val &&
		    !strchr(o->val, ','))
			vals[n - 1] = o->val;
	keys[n] = NULL;
	vals[n] = NULL;
	dry = PQconnectStartParams(keys, vals, 0);
	rc = dry_refused(dry, vals[n - 1], err);
	PQconninfoFree(opts);
	PQfinish(dry);
	return rc;
}

int pgo_conn_check_settings(const pgo_conf_t *conf, pgo_error_t *err)
{
	return pgo_conn_check_url(pgo_conf_values(conf)->db_url, err);
}

#define FIX_URL "fix database.url (--db, PGOUTBOX_DATABASE_URL)"

/* Failures no retry fixes, by what the server or libpq said when the
 * connection was refused.  libpq gives no SQLSTATE for a failed
 * connection, so its words, which are the server's (in English unless
 * the server's lc_messages says otherwise). */
static const struct refusal {
	const char *said;  /* in the message */
	const char *said2; /* and this too (NULL: no more) */
	const char *what;  /* what to do */
} refusals[] = {
	/* 3D000 and 28000: a database or role that does not exist. */
	{"database \"", "\" does not exist", FIX_URL ", or create it"},
	{"role \"", "\" does not exist", FIX_URL ", or create it"},
	/* 28P01 and 28000: password, peer, ident, ldap... */
	{"authentication failed for user", NULL,
	 FIX_URL ": the user or password (or ~/.pgpass, pg_hba.conf)"},
	{"no pg_hba.conf entry for", NULL,
	 "allow this user, database and host in the server's pg_hba.conf, "
	 "or " FIX_URL},
	{"pg_hba.conf rejects connection", NULL,
	 "allow this user, database and host in the server's pg_hba.conf, "
	 "or " FIX_URL},
	{"is not permitted to log in", NULL,
	 "ALTER ROLE ... LOGIN, or " FIX_URL " to use another role"},
	/* libpq, on a value it reads only when it connects. */
	{"invalid integer value", NULL, FIX_URL},
	/* libpq: the server asks for a password and none is given. */
	{"no password supplied", NULL,
	 "give the password in database.url, database.url_file (--db-file), "
	 "PGPASSWORD or ~/.pgpass"},
};

int pgo_conn_url_refusal(const char *url, const char *why, bool check_url,
			 pgo_error_t *err)
{
	bool configured = (url && *url) || pg_env_set();
	pgo_error_t bad;

	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *r = &refusals[i];

		if (strstr(why, r->said) &&
		    (!r->said2 || strstr(why, r->said2)))
			return pgo_error_set(err, PGO_ERR_CONFIG, 0,
					     "cannot connect: %s; %s", why,
					     r->what);
	}
	if (check_url && pgo_conn_check_url(url, &bad) != PGO_OK)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "invalid connection settings: %s; " FIX_URL
				     ": a libpq connection string or "
				     "postgresql:// URL",
				     bad.msg);
	if (!configured)
		return pgo_error_set(
			err, PGO_ERR_CONFIG, 0,
			"no database is configured: set database.url in the "
			"configuration, --db, PGOUTBOX_DATABASE_URL or "
			"DATABASE_URL (or PGHOST, PGPORT, PGDATABASE, "
			"PGSERVICE); the default server says: %s",
			why);
	return PGO_OK;
}

int pgo_conn_start_refusal(const pgo_conf_t *conf, const char *why,
			   bool check_url, pgo_error_t *err)
{
	return pgo_conn_url_refusal(pgo_conf_values(conf)->db_url, why,
				    check_url, err);
}

/* A first connection's failure that no retry can fix (see
 * pgo_conn_start_refusal()): true with c->fatal set, and the owner stops
 * at the next step().  Once a session came up, every failure is an
 * outage to wait out, a refused password too: it may be changing under
 * a running relay (a rotation), which should wait for the fix rather
 * than die at the first attempt. */
static bool refuse_start(pgo_conn_t *c, const char *why, bool at_kick)
{
	if (c->ever_connected ||
	    pgo_conn_start_refusal(c->conf, why, at_kick, &c->fatal) == PGO_OK)
		return false;
	c->refused = true;
	return true;
}

/* How long after its last line an outage begun at since is summed up
 * again. */
static int64_t rewarn_after(int64_t since, int64_t now)
{
	return now - since < PGO_MINUTES(1) ? PGO_CONN_REWARN_FIRST_MS
					    : PGO_CONN_REWARN_MS;
}

void pgo_outage_failed(pgo_outage_t *o, const char *subject, bool lost,
		       const char *why)
{
	int64_t now = pgo_now_ms();

	if (!o->since || (o->last_up > o->last_fail &&
			  now - o->last_up >= PGO_CONN_QUIET_MS)) {
		/* A new outage: the connections had stayed up (or never
		 * failed before). */
		pgo_log(PGO_LOG_WARN, subject, "%s: %s; retrying with backoff",
			lost ? "connection lost" : "cannot connect", why);
		*o = (pgo_outage_t){.since = now, .warned = now};
	} else if (now - o->warned >= rewarn_after(o->since, now)) {
		o->fails++;
		if (o->ups)
			pgo_log(PGO_LOG_WARN, subject,
				"connections keep failing (for %lld s: %d "
				"lost, %d reconnected in the last %lld s): %s",
				(long long)((now - o->since) / 1000), o->fails,
				o->ups, (long long)((now - o->warned) / 1000),
				why);
		else
			pgo_log(PGO_LOG_WARN, subject,
				"still cannot connect (for %lld s, %d "
				"attempts in the last %lld s): %s",
				(long long)((now - o->since) / 1000), o->fails,
				(long long)((now - o->warned) / 1000), why);
		o->warned = now;
		o->fails = o->ups = 0;
		o->up_said = false;
	} else {
		o->fails++;
		pgo_log(PGO_LOG_DEBUG, subject, "%s: %s",
			lost ? "connection lost" : "cannot connect", why);
	}
	o->last_fail = now;
}

void pgo_outage_up(pgo_outage_t *o, const char *subject, const char *what)
{
	o->last_up = pgo_now_ms();
	if (!what)
		return;
	o->ups++;
	pgo_log(o->up_said ? PGO_LOG_DEBUG : PGO_LOG_INFO, subject, "%s", what);
	o->up_said = true;
}

bool pgo_outage_on(const pgo_outage_t *o)
{
	int64_t now = pgo_now_ms();

	return o->since && (o->last_up <= o->last_fail ||
			    now - o->last_up < PGO_CONN_QUIET_MS);
}

pgo_outage_t *pgo_outage_of(const char *subject)
{
	/* A process runs a few subjects (a relay's connections, its
	 * metrics): more share the last. */
	static struct {
		char subject[64];
		pgo_outage_t o;
	} all[8];
	int i;

	for (i = 0; i < 7 && all[i].subject[0]; i++)
		if (strncmp(all[i].subject, subject, 63) == 0)
			break;
	if (!all[i].subject[0])
		snprintf(all[i].subject, sizeof(all[i].subject), "%s", subject);
	return &all[i].o;
}

void pgo_conn_drop(pgo_conn_t *c, const char *why)
{
	const struct pgo_conf_values *v = pgo_conf_values(c->conf);
	int64_t now = pgo_now_ms();

	/* pgo_outage_t's rule; a session that never came up was not lost. */
	pgo_outage_failed(pgo_outage_of(c->setup->subject), c->setup->subject,
			  c->ever_connected, why);
	snprintf(c->last_err, sizeof(c->last_err), "%s", why);
	pgo_conn_close(c);
	c->retry_at = now + c->backoff;
	c->backoff *= 2;
	if (c->backoff > v->reconnect_max)
		c->backoff = v->reconnect_max;
}

void pgo_conn_params_url(const char *db_url, int64_t connect_timeout_ms,
			 const char *app_name, const char *keys[PGO_CONN_KEYS],
			 const char *vals[PGO_CONN_KEYS], char timeout[24])
{
	static const char *const names[] = {"connect_timeout",
					    "keepalives",
					    "keepalives_idle",
					    "keepalives_interval",
					    "keepalives_count",
					    "tcp_user_timeout",
					    "dbname",
					    "application_name",
					    NULL};
	int i = 0;

	for (; names[i]; i++)
		keys[i] = names[i];
	keys[i] = NULL;
	snprintf(timeout, 24, "%lld",
		 (long long)(connect_timeout_ms + 999) / 1000);
	/* Defaults come before dbname so that a URL can override them;
	 * application_name comes after so that status can find relays.
	 * Keepalives notice an idle connection whose server vanished in
	 * 10 + 3 x 5 s; tcp_user_timeout one whose bytes sent go
	 * unacknowledged as long. */
	vals[0] = timeout;
	vals[1] = "1";
	vals[2] = PGO_CONN_KEEPALIVES_IDLE;
	vals[3] = PGO_CONN_KEEPALIVES_INTERVAL;
	vals[4] = PGO_CONN_KEEPALIVES_COUNT;
	vals[5] = PGO_CONN_TCP_USER_TIMEOUT;
	vals[6] = db_url && *db_url ? db_url : NULL;
	vals[7] = app_name;
	vals[8] = NULL;
	if (!vals[6]) {
		keys[6] = "application_name";
		vals[6] = app_name;
		keys[7] = NULL;
		vals[7] = NULL;
	}
}

void pgo_conn_params(const pgo_conf_t *conf, const char *app_name,
		     const char *keys[PGO_CONN_KEYS],
		     const char *vals[PGO_CONN_KEYS], char timeout[24])
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);

	pgo_conn_params_url(v->db_url, v->connect_timeout, app_name, keys, vals,
			    timeout);
}

int pgo_conn_params_resolved(const pgo_conf_t *conf, const char *app_name,
			     const struct pgo_resolved *resolved,
			     const char *keys[PGO_CONN_KEYS],
			     const char *vals[PGO_CONN_KEYS], char timeout[24])
{
	int n = 0;

	pgo_conn_params(conf, app_name, keys, vals, timeout);
	while (keys[n])
		n++;
	return pgo_resolved_params(resolved, keys, vals, n);
}

/* Item i of a libpq comma list (a list of one: that one for every i). */
static const char *list_item(const char *list, int i, char *buf, size_t len)
{
	const char *p = list;

	if (!strchr(list, ','))
		return list;
	for (; i > 0 && p; i--) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	snprintf(buf, len, "%.*s", p ? (int)strcspn(p, ",") : 0, p ? p : "");
	return buf;
}

static int list_len(const char *list)
{
	int n = list && *list ? 1 : 0;

	for (; list && *list; list++)
		n += *list == ',';
	return n;
}

static const char *option_of(const PQconninfoOption *o, const char *key,
			     const char *env)
{
	for (; o && o->keyword; o++)
		if (strcmp(o->keyword, key) == 0 && o->val && *o->val)
			return o->val;
	return getenv(env);
}

/* The hosts of a connection's settings (url's, else the PG*
 * variables): host, hostaddr and port as libpq's comma lists (borrowed
 * from *opts: PQconninfoFree it), and how many hosts they name. */
static int host_lists(const char *url, PQconninfoOption **opts,
		      const char **host, const char **addr, const char **port)
{
	*opts = url && *url ? PQconninfoParse(url, NULL) : NULL;
	*host = option_of(*opts, "host", "PGHOST");
	*addr = option_of(*opts, "hostaddr", "PGHOSTADDR");
	*port = option_of(*opts, "port", "PGPORT");
	return list_len(*host) > list_len(*addr) ? list_len(*host)
						 : list_len(*addr);
}

/* Whether host h needs no name lookup: a socket directory, an abstract
 * socket, a numeric address, or libpq's default. */
static bool host_literal(const char *h)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return !*h || h[0] == '/' || h[0] == '@' ||
	       inet_pton(AF_INET, h, buf) == 1 ||
	       inet_pton(AF_INET6, h, buf) == 1;
}

/* Appends item to the comma list *list (of *len bytes; first: none
 * yet, an empty item being one too); false without memory. */
static bool list_add(char **list, size_t *len, const char *item, bool first)
{
	size_t n = strlen(item);
	char *grown = realloc(*list, *len + n + 2);

	if (!grown)
		return false;
	if (!first)
		grown[(*len)++] = ',';
	memcpy(grown + *len, item, n + 1);
	*len += n;
	*list = grown;
	return true;
}

void pgo_resolved_free(pgo_resolved_t *r)
{
	if (!r)
		return;
	free(r->host);
	free(r->hostaddr);
	free(r->port);
	free(r);
}

bool pgo_resolved_same(const pgo_resolved_t *a, const pgo_resolved_t *b)
{
	return a && b && strcmp(a->host, b->host) == 0 &&
	       strcmp(a->hostaddr, b->hostaddr) == 0 && !a->port == !b->port &&
	       (!a->port || !strcmp(a->port, b->port));
}

/* The numeric addresses of name h, at most max of them, into addrs
 * (INET6_ADDRSTRLEN each); how many, 0 with why set. */
#define RESOLVE_MAX 8
static int lookup(const char *h, char addrs[][INET6_ADDRSTRLEN], int max,
		  char *why, size_t why_len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM},
			*res = NULL;
	int rc = getaddrinfo(h, NULL, &hints, &res), n = 0;

	if (rc != 0) {
		snprintf(why, why_len,
			 "could not translate host name \"%s\" to address: %s",
			 h, gai_strerror(rc));
		return 0;
	}
	for (struct addrinfo *a = res; a && n < max; a = a->ai_next) {
		bool dup = false;

		if (getnameinfo(a->ai_addr, a->ai_addrlen, addrs[n],
				INET6_ADDRSTRLEN, NULL, 0, NI_NUMERICHOST) != 0)
			continue;
		for (int k = 0; k < n && !dup; k++)
			dup = strcmp(addrs[k], addrs[n]) == 0;
		if (!dup)
			n++;
	}
	freeaddrinfo(res);
	if (!n)
		snprintf(why, why_len, "host name \"%s\" has no address", h);
	return n;
}

int pgo_conn_resolve(const char *url, pgo_resolved_t **out, char *why,
		     size_t why_len)
{
	PQconninfoOption *opts;
	const char *host, *addr, *port;
	char hbuf[256], pbuf[16];
	char addrs[RESOLVE_MAX][INET6_ADDRSTRLEN];
	size_t lh = 0, la = 0, lp = 0;
	int n, names = 0, found = 0;
	bool ports, ok = true;
	pgo_resolved_t *r;

	*out = NULL;
	n = host_lists(url, &opts, &host, &addr, &port);
	if ((addr && *addr) || !host || !*host) {
		PQconninfoFree(opts); /* hostaddr given, or the default */
		return PGO_OK;
	}
	r = calloc(1, sizeof(*r));
	ports = port && strchr(port, ',');
	for (int i = 0; r && ok && i < n; i++) {
		const char *h = list_item(host, i, hbuf, sizeof(hbuf));
		const char *p =
			ports ? list_item(port, i, pbuf, sizeof(pbuf)) : NULL;
		int m = 0;

		if (!host_literal(h)) {
			names++;
			m = lookup(h, addrs, RESOLVE_MAX, why, why_len);
			found += m > 0;
		}
		/* Each address its own item of the lists, as libpq tries
		 * them in turn; a host without one left to libpq. */
		for (int k = 0; ok && k < (m ? m : 1); k++) {
			bool first = !i && !k;

			ok = list_add(&r->host, &lh, h, first) &&
			     list_add(&r->hostaddr, &la, m ? addrs[k] : "",
				      first) &&
			     (!p || list_add(&r->port, &lp, p, first));
		}
	}
	PQconninfoFree(opts);
	if (!r || !ok) {
		pgo_resolved_free(r);
		snprintf(why, why_len, "out of memory");
		return PGO_ERR_NOMEM;
	}
	if (!names || !found) {
		pgo_resolved_free(r); /* nothing to look up, or no luck */
		return names ? PGO_ERR_CONNECT : PGO_OK;
	}
	*out = r;
	return PGO_OK;
}

int pgo_resolved_params(const pgo_resolved_t *r, const char **keys,
			const char **vals, int n)
{
	if (!r)
		return n;
	keys[n] = "host";
	vals[n++] = r->host;
	keys[n] = "hostaddr";
	vals[n++] = r->hostaddr;
	if (r->port) {
		keys[n] = "port";
		vals[n++] = r->port;
	}
	keys[n] = vals[n] = NULL;
	return n;
}

void pgo_conn_kick(pgo_conn_t *c, int64_t now)
{
	char timeout[24];
	const char *keys[PGO_CONN_KEYS], *vals[PGO_CONN_KEYS];

	const struct pgo_conf_values *v = pgo_conf_values(c->conf);
	PQconninfoOption *opts;
	const char *host, *addr, *port;

	if (c->state != PGO_CONN_DOWN || now < c->retry_at || c->refused)
		return;
	/* Names looked up beforehand, in a thread: libpq resolves nothing
	 * here. */
	pgo_conn_params_resolved(c->conf, c->setup->app_name,
				 c->setup->resolved ? *c->setup->resolved
						    : NULL,
				 keys, vals, timeout);
	/* PQconnectPoll has no connect_timeout: one host's attempt is given
	 * up here (pgo_conn_expire).  A list is left to libpq, which moves
	 * to the next host only when one fails: a deadline would restart it
	 * at the first host, and never reach the next. */
	c->connect_by = host_lists(v->db_url, &opts, &host, &addr, &port) <= 1
				? now + v->connect_timeout
				: 0;
	PQconninfoFree(opts);
	c->pg = PQconnectStartParams(keys, vals, 1);
	if (!c->pg) {
		pgo_conn_drop(c, "out of memory");
		return;
	}
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		if (refuse_start(c, pgo_pq_msg(c->pg, NULL), true))
			pgo_conn_close(c);
		else
			pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
		return;
	}
	c->state = PGO_CONN_CONNECTING;
	c->poll = PGRES_POLLING_WRITING;
}

void pgo_conn_pollfd(const pgo_conn_t *c, struct pollfd *pfd)
{
	pfd->fd = -1;
	pfd->events = 0;
	pfd->revents = 0;
	if (c->state == PGO_CONN_DOWN || !c->pg)
		return;
	pfd->fd = PQsocket(c->pg);
	if (c->state == PGO_CONN_CONNECTING)
		pfd->events =
			c->poll == PGRES_POLLING_READING ? POLLIN : POLLOUT;
	else
		pfd->events = POLLIN | (c->need_flush ? POLLOUT : 0);
}

/* Pooled: the round's first statement is the transaction's settings. */
static void start_round(pgo_conn_t *c)
{
	const pgo_conn_setup_t *s = c->setup;

	if (c->round.nq || c->round.hidden || !s->pooled || !s->local_sql ||
	    c->state == PGO_CONN_SETUP)
		return;
	if (!PQsendQueryParams(c->pg, s->local_sql, 0, NULL, NULL, NULL, NULL,
			       0))
		c->round.failed = true;
	c->round.hidden = 1;
}

void pgo_conn_query(pgo_conn_t *c, const char *sql, int n,
		    const char *const *values)
{
	if (c->round.nq >= PGO_ROUND_MAX)
		return;
	start_round(c);
	if (!PQsendQueryParams(c->pg, sql, n, NULL, values, NULL, NULL, 0))
		c->round.failed = true;
	c->round.nq++;
}

void pgo_conn_exec_prepared(pgo_conn_t *c, const char *name, int n,
			    const char *const *values)
{
	const pgo_conn_setup_t *s = c->setup;

	if (c->round.nq >= PGO_ROUND_MAX)
		return;
	if (s->pooled) {
		/* A named statement lives on one server connection of the
		 * pool: send its text as the unnamed statement instead. */
		for (int i = 0; s->prep_name[i]; i++)
			if (strcmp(s->prep_name[i], name) == 0) {
				pgo_conn_query(c, s->prep_sql[i], n, values);
				return;
			}
		c->round.failed = true;
		c->round.nq++;
		return;
	}
	if (!PQsendQueryPrepared(c->pg, name, n, values, NULL, NULL, 0))
		c->round.failed = true;
	c->round.nq++;
}

void pgo_conn_flush_request(pgo_conn_t *c)
{
	if (!PQsendFlushRequest(c->pg))
		c->round.failed = true;
}

static void flush(pgo_conn_t *c)
{
	int r = PQflush(c->pg);

	if (r < 0)
		c->round.failed = true;
	c->need_flush = r == 1;
}

int pgo_conn_send(pgo_conn_t *c)
{
	if (c->round.failed || !PQpipelineSync(c->pg)) {
		pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
		return PGO_ERR_CONNECT;
	}
	flush(c);
	if (c->round.failed) {
		pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
		return PGO_ERR_CONNECT;
	}
	if (c->state == PGO_CONN_READY)
		c->state = PGO_CONN_BUSY;
	c->sent_at = pgo_now_ms();
	c->round.sent_us = pgo_now_us();
	return PGO_OK;
}

int64_t pgo_conn_round_deadline(const pgo_conn_t *c, int64_t limit)
{
	if (c->state == PGO_CONN_CONNECTING)
		return c->connect_by;
	if (limit <= 0 ||
	    (c->state != PGO_CONN_BUSY && c->state != PGO_CONN_SETUP))
		return 0;
	return c->sent_at + limit;
}

bool pgo_conn_expire(pgo_conn_t *c, int64_t now, int64_t limit)
{
	int64_t due = pgo_conn_round_deadline(c, limit);
	char why[96];

	if (!due || now < due)
		return false;
	if (c->state == PGO_CONN_CONNECTING)
		snprintf(why, sizeof(why),
			 "no answer to connecting within %lld ms (server or "
			 "network hung)",
			 (long long)pgo_conf_values(c->conf)->connect_timeout);
	else
		pgo_pq_wait_why(NULL, PGO_PQ_TIMEOUT, limit, why, sizeof(why));
	pgo_conn_drop(c, why);
	return true;
}

PGresult *pgo_conn_take(pgo_conn_t *c, int i)
{
	PGresult *r = c->round.res[i];

	c->round.res[i] = NULL;
	return r;
}

/* The server's warnings (a fenced member, say) go to the log with the
 * connection's subject; notices only at debug level. */
static void on_notice(void *arg, const PGresult *res)
{
	const pgo_conn_t *c = arg;
	const char *sev =
		PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	bool warning = sev && strcmp(sev, "WARNING") == 0;

	pgo_log(warning ? PGO_LOG_WARN : PGO_LOG_DEBUG, c->setup->subject,
		"server %s: %s", warning ? "warning" : "notice",
		msg ? msg : "?");
}

/* Queues the setup round right after the connection is established. */
static void send_setup(pgo_conn_t *c)
{
	const pgo_conn_setup_t *s = c->setup;

	if (s->notice)
		PQsetNoticeReceiver(c->pg, s->notice, s->notice_arg);
	else
		PQsetNoticeReceiver(c->pg, on_notice, c);

	if (PQsetnonblocking(c->pg, 1) != 0 || !PQenterPipelineMode(c->pg)) {
		pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
		return;
	}
	pgo_conn_round_clear(c);
	c->state = PGO_CONN_SETUP;
	c->sent_at = pgo_now_ms();
	for (int i = 0; !s->pooled && s->sql[i]; i++)
		pgo_conn_query(c, s->sql[i], 0, NULL);
	if (s->check_schema) {
		char known[16];
		const char *params[1] = {known};

		snprintf(known, sizeof(known), "%d", pgo_schema_version());
		pgo_conn_query(c, pgo_schema_seen_sql, 1, params);
	}
	if (s->refuse_sql) {
		int n = 0;

		while (n < 2 && s->refuse_param[n])
			n++;
		pgo_conn_query(c, s->refuse_sql, n, s->refuse_param);
	}
	for (int i = 0; !s->pooled && s->prep_name[i]; i++) {
		if (!PQsendPrepare(c->pg, s->prep_name[i], s->prep_sql[i], 0,
				   NULL))
			c->round.failed = true;
		c->round.nq++;
	}
	(void)pgo_conn_send(c);
}

/* The setup round finished: check it.  At start, a schema that is missing,
 * older than this binary or newer with a version that breaks it is
 * refused (exit 2: run `pgoutbox migrate` first, then start the new
 * binaries); once a session came up, an older one is waited out and a
 * newer one that breaks this binary is fatal with exit 1, so that a
 * supervisor restarts the new binary.  A newer schema without a breaking
 * version is used, said once at INFO. */
static pgo_conn_event_t finish_setup(pgo_conn_t *c)
{
	static int newer_said; /* once per process */
	const pgo_conn_setup_t *s = c->setup;
	int nsql = 0;

	while (!s->pooled && s->sql[nsql])
		nsql++;
	if (s->check_schema && c->round.res[nsql]) {
		PGresult *r = c->round.res[nsql];
		const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		pgo_schema_seen_t seen = {.version = -1};
		bool newer = false;
		pgo_error_t err;

		if (PQresultStatus(r) == PGRES_TUPLES_OK)
			pgo_schema_seen_parse(r, &seen);
		else if (code && (strcmp(code, "42P01") == 0 ||
				  strcmp(code, "3F000") == 0))
			seen.version = 0; /* no table or no schema */
		if (seen.version < 0)
			goto failed;

		if (pgo_schema_verdict(&seen, &newer, &err) != PGO_OK) {
			/* At start: not a deploy migrating right now, a step
			 * left out (migrate before starting new binaries). */
			if (!c->ever_connected) {
				err.code = PGO_ERR_CONFIG;
				err.retriable = 0;
			} else if (!err.retriable) {
				err.code = PGO_ERR_DB; /* exit 1: restart */
			}
			if (!err.retriable) {
				c->fatal = err;
				pgo_conn_close(c);
				return PGO_CONN_EV_FATAL;
			}
			pgo_conn_drop(c, err.msg);
			return PGO_CONN_EV_NONE;
		}
		if (newer &&
		    !__atomic_exchange_n(&newer_said, 1, __ATOMIC_RELAXED))
			pgo_log(PGO_LOG_INFO, "schema",
				"schema %d is newer than this binary's %d; "
				"compatible",
				seen.version, pgo_schema_version());
	}
	if (s->refuse_sql) {
		PGresult *r = c->round.res[nsql + (s->check_schema ? 1 : 0)];

		if (r && PQresultStatus(r) == PGRES_TUPLES_OK &&
		    PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
			pgo_error_set(&c->fatal, PGO_ERR_INVALID, 0, "%s",
				      PQgetvalue(r, 0, 0));
			pgo_conn_close(c);
			return PGO_CONN_EV_FATAL;
		}
	}
failed:
	if (c->round.failed && !c->ever_connected &&
	    (strcmp(c->round.sqlstate, "42P01") == 0 ||
	     strcmp(c->round.sqlstate, "3F000") == 0 ||
	     strcmp(c->round.sqlstate, "42883") == 0)) {
		/* A table or function the session needs is missing: a queue
		 * that does not exist, most likely. */
		pgo_error_set(&c->fatal, PGO_ERR_CONFIG, 0,
			      "session setup failed: %s%s%s", c->round.err,
			      s->missing_hint ? ": " : "",
			      s->missing_hint ? s->missing_hint : "");
		pgo_conn_close(c);
		return PGO_CONN_EV_FATAL;
	}
	if (c->round.failed) {
		char why[600];

		snprintf(why, sizeof(why), "session setup failed: %s",
			 c->round.err);
		pgo_conn_drop(c, why);
		return PGO_CONN_EV_NONE;
	}
	pgo_conn_round_clear(c);
	{
		char what[512];

		/* A first session that had no trouble is not news. */
		snprintf(what, sizeof(what), "connected to %s on %s:%s",
			 PQdb(c->pg), PQhost(c->pg), PQport(c->pg));
		pgo_outage_up(pgo_outage_of(s->subject), s->subject,
			      c->last_err[0] || c->ever_connected ? what
								  : NULL);
	}
	c->last_err[0] = '\0';
	c->backoff = BACKOFF_MIN_MS;
	c->ever_connected = true;
	c->state = PGO_CONN_READY;
	return PGO_CONN_EV_READY;
}

/* Records one statement's result in the round (keep: in res[], else
 * only its failure). */
static void collect(pgo_conn_t *c, PGresult *r, bool keep)
{
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
	    !c->round.failed) {
		const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		c->round.failed = true;
		snprintf(c->round.sqlstate, sizeof(c->round.sqlstate), "%s",
			 code ? code : "");
		snprintf(c->round.err, sizeof(c->round.err), "%s",
			 st == PGRES_PIPELINE_ABORTED ? "pipeline aborted"
			 : st == PGRES_EMPTY_QUERY    ? "empty statement"
						      : pgo_pq_msg(c->pg, r));
	}
	if (keep && c->round.got < PGO_ROUND_MAX &&
	    !c->round.res[c->round.got]) {
		c->round.res[c->round.got] = r;
		c->round.at[c->round.got] = pgo_now_us();
	} else
		PQclear(r);
}

/* Reads whatever results are complete; true once the sync arrived. */
static bool read_round(pgo_conn_t *c)
{
	int nulls = 0;

	while (!PQisBusy(c->pg)) {
		PGresult *r = PQgetResult(c->pg);

		if (!r) {
			/* One NULL ends each statement's results; two in a
			 * row mean nothing more has arrived. */
			if (++nulls > 1)
				return false;
			continue;
		}
		nulls = 0;
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			return true;
		}
		if (c->round.hidden) {
			/* local_sql's result: only a failure counts (the rest
			 * of the round is then aborted too). */
			collect(c, r, false);
			c->round.hidden = 0;
			continue;
		}
		collect(c, r, true);
		c->round.got++;
	}
	return false;
}

/* Counts the notifications libpq has parsed and their senders (the
 * first three), and frees them. */
static void take_notifies(pgo_conn_t *c)
{
	PGnotify *n;

	while ((n = PQnotifies(c->pg)) != NULL) {
		int i;

		if (c->notifies++ == 0)
			c->notify_senders = 0;
		for (i = 0; i < c->notify_senders; i++)
			if (c->notify_pids[i] == n->be_pid)
				break;
		if (i == c->notify_senders && i < 3)
			c->notify_pids[c->notify_senders++] = n->be_pid;
		PQfreemem(n);
	}
}

pgo_conn_event_t pgo_conn_step(pgo_conn_t *c, short revents)
{
	bool done;

	if (c->refused) {
		c->refused = false;
		return PGO_CONN_EV_FATAL;
	}
	switch (c->state) {
	case PGO_CONN_DOWN: return PGO_CONN_EV_NONE;
	case PGO_CONN_CONNECTING:
		if (!revents)
			return PGO_CONN_EV_NONE;
		c->poll = PQconnectPoll(c->pg);
		if (c->poll == PGRES_POLLING_FAILED) {
			if (refuse_start(c, pgo_pq_msg(c->pg, NULL), false)) {
				pgo_conn_close(c);
				c->refused = false;
				return PGO_CONN_EV_FATAL;
			}
			pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
			return PGO_CONN_EV_LOST;
		}
		if (c->poll == PGRES_POLLING_OK)
			send_setup(c);
		return PGO_CONN_EV_NONE;
	default: break;
	}
	if (revents & (POLLERR | POLLHUP | POLLNVAL))
		revents |= POLLIN;
	if ((revents & POLLOUT) && c->need_flush) {
		flush(c);
		if (c->round.failed && c->state != PGO_CONN_SETUP) {
			pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
			return PGO_CONN_EV_LOST;
		}
	}
	if (revents & POLLIN) {
		if (!PQconsumeInput(c->pg)) {
			pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
			return PGO_CONN_EV_LOST;
		}
	}
	take_notifies(c);
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		pgo_conn_drop(c, pgo_pq_msg(c->pg, NULL));
		return PGO_CONN_EV_LOST;
	}
	if (c->state != PGO_CONN_BUSY && c->state != PGO_CONN_SETUP)
		return PGO_CONN_EV_NONE;
	done = read_round(c);
	/* Reading the results parses what came after them too: a
	 * notification the server sent at the COMMIT of this round (one that
	 * arrived while the transaction was open) is in libpq's list now,
	 * and no more bytes may come to wake us for it. */
	take_notifies(c);
	if (!done)
		return PGO_CONN_EV_NONE;
	if (c->state == PGO_CONN_SETUP)
		return finish_setup(c);
	c->state = PGO_CONN_READY;
	return PGO_CONN_EV_ROUND;
}

/* --- one request at a time with a deadline (blocking runners) --- */

/* A stop request is seen within this while a wait goes on. */
#define WAIT_SLICE_MS 100
/* After a stop request, a reply is still waited for this long: a healthy
 * server answers a message's statement in time, a hung one is given up. */
#define STOP_GRACE_MS 500

/* Waits for fd (events) until deadline, or a stop request's grace (from
 * *stop_by, set at the first sight of it); READY when it polled. */
static pgo_pq_wait_t wait_fd(int fd, short events, int64_t deadline,
			     volatile sig_atomic_t *stop, int64_t *stop_by)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t now = pgo_now_ms(), ms = WAIT_SLICE_MS;

		if (stop && *stop && !*stop_by)
			*stop_by = now + STOP_GRACE_MS;
		if (*stop_by && now >= *stop_by)
			return PGO_PQ_STOPPED;
		if (deadline && now >= deadline)
			return PGO_PQ_TIMEOUT;
		if (deadline && deadline - now < ms)
			ms = deadline - now;
		if (*stop_by && *stop_by - now < ms)
			ms = *stop_by - now;
		if (poll(&pfd, 1, (int)ms) > 0)
			return PGO_PQ_READY;
	}
}

pgo_pq_wait_t pgo_pq_await(PGconn *pg, int64_t deadline,
			   volatile sig_atomic_t *stop)
{
	int fd = PQsocket(pg);
	int64_t stop_by = 0;

	if (fd < 0 || PQstatus(pg) == CONNECTION_BAD)
		return PGO_PQ_LOST;
	for (;;) {
		int pending = PQflush(pg);
		pgo_pq_wait_t w;

		if (pending < 0)
			return PGO_PQ_LOST;
		if (!pending && !PQisBusy(pg))
			return PGO_PQ_READY;
		w = wait_fd(fd, (short)(POLLIN | (pending ? POLLOUT : 0)),
			    deadline, stop, &stop_by);
		if (w != PGO_PQ_READY)
			return w;
		if (!PQconsumeInput(pg))
			return PGO_PQ_LOST;
	}
}

/* One connection attempt, given up at deadline or a stop. */
static PGconn *connect_one(const char *const *keys, const char *const *vals,
			   int64_t deadline, volatile sig_atomic_t *stop,
			   pgo_pq_wait_t *how)
{
	PGconn *pg = PQconnectStartParams(keys, vals, 1);
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	int64_t stop_by = 0;

	*how = PGO_PQ_LOST;
	if (!pg || PQstatus(pg) == CONNECTION_BAD)
		return pg;
	for (;;) {
		pgo_pq_wait_t w;

		if (st == PGRES_POLLING_OK) {
			*how = PGO_PQ_READY;
			return pg;
		}
		if (st == PGRES_POLLING_FAILED)
			return pg;
		/* libpq may change the socket (another address). */
		w = wait_fd(PQsocket(pg),
			    st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
			    deadline, stop, &stop_by);
		if (w != PGO_PQ_READY) {
			*how = w;
			return pg;
		}
		st = PQconnectPoll(pg);
	}
}

PGconn *pgo_pq_connect(const char *const *keys, const char *const *vals,
		       int64_t per_host_ms, volatile sig_atomic_t *stop,
		       pgo_pq_wait_t *how)
{
	const char *k[PGO_CONN_KEYS + 4], *v[PGO_CONN_KEYS + 4];
	const char *url = NULL, *host, *addr, *port;
	char hbuf[256], abuf[64], pbuf[16];
	PQconninfoOption *opts;
	PGconn *pg = NULL;
	int n = 0, hosts;

	for (; keys[n] && n < PGO_CONN_KEYS; n++) {
		k[n] = keys[n];
		v[n] = vals[n];
		if (strcmp(keys[n], "dbname") == 0)
			url = vals[n];
	}
	/* A list of hosts is tried one at a time, each within per_host_ms,
	 * as libpq's connect_timeout does in PQconnectdb (PQconnectPoll
	 * has no timeout): a host gone without a word must not hold the
	 * attempt up forever, nor keep it from the next host. */
	hosts = host_lists(url, &opts, &host, &addr, &port);
	if (hosts <= 1) {
		PQconninfoFree(opts);
		return connect_one(keys, vals,
				   per_host_ms ? pgo_now_ms() + per_host_ms : 0,
				   stop, how);
	}
	for (int i = 0; i < hosts; i++) {
		int m = n;

		if (host && *host) {
			k[m] = "host";
			v[m++] = list_item(host, i, hbuf, sizeof(hbuf));
		}
		if (addr && *addr) {
			k[m] = "hostaddr";
			v[m++] = list_item(addr, i, abuf, sizeof(abuf));
		}
		if (port && *port) {
			k[m] = "port";
			v[m++] = list_item(port, i, pbuf, sizeof(pbuf));
		}
		k[m] = NULL;
		v[m] = NULL;
		PQfinish(pg);
		pg = connect_one(k, v,
				 per_host_ms ? pgo_now_ms() + per_host_ms : 0,
				 stop, how);
		if (*how == PGO_PQ_READY || *how == PGO_PQ_STOPPED)
			break;
	}
	PQconninfoFree(opts);
	return pg;
}

PGresult *pgo_pq_exec(PGconn *pg, const char *sql, int n,
		      const char *const *values, int64_t deadline,
		      volatile sig_atomic_t *stop, pgo_pq_wait_t *how)
{
	PGresult *last = NULL;

	*how = PGO_PQ_LOST;
	if (!PQsendQueryParams(pg, sql, n, NULL, values, NULL, NULL, 0))
		return NULL;
	/* As PQexec(): every result read, the last one kept. */
	for (;;) {
		PGresult *r;

		*how = pgo_pq_await(pg, deadline, stop);
		if (*how != PGO_PQ_READY) {
			PQclear(last);
			return NULL;
		}
		r = PQgetResult(pg);
		if (!r)
			break;
		PQclear(last);
		last = r;
	}
	if (!last || PQstatus(pg) == CONNECTION_BAD) {
		PQclear(last);
		*how = PGO_PQ_LOST;
		return NULL;
	}
	return last;
}

const char *pgo_pq_wait_why(PGconn *pg, pgo_pq_wait_t how, int64_t limit,
			    char *buf, size_t len)
{
	switch (how) {
	case PGO_PQ_TIMEOUT:
		snprintf(buf, len,
			 "no reply from PostgreSQL within %lld ms (server or "
			 "network hung)",
			 (long long)limit);
		break;
	case PGO_PQ_STOPPED: snprintf(buf, len, "stopping"); break;
	default:
		snprintf(buf, len, "%s",
			 pg ? pgo_pq_msg(pg, NULL) : "out of memory");
		break;
	}
	return buf;
}
