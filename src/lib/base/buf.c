/*
 * util.c — the small shared pieces: error codes and messages, the log
 * callback, clocks, the per-batch arena and a growable text buffer with the
 * two escapers the wire formats need (JSON strings, PostgreSQL array
 * elements).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pgo_int.h"

/* --- errors --- */

const char *pgo_strerror(int code)
{
	switch (code) {
	case PGO_OK: return "success";
	case PGO_ERR_NOMEM: return "out of memory";
	case PGO_ERR_INVALID: return "invalid input";
	case PGO_ERR_CONFIG: return "configuration error";
	case PGO_ERR_DB: return "database error";
	case PGO_ERR_SCHEMA: return "schema mismatch";
	case PGO_ERR_SINK: return "sink error";
	case PGO_ERR_IO: return "I/O error";
	case PGO_ERR_CONNECT: return "cannot connect to PostgreSQL";
	case PGO_ERR_AGAIN: return "operation in progress";
	default: return "unknown error";
	}
}

int pgo_error_set(pgo_error_t *err, int code, int retriable, const char *fmt,
		  ...)
{
	if (err) {
		va_list ap;

		err->code = code;
		err->retriable = retriable;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

void pgo_error_clear(pgo_error_t *err)
{
	if (err) {
		err->code = PGO_OK;
		err->retriable = 0;
		err->msg[0] = '\0';
	}
}

const char *pgo_pq_msg(const PGconn *conn, const PGresult *res)
{
	static __thread char line[512];
	const char *m = NULL;
	size_t n;

	if (res)
		m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	if (!m && res)
		m = PQresultErrorMessage(res);
	if ((!m || !*m) && conn)
		m = PQerrorMessage(conn);
	if (!m || !*m)
		m = "unknown error";
	/* libpq messages may span lines ("ERROR:  x\nDETAIL: ..."): keep one.
	 */
	snprintf(line, sizeof(line), "%s", m);
	n = strcspn(line, "\n");
	line[n] = '\0';
	return line;
}

/* The SQLSTATE classes after which the same statement or transaction may
 * succeed when tried again; everything else (22 data, 23 integrity, 42
 * syntax or privilege, 3F no schema, 2x, P0 raised by a function, XX
 * internal...) fails the same way every time. */
static const char *const retriable_classes[] = {
	"08", /* connection exception */
	"40", /* transaction rollback: serialization failure, deadlock */
	"53", /* insufficient resources: disk full, out of memory, too
	       * many connections */
	"57", /* operator intervention: admin shutdown, cannot connect now,
	       * query canceled (57014: statement_timeout) */
	"58", /* system error: I/O error */
};

bool pgo_sqlstate_retriable(const char *sqlstate)
{
	if (!sqlstate || !*sqlstate)
		return true;
	if (strcmp(sqlstate, "55P03") == 0) /* lock_not_available */
		return true;
	for (size_t i = 0;
	     i < sizeof(retriable_classes) / sizeof(retriable_classes[0]); i++)
		if (strncmp(sqlstate, retriable_classes[i], 2) == 0)
			return true;
	return false;
}

bool pgo_pq_retriable(const PGconn *conn, const PGresult *res)
{
	if (!conn || PQstatus(conn) == CONNECTION_BAD || !res)
		return true;
	return pgo_sqlstate_retriable(
		PQresultErrorField(res, PG_DIAG_SQLSTATE));
}

/* --- log --- */

static pgo_log_fn log_fn;
static void *log_ctx;
pgo_log_level_t pgo_log_max = PGO_LOG_INFO;

void pgo_log_set(pgo_log_fn fn, void *ctx, pgo_log_level_t max_level)
{
	log_fn = fn;
	log_ctx = ctx;
	pgo_log_max = fn ? max_level : PGO_LOG_ERROR;
}

int pgo_log_level_parse(const char *s)
{
	static const char *names[] = {"error", "warn", "info", "debug"};

	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

void pgo_log_emit(pgo_log_level_t level, const char *subject, const char *fmt,
		  ...)
{
	char msg[1024];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(log_ctx, level, subject, msg);
}

/* --- time --- */

int64_t pgo_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t pgo_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t pgo_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Digits t[0..n-1] as a number; -1 when one is not a digit. */
static int digits(const char *t, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return -1;
		v = v * 10 + (t[i] - '0');
	}
	return v;
}

int pgo_parse_rfc3339_us(const char *t, int64_t *us)
{
	int y, mo, d, h, mi, sec, frac = 0, scale = 1000000;
	struct tm tm = {0};
	const char *p;

	if (!t || strlen(t) < 19 || t[4] != '-' || t[7] != '-' ||
	    (t[10] != 'T' && t[10] != ' ') || t[13] != ':' || t[16] != ':')
		return -1;
	y = digits(t, 4);
	mo = digits(t + 5, 2);
	d = digits(t + 8, 2);
	h = digits(t + 11, 2);
	mi = digits(t + 14, 2);
	sec = digits(t + 17, 2);
	if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 ||
	    mi < 0 || mi > 59 || sec < 0 || sec > 60)
		return -1;
	p = t + 19;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00") != 0 &&
	    strcmp(p, "+00:00") != 0)
		return -1;
	/* The events of a batch share their hour: timegm() once an hour
	 * (per thread), minutes and seconds added here. */
	{
		static _Thread_local char hour_key[14];
		static _Thread_local int64_t hour_at;

		if (memcmp(hour_key, t, 13) != 0) {
			tm.tm_year = y - 1900;
			tm.tm_mon = mo - 1;
			tm.tm_mday = d;
			tm.tm_hour = h;
			hour_at = (int64_t)timegm(&tm);
			memcpy(hour_key, t, 13);
		}
		*us = (hour_at + mi * 60 + sec) * 1000000 + frac;
	}
	return 0;
}

