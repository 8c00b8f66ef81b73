-- Wake-up: one NOTIFY per inserting statement with a constant payload, so
-- PostgreSQL folds the duplicates of a transaction into one, delivered only
-- at COMMIT.  A statement trigger covers send(), plain INSERT and COPY.
CREATE OR REPLACE FUNCTION pgoutbox.notify_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgoutbox_' || TG_TABLE_NAME, '');
    RETURN NULL;
END $$;
