-- Raised from inside the batch INSERT for the first bad element, so that
-- the statement (and nothing else) is the unit that fails.  Returns text
-- only to fit where it is called; it never returns.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch_error(what text, i bigint, detail text,
                                          code text DEFAULT '22023')
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pgoutbox.send_batch: %[%] %', what, i, detail
        USING ERRCODE = code;
END $$;
