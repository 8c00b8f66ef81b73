-- Maintenance, from any number of instances at once: one does the work
-- (a transaction-level advisory lock), the others return at once.
-- Archive partitions of every archiving queue; the inbox's and the cron
-- history's partitions ahead.
CREATE OR REPLACE FUNCTION pgoutbox.maintain(OUT done boolean, OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a relay role needs only EXECUTE
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
