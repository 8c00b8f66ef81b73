# Order into Kafka under chaos: three ordered relays publish 20,000 events
# over 200 keys (producers serialize per key) to the mock cluster while one
# relay is killed (kill -9) and started again every 0.5-1 s.  Read back with
# kcat, partition by partition (a key lives on one partition): nothing is
# lost, per key the first deliveries follow commit order, and every
# duplicate carries the same id header as the first copy.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../kafka.sh"
trap 'cleanup_pids; kafka_stop' EXIT
kafka_start "$T_TMP/kafka"
t_db
make_aggregates
kafka_cmd topic agg 6
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE PROCEDURE produce_n(n int) LANGUAGE plpgsql AS $$
DECLARE k text; v int;
BEGIN
    FOR i IN 1..n LOOP
        k := 'k' || (1 + floor(random() * 200))::int;
        UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
        PERFORM pgoutbox.send('agg', k, 'agg.changed', jsonb_build_object('v', v));
        COMMIT;
        -- about 15 s in all, so that relays die all along
        IF i % 100 = 0 THEN PERFORM pg_sleep(0.1); END IF;
    END LOOP;
END $$;
SQL
declare -a relay
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --mode ordered --sink kafka \
		--kafka-brokers "$KAFKA_BROKERS" --batch 100 --heartbeat 200ms --name "r$1" \
		2>>"$T_TMP/relay$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
for i in 0 1 2; do launch $i; done
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce_n(10000)" >/dev/null &
p1=$!
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce_n(10000)" >/dev/null &
p2=$!
PIDS+=("$p1" "$p2")
kills=0
RANDOM=7
while kill -0 "$p1" 2>/dev/null || kill -0 "$p2" 2>/dev/null || [ "$(pending)" -gt 2000 ]; do
	sleep "0.$((RANDOM % 5 + 5))"
	i=$((RANDOM % 3))
	kill -9 "${relay[$i]}" 2>/dev/null || true
	wait "${relay[$i]}" 2>/dev/null || true
	kills=$((kills + 1))
	launch "$i"
	[ $kills -lt 60 ] || break
done
wait "$p1" || fail "a producer failed"
wait "$p2" || fail "a producer failed"
wait_until 60 '[ "$(pending)" = 0 ]'
for i in 0 1 2; do stop_relay "${relay[$i]}"; done
[ "$(q 'SELECT sum(version) FROM agg')" = 20000 ] || fail "the producers committed $(q 'SELECT sum(version) FROM agg') events"
kcat_dump agg >"$T_TMP/agg.jsonl"
# Partition by partition, in offset order, as NDJSON for order_check.py.
python3 - "$T_TMP/agg.jsonl" "$T_TMP/all" <<'EOF' || fail "duplicates with another id (see above)"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
msgs.sort(key=lambda m: (m['partition'], m['offset']))
ids = {}
with open(sys.argv[2], 'w') as out:
    for m in msgs:
        h = m['headers']
        eid = dict(zip(h[0::2], h[1::2]))['id']
        payload = json.loads(m['payload'])
        k = (m['key'], payload['v'])
        if ids.setdefault(k, eid) != eid:
            sys.exit(f'key {k[0]} version {k[1]}: ids {ids[k]} and {eid}')
        out.write(json.dumps({'id': int(eid), 'key': m['key'], 'payload': payload}) + '\n')
EOF
python3 "$(dirname "$0")/../order_check.py" "$T_TMP/all" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check" >&2; fail "order check"; }
note "$kills kill -9 of 3 ordered relays; $(head -1 "$T_TMP/check")"
