# PostgreSQL restarted (fast, then crash-like immediate) while a relay
# runs: the relay reconnects by itself and finishes; nothing is lost.
. "$(dirname "$0")/../lib.sh"
# A cluster of its own, so restarting it disturbs no other test.
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 1000)"
start_relay "$T_TMP/out" --sink stdout --poll-interval 1s
relay=$RELAY_PID
wait_until 20 '[ "$(pending)" = 0 ]'
pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
sleep 1.5
pg_start_again
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 150000)"
wait_until 30 '[ "$(ids_of "$T_TMP/out" | wc -l)" -gt 2000 ]'
# Crash-like: immediate shutdown in the middle of the drain.
pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null
sleep 1
pg_start_again
wait_until 90 '[ "$(pending)" = 0 ]'
kill -0 "$relay" || fail "the relay exited when PostgreSQL went away"
stop_relay "$relay"
n=$(ids_of "$T_TMP/out" | sort -u | wc -l)
[ "$n" = 151000 ] || fail "expected 151000 distinct events, got $n"
grep -q 'connection lost' "$T_TMP/out.log" || fail "no 'connection lost' in the log"
grep -q 'connected to' "$T_TMP/out.log" || fail "no reconnect in the log"
note "deliveries $(ids_of "$T_TMP/out" | wc -l) for 151000 events"
