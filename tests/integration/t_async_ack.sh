# The relay's acks do not wait for the WAL flush (relay.synchronous_commit
# off, the default): its sessions say so to the server, and `on` turns it
# back.  A server crash can then undo the newest acks, and their rows come
# back below the claim floor the relay had reached (a failover to a standby
# that had not received them does the same, whatever the setting).  The
# relay sets its floor back to 0 with a lost connection, so such rows go
# out at once after the reconnect, not when a sweep finds them (the first
# sweep here comes 30 s after the start: --poll-interval 60s).  Rows come
# back below the floor here the way an undone ack brings them: the drained
# events inserted again with their ids, while the relay is stopped
# (SIGSTOP), then the server restarted under it.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off log_statement=all
trap 'cleanup_pids; pg_stop' EXIT
t_db
delivered() { { ids_of "$T_TMP/out" || true; } | wc -l; }
distinct() { { ids_of "$T_TMP/out" || true; } | sort -u | wc -l; }

# What each setting tells the server.
: >"$PG_DIR/server.log"
start_relay "$T_TMP/on" --sink stdout --synchronous-commit on
wait_until 10 "grep -q \"set_config('synchronous_commit', 'on', false)\" '$PG_DIR/server.log'"
stop_relay "$RELAY_PID"
grep -q "set_config('synchronous_commit', 'off'" "$PG_DIR/server.log" &&
	fail "relay.synchronous_commit = on still set it off"

N=20000
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, $N)"
start_relay "$T_TMP/out" --sink stdout --poll-interval 60s --log-level debug
relay=$RELAY_PID
wait_until 10 "grep -q \"set_config('synchronous_commit', 'off', false)\" '$PG_DIR/server.log'"
wait_until 30 '[ "$(pending)" = 0 ]'
wait_until 10 "grep -q 'claim floor [0-9]* -> ' '$T_TMP/out.log'"
floor=$(grep -o 'claim floor [0-9]* -> [0-9]*' "$T_TMP/out.log" | tail -1 | awk '{print $5}')
# A few hundred acks undone: those events are back, with their ids.
kill -STOP "$relay"
q "INSERT INTO pgoutbox.outbox (id, topic, type, payload) SELECT i, 't', 'x', '{}' FROM generate_series(101, 400) i" >/dev/null
pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null
pg_start_again
kill -CONT "$relay"
t0=$SECONDS
wait_until 15 '[ "$(pending)" = 0 ]'
grep -q 'claim floor [0-9]* -> 0 with a lost connection' "$T_TMP/out.log" ||
	fail "the relay did not set its claim floor back to 0 with the lost connection"
again=$(($(delivered) - $(distinct)))
[ "$again" -ge 300 ] || fail "only $again events delivered twice; the 300 brought back below the floor ($floor) were not all sent again"
kill -0 "$relay" || fail "the relay exited"
stop_relay "$relay"
[ "$(distinct)" = "$N" ] || fail "expected $N distinct events, got $(distinct)"
note "300 events back below the floor $floor after a restart, sent again within $((SECONDS - t0)) s (the sweep would come at 30 s)"
