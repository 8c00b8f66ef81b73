/*
 * db/schema.h — what the runners ask of the schema beside the public
 * pgo_schema_*() calls: the applied version and the verdict on it.
 */
#ifndef PGO_DB_SCHEMA_H
#define PGO_DB_SCHEMA_H

#include "pgoutbox.h"

/* Reads the applied schema version (0 if none) on an idle connection. */
int pgo_schema_read_version(PGconn *conn, int *version, pgo_error_t *err);
/* The message for a version mismatch, or NULL when version matches. */
int pgo_schema_verdict(int db_version, pgo_error_t *err);

#endif /* PGO_DB_SCHEMA_H */
