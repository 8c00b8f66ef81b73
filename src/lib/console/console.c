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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/console_int.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "console/console.h"
#include "pgoutbox.h"

#define RECONNECT_MS 2000

static void db_drop(pgo_console_t *c, const char *why)
{
	if (c->conn) {
		PQfinish(c->conn);
		c->conn = NULL;
		pgo_log(PGO_LOG_WARN, c->subject,
			"PostgreSQL connection lost: %s", why);
	}
	snprintf(c->db_error, sizeof(c->db_error), "%s", why);
	c->next_try = pgo_now_ms() + RECONNECT_MS;
}

PGconn *console_db(pgo_console_t *c)
{
	PGresult *res;
	char why[256];

	if (c->conn && PQstatus(c->conn) == CONNECTION_OK)
		return c->conn;
	if (c->conn)
		db_drop(c, pgo_pq_msg(c->conn, NULL));
	if (pgo_now_ms() < c->next_try)
		return NULL;
	c->conn = PQconnectdbParams(c->keys, c->vals, 1);
	if (!c->conn || PQstatus(c->conn) != CONNECTION_OK) {
		snprintf(why, sizeof(why), "%s",
			 c->conn ? pgo_pq_msg(c->conn, NULL) : "out of memory");
		if (c->conn)
			PQfinish(c->conn);
		c->conn = NULL;
		db_drop(c, why);
		return NULL;
	}
	/* Bounded: a page waits 5 s at most, and never holds a lock long. */
	res = PQexec(c->conn, "SET statement_timeout = '5s'; "
			      "SET lock_timeout = '2s'");
	PQclear(res);
	if (c->db_error[0])
		pgo_log(PGO_LOG_INFO, c->subject, "PostgreSQL is back");
	c->db_error[0] = '\0';
	return c->conn;
}

PGresult *console_query(pgo_console_t *c, const char *sql, int n,
			const char *const *params, char *why, size_t size)
{
	PGconn *conn = console_db(c);
	PGresult *res;
	ExecStatusType st;

	if (!conn) {
		snprintf(why, size, "PostgreSQL is unreachable: %s",
			 c->db_error);
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

pgo_console_t *pgo_console_new(const pgo_conf_t *conf, const char *listen,
			       pgo_error_t *err)
{
	pgo_console_t *c = calloc(1, sizeof(*c));
	const char *url = pgo_conf_get(conf, "database.url");
	const char *token = pgo_conf_get(conf, "console.token");

	if (c) {
		pthread_mutex_init(&c->lock, NULL);
		pthread_mutex_init(&c->qlock, NULL);
		pthread_cond_init(&c->qcond, NULL);
		c->wake_fd = -1;
	}
	if (!c || !(c->keys = calloc(4, sizeof(char *))) ||
	    !(c->vals = calloc(4, sizeof(char *))) ||
	    !(c->url = strdup(url ? url : "")) ||
	    !(c->token = strdup(token ? token : ""))) {
		pgo_console_destroy(c);
		pgo_error_set(err, PGO_ERR_NOMEM, 1,
			      "out of memory for the console");
		return NULL;
	}
	snprintf(c->subject, sizeof(c->subject), "console");
	c->keys[0] = "connect_timeout";
	c->vals[0] = "5";
	c->keys[1] = "application_name";
	c->vals[1] = "pgoutbox console";
	if (c->url[0]) {
		c->keys[2] = "dbname";
		c->vals[2] = c->url;
	}
	c->embedded = !listen;
	if (listen ? console_http_start(c, listen, err) != PGO_OK
		   : console_worker_start(c, err) != PGO_OK) {
		pgo_console_destroy(c);
		return NULL;
	}
	if (c->embedded) { /* the worker connects, not the loop's thread */
		pgo_log(PGO_LOG_INFO, c->subject,
			"console on the metrics address, %s",
			console_token_set(c) ? "actions unlocked by "
					       "console.token"
					     : "read-only (no console.token)");
		return c;
	}
	pthread_mutex_lock(&c->lock);
	if (!console_db(c))
		pgo_log(PGO_LOG_WARN, c->subject,
			"PostgreSQL is unreachable (%s): the pages say so "
			"until it is back",
			c->db_error);
	pthread_mutex_unlock(&c->lock);
	pgo_log(PGO_LOG_INFO, c->subject, "console on http://%s/ (port %d), %s",
		listen, c->port,
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
	console_sample_take(c);
	pthread_mutex_unlock(&c->lock);
}

void pgo_console_destroy(pgo_console_t *c)
{
	if (!c)
		return;
	console_http_stop(c);
	console_worker_stop(c);
	if (c->conn)
		PQfinish(c->conn);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->qlock);
	pthread_cond_destroy(&c->qcond);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	free(c->keys);
	free(c->vals);
	free(c->url);
	if (c->token) /* wiped: it is a secret */
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	free(c);
}
