# Stalls (issue 19, item 7): three ordered relays share the outbox while
# producers write; then one relay is stopped (SIGSTOP) and the TCP proxy
# between another one and PostgreSQL is stopped too (the kernel keeps
# accepting and ACKing: a hung path, not a closed one), for
# ${STALL_SECONDS:-60} s.  The third relay fences both (their sessions
# are terminated, so neither can commit after it) and takes all 64 shards
# within a few heartbeats of the lease timeout; events keep flowing during
# the stall; once both wake up, they rejoin, and per key the first
# deliveries follow commit order with nothing lost.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
make_aggregates
STALL=${STALL_SECONDS:-60}
OUT=$T_TMP/all
: >"$OUT"
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
PROXY_URL="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=$(basename "$0" .sh)"
launch() { # name, extra args
	local name=$1; shift
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --mode ordered --sink exec \
		--exec "cat >> $OUT" --batch 50 --heartbeat 200ms --lease-timeout 2s \
		--name "$name" "$@" 2>>"$T_TMP/$name.log" &
	PIDS+=("$!")
	LAUNCHED=$!
}
launch r0; R0=$LAUNCHED
launch r1 --db "$PROXY_URL"; R1=$LAUNCHED
launch r2; R2=$LAUNCHED
# Shard leases held by one relay's sessions.
leases_of() {
	q "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
	      AND l.classid = pgoutbox.lease_ns('outbox')::oid
	      AND a.application_name = 'pgoutbox relay $1'"
}
wait_until 20 '[ "$(leases_of r0)" -gt 0 ] && [ "$(leases_of r1)" -gt 0 ] && [ "$(leases_of r2)" -gt 0 ]'
PRODUCERS=()
start_producer $((STALL + 15)) 0.002
start_producer $((STALL + 15)) 0.002
sleep 3 # traffic through all three relays before the stall
kill -STOP "$R0" "$PROXY"
stopped=$SECONDS
before=$(wc -l <"$OUT")
# r2 fences the silent members and takes their shards.
wait_until 20 '[ "$(leases_of r2)" = 64 ]'
took=$((SECONDS - stopped))
grep -q "member r0/.* was terminated" "$T_TMP/r2.log" || fail "r2 did not say it fenced r0: $(tail -5 "$T_TMP/r2.log")"
grep -q "member r1/.* was terminated" "$T_TMP/r2.log" || fail "r2 did not say it fenced r1: $(tail -5 "$T_TMP/r2.log")"
# Events of every key keep flowing while both are stalled.
wait_until 20 "[ \$(wc -l <'$OUT') -gt $((before + 500)) ]"
while [ $((SECONDS - stopped)) -lt "$STALL" ]; do sleep 0.5; done
# Still stalled after all that time: the pending events are r2's alone.
[ "$(leases_of r2)" = 64 ] || fail "r2 holds $(leases_of r2) of 64 leases during the stall"
kill -CONT "$PROXY" "$R0"
# Both wake up, find their sessions gone, reconnect and rejoin.
wait_until 30 '[ "$(leases_of r0)" -gt 0 ] && [ "$(leases_of r1)" -gt 0 ]'
grep -q "no reply from PostgreSQL within\|connection lost" "$T_TMP/r1.log" || fail "r1 never noticed its hung connection: $(tail -5 "$T_TMP/r1.log")"
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed: $(cat "$T_TMP"/producer.*.log)"; done
wait_until 60 '[ "$(pending)" = 0 ]'
for p in "$R0" "$R1" "$R2"; do stop_relay "$p"; done
kill "$PROXY" 2>/dev/null || true
python3 "$(dirname "$0")/../order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "${STALL}s stall of a relay and of a proxy: r2 took all 64 shards in ${took}s; $(head -1 "$T_TMP/check")"
