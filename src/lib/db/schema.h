/*
 * db/schema.h — what the runners ask of the schema beside the public
 * pgo_schema_*() calls: the applied version and the verdict on it.
 */
#ifndef PGO_DB_SCHEMA_H
#define PGO_DB_SCHEMA_H

#include "pgoutbox.h"

/* What pgoutbox.migrations says: the applied version (0 if none), the
 * newest version above this binary's that breaks older binaries (0 if
 * none) and the pgoutbox release that applied the newest version ("" if
 * not recorded). */
typedef struct pgo_schema_seen {
	int version;
	int breaks;
	char needs[32];
} pgo_schema_seen_t;

/* The statement that reads it, with this binary's version as $1 (a
 * query naming a missing table fails: no schema). */
extern const char pgo_schema_seen_sql[];
/* Fills seen from that statement's result. */
void pgo_schema_seen_parse(const PGresult *res, pgo_schema_seen_t *seen);

/* Reads the applied schema version (0 if none) on an idle connection. */
int pgo_schema_read_version(PGconn *conn, int *version, pgo_error_t *err);
/* Reads pgo_schema_seen_t (version 0 if none) on an idle connection. */
int pgo_schema_read(PGconn *conn, pgo_schema_seen_t *seen, pgo_error_t *err);
/* The message for a version mismatch, or PGO_OK when the version matches
 * or is newer without a version that breaks this binary (*newer set). */
int pgo_schema_verdict(const pgo_schema_seen_t *seen, bool *newer,
		       pgo_error_t *err);

#endif /* PGO_DB_SCHEMA_H */
