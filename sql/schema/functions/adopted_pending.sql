-- The pending events of an adopted table as `pgoutbox status` reads a
-- queue: run_at, attempts and last_error from the bookkeeping; dead
-- letters left out (they are in pgoutbox.dead_letters).  The caller needs
-- SELECT on the table.  None for a table adopted with capture wal.
CREATE OR REPLACE FUNCTION pgoutbox.adopted_pending(p_name text)
RETURNS TABLE (id bigint, topic text, key text, created_at timestamptz, shard integer,
               run_at timestamptz, attempts integer, last_error text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    a pgoutbox.adopted;
BEGIN
    SELECT * INTO a FROM pgoutbox.adopted x WHERE x.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox: nothing is adopted as "%"', p_name USING ERRCODE = 'undefined_object';
    END IF;
    -- Captured through the WAL: the rows are not the events (the
    -- slot's lag is what waits; status shows the slot).
    IF EXISTS (SELECT 1 FROM pgoutbox.queues q WHERE q.name = p_name AND q.capture = 'wal') THEN
        RETURN;
    END IF;
    -- The map's expressions see the table alone (no column of the
    -- bookkeeping may capture their names).
    RETURN QUERY EXECUTE format(
        'SELECT c.id, c.topic, c.key, c.created_at, c.shard, coalesce(s.run_at, now()), '
        'coalesce(s.attempts, 0), s.last_error FROM (SELECT t.%1$s::bigint, %2$s, %3$s, %4$s, %5$s '
        'FROM %6$s t WHERE (%7$s)) c(id, topic, key, created_at, shard) '
        'LEFT JOIN pgoutbox.adopted_state s ON s.queue = %8$L AND s.id = c.id WHERE s.dead IS NOT TRUE',
        a.event_id, a.topic_sql, a.key_sql, a.created_sql,
        coalesce('t.' || a.shard_col, '0'), a.tbl_sql, a.pending_sql, p_name);
END $$;
