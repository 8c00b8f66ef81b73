-- Creates the day partitions of an archive from yesterday to two days
-- ahead and drops those past retention; returns what it did.
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
