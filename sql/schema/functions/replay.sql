-- Sends archived events again (issue 39): the events of queue's archive
-- (pgoutbox."<queue>_archive", kept by retention archive: set_retention)
-- published in [from_ts, to_ts) and with ids in [from_id, to_id], of
-- one topic and one key when given, go back into the queue as new events
-- (new ids), in their original id order, so that the relays deliver them
-- to the queue's sink in that order per key, after whatever of their key
-- is queued already.  Each carries its original's headers plus
-- "pgoutbox-replay-of": "<original id>".  The archive keeps them again
-- once they are relayed (with their new ids).  At least one bound must be
-- given: a replay of everything is asked for with from_id => 0.  Returns
-- how many were queued; they are sent if and only if the caller commits.
-- Events the retention has already dropped (partitions past
-- retention_days) are gone and are not replayed.
CREATE OR REPLACE FUNCTION pgoutbox.replay(queue text,
                                           from_ts timestamptz DEFAULT NULL,
                                           to_ts timestamptz DEFAULT NULL,
                                           topic text DEFAULT NULL,
                                           key text DEFAULT NULL,
                                           from_id bigint DEFAULT NULL,
                                           to_id bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q pgoutbox.queues;
    n bigint;
    cond text;
BEGIN
    SELECT * INTO q FROM pgoutbox.queues x WHERE x.name = replay.queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox.replay: no queue named "%" (pgoutbox queue list shows them)', queue
            USING ERRCODE = 'undefined_table';
    ELSIF q.kind = 'adopted' OR q.capture <> 'table' THEN
        RAISE EXCEPTION 'pgoutbox.replay: queue "%" is %: it has no archive to replay', queue,
            CASE WHEN q.kind = 'adopted' THEN 'an adopted table' ELSE 'captured through the WAL' END
            USING ERRCODE = 'wrong_object_type';
    ELSIF to_regclass(format('pgoutbox.%I', queue || '_archive')) IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.replay: queue "%" keeps no archive: its retention is %, which keeps nothing after delivery', queue, q.retention
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('pgoutbox maintain --queue %s --retention archive keeps what is relayed from then on', queue);
    END IF;
    IF from_ts IS NULL AND to_ts IS NULL AND from_id IS NULL AND to_id IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.replay: give a time range (from_ts, to_ts) or an id range (from_id, to_id); from_id => 0 replays the whole archive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Only the bounds given, so that the planner prunes the archive's
    -- day partitions and takes its indexes.  An id archived twice (sent,
    -- failed, put back from dead letters and sent again) is replayed
    -- once.  The new ids are drawn in the order the rows come, which is
    -- the ORDER BY's.
    cond := concat_ws(' AND ', 'true',
                      CASE WHEN from_ts IS NOT NULL THEN 'published_at >= $1' END,
                      CASE WHEN to_ts IS NOT NULL THEN 'published_at < $2' END,
                      CASE WHEN topic IS NOT NULL THEN 'topic = $3' END,
                      CASE WHEN key IS NOT NULL THEN 'key = $4' END,
                      CASE WHEN from_id IS NOT NULL THEN 'id >= $5' END,
                      CASE WHEN to_id IS NOT NULL THEN 'id <= $6' END);
    EXECUTE format(
        'INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
        'SELECT a.topic, a.key, a.type, a.payload, '
        '       a.headers || jsonb_build_object(''pgoutbox-replay-of'', a.id::text) '
        '  FROM (SELECT DISTINCT ON (id) * FROM pgoutbox.%I WHERE %s '
        '         ORDER BY id, published_at DESC) a '
        ' ORDER BY a.id', queue, queue || '_archive', cond)
    USING from_ts, to_ts, topic, key, from_id, to_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

COMMENT ON FUNCTION pgoutbox.replay(text, timestamptz, timestamptz, text, text, bigint, bigint) IS
    'Queues archived events again (new ids, original order, header pgoutbox-replay-of); returns how many.';
