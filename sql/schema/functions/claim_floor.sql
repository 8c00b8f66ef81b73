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

COMMENT ON FUNCTION pgoutbox.claim_floor(text, bigint, bigint, text[]) IS
    'The relay''s claim floor: no fresh event of the queue has an id below it, now or later.';
