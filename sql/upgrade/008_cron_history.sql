-- 008_cron_history: the cron history in day partitions, dropped whole.
--
-- Until now each scheduler DELETEd history rows older than
-- cron.history_keep, 10,000 at a time: dead tuples and vacuum work, like
-- any DELETE-based retention.  The history is now range-partitioned by
-- recorded_at (UTC days) like the inbox: pgoutbox.cron_history_maintain()
-- creates today's and the next two days' partitions and DROPs those whose
-- every row is older than the retention; cron_fire() creates today's
-- partition itself if maintenance never ran, so a missing partition can
-- never stop a tick.  A partitioned table's primary key must hold the
-- partition key, so (name, tick) is no longer unique by constraint: it is
-- unique because cron_fire() records a tick only after winning the
-- compare-and-set on the schedule's last_tick.

ALTER TABLE pgoutbox.cron_history RENAME TO cron_history_old;

CREATE TABLE pgoutbox.cron_history (
    name        text        NOT NULL,
    tick        timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('fired', 'skipped')),
    reason      text,
    job_id      bigint,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, tick, recorded_at)
) PARTITION BY RANGE (recorded_at);

COMMENT ON TABLE pgoutbox.cron_history IS
    'One row per cron tick handled (fired or skipped), in UTC day partitions.';

-- Creates the partition of one UTC day if it is missing; true if created.
CREATE FUNCTION pgoutbox.cron_history_partition(day date) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    part text := 'cron_history_' || to_char(day, 'YYYYMMDD');
BEGIN
    IF to_regclass('pgoutbox.' || part) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE pgoutbox.%I PARTITION OF pgoutbox.cron_history '
                   'FOR VALUES FROM (%L) TO (%L)',
                   part, day::text || ' 00:00:00+00', (day + 1)::text || ' 00:00:00+00');
    RETURN true;
END $$;

-- Creates the partitions of today and the next two days (UTC) and, when
-- keep is given, drops those whose every row is older than keep.
-- Idempotent; serialized by an advisory lock.
CREATE FUNCTION pgoutbox.cron_history_maintain(keep interval DEFAULT NULL,
                                               OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
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
          FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
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

REVOKE ALL ON FUNCTION pgoutbox.cron_history_partition(date) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.cron_history_maintain(interval) FROM PUBLIC;

-- The history kept so far moves over, day by day.
SELECT pgoutbox.cron_history_partition(d)
  FROM (SELECT DISTINCT (recorded_at AT TIME ZONE 'UTC')::date AS d
          FROM pgoutbox.cron_history_old) days;
SELECT pgoutbox.cron_history_maintain();
INSERT INTO pgoutbox.cron_history SELECT * FROM pgoutbox.cron_history_old;
DROP TABLE pgoutbox.cron_history_old;

-- cron_fire() as in 004, plus today's partition (after the compare-and-set:
-- only the winner may need it).
CREATE OR REPLACE FUNCTION pgoutbox.cron_fire(p_name text, p_prev bigint, p_ticks bigint[],
                                   p_fire boolean[], p_reasons text[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    s      pgoutbox.cron_schedules;
    n      integer := 0;
    tick   timestamptz;
    job    bigint;
    ukey   text;
    busy   boolean;
BEGIN
    UPDATE pgoutbox.cron_schedules c
       SET last_tick = to_timestamp(p_ticks[array_upper(p_ticks, 1)])
     WHERE c.name = p_name AND c.enabled
       AND c.last_tick IS NOT DISTINCT FROM to_timestamp(p_prev)
    RETURNING c.* INTO s;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    -- Today's history partition, if maintenance has not made it yet.
    PERFORM pgoutbox.cron_history_partition((now() AT TIME ZONE 'UTC')::date);
    ukey := CASE WHEN s.overlap = 'skip' THEN 'cron:' || s.name END;
    FOR i IN 1..array_upper(p_ticks, 1) LOOP
        tick := to_timestamp(p_ticks[i]);
        IF NOT p_fire[i] THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', p_reasons[i]);
            CONTINUE;
        END IF;
        busy := false;
        IF ukey IS NOT NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgoutbox.%I WHERE unique_key = $1)', s.queue)
               INTO busy USING ukey;
        END IF;
        IF busy THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', 'previous run still queued or running');
            CONTINUE;
        END IF;
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers, unique_key) '
                       'VALUES (''cron'', $1, ''cron.tick'', $2, $3, $4) RETURNING id', s.queue)
           INTO job
          USING s.name, s.payload,
                jsonb_build_object('cron', s.name, 'tick', to_char(tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                ukey;
        INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason, job_id)
        VALUES (p_name, tick, 'fired', p_reasons[i], job);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- maintain() as in 005, plus the cron history's partitions ahead.
CREATE OR REPLACE FUNCTION pgoutbox.maintain(OUT done boolean, OUT created integer, OUT dropped integer)
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
    -- Cron history: partitions ahead (each scheduler drops the expired).
    r := pgoutbox.cron_history_maintain();
    created := created + r.created;
    dropped := dropped + r.dropped;
    IF to_regprocedure('pgoutbox.inbox_maintain(interval)') IS NOT NULL THEN
        r := pgoutbox.inbox_maintain();
        created := created + r.created;
        dropped := dropped + r.dropped;
    END IF;
END $$;
