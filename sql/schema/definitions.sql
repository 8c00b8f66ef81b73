-- definitions.sql: what every `pgoutbox migrate` that reaches the newest
-- schema version (re)defines: the functions and the grants.  After the
-- upgrade steps of sql/upgrade/ (or after tables.sql on a fresh install),
-- so that an upgraded database and a fresh one have the same functions.
\ir functions.sql
\ir grants.sql
