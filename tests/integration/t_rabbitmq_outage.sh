# RabbitMQ and the relay fail under a drain into a durable queue with
# persistent messages, and nothing is lost: a clean broker restart, a
# kill -9 of the broker, a kill -9 of the relay in the middle of a
# batch, and SIGTERM to the relay with the broker stopped (SIGSTOP), with
# confirms awaited, with nothing in flight and during the login.  Every event arrives (counted with amqplib); the duplicates that
# at-least-once allows carry the same message_id and the same body.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../rabbitmq.sh"
. "$(dirname "$0")/../rabbitmq_defs.sh"
trap 'cleanup_pids; [ -z "${RABBIT_PID:-}" ] || kill -CONT "$RABBIT_PID" 2>/dev/null; rabbit_kill9' EXIT
amqplib_ready
rabbit_defs "$T_TMP/defs.json"
rabbit_start "$T_TMP/rabbit" "$T_TMP/defs.json"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=500ms PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
RELAY_ARGS=(--sink rabbitmq --amqp-url "$RABBIT_URL" --amqp-exchange pgo --poll-interval 500ms --batch 500 --mode concurrent)
N=12000
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', '$1', jsonb_build_object('phase', '$1', 'i', i) FROM generate_series(1, ${2:-$N}) i"; }

start_relay "$T_TMP/relay" "${RELAY_ARGS[@]}"
relay=$RELAY_PID

# 1. A clean restart of the broker during a drain.
send_n restart
wait_until 60 '[ "$(pending)" -lt $((N - 1000)) ]'
rabbit_stop
left=$(pending)
[ "$left" -gt 0 ] || fail "restart: the drain finished before the stop: nothing tested"
kill -0 "$relay" || fail "the relay exited when RabbitMQ stopped"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "restart: attempts spent while RabbitMQ was down"
rabbit_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
note "1: broker restarted with $left pending: drained after it came back"

# 2. kill -9 of the broker during a drain.
send_n kill9
wait_until 60 '[ "$(pending)" -lt $((N - 1000)) ]'
rabbit_kill9
left=$(pending)
[ "$left" -gt 0 ] || fail "kill -9: the drain finished before the kill: nothing tested"
rabbit_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
note "2: broker killed -9 with $left pending: drained after it came back"

# 3. kill -9 of the relay in the middle of a batch.
send_n relay9
wait_until 60 '[ "$(pending)" -lt $((N - 500)) ]'
kill -9 "$relay"
wait "$relay" 2>/dev/null || true
left=$(pending)
[ "$left" -gt 0 ] || fail "relay kill -9: the drain finished before the kill: nothing tested"
start_relay "$T_TMP/relay2" "${RELAY_ARGS[@]}"
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
note "3: relay killed -9 with $left pending: drained by a new relay"

# A relay with relay.drain_timeout 1 s (log NAME) that has published 10
# events of phase PHASE: RELAY_PID.
start_warm_relay() {
	PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/$1" "${RELAY_ARGS[@]}"
	send_n "$2" 10
	wait_until 30 '[ "$(pending)" = 0 ]'
}
# SIGTERM to relay PID with the broker stopped; TOOK: how long the stop
# took (ms), the broker resumed after it.
stop_with_broker_stopped() {
	local t0
	t0=$(date +%s%N)
	stop_relay "$1"
	TOOK=$((($(date +%s%N) - t0) / 1000000))
	kill -CONT "$RABBIT_PID"
}

# 4. SIGTERM while confirms are awaited (the broker stopped with SIGSTOP,
# its socket holding the publishes unread): the relay gives the batch
# back at its drain deadline and exits 0 without waiting out a close
# handshake the broker cannot answer; no attempt is spent.
start_warm_relay relay3 warm
relay=$RELAY_PID
kill -STOP "$RABBIT_PID"
send_n stall 100
wait_until 20 '[ "$(unread "$RABBIT_PORT")" -gt 0 ]'
stop_with_broker_stopped "$relay"
[ "$(pending)" = 100 ] || fail "stall: expected the 100 events back in the outbox, found $(pending)"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "stall: attempts spent on a stop with confirms awaited"
[ "$TOOK" -lt 3000 ] || fail "stall: the relay took $TOOK ms to stop with relay.drain_timeout 1 s"
start_relay "$T_TMP/relay4" "${RELAY_ARGS[@]}"
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
note "4: SIGTERM with confirms awaited and the broker stopped: exit 0 in $TOOK ms, the 100 events back, then drained by a new relay"

# 5. SIGTERM with nothing in flight and the broker stopped: the clean
# close (connection.close, whose close-ok cannot come) waits no longer
# than relay.drain_timeout, not sink.amqp_timeout (5 s).
start_warm_relay relay5 idle
relay=$RELAY_PID
kill -STOP "$RABBIT_PID"
stop_with_broker_stopped "$relay"
[ "$TOOK" -lt 3000 ] || fail "idle: the relay took $TOOK ms to stop with relay.drain_timeout 1 s"
note "5: SIGTERM with nothing in flight and the broker stopped: exit 0 in $TOOK ms"

# 6. SIGTERM while the relay logs in to a broker that took the TCP
# connection but answers nothing (stopped, its socket holding the
# protocol header): the login ends at once, not at
# sink.amqp_connect_timeout (5 s).
kill -STOP "$RABBIT_PID"
PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/relay6" "${RELAY_ARGS[@]}"
relay=$RELAY_PID
wait_until 20 '[ "$(unread "$RABBIT_PORT")" -gt 0 ]'
stop_with_broker_stopped "$relay"
[ "$TOOK" -lt 3000 ] || fail "login: the relay took $TOOK ms to stop with relay.drain_timeout 1 s"
note "6: SIGTERM during the login to a stopped broker: exit 0 in $TOOK ms"

amqp_drain q.orders >"$T_TMP/all.jsonl"
q "SELECT count(*) FROM pgoutbox.dead_letters" | qgrep -x 0 || fail "dead letters"
res=$(python3 - "$T_TMP/all.jsonl" "$N" <<'PY'

import json, sys
path, n = sys.argv[1], int(sys.argv[2])
by_id, total = {}, 0
for line in open(path):
    m = json.loads(line)
    total += 1
    body = m['body']
    if m['message_id'] in by_id and by_id[m['message_id']] != body:
        sys.exit(f'message_id {m["message_id"]}: two different bodies')
    by_id.setdefault(m['message_id'], body)
phases = {}
for body in by_id.values():
    b = json.loads(body)
    phases.setdefault(b['phase'], set()).add(b['i'])
for ph, want in (('restart', n), ('kill9', n), ('relay9', n), ('warm', 10), ('stall', 100), ('idle', 10)):
    got = len(phases.get(ph, ()))
    if got != want:
        sys.exit(f'{ph}: {got} of {want} events arrived')
print(f'{len(by_id)} events, {total} messages, {total - len(by_id)} duplicates (same message_id, same body)')
PY
) || fail "lost or inconsistent messages: $res"
note "$res"
