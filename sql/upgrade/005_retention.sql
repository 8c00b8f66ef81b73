-- 005_retention: two retention modes per queue, maintenance, health.
--
--   delete  (default) acked rows leave in the claim transaction;
--   archive acked events are also kept as an audit trail in
--           pgoutbox."<queue>_archive", partitioned by day of publication
--           (UTC); partitions older than the retention are DROPped by
--           pgoutbox.maintain(), never DELETEd.
-- Archiving is a statement-level AFTER DELETE trigger with a transition
-- table on the queue: the relay's claim stays the same statement, the copy
-- is one INSERT per batch, in the claim transaction, and events that then
-- fail are taken out again by pgoutbox.unarchive() before COMMIT (the
-- transaction's now() is their publication time, which prunes to one
-- partition).

ALTER TABLE pgoutbox.queues
    ADD COLUMN retention text NOT NULL DEFAULT 'delete'
        CHECK (retention IN ('delete', 'archive')),
    ADD COLUMN retention_days integer NOT NULL DEFAULT 7
        CHECK (retention_days BETWEEN 1 AND 3650);

CREATE FUNCTION pgoutbox.archive_deleted() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- the relay role needs no archive grants
AS $$
BEGIN
    EXECUTE format('INSERT INTO pgoutbox.%I (id, topic, key, type, payload, headers, '
                   'created_at, attempts, published_at) SELECT id, topic, key, type, '
                   'payload, headers, created_at, attempts, now() FROM deleted',
                   TG_TABLE_NAME || '_archive');
    RETURN NULL;
END $$;

-- Creates the day partitions of an archive from yesterday to two days
-- ahead and drops those past retention; returns what it did.
CREATE FUNCTION pgoutbox.archive_partitions(p_queue text, p_days integer,
                                            OUT created integer, OUT dropped integer)
LANGUAGE plpgsql AS $$
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
        SELECT c.relname FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
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

-- Chooses a queue's retention.  archive: creates the archive table (by
-- id, key, topic and time), its partitions and the trigger.
CREATE FUNCTION pgoutbox.set_retention(p_queue text, p_mode text, p_days integer DEFAULT 7)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    parent text := p_queue || '_archive';
BEGIN
    IF p_mode NOT IN ('delete', 'archive') THEN
        RAISE EXCEPTION 'pgoutbox: retention must be delete or archive, not "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgoutbox.queues SET retention = p_mode, retention_days = p_days WHERE name = p_queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox: no queue "%"', p_queue USING ERRCODE = 'undefined_object';
    END IF;
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON pgoutbox.%I', p_queue || '_archive', p_queue);
    IF p_mode = 'archive' THEN
        EXECUTE format('CREATE TABLE IF NOT EXISTS pgoutbox.%I ('
                       'id bigint NOT NULL, topic text NOT NULL, key text, type text NOT NULL, '
                       'payload jsonb NOT NULL, headers jsonb NOT NULL, '
                       'created_at timestamptz NOT NULL, attempts integer NOT NULL, '
                       'published_at timestamptz NOT NULL) PARTITION BY RANGE (published_at)',
                       parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (id)', parent || '_id', parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (key, published_at)', parent || '_key', parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (topic, published_at)', parent || '_topic', parent);
        PERFORM pgoutbox.archive_partitions(p_queue, p_days);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON pgoutbox.%I '
                       'REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT '
                       'EXECUTE FUNCTION pgoutbox.archive_deleted()', parent, p_queue);
    END IF;
END $$;

-- The relay takes events that failed after their claim out of the archive
-- again, in the claim transaction (they go back to the queue).
CREATE FUNCTION pgoutbox.unarchive(p_queue text, p_ids bigint[]) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- a relay role needs only EXECUTE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pgoutbox.queues WHERE name = p_queue AND retention = 'archive') THEN
        EXECUTE format('DELETE FROM pgoutbox.%I WHERE published_at = now() AND id = ANY($1)',
                       p_queue || '_archive') USING p_ids;
    END IF;
END $$;

-- Maintenance, from any number of instances at once: one does the work
-- (a transaction-level advisory lock), the others return at once.
-- Archive partitions of every archiving queue; the inbox's partitions.
CREATE FUNCTION pgoutbox.maintain(OUT done boolean, OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- a relay role needs only EXECUTE
AS $$
DECLARE
    q record;
    r record;
BEGIN
    created := 0;
    dropped := 0;
    done := pg_try_advisory_xact_lock(1885826936, 3);   -- pgoutbox's key space: maintenance
    IF NOT done THEN
        RETURN;
    END IF;
    FOR q IN SELECT name, retention_days FROM pgoutbox.queues WHERE retention = 'archive' ORDER BY name LOOP
        r := pgoutbox.archive_partitions(q.name, q.retention_days);
        created := created + r.created;
        dropped := dropped + r.dropped;
    END LOOP;
    IF to_regprocedure('pgoutbox.inbox_maintain(interval)') IS NOT NULL THEN
        r := pgoutbox.inbox_maintain();
        created := created + r.created;
        dropped := dropped + r.dropped;
    END IF;
END $$;

-- Health: what pins the xmin horizon (so vacuum cannot reclaim the queue's
-- deleted rows) and how many dead tuples the queue tables carry.
CREATE FUNCTION pgoutbox.health(p_min_age interval DEFAULT '1 minute',
                                p_dead_tuples bigint DEFAULT 100000)
RETURNS TABLE (kind text, subject text, age interval, detail text)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog  -- sees every session's xmin
AS $$
    SELECT 'xmin', format('pid %s (%s)', a.pid, coalesce(nullif(a.application_name, ''), a.usename::text)),
           now() - a.xact_start,
           format('%s transaction open for %s holds back vacuum (xmin age %s)',
                  a.state, date_trunc('second', now() - a.xact_start), age(a.backend_xmin))
      FROM pg_stat_activity a
     WHERE a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid()
       AND a.xact_start < now() - p_min_age
    UNION ALL
    SELECT 'slot', s.slot_name, NULL::interval,
           format('replication slot (%s, %s) pins xmin age %s',
                  s.slot_type, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
                  greatest(age(s.xmin), age(s.catalog_xmin)))
      FROM pg_replication_slots s
     WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
    UNION ALL
    SELECT 'dead_tuples', format('pgoutbox.%s', t.relname), NULL::interval,
           format('%s dead tuples (%s live); last autovacuum %s',
                  t.n_dead_tup, t.n_live_tup, coalesce(t.last_autovacuum::text, 'never'))
      FROM pg_stat_user_tables t
     WHERE t.schemaname = 'pgoutbox' AND t.n_dead_tup >= p_dead_tuples
     ORDER BY 1, 3 DESC NULLS LAST
$$;

-- Relays call these (GRANT EXECUTE ... TO relay); nobody else needs to.
REVOKE ALL ON FUNCTION pgoutbox.unarchive(text, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.maintain() FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.health(interval, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.set_retention(text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.archive_partitions(text, integer) FROM PUBLIC;
