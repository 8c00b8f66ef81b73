-- The AFTER DELETE statement trigger of a queue whose retention is
-- archive (pgoutbox.set_retention): copies the acknowledged events of the
-- statement (its transition table) into pgoutbox."<queue>_archive", with
-- the transaction's now() as their publication time.
CREATE OR REPLACE FUNCTION pgoutbox.archive_deleted() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- the relay role needs no archive grants
AS $$
BEGIN
    EXECUTE format('INSERT INTO pgoutbox.%I (id, topic, key, type, payload, headers, '
                   'created_at, attempts, published_at) SELECT id, topic, key, type, '
                   'payload, headers, created_at, attempts, now() FROM deleted',
                   TG_TABLE_NAME || '_archive');
    RETURN NULL;
END $$;
