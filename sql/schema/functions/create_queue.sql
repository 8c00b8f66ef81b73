-- Creates a work queue (the older form; create_queue(name, shards, kind)
-- below makes either kind).
--
-- Reserved queue names.  pgoutbox creates tables of its own in schema
-- pgoutbox: <queue>_archive with its day partitions
-- <queue>_archive_YYYYMMDD (005), inbox_YYYYMMDD (003) and
-- cron_history_YYYYMMDD (008).  A work queue named like one of them took
-- its place: `queue create outbox_archive_20261201`, then archiving the
-- outbox, left that day without a partition and halted the relay (no
-- partition of relation ... found for row).  create_queue() refuses these
-- names (src/lib/queue/queue.c refuses them too, before connecting);
-- queues that already have such a name are left alone.
CREATE OR REPLACE FUNCTION pgoutbox.create_queue(name text, shards integer DEFAULT 64)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q text := create_queue.name;
BEGIN
    IF q IS NULL OR q !~ '^[a-z_][a-z0-9_]*$' OR length(q) > 48 OR q LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: invalid queue name "%": use a lower-case identifier of at most 48 characters ([a-z_][a-z0-9_]*, not pg_...)', q
            USING ERRCODE = 'invalid_name';
    END IF;
    IF q ~ '_archive(_[0-9]{8})?$' OR q ~ '^(inbox|cron_history)_[0-9]{8}$' THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: queue name "%" is reserved: names ending in _archive or _archive_YYYYMMDD, inbox_YYYYMMDD and cron_history_YYYYMMDD are those of the archive, inbox and cron history partitions; choose another name', q
            USING ERRCODE = 'reserved_name';
    END IF;
    IF shards IS NULL OR shards NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: shards must be between 1 and 4096, not %', shards
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM pgoutbox.queues x WHERE x.name = q)
       OR to_regclass(format('pgoutbox.%I', q)) IS NOT NULL THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: queue (or table) pgoutbox.% already exists', q
            USING ERRCODE = 'duplicate_table';
    END IF;
    EXECUTE format($f$
        CREATE TABLE pgoutbox.%1$I (
            id           bigserial   PRIMARY KEY,
            topic        text        NOT NULL DEFAULT 'job' CHECK (topic <> ''),
            key          text,
            type         text        NOT NULL DEFAULT '',
            payload      jsonb       NOT NULL,
            headers      jsonb       NOT NULL DEFAULT '{}',
            created_at   timestamptz NOT NULL DEFAULT now(),
            run_at       timestamptz NOT NULL DEFAULT now(),
            attempts     integer     NOT NULL DEFAULT 0,
            last_error   text,
            locked_by    text,
            locked_until timestamptz,
            priority     integer     NOT NULL DEFAULT 0,
            unique_key   text,
            epoch        bigint      NOT NULL DEFAULT 0,  -- lease fencing token
            shard        integer GENERATED ALWAYS AS (%2$s) STORED,
            group_key    text,  -- its group: pgoutbox.set_queue's group_concurrency
            depends_on   bigint[],  -- jobs done before it is claimed (deps_cond)
            CONSTRAINT %3$I CHECK (pg_column_size(payload) <= 1048576),
            CONSTRAINT %4$I CHECK (jsonb_typeof(headers) = 'object')
        )$f$, q, pgoutbox.shard_expr(shards), q || '_payload_max_1mib', q || '_headers_object');
    EXECUTE format('CREATE UNIQUE INDEX %I ON pgoutbox.%I (unique_key) WHERE unique_key IS NOT NULL',
                   q || '_unique_key', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (priority DESC, id)', q || '_claim', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (locked_until) WHERE locked_until IS NOT NULL',
                   q || '_leased', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (group_key, priority DESC, id) '
                   'WHERE group_key IS NOT NULL', q || '_group', q);
    EXECUTE format('ALTER TABLE pgoutbox.%I SET (autovacuum_vacuum_scale_factor = 0.01, '
                   'autovacuum_vacuum_insert_scale_factor = 0.05)', q);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON pgoutbox.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox()', q || '_notify', q);
    INSERT INTO pgoutbox.queues (name, shards, kind) VALUES (q, shards, 'work');
    INSERT INTO pgoutbox.shard_leases (queue, shard)
    SELECT q, s FROM generate_series(-1, shards - 1) s;
END $$;

