-- install.sql: a fresh install of the newest schema version, in one
-- transaction of `pgoutbox migrate` on a database without schema
-- pgoutbox (the runner creates the schema and pgoutbox.migrations, then
-- runs this, expanded at build time by tools/embed_sql.py, and records
-- the version).  To look at it in a scratch database, by hand:
--   psql -v ON_ERROR_STOP=1 -1 -c 'CREATE SCHEMA pgoutbox' -f sql/schema/install.sql
\ir tables.sql
\ir definitions.sql
\ir data.sql
\ir triggers.sql
