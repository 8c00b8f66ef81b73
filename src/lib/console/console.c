/*
 * console.c — the console's handle: its own PostgreSQL connection (made
 * again, at most every 2 s, after PostgreSQL went away), the token that
 * unlocks the actions, and the sessions of those who presented it.
 *
 * The token is compared in constant time and never written anywhere: not
 * in a log line, not in an answer.  A session is what a browser keeps
 * after presenting it: a random cookie (HttpOnly, SameSite=Strict) and a
 * random CSRF token its page sends back with every action.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/console_int.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "console/console.h"
#include "pgoutbox.h"

#define RECONNECT_MS	 2000
#define RECONNECT_MAX_MS 10000 /* a fleet's database failing in a row */
/* A connection not made within this is given up (connect_timeout). */
#define CONNECT_TIMEOUT_MS(c) ((c)->fleet ? 2000 : 5000)
/* What a fleet's request waits for a connection being made. */
#define CONNECT_STEP_MS 250

/* The subject of a database's log lines: "console" or "console db2". */
static void db_log(pgo_console_t *c, pgo_log_level_t level, const char *fmt,
		   ...) __attribute__((format(printf, 3, 4)));
static void db_log(pgo_console_t *c, pgo_log_level_t level, const char *fmt,
		   ...)
{
	char subject[96], msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(subject, sizeof(subject), "%s%s%s", c->subject,
		 c->db->name[0] ? " " : "", c->db->name);
	pgo_log(level, subject, "%s", msg);
}

static void db_drop(pgo_console_t *c, const char *why)
{
	console_db_t *d = c->db;
	int64_t wait = RECONNECT_MS;

	if (d->conn) {
		PQfinish(d->conn);
		d->conn = NULL;
		db_log(c, PGO_LOG_WARN, "PostgreSQL connection lost: %s", why);
	} else if (d->fails < 8) {
		if (!d->down)
			db_log(c, PGO_LOG_WARN,
			       "PostgreSQL is unreachable (%s): the pages say "
			       "so until it is back",
			       why);
		d->fails++;
	}
	/* A fleet's database tried at 2, 4, 8, then 10 s: one that does
	 * not answer holds the lock, and the others' pages, for its
	 * connect_timeout once a period.  A single one every 2 s. */
	for (int i = 1; c->fleet && i < d->fails && wait < RECONNECT_MAX_MS;
	     i++)
		wait *= 2;
	snprintf(d->error, sizeof(d->error), "%s", why);
	d->down = true;
	d->next_try = pgo_now_ms() +
		      (wait < RECONNECT_MAX_MS ? wait : RECONNECT_MAX_MS);
}

/* The connection of c->db that could not be made: closed, its reason
 * kept, the next try later. */
static void connect_failed(pgo_console_t *c, const char *why)
{
	console_db_t *d = c->db;
	char copy[256];

	snprintf(copy, sizeof(copy), "%s", why); /* why may be d->conn's */
	if (d->conn)
		PQfinish(d->conn);
	d->conn = NULL;
	d->connecting = false;
	db_drop(c, copy);
}

/* Goes on making c->db's connection (PQconnectPoll) for budget_ms at
 * most: true once it is made, false meanwhile (with d->error saying so)
 * or when it failed or took longer than its connect timeout. */
static bool connect_step(pgo_console_t *c, int64_t budget_ms)
{
	console_db_t *d = c->db;
	int64_t now = pgo_now_ms();
	int64_t end = now + budget_ms < d->connect_until ? now + budget_ms
							 : d->connect_until;

	for (;;) {
		struct pollfd p = {.fd = PQsocket(d->conn)};
		int n;

		if (d->want == PGRES_POLLING_OK) {
			d->connecting = false;
			return true;
		}
		if (d->want == PGRES_POLLING_FAILED) {
			connect_failed(c, pgo_pq_msg(d->conn, NULL));
			return false;
		}
		now = pgo_now_ms();
		if (now >= d->connect_until) {
			connect_failed(c, "no answer within the connect "
					  "timeout");
			return false;
		}
		if (now >= end) { /* the next request goes on */
			if (!d->error[0])
				snprintf(d->error, sizeof(d->error),
					 "connecting: no answer yet");
			return false;
		}
		p.events = d->want == PGRES_POLLING_READING ? POLLIN : POLLOUT;
		n = poll(&p, 1, (int)(end - now));
		if (n < 0 && errno != EINTR) {
			connect_failed(c, strerror(errno));
			return false;
		}
		if (n > 0)
			d->want = PQconnectPoll(d->conn);
	}
}

