# A Kafka client no one here wrote reads what the kafka sink published:
# a kafkajs consumer group (tests/kafkajs, npm) against the mock cluster
# gets every event once with its exact key, value and headers (id, type,
# topic, created_at, traceparent), keyed ones on murmur2's partition.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../kafka.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NODE_DIR=$ROOT/tests/kafkajs
trap 'cleanup_pids; kafka_stop' EXIT
command -v node >/dev/null || fail "node not found (needed for kafkajs)"
if [ ! -f "$NODE_DIR/node_modules/kafkajs/package.json" ] ||
	[ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
	note "installing kafkajs with npm ci in tests/kafkajs"
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
		npm ci --no-audit --no-fund --loglevel=error) >"$T_TMP/npm.log" 2>&1 ||
		{ cat "$T_TMP/npm.log" >&2; fail "npm ci in tests/kafkajs failed"; }
fi
kafka_start "$T_TMP/kafka"
t_db
N=300
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
   SELECT 'js', CASE WHEN i % 7 = 0 THEN NULL ELSE 'order-' || (i % 23) END, 'order.created',
          jsonb_build_object('i', i, 's', 'ünïcödé \"q\"'),
          jsonb_build_object('traceparent', '00-' || md5(i::text) || '-00f067aa0ba902b7-01')
   FROM generate_series(1, $N) i"
q "CREATE TABLE expected AS SELECT id, topic, key, type, payload, headers,
   replace((created_at AT TIME ZONE 'UTC')::text, ' ', 'T') || 'Z' AS created_at FROM pgoutbox.outbox"
psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
start_relay "$T_TMP/relay" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-topic 'outbox.event.{topic}'
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
node "$NODE_DIR/consume.js" "$KAFKA_BROKERS" outbox.event.js "$N" >"$T_TMP/js.jsonl" 2>"$T_TMP/js.log" ||
	fail "the kafkajs consumer failed: $(tail -n 5 "$T_TMP/js.log")"
python3 "$(dirname "$0")/../kafka_check.py" "$T_TMP/expected.json" plain 4 outbox.event. "$T_TMP/js.jsonl" >&2 ||
	fail "kafkajs read messages that differ from the events (see above)"
