-- The relay takes events that failed after their claim out of the archive
-- again, in the claim transaction (they go back to the queue).
CREATE OR REPLACE FUNCTION pgoutbox.unarchive(p_queue text, p_ids bigint[]) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a relay role needs only EXECUTE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pgoutbox.queues WHERE name = p_queue AND retention = 'archive') THEN
        EXECUTE format('DELETE FROM pgoutbox.%I WHERE published_at = now() AND id = ANY($1)',
                       p_queue || '_archive') USING p_ids;
    END IF;
END $$;
