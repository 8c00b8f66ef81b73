-- Pauses a work queue or an outbox: claims (pgoutbox.claim, work_sql, a
-- relay's claim of an outbox) return nothing until pgoutbox.resume();
-- producers still enqueue or send, and jobs already leased run to their
-- end (a relay's batch already claimed is delivered).  Takes effect for
-- every claim that starts after the caller's COMMIT.  Returns false when
-- it was paused already.  An outbox captured through the WAL and an
-- adopted table are refused (queue_controls_check).
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
    'Pauses a work queue or an outbox: workers and relays claim nothing until pgoutbox.resume(); producers still enqueue.';