PGconn *console_db(pgo_console_t *c)
{
	console_db_t *d = c->db;
	PGresult *res;

	if (d->conn && !d->connecting && PQstatus(d->conn) == CONNECTION_OK)
		return d->conn;
	if (d->conn && !d->connecting)
		db_drop(c, pgo_pq_msg(d->conn, NULL));
	if (!d->conn) {
		if (pgo_now_ms() < d->next_try)
			return NULL;
		d->conn = PQconnectStartParams(d->keys, d->vals, 1);
		if (!d->conn || PQstatus(d->conn) == CONNECTION_BAD) {
			connect_failed(c, d->conn ? pgo_pq_msg(d->conn, NULL)
						  : "out of memory");
			return NULL;
		}
		d->connecting = true;
		d->want = PGRES_POLLING_WRITING; /* PQconnectStart's rule */
		d->connect_until = pgo_now_ms() + CONNECT_TIMEOUT_MS(c);
	}
	/* A fleet's request waits for a connection being made a little at
	 * a time: a database that does not answer holds the others' pages
	 * that long, not its whole connect timeout.  A single one waits. */
	if (!connect_step(c,
			  c->fleet ? CONNECT_STEP_MS : CONNECT_TIMEOUT_MS(c)))
		return NULL;
	/* Bounded: a page waits 5 s at most, and never holds a lock long. */
	res = PQexec(d->conn, "SET statement_timeout = '5s'; "
			      "SET lock_timeout = '2s'");
	PQclear(res);
	if (d->down)
		db_log(c, PGO_LOG_INFO, "PostgreSQL is back");
	d->down = false;
	d->error[0] = '\0';
	d->fails = 0;
	return d->conn;
}

unsigned console_db_pick(pgo_console_t *c, const char *name, pgo_buf_t *b)
{
	pgo_buf_t names;

	if (!c->fleet && (!*name || strcmp(name, c->dbs[0].name) == 0)) {
		c->db = &c->dbs[0];
		return 0;
	}
	for (int i = 0; *name && i < c->ndb; i++)
		if (strcmp(c->dbs[i].name, name) == 0) {
			c->db = &c->dbs[i];
			return 0;
		}
	pgo_buf_init(&names);
	for (int i = 0; i < c->ndb; i++)
		pgo_buf_printf(&names, "%s%s", i ? ", " : "", c->dbs[i].name);
	if (*name)
		json_error(b, "db: no database named \"%.60s\" (%s)", name,
			   names.oom ? "?" : names.data);
	else
		json_error(b, "db: which database? one of %s",
			   names.oom ? "?" : names.data);
	pgo_buf_free(&names);
	return *name ? 404 : 400;
}

PGresult *console_query(pgo_console_t *c, const char *sql, int n,
			const char *const *params, char *why, size_t size)
{
	PGconn *conn = console_db(c);
	PGresult *res;
	ExecStatusType st;

	if (!conn) {
		if (c->fleet)
			snprintf(why, size, "database %s: %s", c->db->name,
				 c->db->error);
		else
			snprintf(why, size, "PostgreSQL is unreachable: %s",
				 c->db->error);
		return NULL;
	}
	res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	st = PQresultStatus(res);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return res;
	snprintf(why, size, "%s", pgo_pq_msg(conn, res));
	PQclear(res);
	if (PQstatus(conn) != CONNECTION_OK)
		db_drop(c, why);
	return NULL;
}

bool console_token_set(const pgo_console_t *c)
{
	return c->token && c->token[0];
}

bool console_token_ok(const pgo_console_t *c, const char *token)
{
	size_t n, m;
	unsigned diff;

	if (!console_token_set(c) || !token)
		return false;
	n = strlen(c->token);
	m = strlen(token);
	diff = n != m;
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)token[i] ^
			(unsigned char)c->token[i % n];
	return diff == 0;
}

