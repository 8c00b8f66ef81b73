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
