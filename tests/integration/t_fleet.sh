# A relay fleet over 3 PostgreSQL clusters (docs/fleet.md): 3 relay
# processes each serve the 3 databases ([database NAME] sections, ordered
# mode) into one exec sink appending to one file, while a producer writes
# on every shard and one relay process is killed -9 about every 2 s and
# started again.  Every event of every shard arrives, each carries its
# shard's "pgoutbox-source" header, per key within each shard the first
# deliveries follow commit order (order_check.py), and every sample of
# each cluster's shard leases shows each shard held by one session at
# most; at the end each shard is held once.
. "$(dirname "$0")/../lib.sh"
SECS=${FLEET_SECONDS:-20}
DIRS=("$PG_DIR") PORTS=("$PG_PORT")
for i in 2 3; do
	PG_PORT= pg_start "$T_TMP/pg$i" fsync=off
	DIRS+=("$PG_DIR") PORTS+=("$PG_PORT")
done
trap 'cleanup_pids; pg_stop_dir "${DIRS[1]}"; pg_stop_dir "${DIRS[2]}"' EXIT
PG_DIR=${DIRS[0]} PG_PORT=${PORTS[0]}
url() { echo "host=${DIRS[$1]} port=${PORTS[$1]} user=postgres dbname=t_fleet"; }
CONF=$T_TMP/fleet.ini
: >"$CONF"
for i in 0 1 2; do
	PG_DIR=${DIRS[$i]} PG_PORT=${PORTS[$i]} t_db
	make_aggregates
	printf '[database s%d]\nurl = %s\n\n' "$i" "$(url "$i")" >>"$CONF"
done
OUT=$T_TMP/all
: >"$OUT"
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
cat >> $OUT
SH
chmod +x "$T_TMP/sink.sh"
declare -a relay
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --config "$CONF" --mode ordered \
		--sink exec --exec "$T_TMP/sink.sh" --batch 50 --heartbeat 200ms \
		--name "r$1" 2>>"$T_TMP/relay$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
for i in 0 1 2; do launch $i; done
# Each shard's leases: sessions holding one, and distinct shards held.
leases() {
	psql -XAtq "$(url "$1")" -c "SELECT count(*) || ' ' || count(DISTINCT objid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND classid = pgoutbox.lease_ns('outbox')::oid AND objid::bigint < 4096
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
}
PRODUCERS=()
for i in 0 1 2; do DATABASE_URL=$(url "$i") start_producer "$SECS" 0.002; done
kills=0 samples=0
end=$((SECONDS + SECS))
while [ $SECONDS -lt $end ]; do
	sleep 2
	i=$((kills % 3))
	kill -9 "${relay[$i]}" 2>/dev/null || true
	wait "${relay[$i]}" 2>/dev/null || true
	kills=$((kills + 1))
	launch "$i"
	for s in 0 1 2; do
		read -r held distinct <<<"$(leases "$s")"
		[ "$held" = "$distinct" ] || fail "shard s$s: $held leases held for $distinct shards"
		samples=$((samples + 1))
	done
done
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed: $(cat "$T_TMP"/producer.*.log)"; done
for i in 0 1 2; do
	DATABASE_URL=$(url "$i") wait_until 90 '[ "$(pending)" = 0 ]'
done
# The last relay killed: its shards are taken over once its lease has
# timed out, then every shard is held, each once.
for i in 0 1 2; do
	shards=$(psql -XAtq "$(url "$i")" -c "SELECT shards FROM pgoutbox.queues WHERE name = 'outbox'")
	wait_until 30 '[ "$(leases "$i")" = "$shards $shards" ]'
done
for i in 0 1 2; do stop_relay "${relay[$i]}"; done
grep -q 'relay outbox@s1 -> exec' "$T_TMP/relay0.log" || fail "no log line names database s1"
total=0
for i in 0 1 2; do
	grep "\"pgoutbox-source\": \"s$i\"}" "$OUT" >"$OUT.s$i" || true
	python3 "$(dirname "$0")/../order_check.py" "$OUT.s$i" "$(url "$i")" >"$T_TMP/check$i" ||
		{ cat "$T_TMP/check$i"; fail "order check of shard s$i"; }
	note "s$i: $(head -1 "$T_TMP/check$i")"
	total=$((total + $(wc -l <"$OUT.s$i")))
done
[ "$total" = "$(wc -l <"$OUT")" ] || fail "$(($(wc -l <"$OUT") - total)) deliveries name no shard"
note "$kills kill -9 in ${SECS}s; $samples lease samples, each shard held once at most"
