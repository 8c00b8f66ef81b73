-- The checks; returns the topic of every event when one is given (NULL
-- when each has its own, and for an empty batch).  fn names the caller.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch_args(fn text, topics text[], keys text[], types text[],
                                         payloads jsonb[], headers jsonb[])
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := cardinality(payloads);
    one text;
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.%: payloads must not be NULL', fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_ndims(payloads) > 1 OR array_ndims(topics) > 1 OR array_ndims(keys) > 1
       OR array_ndims(types) > 1 OR array_ndims(headers) > 1 THEN
        RAISE EXCEPTION 'pgoutbox.%: arrays must have one dimension', fn
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF topics IS NULL OR cardinality(topics) NOT IN (1, n) THEN
        RAISE EXCEPTION 'pgoutbox.%: % topics for % payloads: give one topic or one per payload',
            fn, coalesce(cardinality(topics), 0), n USING ERRCODE = 'array_subscript_error';
    END IF;
    IF cardinality(keys) <> n OR cardinality(types) <> n OR cardinality(headers) <> n THEN
        RAISE EXCEPTION 'pgoutbox.%: % payloads but % keys, % types, % headers: each array must have one element per payload (or be NULL)',
            fn, n, coalesce(cardinality(keys)::text, 'NULL'), coalesce(cardinality(types)::text, 'NULL'),
            coalesce(cardinality(headers)::text, 'NULL') USING ERRCODE = 'array_subscript_error';
    END IF;
    IF n = 0 OR cardinality(topics) <> 1 THEN
        RETURN NULL;
    END IF;
    one := topics[array_lower(topics, 1)];
    IF one IS NULL OR one = '' THEN
        RAISE EXCEPTION 'pgoutbox.%: topics[1] is empty or NULL', fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN one;
END $$;
