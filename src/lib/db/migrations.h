/*
 * migrations.h — the SQL migrations embedded from sql/ at build time
 * (tools/embed_sql.py writes the table).
 */
#ifndef PGO_MIGRATIONS_H
#define PGO_MIGRATIONS_H

struct pgo_migration {
	int version;	  /* 1, 2, 3 ... without gaps */
	const char *name; /* file name without .sql, e.g. "001_init" */
	const char *sql;  /* applied in the migration transaction */
};

extern const struct pgo_migration pgo_migrations[];
extern const int pgo_migrations_count;

#endif