/* 128 random bits in hex; false when /dev/urandom cannot be read. */
static bool random_hex(char out[33])
{
	unsigned char raw[16];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && read(fd, raw, sizeof(raw)) == (ssize_t)sizeof(raw);

	if (fd >= 0)
		close(fd);
	for (size_t i = 0; ok && i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return ok;
}

session_t *console_session_new(pgo_console_t *c, const char *who,
			       const char *from)
{
	session_t *s = &c->sessions[0];

	for (int i = 0; i < SESSIONS_MAX; i++) {
		session_t *t = &c->sessions[i];

		if (!t->id[0] || time(NULL) - t->since > SESSION_TTL_S) {
			s = t;
			break;
		}
		if (t->since < s->since)
			s = t; /* the oldest goes when all are taken */
	}
	memset(s, 0, sizeof(*s));
	if (!random_hex(s->id) || !random_hex(s->csrf)) {
		memset(s, 0, sizeof(*s));
		return NULL;
	}
	snprintf(s->who, sizeof(s->who), "%s", who);
	snprintf(s->from, sizeof(s->from), "%s", from);
	s->since = time(NULL);
	return s;
}

session_t *console_session_find(pgo_console_t *c, const char *id)
{
	if (!id || strlen(id) != 32)
		return NULL;
	for (int i = 0; i < SESSIONS_MAX; i++) {
		session_t *s = &c->sessions[i];

		if (s->id[0] && strcmp(s->id, id) == 0) {
			if (time(NULL) - s->since > SESSION_TTL_S) {
				console_session_end(s);
				return NULL;
			}
			return s;
		}
	}
	return NULL;
}

void console_session_end(session_t *s)
{
	if (s)
		memset(s, 0, sizeof(*s));
}

/* Database d: its name, its URL, its connection parameters and samples;
 * false without memory. */
static bool db_init(console_db_t *d, const char *name, const char *url,
		    bool fleet)
{
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	if (!(d->url = strdup(url ? url : "")) ||
	    !(d->ring = calloc(SAMPLES, sizeof(*d->ring))))
		return false;
	/* The relay's keywords (connect_timeout, keepalives,
	 * tcp_user_timeout, then the URL, which may override them), with
	 * a dead server noticed sooner: the console's queries end within
	 * statement_timeout (5 s), and all of its pages wait meanwhile. */
	pgo_conn_params_url(d->url, fleet ? 2000 : 5000, "pgoutbox console",
			    d->keys, d->vals, d->timeout);
	for (int i = 0; d->keys[i]; i++) {
		if (strcmp(d->keys[i], "keepalives_idle") == 0)
			d->vals[i] = "5";
		else if (strcmp(d->keys[i], "keepalives_interval") == 0 ||
			 strcmp(d->keys[i], "keepalives_count") == 0)
			d->vals[i] = "2";
		else if (strcmp(d->keys[i], "tcp_user_timeout") == 0)
			d->vals[i] = "10000";
	}
	return true;
}

static void dbs_free(console_db_t *dbs, int n)
{
	for (int i = 0; dbs && i < n; i++) {
		if (dbs[i].conn)
			PQfinish(dbs[i].conn);
		free(dbs[i].url);
		free(dbs[i].ring);
	}
	free(dbs);
}

/* The databases of conf into *dbs (*ndb of them, *fleet): its fleet's
 * when it names two or more, else the one of database.url (or of a lone
 * fleet database).  PGO_OK, or the error in err. */
static int dbs_make(const pgo_conf_t *conf, console_db_t **dbs, int *ndb,
		    bool *fleet, pgo_error_t *err)
{
	size_t n = pgo_conf_database_count(conf);
	const char *url = pgo_conf_get(conf, "database.url");
	pgo_conf_db_t *named = NULL;
	int rc = PGO_OK;

	*dbs = NULL;
	if (n && !(named = calloc(n, sizeof(*named))))
		return pgo_error_set(err, PGO_ERR_NOMEM, 1,
				     "out of memory for the console");
	if (n && pgo_conf_databases_named(conf, named, err) != PGO_OK) {
		free(named);
		return err->code;
	}
	*fleet = n >= 2;
	*ndb = *fleet ? (int)n : 1;
	if (!(*dbs = calloc((size_t)*ndb, sizeof(**dbs))))
		rc = PGO_ERR_NOMEM;
	for (int i = 0; rc == PGO_OK && i < *ndb; i++)
		if (!db_init(&(*dbs)[i], *fleet ? named[i].name : "",
			     n ? named[i].url : url, *fleet))
			rc = PGO_ERR_NOMEM;
	free(named);
	if (rc != PGO_OK) {
		dbs_free(*dbs, *ndb);
		*dbs = NULL;
		return pgo_error_set(err, rc, 1,
				     "out of memory for the console");
	}
	return PGO_OK;
}

static int dbs_init(pgo_console_t *c, const pgo_conf_t *conf, pgo_error_t *err)
{
	int rc = dbs_make(conf, &c->dbs, &c->ndb, &c->fleet, err);

	c->db = c->dbs;
	return rc;
}

int pgo_console_reload(pgo_console_t *c, const pgo_conf_t *conf,
		       pgo_error_t *err)
{
	console_db_t *dbs;
	int n;
	bool fleet;

	if (!c)
		return PGO_OK;
	if (dbs_make(conf, &dbs, &n, &fleet, err) != PGO_OK)
		return err->code;
	pthread_mutex_lock(&c->qlock);
	dbs_free(c->next_dbs, c->next_ndb); /* a reload not taken yet */
	c->next_dbs = dbs;
	c->next_ndb = n;
	c->next_fleet = fleet;
	pthread_mutex_unlock(&c->qlock);
	return PGO_OK;
}

void console_reload_apply(pgo_console_t *c)
{
	console_db_t *dbs;
	int n, kept = 0;
	bool fleet;
	pgo_buf_t added, gone;

	pthread_mutex_lock(&c->qlock);
	dbs = c->next_dbs;
	n = c->next_ndb;
	fleet = c->next_fleet;
	c->next_dbs = NULL;
	c->next_ndb = 0;
	pthread_mutex_unlock(&c->qlock);
	if (!dbs)
		return;
	pgo_buf_init(&added);
	pgo_buf_init(&gone);
	/* A database kept (same name, same URL) keeps its connection, its
	 * backoff and its samples. */
	for (int i = 0; i < n; i++) {
		console_db_t *d = &dbs[i], *o = NULL;

		for (int j = 0; j < c->ndb && !o; j++)
			if (c->dbs[j].ring && strcmp(c->dbs[j].name, d->name) == 0 &&
			    strcmp(c->dbs[j].url, d->url) == 0)
				o = &c->dbs[j];
		if (!o) {
			pgo_buf_printf(&added, "%s%s", added.len ? ", " : "",
				       d->name[0] ? d->name : "database.url");
			continue;
		}
		free(d->ring);
		d->ring = o->ring;
		d->ring_next = o->ring_next;
		d->conn = o->conn;
		d->next_try = o->next_try;
		d->fails = o->fails;
		d->connecting = o->connecting;
		d->want = o->want;
		d->connect_until = o->connect_until;
		d->down = o->down;
		memcpy(d->error, o->error, sizeof(d->error));
		o->ring = NULL;
		o->conn = NULL;
		kept++;
	}
	for (int j = 0; j < c->ndb; j++)
		if (c->dbs[j].ring)
			pgo_buf_printf(&gone, "%s%s", gone.len ? ", " : "",
				       c->dbs[j].name[0] ? c->dbs[j].name
							 : "database.url");
	dbs_free(c->dbs, c->ndb);
	c->dbs = dbs;
	c->ndb = n;
	c->fleet = fleet;
	c->db = c->dbs;
	pgo_log(PGO_LOG_INFO, c->subject,
		"reloaded: %d database%s (%d kept; added: %s; removed: %s)", n,
		n == 1 ? "" : "s", kept, added.len ? added.data : "none",
		gone.len ? gone.data : "none");
	pgo_buf_free(&added);
	pgo_buf_free(&gone);
}

pgo_console_t *pgo_console_new(const pgo_conf_t *conf, const char *listen,
			       pgo_error_t *err)
{
	pgo_console_t *c = calloc(1, sizeof(*c));
	const char *token = pgo_conf_get(conf, "console.token");

	if (c) {
		pthread_mutex_init(&c->lock, NULL);
		pthread_mutex_init(&c->qlock, NULL);
		pthread_cond_init(&c->qcond, NULL);
		c->wake_fd = -1;
	}
	if (!c || !(c->token = strdup(token ? token : ""))) {
		pgo_console_destroy(c);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for the console");
		return NULL;
	}
	snprintf(c->subject, sizeof(c->subject), "console");
	if (dbs_init(c, conf, err) != PGO_OK) {
		pgo_console_destroy(c);
		return NULL;
	}
	c->embedded = !listen;
	if (listen ? console_http_start(c, listen, err) != PGO_OK
		   : console_worker_start(c, err) != PGO_OK) {
		pgo_console_destroy(c);
		return NULL;
	}
	if (c->embedded) { /* the worker connects, not the loop's thread */
		pgo_log(PGO_LOG_INFO, c->subject,
			"console on the metrics address%s, %s",
			c->fleet ? ", over the fleet's databases" : "",
			console_token_set(c) ? "actions unlocked by "
					       "console.token"
					     : "read-only (no console.token)");
		return c;
	}
	/* One database is connected now (it says at once whether it can
	 * be reached); a fleet's when first needed. */
	pthread_mutex_lock(&c->lock);
	if (!c->fleet)
		console_db(c);
	pthread_mutex_unlock(&c->lock);
	pgo_log(PGO_LOG_INFO, c->subject,
		"console on http://%s/ (port %d)%s, %s", listen, c->port,
		c->fleet ? ", over the fleet's databases" : "",
		console_token_set(c) ? "actions unlocked by console.token"
				     : "read-only (no console.token)");
	return c;
}

int pgo_console_port(const pgo_console_t *c)
{
	return c ? c->port : 0;
}

void pgo_console_sample(pgo_console_t *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	console_reload_apply(c);
	console_sample_take(c);
	pthread_mutex_unlock(&c->lock);
}

void pgo_console_destroy(pgo_console_t *c)
{
	if (!c)
		return;
	console_http_stop(c);
	console_worker_stop(c);
	dbs_free(c->dbs, c->ndb);
	dbs_free(c->next_dbs, c->next_ndb);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->qlock);
	pthread_cond_destroy(&c->qcond);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	if (c->token) /* wiped: it is a secret */
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	free(c);
}
