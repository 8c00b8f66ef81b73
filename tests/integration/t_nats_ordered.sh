# Ordered mode into JetStream with three relays killed (kill -9) and
# restarted at random while producers write: per key, the stream's order
# (its sequence numbers) follows commit order with no gap, and every
# event id is in the stream exactly once (the server's dedup drops the
# batches a killed relay had published without settling them).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
trap 'cleanup_pids; nats_stop' EXIT
nats_start "$T_TMP/nats"
js create AGG 'agg'
t_db
make_aggregates
SECS=${CHAOS_SECONDS:-15}
RANDOM=${SEED:-11}
declare -a relay
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --mode ordered --sink nats \
		--nats-url "$NATS_URL" --batch 50 --heartbeat 200ms --name "r$1" \
		2>>"$T_TMP/relay$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
for i in 0 1 2; do launch $i; done
PRODUCERS=()
start_producer "$SECS"
start_producer "$SECS"
kills=0
end=$((SECONDS + SECS))
while [ $SECONDS -lt $end ]; do
	sleep "0.$((RANDOM % 9 + 5))"
	i=$((RANDOM % 3))
	kill -9 "${relay[$i]}" 2>/dev/null || true
	kills=$((kills + 1))
	wait "${relay[$i]}" 2>/dev/null || true
	launch "$i"
done
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed: $(cat "$T_TMP"/producer.*.log)"; done
wait_until 60 '[ "$(pending)" = 0 ]'
for i in 0 1 2; do stop_relay "${relay[$i]}"; done
js dump AGG >"$T_TMP/dump.jsonl"
python3 - "$T_TMP/dump.jsonl" >"$T_TMP/stream.ndjson" <<'PY' || fail "an id is twice in the stream"
import json, sys
seen = set()
for line in open(sys.argv[1]):
    m = json.loads(line)
    i = m['headers']['Nats-Msg-Id']
    if i in seen:
        sys.exit(f'event {i} twice in the stream')
    seen.add(i)
    print(json.dumps({'id': int(i), 'key': m['headers']['Pgoutbox-Key'],
                      'payload': json.loads(m['data'])}))
PY
python3 "$(dirname "$0")/../order_check.py" "$T_TMP/stream.ndjson" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$kills kill -9 in ${SECS}s; $(head -1 "$T_TMP/check")"
