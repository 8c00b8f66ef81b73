# Events Kafka refuses for their own sake are dead-lettered with the error
# librdkafka reports: a message larger than message.max.bytes (set through
# sink.kafka_conf) and a topic the cluster does not know; the events around
# them are delivered.  Then bad configuration: an unknown librdkafka
# property, a bad template and a timeout that does not fit the claim
# transaction exit 2 with a clear error; unreachable brokers at start are an
# outage (logged, nothing spent), not a crash.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../kafka.sh"
trap 'cleanup_pids; kafka_stop' EXIT
kafka_start "$T_TMP/kafka"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=200ms
kafka_cmd topic_error missing UNKNOWN_TOPIC_OR_PART
q "SELECT pgoutbox.send('ok', 'a', 'x', '{\"n\": 1}')" >/dev/null
big=$(q "SELECT pgoutbox.send('ok', 'b', 'x', jsonb_build_object('blob', repeat('x', 20000)))")
q "SELECT pgoutbox.send('ok', 'c', 'x', '{\"n\": 2}')" >/dev/null
lost=$(q "SELECT pgoutbox.send('missing', 'd', 'x', '{\"n\": 3}')")
q "SELECT pgoutbox.send('ok', 'e', 'x', '{\"n\": 4}')" >/dev/null
start_relay "$T_TMP/relay" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-timeout 5s \
	--kafka-conf 'message.max.bytes=10000; topic.metadata.propagation.max.ms=500'
wait_until 40 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 2 ] || fail "expected 2 dead letters: $(q 'SELECT id, last_error FROM pgoutbox.dead_letters')"
err=$(q "SELECT last_error FROM pgoutbox.dead_letters WHERE id = $big")
[[ "$err" == *MSG_SIZE_TOO_LARGE* ]] || fail "the large event's error: $err"
note "too large: $err"
err=$(q "SELECT last_error FROM pgoutbox.dead_letters WHERE id = $lost")
[[ "$err" == *UNKNOWN_TOPIC* ]] || fail "the unknown topic's error: $err"
note "unknown topic: $err"
[ "$(kcat_count ok)" = 3 ] || fail "expected the 3 other events in topic ok, found $(kcat_count ok)"

# Bad configuration: exit 2 and a message naming what is wrong.
bad() {
	local want=$1; shift
	local rc=0
	"$PGO_BIN" relay --sink kafka --kafka-brokers "$KAFKA_BROKERS" "$@" >/dev/null 2>"$T_TMP/bad.log" || rc=$?
	[ "$rc" = 2 ] || fail "relay $* exited $rc, want 2: $(cat "$T_TMP/bad.log")"
	grep -q -- "$want" "$T_TMP/bad.log" || fail "relay $*: no \"$want\" in: $(cat "$T_TMP/bad.log")"
	note "$(grep -m1 -- "$want" "$T_TMP/bad.log")"
}
bad 'no.such.property' --kafka-conf 'no.such.property=1'
bad 'sink.kafka_topic' --kafka-topic 'x.{nope}'
bad 'idle_tx_timeout' --kafka-timeout 2m
bad 'avro' --kafka-format avro
rc=0
PGOUTBOX_RELAY_SINK=kafka PGOUTBOX_SINK_KAFKA_CONF=linger.ms=often "$PGO_BIN" config check >/dev/null 2>"$T_TMP/check.log" || rc=$?
[ "$rc" = 2 ] || fail "config check of a bad librdkafka value exited $rc: $(cat "$T_TMP/check.log")"
grep -q 'linger.ms' "$T_TMP/check.log" || fail "config check: $(cat "$T_TMP/check.log")"
# Secrets in sink.kafka_conf are masked.
PGOUTBOX_RELAY_SINK=kafka PGOUTBOX_SINK_KAFKA_CONF=sasl.password=s3cr3t "$PGO_BIN" config show >"$T_TMP/show" 2>&1 || true
grep -q s3cr3t "$T_TMP/show" && fail "config show prints sink.kafka_conf's password"

# Unreachable brokers at start: an outage, logged; nothing spent.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
q "SELECT pgoutbox.send('ok', 'z', 'x', '{}')" >/dev/null
start_relay "$T_TMP/relay_down" --sink kafka --kafka-brokers "127.0.0.1:$port" --kafka-timeout 1s
wait_until 20 'grep -q "sink down\|sink unavailable" "$T_TMP/relay_down.log"'
grep "127.0.0.1:$port" "$T_TMP/relay_down.log" | head -n 1 >&2
kill -0 "$RELAY_PID" || fail "the relay exited on unreachable brokers"
[ "$(pending)" = 1 ] && [ "$(q 'SELECT attempts FROM pgoutbox.outbox')" = 0 ] || fail "unreachable brokers spent an attempt"
stop_relay "$RELAY_PID"
