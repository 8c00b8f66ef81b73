/*
 * migrations.h — the schema embedded from sql/ at build time
 * (tools/embed_sql.py writes it; sql/README.md tells the layout): the
 * fresh install and the definitions from sql/schema/, and the frozen
 * upgrade steps of sql/upgrade/.
 */
#ifndef PGO_MIGRATIONS_H
#define PGO_MIGRATIONS_H

/* An upgrade step: from version - 1 to version. */
struct pgo_migration {
	int version;	  /* 1, 2, 3 ... without gaps */
	const char *name; /* file name without .sql, e.g. "001_init" */
	const char *sql;  /* applied in the migration transaction */
};

extern const struct pgo_migration pgo_migrations[];
extern const int pgo_migrations_count;

/* sql/schema/install.sql: the newest version on a database without it. */
extern const char pgo_schema_install[];
/* sql/schema/definitions.sql: the functions and grants, run again after
 * the steps of every upgrade that reaches the newest version. */
extern const char pgo_schema_definitions[];

#endif
