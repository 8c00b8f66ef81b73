-- 003_inbox: the consumer-side inbox.  A consumer claims each message id
-- once, inside the transaction that applies the message, so a redelivered
-- message (at-least-once delivery) has no second effect.
--
-- Expiry without DELETE storms: the table is partitioned by day on
-- received_at and inbox_maintain() drops the partitions older than the
-- dedup window.  A partitioned table's primary key must contain the
-- partition key, so (consumer, message_id) alone cannot be UNIQUE across
-- partitions: a duplicate arriving on another day would land in another
-- partition unnoticed.  inbox_claim() therefore checks across all
-- partitions itself, serialized per message by a transaction-level
-- advisory lock:
--   lock(consumer, message_id); if a row exists: duplicate; else insert.
-- The lock is held until the claiming transaction ends, so a second claim
-- of the same message waits for the first to commit (then, taking a fresh
-- snapshot in READ COMMITTED, it sees the row) or roll back (then it
-- claims the message itself).  Under REPEATABLE READ the second claim's
-- snapshot would predate the first commit, so inbox_claim refuses that
-- level; SERIALIZABLE is safe (the conflict aborts one side).
-- The dedup window is honoured from window to window + 1 day, since a
-- whole day's partition goes at once.

CREATE TABLE pgoutbox.inbox (
    consumer    text        NOT NULL,   -- the logical consumer (group)
    message_id  text        NOT NULL,   -- the event id
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id, received_at)
) PARTITION BY RANGE (received_at);

COMMENT ON TABLE pgoutbox.inbox IS
    'Messages a consumer has applied, per day; see pgoutbox.inbox_claim().';

-- Returns true the first time (consumer, message_id) is claimed within the
-- dedup window, false for a duplicate.  Call it inside the transaction
-- that applies the message.
CREATE FUNCTION pgoutbox.inbox_claim(consumer text, message_id text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- a consumer role needs only EXECUTE
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

-- Creates the partitions of today and the next two days (UTC) and drops
-- those whose every row is older than dedup_window.  Idempotent; callers
-- serialize on an advisory lock.  Creating or dropping a partition locks
-- the parent briefly, so run it from a session with a lock_timeout.
CREATE FUNCTION pgoutbox.inbox_maintain(dedup_window interval DEFAULT '7 days',
                                        OUT created integer, OUT dropped integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    day   date;
    part  text;
BEGIN
    IF dedup_window IS NULL OR dedup_window < interval '1 hour' THEN
        RAISE EXCEPTION 'pgoutbox.inbox_maintain: the dedup window must be at least 1 hour, not %',
            coalesce(dedup_window::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    created := 0;
    dropped := 0;
    PERFORM pg_advisory_xact_lock(1885826936, 2);   -- pgoutbox's key space, inbox maintenance
    FOR i IN 0..2 LOOP
        day := today + i;
        part := 'inbox_' || to_char(day, 'YYYYMMDD');
        IF to_regclass('pgoutbox.' || part) IS NULL THEN
            EXECUTE format('CREATE TABLE pgoutbox.%I PARTITION OF pgoutbox.inbox '
                           'FOR VALUES FROM (%L) TO (%L)',
                           part, day::text || ' 00:00:00+00', (day + 1)::text || ' 00:00:00+00');
            created := created + 1;
        END IF;
    END LOOP;
    FOR part IN
        SELECT c.relname
          FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
         WHERE h.inhparent = 'pgoutbox.inbox'::regclass
           AND c.relname ~ '^inbox_[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        -- A partition's rows are all older than its day's end.
        IF (to_date(substr(part, 7), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC'
           <= now() - dedup_window THEN
            EXECUTE format('DROP TABLE pgoutbox.%I', part);
            dropped := dropped + 1;
        END IF;
    END LOOP;
END $$;

COMMENT ON FUNCTION pgoutbox.inbox_maintain(interval) IS
    'Creates the inbox partitions ahead and drops those older than the dedup window.';

REVOKE ALL ON FUNCTION pgoutbox.inbox_claim(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.inbox_maintain(interval) FROM PUBLIC;

SELECT pgoutbox.inbox_maintain();
