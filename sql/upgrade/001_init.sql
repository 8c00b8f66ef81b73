-- 001_init: the outbox queue, dead letters and the producer function.
--
-- Applied by `pgoutbox migrate` inside one transaction; the migrations
-- table and the schema itself are created by the migration runner.

-- The outbox: the default queue.  A row is one event waiting to be relayed;
-- it is deleted in the same transaction as the sink's acknowledgement.
CREATE TABLE pgoutbox.outbox (
    id           bigserial   PRIMARY KEY,
    topic        text        NOT NULL CHECK (topic <> ''),
    key          text,                                   -- aggregate id: ordering
    type         text        NOT NULL DEFAULT '',
    payload      jsonb       NOT NULL,
    headers      jsonb       NOT NULL DEFAULT '{}',      -- trace context, content type
    created_at   timestamptz NOT NULL DEFAULT now(),
    run_at       timestamptz NOT NULL DEFAULT now(),     -- not before (delay, backoff)
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    locked_by    text,                                   -- lease claim mode
    locked_until timestamptz,
    CONSTRAINT outbox_payload_max_1mib CHECK (pg_column_size(payload) <= 1048576),
    CONSTRAINT outbox_headers_object CHECK (jsonb_typeof(headers) = 'object')
);
-- Tiny fill factor headroom is pointless: rows are inserted once and deleted.
ALTER TABLE pgoutbox.outbox SET (autovacuum_vacuum_scale_factor = 0.01,
                                 autovacuum_vacuum_insert_scale_factor = 0.05);

-- Events that failed max attempts or were rejected by the sink for good.
CREATE TABLE pgoutbox.dead_letters (
    id          bigint      NOT NULL,
    queue       text        NOT NULL,
    topic       text        NOT NULL,
    key         text,
    type        text        NOT NULL,
    payload     jsonb       NOT NULL,
    headers     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    attempts    integer     NOT NULL,
    last_error  text,
    failed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, id)
);

-- Wake-up: one NOTIFY per inserting statement with a constant payload, so
-- PostgreSQL folds the duplicates of a transaction into one, delivered only
-- at COMMIT.  A statement trigger covers send(), plain INSERT and COPY.
CREATE FUNCTION pgoutbox.notify_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgoutbox_' || TG_TABLE_NAME, '');
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_notify AFTER INSERT ON pgoutbox.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox();

-- The producer API for any language: call it inside your transaction.
CREATE FUNCTION pgoutbox.send(topic text, key text, type text, payload jsonb,
                              headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- a producer role needs only EXECUTE
AS $$
DECLARE
    new_id bigint;
BEGIN
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'pgoutbox.send: topic must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send: payload must not be NULL (use ''null''::jsonb)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgoutbox.send: payload is % bytes, the limit is 1048576',
            pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'pgoutbox.send: headers must be a JSON object, not %',
            jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}'))
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox inside the caller''s transaction; returns its id.';

-- Least privilege: nobody but the owner may send until granted
-- (GRANT EXECUTE ON FUNCTION pgoutbox.send(text,text,text,jsonb,jsonb) TO producer).
REVOKE ALL ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) FROM PUBLIC;
