-- A payload or header text as jsonb for dead letters: the JSON it holds,
-- or the text itself as a JSON string when it is not JSON.
CREATE OR REPLACE FUNCTION pgoutbox.adopted_jsonb(t text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN t::jsonb;
EXCEPTION WHEN others THEN
    RETURN to_jsonb(t);
END $$;
