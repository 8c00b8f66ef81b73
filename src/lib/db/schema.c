/*
 * schema.c — the pgoutbox schema: applying the embedded migrations,
 * checking that a database matches this build, and validating the
 * identifiers (queue names) that end up in SQL.
 *
 * Migrations run in ONE transaction under a transaction-level advisory lock
 * in pgoutbox's own key space, so concurrent `pgoutbox migrate` runs
 * serialize and a failed one leaves nothing behind.  A database without
 * the schema gets the newest version from its source (sql/schema/); one
 * at an older version gets the frozen upgrade steps (sql/upgrade/) and
 * then the source's functions and grants again, so that both end the
 * same (sql/README.md, tests/integration/t_schema_equiv.sh).
 */
#include <stdlib.h>
#include <string.h>

#include "db/migrations.h"
#include "base/error.h"
#include "base/log.h"
#include "db/schema.h"
#include "pgoutbox.h"

/* Advisory lock key space of pgoutbox (two-integer form): 'pgox'. */
#define PGO_LOCK_NS	 1885826936
#define PGO_LOCK_MIGRATE 1

int pgo_schema_version(void)
{
	return pgo_migrations[pgo_migrations_count - 1].version;
}

int pgo_ident_check(const char *name, pgo_error_t *err)
{
	size_t n;

	if (!name || !*name)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "name must not be empty");
	n = strlen(name);
	if (n > 48)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "name \"%.60s\" is %zu characters long; "
				     "the limit is 48",
				     name, n);
	if (!((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "name \"%s\" must start with a lower-case "
				     "letter or '_'",
				     name);
	for (size_t i = 1; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return pgo_error_set(err, PGO_ERR_INVALID, 0,
					     "name \"%s\" has '%c' at position "
					     "%zu; use a-z, 0-9 and '_'",
					     name, c, i + 1);
	}
	if (strncmp(name, "pg_", 3) == 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "name \"%s\" must not start with pg_",
				     name);
	pgo_error_clear(err);
	return PGO_OK;
}

/* Runs one command; PGO_OK or PGO_ERR_DB with the server's message. */
static int exec_ok(PGconn *conn, const char *sql, const char *what,
		   pgo_error_t *err)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int rc = PGO_OK;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		const char *detail =
			PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

		rc = pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
				   "%s: %s%s%s%s", what, pgo_pq_msg(conn, res),
				   detail ? " (" : "", detail ? detail : "",
				   detail ? ")" : "");
	}
	PQclear(res);
	return rc;
}

/* The schema versions that break binaries knowing only earlier ones:
 * a binary of version N that meets a database at M > N keeps working
 * unless one of N+1..M is here (recorded by `migrate` in
 * pgoutbox.migrations.breaks_older, where an older binary reads it).
 * Up to 18 every version did (binaries refused any other version).
 * 19 does: claims of a binary of 18 ignore pause() and set_queue()
 * limits (queue_controls).  20 does: a binary of 18 cannot relay a
 * queue captured through the WAL.  21 (WAL dead letters) does not.
 * 22 does: relays of 20 ignore the pause of an outbox and its fair
 * claims, and their workers claim jobs whose dependencies are not done.
 * 23 does: WAL queues' messages carry no created_at, which relays of 22
 * would leave empty.  24 does: a relay of 23 would claim a table adopted
 * with capture wal as a table (it streams nothing).  A version that only
 * adds objects the older binaries never use does not: leave it out. */
static bool breaks_older(int version)
{
	return version <= 20 || (version >= 22 && version <= 24);
}

const char pgo_schema_seen_sql[] =
	"SELECT coalesce(max(version), 0),"
	" coalesce(max(version) FILTER (WHERE version > $1::int AND"
	" (to_jsonb(m) ->> 'breaks_older') IS DISTINCT FROM 'false'), 0),"
	" (array_agg(to_jsonb(m) ->> 'release' ORDER BY version DESC))[1]"
	" FROM pgoutbox.migrations m";

void pgo_schema_seen_parse(const PGresult *res, pgo_schema_seen_t *seen)
{
	memset(seen, 0, sizeof(*seen));
	seen->version = atoi(PQgetvalue(res, 0, 0));
	seen->breaks = atoi(PQgetvalue(res, 0, 1));
	if (!PQgetisnull(res, 0, 2))
		snprintf(seen->needs, sizeof(seen->needs), "%s",
			 PQgetvalue(res, 0, 2));
}

