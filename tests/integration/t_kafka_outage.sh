# The kafka sink through broker trouble during a drain: injected produce
# errors (NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS)
# that librdkafka retries, then every broker of the mock cluster set down
# and up again, then SIGTERM in the middle of a drain, then SIGTERM with
# the cluster stopped (SIGSTOP) and reports awaited.  Nothing is lost,
# no attempt is spent and nothing is dead-lettered on an outage; kcat
# finds every event.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../kafka.sh"
trap 'cleanup_pids; [ -z "${KAFKA_PID:-}" ] || kill -CONT "$KAFKA_PID" 2>/dev/null; kafka_stop' EXIT
kafka_start "$T_TMP/kafka"
t_db
export PGOUTBOX_RELAY_RECONNECT_MAX=1s
send_n() { q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 'o', 'k' || (i % 50), 'x', jsonb_build_object('i', i) FROM generate_series(1, $1) i"; }
distinct_ids() { kcat_dump o | python3 -c '
import json, sys
ids = set()
for line in sys.stdin:
    h = json.loads(line)["headers"]
    ids.add(dict(zip(h[0::2], h[1::2]))["id"])
print(len(ids))'; }
# Per key (one partition each), in offset order, the first copy of each
# event comes in id order: the ordered relay keeps order across outages.
first_in_order() {
	kcat_dump o >"$T_TMP/dump.jsonl"
	python3 - "$T_TMP/dump.jsonl" <<'PY'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
msgs.sort(key=lambda m: (m['partition'], m['offset']))
seen, last, bad = set(), {}, []
for m in msgs:
    h = m['headers']
    i = int(dict(zip(h[0::2], h[1::2]))['id'])
    if i in seen:
        continue
    seen.add(i)
    k = m['key']
    if last.get(k, 0) > i:
        bad.append(f'key {k}: event {i} first arrived after event {last[k]}')
    last[k] = max(last.get(k, 0), i)
print(len(bad))
for b in bad[:5]:
    print(b, file=sys.stderr)
PY
}
# The topic holds all n events (duplicates aside), per key first
# deliveries in id order; what: after which trouble.
all_in_order() {
	local n=$1 what=$2 got
	got=$(distinct_ids)
	[ "$got" = "$n" ] || fail "lost events $what: $got of $n in the topic"
	[ "$(first_in_order)" = 0 ] || fail "per-key order broken $what"
}
# A new relay (log NAME) drains what is left of the outbox, then stops.
drain_rest() {
	start_relay "$T_TMP/$1" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-timeout 2s --batch 500
	wait_until 60 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
}
no_attempts() {
	[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters: $(q 'SELECT last_error FROM pgoutbox.dead_letters LIMIT 1')"
	[ "$(q 'SELECT coalesce(max(attempts), 0) FROM pgoutbox.outbox')" = 0 ] || fail "attempts spent: $(q 'SELECT max(attempts), max(last_error) FROM pgoutbox.outbox')"
}
kafka_cmd topic o 6

# 1. Injected errors: librdkafka retries them inside one claim.
#
# One produce request in flight per connection here, and only here: the
# mock cluster checks the sequence numbers of an idempotent producer only
# when it is transactional (rd_kafka_mock_validate_records() returns at
# once without a TransactionalId), so with several requests in flight it
# appends R2 after failing R1 with an injected error, where a broker
# refuses R2 (OUT_OF_ORDER_SEQUENCE_NUMBER) until R1 is in.  librdkafka
# then takes R1 as written ("implicitly acked by subsequent batch
# success", IMPLICITACK in its eos debug log) and reports it delivered:
# R1's events are missing from the mock's log, through no fault of the
# relay.  debug=eos shows that this did not happen in the run.
start_relay "$T_TMP/relay1" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-timeout 2s --batch 500 --log-level debug \
	--kafka-conf 'max.in.flight.requests.per.connection=1; debug=eos'
send_n 20000
for _ in 1 2 3 4 5; do
	kafka_cmd errors produce NOT_LEADER_FOR_PARTITION REQUEST_TIMED_OUT NOT_ENOUGH_REPLICAS NOT_ENOUGH_REPLICAS_AFTER_APPEND
	sleep 0.1
done
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
no_attempts
retried=$(grep -c 'drain before retrying' "$T_TMP/relay1.log" || true)
[ "$retried" -gt 0 ] || fail "no produce request met an injected error: nothing tested"
! grep -q IMPLICITACK "$T_TMP/relay1.log" || fail "librdkafka acked a batch implicitly: the mock's log cannot be trusted"
[ "$(distinct_ids)" = 20000 ] || fail "after injected errors: $(distinct_ids) of 20000 events in the topic"
note "injected produce errors: $retried partition retries, 20000 of 20000 delivered, $(kcat_count o) messages"

start_relay "$T_TMP/relay" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-timeout 2s --batch 500
relay=$RELAY_PID

# 2. Every broker down in the middle of a drain, then up again.
send_n 30000
wait_until 30 '[ "$(pending)" -lt 27000 ]'
kafka_cmd down 1
kafka_cmd down 2
kafka_cmd down 3
wait_until 30 'grep -q "sink unavailable\|sink down" "$T_TMP/relay.log"'
left=$(pending)
[ "$left" -gt 0 ] || fail "the drain finished before the brokers went down: nothing tested"
send_n 1000
wait_until 20 'grep -q "claiming paused\|claiming again" "$T_TMP/relay.log"'
kill -0 "$relay" || fail "the relay exited when the brokers went down"
no_attempts
note "brokers down: $(pending) events wait in the outbox, no attempt spent"
kafka_cmd up 1
kafka_cmd up 2
kafka_cmd up 3
wait_until 60 '[ "$(pending)" = 0 ]'
no_attempts
all_in_order 51000 "across the outage"
note "after the outage: 51000 of 51000 delivered in per-key order, $(( $(kcat_count o) - 51000 )) duplicates"

# 3. SIGTERM in the middle of a drain: the batches in flight get their
# delivery reports and commit, the relay exits 0, the next one finishes.
send_n 30000
wait_until 30 '[ "$(pending)" -lt 28000 ]'
stop_relay "$relay"
left=$(pending)
no_attempts
drain_rest relay2
all_in_order 81000 "across SIGTERM"
note "SIGTERM with $left pending: exit 0, 81000 of 81000 delivered in per-key order after a restart"

# 4. SIGTERM while delivery reports are awaited (the mock cluster stopped
# with SIGSTOP, its sockets holding the produce requests unread): the
# relay gives the batch back at its drain deadline and exits 0, with no
# attempt spent; the next relay delivers it once the cluster answers.
PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/relay3" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-timeout 30s --batch 500
relay=$RELAY_PID
send_n 10
wait_until 20 '[ "$(pending)" = 0 ]'
kill -STOP "$KAFKA_PID"
send_n 100
ports=$(echo "$KAFKA_BROKERS" | tr ',' '\n' | sed 's/.*://' | tr '\n' ' ')
wait_until 20 '[ "$(unread $ports)" -gt 0 ]'
stop_relay "$relay"
kill -CONT "$KAFKA_PID"
[ "$(pending)" = 100 ] || fail "expected the 100 events back in the outbox, found $(pending)"
no_attempts
drain_rest relay4
all_in_order 81110 "across a stop with reports awaited"
note "SIGTERM with delivery reports awaited: the batch rolled back at the drain deadline, exit 0, then 81110 of 81110 delivered"
