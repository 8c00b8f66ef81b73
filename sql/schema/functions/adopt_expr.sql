-- A flag's value as SQL: a column of the table (quoted), or an expression.
-- A bare name that is no column is an error naming the flag.
CREATE OR REPLACE FUNCTION pgoutbox.adopt_expr(rel regclass, flag text, v text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute a
                WHERE a.attrelid = rel AND a.attname = v AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RETURN format('%I', v);
    END IF;
    IF v ~ '^[A-Za-z_][A-Za-z0-9_]*$' AND lower(v) NOT IN ('true', 'false', 'null') THEN
        RAISE EXCEPTION 'pgoutbox adopt: %: % has no column %; pass % COLUMN, an expression, or a quoted constant such as % "''orders''" (the defaults are the columns of Debezium''s outbox: id, aggregatetype, aggregateid, type, payload)',
            flag, rel, v, flag, flag USING ERRCODE = 'undefined_column';
    END IF;
    RETURN v;
END $$;
