# PostgreSQL stopped and started 3 times in a minute under load (issue
# 38, connection storms): relays, workers and cron come back each time;
# /readyz is 503 while the server is down and 200 once it is back; every
# acknowledged event is delivered in per-key order and every job done
# (the sql ones once); no cron tick fired twice; the log stays short.
# A relay writes 13-15 log lines for the 3 restarts (limit 49); with the
# rate limit off (conn.c's pgo_outage_failed and pgo_outage_up logging
# every attempt) 78-101.  Seen failing that way, and with /readyz blind
# to PostgreSQL (relay/observe.c's ready()): no 503 within 10 s.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
. "$(dirname "$0")/../fleet.sh"
fleet_schema
# A short ceiling so that each comeback is quick (the default 10 s would
# make the three restarts take longer than the minute).
export PGOUTBOX_RELAY_RECONNECT_MAX=1s
fleet_start "$DATABASE_URL" 3
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
R=http://127.0.0.1:$MPORT/readyz
wait_until 30 '[ "$(code_of $R)" = 200 ]'
fleet_produce "$DATABASE_URL" 50
sleep 3
start=$SECONDS
for i in 1 2 3; do
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
	wait_until 10 '[ "$(code_of $R)" = 503 ]'
	note "restart $i: /readyz while down: $(curl -s $R)"
	sleep 2
	pg_start_again
	wait_until 30 '[ "$(code_of $R)" = 200 ]'
	sleep 10
done
[ $((SECONDS - start)) -le 60 ] || fail "3 restarts took $((SECONDS - start)) s"
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$DATABASE_URL"
[ "$(code_of $R)" = 200 ] || fail "/readyz $(code_of $R) after the restarts"
fleet_stop
fleet_check "$DATABASE_URL"
lines=$(fleet_loglines)
note "log lines: $(echo $lines)"
while read -r f n; do
	[ "$f" = cron.log ] && continue # a line per fired tick
	[ "$n" -lt 50 ] || { tail -n 20 "$T_TMP/$f" >&2; fail "$f: $n log lines for 3 restarts (limit 49)"; }
done <<<"$lines"
