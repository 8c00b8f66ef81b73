-- The content of a WAL-mode queue's logical message (send_to(),
-- send_batch_to(); docs/wal.md): the event's envelope as the relay hands
-- it to its sink, as JSON.  The parameters are the event domains, so
-- that an event is checked by the same caps as a row of a table queue.
-- created_at is the transaction's start, in RFC 3339 UTC as the table
-- path's relay writes it.
CREATE OR REPLACE FUNCTION pgoutbox.wal_envelope(id bigint, topic pgoutbox.event_topic,
                                                 key pgoutbox.event_key, type pgoutbox.event_type,
                                                 payload pgoutbox.event_payload,
                                                 headers pgoutbox.event_headers)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.jsonb_build_object(
               'id', id, 'topic', topic::text, 'key', key::text,
               'type', COALESCE(type::text, ''), 'payload', payload::jsonb,
               'headers', COALESCE(headers::jsonb, '{}'::jsonb),
               'created_at', pg_catalog.to_char(pg_catalog.now() AT TIME ZONE 'UTC',
                                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
$$;
