# Redis goes away under a running relay: the events stay in the outbox
# (nothing is buffered in the relay), none is lost, and they are delivered
# once Redis is back.  Four ways: a clean stop, a kill -9 in the middle of
# a drain (AOF with appendfsync always keeps every acknowledged XADD), a
# stop while batches wait for Redis (sink.redis_wait) instead of failing,
# and SIGTERM to the relay while Redis is stopped (SIGSTOP) with replies
# awaited.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; [ -z "${REDIS_PID:-}" ] || kill -CONT "$REDIS_PID" 2>/dev/null; redis_stop' EXIT
redis_start "$T_TMP/redis"
t_db
# Short backoffs keep the test quick.
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=1s PGOUTBOX_RELAY_MAX_ATTEMPTS=1000

# The distinct event ids in a stream, and how many entries it has.
stream_ids() { rcli --json XRANGE "$1" - + | python3 -c '
import json, sys
for _, f in json.load(sys.stdin):
    print(dict(zip(f[0::2], f[1::2]))["id"])'; }
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT '$1', 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i"; }

# 1. A clean stop while events keep coming.
start_relay "$T_TMP/relay" --sink redis --redis "$REDIS_URL" --poll-interval 500ms
relay=$RELAY_PID
send_n a 500
wait_until 30 '[ "$(rcli XLEN pgoutbox:a)" = 500 ]'
redis_stop
for _ in $(seq 30); do send_n a 10; sleep 0.05; done
sleep 1
kill -0 "$relay" || fail "the relay exited when Redis went away"
[ "$(pending)" = 300 ] || fail "expected the 300 events written during the outage in the outbox, found $(pending)"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters during the outage"
grep -q 'cannot reach\|lost 127.0.0.1' "$T_TMP/relay.log" || fail "the outage is not in the relay log"
note "Redis down: $(pending) events wait in the outbox, max attempts $(q 'SELECT max(attempts) FROM pgoutbox.outbox')"
redis_start_again
wait_until 30 '[ "$(pending)" = 0 ]'
ids=$(stream_ids pgoutbox:a | sort -n | uniq | wc -l)
[ "$ids" = 800 ] || fail "expected 800 distinct events in the stream, found $ids"
note "after the outage: 800 of 800 events, $(rcli XLEN pgoutbox:a) entries"

# 2. kill -9 of Redis in the middle of a drain.
send_n b 20000
wait_until 30 '[ "$(rcli XLEN pgoutbox:b)" -gt 3000 ]'
redis_kill9
sleep 0.5
left=$(pending)
[ "$left" -gt 0 ] || fail "the drain finished before the kill: nothing tested"
redis_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
ids=$(stream_ids pgoutbox:b | sort -n | uniq | wc -l)
entries=$(rcli XLEN pgoutbox:b)
[ "$ids" = 20000 ] || fail "lost events: $ids of 20000 in the stream after kill -9 of Redis"
note "kill -9 of Redis with $left pending: 20000 of 20000 delivered, $((entries - ids)) duplicates"
kill -0 "$relay" || fail "the relay exited"
stop_relay "$relay"

# 3. sink.redis_wait: batches wait for Redis instead of failing, so no
# attempt is counted and the events leave in their order.
start_relay "$T_TMP/relay_wait" --sink redis --redis "$REDIS_URL" --redis-wait 20s --poll-interval 500ms
relay=$RELAY_PID
send_n c 10
wait_until 30 '[ "$(rcli XLEN pgoutbox:c)" = 10 ]'
redis_stop
for i in $(seq 20); do q "SELECT pgoutbox.send('c', 'k', 'x', '{\"seq\": $i}')" >/dev/null; sleep 0.05; done
sleep 1
[ "$(pending)" = 20 ] || fail "expected 20 events waiting, found $(pending)"
redis_start_again
wait_until 30 '[ "$(pending)" = 0 ]'
grep -q 'to retry' "$T_TMP/relay_wait.log" && fail "with redis_wait a batch was failed and retried"
seqs=$(rcli --json XRANGE pgoutbox:c - + | python3 -c '
import json, sys
entries = [dict(zip(f[0::2], f[1::2])) for _, f in json.load(sys.stdin)]
print(" ".join(str(json.loads(e["payload"])["seq"]) for e in entries if e["key"] == "k"))')
[ "$seqs" = "$(seq -s ' ' 20)" ] || fail "order after the outage with redis_wait: $seqs"
stop_relay "$relay"
note "redis_wait: 20 events held through the outage, sent in order, no retries"

# 4. SIGTERM while XADD replies are awaited (Redis stopped with SIGSTOP,
# its socket holding the commands unread): the relay gives the batch back
# at its drain deadline and exits 0, no attempt spent; the next relay
# delivers it once Redis answers again.
PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/relay_stall" --sink redis --redis "$REDIS_URL" --redis-timeout 20s --poll-interval 500ms
relay=$RELAY_PID
send_n d 10
wait_until 30 '[ "$(rcli XLEN pgoutbox:d)" = 10 ]'
kill -STOP "$REDIS_PID"
send_n d 100
wait_until 20 '[ "$(unread "$REDIS_PORT")" -gt 0 ]'
stop_relay "$relay"
kill -CONT "$REDIS_PID"
[ "$(pending)" = 100 ] || fail "expected the 100 events back in the outbox, found $(pending)"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "a stop with replies awaited spent attempts"
start_relay "$T_TMP/relay_after" --sink redis --redis "$REDIS_URL" --poll-interval 500ms
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
ids=$(stream_ids pgoutbox:d | sort -n | uniq | wc -l)
[ "$ids" = 110 ] || fail "expected 110 distinct events in the stream, found $ids"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters after a stop with replies awaited"
note "SIGTERM with replies awaited and Redis stopped: exit 0, 100 back untouched, then 110 of 110 events, $(rcli XLEN pgoutbox:d) entries"
