# max_connections exhausted by another client for 30 s (issue 38,
# connection storms): a client (one session, dblink) takes every free
# slot, ends every pgoutbox session and takes the slots they free, for
# 30 s.  pgoutbox waits: /readyz 503 meanwhile, the reason ("too many
# clients") logged once every few seconds, not at every attempt; then it
# resumes: /readyz 200, every acknowledged event delivered in order and
# every job done (the producer kept its session and wrote throughout).
# Seen failing with the rate limit off (conn.c's pgo_outage_failed and
# pgo_outage_up logging every attempt): relay0 wrote 45 lines in the
# 30 s; with /readyz blind to PostgreSQL (relay/observe.c's ready()):
# no 503 within 10 s.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off max_connections=60
trap 'cleanup_pids; pg_stop' EXIT
t_db
. "$(dirname "$0")/../fleet.sh"
fleet_schema
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE EXTENSION dblink;
CREATE PROCEDURE hog(seconds float8) LANGUAGE plpgsql AS \$\$
DECLARE
    n int := 0;
    ended boolean := false;
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        BEGIN
            PERFORM dblink_connect('h' || n, '$(pg_url t_storm_maxconn) application_name=hog');
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            -- Full: end pgoutbox's sessions once, then take what they free.
            IF NOT ended THEN
                PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name LIKE 'pgoutbox %';
                ended := true;
            END IF;
            PERFORM pg_sleep(0.02);
        END;
    END LOOP;
    RAISE NOTICE 'hog held % connections', n;
END \$\$;
SQL
fleet_start "$DATABASE_URL" 2
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
R=http://127.0.0.1:$MPORT/readyz
wait_until 30 '[ "$(code_of $R)" = 200 ]'
fleet_produce "$DATABASE_URL" 45
sleep 3
fleet_loglines >"$T_TMP/lines.before"
psql -X "$DATABASE_URL" -c "CALL hog(30)" >"$T_TMP/hog.log" 2>&1 &
hog=$!
PIDS+=("$hog")
wait_until 10 '[ "$(code_of $R)" = 503 ]'
note "/readyz while exhausted: $(curl -s $R)"
sleep 20
[ "$(code_of $R)" = 503 ] || fail "/readyz $(code_of $R) while every slot is taken"
wait "$hog" || fail "the hog failed: $(cat "$T_TMP/hog.log")"
fleet_loglines >"$T_TMP/lines.after"
note "$(grep -o 'hog held [0-9]* connections' "$T_TMP/hog.log")"
wait_until 30 '[ "$(code_of $R)" = 200 ]'
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$DATABASE_URL"
fleet_stop
fleet_check "$DATABASE_URL"
lines=$(join "$T_TMP/lines.before" "$T_TMP/lines.after" | awk '{ print $1, $3 - $2 }')
note "log lines in the 30 s: $(echo $lines)"
while read -r f n; do
	[ "$f" = cron.log ] && continue # a line per fired tick
	[ "$n" -lt 30 ] || { tail -n 20 "$T_TMP/$f" >&2; fail "$f: $n log lines in 30 s of exhaustion"; }
done <<<"$lines"
n=$(grep -c 'too many clients' "$T_TMP/relay0.log" || true)
[ "$n" -ge 2 ] || fail "the relay said 'too many clients' $n times in 30 s: $(tail -n 5 "$T_TMP/relay0.log")"
