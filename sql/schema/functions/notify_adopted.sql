-- The wake-up trigger of an adopted table: the channel of the adopted
-- name (TG_ARGV[0]), not of the table.
CREATE OR REPLACE FUNCTION pgoutbox.notify_adopted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgoutbox_' || TG_ARGV[0], '');
    RETURN NULL;
END $$;
