# The kafka sink against librdkafka's mock cluster (three brokers, over
# TCP), read back with kcat: every event arrives once with its exact key
# (none for a NULL key), value and headers (id, type, topic, created_at and
# the event's own traceparent, tracestate, ...), on the partition the Java
# client's murmur2 picks; the topic template routes by {topic}; then the
# same in the CloudEvents binary mode; then the first batch of a new topic
# is not held by librdkafka's once-a-second topic scan.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../kafka.sh"
trap 'cleanup_pids; kafka_stop' EXIT
kafka_start "$T_TMP/kafka"
note "mock cluster at $KAFKA_BROKERS"
t_db
N=1000
send_events() {
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
	   SELECT CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END,
	          CASE WHEN i % 5 = 0 THEN NULL ELSE 'k' || (i % 17) END,
	          CASE WHEN i % 2 = 0 THEN 'order.created' ELSE 'user.renamed' END,
	          jsonb_build_object('i', i, 'text', 'quote \" and
newline, ünïcödé ✓'),
	          CASE WHEN i % 2 = 0 THEN '{}'
	               ELSE jsonb_build_object('traceparent', '00-' || md5(i::text) || '-00f067aa0ba902b7-01',
	                                       'tracestate', 'congo=t61rcWkgMzE', 'n', i) END
	   FROM generate_series(1, $N) i"
	q "DROP TABLE IF EXISTS expected"
	q "CREATE TABLE expected AS SELECT id, topic, key, type, payload, headers,
	   replace((created_at AT TIME ZONE 'UTC')::text, ' ', 'T') || 'Z' AS created_at
	   FROM pgoutbox.outbox"
	psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
}

# 1. plain: what Debezium's outbox router consumers read.
send_events
start_relay "$T_TMP/relay" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-topic 'pgo.{topic}' --batch 200
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters: $(q 'SELECT last_error FROM pgoutbox.dead_letters LIMIT 1')"
kcat_dump pgo.orders >"$T_TMP/orders.jsonl"
kcat_dump pgo.users >"$T_TMP/users.jsonl"
note "kcat read $(cat "$T_TMP"/orders.jsonl "$T_TMP"/users.jsonl | wc -l) messages"
python3 "$(dirname "$0")/../kafka_check.py" "$T_TMP/expected.json" plain 4 pgo. "$T_TMP/orders.jsonl" "$T_TMP/users.jsonl" >&2 ||
	fail "the messages differ from the events (see above)"

# 2. CloudEvents binary mode, topic per type.
send_events
start_relay "$T_TMP/relay_ce" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-topic 'ce.{queue}.{topic}' --kafka-format cloudevents
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
kcat_dump ce.outbox.orders >"$T_TMP/ce_orders.jsonl"
kcat_dump ce.outbox.users >"$T_TMP/ce_users.jsonl"
python3 "$(dirname "$0")/../kafka_check.py" "$T_TMP/expected.json" cloudevents 4 ce.outbox. "$T_TMP/ce_orders.jsonl" "$T_TMP/ce_users.jsonl" >&2 ||
	fail "the CloudEvents messages differ from the events (see above)"

# 3. A topic first met in a batch is asked for at once (rd_kafka_topic_new),
# not after librdkafka's topic scan, which runs once a second: five events
# on five new topics, one at a time, each batch done well under the scan's
# period (without the handle, one in 0.3^5 runs passes by chance).
start_relay "$T_TMP/relay_new" --sink kafka --kafka-brokers "$KAFKA_BROKERS" --kafka-topic 'new.{topic}' --log-level debug
wait_until 30 'grep -q "sink kafka: connected\|cycle of 0 events" "$T_TMP/relay_new.log"'
for i in 1 2 3 4 5; do
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) VALUES ('t$i', 'k', 'x', '{}')"
	wait_until 30 '[ "$(pending)" = 0 ]'
done
stop_relay "$RELAY_PID"
grep "sink kafka: batch of 1 done in" "$T_TMP/relay_new.log" >"$T_TMP/new_batches" || true
[ "$(wc -l <"$T_TMP/new_batches")" = 5 ] || fail "$(wc -l <"$T_TMP/new_batches") batches of one event logged, 5 expected"
note "first batches of new topics: $(sed 's/.*done in //' "$T_TMP/new_batches" | tr '\n' ' ')"
awk '{ if ($(NF - 1) + 0 >= 300) bad++ } END { exit bad > 0 }' "$T_TMP/new_batches" ||
	fail "a new topic's first batch waited for librdkafka's topic scan: $(tr '\n' ' ' <"$T_TMP/new_batches")"
for i in 1 2 3 4 5; do
	[ "$(kcat_count new.t$i)" = 1 ] || fail "new.t$i holds $(kcat_count new.t$i) messages, 1 expected"
done
