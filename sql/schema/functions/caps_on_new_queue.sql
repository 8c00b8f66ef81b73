-- The trigger queues_caps on pgoutbox.queues: every queue registered gets
-- the shape of pgoutbox.add_caps, so that create_queue() keeps a single
-- definition of a queue table.
CREATE OR REPLACE FUNCTION pgoutbox.caps_on_new_queue() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgoutbox.add_caps(NEW.name);
    RETURN NULL;
END $$;