int pgo_schema_verdict(const pgo_schema_seen_t *seen, bool *newer,
		       pgo_error_t *err)
{
	int known = pgo_schema_version();
	int db_version = seen->version;

	if (newer)
		*newer = false;
	if (db_version > known && seen->breaks > known && seen->needs[0])
		return pgo_error_set(
			err, PGO_ERR_SCHEMA, 0,
			"the database schema is version %d and needs pgoutbox "
			">= %s (this is %s, which knows up to version %d; "
			"version %d breaks it): upgrade pgoutbox",
			db_version, seen->needs, PGO_VERSION, known,
			seen->breaks);
	if (db_version > known && seen->breaks > known)
		return pgo_error_set(
			err, PGO_ERR_SCHEMA, 0,
			"the database schema is version %d but this pgoutbox "
			"(%s) knows up to version %d (version %d breaks it): "
			"upgrade pgoutbox",
			db_version, PGO_VERSION, known, seen->breaks);
	if (db_version > known) {
		if (newer)
			*newer = true;
		pgo_error_clear(err);
		return PGO_OK;
	}
	if (db_version == 0)
		return pgo_error_set(err, PGO_ERR_SCHEMA, 1,
				     "schema pgoutbox is not installed in this "
				     "database: run `pgoutbox migrate`");
	if (db_version < known)
		return pgo_error_set(
			err, PGO_ERR_SCHEMA, 1,
			"the database schema is version %d, this "
			"pgoutbox needs %d: run `pgoutbox migrate`",
			db_version, known);
	pgo_error_clear(err);
	return PGO_OK;
}

int pgo_schema_read(PGconn *conn, pgo_schema_seen_t *seen, pgo_error_t *err)
{
	/* Two steps: a query naming a missing table fails at parse time. */
	PGresult *res =
		PQexec(conn, "SELECT to_regclass('pgoutbox.migrations') "
			     "IS NOT NULL");
	int rc = PGO_OK;

	memset(seen, 0, sizeof(*seen));
	if (PQresultStatus(res) == PGRES_TUPLES_OK &&
	    strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
		char known[16];
		const char *params[1] = {known};

		snprintf(known, sizeof(known), "%d", pgo_schema_version());
		PQclear(res);
		res = PQexecParams(conn, pgo_schema_seen_sql, 1, NULL, params,
				   NULL, NULL, 0);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
				   "reading the schema version: %s",
				   pgo_pq_msg(conn, res));
	else if (PQnfields(res) == 3 /* else no table */)
		pgo_schema_seen_parse(res, seen);
	PQclear(res);
	return rc;
}

int pgo_schema_read_version(PGconn *conn, int *version, pgo_error_t *err)
{
	pgo_schema_seen_t seen;
	int rc = pgo_schema_read(conn, &seen, err);

	*version = seen.version;
	return rc;
}

int pgo_schema_check(PGconn *conn, pgo_error_t *err)
{
	pgo_schema_seen_t seen;
	int rc = pgo_schema_read(conn, &seen, err);

	if (rc != PGO_OK)
		return rc;
	return pgo_schema_verdict(&seen, NULL, err);
}

