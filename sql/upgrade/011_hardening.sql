-- 011_hardening: what issue 19 found an attacker or a careless user could
-- do to the schema.
--
-- Each runner checks the kind of its queue at start: queue_kind() below.
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
-- create_queue() as in 007, plus the reserved names.
CREATE OR REPLACE FUNCTION pgoutbox.create_queue(name text, shards integer DEFAULT 64)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
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
            CONSTRAINT %3$I CHECK (pg_column_size(payload) <= 1048576),
            CONSTRAINT %4$I CHECK (jsonb_typeof(headers) = 'object')
        )$f$, q, pgoutbox.shard_expr(shards), q || '_payload_max_1mib', q || '_headers_object');
    EXECUTE format('CREATE UNIQUE INDEX %I ON pgoutbox.%I (unique_key) WHERE unique_key IS NOT NULL',
                   q || '_unique_key', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (priority DESC, id)', q || '_claim', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (locked_until) WHERE locked_until IS NOT NULL',
                   q || '_leased', q);
    EXECUTE format('ALTER TABLE pgoutbox.%I SET (autovacuum_vacuum_scale_factor = 0.01, '
                   'autovacuum_vacuum_insert_scale_factor = 0.05)', q);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON pgoutbox.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox()', q || '_notify', q);
    INSERT INTO pgoutbox.queues (name, shards, kind) VALUES (q, shards, 'work');
    INSERT INTO pgoutbox.shard_leases (queue, shard)
    SELECT q, s FROM generate_series(-1, shards - 1) s;
END $$;

-- The kind of a queue ('outbox' or 'work'; NULL when there is none), for
-- the runners' check at start: a relay refuses a work queue (it would
-- publish and delete its jobs), a worker the outbox.  Their roles need no
-- grant on pgoutbox.queues for it; a queue's kind is no secret.
CREATE FUNCTION pgoutbox.queue_kind(queue text) RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT q.kind FROM pgoutbox.queues q WHERE q.name = queue_kind.queue
$$;

-- SECURITY DEFINER functions and the caller's temporary tables.  With
-- `SET search_path = pg_catalog` alone, PostgreSQL searches the caller's
-- temporary schema FIRST for tables and types (it does so whenever
-- pg_temp is not named in the path), so a caller's temporary table
-- pg_locks, pg_class or pg_stat_activity took the catalog's place inside
-- functions that run as their owner: claim_floor() could be fed fake lock
-- holders (and move the floor past uncommitted events), rebalance()
-- forget live members, leave() keep its leases, health() hide what holds
-- the xmin horizon, maintain() and inbox_maintain() drop or keep the
-- wrong partitions.  Every function below names the catalog relations it
-- reads with their schema, and every SECURITY DEFINER function of the
-- schema (and archive_partitions, which maintain() runs as the owner)
-- searches pg_catalog, then pg_temp, last.  The bodies are those of 002,
-- 003, 005, 006 and 008 with only the catalog names qualified;
-- rebalance() is 010_takeover's, which does both already.

