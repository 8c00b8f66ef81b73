-- The rows of a batch, in input order (i), each element checked: a bad
-- one raises from inside the INSERT that reads them.  unnest() of several
-- arrays walks them side by side (a NULL array gives NULLs).  STABLE and
-- without settings so that PostgreSQL inlines it into that INSERT.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch_rows(payloads jsonb[], keys text[], types text[],
                                         headers jsonb[], topics text[], one text)
RETURNS TABLE (topic text, key text, type text, payload jsonb, header jsonb, i bigint)
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN one IS NOT NULL THEN one
                WHEN p.topic IS NULL OR p.topic = ''
                THEN pgoutbox.send_batch_error('topics', p.i, 'is empty or NULL')
                ELSE p.topic END,
           p.key,
           coalesce(p.type, ''),
           CASE WHEN p.payload IS NULL
                THEN pgoutbox.send_batch_error('payloads', p.i, 'is NULL (use ''null''::jsonb)')::jsonb
                WHEN pg_catalog.pg_column_size(p.payload) > 1048576
                THEN pgoutbox.send_batch_error('payloads', p.i,
                         pg_catalog.format('is %s bytes, the limit is 1048576',
                                           pg_catalog.pg_column_size(p.payload)),
                         '54000')::jsonb
                ELSE p.payload END,
           CASE WHEN p.header IS NULL THEN '{}'
                WHEN pg_catalog.jsonb_typeof(p.header) <> 'object'
                THEN pgoutbox.send_batch_error('headers', p.i,
                         pg_catalog.format('must be a JSON object, not %s',
                                           pg_catalog.jsonb_typeof(p.header)))::jsonb
                ELSE p.header END,
           p.i
      FROM unnest(payloads, keys, types, headers,
                  CASE WHEN one IS NULL THEN topics END)
           WITH ORDINALITY AS p(payload, key, type, header, topic, i)
$$;
