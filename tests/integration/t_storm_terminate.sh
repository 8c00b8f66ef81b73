# A DBA's pg_terminate_backend of every pgoutbox session, 5 times a
# second for 30 s, under load (issue 38, connection storms): three
# ordered relays, an exec worker, an sql worker and cron keep running;
# every acknowledged event is delivered in per-key order, every job done
# (the sql ones once), no cron tick fired twice, /readyz is 200 after,
# and the log says what happens without flooding: each process writes
# fewer than 100 lines in the 30 s (before, a relay wrote 1,175 in 20 s:
# a "connection lost" and a "connected to" per kill and connection).
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
. "$(dirname "$0")/../fleet.sh"
fleet_schema
fleet_start "$DATABASE_URL" 3
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
wait_until 30 '[ "$(code_of http://127.0.0.1:$MPORT/readyz)" = 200 ]'
fleet_produce "$DATABASE_URL" 34
sleep 2
fleet_loglines >"$T_TMP/lines.before"
kills=0
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
	n=$(q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	       WHERE application_name LIKE 'pgoutbox %' AND pid <> pg_backend_pid()")
	kills=$((kills + n))
	sleep 0.2
done
fleet_loglines >"$T_TMP/lines.after"
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$DATABASE_URL"
wait_until 30 '[ "$(code_of http://127.0.0.1:$MPORT/readyz)" = 200 ]'
fleet_stop
fleet_check "$DATABASE_URL"
lines=$(join "$T_TMP/lines.before" "$T_TMP/lines.after" | awk '{ print $1, $3 - $2 }')
note "$kills sessions terminated in 30 s; log lines in those 30 s: $(echo $lines)"
while read -r f n; do
	[ "$n" -lt 100 ] || { tail -n 20 "$T_TMP/$f" >&2; fail "$f: $n log lines in a 30 s storm (limit 99)"; }
done <<<"$lines"
grep -q 'connection lost' "$T_TMP/relay0.log" || fail "the relay never said its connection was lost"
