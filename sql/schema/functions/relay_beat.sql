-- A relay's heartbeat and its neighbours of another mode.  Registers (or
-- refreshes) the member p_member of queue p_queue running p_mode, forgets
-- members whose session is gone, and returns the live members of the
-- queue (session present, heartbeat within p_stale) that run another
-- mode.  p_join: the relay's first beat; then it is an error (object_in_use,
-- naming them), and the member is not registered, when there are any.
-- Stale members are left to rebalance(), which fences them first.
CREATE OR REPLACE FUNCTION pgoutbox.relay_beat(p_queue text, p_member text, p_mode text,
                                    p_stale interval, p_join boolean)
RETURNS TABLE (other_member text, other_mode text, other_pid integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a relay role needs only EXECUTE
AS $$
DECLARE
    others text;
    modes  text;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('concurrent', 'ordered', 'strict') THEN
        RAISE EXCEPTION 'pgoutbox.relay_beat: mode must be concurrent, ordered or strict, not %',
            coalesce(p_mode, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A join takes the lock of rebalance(): a join and the rounds (or
    -- joins) of other members see each other's rows, never both miss
    -- them.  Later beats need no lock: they only refresh their own row.
    IF p_join THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgoutbox.rebalance.' || p_queue), 0);
    END IF;
    SET LOCAL synchronous_commit = off;
    DELETE FROM pgoutbox.relays r
     WHERE r.queue = p_queue AND r.member <> p_member
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = r.backend_pid);
    IF p_join THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s)', r.member, r.mode),
                                     ', ' ORDER BY r.member),
               pg_catalog.string_agg(DISTINCT r.mode, ' and ')
          INTO others, modes
          FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.member <> p_member AND r.mode <> p_mode
           AND r.heartbeat_at >= pg_catalog.now() - p_stale;
        IF others IS NOT NULL THEN
            RAISE EXCEPTION 'queue "%" has relays in % mode: %; this one runs in % mode, and relays of different modes on one queue break its per-key order (docs/ordering.md, "Mixing modes"): run every relay of the queue in one mode (stop those first, or start this one with --mode %)',
                p_queue, modes, others, p_mode,
                CASE WHEN modes LIKE '% and %' THEN 'MODE' ELSE modes END
                USING ERRCODE = 'object_in_use';
        END IF;
    END IF;
    INSERT INTO pgoutbox.relays AS r (queue, member, backend_pid, mode)
    VALUES (p_queue, p_member, pg_catalog.pg_backend_pid(), p_mode)
    ON CONFLICT (queue, member) DO UPDATE
        SET backend_pid = EXCLUDED.backend_pid, mode = EXCLUDED.mode, heartbeat_at = pg_catalog.now()
        WHERE r.backend_pid <> EXCLUDED.backend_pid
           OR r.mode <> EXCLUDED.mode
           OR r.heartbeat_at < pg_catalog.now() - p_stale / 4;
    RETURN QUERY
        SELECT r.member, r.mode, r.backend_pid FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.member <> p_member AND r.mode <> p_mode
           AND r.heartbeat_at >= pg_catalog.now() - p_stale
         ORDER BY r.member;
END $$;

COMMENT ON FUNCTION pgoutbox.relay_beat(text, text, text, interval, boolean) IS
    'A relay''s heartbeat in pgoutbox.relays; returns the live relays of the queue in another mode (p_join: refuses to join them).';
