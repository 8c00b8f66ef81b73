-- 009_tz_offsets: time zones from PostgreSQL's own tzdata.
--
-- A cron schedule reads the wall clock of its zone.  The scheduler used to
-- read the zone's TZif file on its own host (src/lib/tz.c), so two hosts
-- with different tzdata could disagree on a tick, while "now" already came
-- from the database.  It now asks the database for the zone's UTC offsets
-- over the stretch of time it computes ticks in, and computes the ticks
-- from those (src/lib/cronexpr.c): every instance uses the database's
-- tzdata, the one its clock and its timestamptz arithmetic use too.

-- The UTC offsets (seconds east of UTC) of time zone tz at the instants
-- lo to hi (seconds since the epoch): one row for lo with the offset in
-- force then, and one row per change of offset after lo up to hi, at the
-- first instant of the new offset.
--
-- tz is read as SET TimeZone reads it: a zone name (pg_timezone_names; the
-- scheduler only stores names spelled as there) or a POSIX rule.  AT TIME
-- ZONE would not do: it reads a name that is also an abbreviation as the
-- abbreviation, a fixed offset ('CET' is +1 all year there, while the zone
-- CET has summer time).  The SET clause keeps the change of TimeZone
-- inside the function.
--
-- PostgreSQL does not show a zone's transitions, so they are found: the
-- offset is sampled once a day, and each day whose ends differ is bisected
-- down to the second (17 steps).  Two changes less than a day apart that
-- cancel out would not be seen; the closest changes in tzdata 2025b are
-- four days apart (Africa/Freetown, 1939).  Five years of a zone with
-- summer time take 5 to 15 ms.
--
-- It reads no table, so anyone may call it.
CREATE FUNCTION pgoutbox.tz_offsets(tz text, lo bigint, hi bigint)
RETURNS TABLE (at bigint, utc_offset integer)
LANGUAGE plpgsql
SET search_path = pg_catalog
SET TimeZone FROM CURRENT
AS $$
BEGIN
    IF lo IS NULL OR hi IS NULL OR hi < lo THEN
        RAISE EXCEPTION 'pgoutbox.tz_offsets: bad window % to %', lo, hi
            USING ERRCODE = 'data_exception';
    END IF;
    BEGIN
        PERFORM set_config('TimeZone', tz, true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'unknown time zone "%"', tz
            USING ERRCODE = 'invalid_parameter_value';
    END;
    RETURN QUERY
    WITH RECURSIVE
    grid (t, o) AS (
        SELECT g.t, extract(timezone FROM to_timestamp(g.t))::integer
          FROM (SELECT generate_series(lo, hi, 86400) UNION SELECT hi) g (t)),
    days (t0, t1, o0, o1) AS (
        SELECT t, lead(t) OVER w, o, lead(o) OVER w
          FROM grid WINDOW w AS (ORDER BY t)),
    -- [t0, t1): o0 at t0, another offset o1 at t1
    bisect (t0, t1, o0, o1) AS (
        SELECT d.t0, d.t1, d.o0, d.o1 FROM days d WHERE d.o1 <> d.o0
        UNION ALL
        SELECT CASE WHEN m.o = b.o0 THEN m.t ELSE b.t0 END,
               CASE WHEN m.o = b.o0 THEN b.t1 ELSE m.t END,
               b.o0,
               CASE WHEN m.o = b.o0 THEN b.o1 ELSE m.o END
          FROM bisect b,
               LATERAL (SELECT b.t0 + (b.t1 - b.t0) / 2 AS t) x,
               LATERAL (SELECT x.t, extract(timezone FROM to_timestamp(x.t))::integer AS o) m
         WHERE b.t1 - b.t0 > 1)
    SELECT g.t, g.o FROM grid g WHERE g.t = lo
    UNION ALL
    SELECT b.t1, b.o1 FROM bisect b WHERE b.t1 - b.t0 = 1;
END $$;

COMMENT ON FUNCTION pgoutbox.tz_offsets(text, bigint, bigint) IS
    'The UTC offset of a time zone at lo and each change of it up to hi (epoch seconds), from PostgreSQL''s tzdata.';
