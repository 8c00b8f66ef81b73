-- Creates the partitions of today and the next two days (UTC) and, when
-- keep is given, drops those whose every row is older than keep.
-- Idempotent; serialized by an advisory lock.
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
