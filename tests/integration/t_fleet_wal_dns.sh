# A WAL queue in a fleet looks no host name up on the loop
# (docs/fleet.md).  One relay process serves two databases of one
# cluster: fwa's queue ev is captured through the WAL and named by a
# host name whose lookup takes 3 s (tests/slow_dns.c, LD_PRELOAD); fwb's
# is a table queue.  fwa's start thread looks the name up, and its
# stream and plain connection are given the address (hostaddr), as its
# other sessions are.  Probe events in fwb arrive within 2 s each while
#  - fwa starts and its stream connects;
#  - fwa's walsender is terminated and its stream reconnects;
#  - fwa dead-letters an event (its plain connection's first connect);
# then fwa's dead letter is written once and its next event follows.
# Failed with libpq looking the name up on the loop: a probe took the
# lookup's 3 s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../fleet_wal.sh"
cc -shared -fPIC -o "$T_TMP/slow_dns.so" "$(dirname "$0")/../slow_dns.c" -ldl ||
	fail "cannot build the slow_dns.so shim"
fleet_wal_setup
fleet_wal_sink 'echo "dead $id refused for good"'
export PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms PGOUTBOX_RELAY_RECONNECT_MAX=1s
# ASan's runtime must come first unless told otherwise.
LD_PRELOAD=$T_TMP/slow_dns.so SLOW_DNS_MS=3000 \
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
	start_relay "$T_TMP/r" --queue ev --sink exec --exec "$T_TMP/sink.sh" \
	--db "host=fwa.test port=$PG_PORT user=postgres dbname=fwa" --db "$(pg_url fwb)"
RELAY=$RELAY_PID
probe >/dev/null # fwb serves
starting=$(probes_until $((SECONDS + 6)) "fwa started")
grep -q "streaming slot" "$T_TMP/r.log" || starting+=" $(probes_until $((SECONDS + 6)) "fwa started")"
grep -q "streaming slot" "$T_TMP/r.log" || fail "fwa's stream did not start: $(tail -5 "$T_TMP/r.log")"
send fwa a 1 >/dev/null
wait_until 10 'from fwa | qgrep "\"n\": 1}"'

# fwa's walsender terminated: the stream reconnects (every second).
[ "$(sql fwa "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type = 'walsender' AND datname = 'fwa'")" = 1 ] ||
	fail "no walsender of fwa to terminate"
again=$(probes_until $((SECONDS + 5)) "fwa's stream reconnected")
wait_until 10 '[ "$(grep -c "streaming slot" "$T_TMP/r.log")" -ge 2 ]'

# A dead letter: the plain connection's first connect.
BAD=$(send fwa bad 2)
send fwa a 3 >/dev/null
dead=$(probes_until $((SECONDS + 5)) "fwa's plain connection connected")
fleet_wal_written "$BAD" 1
note "probes on fwb: max $(max $starting) ms while fwa started (3 s a lookup), max $(max $again) ms while its stream reconnected, max $(max $dead) ms while it dead-lettered an event; then written once, its next event after it"