CREATE OR REPLACE FUNCTION pgoutbox.leave(p_queue text, p_member text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns integer := pgoutbox.lease_ns(p_queue);
    s  integer;
BEGIN
    FOR s IN SELECT DISTINCT l.objid::bigint::bit(32)::integer FROM pg_catalog.pg_locks l
              WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
                AND l.classid = ns::oid AND l.pid = pg_backend_pid() LOOP
        PERFORM pg_advisory_unlock(ns, s);
    END LOOP;
    DELETE FROM pgoutbox.relays r WHERE r.queue = p_queue AND r.member = p_member;
END $$;

CREATE OR REPLACE FUNCTION pgoutbox.inbox_maintain(dedup_window interval DEFAULT '7 days',
                                        OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    day   date;
    part  text;
BEGIN
    IF dedup_window IS NULL OR dedup_window < interval '1 hour' THEN
        RAISE EXCEPTION 'pgoutbox.inbox_maintain: the dedup window must be at least 1 hour, not %',
            coalesce(dedup_window::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    created := 0;
    dropped := 0;
    PERFORM pg_advisory_xact_lock(1885826936, 2);   -- pgoutbox's key space, inbox maintenance
    FOR i IN 0..2 LOOP
        day := today + i;
        part := 'inbox_' || to_char(day, 'YYYYMMDD');
        IF to_regclass('pgoutbox.' || part) IS NULL THEN
            EXECUTE format('CREATE TABLE pgoutbox.%I PARTITION OF pgoutbox.inbox '
                           'FOR VALUES FROM (%L) TO (%L)',
                           part, day::text || ' 00:00:00+00', (day + 1)::text || ' 00:00:00+00');
            created := created + 1;
        END IF;
    END LOOP;
    FOR part IN
        SELECT c.relname
          FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
         WHERE h.inhparent = 'pgoutbox.inbox'::regclass
           AND c.relname ~ '^inbox_[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        -- A partition's rows are all older than its day's end.
        IF (to_date(substr(part, 7), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC'
           <= now() - dedup_window THEN
            EXECUTE format('DROP TABLE pgoutbox.%I', part);
            dropped := dropped + 1;
        END IF;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION pgoutbox.archive_partitions(p_queue text, p_days integer,
                                            OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp  -- maintain() runs it as the owner
AS $$
DECLARE
    parent text := p_queue || '_archive';
    today  date := (now() AT TIME ZONE 'UTC')::date;
    day    date;
    part   text;
BEGIN
    created := 0;
    dropped := 0;
    FOR i IN -1..2 LOOP
        day := today + i;
        part := parent || '_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(format('pgoutbox.%I', part)) IS NULL THEN
            EXECUTE format('CREATE TABLE pgoutbox.%I PARTITION OF pgoutbox.%I '
                           'FOR VALUES FROM (%L) TO (%L)', part, parent,
                           day::text || ' 00:00:00+00', (day + 1)::text || ' 00:00:00+00');
            created := created + 1;
        END IF;
    END LOOP;
    FOR part IN
        SELECT c.relname FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
         WHERE h.inhparent = format('pgoutbox.%I', parent)::regclass
           AND c.relname ~ ('^' || parent || '_[0-9]{8}$')
         ORDER BY c.relname
    LOOP
        -- Every row of a partition is older than the end of its day.
        IF (to_date(right(part, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC'
           <= now() - make_interval(days => p_days) THEN
            EXECUTE format('DROP TABLE pgoutbox.%I', part);
            dropped := dropped + 1;
        END IF;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION pgoutbox.health(p_min_age interval DEFAULT '1 minute',
                                p_dead_tuples bigint DEFAULT 100000)
RETURNS TABLE (kind text, subject text, age interval, detail text)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- sees every session's xmin
AS $$
    SELECT 'xmin', format('pid %s (%s)', a.pid, coalesce(nullif(a.application_name, ''), a.usename::text)),
           now() - a.xact_start,
           format('%s transaction open for %s holds back vacuum (xmin age %s)',
                  a.state, date_trunc('second', now() - a.xact_start), age(a.backend_xmin))
      FROM pg_catalog.pg_stat_activity a
     WHERE a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid()
       AND a.xact_start < now() - p_min_age
    UNION ALL
    SELECT 'slot', s.slot_name, NULL::interval,
           format('replication slot (%s, %s) pins xmin age %s',
                  s.slot_type, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
                  greatest(age(s.xmin), age(s.catalog_xmin)))
      FROM pg_catalog.pg_replication_slots s
     WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
    UNION ALL
    SELECT 'dead_tuples', format('pgoutbox.%s', t.relname), NULL::interval,
           format('%s dead tuples (%s live); last autovacuum %s',
                  t.n_dead_tup, t.n_live_tup, coalesce(t.last_autovacuum::text, 'never'))
      FROM pg_catalog.pg_stat_user_tables t
     WHERE t.schemaname = 'pgoutbox' AND t.n_dead_tup >= p_dead_tuples
     ORDER BY 1, 3 DESC NULLS LAST
$$;

CREATE OR REPLACE FUNCTION pgoutbox.claim_floor(queue text, floor bigint, line bigint,
                                     writers text[],
                                     OUT new_floor bigint, OUT new_line bigint,
                                     OUT new_writers text[])
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- reads the sequence and pg_locks
AS $$
DECLARE
    tbl   regclass;
    first bigint;
BEGIN
    new_floor := coalesce(floor, 0);
    new_line := line;
    new_writers := writers;
    IF NOT EXISTS (SELECT 1 FROM pgoutbox.queues q
                    WHERE q.name = claim_floor.queue AND q.kind = 'outbox') THEN
        new_floor := 0;
        new_line := NULL;
        RETURN;
    END IF;
    tbl := format('pgoutbox.%I', queue)::regclass;
    IF new_line IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_locks k
             WHERE k.locktype = 'relation' AND k.relation = tbl
               AND k.database = (SELECT oid FROM pg_catalog.pg_database
                                  WHERE datname = current_database())
               AND k.mode = 'RowExclusiveLock'
               AND k.virtualtransaction = ANY(new_writers)) THEN
        -- Everything up to the line is settled: move to the first fresh
        -- row at or above the old floor, or just past the line.
        EXECUTE format('SELECT id FROM pgoutbox.%I WHERE id >= $1 AND id <= $2 '
                       'AND attempts = 0 AND last_error IS NULL ORDER BY id LIMIT 1',
                       queue)
            INTO first USING new_floor, new_line;
        new_floor := greatest(new_floor, coalesce(first, new_line + 1));
        new_line := NULL;
    END IF;
    IF new_line IS NULL THEN
        -- The order matters: the sequence first, then the lock holders.
        new_line := coalesce(pg_sequence_last_value(
                        pg_get_serial_sequence(format('pgoutbox.%I', queue), 'id')::regclass), 0);
        SELECT coalesce(array_agg(k.virtualtransaction), '{}') INTO new_writers
          FROM pg_catalog.pg_locks k
         WHERE k.locktype = 'relation' AND k.relation = tbl
           AND k.database = (SELECT oid FROM pg_catalog.pg_database
                              WHERE datname = current_database())
           AND k.mode = 'RowExclusiveLock'
           AND k.pid IS DISTINCT FROM pg_backend_pid();
    END IF;
END $$;

CREATE OR REPLACE FUNCTION pgoutbox.cron_history_maintain(keep interval DEFAULT NULL,
                                               OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    part  text;
BEGIN
    IF keep IS NOT NULL AND keep <= interval '0' THEN
        RAISE EXCEPTION 'pgoutbox.cron_history_maintain: keep must be positive (NULL keeps everything), not %',
            keep USING ERRCODE = 'invalid_parameter_value';
    END IF;
    created := 0;
    dropped := 0;
    PERFORM pg_advisory_xact_lock(1885826936, 4);   -- pgoutbox's key space, cron history
    FOR i IN 0..2 LOOP
        IF pgoutbox.cron_history_partition(today + i) THEN
            created := created + 1;
        END IF;
    END LOOP;
    IF keep IS NULL THEN
        RETURN;
    END IF;
    FOR part IN
        SELECT c.relname
          FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
         WHERE h.inhparent = 'pgoutbox.cron_history'::regclass
           AND c.relname ~ '^cron_history_[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        IF (to_date(substr(part, 14), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC'
           <= now() - keep THEN
            EXECUTE format('DROP TABLE pgoutbox.%I', part);
            dropped := dropped + 1;
        END IF;
    END LOOP;
END $$;

-- Every other SECURITY DEFINER function of the schema (send, enqueue,
-- inbox_claim, unarchive, create_queue, cron_fire, cron_history_partition,
-- archive_deleted, maintain): the same search path.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pgoutbox'::regnamespace AND p.prosecdef LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END $$;

-- claim_floor() tells whoever calls it how busy the outbox is and which
-- transactions write to it: relays only, like the other relay functions.
-- The roles that may run rebalance() (the relay roles of the README) keep
-- it, so that their relays' floor goes on moving after this migration.
REVOKE ALL ON FUNCTION pgoutbox.claim_floor(text, bigint, bigint, text[]) FROM PUBLIC;
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
               FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = 'pgoutbox.rebalance(text, text, text, interval)'::regprocedure
                AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                AND a.grantee <> p.proowner LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgoutbox.claim_floor(text, bigint, bigint, text[]) TO %s', r);
    END LOOP;
END $$;
