-- The type of expression e over table tbl (aliased t), or an error naming
-- the flag.
CREATE OR REPLACE FUNCTION pgoutbox.adopt_type(tbl text, flag text, e text) RETURNS regtype
LANGUAGE plpgsql AS $$
DECLARE
    ty regtype;
    msg text;
BEGIN
    EXECUTE format('SELECT pg_typeof((SELECT (%s) FROM %s LIMIT 0))', e, tbl) INTO ty;
    RETURN ty;
EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RAISE EXCEPTION 'pgoutbox adopt: %: "%" does not work on %: %', flag, e, tbl, msg
        USING ERRCODE = 'invalid_parameter_value';
END $$;
