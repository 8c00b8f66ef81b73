-- The content of a WAL-mode queue's logical message (send_to(),
-- send_batch_to(); docs/wal.md): the event's envelope as the relay hands
-- it to its sink, as JSON.  The parameters are the event domains, so
-- that an event is checked by the same caps as a row of a table queue.
-- No created_at: the relay gives every event the commit time of its
-- transaction, which the stream carries (send_to() writes the same
-- fields).
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
               'headers', COALESCE(headers::jsonb, '{}'::jsonb))::text
$$;
