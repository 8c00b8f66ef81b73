# Shard leases: 1 -> 4 -> 2 relays end with an even share (±1 shard per
# lease holder); after kill -9 of a relay its shards are owned and drained
# again quickly (the time is measured and reported, asserted loosely); a
# rolling deploy (new relays overlap old ones, old ones get SIGTERM) keeps
# per-key order; `status` shows the owners.
. "$(dirname "$0")/../lib.sh"
t_db
make_aggregates
OUT=$T_TMP/all
: >"$OUT"
declare -A relay
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --mode ordered --sink stdout \
		--in-flight 1 --batch 100 --heartbeat 200ms --name "$1" >>"$OUT" 2>>"$T_TMP/$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
# Shards per lease holder, e.g. "16 16 16 16".
shares() {
	q "SELECT string_agg(n::text, ' ' ORDER BY n) FROM (SELECT count(*) n FROM pg_locks
	   WHERE locktype = 'advisory' AND objsubid = 2 AND granted
	   AND classid = pgoutbox.lease_ns('outbox')::oid
	   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	   GROUP BY pid) s"
}
even() { # even N: N holders, 64 shards, each 64/N rounded either way
	local s sum=0; s=$(shares)
	[ "$(wc -w <<<"$s")" = "$1" ] || return 1
	for x in $s; do sum=$((sum + x)); done
	[ "$sum" = 64 ] || return 1
	for x in $s; do [ "$x" -ge $((64 / $1)) ] && [ "$x" -le $(((64 + $1 - 1) / $1)) ] || return 1; done
}
PRODUCERS=()
start_producer 30 0.002
launch a
wait_until 10 'even 1'
note "1 relay: shares $(shares)"
launch b; launch c; launch d
wait_until 10 'even 4'
note "4 relays: shares $(shares)"
"$PGO_BIN" status >"$T_TMP/status"
grep -q 'lease holders (ordered/strict relays): 4' "$T_TMP/status" || fail "status: $(cat "$T_TMP/status")"
grep -q '16 shards: ' "$T_TMP/status" || fail "status shows no shard lists: $(cat "$T_TMP/status")"
stop_relay "${relay[c]}"; stop_relay "${relay[d]}"
wait_until 10 'even 2'
note "2 relays after SIGTERM of 2: shares $(shares)"

# Failover: kill -9 one of two; the other owns all 64 within a moment.
t0=$(date +%s%N)
kill -9 "${relay[b]}"
wait_until 10 'even 1'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
note "failover after kill -9: all 64 shards owned again in ${ms} ms"
[ "$ms" -lt 5000 ] || fail "failover took ${ms} ms"
# ...and events in the dead relay's shards flow again.
before=$(wc -l <"$OUT")
wait_until 5 '[ $(wc -l <"$OUT") -gt $((before + 50)) ]'

# Rolling deploy: new relays start, old ones get SIGTERM one at a time.
launch e; launch f
wait_until 10 'even 3'
stop_relay "${relay[a]}"
launch g
wait_until 10 'even 3'
note "rolling deploy: shares $(shares)"
for p in "${PRODUCERS[@]}"; do wait "$p"; done
wait_until 30 '[ "$(pending)" = 0 ]'
for r in e f g; do stop_relay "${relay[$r]}"; done
python3 "$(dirname "$0")/../order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$(head -1 "$T_TMP/check")"
[ "$(q "SELECT count(*) FROM pgoutbox.relays")" = 0 ] || fail "relays stopped with SIGTERM left member rows: $(q 'SELECT member FROM pgoutbox.relays')"
# One INFO line per change of share, the shard lists only at debug
# (issue 20 item 9).
grep -h 'INFO .*owns [0-9]* shard' "$T_TMP"/*.log | qgrep '{' && fail "shard lists at INFO: $(grep -h 'INFO .*owns' "$T_TMP"/*.log | grep -m2 '{')"
grep -qh 'INFO .*owns [0-9]* shards (was [0-9]*)$' "$T_TMP"/*.log || fail "no summary line of a rebalance"
