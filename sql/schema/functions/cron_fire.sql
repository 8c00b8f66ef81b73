-- Handles the ticks (prev, ticks[last]] of one schedule in ONE transaction:
-- the compare-and-set on last_tick (only one scheduler instance wins; the
-- others get 0 and do nothing), then per tick either a job (fire[i]) and a
-- 'fired' row, or a 'skipped' row with reasons[i].  With overlap 'skip' the
-- job's unique_key is 'cron:<name>', and a tick whose previous job is still
-- queued or running is skipped.  Returns the number of jobs enqueued, or -1
-- when another instance had already handled these ticks.  Creates today's
-- cron history partition when missing (after the compare-and-set: only the
-- winner may need it).
CREATE OR REPLACE FUNCTION pgoutbox.cron_fire(p_name text, p_prev bigint, p_ticks bigint[],
                                   p_fire boolean[], p_reasons text[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s      pgoutbox.cron_schedules;
    n      integer := 0;
    tick   timestamptz;
    job    bigint;
    ukey   text;
    busy   boolean;
BEGIN
    UPDATE pgoutbox.cron_schedules c
       SET last_tick = to_timestamp(p_ticks[array_upper(p_ticks, 1)])
     WHERE c.name = p_name AND c.enabled
       AND c.last_tick IS NOT DISTINCT FROM to_timestamp(p_prev)
    RETURNING c.* INTO s;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    -- Today's history partition, if maintenance has not made it yet.
    PERFORM pgoutbox.cron_history_partition((now() AT TIME ZONE 'UTC')::date);
    ukey := CASE WHEN s.overlap = 'skip' THEN 'cron:' || s.name END;
    FOR i IN 1..array_upper(p_ticks, 1) LOOP
        tick := to_timestamp(p_ticks[i]);
        IF NOT p_fire[i] THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', p_reasons[i]);
            CONTINUE;
        END IF;
        busy := false;
        IF ukey IS NOT NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgoutbox.%I WHERE unique_key = $1)', s.queue)
               INTO busy USING ukey;
        END IF;
        IF busy THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', 'previous run still queued or running');
            CONTINUE;
        END IF;
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers, unique_key) '
                       'VALUES (''cron'', $1, ''cron.tick'', $2, $3, $4) RETURNING id', s.queue)
           INTO job
          USING s.name, s.payload,
                jsonb_build_object('cron', s.name, 'tick', to_char(tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                ukey;
        INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason, job_id)
        VALUES (p_name, tick, 'fired', p_reasons[i], job);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
