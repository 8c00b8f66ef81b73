/*
 * zones.c — time zones from the database: the UTC offsets of a
 * schedule's zone over the stretch of time its ticks are computed in are
 * asked of pgoutbox.tz_offsets() (sql/009), so every instance uses the
 * database's tzdata, whatever the tzdata of its host; they are cached
 * while they cover what is asked.  Zone names are checked against
 * pg_timezone_names.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cron/cron_int.h"
#include "base/error.h"
#include "cron/cronexpr.h"
#include "pgoutbox.h"

bool pgo_cron_is_utc(const char *tz)
{
	return !tz || !*tz || strcmp(tz, "UTC") == 0;
}

static void zone_entry_free(zone_entry_t *ent)
{
	free(ent->name);
	free(ent->changes);
	memset(ent, 0, sizeof(*ent));
}

void pgo_cron_zones_clear(zone_cache_t *c)
{
	for (size_t i = 0; i < c->n; i++)
		zone_entry_free(&c->e[i]);
	free(c->e);
	memset(c, 0, sizeof(*c));
}

/* Asks PostgreSQL for the offsets of zone tz at the instants [from, to]
 * into *ent (empty).  PGO_ERR_INVALID for a zone PostgreSQL does not know,
 * PGO_ERR_DB for other failures. */
static int zone_load(PGconn *conn, const char *tz, int64_t from, int64_t to,
		     zone_entry_t *ent, pgo_error_t *err)
{
	char lo[24], hi[24];
	const char *p[3] = {tz, lo, hi};
	const char *state;
	PGresult *res;
	int n, rc;

	snprintf(lo, sizeof(lo), "%" PRId64, from);
	snprintf(hi, sizeof(hi), "%" PRId64, to);
	res = PQexecParams(conn,
			   "SELECT at, utc_offset FROM pgoutbox.tz_offsets($1, "
			   "$2::bigint, $3::bigint) ORDER BY at",
			   3, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		/* invalid_parameter_value: 'unknown time zone "X"' */
		if (state && strcmp(state, "22023") == 0)
			rc = pgo_error_set(err, PGO_ERR_INVALID, 0, "%s",
					   pgo_pq_msg(conn, res));
		else
			rc = pgo_error_set(err, PGO_ERR_DB,
					   PQstatus(conn) == CONNECTION_BAD,
					   "time zone \"%s\": %s", tz,
					   pgo_pq_msg(conn, res));
		PQclear(res);
		return rc;
	}
	n = PQntuples(res);
	ent->name = strdup(tz);
	ent->changes =
		n > 1 ? malloc((size_t)(n - 1) * sizeof(*ent->changes)) : NULL;
	if (n < 1 || !ent->name || (n > 1 && !ent->changes)) {
		PQclear(res);
		zone_entry_free(ent);
		return n < 1 ? pgo_error_set(err, PGO_ERR_DB, 0,
					     "time zone \"%s\": no offsets", tz)
			     : pgo_error_set(err, PGO_ERR_NOMEM, 1,
					     "out of memory");
	}
	/* Row 0 is the offset at `from`; the others are its changes. */
	for (int i = 1; i < n; i++) {
		ent->changes[i - 1].at =
			strtoll(PQgetvalue(res, i, 0), NULL, 10);
		ent->changes[i - 1].off = atoi(PQgetvalue(res, i, 1));
	}
	ent->z.name = ent->name;
	ent->z.from = from;
	ent->z.to = to;
	ent->z.off = atoi(PQgetvalue(res, 0, 1));
	ent->z.changes = ent->changes;
	ent->z.n = (size_t)(n - 1);
	PQclear(res);
	return PGO_OK;
}

/* Zone tz with offsets for the instants PGO_CRON_ZONE_MARGIN before lo up
 * to hi: from the cache, else asked of PostgreSQL.  *out is NULL for UTC
 * (no question asked) and valid until the next call. */
int pgo_cron_zone_get(zone_cache_t *c, PGconn *conn, const char *tz, int64_t lo,
		      int64_t hi, const pgo_cron_zone_t **out, pgo_error_t *err)
{
	zone_entry_t *ent = NULL, fresh = {0};
	int rc;

	*out = NULL;
	if (pgo_cron_is_utc(tz))
		return PGO_OK;
	lo -= PGO_CRON_ZONE_MARGIN;
	for (size_t i = 0; i < c->n && !ent; i++)
		if (strcmp(c->e[i].name, tz) == 0)
			ent = &c->e[i];
	if (ent && ent->z.from <= lo && ent->z.to >= hi) {
		*out = &ent->z;
		return PGO_OK;
	}
	rc = zone_load(conn, tz, lo, hi + ZONE_SLACK, &fresh, err);
	if (rc != PGO_OK)
		return rc;
	if (!ent) {
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 8;
			zone_entry_t *e = realloc(c->e, cap * sizeof(*e));

			if (!e) {
				zone_entry_free(&fresh);
				return pgo_error_set(err, PGO_ERR_NOMEM, 1,
						     "out of memory");
			}
			c->e = e;
			c->cap = cap;
		}
		ent = &c->e[c->n++];
	} else {
		zone_entry_free(ent);
	}
	*ent = fresh;
	*out = &ent->z;
	return PGO_OK;
}

/* PGO_OK when PostgreSQL knows a zone of exactly this name (UTC needs no
 * question), else PGO_ERR_INVALID naming it, with the right spelling when
 * only the case is wrong (PostgreSQL itself would take any case). */
int pgo_cron_tz_check(PGconn *conn, const char *tz, pgo_error_t *err)
{
	PGresult *res;
	int rc = PGO_OK;

	if (pgo_cron_is_utc(tz))
		return PGO_OK;
	res = pgo_pq_run(
		conn, "checking the time zone",
		"SELECT name FROM pg_timezone_names WHERE lower(name) = "
		"lower($1) ORDER BY name = $1 DESC, name LIMIT 1",
		1, &tz, err);
	if (!res)
		return PGO_ERR_DB;
	if (PQntuples(res) == 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "unknown time zone \"%.200s\" (see "
				   "pg_timezone_names)",
				   tz);
	else if (strcmp(PQgetvalue(res, 0, 0), tz) != 0)
		rc = pgo_error_set(err, PGO_ERR_INVALID, 0,
				   "unknown time zone \"%.200s\" (did you mean "
				   "\"%s\"?)",
				   tz, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}
