-- Advances a relay's claim floor: an id below which no fresh row of the
-- queue can exist or appear, so that a claim starts past what was already
-- sent (the relay claims `id >= floor`; failed rows come from below it
-- through the index outbox_behind).  The relay keeps (floor, line,
-- writers) and passes back what the previous call returned, starting with
-- (0, NULL, NULL).
--
-- `line` is the queue sequence's last value when it was read, `writers`
-- the transactions that held a write lock on the queue table just after:
-- a transaction takes that lock before it draws an id from the sequence,
-- so any row with an id up to `line` that was not yet committed belonged
-- to one of them.  Once none of them holds the lock any more, every row up
-- to `line` is committed (visible to this call's snapshot) or gone, and
-- the floor may pass them, stopping at the first fresh row still queued
-- (a row another relay has claimed but not committed is still visible
-- here, so the floor stops at it too).  Rows failed before are not fresh:
-- they never hold the floor back, the claim takes them below it.
--
-- Only queues of kind 'outbox' get a floor; for the others it stays 0.
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