/* --- arena --- */

struct chunk {
	struct chunk *next;
	size_t size;
	size_t used;
	max_align_t data[]; /* aligned storage */
};

struct pgo_arena {
	struct chunk *head; /* newest first; the last one is kept on reset */
	size_t chunk;
};

static struct chunk *chunk_new(size_t size)
{
	struct chunk *c = malloc(sizeof(*c) + size);

	if (c) {
		c->next = NULL;
		c->size = size;
		c->used = 0;
	}
	return c;
}

pgo_arena_t *pgo_arena_new(size_t chunk)
{
	pgo_arena_t *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->chunk = chunk ? chunk : 8192;
	a->head = chunk_new(a->chunk);
	if (!a->head) {
		free(a);
		return NULL;
	}
	return a;
}

void *pgo_arena_alloc(pgo_arena_t *a, size_t n)
{
	const size_t align = sizeof(max_align_t);
	struct chunk *c = a->head;
	void *p;

	n = (n + align - 1) & ~(align - 1);
	if (c->size - c->used < n) {
		size_t size = n > a->chunk ? n : a->chunk;

		c = chunk_new(size);
		if (!c)
			return NULL;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

char *pgo_arena_strdup(pgo_arena_t *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = pgo_arena_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void pgo_arena_reset(pgo_arena_t *a)
{
	while (a->head->next) {
		struct chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
	a->head->used = 0;
}

void pgo_arena_destroy(pgo_arena_t *a)
{
	if (!a)
		return;
	pgo_arena_reset(a);
	free(a->head);
	free(a);
}

/* --- buffer --- */

void pgo_buf_init(pgo_buf_t *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = false;
}

void pgo_buf_free(pgo_buf_t *b)
{
	free(b->data);
	pgo_buf_init(b);
}

void pgo_buf_reset(pgo_buf_t *b)
{
	b->len = 0;
	b->oom = false;
	if (b->data)
		b->data[0] = '\0';
}

bool pgo_buf_reserve(pgo_buf_t *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void pgo_buf_append(pgo_buf_t *b, const char *s, size_t n)
{
	if (!pgo_buf_reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void pgo_buf_puts(pgo_buf_t *b, const char *s)
{
	pgo_buf_append(b, s, strlen(s));
}

void pgo_buf_printf(pgo_buf_t *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !pgo_buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void pgo_buf_json_str(pgo_buf_t *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	/* Worst case: every byte becomes \u00XX. */
	if (!pgo_buf_reserve(b, strlen(s) * 6 + 2))
		return;
	b->data[b->len++] = '"';
	for (; *p; p++) {
		unsigned char c = *p;
		char *o = b->data + b->len;

		if (c >= 0x20 && c != '"' && c != '\\') {
			*o = (char)c;
			b->len++;
			continue;
		}
		o[0] = '\\';
		switch (c) {
		case '"':
			o[1] = '"';
			b->len += 2;
			break;
		case '\\':
			o[1] = '\\';
			b->len += 2;
			break;
		case '\n':
			o[1] = 'n';
			b->len += 2;
			break;
		case '\r':
			o[1] = 'r';
			b->len += 2;
			break;
		case '\t':
			o[1] = 't';
			b->len += 2;
			break;
		default:
			o[1] = 'u';
			o[2] = '0';
			o[3] = '0';
			o[4] = hex[c >> 4];
			o[5] = hex[c & 15];
			b->len += 6;
		}
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
}

void pgo_buf_array_elem(pgo_buf_t *b, const char *s)
{
	if (!s) {
		pgo_buf_append(b, "NULL", 4);
		return;
	}
	if (!pgo_buf_reserve(b, strlen(s) * 2 + 2))
		return;
	b->data[b->len++] = '"';
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			b->data[b->len++] = '\\';
		b->data[b->len++] = *s;
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
}

/* --- retry --- */

int64_t pgo_backoff_ms(int attempt, int64_t base, int64_t max, double rnd)
{
	int64_t d = base;

	if (attempt < 1)
		attempt = 1;
	for (int i = 1; i < attempt && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	if (d <= 0)
		return 0;
	return d / 2 + (int64_t)((double)(d - d / 2) * rnd);
}

PGresult *pgo_pq_run(PGconn *conn, const char *what, const char *sql, int n,
		     const char *const *params, pgo_error_t *err)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
			      "%s: %s", what, pgo_pq_msg(conn, res));
		PQclear(res);
		return NULL;
	}
	return res;
}