-- Creates a queue of either kind.  'work': create_queue(name, shards).
-- 'outbox': a table with pgoutbox.outbox's columns, indexes and wake-up
-- trigger, relayed by `pgoutbox relay --queue NAME` and written by
-- send_to(NAME, ...).  The name, the shards and the table are checked
-- (and the queue registered, with its shard leases and caps) by the work
-- queue's function, so that one definition holds those rules; the
-- work queue's own columns and indexes are then taken off.
CREATE OR REPLACE FUNCTION pgoutbox.create_queue(name text, shards integer, kind text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q    text := create_queue.name;
    wake regproc;
BEGIN
    IF kind IS NULL OR kind NOT IN ('work', 'outbox') THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: kind must be work or outbox, not %', coalesce(kind, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pgoutbox.create_queue(q, shards);
    IF kind = 'work' THEN
        RETURN;
    END IF;
    -- Dropping the columns drops their indexes (_unique_key, _claim,
    -- _group).
    EXECUTE format('DROP INDEX pgoutbox.%I', q || '_leased');
    EXECUTE format('ALTER TABLE pgoutbox.%I DROP COLUMN priority, DROP COLUMN unique_key, '
                   'DROP COLUMN epoch, DROP COLUMN group_key, DROP COLUMN depends_on, '
                   'ALTER COLUMN topic DROP DEFAULT', q);
    -- The outbox's partial indexes (002 and 006): what an ordered claim
    -- waits behind, and what a claim takes below its floor.
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (key, id) WHERE attempts > 0', q || '_retrying', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (id) WHERE attempts > 0 OR last_error IS NOT NULL',
                   q || '_behind', q);
    -- Producers wake its relays the way the outbox's do: the function of
    -- the outbox's own trigger.
    SELECT t.tgfoid::regproc INTO wake FROM pg_catalog.pg_trigger t
     WHERE t.tgrelid = 'pgoutbox.outbox'::regclass AND t.tgname = 'outbox_notify';
    EXECUTE format('DROP TRIGGER %I ON pgoutbox.%I', q || '_notify', q);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON pgoutbox.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %s()', q || '_notify', q,
                   coalesce(wake, 'pgoutbox.notify_outbox'::regproc));
    UPDATE pgoutbox.queues x SET kind = 'outbox' WHERE x.name = q;
END $$;

COMMENT ON FUNCTION pgoutbox.create_queue(text, integer, text) IS
    'Creates a work queue (kind work) or an outbox of its own (kind outbox) named name with shards shards.';

-- Creates a queue of either kind, capturing an outbox's events either
-- way (docs/wal.md).  capture 'table': create_queue(name, shards, kind).
-- capture 'wal' (kind outbox only): producers write a logical message
-- each instead of a row, streamed by the relay from the logical
-- replication slot pgoutbox_<name> (pgoutput) with the publication
-- pgoutbox_<name>, created here.  The queue's table is made all the
-- same and stays empty: its id sequence numbers the events.
--
-- The slot is made first, while this transaction has written nothing:
-- PostgreSQL creates a logical slot only in a transaction without
-- writes (so call this in a transaction of its own), and a slot is not
-- transactional: it stays when what follows fails, and a later call
-- takes it over.  Its owner needs the REPLICATION attribute (or to be
-- a superuser) for the slot.
CREATE OR REPLACE FUNCTION pgoutbox.create_queue(name text, shards integer, kind text, capture text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q    text := create_queue.name;
    slot text := 'pgoutbox_' || create_queue.name;
    db   name;
BEGIN
    IF capture IS NULL OR capture NOT IN ('table', 'wal') THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: capture must be table or wal, not %', coalesce(capture, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF capture = 'table' THEN
        PERFORM pgoutbox.create_queue(q, shards, kind);
        RETURN;
    END IF;
    IF kind IS DISTINCT FROM 'outbox' THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: capture wal is for outbox queues, not kind %', coalesce(kind, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('wal_level') <> 'logical' THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: capture wal needs wal_level = logical, and this server runs wal_level = %', current_setting('wal_level')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Set wal_level = logical (ALTER SYSTEM SET wal_level = logical, or in postgresql.conf) and restart PostgreSQL; max_replication_slots and max_wal_senders must leave room for one slot and one sender per WAL queue.';
    END IF;
    IF q IS NULL OR q !~ '^[a-z_][a-z0-9_]*$' OR length(q) > 48 OR q LIKE 'pg\_%'
       OR EXISTS (SELECT 1 FROM pgoutbox.queues x WHERE x.name = q) THEN
        PERFORM pgoutbox.create_queue(q, shards, kind);  -- raises its error
    END IF;
    -- Slot names are the cluster's: a slot of this name made for another
    -- database (or a physical one) is not this queue's to stream.  One of
    -- this database, left by a queue or an adoption of this name, is kept.
    SELECT s.database INTO db FROM pg_replication_slots s WHERE s.slot_name = slot;
    IF FOUND AND db IS DISTINCT FROM current_database() THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: the replication slot % exists already, for database % (slot names are the cluster''s)', slot, coalesce(db, '(none: a physical slot)')
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Choose another queue name, or drop that slot (SELECT pg_drop_replication_slot(''' || slot || ''')) if nothing streams it.';
    ELSIF NOT FOUND THEN
        PERFORM pg_create_logical_replication_slot(slot, 'pgoutput');
    END IF;
    PERFORM pgoutbox.create_queue(q, shards, kind);
    UPDATE pgoutbox.queues x SET capture = 'wal' WHERE x.name = q;
    -- The ids' sequence is named <queue>$wal: send_to() knows a WAL
    -- queue by it (no queue name has a $).
    EXECUTE format('ALTER SEQUENCE pgoutbox.%I RENAME TO %I', q || '_id_seq', q || '$wal');
END $$;

COMMENT ON FUNCTION pgoutbox.create_queue(text, integer, text, text) IS
    'Creates a queue (kind work or outbox); an outbox with capture wal is written as logical messages and relayed from the slot pgoutbox_<name>.';
