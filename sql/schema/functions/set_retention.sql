-- Chooses a queue's retention.  archive: creates the archive table (by
-- id, key, topic and time), its partitions and the trigger.
CREATE OR REPLACE FUNCTION pgoutbox.set_retention(p_queue text, p_mode text, p_days integer DEFAULT 7)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    parent text := p_queue || '_archive';
BEGIN
    IF p_mode NOT IN ('delete', 'archive') THEN
        RAISE EXCEPTION 'pgoutbox: retention must be delete or archive, not "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgoutbox.queues SET retention = p_mode, retention_days = p_days WHERE name = p_queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox: no queue "%"', p_queue USING ERRCODE = 'undefined_object';
    END IF;
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON pgoutbox.%I', p_queue || '_archive', p_queue);
    IF p_mode = 'archive' THEN
        EXECUTE format('CREATE TABLE IF NOT EXISTS pgoutbox.%I ('
                       'id bigint NOT NULL, topic text NOT NULL, key text, type text NOT NULL, '
                       'payload jsonb NOT NULL, headers jsonb NOT NULL, '
                       'created_at timestamptz NOT NULL, attempts integer NOT NULL, '
                       'published_at timestamptz NOT NULL) PARTITION BY RANGE (published_at)',
                       parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (id)', parent || '_id', parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (key, published_at)', parent || '_key', parent);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgoutbox.%I (topic, published_at)', parent || '_topic', parent);
        PERFORM pgoutbox.archive_partitions(p_queue, p_days);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON pgoutbox.%I '
                       'REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT '
                       'EXECUTE FUNCTION pgoutbox.archive_deleted()', parent, p_queue);
    END IF;
END $$;
