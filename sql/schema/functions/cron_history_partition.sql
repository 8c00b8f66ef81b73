-- Creates the partition of one UTC day if it is missing; true if created.
CREATE OR REPLACE FUNCTION pgoutbox.cron_history_partition(day date) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
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
