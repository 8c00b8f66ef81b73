-- Pauses a work queue: claims (pgoutbox.claim, work_sql) return nothing
-- until pgoutbox.resume(); producers still enqueue, and jobs already
-- leased run to their end.  Takes effect for every claim that starts
-- after the caller's COMMIT.  Returns false when it was paused already.
-- Outboxes are refused: their relays do not read the controls yet.
CREATE OR REPLACE FUNCTION pgoutbox.pause(queue text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was boolean;
BEGIN
    PERFORM pgoutbox.queue_controls_check(queue);
    SELECT c.paused INTO was FROM pgoutbox.queue_controls c
     WHERE c.queue = pause.queue FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgoutbox.queue_controls (queue, paused) VALUES (queue, true);
        RETURN true;
    END IF;
    UPDATE pgoutbox.queue_controls c SET paused = true WHERE c.queue = pause.queue;
    RETURN NOT was;
END $$;

COMMENT ON FUNCTION pgoutbox.pause(text) IS
    'Pauses a work queue: workers claim nothing until pgoutbox.resume(); producers still enqueue.';