/* Records that the database has reached version m->version. */
static int record_version(PGconn *conn, const struct pgo_migration *m,
			  pgo_error_t *err)
{
	const char *params[4];
	char version[16];
	PGresult *res;
	int rc = PGO_OK;

	snprintf(version, sizeof(version), "%d", m->version);
	params[0] = version;
	params[1] = m->name;
	params[2] = breaks_older(m->version) ? "true" : "false";
	params[3] = PGO_VERSION;
	res = PQexecParams(conn,
			   "INSERT INTO pgoutbox.migrations "
			   "(version, name, breaks_older, release) "
			   "VALUES ($1, $2, $3, $4)",
			   4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = pgo_error_set(err, PGO_ERR_DB, pgo_pq_retriable(conn, res),
				   "recording %s: %s", m->name,
				   pgo_pq_msg(conn, res));
	PQclear(res);
	return rc;
}

/* A fresh install of the newest version from sql/schema/: one row in
 * pgoutbox.migrations, that version's. */
static int install(PGconn *conn, pgo_error_t *err)
{
	const struct pgo_migration *newest =
		&pgo_migrations[pgo_migrations_count - 1];
	int rc;

	pgo_log(PGO_LOG_INFO, "migrate", "installing version %d (%s)",
		newest->version, newest->name);
	rc = exec_ok(conn, pgo_schema_install, "installing the schema", err);
	return rc == PGO_OK ? record_version(conn, newest, err) : rc;
}

/* The upgrade steps after current up to target, each recorded; when
 * target is the newest version, the functions and grants of sql/schema/
 * again, so that the result is what a fresh install makes. */
static int upgrade(PGconn *conn, int current, int target, pgo_error_t *err)
{
	int rc = PGO_OK;

	for (int i = 0; rc == PGO_OK && i < pgo_migrations_count; i++) {
		const struct pgo_migration *m = &pgo_migrations[i];

		if (m->version <= current || m->version > target)
			continue;
		pgo_log(PGO_LOG_INFO, "migrate", "applying %s", m->name);
		rc = exec_ok(conn, m->sql, m->name, err);
		if (rc == PGO_OK)
			rc = record_version(conn, m, err);
	}
	if (rc == PGO_OK && current < target &&
	    target == pgo_schema_version()) {
		pgo_log(PGO_LOG_INFO, "migrate",
			"defining the functions and grants of version %d",
			target);
		rc = exec_ok(conn, pgo_schema_definitions,
			     "defining the functions", err);
	}
	return rc;
}

int pgo_migrate(PGconn *conn, int *from, int *to, pgo_error_t *err)
{
	return pgo_migrate_to(conn, pgo_schema_version(), from, to, err);
}

int pgo_migrate_to(PGconn *conn, int target, int *from, int *to,
		   pgo_error_t *err)
{
	char sql[256];
	pgo_schema_seen_t seen = {0};
	int current = 0;
	int rc;

	if (target < 1 || target > pgo_schema_version())
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "no schema version %d: this pgoutbox "
				     "knows 1 to %d",
				     target, pgo_schema_version());
	if (PQtransactionStatus(conn) != PQTRANS_IDLE)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "migrate needs an idle connection, "
				     "not one inside a transaction");
	rc = exec_ok(conn, "BEGIN", "begin", err);
	if (rc != PGO_OK)
		return rc;
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d, %d)",
		 PGO_LOCK_NS, PGO_LOCK_MIGRATE);
	rc = exec_ok(conn, sql, "taking the migration lock", err);
	if (rc == PGO_OK) /* no "already exists, skipping" notices */
		rc = exec_ok(conn, "SET LOCAL client_min_messages = warning",
			     "set", err);
	if (rc == PGO_OK)
		rc = pgo_schema_read(conn, &seen, err);
	current = seen.version;
	if (rc == PGO_OK && current > pgo_schema_version()) {
		seen.breaks = current; /* an older binary never migrates */
		rc = pgo_schema_verdict(&seen, NULL, err);
	}
	if (rc == PGO_OK)
		rc = exec_ok(conn,
			     "CREATE SCHEMA IF NOT EXISTS pgoutbox;"
			     "CREATE TABLE IF NOT EXISTS pgoutbox.migrations ("
			     " version integer PRIMARY KEY,"
			     " name text NOT NULL,"
			     " applied_at timestamptz NOT NULL DEFAULT now());"
			     /* read by binaries that meet a newer
			      * schema (pgo_schema_verdict) */
			     "ALTER TABLE pgoutbox.migrations"
			     " ADD COLUMN IF NOT EXISTS breaks_older boolean,"
			     " ADD COLUMN IF NOT EXISTS release text",
			     "creating schema pgoutbox", err);
	if (from)
		*from = current;
	if (rc == PGO_OK && current == 0 && target == pgo_schema_version())
		rc = install(conn, err);
	else if (rc == PGO_OK)
		rc = upgrade(conn, current, target, err);
	if (rc != PGO_OK) {
		PGresult *res = PQexec(conn, "ROLLBACK");

		PQclear(res);
		return rc;
	}
	rc = exec_ok(conn, "COMMIT", "commit", err);
	if (rc == PGO_OK && to)
		*to = current > target ? current : target;
	return rc;
}
