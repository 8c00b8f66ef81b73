-- Resumes a paused work queue or outbox and wakes its workers or relays
-- at COMMIT (a notification on the queue's channel, as an enqueue
-- sends).  A queue
-- left with no control at all loses its row in pgoutbox.queue_controls,
-- so that its claims take the plain path again.  Returns false when it
-- was not paused.
CREATE OR REPLACE FUNCTION pgoutbox.resume(queue text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c pgoutbox.queue_controls;
BEGIN
    PERFORM pgoutbox.queue_controls_check(queue);
    SELECT * INTO c FROM pgoutbox.queue_controls x
     WHERE x.queue = resume.queue FOR UPDATE;
    IF NOT FOUND OR NOT c.paused THEN
        RETURN false;
    END IF;
    IF c.group_concurrency IS NULL AND c.max_running IS NULL AND c.rate_per_s IS NULL
       AND NOT c.fair THEN
        DELETE FROM pgoutbox.queue_controls x WHERE x.queue = resume.queue;
    ELSE
        UPDATE pgoutbox.queue_controls x SET paused = false WHERE x.queue = resume.queue;
    END IF;
    PERFORM pg_notify('pgoutbox_' || queue, '');
    RETURN true;
END $$;

COMMENT ON FUNCTION pgoutbox.resume(text) IS
    'Resumes a paused work queue or outbox and wakes its workers or relays at COMMIT.';
