-- Creates the partitions of today and the next two days (UTC) and drops
-- those whose every row is older than dedup_window.  Idempotent; callers
-- serialize on an advisory lock.  Creating or dropping a partition locks
-- the parent briefly, so run it from a session with a lock_timeout.
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

COMMENT ON FUNCTION pgoutbox.inbox_maintain(interval) IS
    'Creates the inbox partitions ahead and drops those older than the dedup window.';
