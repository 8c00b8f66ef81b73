-- The errors of send_to() (functions/send_to.sql): each of its paths
-- tests the arguments in one expression, and calls this when one fails a
-- check; it raises the error that check has always raised.  Not granted
-- to anyone: send_to() calls it as its owner.
CREATE OR REPLACE FUNCTION pgoutbox.send_to_refused(queue text, topic text, payload jsonb, headers jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: topic must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload must not be NULL (use ''null''::jsonb)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload is % bytes, the limit is 1048576',
            pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: headers must be a JSON object, not %',
            jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RAISE EXCEPTION 'pgoutbox.send_to_refused: called for queue % with arguments that pass the checks', queue
        USING ERRCODE = 'internal_error';
END $$;

COMMENT ON FUNCTION pgoutbox.send_to_refused(text, text, jsonb, jsonb) IS
    'The error of send_to() whose arguments fail a check.';
