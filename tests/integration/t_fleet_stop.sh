# SIGTERM to a fleet whose databases finish in different turns: one
# database's batch is at a slow exec sink (2 s a batch) while the other
# has nothing in flight.  The idle database's relay stops at once, the
# busy one's once its batch has settled, and the process exits 0 within
# stop_relay's 10 s, its batch delivered and its queue empty.
. "$(dirname "$0")/../lib.sh"
for d in t_fleet_stop_a t_fleet_stop; do t_db "$d"; done
A=$(pg_url t_fleet_stop_a) B=$(pg_url t_fleet_stop)
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
cat >>"$T_TMP/out"
touch "$T_TMP/busy"
sleep 2
SH
chmod +x "$T_TMP/sink.sh"
start_relay "$T_TMP/relay" --sink exec --exec "$T_TMP/sink.sh" --db "$A" --db "$B"
relay=$RELAY_PID
wait_until 30 'grep -q "owns 64 shards" "$T_TMP/relay.log" && [ "$(grep -c "owns 64 shards" "$T_TMP/relay.log")" -ge 2 ]'
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 1}')" >/dev/null
wait_until 30 '[ -e "$T_TMP/busy" ]'
stop_relay "$relay"
grep -q '"n": 1' "$T_TMP/out" || fail "the batch in flight was not delivered"
[ "$(pending)" = 0 ] || fail "the busy database's event is still queued"
grep -q 'relay outbox@t_fleet_stop_a -> exec: stopped' "$T_TMP/relay.log" || fail "no 'stopped' line of the idle database"
note "the idle database stopped at once, the busy one after its batch; exit 0"
