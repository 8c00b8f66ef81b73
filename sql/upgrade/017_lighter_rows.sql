-- 017_lighter_rows: a row of a queue table costs its INSERT less (issue
-- 17): the checks on an event's fields move into domain types, and the
-- stored generated column shard goes; the relay computes a row's shard
-- where it reads it.
--
-- PostgreSQL prepares a table's CHECK constraints and its stored
-- generated columns again at every execution of an INSERT or COPY, even a
-- prepared one (ExecRelCheck and ExecComputeStoredGenerated, through
-- ExecPrepareExpr); a domain's checks are kept in the type cache for the
-- session.  pgbench, 8 clients of one send() per transaction, three
-- interleaved rounds (docs/benchmarks.md, "Morning of 2026-12-03"):
-- 11,890-12,466 tps before, 12,356-12,714 with the checks in domains,
-- 13,475-13,782 with the shard column gone as well.
--
-- The checks and their limits are those of 001, 004 and 014: topic not
-- empty and at most 256 bytes, type at most 256 bytes, key at most 1024,
-- payload at most 1 MiB, headers a JSON object of at most 64 KiB (sizes
-- as given, before TOAST compresses them).  A violation is still a
-- check_violation (SQLSTATE 23514), now reported as
--   value for domain pgoutbox.event_topic violates check constraint "event_topic_max_256"
-- where it named the table's constraint (outbox_topic_max_256).
--
-- The shard of a row is what the column held,
-- pgoutbox.shard_of(key, id, shards); the relay's ordered claim computes
-- it from the key and the id (src/lib/relay/claim.c), and so can any SQL.
--
-- No table is rewritten: the columns change to domains that have no
-- constraint yet (binary coercible, nothing is read), the domains'
-- constraints come after, NOT VALID (as the caps of 014: rows already
-- queued are not checked again, new ones are), and a dropped column is
-- only marked so.  Each ALTER TABLE holds an exclusive lock on its queue
-- table until the migration commits.

CREATE DOMAIN pgoutbox.event_topic AS text;
CREATE DOMAIN pgoutbox.event_key AS text;
CREATE DOMAIN pgoutbox.event_type AS text;
CREATE DOMAIN pgoutbox.event_payload AS jsonb;
CREATE DOMAIN pgoutbox.event_headers AS jsonb;

-- A queue table's new shape: its field checks dropped (topic <> '', named
-- by PostgreSQL, <q>_payload_max_1mib, <q>_headers_object and the caps of
-- 014: every CHECK on those five columns alone), the columns as domains,
-- no shard column.  For the queues that exist now and, from the trigger
-- of 014 on pgoutbox.queues, every queue created later: create_queue()
-- still makes its table the old way, and this reshapes it while it is
-- empty.  It keeps 014's name, add_caps, which that trigger calls.
CREATE OR REPLACE FUNCTION pgoutbox.add_caps(q text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tbl regclass := to_regclass(format('pgoutbox.%I', q));
    c name;
BEGIN
    IF tbl IS NULL THEN
        RETURN;
    END IF;
    FOR c IN
        SELECT k.conname FROM pg_constraint k
         WHERE k.conrelid = tbl AND k.contype = 'c'
           AND k.conkey <@ ARRAY(SELECT a.attnum FROM pg_attribute a
                                  WHERE a.attrelid = tbl
                                    AND a.attname IN ('topic', 'key', 'type', 'payload', 'headers'))
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, c);
    END LOOP;
    EXECUTE format('ALTER TABLE %s DROP COLUMN IF EXISTS shard, '
                   'ALTER COLUMN topic TYPE pgoutbox.event_topic, '
                   'ALTER COLUMN key TYPE pgoutbox.event_key, '
                   'ALTER COLUMN type TYPE pgoutbox.event_type, '
                   'ALTER COLUMN payload TYPE pgoutbox.event_payload, '
                   'ALTER COLUMN headers TYPE pgoutbox.event_headers', tbl);
END $$;

-- The queues that exist now.
SELECT pgoutbox.add_caps(name) FROM pgoutbox.queues;

-- After the columns changed: a constraint added to a domain that columns
-- use is checked against their rows, unless NOT VALID.
ALTER DOMAIN pgoutbox.event_topic ADD CONSTRAINT event_topic_not_empty CHECK (VALUE <> '') NOT VALID;
ALTER DOMAIN pgoutbox.event_topic ADD CONSTRAINT event_topic_max_256 CHECK (octet_length(VALUE) <= 256) NOT VALID;
ALTER DOMAIN pgoutbox.event_key ADD CONSTRAINT event_key_max_1024 CHECK (octet_length(VALUE) <= 1024) NOT VALID;
ALTER DOMAIN pgoutbox.event_type ADD CONSTRAINT event_type_max_256 CHECK (octet_length(VALUE) <= 256) NOT VALID;
ALTER DOMAIN pgoutbox.event_payload ADD CONSTRAINT event_payload_max_1mib CHECK (pg_column_size(VALUE) <= 1048576) NOT VALID;
ALTER DOMAIN pgoutbox.event_headers ADD CONSTRAINT event_headers_object CHECK (jsonb_typeof(VALUE) = 'object') NOT VALID;
ALTER DOMAIN pgoutbox.event_headers ADD CONSTRAINT event_headers_max_64k CHECK (pg_column_size(VALUE) <= 65536) NOT VALID;
