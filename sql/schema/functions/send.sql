-- Writes an event into the outbox, in the caller's transaction; returns
-- its id.  The hot path of every producer, so it has no SET search_path
-- of its own: a function's SET clause is applied at every call and undone
-- at its end (measured in sql/upgrade/018_send_lean.sql).
--
-- send() stays SECURITY DEFINER (a producer role needs EXECUTE only), so
-- what it names must not depend on its caller's search path, which can
-- put a schema of the caller's before pg_catalog: every function and
-- operator it uses is qualified with pg_catalog (OPERATOR(pg_catalog.=)),
-- and the only relation it names is schema-qualified (a temporary table
-- cannot take its place).  The rest is bound by OID when it was created:
-- the column defaults, the domains' checks, the indexes.  The statement
-- trigger of the outbox runs inside send() as send()'s owner, with the
-- same search path: wake_relay() qualifies its operators as well.
-- tests/integration/t_definer_shadow.sh calls send() with a schema of
-- look-alike operators and functions ahead of pg_catalog, and fails if
-- any of them ran.
--
-- One IF tests every check, and only a call that fails one of them looks
-- for which, to raise its message and SQLSTATE.
CREATE OR REPLACE FUNCTION pgoutbox.send(topic text, key text, type text, payload jsonb,
                                         headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    new_id bigint;
BEGIN
    IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' OR payload IS NULL
       OR pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576
       OR (headers IS NOT NULL
           AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object') THEN
        IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' THEN
            RAISE EXCEPTION 'pgoutbox.send: topic must not be empty'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF payload IS NULL THEN
            RAISE EXCEPTION 'pgoutbox.send: payload must not be NULL (use ''null''::jsonb)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576 THEN
            RAISE EXCEPTION 'pgoutbox.send: payload is % bytes, the limit is 1048576',
                pg_catalog.pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
        END IF;
        RAISE EXCEPTION 'pgoutbox.send: headers must be a JSON object, not %',
            pg_catalog.jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}'))
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox inside the caller''s transaction; returns its id.';
