# Order under chaos: 4 ordered relays, 200 keys, producers that serialize
# per key; for ${CHAOS_SECONDS:-40} s relays are killed (kill -9), stopped
# (SIGTERM) and started at random about every second.  Every event arrives
# at least once, and per key the first deliveries follow commit order with
# no gap.  All relays append to one file, so its order is arrival order.
# (CHAOS_MODE=concurrent shows the check failing: SKIP LOCKED has no order.)
. "$(dirname "$0")/../lib.sh"
t_db
make_aggregates
SECS=${CHAOS_SECONDS:-40}
RANDOM=${SEED:-7}
OUT=$T_TMP/all
: >"$OUT"
declare -a relay
# The sink takes 0-40 ms per batch, so batches of different relays race:
# without shard leases, later events of a key often overtake earlier ones.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
sleep 0.0\$(( \$\$ % 5 ))
cat >> $OUT
SH
chmod +x "$T_TMP/sink.sh"
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --mode "${CHAOS_MODE:-ordered}" --sink exec \
		--exec "$T_TMP/sink.sh" --batch 50 --heartbeat 200ms --name "r$1" \
		2>>"$T_TMP/relay$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
for i in 0 1 2 3; do launch $i; done
PRODUCERS=()
start_producer "$SECS"
start_producer "$SECS"
kills=0 terms=0
end=$((SECONDS + SECS))
while [ $SECONDS -lt $end ]; do
	sleep "0.$((RANDOM % 9 + 5))"
	i=$((RANDOM % 4))
	if [ $((RANDOM % 2)) = 0 ]; then
		kill -9 "${relay[$i]}" 2>/dev/null || true
		kills=$((kills + 1))
	else
		kill -TERM "${relay[$i]}" 2>/dev/null || true
		terms=$((terms + 1))
	fi
	wait "${relay[$i]}" 2>/dev/null || true
	launch "$i"
done
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed: $(cat "$T_TMP"/producer.*.log)"; done
wait_until 60 '[ "$(pending)" = 0 ]'
for i in 0 1 2 3; do stop_relay "${relay[$i]}"; done
note "$kills kill -9 and $terms SIGTERM in ${SECS}s; events committed: $(q 'SELECT sum(version) FROM agg')"
python3 "$(dirname "$0")/../order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$(head -1 "$T_TMP/check")"
