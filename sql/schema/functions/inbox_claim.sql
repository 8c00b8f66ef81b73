-- Returns true the first time (consumer, message_id) is claimed within the
-- dedup window, false for a duplicate.  Call it inside the transaction
-- that applies the message.
CREATE OR REPLACE FUNCTION pgoutbox.inbox_claim(consumer text, message_id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a consumer role needs only EXECUTE
AS $$
DECLARE
    today text := to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
    IF inbox_claim.consumer IS NULL OR inbox_claim.consumer = '' THEN
        RAISE EXCEPTION 'pgoutbox.inbox_claim: consumer must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF inbox_claim.message_id IS NULL OR inbox_claim.message_id = '' THEN
        RAISE EXCEPTION 'pgoutbox.inbox_claim: message_id must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'pgoutbox.inbox_claim needs READ COMMITTED or SERIALIZABLE isolation, not REPEATABLE READ'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Under REPEATABLE READ a concurrent duplicate cannot be seen.';
    END IF;
    IF to_regclass('pgoutbox.inbox_' || today) IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.inbox has no partition for today (%)', today
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run SELECT pgoutbox.inbox_maintain() daily; pgoutbox consume runs it hourly.';
    END IF;
    PERFORM pg_advisory_xact_lock(1885827945,   -- 'pgoi': the inbox's key space
                                  hashtext(inbox_claim.consumer || '/' || inbox_claim.message_id));
    IF EXISTS (SELECT 1 FROM pgoutbox.inbox i
                WHERE i.consumer = inbox_claim.consumer
                  AND i.message_id = inbox_claim.message_id) THEN
        RETURN false;
    END IF;
    INSERT INTO pgoutbox.inbox (consumer, message_id)
    VALUES (inbox_claim.consumer, inbox_claim.message_id);
    RETURN true;
END $$;

COMMENT ON FUNCTION pgoutbox.inbox_claim(text, text) IS
    'Claims a message for a consumer inside the caller''s transaction: true the first time, false for a duplicate.';
