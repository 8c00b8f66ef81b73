# An adopted Debezium outbox (uuid ids: adopt adds the bigint event id
# column and the shard column) relayed in ordered mode by three relays
# that are killed (kill -9) and started again at random for
# ${CHAOS_SECONDS:-15} s while producers write, serialized per aggregate as
# aggregate code does, by plain SQL.  Every event arrives, per key the
# first deliveries follow commit order with no gap (tests/order_check.py),
# and every row is deleted.  Then two strict relays drain a second burst
# in one global order.  (CHAOS_MODE=concurrent shows the order check
# failing: SKIP LOCKED has no order.)
. "$(dirname "$0")/../lib.sh"
t_db
SECS=${CHAOS_SECONDS:-15}
RANDOM=${SEED:-11}
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 100) i;
CREATE TABLE outbox (
  id            uuid         NOT NULL PRIMARY KEY,
  aggregatetype varchar(255) NOT NULL,
  aggregateid   varchar(255) NOT NULL,
  type          varchar(255) NOT NULL,
  payload       jsonb
);
CREATE PROCEDURE produce(seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v int;
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        k := 'k' || (1 + floor(random() * 100))::int;
        UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
        INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
        VALUES (gen_random_uuid(), 'agg', k, 'agg.changed', jsonb_build_object('v', v));
        COMMIT;
        PERFORM pg_sleep(0.001);
    END LOOP;
END $$;
-- A backlog before adopt.
CALL produce(1);
SQL
"$PGO_BIN" adopt public.outbox --name agg_events >"$T_TMP/adopt" 2>&1 || fail "adopt: $(cat "$T_TMP/adopt")"
OUT=$T_TMP/all
: >"$OUT"
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
sleep 0.0\$(( \$\$ % 5 ))
cat >> $OUT
SH
chmod +x "$T_TMP/sink.sh"
declare -a relay
launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --queue agg_events --mode "${CHAOS_MODE:-ordered}" --sink exec \
		--exec "$T_TMP/sink.sh" --batch 50 --heartbeat 200ms --name "r$1" \
		2>>"$T_TMP/relay$1.log" &
	relay[$1]=$!
	PIDS+=("$!")
}
for i in 0 1 2; do launch $i; done
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce($SECS)" >/dev/null 2>"$T_TMP/producer1.log" &
p1=$!
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce($SECS)" >/dev/null 2>"$T_TMP/producer2.log" &
p2=$!
PIDS+=("$p1" "$p2")
kills=0
end=$((SECONDS + SECS))
while [ $SECONDS -lt $end ]; do
	sleep "0.$((RANDOM % 9 + 5))"
	i=$((RANDOM % 3))
	kill -9 "${relay[$i]}" 2>/dev/null || true
	wait "${relay[$i]}" 2>/dev/null || true
	kills=$((kills + 1))
	launch "$i"
done
wait "$p1" || fail "producer: $(cat "$T_TMP/producer1.log")"
wait "$p2" || fail "producer: $(cat "$T_TMP/producer2.log")"
wait_until 60 '[ "$(q "SELECT count(*) FROM outbox")" = 0 ]'
for i in 0 1 2; do stop_relay "${relay[$i]}"; done
note "$kills kill -9 in ${SECS}s; events committed: $(q 'SELECT sum(version) FROM agg')"
python3 "$(dirname "$0")/../order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$(head -1 "$T_TMP/check")"
[ "$(q "SELECT count(*) FROM pgoutbox.adopted_state")" = 0 ] || fail "state rows left: $(q 'SELECT * FROM pgoutbox.adopted_state')"
grep -h -E 'ERROR' "$T_TMP"/relay*.log && fail "a relay logged an error"
# Strict mode: one leader, every event in event id order.
: >"$OUT.strict"
cat >"$T_TMP/strict.sh" <<SH
#!/bin/sh
cat >> $OUT.strict
SH
chmod +x "$T_TMP/strict.sh"
for i in 0 1; do
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay --queue agg_events --mode strict --sink exec \
		--exec "$T_TMP/strict.sh" --batch 20 --heartbeat 200ms --name "s$i" 2>>"$T_TMP/strict$i.log" &
	strict[$i]=$!
	PIDS+=("$!")
done
q "CALL produce(2)"
wait_until 30 '[ "$(q "SELECT count(*) FROM outbox")" = 0 ]'
for i in 0 1; do stop_relay "${strict[$i]}"; done
ids_of "$OUT.strict" >"$T_TMP/strict.ids"
[ -s "$T_TMP/strict.ids" ] || fail "strict: nothing delivered"
sort -n -c "$T_TMP/strict.ids" || fail "strict: events out of event id order"
[ -z "$(uniq -d "$T_TMP/strict.ids")" ] || fail "strict: duplicates without a crash"
note "strict: $(wc -l <"$T_TMP/strict.ids") events in one order by two relays"
true
